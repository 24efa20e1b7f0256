// Implements: the torch-free half of image reading (see image_codec.h): libjpeg and libpng driven
// with handlers of our own, OpenCV for BMP and PNM, the EXIF orientation, label maps.
#include "detseg/data/image_codec.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <jerror.h>
#include <opencv2/imgcodecs.hpp>
#include <png.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <new>
#include <streambuf>
#include <unordered_set>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/data/readers/image_header.h"
#include "detseg/data/readers/seg_folder.h"

namespace detseg {
namespace {

bool is_jpeg(const std::string& bytes) {
  return bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
         static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF;
}

std::atomic<int64_t> g_max_image_pixels{kDefaultMaxImagePixels};

bool is_png(const std::string& b) { return b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0; }

std::string percent(int64_t part, int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return text;
}

// ---- JPEG: libjpeg with our own source, error and message handlers.
//
// libjpeg reports a file that stops early, or corrupt entropy data, as a warning it prints itself
// and decodes on, filling what is missing with grey. Here its warnings are counted and kept, never
// printed: decode_jpeg says in our words what was lost, and whether that is too much to use.

// libjpeg-turbo's own fuzz targets stop at 500 scans: a progressive file of thousands of tiny scans
// costs a full pass over the coefficients each (seconds), while real files have about 10.
constexpr int kMaxJpegScans = 500;

struct JpegJob {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_source_mgr source{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump;
  const std::string* bytes = nullptr;
  bool created = false;
  bool data_ended = false;           // libjpeg asked for bytes past the end and was given an end marker
  long ended_at_imcu_row = -1;       // the iMCU row being read when that happened
  long damaged_from_imcu_row = -1;   // the iMCU row of the first corrupt-data warning
  int64_t rows_per_imcu = 8;
  int warnings = 0;
  int first_warning_code = -1;
  char first_warning[JMSG_LENGTH_MAX] = {0};
  char error[JMSG_LENGTH_MAX] = {0};
  ~JpegJob() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegJob& job_of(j_common_ptr cinfo) { return *static_cast<JpegJob*>(cinfo->client_data); }

void jpeg_on_error(j_common_ptr cinfo) {
  JpegJob& job = job_of(cinfo);
  (*cinfo->err->format_message)(cinfo, job.error);
  std::longjmp(job.jump, 1);
}

// Warnings (level -1) are kept; trace messages (level >= 0) dropped. Nothing is printed.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  JpegJob& job = job_of(cinfo);
  const int code = cinfo->err->msg_code;
  if (job.warnings++ == 0) {
    job.first_warning_code = code;
    (*cinfo->err->format_message)(cinfo, job.first_warning);
  }
  const bool damage = code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE || code == JWRN_ARITH_BAD_CODE ||
                      code == JWRN_MUST_RESYNC;
  if (damage && job.damaged_from_imcu_row < 0)
    job.damaged_from_imcu_row = static_cast<long>(reinterpret_cast<j_decompress_ptr>(cinfo)->input_iMCU_row);
  cinfo->err->num_warnings++;
}

void jpeg_on_output(j_common_ptr) {}

void jpeg_on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number <= kMaxJpegScans) return;
  JpegJob& job = job_of(cinfo);
  std::snprintf(job.error, sizeof(job.error), "more than %d progressive scans", kMaxJpegScans);
  std::longjmp(job.jump, 1);
}

void jpeg_source_init(j_decompress_ptr) {}
void jpeg_source_term(j_decompress_ptr) {}

// Past the end of the bytes: an end-of-image marker, as libjpeg's own memory source does, so the
// decoder finishes with the rest grey. Remembered, with the row it happened at.
boolean jpeg_source_fill(j_decompress_ptr cinfo) {
  static const JOCTET kEnd[2] = {0xFF, JPEG_EOI};
  JpegJob& job = job_of(reinterpret_cast<j_common_ptr>(cinfo));
  if (!job.data_ended) {
    job.data_ended = true;
    job.ended_at_imcu_row = static_cast<long>(cinfo->input_iMCU_row);
  }
  cinfo->src->next_input_byte = kEnd;
  cinfo->src->bytes_in_buffer = 2;
  return TRUE;
}

void jpeg_source_skip(j_decompress_ptr cinfo, long count) {
  if (count <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (static_cast<unsigned long>(count) >= src->bytes_in_buffer) {
    jpeg_source_fill(cinfo);  // a segment longer than what is left: the data ends inside it
    return;
  }
  src->next_input_byte += count;
  src->bytes_in_buffer -= static_cast<size_t>(count);
}

// Decodes into `out` (8-bit BGR, or CMYK for 4-channel files). False: job.error says why. No C++
// object with a destructor is created in this frame after the setjmp (the longjmp skips them).
bool run_libjpeg(JpegJob& job, cv::Mat& out) {
  jpeg_decompress_struct& cinfo = job.cinfo;
  cinfo.err = jpeg_std_error(&job.err);
  job.err.error_exit = jpeg_on_error;
  job.err.emit_message = jpeg_on_message;
  job.err.output_message = jpeg_on_output;
  cinfo.client_data = &job;
  if (setjmp(job.jump)) return false;
  job.created = true;
  jpeg_create_decompress(&cinfo);
  job.source.init_source = jpeg_source_init;
  job.source.fill_input_buffer = jpeg_source_fill;
  job.source.skip_input_data = jpeg_source_skip;
  job.source.resync_to_restart = jpeg_resync_to_restart;
  job.source.term_source = jpeg_source_term;
  job.source.next_input_byte = reinterpret_cast<const JOCTET*>(job.bytes->data());
  job.source.bytes_in_buffer = job.bytes->size();
  cinfo.src = &job.source;
  job.progress.progress_monitor = jpeg_on_progress;
  cinfo.progress = &job.progress;
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int64_t>(cinfo.image_width) * static_cast<int64_t>(cinfo.image_height) > max_image_pixels()) {
    std::snprintf(job.error, sizeof(job.error), "its frame is %ux%u, above max_image_pixels", cinfo.image_width,
                  cinfo.image_height);
    return false;
  }
  // As OpenCV's decoder (grfmt_jpeg.cpp): BGR straight from libjpeg-turbo; 4-channel (CMYK/YCCK)
  // files as CMYK, converted below. The default (islow) DCT and fancy upsampling, as OpenCV and PIL.
  const bool four = cinfo.num_components == 4;
  cinfo.out_color_space = four ? JCS_CMYK : JCS_EXT_BGR;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  job.rows_per_imcu = static_cast<int64_t>(cinfo.max_v_samp_factor) * DCTSIZE;
  out.create(static_cast<int>(cinfo.output_height), static_cast<int>(cinfo.output_width), four ? CV_8UC4 : CV_8UC3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.ptr<JSAMPLE>(static_cast<int>(cinfo.output_scanline));
    if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
      std::snprintf(job.error, sizeof(job.error), "the decoder stopped at row %u", cinfo.output_scanline);
      return false;
    }
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

// OpenCV's CMYK -> BGR (icvCvt_CMYK2BGR_8u_C4C3R: Adobe's inverted CMYK), so pixels stay OpenCV's.
cv::Mat cmyk_to_bgr(const cv::Mat& cmyk) {
  cv::Mat bgr(cmyk.rows, cmyk.cols, CV_8UC3);
  for (int y = 0; y < cmyk.rows; ++y) {
    const uchar* in = cmyk.ptr<uchar>(y);
    uchar* out = bgr.ptr<uchar>(y);
    for (int x = 0; x < cmyk.cols; ++x, in += 4, out += 3) {
      const int k = in[3];
      out[2] = static_cast<uchar>(k - ((255 - in[0]) * k >> 8));
      out[1] = static_cast<uchar>(k - ((255 - in[1]) * k >> 8));
      out[0] = static_cast<uchar>(k - ((255 - in[2]) * k >> 8));
    }
  }
  return bgr;
}

cv::Mat decode_jpeg(const std::string& bytes, const std::string& name, std::string& warning, std::string& error) {
  JpegJob job;
  job.bytes = &bytes;
  cv::Mat out;
  if (!run_libjpeg(job, out)) {
    // Data that ran out explains whatever libjpeg then tripped over.
    error = job.data_ended ? str(name, ": cannot decode image (truncated JPEG: the file ends before its image data)")
                           : str(name, ": cannot decode image (corrupt JPEG: ", job.error, ")");
    return cv::Mat();
  }
  if (out.channels() == 4) out = cmyk_to_bgr(out);
  const int64_t height = out.rows;
  // Rows from the first damaged iMCU row on count as lost. Huffman decoding warns where its data
  // runs out; arithmetic decoding zero-fills without a word, so there the end of the data marks it.
  long from = job.damaged_from_imcu_row;
  if (job.cinfo.arith_code && job.data_ended && (from < 0 || job.ended_at_imcu_row < from)) from = job.ended_at_imcu_row;
  const int64_t good = from < 0 ? height : std::min<int64_t>(height, static_cast<int64_t>(from) * job.rows_per_imcu);
  const int64_t lost = height - good;
  if (lost > 0) {
    const std::string what = job.data_ended ? str("truncated JPEG: its data stops at row ", good, " of ", height)
                                            : str("corrupt JPEG data from row ", good, " of ", height, " on");
    if (static_cast<double>(lost) > kMaxLostJpegRows * static_cast<double>(height)) {
      error = str(name, ": cannot decode image (", what, ": ", percent(lost, height), " of its rows are missing, more than ",
                  kMaxLostJpegRows * 100, "%)");
      return cv::Mat();
    }
    warning = str(name, ": ", what, "; the ", lost, " rows below (", percent(lost, height),
                  ") are filled in grey, and the image is used");
  } else if (job.data_ended) {
    warning = str(name, ": JPEG ends without its end-of-image marker; every row was decoded, and the image is used");
  } else if (job.warnings > 0) {
    const std::string said = job.first_warning_code == JWRN_EXTRANEOUS_DATA ? std::string("stray bytes between its markers")
                                                                           : str("libjpeg: ", job.first_warning);
    warning = str(name, ": JPEG decoded with a warning (", said, "); the image is used");
  }
  return out;
}

// ---- PNG: libpng's classic API with our own error and warning handlers.

struct PngSource {
  const unsigned char* data;
  size_t size, offset;
};

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSource source{nullptr, 0, 0};
  std::vector<png_bytep> rows;
  bool rows_done = false;  // every row decoded: a failure after that (a missing IEND) only warns
  char error[200] = {0};
  char warning[200] = {0};
  int warnings = 0;
  ~PngJob() {
    if (png != nullptr) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

void read_png_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > source->size - source->offset) png_error(png, "the file ends early");
  std::memcpy(out, source->data + source->offset, n);
  source->offset += n;
}

void record_png_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->error, sizeof(job->error), "%s", message);
  png_longjmp(png, 1);
}

