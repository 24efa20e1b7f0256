// Implements: tests of CRC32C (published test vectors), TFRecord framing, the event writer read
// back by our parser, and the metrics JSONL log.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/crc32c.h"
#include "detseg/io/metrics_jsonl.h"
#include "detseg/io/tfevents.h"

namespace detseg {
namespace {
namespace fs = std::filesystem;

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) appendix B.4 and the usual check value.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up(32, 0), down(32, 0);
  for (int i = 0; i < 32; ++i) up[i] = static_cast<char>(i), down[i] = static_cast<char>(31 - i);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(""), 0u);
  // Incremental == one shot, across the 8-byte fast path and the tail.
  const std::string text = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(crc32c_extend(crc32c(text.substr(0, 13)), text.data() + 13, text.size() - 13),
            crc32c(text));
  EXPECT_EQ(crc32c_unmask(crc32c_mask(0x12345678u)), 0x12345678u);
  // mask(c) = rotr(c, 15) + 0xa282ead8: rotr(0xE3069283, 15) = 0x2507C60D.
  EXPECT_EQ(crc32c_mask(0xE3069283u), 0x2507C60Du + 0xa282ead8u);
}

TEST(TfEvents, ScalarEventBytesByHand) {
  // wall_time 1.0 (field 1, fixed64), step 3 (field 2, varint), summary (field 5) holding one
  // value (field 1) with tag "a" (field 1) and simple_value 2.0f (field 2, fixed32).
  const std::string e = encode_scalar_event(1.0, 3, "a", 2.0f);
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9) +
                               std::string("\x10\x03", 2) +
                               std::string(
                                   "\x2a\x0a\x0a\x08\x0a\x01"
                                   "a"
                                   "\x15\x00\x00\x00\x40",
                                   12);
  EXPECT_EQ(e, expected);
  const std::string rec = frame_tfrecord(e);
  ASSERT_EQ(rec.size(), e.size() + 16);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), e.size());
}

TEST(TfEvents, WriteAndReadBack) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_events_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path;
  {
    EventWriter w((dir / "train").string());
    w.add_scalar("loss/total", 1.25, 10, 1000.5);
    w.add_scalar("learning_rate", 0.08, 10, 1000.5);
    w.add_scalar("loss/total", 0.5, 20);
    w.add_scalar("grad_norm", -3.0, -1);
    path = w.path();
    EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  }
  auto events = read_scalar_events(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].tag, "loss/total");
  EXPECT_EQ(events[0].step, 10);
  EXPECT_EQ(events[0].value, 1.25f);
  EXPECT_EQ(events[0].wall_time, 1000.5);
  EXPECT_EQ(events[1].value, 0.08f);
  EXPECT_EQ(events[2].step, 20);
  EXPECT_GT(events[2].wall_time, 1.6e9);
  EXPECT_EQ(events[3].step, -1);
  EXPECT_EQ(events[3].value, -3.f);
  // A half-written last record is ignored; a flipped byte is an error.
  std::string bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() - 5));
  EXPECT_EQ(read_scalar_events(path).size(), 3u);
  bytes[bytes.size() - 8] ^= 0x20;
  write_file_atomic(path, bytes);
  EXPECT_THROW(read_scalar_events(path), Error);
  fs::remove_all(dir);
}

TEST(MetricsJsonl, WriteAndReadBack) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_jsonl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  {
    MetricsJsonlWriter w(path);
    w.write({10, 100.0, "train", {{"loss", 1.5}, {"lr", 0.08}}});
    w.write({20, 0, "eval", {{"AP", 0.25}, {"bad", std::nan("")}}});
    EXPECT_THROW(w.write({30, 1.0, "train", {{"step", 1.0}}}), Error);
  }
  const std::string text = read_file(path);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            R"({"step":10,"time":100.0,"split":"train","loss":1.5,"lr":0.08})");
  auto records = read_metrics_jsonl(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].values[1].first, "lr");
  EXPECT_EQ(records[0].values[1].second, 0.08);
  EXPECT_EQ(records[1].split, "eval");
  EXPECT_GT(records[1].time, 1.6e9);
  EXPECT_TRUE(std::isnan(records[1].values[1].second));
  {
    std::FILE* f = std::fopen(path.c_str(), "a");
    std::fputs("{not json\n", f);
    std::fclose(f);
  }
  try {
    read_metrics_jsonl(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:3"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace detseg
