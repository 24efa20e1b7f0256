// Implements: `detseg predict` on a video file, a camera device or a stream: a reading thread
// decodes frames (every Nth), the model runs on this thread in batches (or tiles), a writing thread
// appends one JSON line per frame (flushed at once) and the frame with its detections drawn to the
// annotated video. The source ending early (a truncated file, a dropped stream) or a stop signal
// ends the run with everything written so far kept and the video finalised.
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "detseg/api/predict_parts.h"
#include "detseg/api/predict_pipeline.h"
#include "detseg/api/video_io.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

// A stated rate outside this is no rate (streams state 0, or a clock rate such as 90000).
constexpr double kMaxFps = 1000;
// What a source that states no usable rate is taken to run at.
constexpr double kDefaultFps = 25;

struct Frame {
  int64_t index = 0;  // in the source, counting the frames passed over
  double time = 0;    // seconds from the first frame
  cv::Mat bgr;
  std::vector<Detection> detections;
};

// Seconds from the first frame: the container's presentation time where it gives one that moves
// forward, else the previous frame's time plus the frames between at the stated rate (some
// containers give no time for their last frames, a V4L2 camera gives its clock's).
class FrameClock {
 public:
  explicit FrameClock(double fps) : fps_(fps) {}
  double time_of(int64_t index, double position_ms) {
    double t = last_time_ + static_cast<double>(index - last_index_) / fps_;
    if (position_ms >= 0 && first_ms_ < 0) first_ms_ = position_ms;
    if (index == 0 && position_ms >= 0) t = 0;
    if (position_ms >= 0 && first_ms_ >= 0 && index > last_index_ && (position_ms - first_ms_) / 1000.0 > last_time_)
      t = (position_ms - first_ms_) / 1000.0;
    last_time_ = t;
    last_index_ = index;
    return t;
  }

 private:
  double fps_;
  double first_ms_ = -1;
  double last_time_ = 0;
  int64_t last_index_ = 0;
};