void record_png_warning(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  if (job->warnings++ == 0) std::snprintf(job->warning, sizeof(job->warning), "%s", message);
}

// The structs, our handlers, and every ancillary chunk but tRNS skipped unread: detseg uses no
// colour profile, gamma or text, and libpng's complaints about those (an sRGB profile it knows to
// be wrong, say) say nothing about the pixels. False when libpng could not even start.
bool start_png(PngJob& job, const std::string& bytes) {
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, record_png_error, record_png_warning);
  if (job.png == nullptr) return false;
  job.info = png_create_info_struct(job.png);
  if (job.info == nullptr) return false;
  job.source = PngSource{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0};
  return true;
}

// An image: 8-bit BGR, with OpenCV's transformations for IMREAD_COLOR (grfmt_png.cpp): 16-bit
// samples keep their high byte, alpha is dropped, palettes and low-depth grey expand.
bool read_png_bgr(PngJob& job, cv::Mat& out) {
  if (setjmp(png_jmpbuf(job.png))) return job.rows_done;
  png_set_keep_unknown_chunks(job.png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_set_read_fn(job.png, &job.source, read_png_bytes);
  png_read_info(job.png, job.info);
  const uint32_t width = png_get_image_width(job.png, job.info), height = png_get_image_height(job.png, job.info);
  const int color_type = png_get_color_type(job.png, job.info), bit_depth = png_get_bit_depth(job.png, job.info);
  if (bit_depth == 16) png_set_strip_16(job.png);
  png_set_strip_alpha(job.png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(job.png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(job.png);
  if (color_type & PNG_COLOR_MASK_COLOR) png_set_bgr(job.png);
  else png_set_gray_to_rgb(job.png);
  png_set_interlace_handling(job.png);
  png_read_update_info(job.png, job.info);
  if (png_get_channels(job.png, job.info) != 3 || png_get_bit_depth(job.png, job.info) != 8 ||
      png_get_rowbytes(job.png, job.info) != static_cast<size_t>(width) * 3)
    png_error(job.png, "unsupported PNG layout");
  out.create(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  job.rows.resize(height);
  for (uint32_t y = 0; y < height; ++y) job.rows[y] = out.ptr<uchar>(static_cast<int>(y));
  png_read_image(job.png, job.rows.data());
  job.rows_done = true;
  png_read_end(job.png, nullptr);
  return true;
}

struct PngSamples {
  std::vector<uint8_t> pixels;  // one byte per pixel: a palette index or an 8-bit grey value
  uint32_t width = 0, height = 0;
  int color_type = -1, bit_depth = 0;
};

// A label map: the stored samples, a palette image's indices (OpenCV would turn them into the
// palette's colours). Pixels are left empty for layouts other than one 8-bit (or less) channel.
bool read_png_samples(PngJob& job, PngSamples& out) {
  if (setjmp(png_jmpbuf(job.png))) return job.rows_done;
  png_set_keep_unknown_chunks(job.png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_set_read_fn(job.png, &job.source, read_png_bytes);
  png_read_info(job.png, job.info);
  out.width = png_get_image_width(job.png, job.info);
  out.height = png_get_image_height(job.png, job.info);
  out.color_type = png_get_color_type(job.png, job.info);
  out.bit_depth = png_get_bit_depth(job.png, job.info);
  const bool single = out.color_type == PNG_COLOR_TYPE_PALETTE || (out.color_type == PNG_COLOR_TYPE_GRAY && out.bit_depth <= 8);
  if (!single) return true;
  png_set_packing(job.png);  // 1, 2 and 4-bit samples one per byte, values unchanged
  png_set_interlace_handling(job.png);
  png_read_update_info(job.png, job.info);
  out.pixels.resize(static_cast<size_t>(out.width) * out.height);
  job.rows.resize(out.height);
  for (uint32_t y = 0; y < out.height; ++y) job.rows[y] = out.pixels.data() + static_cast<size_t>(y) * out.width;
  png_read_image(job.png, job.rows.data());
  job.rows_done = true;
  png_read_end(job.png, nullptr);
  return true;
}

// What a PNG decoded cleanly but for a complaint says, in our words.
std::string png_warning(const PngJob& job, const std::string& name) {
  if (job.error[0] != '\0')  // failed after its last row
    return str(name, ": PNG ends early or is damaged after its image data (", job.error,
               "); every row was decoded, and the image is used");
  if (job.warnings > 0) return str(name, ": PNG decoded with a warning (libpng: ", job.warning, "); the image is used");
  return "";
}

// ---- BMP and PNM: OpenCV's decoders.

struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c == EOF ? 0 : c; }
};

// OpenCV reports a short or broken BMP/PNM file on std::cerr itself (imdecode catches its own
// exception and prints it). That text must not reach the terminal, so std::cerr points at nothing
// while one of these decodes runs (one at a time; detseg itself never writes to std::cerr).
cv::Mat opencv_decode(const std::string& bytes, int flags, std::string& error) {
  static std::mutex mutex;
  static NullBuffer discard;
  std::lock_guard<std::mutex> lock(mutex);
  struct Restore {
    std::streambuf* saved;
    ~Restore() { std::cerr.rdbuf(saved); }
  } restore{std::cerr.rdbuf(&discard)};
  const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));  // only read
  try {
    return cv::imdecode(encoded, flags);
  } catch (const cv::Exception& e) {
    error = e.err;
    return cv::Mat();
  }
}

const char* format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kPnm: return "PNM";
    default: return "image";
  }
}

