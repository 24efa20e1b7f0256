// detect: runs a trained detseg detector on one image and prints what it finds, one line each:
//   <class name> <score> <x1> <y1> <x2> <y2>   (image pixels; detections scoring >= THRESHOLD)
// Usage: detect MODEL IMAGE [CONFIG] [THRESHOLD]
//   MODEL: a model from `detseg export --format torchscript` (no CONFIG needed), or a checkpoint
//   (.dsckpt) with the CONFIG it was trained with. THRESHOLD defaults to 0.3.
#include <detseg/api/inference.h>
#include <detseg/core/error.h>
#include <detseg/data/image_codec.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL IMAGE [CONFIG] [THRESHOLD]\n", argv[0]);
    return 2;
  }
  detseg::InferenceOptions options;
  if (argc > 3) options.config = argv[3];
  const double threshold = argc > 4 ? std::atof(argv[4]) : 0.3;
  try {
    const detseg::Detector detector(argv[1], options);
    // detseg's own decoding (upright by its EXIF orientation, damage told in one line): the pixels
    // `detseg predict` and training see. Throws detseg::Error naming the file when it is unusable.
    const cv::Mat image = detseg::read_image_bgr(argv[2]);
    for (const detseg::Detection& d : detector.detect(image)) {
      if (d.score < threshold) continue;
      std::printf("%s %.4f %.1f %.1f %.1f %.1f\n", d.class_name.c_str(), d.score, d.x1, d.y1, d.x2, d.y2);
    }
  } catch (const detseg::Error& e) {
    std::fprintf(stderr, "detect: %s\n", e.what());
    return 1;
  }
  return 0;
}
