// Implements: detseg's public inference API, what an application links (find_package(detseg),
// target detseg::detseg) to run a trained model: Detector (boxes, classes, scores, masks) and
// Segmenter (a class id per pixel). Either loads a checkpoint with its config, or a model written
// by `detseg export --format torchscript` (which carries its config), and runs on a cv::Mat or an
// image tensor with the same preprocessing and postprocessing as `detseg predict`.
// detseg::read_image_bgr (data/image_codec.h) decodes a file as predict does: upright by its EXIF
// orientation (cv::imread's default IMREAD_COLOR turns JPEGs and PNGs the same way).
//
//   detseg::Detector detector("model.pt");
//   for (const detseg::Detection& d : detector.detect(detseg::read_image_bgr("cells.jpg")))
//     std::printf("%s %.2f at %.0f,%.0f\n", d.class_name.c_str(), d.score, d.x1, d.y1);
//
// Errors (a missing file, a config mistake, an image it cannot use) throw detseg::Error (core/error.h)
// with one line naming the file and field. One Detector serves one thread at a time.
#pragma once

#include <ATen/core/Tensor.h>
#include <opencv2/core.hpp>

#include <memory>
#include <string>
#include <vector>

namespace detseg {

struct PipelineConfig;

// One detection, in the pixels of the image given to detect().
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float score = 0;
  int64_t label = 0;        // contiguous class index, 0..K-1
  int64_t category_id = 0;  // the training data's category id (COCO's), else the label
  std::string class_name;   // from the training data, else the label as text
  cv::Mat mask;             // Mask R-CNN: CV_8U 0/1 at the image's size; empty for box detectors
};

struct InferenceOptions {
  // A checkpoint needs its config; an exported model has one inside (this replaces it).
  std::string config;
  std::vector<std::string> overrides;  // "key.path=value", as `--set`
  std::string device;                  // cpu, cuda, cuda:N, auto; empty: the config's
};

class Detector {
 public:
  // `model`: a checkpoint (.dsckpt) or an exported TorchScript model (.pt).
  explicit Detector(const std::string& model, const InferenceOptions& options = {});
  // With a config already loaded (what `detseg predict` does).
  Detector(const std::string& model, const PipelineConfig& config);

  // An 8-bit image with 1, 3 (BGR, as cv::imread gives) or 4 (BGRA) channels. Sorted by score.
  std::vector<Detection> detect(const cv::Mat& image) const;
  // [3, H, W] uint8 RGB on the CPU.
  std::vector<Detection> detect(const at::Tensor& rgb) const;
  // Several images in one forward pass (`detseg predict --batch`), each resized as detect() does and
  // padded to the largest: images of one size get detect()'s detections (to float rounding); a
  // smaller image among larger ones sees more padding, which moves its scores slightly. An exported
  // model, traced for one image, runs them one by one.
  std::vector<std::vector<Detection>> detect_batch(const std::vector<at::Tensor>& rgb) const;
  std::vector<std::vector<Detection>> detect_batch(const std::vector<cv::Mat>& images) const;

  const std::vector<std::string>& class_names() const;
  int64_t step() const;  // the training step of the weights

 private:
  struct State;
  std::shared_ptr<State> state_;
};

class Segmenter {
 public:
  explicit Segmenter(const std::string& model, const InferenceOptions& options = {});
  Segmenter(const std::string& model, const PipelineConfig& config);

  // The class id of every pixel, CV_32S, the image's size.
  cv::Mat segment(const cv::Mat& image) const;
  // [3, H, W] uint8 RGB -> [H, W] int64.
  at::Tensor segment(const at::Tensor& rgb) const;

  const std::vector<std::string>& class_names() const;
  int64_t num_classes() const;
  int64_t step() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// RGB [3, H, W] uint8 from an 8-bit cv::Mat with 1, 3 (BGR) or 4 (BGRA) channels.
at::Tensor rgb_tensor_from_mat(const cv::Mat& image);

}  // namespace detseg
