// A 1-step RetinaNet-R18 (FPN 32, 128 px, every score kept) trained once per max_detections value
// on two demo images, for the CLI tests that need a checkpoint. Its eval_input is the demo's
// val.json: predict takes image ids from it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "command_runner.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace detseg::testing {

struct TinyModel {
  std::filesystem::path dir;  // config.yaml and model/ (ckpt-1.dsckpt) live here
  std::string config, checkpoint;
};

// max_detections 0 keeps postprocess.max_detections_per_image at its default.
inline const TinyModel& tiny_model(int max_detections = 0) {
  static std::map<int, std::pair<std::unique_ptr<TempDir>, TinyModel>> models;
  if (auto it = models.find(max_detections); it != models.end()) return it->second.second;
  auto temp = std::make_unique<TempDir>("cli_tiny_model_" + std::to_string(max_detections));
  const std::filesystem::path dir = temp->path();
  TinyModel m{dir, (dir / "config.yaml").string(), (dir / "model" / "ckpt-1.dsckpt").string()};
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  std::ofstream(m.config) << "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, "
                             "image_size: 128}\n"
                             "postprocess: {score_threshold: 0.0"
                          << (max_detections > 0 ? ", max_detections_per_image: " + std::to_string(max_detections) : "")
                          << "}\n"
                             "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1}\n"
                             "train_input: {annotations: " << demo << "/train.json, images: " << demo
                          << "/images, max_images: 2, num_workers: 0}\n"
                             "eval_input: {annotations: " << demo << "/val.json, images: " << demo
                          << "/images, max_images: 2, num_workers: 0}\n";
  const CommandRun r = run_command(std::string(DETSEG_BINARY) + " --threads 2 train --config " + m.config +
                                   " --model-dir " + (dir / "model").string());
  EXPECT_EQ(r.code, 0) << r.output;
  return models.emplace(max_detections, std::make_pair(std::move(temp), m)).first->second.second;
}

}  // namespace detseg::testing
