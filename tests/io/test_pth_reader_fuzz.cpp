// Implements: regression tests for the .pth files the fuzzer found (fuzz/fuzz_pth.cpp; reproducers
// in fuzz/regressions/pth/): each is a clean Error, not a crash or a multi-gigabyte allocation.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/pth_reader.h"
#include "test_paths.h"

namespace detseg {
namespace {

std::string reproducer(const std::string& name) {
  return read_file(std::string(DETSEG_SOURCE_DIR) + "/fuzz/regressions/pth/" + name);
}

std::string error_of(const std::string& bytes) {
  try {
    parse_pth_bytes(bytes, "x.pth");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A pickle in a valid torch.save container, as fuzz_pth.cpp wraps its inputs.
std::string wrapped(const std::string& pickle) {
  std::string zip;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
      zip.append(static_cast<const char*>(p), n);
      return n;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    writer.writeEndOfFile();
  }
  return zip;
}

}  // namespace

// The central directory named ranges past the end of the bytes, and LibTorch's MemoryReadAdapter
// copied them anyway (SEGV).
TEST(PthReaderFuzz, DirectoryPastTheEndIsAnError) {
  EXPECT_NE(error_of(reproducer("zip_directory_past_the_end")).find("x.pth: "), std::string::npos);
}

// data.pkl claimed 4 GB uncompressed in a 1.3 kB file, and that much was allocated up front.
TEST(PthReaderFuzz, EntryClaimingMoreThanTheArchiveCanHoldIsAnError) {
  const std::string msg = error_of(reproducer("entry_claims_4_gb"));
  EXPECT_NE(msg.find("x.pth: zip entry 'data.pkl' claims 4261413535 bytes, more than a 1334-byte archive can hold"),
            std::string::npos) << msg;
}

// TUPLE2 after a MARK took the marked items; the mark was then above the stack and a later
// pop_to_mark copied a backwards range (std::length_error past every handler).
TEST(PthReaderFuzz, TupleCannotTakeMarkedItems) {
  std::string msg = error_of(wrapped(reproducer("tuple_takes_marked_items.pkl")));
  EXPECT_NE(msg.find("x.pth: "), std::string::npos) << msg;
  msg = error_of(wrapped(std::string("\x80\x02K\x01(\x86.", 7)));  // PROTO 2, 1, MARK, TUPLE2, STOP
  EXPECT_NE(msg.find("stack underflow in TUPLE"), std::string::npos) << msg;
}

}  // namespace detseg