// Turns a raster upright by its EXIF orientation (OpenCV's ExifTransform; the same as PIL's
// exif_transpose: 6 is a quarter turn clockwise, 8 counter-clockwise, 5 and 7 the two transposes).
cv::Mat upright(const cv::Mat& m, int orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2: cv::flip(m, out, 1); break;
    case 3: cv::flip(m, out, -1); break;
    case 4: cv::flip(m, out, 0); break;
    case 5: cv::transpose(m, out); break;
    case 6: cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE); break;
    case 7: cv::transpose(m, out); cv::flip(out, out, -1); break;
    case 8: cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    default: return m;
  }
  return out;
}

}  // namespace

// Refuses a raster above the limit from its header alone; a JPEG whose frame header cannot be found
// is refused too (libjpeg would scan further than a header check that gave up). OpenCV's own
// check (OPENCV_IO_MAX_IMAGE_PIXELS) is read when OpenCV loads, before main: the setenv below only
// reaches it in child processes, so it is not the limit here.
void check_image_size(const std::string& bytes, const std::string& name) {
  static const bool opencv_limit_set = [] {
    ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(g_max_image_pixels.load()).c_str(), 0);
    return true;
  }();
  (void)opencv_limit_set;
  int64_t width = 0, height = 0;
  if (!image_header_size(bytes, width, height)) {
    DETSEG_CHECK(image_format(bytes) != ImageFormat::kJpeg, name,
                 ": corrupt JPEG (no frame header before the image data: its size cannot be read)");
    return;
  }
  const int64_t limit = g_max_image_pixels.load();
  // Headers claim up to 2^32 (PNG) or 2^40 (PNM) a side: width * height can pass int64, so the
  // check divides and the message multiplies in double.
  if (width <= limit && height <= limit && (width == 0 || height <= limit / width)) return;
  const double pixels = static_cast<double>(width) * static_cast<double>(height);
  throw Error(str(name, ": image is ", width, "x", height, " = ",
                  pixels < 9e18 ? str(static_cast<int64_t>(pixels)) : str(pixels), " pixels, above the limit of ",
                  limit, " (max_image_pixels in the config; a header claiming this is also how decompression bombs look)"));
}

