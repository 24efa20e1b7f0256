// Implements: an exponential moving average of a model's weights (parameters and floating-point
// buffers such as batch-norm statistics), with the reference's warm-up of the decay, and swapping
// the averages into the model for evaluation and export.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "detseg/io/named_tensors.h"
#include "detseg/train/torch_fwd.h"

namespace detseg {

struct EmaOptions {
  double decay = 0.9998;        // the reference's moving_average_decay
  bool use_num_updates = true;  // decay = min(decay, (1 + n) / (10 + n))
};

// The decay used for update number n (n = the global step after the update).
double ema_decay_at(const EmaOptions& options, int64_t num_updates);

class WeightEma {
 public:
  // Starts the averages as copies of the model's current weights.
  WeightEma(const torch::nn::Module& model, EmaOptions options);

  // shadow -= (1 - decay) * (shadow - weight) for every tracked tensor. Returns the decay used.
  double update(const torch::nn::Module& model, int64_t num_updates);

  // Exchanges the model's weights with the averages; calling it again swaps them back.
  void swap(torch::nn::Module& model);
  bool swapped() const { return swapped_; }

  const NamedTensors& shadow() const { return shadow_; }
  // Replaces the averages (from a checkpoint); names and shapes must match the tracked tensors.
  void load(const NamedTensors& averages);
  const EmaOptions& options() const { return options_; }

 private:
  EmaOptions options_;
  NamedTensors shadow_;
  bool swapped_ = false;
};

// Swaps the averages in for a scope (evaluation, export) and back out at its end.
class EmaScope {
 public:
  EmaScope(WeightEma* ema, torch::nn::Module& model);  // ema may be null: no-op
  ~EmaScope();
  EmaScope(const EmaScope&) = delete;
  EmaScope& operator=(const EmaScope&) = delete;

 private:
  WeightEma* ema_;
  torch::nn::Module& model_;
};

// The tensors an EMA tracks: named parameters, then floating-point named buffers.
NamedTensors ema_tracked_tensors(const torch::nn::Module& model);

}  // namespace detseg
