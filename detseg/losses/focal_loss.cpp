// Implements: sigmoid focal loss as EfficientDet's det_model_fn.py computes it (stable modulator).
#include "detseg/losses/focal_loss.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <functional>

#include "detseg/core/error.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

namespace {

// One pass over [rows, K] float logits computing the summed dense focal loss and, when asked,
// d(sum)/d(logits) at the same time (the loss is a sum of independent elements, so the gradient is
// known in the forward pass). Per element, with e = exp(-|x|), p = sigmoid(x):
//   ce = max(x, 0) - x z + log1p(e),  q = -z x - softplus(-x) = log(1 - p_t),  mod = exp(gamma q)
//   loss = w mod ce,  dloss/dx = w mod (gamma (1 - p - z) ce + p - z)
// Replaces ~40 elementwise kernels (forward and backward) of the composite form.
double focal_dense_cpu(const float* x, const int64_t* labels, float* grad, int64_t rows,
                       int64_t k, float alpha, float gamma) {
  return at::parallel_reduce(
      0, rows, 64, 0.0,
      [&](int64_t begin, int64_t end, double acc) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t label = labels[r];
          const float* xr = x + r * k;
          float* gr = grad ? grad + r * k : nullptr;
          if (label == -2) {
            if (gr) std::fill(gr, gr + k, 0.0f);
            continue;
          }
          float row = 0.0f;
          for (int64_t c = 0; c < k; ++c) {
            const float v = xr[c];
            const float z = c == label ? 1.0f : 0.0f;
            const float w = c == label ? alpha : 1.0f - alpha;
            const float e = std::exp(-std::abs(v));
            const float l1p = std::log1p(e);
            const float ce = std::max(v, 0.0f) - v * z + l1p;
            const float softplus_neg = std::max(-v, 0.0f) + l1p;
            const float mod = std::exp(gamma * (-z * v - softplus_neg));
            row += w * mod * ce;
            if (gr) {
              const float p = v >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
              gr[c] = w * mod * (gamma * (1.0f - p - z) * ce + p - z);
            }
          }
          acc += row;
        }
        return acc;
      },
      std::plus<double>());
}

