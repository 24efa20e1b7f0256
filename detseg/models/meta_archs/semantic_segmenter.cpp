// Implements: the semantic-segmentation meta-architecture (see the header).
#include "detseg/models/meta_archs/semantic_segmenter.h"

#include <ATen/ATen.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/core/profile_scope.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

SemanticSegmenterImpl::SemanticSegmenterImpl(SemanticSegmenterOptions options, DeepLabNetwork network)
    : options_(std::move(options)), network_(std::move(network)) {
  for (auto& child : network_->named_children()) register_module(child.key(), child.value());
  DETSEG_CONFIG_CHECK(!options_.eval_scales.empty(), "semantic segmenter: eval_scales is empty");
  for (double s : options_.eval_scales)
    DETSEG_CONFIG_CHECK(s > 0, "semantic segmenter: eval scales must be positive, got ", s);
}

ModelLosses SemanticSegmenterImpl::losses_from(const at::Tensor& logits, const Batch& batch) {
  DETSEG_CHECK(batch.label_maps.defined(), "semantic segmenter: the batch has no label maps (is the input format "
                                           "seg_folder?)");
  at::Tensor labels = batch.label_maps.to(logits.device());
  if (options_.data_ignore_label != options_.loss.ignore_label())
    labels = labels.masked_fill(labels == options_.data_ignore_label, options_.loss.ignore_label());
  std::vector<at::Tensor> per_scale = softmax_cross_entropy_loss_per_scale({logits}, labels, options_.loss, step());
  ModelLosses out;
  out.total = per_scale[0];
  for (size_t i = 1; i < per_scale.size(); ++i) out.total = out.total + per_scale[i];
  out.parts.push_back({"seg_loss", per_scale[0]});
  return out;
}

ModelLosses SemanticSegmenterImpl::losses(const Batch& batch) {
  at::Tensor logits;
  {
    DETSEG_PROFILE_SCOPE("detseg::network");
    logits = run_network(batch.images);
  }
  DETSEG_PROFILE_SCOPE("detseg::loss");
  return losses_from(logits, batch);
}

bool SemanticSegmenterImpl::single_pass() const {
  return !options_.eval_flip && options_.eval_scales.size() == 1 && options_.eval_scales[0] == 1.0;
}

at::Tensor SemanticSegmenterImpl::probabilities(const at::Tensor& image, int64_t out_h, int64_t out_w) {
  const int64_t h = image.size(2), w = image.size(3);
  at::Tensor sum;
  for (double scale : options_.eval_scales) {
    at::Tensor x = image;
    if (scale != 1.0) {
      const int64_t sh = std::max<int64_t>(1, std::lround(h * scale)), sw = std::max<int64_t>(1, std::lround(w * scale));
      x = at::upsample_bilinear2d(image, {sh, sw}, /*align_corners=*/true);
    }
    for (int flip = 0; flip < (options_.eval_flip ? 2 : 1); ++flip) {
      // fp32 probabilities (summed over scales and flips) even under autocast.
      at::Tensor logits = upcast_low_precision(run_network(flip ? x.flip({3}) : x));
      if (flip) logits = logits.flip({3});
      at::Tensor p = at::upsample_bilinear2d(logits, {out_h, out_w}, /*align_corners=*/true).softmax(1);
      sum = sum.defined() ? sum.add_(p) : p;
    }
  }
  return sum;
}

at::Tensor SemanticSegmenterImpl::run_network(const at::Tensor& images) {
  if (!exported_) return network_->forward(images);
  std::vector<at::Tensor> out = exported_("forward", {images});
  DETSEG_CHECK(!out.empty(), "segmenter: the exported network returned no logits");
  return out[0];
}

std::vector<at::Tensor> SemanticSegmenterImpl::segment(const Batch& batch) {
  std::vector<at::Tensor> out;
  for (int64_t b = 0; b < batch.size(); ++b) {
    const int64_t h = batch.image_sizes[b][0].item<int64_t>(), w = batch.image_sizes[b][1].item<int64_t>();
    const int64_t oh = batch.original_sizes[b][0].item<int64_t>(), ow = batch.original_sizes[b][1].item<int64_t>();
    const at::Tensor image = batch.images.slice(0, b, b + 1).slice(2, 0, h).slice(3, 0, w);
    out.push_back(probabilities(image, oh, ow)[0].argmax(0));
  }
  return out;
}

std::pair<ModelLosses, std::vector<at::Tensor>> SemanticSegmenterImpl::losses_and_segment(const Batch& batch) {
  const at::Tensor logits = run_network(batch.images);
  ModelLosses losses = losses_from(logits, batch);
  // One pass serves both when each image fills the batch canvas at its original size.
  bool reuse = single_pass();
  for (int64_t b = 0; reuse && b < batch.size(); ++b)
    reuse = batch.image_sizes[b][0].item<int64_t>() == batch.images.size(2) &&
            batch.image_sizes[b][1].item<int64_t>() == batch.images.size(3) &&
            batch.original_sizes[b][0].item<int64_t>() == batch.images.size(2) &&
            batch.original_sizes[b][1].item<int64_t>() == batch.images.size(3);
  if (!reuse) return {losses, segment(batch)};
  const at::Tensor up = at::upsample_bilinear2d(logits, {batch.images.size(2), batch.images.size(3)}, true);
  std::vector<at::Tensor> maps;
  for (int64_t b = 0; b < batch.size(); ++b) maps.push_back(up[b].argmax(0));
  return {losses, maps};
}

// DeepLabHead: classifier.0 the ASPP, .1 and .2 the 3x3 conv and its norm (model.deeplab.head_conv),
// .4 the 1x1 classifier.
std::string SemanticSegmenterImpl::torchvision_name(const std::string& name) const {
  if (network_->options.decoder()) return name;
  static const std::pair<const char*, const char*> kPrefixes[] = {{"aspp.", "classifier.0."},
                                                                  {"head_conv.0.", "classifier.1."},
                                                                  {"head_conv.1.", "classifier.2."},
                                                                  {"classifier.", "classifier.4."}};
  for (const auto& [ours, theirs] : kPrefixes)
    if (name.rfind(ours, 0) == 0) return theirs + name.substr(std::char_traits<char>::length(ours));
  return name;
}

}  // namespace detseg
