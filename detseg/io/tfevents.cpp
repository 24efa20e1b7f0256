// Implements: the event-file writer and reader declared in tfevents.h.
#include "detseg/io/tfevents.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/crc32c.h"
#include "detseg/io/metrics_jsonl.h"  // unix_time_now

namespace detseg {
namespace {

// ---- protobuf wire format, the few pieces an Event with scalar summaries needs
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_tag(std::string& out, int field, int wire) {
  put_varint(out, uint64_t(field) << 3 | wire);
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_tag(out, field, 1);
  put_fixed(out, bits, 8);
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);  // Event.wall_time
  if (step != 0) {
    put_tag(e, 2, 0);  // Event.step
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

// A message reader over one length-delimited buffer.
struct ProtoReader {
  const std::string& buf;
  size_t pos = 0;
  std::string what;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      DETSEG_CHECK(pos < buf.size(), what, ": truncated protobuf varint");
      const uint8_t b = static_cast<uint8_t>(buf[pos++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw Error(str(what, ": malformed protobuf varint"));
  }
  uint64_t fixed(int bytes) {
    DETSEG_CHECK(pos + bytes <= buf.size(), what, ": truncated protobuf field");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(buf[pos + i])) << (8 * i);
    pos += bytes;
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    DETSEG_CHECK(n <= buf.size() - pos, what, ": truncated protobuf bytes");
    std::string out = buf.substr(pos, n);
    pos += n;
    return out;
  }
  void skip(int wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      fixed(8);
    else if (wire == 2)
      bytes();
    else if (wire == 5)
      fixed(4);
    else
      throw Error(str(what, ": unsupported protobuf wire type ", wire));
  }
};

uint32_t read_u32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag,
                                float value) {
  std::string v;
  put_bytes(v, 1, tag);  // Summary.Value.tag
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  put_tag(v, 2, 5);  // Summary.Value.simple_value (fixed32)
  put_fixed(v, bits, 4);
  std::string summary;
  put_bytes(summary, 1, v);  // Summary.value
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);  // Event.summary
  return e;
}

std::string encode_pr_curve_event(double wall_time, int64_t step, const std::string& tag, const PrCurveData& data,
                                  const std::string& display_name, const std::string& description) {
  const size_t n = data.num_thresholds();
  DETSEG_CHECK(n >= 2, "PR curve ", tag, ": needs at least 2 thresholds, got ", n);
  const std::vector<float>* rows[6] = {&data.true_positives, &data.false_positives, &data.true_negatives,
                                       &data.false_negatives, &data.precision,      &data.recall};
  for (const auto* row : rows) DETSEG_CHECK(row->size() == n, "PR curve ", tag, ": rows of different lengths");
  std::string plugin_content;  // PrCurvePluginData: version 0 (the default, not written), num_thresholds
  put_tag(plugin_content, 2, 0);
  put_varint(plugin_content, n);
  std::string plugin_data;
  put_bytes(plugin_data, 1, "pr_curves");  // PluginData.plugin_name
  put_bytes(plugin_data, 2, plugin_content);
  std::string metadata;
  put_bytes(metadata, 1, plugin_data);  // SummaryMetadata.plugin_data
  put_bytes(metadata, 2, display_name.empty() ? tag : display_name);
  if (!description.empty()) put_bytes(metadata, 3, description);
  std::string shape;  // TensorShapeProto: dim {size: 6}, dim {size: n}
  for (uint64_t size : {uint64_t(6), uint64_t(n)}) {
    std::string dim;
    put_tag(dim, 1, 0);
    put_varint(dim, size);
    put_bytes(shape, 2, dim);
  }
  std::string content;  // little-endian float32, row-major
  content.reserve(6 * n * 4);
  for (const auto* row : rows)
    for (float v : *row) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      put_fixed(content, bits, 4);
    }
  std::string tensor;
  put_tag(tensor, 1, 0);  // TensorProto.dtype = DT_FLOAT
  put_varint(tensor, 1);
  put_bytes(tensor, 2, shape);
  put_bytes(tensor, 4, content);  // tensor_content
  std::string v;
  put_bytes(v, 1, tag);       // Summary.Value.tag
  put_bytes(v, 8, tensor);    // Summary.Value.tensor
  put_bytes(v, 9, metadata);  // Summary.Value.metadata
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string encode_file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");  // Event.file_version
  return e;
}

