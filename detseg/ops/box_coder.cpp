// Implements: Faster R-CNN box encoding/decoding.
#include "detseg/ops/box_coder.h"

#include "detseg/core/error.h"
#include "detseg/structures/boxes.h"

namespace detseg {

namespace {
constexpr double kEps = 1e-8;

at::Tensor scale_tensor(const BoxCoderOptions& o, const at::Tensor& like) {
  auto s = o.scale_factors.value_or(std::array<double, 4>{1, 1, 1, 1});
  for (double v : s) DETSEG_CHECK(v > 0, "box coder: scale factors must be > 0, got ", v);
  return at::tensor({s[0], s[1], s[2], s[3]}, like.options());
}
}  // namespace

at::Tensor encode_boxes(const at::Tensor& boxes, const at::Tensor& anchors, const BoxCoderOptions& o) {
  check_boxes(boxes, "encode_boxes(boxes)");
  check_boxes(anchors, "encode_boxes(anchors)");
  DETSEG_CHECK(boxes.size(0) == anchors.size(0), "encode_boxes: ", boxes.size(0), " boxes but ",
               anchors.size(0), " anchors");
  auto a = anchors.to(boxes.scalar_type());
  auto wa = a.select(1, 2) - a.select(1, 0) + kEps, ha = a.select(1, 3) - a.select(1, 1) + kEps;
  auto cxa = (a.select(1, 0) + a.select(1, 2)) * 0.5, cya = (a.select(1, 1) + a.select(1, 3)) * 0.5;
  auto w = boxes.select(1, 2) - boxes.select(1, 0) + kEps;
  auto h = boxes.select(1, 3) - boxes.select(1, 1) + kEps;
  auto cx = (boxes.select(1, 0) + boxes.select(1, 2)) * 0.5;
  auto cy = (boxes.select(1, 1) + boxes.select(1, 3)) * 0.5;
  auto codes = at::stack({(cy - cya) / ha, (cx - cxa) / wa, at::log(h / ha), at::log(w / wa)}, 1);
  return codes * scale_tensor(o, codes);
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
  auto codes = codes_in / scale_tensor(o, codes_in);
  auto a = anchors.to(codes.scalar_type());
  auto wa = a.select(1, 2) - a.select(1, 0) + kEps, ha = a.select(1, 3) - a.select(1, 1) + kEps;
  auto cxa = (a.select(1, 0) + a.select(1, 2)) * 0.5, cya = (a.select(1, 1) + a.select(1, 3)) * 0.5;
  auto ty = codes.select(-1, 0), tx = codes.select(-1, 1);
  auto th = codes.select(-1, 2).clamp_max(o.max_log_size);
  auto tw = codes.select(-1, 3).clamp_max(o.max_log_size);
  auto cy = ty * ha + cya, cx = tx * wa + cxa;
  // Undo the epsilon encode added, so decode(encode(b)) == b.
  auto h = at::exp(th) * ha - kEps, w = at::exp(tw) * wa - kEps;
  return at::stack({cx - w * 0.5, cy - h * 0.5, cx + w * 0.5, cy + h * 0.5}, -1);
}

}  // namespace detseg
