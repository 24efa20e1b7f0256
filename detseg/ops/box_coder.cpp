// Implements: Faster R-CNN box encoding/decoding.
#include "detseg/ops/box_coder.h"

#include "detseg/core/error.h"
#include "detseg/structures/boxes.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

namespace {
constexpr double kEps = 1e-8;

// The (ty, tx, th, tw) multipliers, checked. Applied column by column as host scalars, not as a
// tensor: building a 4-element tensor on an accelerator is a blocking host-to-device copy on
// every call (the values are the same: each column times the same float).
std::array<double, 4> scales_of(const BoxCoderOptions& o) {
  auto s = o.scale_factors.value_or(std::array<double, 4>{1, 1, 1, 1});
  for (double v : s) DETSEG_CHECK(v > 0, "box coder: scale factors must be > 0, got ", v);
  return s;
}

at::Tensor times(const at::Tensor& x, double s) { return s == 1.0 ? x : x * s; }
at::Tensor divided(const at::Tensor& x, double s) { return s == 1.0 ? x : x / s; }
}  // namespace

at::Tensor encode_boxes(const at::Tensor& boxes_in, const at::Tensor& anchors, const BoxCoderOptions& o) {
  check_boxes(boxes_in, "encode_boxes(boxes)");
  check_boxes(anchors, "encode_boxes(anchors)");
  DETSEG_CHECK(boxes_in.size(0) == anchors.size(0), "encode_boxes: ", boxes_in.size(0), " boxes but ",
               anchors.size(0), " anchors");
  // fp32 under mixed precision: bf16 cannot hold pixel coordinates of large images exactly.
  const at::Tensor boxes = upcast_low_precision(boxes_in);
  const auto s = scales_of(o);
  auto a = anchors.to(boxes.scalar_type());
  auto wa = a.select(1, 2) - a.select(1, 0) + kEps, ha = a.select(1, 3) - a.select(1, 1) + kEps;
  auto cxa = (a.select(1, 0) + a.select(1, 2)) * 0.5, cya = (a.select(1, 1) + a.select(1, 3)) * 0.5;
  auto w = boxes.select(1, 2) - boxes.select(1, 0) + kEps;
  auto h = boxes.select(1, 3) - boxes.select(1, 1) + kEps;
  auto cx = (boxes.select(1, 0) + boxes.select(1, 2)) * 0.5;
  auto cy = (boxes.select(1, 1) + boxes.select(1, 3)) * 0.5;
  return at::stack({times((cy - cya) / ha, s[0]), times((cx - cxa) / wa, s[1]),
                    times(at::log(h / ha), s[2]), times(at::log(w / wa), s[3])},
                   1);
}

at::Tensor decode_boxes(const at::Tensor& codes_in, const at::Tensor& anchors,
                        const BoxCoderOptions& o) {
  check_boxes(anchors, "decode_boxes(anchors)");
  DETSEG_CHECK(codes_in.defined() && codes_in.dim() >= 2 && codes_in.size(-1) == 4 &&
                   codes_in.size(-2) == anchors.size(0),
               "decode_boxes: expected codes [..., ", anchors.size(0), ", 4], got ",
               codes_in.defined() ? codes_in.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(at::isFloatingType(codes_in.scalar_type()), "decode_boxes: expected floating codes, got ",
               codes_in.scalar_type());
  // Decoded boxes are fp32 even for bf16/fp16 network outputs (autocast).
  const at::Tensor codes = upcast_low_precision(codes_in);
  const auto s = scales_of(o);
  auto a = anchors.to(codes.scalar_type());
  auto wa = a.select(1, 2) - a.select(1, 0) + kEps, ha = a.select(1, 3) - a.select(1, 1) + kEps;
  auto cxa = (a.select(1, 0) + a.select(1, 2)) * 0.5, cya = (a.select(1, 1) + a.select(1, 3)) * 0.5;
  auto ty = divided(codes.select(-1, 0), s[0]), tx = divided(codes.select(-1, 1), s[1]);
  auto th = divided(codes.select(-1, 2), s[2]).clamp_max(o.max_log_size);
  auto tw = divided(codes.select(-1, 3), s[3]).clamp_max(o.max_log_size);
  auto cy = ty * ha + cya, cx = tx * wa + cxa;
  // Undo the epsilon encode added, so decode(encode(b)) == b.
  auto h = at::exp(th) * ha - kEps, w = at::exp(tw) * wa - kEps;
  return at::stack({cx - w * 0.5, cy - h * 0.5, cx + w * 0.5, cy + h * 0.5}, -1);
}

}  // namespace detseg
