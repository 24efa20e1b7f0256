// Implements: the balanced positive/negative minibatch sampler of the OD API (RPN and box
// classifier minibatches in Faster R-CNN), dynamic and static-shape variants.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace detseg {

struct BalancedSamplerOptions {
  double positive_fraction = 0.5;  // in [0, 1]
  // Samples per image. nullopt: every positive is kept and negatives are capped at
  // floor((1 - fraction) / fraction * num_positives), as the OD API does without a batch size.
  std::optional<int64_t> batch_size = 256;
};

// indicator: bool [N] (rows eligible for sampling), labels: bool [N] (true = positive).
// Picks at most floor(positive_fraction * batch_size) positives uniformly at random, then fills
// the batch with random negatives. Returns a bool [N] mask. `generator` fixes the randomness
// (at::make_generator<at::CPUGeneratorImpl>(seed)); undefined uses the global one.
at::Tensor sample_balanced(const at::Tensor& indicator, const at::Tensor& labels,
                           const BalancedSamplerOptions& options,
                           c10::optional<at::Generator> generator = c10::nullopt);

struct StaticSample {
  at::Tensor indices;  // int64 [batch_size]: sampled positives, then negatives, then -1 padding
  at::Tensor mask;     // bool [N], same selection
  int64_t num_positives = 0;
  int64_t num_valid = 0;  // entries of `indices` that are not padding
};

// The static-shape variant (the OD API's is_static=true): the same selection rule, but the result
// always has batch_size slots so batched code keeps fixed shapes. Needs options.batch_size.
StaticSample sample_balanced_static(const at::Tensor& indicator, const at::Tensor& labels,
                                    const BalancedSamplerOptions& options,
                                    c10::optional<at::Generator> generator = c10::nullopt);

}  // namespace detseg
