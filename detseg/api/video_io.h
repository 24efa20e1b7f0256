// Implements: video in and out for `detseg predict`: files of any container and codec FFmpeg reads
// (through OpenCV's videoio), camera devices (/dev/video0, V4L2) and stream URLs (rtsp://,
// http(s)://, ...), and an annotated video written as MPEG-4 (.mp4, fourcc mp4v) or Motion JPEG
// (.avi). OpenCV's videoio maps ~240 shared libraries (FFmpeg's codecs, GStreamer, libgphoto2) and
// cost each process that links it ~150 ms at start-up, so only a module, libdetseg_video.so (built
// from api/video_module.cpp), links it; it is loaded at the first video opened and no other detseg
// process pays for it. The libraries' own messages (FFmpeg's "moov atom not found", OpenCV's
// warnings) are silenced there: a failure is one line of ours naming the source.
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace detseg {

enum class VideoSourceKind { kFile, kDevice, kStream };

// How `input` is read: a URL (scheme://...) is a stream, a path under /dev/ a camera device,
// anything else a file.
VideoSourceKind video_source_kind(const std::string& input);

struct VideoProperties {
  double fps = 0;            // as the source states it; <= 0 when it states none
  int width = 0, height = 0;
  int64_t frame_count = -1;  // as the container states it (a truncated file still states the whole); -1: unknown
};

class VideoReader {
 public:
  virtual ~VideoReader() = default;
  virtual const VideoProperties& properties() const = 0;
  // The next frame as 8-bit BGR and its presentation time in milliseconds as the source gives it
  // (< 0 when it gives none). False at the end, or when the source stops (a dropped stream, a
  // truncated file): the frames read before are whole.
  virtual bool read(cv::Mat& frame, double& position_ms) = 0;
  // Passes over the next frame without converting it; false at the end.
  virtual bool skip() = 0;
};

class VideoWriter {
 public:
  virtual ~VideoWriter() = default;
  // A frame of the size the writer was opened with (8-bit BGR).
  virtual void write(const cv::Mat& frame) = 0;
  // Finalises the file (a .mp4's index is written here); the destructor does it too.
  virtual void close() = 0;
};

// Opens a video file, device or stream. Throws Error with one line naming `source` when it is
// missing or cannot be opened, or when the video module cannot be loaded.
std::unique_ptr<VideoReader> open_video(const std::string& source);

// Creates `path` (.mp4: MPEG-4 part 2; .avi: Motion JPEG) at `fps` frames per second. Throws Error
// naming `path` when it cannot be created.
std::unique_ptr<VideoWriter> create_video(const std::string& path, double fps, int width, int height);

}  // namespace detseg
