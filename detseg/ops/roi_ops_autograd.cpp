// Implements: autograd wrappers for roi_align and crop_and_resize (gradient into the features).
#include <torch/csrc/autograd/custom_function.h>

#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/roi_align.h"

namespace detseg {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

RoiAlignOptions roi_options_from(AutogradContext* ctx) {
  RoiAlignOptions o;
  o.output_size = {ctx->saved_data["ph"].toInt(), ctx->saved_data["pw"].toInt()};
  o.spatial_scale = ctx->saved_data["scale"].toDouble();
  o.sampling_ratio = ctx->saved_data["ratio"].toInt();
  o.aligned = ctx->saved_data["aligned"].toBool();
  return o;
}

class RoiAlignFunction : public torch::autograd::Function<RoiAlignFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& rois,
                            int64_t ph, int64_t pw, double scale, int64_t ratio, bool aligned) {
    RoiAlignOptions o;
    o.output_size = {ph, pw};
    o.spatial_scale = scale;
    o.sampling_ratio = ratio;
    o.aligned = aligned;
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["ratio"] = ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["sizes"] = input.sizes().vec();
    ctx->save_for_backward({rois});
    return roi_align_forward(input, rois, o);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto rois = ctx->get_saved_variables()[0];
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    auto gi = roi_align_backward(grads[0], rois, sizes, roi_options_from(ctx));
    return {gi, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class CropAndResizeFunction : public torch::autograd::Function<CropAndResizeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& image, const at::Tensor& boxes,
                            const at::Tensor& indices, int64_t ch, int64_t cw, double extrap) {
    CropAndResizeOptions o;
    o.crop_size = {ch, cw};
    o.extrapolation_value = extrap;
    ctx->saved_data["ch"] = ch;
    ctx->saved_data["cw"] = cw;
    ctx->saved_data["sizes"] = image.sizes().vec();
    ctx->save_for_backward({boxes, indices});
    return crop_and_resize_forward(image, boxes, indices, o);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    CropAndResizeOptions o;
    o.crop_size = {ctx->saved_data["ch"].toInt(), ctx->saved_data["cw"].toInt()};
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    auto gi = crop_and_resize_backward(grads[0], saved[0], saved[1], sizes, o);
    return {gi, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, const RoiAlignOptions& o) {
  return RoiAlignFunction::apply(input, rois, o.output_size.first, o.output_size.second,
                                 o.spatial_scale, o.sampling_ratio, o.aligned);
}

at::Tensor roi_align(const at::Tensor& input, const std::vector<at::Tensor>& boxes_per_image,
                     const RoiAlignOptions& o) {
  return roi_align(input, boxes_to_rois(boxes_per_image), o);
}

at::Tensor crop_and_resize(const at::Tensor& image, const at::Tensor& boxes,
                           const at::Tensor& box_indices, const CropAndResizeOptions& o) {
  return CropAndResizeFunction::apply(image, boxes, box_indices, o.crop_size.first,
                                      o.crop_size.second, o.extrapolation_value);
}

}  // namespace detseg
