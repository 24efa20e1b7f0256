// Implements: libdetseg_video.so, the one piece of detseg that links OpenCV's videoio (see
// api/video_io.h for why it is a module). Files and stream URLs are read with the FFmpeg backend and
// devices with V4L2, each named explicitly: left to choose, OpenCV tries GStreamer first, which
// prints its own warnings for every path it cannot open.
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "detseg/api/video_module_api.h"

namespace {

using detseg::VideoProperties;
using detseg::VideoSourceKind;

// FFmpeg's and OpenCV's messages ("moov atom not found", "[ WARN:0@0.2] global cap_ffmpeg...")
// would reach the terminal next to ours; a user who wants them sets the variables themselves.
// OPENCV_FFMPEG_LOGLEVEL is read when OpenCV first starts FFmpeg, so this runs before any capture.
void silence_libraries() {
  static const bool done = [] {
    setenv("OPENCV_FFMPEG_LOGLEVEL", "-8", /*overwrite=*/0);  // AV_LOG_QUIET
    if (std::getenv("OPENCV_LOG_LEVEL") == nullptr)
      cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    return true;
  }();
  (void)done;
}

class Reader final : public detseg::VideoReader {
 public:
  explicit Reader(cv::VideoCapture capture) : capture_(std::move(capture)) {
    properties_.fps = capture_.get(cv::CAP_PROP_FPS);
    properties_.width = static_cast<int>(capture_.get(cv::CAP_PROP_FRAME_WIDTH));
    properties_.height = static_cast<int>(capture_.get(cv::CAP_PROP_FRAME_HEIGHT));
    const double count = capture_.get(cv::CAP_PROP_FRAME_COUNT);
    properties_.frame_count = count >= 1 ? static_cast<int64_t>(count) : -1;
  }
  const VideoProperties& properties() const override { return properties_; }

  bool read(cv::Mat& frame, double& position_ms) override {
    try {
      if (!capture_.read(raw_) || raw_.empty()) return false;
      position_ms = capture_.get(cv::CAP_PROP_POS_MSEC);
    } catch (const cv::Exception&) {
      return false;  // a decoder failure mid-way: the video ends here, as a dropped stream does
    }
    if (raw_.depth() != CV_8U) return false;
    if (raw_.channels() == 3) {
      frame = raw_.clone();  // the capture reuses its buffer for the next frame
    } else {
      cv::cvtColor(raw_, frame, raw_.channels() == 1 ? cv::COLOR_GRAY2BGR : cv::COLOR_BGRA2BGR);
    }
    return true;
  }

  bool skip() override {
    try {
      return capture_.grab();
    } catch (const cv::Exception&) {
      return false;
    }
  }

 private:
  cv::VideoCapture capture_;
  VideoProperties properties_;
  cv::Mat raw_;
};

class Writer final : public detseg::VideoWriter {
 public:
  Writer(cv::VideoWriter writer, cv::Size size) : writer_(std::move(writer)), size_(size) {}
  ~Writer() override { close(); }
  void write(const cv::Mat& frame) override {
    if (frame.size() == size_ && frame.type() == CV_8UC3) {
      writer_.write(frame);
    } else {
      cv::Mat fitted;
      cv::resize(frame, fitted, size_);
      writer_.write(fitted);
    }
  }
  void close() override {
    if (writer_.isOpened()) writer_.release();
  }

 private:
  cv::VideoWriter writer_;
  cv::Size size_;
};

detseg::VideoReader* open_reader(const std::string& source, VideoSourceKind kind, std::string& error) {
  silence_libraries();
  cv::VideoCapture capture;
  try {
    capture.open(source, kind == VideoSourceKind::kDevice ? cv::CAP_V4L2 : cv::CAP_FFMPEG);
  } catch (const cv::Exception&) {
  }
  if (!capture.isOpened()) {
    switch (kind) {
      case VideoSourceKind::kDevice:
        error = "cannot open this camera device (missing, busy, not allowed, or not a V4L2 video device)";
        break;
      case VideoSourceKind::kStream:
        error = "cannot open this stream (unreachable, refused, or not a video FFmpeg can read)";
        break;
      case VideoSourceKind::kFile:
        error = "not a video FFmpeg can read (an unknown format, or a file cut short before its index, as a "
                "truncated .mp4 is)";
        break;
    }
    return nullptr;
  }
  return new Reader(std::move(capture));
}

detseg::VideoWriter* open_writer(const std::string& path, double fps, int width, int height, std::string& error) {
  silence_libraries();
  std::string ext = path.substr(std::min(path.size(), path.rfind('.') == std::string::npos ? path.size() : path.rfind('.')));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  int fourcc = 0;
  if (ext == ".mp4" || ext == ".m4v" || ext == ".mov") {
    fourcc = cv::VideoWriter::fourcc('m', 'p', '4', 'v');
  } else if (ext == ".avi") {
    fourcc = cv::VideoWriter::fourcc('M', 'J', 'P', 'G');
  } else {
    error = "writes .mp4 (MPEG-4) or .avi (Motion JPEG) videos, not '" + ext + "'";
    return nullptr;
  }
  cv::VideoWriter writer;
  try {
    writer.open(path, cv::CAP_FFMPEG, fourcc, fps, cv::Size(width, height));
  } catch (const cv::Exception&) {
  }
  if (!writer.isOpened()) {
    error = "cannot create this video (the folder is missing or not writable, or FFmpeg lacks the encoder)";
    return nullptr;
  }
  return new Writer(std::move(writer), cv::Size(width, height));
}

const detseg::video_module::Api kApi = {detseg::video_module::kAbiVersion, open_reader, open_writer};

}  // namespace

extern "C" const detseg::video_module::Api* detseg_video_module_api() { return &kApi; }