std::string frame_tfrecord(const std::string& payload) {
  std::string len;
  put_fixed(len, payload.size(), 8);
  std::string out = len;
  put_fixed(out, crc32c_mask(crc32c(len)), 4);
  out += payload;
  put_fixed(out, crc32c_mask(crc32c(payload)), 4);
  return out;
}

EventWriter::EventWriter(const std::string& dir) {
  make_directories(dir);
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const double now = unix_time_now();
  path_ = (std::filesystem::path(dir) /
           str("events.out.tfevents.", static_cast<int64_t>(now), ".", host, ".", ::getpid()))
              .string();
  file_ = std::fopen(path_.c_str(), "ab");
  DETSEG_CHECK(file_, path_, ": cannot open event file for writing: ", std::strerror(errno));
  write_record(encode_file_version_event(now));
  flush();
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::write_record(const std::string& payload) {
  const std::string rec = frame_tfrecord(payload);
  DETSEG_CHECK(std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(), path_,
               ": write failed: ", std::strerror(errno));
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  write_record(encode_scalar_event(wall_time < 0 ? unix_time_now() : wall_time, step, tag,
                                   static_cast<float>(value)));
}

void EventWriter::add_pr_curve(const std::string& tag, const PrCurveData& data, int64_t step,
                               const std::string& display_name, const std::string& description, double wall_time) {
  write_record(encode_pr_curve_event(wall_time < 0 ? unix_time_now() : wall_time, step, tag, data, display_name,
                                     description));
}

void EventWriter::flush() { std::fflush(file_); }

std::vector<ScalarEvent> read_scalar_events(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<ScalarEvent> out;
  size_t pos = 0;
  while (pos + 12 <= data.size()) {
    const std::string len_bytes = data.substr(pos, 8);
    DETSEG_CHECK(crc32c_mask(crc32c(len_bytes)) == read_u32(data, pos + 8), path,
                 ": event record at byte ", pos, " has a bad length CRC");
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= uint64_t(static_cast<uint8_t>(data[pos + i])) << (8 * i);
    if (len + 16 > data.size() - pos) break;  // last record still being written
    const std::string payload = data.substr(pos + 12, len);
    DETSEG_CHECK(crc32c_mask(crc32c(payload)) == read_u32(data, pos + 12 + len), path,
                 ": event record at byte ", pos, " has a bad data CRC");
    pos += 16 + len;

    ScalarEvent base;
    std::vector<std::pair<std::string, float>> values;
    ProtoReader ev{payload, 0, path};
    while (ev.pos < payload.size()) {
      const uint64_t key = ev.varint();
      const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      if (field == 1 && wire == 1) {
        const uint64_t bits = ev.fixed(8);
        std::memcpy(&base.wall_time, &bits, 8);
      } else if (field == 2 && wire == 0) {
        base.step = static_cast<int64_t>(ev.varint());
      } else if (field == 5 && wire == 2) {
        const std::string summary = ev.bytes();
        ProtoReader sr{summary, 0, path};
        while (sr.pos < summary.size()) {
          const uint64_t skey = sr.varint();
          if ((skey >> 3) != 1 || (skey & 7) != 2) {
            sr.skip(static_cast<int>(skey & 7));
            continue;
          }
          const std::string value = sr.bytes();
          ProtoReader vr{value, 0, path};
          std::string tag;
          bool has_simple = false;
          float simple = 0;
          while (vr.pos < value.size()) {
            const uint64_t vkey = vr.varint();
            if ((vkey >> 3) == 1 && (vkey & 7) == 2) {
              tag = vr.bytes();
            } else if ((vkey >> 3) == 2 && (vkey & 7) == 5) {
              const uint32_t bits = static_cast<uint32_t>(vr.fixed(4));
              std::memcpy(&simple, &bits, 4);
              has_simple = true;
            } else {
              vr.skip(static_cast<int>(vkey & 7));
            }
          }
          if (has_simple) values.emplace_back(tag, simple);
        }
      } else {
        ev.skip(wire);
      }
    }
    for (const auto& [tag, value] : values) out.push_back({base.wall_time, base.step, tag, value});
  }
  return out;
}

}  // namespace detseg
