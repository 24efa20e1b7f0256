// Implements: optimizer construction over named parameters: freezing, gradient multipliers and
// L2 selection by name pattern, parameter groups with their own rate scale, the L2 loss term,
// and gradient clipping by global norm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "detseg/train/optimizer_options.h"
#include "detseg/train/torch_fwd.h"

namespace detseg {

// The DeepLab rules: biases x2, parameters under any of `last_layers` x last_layer_multiplier.
std::vector<GradientMultiplier> deeplab_gradient_multipliers(
    const std::vector<std::string>& last_layers, double last_layer_multiplier);

struct NamedParameter {
  std::string name;
  torch::Tensor tensor;
  double lr_scale = 1.0;  // product of the matching gradient multipliers
  bool l2 = false;        // included in the L2 term
};

// The trainable parameters (in module order) and the names of the frozen ones.
struct ParameterSelection {
  std::vector<NamedParameter> trainable;
  std::vector<std::string> frozen;
  std::vector<torch::Tensor> tensors() const;
  std::vector<torch::Tensor> l2_tensors() const;
};

// Applies the options to `model`: frozen parameters get requires_grad(false). Throws ConfigError
// for a malformed pattern, naming it.
ParameterSelection select_parameters(torch::nn::Module& model, const OptimizerOptions& options);

// An optimizer with one parameter group per distinct rate scale, and that scale per group.
struct TrainOptimizer {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<double> group_lr_scales;
  TrainOptimizer();
  TrainOptimizer(TrainOptimizer&&) noexcept;
  TrainOptimizer& operator=(TrainOptimizer&&) noexcept;
  ~TrainOptimizer();
  // Sets every group's rate to lr x its scale (call each step with the schedule's value).
  void set_learning_rate(double lr);

  // One update of the parameters that have a gradient, or none when `skip` (a 0-dim float tensor
  // on their device) is 1: then parameters and state stay exactly as they were. The choice is
  // made on the device, so a step costs no host sync. Momentum SGD, Adam and AdamW run ATen's
  // fused kernels (their found_inf argument is the skip); RMSprop is written out with the same
  // guard. Same math as torch::optim's step, whose state objects it reads and updates.
  void step(const torch::Tensor& skip);
  // Adam's and RMSprop's step counts live on the device between steps; this writes them into the
  // torch::optim state, which is what a checkpoint saves. Call before saving.
  void sync_state();

  std::string type;  // OptimizerOptions::type
  std::vector<torch::Tensor> device_steps;  // per trainable parameter, in group order; float 0-dim
};

// Unknown optimizer type: ConfigError. For momentum SGD a per-group rate scale is exactly the
// reference's gradient multiplication (the momentum buffer is linear in the gradient).
TrainOptimizer build_optimizer(const ParameterSelection& params, const OptimizerOptions& options,
                               double initial_lr);

// weight_decay * sum over the L2 parameters of sum(w^2) / 2 (tf.nn.l2_loss); a scalar with grad.
// A zero scalar when nothing is selected or the decay is 0.
torch::Tensor l2_regularization_loss(const ParameterSelection& params, double weight_decay);

// Global L2 norm of all gradients (missing gradients count as 0): each gradient's norm in its own
// precision, then the norm of those (torch.nn.utils.clip_grad_norm_'s way), returned as double.
// When max_norm > 0 and the norm exceeds it, gradients are scaled by max_norm / norm
// (tf.clip_by_global_norm). Returns the norm before clipping; a NaN/Inf norm leaves them as is.
double clip_gradients_by_global_norm(const std::vector<torch::Tensor>& params, double max_norm);
// The same without a host sync: the norm stays a 0-dim double tensor on the gradients' device and
// the clipping factor is applied there (the training loop reads the norm with the loss, once).
torch::Tensor clip_gradients_by_global_norm_async(const std::vector<torch::Tensor>& params, double max_norm);

// The reference divides the summed loss by the number of replicas before differentiating.
inline torch::Tensor normalize_loss_for_replicas(const torch::Tensor& loss, int64_t num_replicas) {
  return num_replicas > 1 ? loss / static_cast<double>(num_replicas) : loss;
}

}  // namespace detseg
