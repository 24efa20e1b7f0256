// Implements: DeepLab's per-scale softmax cross-entropy with ignore label and hard pixel mining.
#include "detseg/losses/segmentation_loss.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {
namespace {

// The reference's _div_maybe_zero: 0 when the denominator is 0.
at::Tensor div_maybe_zero(const at::Tensor& total, const at::Tensor& count) {
  return at::where(count > 0, total / count.clamp_min(1), at::zeros_like(total));
}

// [n] source indices of an aligned-corners nearest resize from `in` to `out` samples, made on
// `device` (a host-built index would be a blocking host-to-device copy per call):
// min(in - 1, round(i x scale)) in float32, round() halves away from zero as std::round. For
// v = i x scale >= 0, v - floor(v) is exact in float, so floor(v) + (frac >= 0.5) is std::round(v).
at::Tensor nearest_aligned_index(int64_t in, int64_t out, const at::Device& device) {
  const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  const at::Tensor v = at::arange(out, at::TensorOptions().dtype(at::kFloat).device(device)) * scale;
  const at::Tensor down = at::floor(v);
  const at::Tensor rounded = down + ((v - down) >= 0.5).to(at::kFloat);
  return rounded.to(at::kLong).clamp_max(in - 1);
}

}  // namespace

int64_t hard_mining_num_pixels(int64_t num_pixels, double top_k_percent_pixels, int64_t hard_example_mining_step,
                               int64_t global_step) {
  const float n = static_cast<float>(num_pixels), top_k = static_cast<float>(top_k_percent_pixels);
  if (hard_example_mining_step == 0) return static_cast<int64_t>(top_k * n);
  const float ratio = std::min(1.0f, static_cast<float>(global_step) / static_cast<float>(hard_example_mining_step));
  return static_cast<int64_t>((ratio * top_k + (1.0f - ratio)) * n);
}

at::Tensor resize_labels_nearest(const at::Tensor& labels, int64_t height, int64_t width) {
  TORCH_CHECK(labels.dim() == 3, "resize_labels_nearest: labels must be [N, H, W], got ", labels.sizes());
  if (labels.size(1) == height && labels.size(2) == width) return labels;
  const at::Tensor rows = nearest_aligned_index(labels.size(1), height, labels.device());
  const at::Tensor cols = nearest_aligned_index(labels.size(2), width, labels.device());
  return labels.index_select(1, rows).index_select(2, cols);
}

at::Tensor softmax_cross_entropy_loss(const at::Tensor& logits_in, const at::Tensor& labels,
                                      const SegmentationLossOptions& options, int64_t global_step) {
  const at::Tensor logits = upcast_low_precision(logits_in);  // fp32 under autocast
  TORCH_CHECK(logits.dim() == 4 && labels.dim() == 3 && logits.size(0) == labels.size(0),
              "segmentation loss: logits must be [N, K, h, w] and labels [N, H, W], got ", logits.sizes(), " and ",
              labels.sizes());
  const double top_k = options.top_k_percent_pixels();
  DETSEG_CHECK(top_k > 0 && top_k <= 1, "segmentation loss: top_k_percent_pixels must be in (0, 1], got ", top_k);
  const int64_t num_classes = logits.size(1), ignore = options.ignore_label();
  at::Tensor scaled_logits = logits, scaled_labels = labels.to(at::kLong);
  if (options.upsample_logits())
    scaled_logits = at::upsample_bilinear2d(logits, {labels.size(1), labels.size(2)}, /*align_corners=*/true);
  else
    scaled_labels = resize_labels_nearest(scaled_labels, logits.size(2), logits.size(3));

  const at::Tensor valid = scaled_labels != ignore;
  const at::Tensor bad = valid & ((scaled_labels < 0) | (scaled_labels >= num_classes));
  // Reads a value on the host: CPU only, so the device step does not synchronise here (there,
  // cross_entropy's kernel asserts on a label outside [0, K)).
  if (host_value_checks(bad) && bad.any().item<bool>()) {
    const int64_t value = scaled_labels.masked_select(bad)[0].item<int64_t>();
    DETSEG_CHECK(false, "segmentation loss: label ", value, " is outside [0, ", num_classes,
                 ") and is not the ignore label ", ignore);
  }
  // Per-pixel -log softmax at the label; 0 where ignored (their one-hot row is all zeros in the
  // reference). The ignore label may itself be a class id: it is masked all the same.
  at::Tensor safe_labels = scaled_labels.masked_fill(~valid, 0);
  at::Tensor pixel_losses =
      at::cross_entropy_loss(scaled_logits, safe_labels, {}, at::Reduction::None) * valid.to(scaled_logits.dtype());
  at::Tensor weighted, present;  // present: the pixels whose weight is not 0
  if (options.class_weights().empty()) {
    weighted = options.loss_weight() == 1.0 ? pixel_losses : pixel_losses * options.loss_weight();
    present = options.loss_weight() != 0 ? valid.sum().to(weighted.dtype()) : at::zeros({}, weighted.options());
  } else {
    // The reference's get_label_weight_mask: one_hot(label) . label_weights, times not-ignored.
    DETSEG_CHECK(static_cast<int64_t>(options.class_weights().size()) == num_classes,
                 "segmentation loss: class_weights has ", options.class_weights().size(), " entries for ",
                 num_classes, " classes");
    const at::Tensor table =
        at::tensor(options.class_weights(), at::TensorOptions().dtype(at::kDouble)).to(pixel_losses.options()) *
        options.loss_weight();
    const at::Tensor weights = table.index_select(0, safe_labels.reshape({-1})).view_as(pixel_losses) *
                               valid.to(pixel_losses.dtype());
    weighted = pixel_losses * weights;
    present = (weights != 0).sum().to(weighted.dtype());
  }

  if (top_k == 1.0) return div_maybe_zero(weighted.sum(), present);  // SUM_BY_NONZERO_WEIGHTS
  const at::Tensor flat = weighted.reshape({-1});
  const int64_t k = hard_mining_num_pixels(flat.numel(), top_k, options.hard_example_mining_step(), global_step);
  if (k <= 0) return weighted.sum() * 0;
  const at::Tensor top = std::get<0>(at::topk(flat, std::min<int64_t>(k, flat.numel()), 0, /*largest=*/true, /*sorted=*/false));
  return div_maybe_zero(top.sum(), (top != 0).sum().to(top.dtype()));
}

std::vector<at::Tensor> softmax_cross_entropy_loss_per_scale(const std::vector<at::Tensor>& scales_to_logits,
                                                             const at::Tensor& labels,
                                                             const SegmentationLossOptions& options,
                                                             int64_t global_step) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& logits : scales_to_logits)
    out.push_back(softmax_cross_entropy_loss(logits, labels, options, global_step));
  return out;
}

}  // namespace detseg
