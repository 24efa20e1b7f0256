// `detseg predict` on videos, through the real binary: a 3-second clip made here (a demo image
// moving 2 px a frame, written by OpenCV's VideoWriter through detseg's video module) gives one
// JSON line per frame predicted with its index and time, and an annotated video of the same size
// and rate; --every-nth-frame; a file cut in half ends cleanly with what was read kept; a path
// that is no video, a missing one and an unreachable stream are one line of ours each.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "command_runner.h"
#include "detseg/api/video_io.h"
#include "detseg/data/image_codec.h"
#include "temp_dir.h"
#include "tiny_model.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using detseg::testing::CommandRun;

const std::string kDemo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";

CommandRun run(const std::string& args) {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " --threads 2 " + args);
}

// A 1-step RetinaNet-R18 (tiny_model.h) keeping 20 detections per image.
const detseg::testing::TinyModel& tiny_model() { return detseg::testing::tiny_model(20); }

std::string predict_args(const std::string& input, const fs::path& output) {
  return "predict --config " + tiny_model().config + " --checkpoint " + tiny_model().checkpoint + " --input " + input +
         " --output " + output.string();
}

constexpr int kFrames = 30, kWidth = 320, kHeight = 240;
constexpr double kFps = 10;

// 30 frames at 10 frames/s (Motion JPEG in .avi): a demo image moving 2 px to the left each frame.
void write_clip(const fs::path& path) {
  const cv::Mat demo = detseg::read_image_bgr(kDemo + "/images/BloodImage_00000.jpg");
  cv::Mat wide;
  cv::resize(demo, wide, cv::Size(kWidth + 2 * kFrames, kHeight));
  const auto writer = detseg::create_video(path.string(), kFps, kWidth, kHeight);
  for (int i = 0; i < kFrames; ++i) writer->write(wide(cv::Rect(2 * i, 0, kWidth, kHeight)).clone());
  writer->close();
}

std::vector<nlohmann::json> read_lines(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

struct ReadBack {
  int frames = 0;
  double fps = 0;
  int width = 0, height = 0;
};

ReadBack read_back(const fs::path& path) {
  const auto reader = detseg::open_video(path.string());
  ReadBack r{0, reader->properties().fps, reader->properties().width, reader->properties().height};
  cv::Mat frame;
  double ms = 0;
  while (reader->read(frame, ms)) ++r.frames;
  return r;
}

// The one line a failed command prints (nothing else: no FFmpeg or OpenCV text), and its code.
void expect_one_line(const CommandRun& r, int code, const std::string& line) {
  EXPECT_EQ(r.code, code) << r.output;
  EXPECT_EQ(r.output, "detseg: error: " + line + "\n");
}

}  // namespace

TEST(PredictVideo, OneJsonLinePerFrameAndAnAnnotatedVideoOfTheSameRateAndSize) {
  const detseg::testing::TempDir temp("predict_video");
  write_clip(temp / "clip.avi");
  const CommandRun r = run(predict_args((temp / "clip.avi").string(), temp / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("predicted 30 frames of " + (temp / "clip.avi").string() + " into"), std::string::npos)
      << r.output;
  const std::vector<nlohmann::json> lines = read_lines(temp / "out" / "detections.jsonl");
  ASSERT_EQ(lines.size(), 30u);
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(lines[i]["frame"], i);
    EXPECT_NEAR(lines[i]["time"].get<double>(), i / kFps, 1e-6);
    ASSERT_TRUE(lines[i]["detections"].is_array());
    EXPECT_EQ(lines[i]["detections"].size(), 20u);  // every score kept, up to max_detections_per_image
    for (const auto& d : lines[i]["detections"]) {
      EXPECT_TRUE(d.contains("category_name") && d.contains("score") && d["bbox"].size() == 4) << d.dump();
      EXPECT_GE(d["bbox"][0].get<double>(), -1e-3);
      EXPECT_LE(d["bbox"][0].get<double>() + d["bbox"][2].get<double>(), kWidth + 1e-3);
    }
  }
  const ReadBack video = read_back(temp / "out" / "annotated.mp4");
  EXPECT_EQ(video.frames, 30);
  EXPECT_NEAR(video.fps, kFps, 1e-3);
  EXPECT_EQ(video.width, kWidth);
  EXPECT_EQ(video.height, kHeight);

  // Frame 0's detections are predict's on that frame as an image: the model saw the frame as decoded.
  const auto reader = detseg::open_video((temp / "clip.avi").string());
  cv::Mat first;
  double ms = 0;
  ASSERT_TRUE(reader->read(first, ms));
  ASSERT_TRUE(cv::imwrite((temp / "frame0.png").string(), first));
  ASSERT_EQ(run(predict_args((temp / "frame0.png").string(), temp / "still")).code, 0);
  std::ifstream still_file(temp / "still" / "detections.json");
  const nlohmann::json still = nlohmann::json::parse(still_file);
  ASSERT_EQ(still.size(), lines[0]["detections"].size());
  for (size_t k = 0; k < still.size(); ++k) {
    EXPECT_NEAR(still[k]["score"].get<double>(), lines[0]["detections"][k]["score"].get<double>(), 1e-6);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(still[k]["bbox"][c].get<double>(), lines[0]["detections"][k]["bbox"][c].get<double>(), 1e-3);
  }
}