ImageFormat image_format(const std::string& b) {
  if (is_jpeg(b)) return ImageFormat::kJpeg;
  if (is_png(b)) return ImageFormat::kPng;
  if (b.compare(0, 2, "BM") == 0) return ImageFormat::kBmp;
  // As OpenCV's PNM decoder claims a file (whitespace after "P1".."P6"): "P1" + anything else went
  // on to the decoders after it, DICOM's among them.
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' && std::isspace(static_cast<unsigned char>(b[2])))
    return ImageFormat::kPnm;
  return ImageFormat::kOther;
}

// A JPEG without its end marker is no longer refused here: it decodes completely (libjpeg, PIL
// and OpenCV all read it), so decode_image_file uses it with a warning.
void check_encoded_image(const std::string& bytes, const std::string& name) {
  DETSEG_CHECK(!bytes.empty(), name, ": image file is empty");
  DETSEG_CHECK(image_format(bytes) != ImageFormat::kOther, name, ": cannot decode image (not a JPEG, PNG, BMP or PNM file)");
  check_image_size(bytes, name);
}

DecodedImage decode_image_file(const std::string& bytes, const std::string& name) {
  DecodedImage out;
  try {
    check_encoded_image(bytes, name);
  } catch (const Error& e) {
    out.error = e.what();
    return out;
  }
  const ImageFormat format = image_format(bytes);
  cv::Mat raw;
  if (format == ImageFormat::kJpeg) {
    raw = decode_jpeg(bytes, name, out.warning, out.error);
  } else if (format == ImageFormat::kPng) {
    PngJob job;
    if (!start_png(job, bytes)) throw std::bad_alloc();
    if (read_png_bgr(job, raw)) out.warning = png_warning(job, name);
    else out.error = str(name, ": cannot decode image (corrupt PNG: ", job.error, ")");
  } else {
    std::string said;
    raw = opencv_decode(bytes, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION, said);
    if (raw.empty())
      out.error = str(name, ": cannot decode image (corrupt ", format_name(format), " file", said.empty() ? "" : ": ", said,
                      ")");
  }
  if (!out.error.empty()) return out;
  if (raw.empty() || raw.type() != CV_8UC3) {
    out.error = str(name, ": cannot decode image (corrupt ", format_name(format), " file)");
    out.warning.clear();
    return out;
  }
  out.stored_width = raw.cols;
  out.stored_height = raw.rows;
  out.orientation = exif_orientation(bytes);
  out.bgr = upright(raw, out.orientation);
  return out;
}

