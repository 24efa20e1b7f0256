// Implements: running a trained model on image files, videos and streams. Detectors: detections as
// JSON (COCO results form plus file and class names) and the images with boxes, class names and
// scores drawn; for a video, JSON Lines (one line per frame) and the annotated video. Segmenters:
// colour label maps, overlays and class-id PNGs, plus segmentation.json.
#pragma once

#include <cstdint>
#include <string>

#include "detseg/config/config.h"

namespace detseg {

struct PredictOptions {
  std::string checkpoint;
  // An image file, a folder of .jpg/.jpeg/.png, a video file, a camera device (/dev/video0) or a
  // stream URL (rtsp://, http://...): is_video_input tells.
  std::string input;
  // Folder: detections.json / segmentation.json, images.json (each image's id) and the pictures,
  // named after the input's whole file name (a.jpg -> a.jpg.png), so no two inputs share one.
  // A video: detections.jsonl and annotated.mp4.
  std::string output;
  double score_threshold = 0.3;  // drawing threshold; the JSON keeps every detection
  // Detectors: images (or tiles, with postprocess.tile_size) per forward pass; decoding and writing
  // run on threads of their own either way.
  int64_t batch = 1;
  int64_t every_nth_frame = 1;  // videos: predict frames 0, N, 2N, ...
  // False (--no-draw): the JSON only, no pictures or annotated video (segmenters still write the
  // class-id PNGs, which are their data).
  bool draw = true;
};

// Returns the number of images (or video frames) predicted.
int64_t predict_images(const PipelineConfig& config, const PredictOptions& options);

// Whether predict reads `input` as a video: a stream URL, a device under /dev/, or a file that is
// neither a folder nor an image (by its extension, else its first bytes).
bool is_video_input(const std::string& input);

}  // namespace detseg