TEST(PredictVideo, EveryNthFramePredictsFramesZeroNTwoN) {
  const detseg::testing::TempDir temp("predict_video_nth");
  write_clip(temp / "clip.avi");
  const CommandRun r = run(predict_args((temp / "clip.avi").string(), temp / "out") + " --every-nth-frame 4 --batch 3");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<nlohmann::json> lines = read_lines(temp / "out" / "detections.jsonl");
  ASSERT_EQ(lines.size(), 8u);  // frames 0, 4, ..., 28
  for (size_t k = 0; k < lines.size(); ++k) {
    EXPECT_EQ(lines[k]["frame"], 4 * static_cast<int>(k));
    EXPECT_NEAR(lines[k]["time"].get<double>(), 0.4 * static_cast<double>(k), 1e-6);
  }
  // The annotated video keeps real time: 8 frames at 10/4 frames/s.
  const ReadBack video = read_back(temp / "out" / "annotated.mp4");
  EXPECT_EQ(video.frames, 8);
  EXPECT_NEAR(video.fps, 2.5, 1e-3);
  EXPECT_EQ(video.width, kWidth);
}

// --no-draw: the same JSON lines, and no annotated video.
TEST(PredictVideo, NoDrawWritesTheJsonLinesOnly) {
  const detseg::testing::TempDir temp("predict_video_no_draw");
  write_clip(temp / "clip.avi");
  const std::string input = (temp / "clip.avi").string() + " --every-nth-frame 10";
  const CommandRun drawn = run(predict_args(input, temp / "drawn"));
  ASSERT_EQ(drawn.code, 0) << drawn.output;
  const CommandRun plain = run(predict_args(input, temp / "plain") + " --no-draw");
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_NE(plain.output.find("(detections.jsonl)"), std::string::npos) << plain.output;
  EXPECT_TRUE(fs::exists(temp / "drawn" / "annotated.mp4"));
  EXPECT_FALSE(fs::exists(temp / "plain" / "annotated.mp4"));
  const std::vector<nlohmann::json> a = read_lines(temp / "drawn" / "detections.jsonl"),
                                    b = read_lines(temp / "plain" / "detections.jsonl");
  ASSERT_EQ(a.size(), 3u);  // frames 0, 10, 20
  ASSERT_EQ(b.size(), a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(b[k]["frame"], a[k]["frame"]);
    EXPECT_EQ(b[k]["detections"].size(), a[k]["detections"].size());
  }
}

// A file cut in half (what a dropped stream leaves): the frames before the cut are predicted, the
// outputs are whole (the video readable, every JSON line complete), and a warning says so.
TEST(PredictVideo, AVideoCutInHalfEndsCleanlyWithWhatWasRead) {
  const detseg::testing::TempDir temp("predict_video_cut");
  write_clip(temp / "clip.avi");
  const std::string bytes = detseg::testing::read_text(temp / "clip.avi");
  std::ofstream(temp / "half.avi", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  const CommandRun r = run(predict_args((temp / "half.avi").string(), temp / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<nlohmann::json> lines = read_lines(temp / "out" / "detections.jsonl");
  ASSERT_GT(lines.size(), 5u);
  ASSERT_LT(lines.size(), 30u);
  for (size_t k = 0; k < lines.size(); ++k) EXPECT_EQ(lines[k]["frame"], static_cast<int>(k));
  EXPECT_EQ(read_back(temp / "out" / "annotated.mp4").frames, static_cast<int>(lines.size()));
  EXPECT_NE(r.output.find("half.avi: the video ended after " + std::to_string(lines.size()) +
                          " of the 30 frames its header states"),
            std::string::npos)
      << r.output;
  for (const char* library : {"mjpeg @", "overread", "WARN", "moov"})
    EXPECT_EQ(r.output.find(library), std::string::npos) << library << " in: " << r.output;
}

TEST(PredictVideo, WhatCannotBeOpenedIsOneLineOfOurs) {
  const detseg::testing::TempDir temp("predict_video_refusals");
  const std::string missing = (temp / "missing.mp4").string();
  expect_one_line(run(predict_args(missing, temp / "out")), 1, missing + ": no such file or folder");
  std::ofstream(temp / "notes.mp4") << "these are notes, not a video\n";
  const std::string notes = (temp / "notes.mp4").string();
  expect_one_line(run(predict_args(notes, temp / "out")), 1,
                  notes + ": not a video FFmpeg can read (an unknown format, or a file cut short before its index, "
                          "as a truncated .mp4 is)");
  // A .mp4 cut before its index cannot be opened at all.
  write_clip(temp / "clip.avi");
  const ReadBack whole = read_back(temp / "clip.avi");
  ASSERT_EQ(whole.frames, 30);
  ASSERT_EQ(run(predict_args((temp / "clip.avi").string(), temp / "first")).code, 0);
  const std::string mp4 = detseg::testing::read_text(temp / "first" / "annotated.mp4");
  std::ofstream(temp / "cut.mp4", std::ios::binary).write(mp4.data(), static_cast<std::streamsize>(mp4.size() / 2));
  const std::string cut = (temp / "cut.mp4").string();
  expect_one_line(run(predict_args(cut, temp / "out")), 1,
                  cut + ": not a video FFmpeg can read (an unknown format, or a file cut short before its index, "
                        "as a truncated .mp4 is)");
  // Nothing listens on port 1: the connection is refused at once.
  expect_one_line(run(predict_args("rtsp://127.0.0.1:1/live", temp / "out")), 1,
                  "rtsp://127.0.0.1:1/live: cannot open this stream (unreachable, refused, or not a video FFmpeg can "
                  "read)");
  // The output folder is never the video itself.
  const CommandRun onto = run(predict_args((temp / "clip.avi").string(), temp / "clip.avi"));
  EXPECT_EQ(onto.code, 2) << onto.output;
  EXPECT_NE(onto.output.find("is the video given by --input"), std::string::npos) << onto.output;
}