// {"frame": index, "time": seconds, "detections": [...]}, in that order, on one line.
std::string frame_line(const Frame& frame) {
  nlohmann::ordered_json detections = nlohmann::ordered_json::array();
  for (const Detection& d : frame.detections) detections.push_back(nlohmann::ordered_json(detection_json(d)));
  const nlohmann::ordered_json line = {{"frame", frame.index}, {"time", frame.time}, {"detections", std::move(detections)}};
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

int64_t predict_video(const PipelineConfig& config, const PredictOptions& options) {
  check_detector_options(config, options);
  const VideoSourceKind kind = video_source_kind(options.input);
  const std::string jsonl_path = (fs::path(options.output) / "detections.jsonl").string();
  const std::string video_path = (fs::path(options.output) / "annotated.mp4").string();
  std::vector<CommandInput> inputs;
  if (kind == VideoSourceKind::kFile) inputs.push_back({options.input, "the video given by --input"});
  std::vector<std::string> outputs = {jsonl_path};
  if (options.draw) outputs.push_back(video_path);
  check_predict_outputs(config, options, inputs, outputs);
  // Opened before the model is loaded: a path it cannot read fails at once.
  const std::unique_ptr<VideoReader> reader = open_video(options.input);
  const VideoProperties source = reader->properties();
  const Detector detector(options.checkpoint, config);
  const TilingOptions tiling = tiling_options(config);
  make_directories(options.output);
  std::ofstream jsonl(jsonl_path, std::ios::trunc);
  DETSEG_CHECK(jsonl.good(), jsonl_path, ": cannot be created (permission denied, or the disk is full)");

  double fps = source.fps;
  if (!(fps > 0 && fps <= kMaxFps)) {
    log_warn(options.input, ": states no frame rate; the timestamps", options.draw ? " and " + video_path : "", " take ",
             kDefaultFps, " frames/s");
    fps = kDefaultFps;
  }
  const int64_t nth = options.every_nth_frame;
  const int64_t per_pass = tiling.tile_size > 0 ? 1 : options.batch;
  OrderedQueue<Frame> decoded(per_pass + 2), predicted(per_pass + 2);
  auto close_all = [&] {
    decoded.close();
    predicted.close();
  };
  // Two groups, so the outputs are finalised before waiting for a source that may be stuck in a
  // read (a stalled stream times out in FFmpeg after 30 s).
  StageThreads reading(close_all), writing(close_all);

  std::atomic<int64_t> frames_seen{0};
  reading.start([&] {
    FrameClock clock(fps);
    int64_t index = 0, k = 0;
    for (; !stop_signal(); ++index) {
      if (index % nth != 0) {
        if (!reader->skip()) break;
        continue;
      }
      Frame frame;
      double position_ms = -1;
      if (!reader->read(frame.bgr, position_ms)) break;
      frame.index = index;
      frame.time = clock.time_of(index, position_ms);
      if (!decoded.push(k++, std::move(frame))) break;
    }
    frames_seen = index;
    decoded.close();  // the end of the source: the model's loop drains what is decoded
  });

  std::atomic<int64_t> written{0};
  writing.start([&] {
    const int64_t expected = source.frame_count > 0 ? (source.frame_count + nth - 1) / nth : -1;
    Progress progress("predict", 0, expected, "frames/s");
    std::unique_ptr<VideoWriter> video;
    for (int64_t k = 0;; ++k) {
      std::optional<Frame> frame = predicted.pop();
      if (!frame) break;
      // The first frame's size: a stream may state none before it starts.
      if (!video && options.draw)
        video = create_video(video_path, fps / static_cast<double>(nth), frame->bgr.cols, frame->bgr.rows);
      jsonl << frame_line(*frame);
      jsonl.flush();
      DETSEG_CHECK(jsonl.good(), jsonl_path, ": writing failed (disk full?)");
      if (video) {
        draw_detections(frame->bgr, frame->detections, options);
        video->write(frame->bgr);
      }
      written = k + 1;
      progress.report(k + 1);
    }
    if (expected < 0 || written < expected) progress.end_line();
    if (video) video->close();
  });

  const CloseOnExit close_on_exit(close_all);
  for (int64_t k = 0; !stop_signal() && !writing.failed();) {
    std::vector<Frame> batch;
    while (static_cast<int64_t>(batch.size()) < per_pass) {
      std::optional<Frame> frame = decoded.pop();
      if (!frame) break;  // the source ended (or a stage failed: its error is rethrown below)
      batch.push_back(std::move(*frame));
    }
    if (batch.empty()) break;
    std::vector<cv::Mat> images;
    for (const Frame& f : batch) images.push_back(f.bgr);
    std::vector<std::vector<Detection>> found = detect_images(detector, images, tiling, options.batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].detections = std::move(found[i]);
      if (!predicted.push(k++, std::move(batch[i]))) break;
    }
  }
  close_all();
  writing.join();
  jsonl.close();
  writing.rethrow();
  reading.join();
  reading.rethrow();

  const int64_t n = written;
  const std::string outputs_held = options.draw ? jsonl_path + " and " + video_path : jsonl_path;
  if (const int signal = stop_signal())
    throw Interrupted(signal, str("prediction stopped by ", signal_name(signal), " after ", n, " frames; ", outputs_held,
                                  " hold", options.draw ? "" : "s", " those"));
  DETSEG_CHECK(n > 0, options.input, ": no frame could be read (an empty or undecodable video, or a stream that sent "
               "no picture)");
  const int64_t seen = frames_seen;
  if (source.frame_count > 0 && static_cast<double>(seen) < 0.99 * static_cast<double>(source.frame_count) - 1) {
    log_warn(options.input, ": the video ended after ", seen, " of the ", source.frame_count,
             " frames its header states (a truncated file or a dropped stream); ", outputs_held,
             options.draw ? " hold the " : " holds the ", n, " frames predicted");
  } else if (kind != VideoSourceKind::kFile) {
    log_info(options.input, ": the stream ended after ", seen, " frames");
  }
  return n;
}

}  // namespace detseg