struct FocalDenseFunction : public torch::autograd::Function<FocalDenseFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& labels, const at::Tensor& normalizer, double alpha,
                            double gamma, bool want_grad) {
    const at::Tensor x = logits.contiguous();
    const at::Tensor lab = labels.to(at::kLong).contiguous();
    at::Tensor grad = want_grad ? at::empty_like(x) : at::Tensor();
    const double total = focal_dense_cpu(x.data_ptr<float>(), lab.data_ptr<int64_t>(),
                                         want_grad ? grad.data_ptr<float>() : nullptr, lab.numel(),
                                         x.size(-1), static_cast<float>(alpha),
                                         static_cast<float>(gamma));
    ctx->save_for_backward({grad, normalizer});
    // A sum past the float range becomes inf (a diverging run must reach the loop's non-finite
    // check, not fail in scalar_tensor's overflow check).
    return at::scalar_tensor(total, x.options().dtype(at::kDouble)).to(x.scalar_type()) / normalizer;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    TORCH_CHECK(saved[0].defined(), "focal_loss_dense: backward without a saved gradient");
    return {saved[0] * (grad_outputs[0] / saved[1]), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor focal_loss_elementwise(const at::Tensor& logits_in, const at::Tensor& targets,
                                  const FocalLossOptions& options) {
  TORCH_CHECK(logits_in.sizes() == targets.sizes(), "focal_loss: logits ", logits_in.sizes(),
              " and targets ", targets.sizes(), " differ in shape");
  TORCH_CHECK(logits_in.is_floating_point(), "focal_loss: logits must be floating point, got ",
              logits_in.scalar_type());
  const at::Tensor logits = upcast_low_precision(logits_in);  // fp32 under autocast
  const at::Tensor z = targets.to(logits.scalar_type());
  const double gamma = options.gamma();
  const double alpha = options.alpha();
  // sigmoid_cross_entropy_with_logits(z, x) = max(x, 0) - x z + log(1 + exp(-|x|)).
  const at::Tensor cross_entropy = at::binary_cross_entropy_with_logits(
      logits, z, /*weight=*/{}, /*pos_weight=*/{}, at::Reduction::None);
  // modulator = exp(gamma * z * (-x) - gamma * log(1 + exp(-x)))
  const at::Tensor neg_logits = logits.neg();
  const at::Tensor modulator =
      at::exp(gamma * z * neg_logits - gamma * at::softplus(neg_logits, /*beta=*/1, /*threshold=*/20));
  const at::Tensor loss = modulator * cross_entropy;
  // alpha for z == 1, 1 - alpha elsewhere (the reference's tf.where on positive_label_mask).
  const at::Tensor weight = at::where(z == 1.0, at::scalar_tensor(alpha, loss.options()),
                                      at::scalar_tensor(1.0 - alpha, loss.options()));
  return loss * weight;
}

at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& targets,
                      const at::Tensor& normalizer, const FocalLossOptions& options) {
  return focal_loss_elementwise(logits, targets, options).sum() / upcast_low_precision(normalizer);
}

at::Tensor focal_loss_dense(const at::Tensor& logits_in, const at::Tensor& labels,
                            const at::Tensor& normalizer_in, const FocalLossOptions& options) {
  // fp32 under autocast: bf16/fp16 logits take the float path (the fused one on the CPU).
  const at::Tensor logits = upcast_low_precision(logits_in);
  const at::Tensor normalizer = upcast_low_precision(normalizer_in);
  TORCH_CHECK(logits.dim() >= 1 && labels.dim() == logits.dim() - 1 &&
                  labels.sizes() == logits.sizes().slice(0, logits.dim() - 1),
              "focal_loss_dense: labels ", labels.sizes(), " must equal logits ", logits.sizes(),
              " without the class dimension");
  TORCH_CHECK(!labels.is_floating_point(), "focal_loss_dense: labels must be integer, got ",
              labels.scalar_type());
  const int64_t num_classes = logits.size(-1);
  // The range check reads the labels on the host: CPU only, so a device training step does not
  // synchronise here (out-of-range labels there count as background in the one-hot).
  if (labels.numel() > 0 && host_value_checks(labels)) {
    const int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
    TORCH_CHECK(hi < num_classes && lo >= -2, "focal_loss_dense: labels must lie in [-2, ",
                num_classes - 1, "], got [", lo, ", ", hi, "]");
  }
  if (logits.device().is_cpu() && logits.scalar_type() == at::kFloat &&
      !(normalizer.requires_grad() && at::GradMode::is_enabled())) {
    const bool want_grad = at::GradMode::is_enabled() && logits.requires_grad();
    return FocalDenseFunction::apply(logits, labels, normalizer, options.alpha(), options.gamma(),
                                     want_grad);
  }
  return focal_loss_dense_composite(logits, labels, normalizer, options);
}

at::Tensor focal_loss_dense_composite(const at::Tensor& logits_in, const at::Tensor& labels,
                                      const at::Tensor& normalizer_in, const FocalLossOptions& options) {
  const at::Tensor logits = upcast_low_precision(logits_in);
  const at::Tensor normalizer = upcast_low_precision(normalizer_in);
  const int64_t num_classes = logits.size(-1);
  // One-hot with negative labels giving an all-zero row, like tf.one_hot.
  const at::Tensor classes = at::arange(num_classes, labels.options());
  const at::Tensor targets = (labels.unsqueeze(-1) == classes).to(logits.scalar_type());
  at::Tensor loss = focal_loss_elementwise(logits, targets, options);
  const at::Tensor keep = (labels != -2).unsqueeze(-1).to(loss.scalar_type());
  return (loss * keep).sum() / normalizer;
}

}  // namespace detseg