bool log_warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::unordered_set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(key).second) return false;
  }
  log_warn(message);
  return true;
}

cv::Mat decode_image_bgr(const std::string& bytes, const std::string& name, int* orientation) {
  DecodedImage decoded = decode_image_file(bytes, name);
  if (!decoded.error.empty()) throw Error(decoded.error);
  if (!decoded.warning.empty()) log_warn_once(name, decoded.warning);
  if (orientation != nullptr) *orientation = decoded.orientation;
  return decoded.bgr;
}

cv::Mat read_image_bgr(const std::string& path, int* orientation) {
  return decode_image_bgr(read_file(path), path, orientation);
}

std::string orientation_note(int orientation, int64_t width, int64_t height) {
  if (orientation == 1) return "";
  return str("EXIF orientation ", orientation, " makes it ", width, "x", height);
}

void set_max_image_pixels(int64_t pixels) {
  DETSEG_CHECK(pixels > 0, "max_image_pixels must be positive, got ", pixels);
  g_max_image_pixels = pixels;
}

int64_t max_image_pixels() { return g_max_image_pixels.load(); }

LabelImage decode_label_png(const std::string& bytes, const std::string& path) {
  DETSEG_CHECK(image_format(bytes) != ImageFormat::kOther, path, ": cannot decode label map (not a PNG)");
  check_image_size(bytes, path);
  LabelImage out;
  cv::Mat m;
  if (is_png(bytes)) {
    PngJob job;
    PngSamples png;
    if (!start_png(job, bytes)) throw std::bad_alloc();
    DETSEG_CHECK(read_png_samples(job, png), path, ": cannot decode label map (", job.error[0] ? job.error : "not a PNG",
                 ")");
    DETSEG_CHECK(!png.pixels.empty() || png.width * png.height == 0, path,
                 ": label map must be a single-channel 8-bit PNG of class ids (or a palette PNG, as VOC's "
                 "SegmentationClass), got PNG colour type ", png.color_type, " at ", png.bit_depth, " bits");
    out.warning = png_warning(job, path);
    out.height = png.height;
    out.width = png.width;
    out.pixels = std::move(png.pixels);
    const int orientation = exif_orientation(bytes);
    if (orientation == 1 || out.pixels.empty()) return out;
    m = cv::Mat(static_cast<int>(out.height), static_cast<int>(out.width), CV_8UC1, out.pixels.data()).clone();
    m = upright(m, orientation);
  } else {
    std::string said;
    m = opencv_decode(bytes, cv::IMREAD_UNCHANGED, said);
    DETSEG_CHECK(!m.empty(), path, ": cannot decode label map (", said.empty() ? "not a PNG, or corrupt data" : said, ")");
    DETSEG_CHECK(m.type() == CV_8UC1, path, ": label map must be a single-channel 8-bit PNG of class ids, got ",
                 m.channels(), " channel(s) of ", m.elemSize1() * 8, "-bit");
  }
  out.height = m.rows;
  out.width = m.cols;
  out.pixels.resize(static_cast<size_t>(out.height * out.width));
  cv::Mat dst(m.rows, m.cols, CV_8UC1, out.pixels.data());
  m.copyTo(dst);
  return out;
}

LabelValues::LabelValues(int64_t num_classes, const std::vector<int>& void_values) : num_classes_(num_classes) {
  for (int v = 0; v < 256; ++v) {
    lut_[v] = static_cast<uint8_t>(v);
    valid_[v] = num_classes <= 0 || v < num_classes || v == kIgnoreLabel;
  }
  for (int v : void_values) {
    DETSEG_CHECK(v >= 0 && v <= 255, "segmentation void value must be in 0..255, got ", v);
    lut_[v] = kIgnoreLabel;
    valid_[v] = true;
  }
}

void LabelValues::apply(LabelImage& label, const std::string& name) const {
  apply(label.pixels.data(), label.height, label.width, name);
}

void LabelValues::apply(uint8_t* p, int64_t height, int64_t width, const std::string& name) const {
  for (int64_t i = 0, n = height * width; i < n; ++i) {
    DETSEG_CHECK(valid_[p[i]], name, ": pixel value ", static_cast<int>(p[i]), " at (x=", i % width, ", y=", i / width,
                 ") is not a class id < ", num_classes_, " nor void/ignore");
    p[i] = lut_[p[i]];
  }
}

}  // namespace detseg
