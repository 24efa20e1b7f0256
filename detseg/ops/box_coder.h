// Implements: the Faster R-CNN box coder (ty, tx, th, tw) relative to anchors, with optional scale
// factors, on absolute xyxy boxes.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <limits>
#include <optional>

namespace detseg {

struct BoxCoderOptions {
  // Multipliers for (ty, tx, th, tw); the OD API's Faster R-CNN uses {10, 10, 5, 5},
  // EfficientDet none (all 1).
  std::optional<std::array<double, 4>> scale_factors;
  // decode clamps th/tw (after removing the scale factors) to at most this before exp, so huge
  // predictions cannot overflow. Infinity (the default) keeps decode the exact inverse of encode;
  // torchvision uses log(1000 / 16).
  double max_log_size = std::numeric_limits<double>::infinity();
};

// encode: boxes [N, 4] xyxy and anchors [N, 4] xyxy -> codes [N, 4] = (ty, tx, th, tw) * scale:
//   ty = (cy - cya) / ha, tx = (cx - cxa) / wa, th = log(h / ha), tw = log(w / wa),
// with 1e-8 added to every height and width (as the OD API does) so empty boxes stay finite.
at::Tensor encode_boxes(const at::Tensor& boxes, const at::Tensor& anchors,
                        const BoxCoderOptions& options = {});
// decode: the inverse; codes [N, 4] (or [..., N, 4] broadcasting over anchors [N, 4]) -> xyxy.
at::Tensor decode_boxes(const at::Tensor& codes, const at::Tensor& anchors,
                        const BoxCoderOptions& options = {});

}  // namespace detseg
