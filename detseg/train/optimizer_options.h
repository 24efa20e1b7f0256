// Implements: the optimizer's options, one struct for both the pipeline config (train.optimizer.*
// and the L2 / freezing / multiplier / clipping keys under train.*, declared in config.cpp) and
// train/optimizer.h. Torch-free so config.h can hold it. Defaults are the config's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detseg {

// Every parameter whose name matches `pattern` (std::regex_search, ECMAScript) has its gradient
// multiplied by `factor`; when several rules match, their factors multiply (DeepLab: a bias in a
// last layer gets 2 x last_layer_multiplier). In the config: a "regex=factor" string.
struct GradientMultiplier {
  std::string pattern;
  double factor = 1.0;
};

struct OptimizerOptions {
  std::string type = "momentum";  // momentum|sgd|adam|adamw|rmsprop
  double momentum = 0.9;          // momentum / rmsprop momentum
  bool nesterov = false;
  double beta1 = 0.9;  // adam / adamw
  double beta2 = 0.999;
  double epsilon = 1e-8;            // adam / adamw / rmsprop
  double adamw_weight_decay = 0.0;  // decoupled decay of AdamW (config: train.optimizer.weight_decay)
  double rmsprop_decay = 0.9;       // smoothing constant (torch's alpha)
  // L2 regularisation as its own loss term: l2_weight * sum(||w||^2 / 2) over parameters whose
  // name matches l2_pattern and which have at least l2_min_dim dimensions. The dimension rule
  // keeps norm-layer scales (1-D `weight`s) out, as the reference's kernel|weight regex does for
  // TF names where norm scales are called gamma.
  double l2_weight = 0.0;
  std::string l2_pattern = R"((^|\.)weight$)";
  int64_t l2_min_dim = 2;
  std::vector<GradientMultiplier> multipliers;
  std::string freeze_pattern;      // empty: nothing frozen
  double clip_gradients_norm = 0;  // <= 0: no clipping (the norm is still computed)
};

}  // namespace detseg
