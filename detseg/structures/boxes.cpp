// Implements: Boxes (xyxy + same-length fields) and the box layout converters.
#include "detseg/structures/boxes.h"

#include "detseg/core/error.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

void check_boxes(const at::Tensor& t, const char* what) {
  DETSEG_CHECK(t.defined(), what, ": expected a [N, 4] box tensor, got an undefined tensor");
  DETSEG_CHECK(t.dim() == 2 && t.size(1) == 4, what, ": expected boxes of shape [N, 4], got ",
               t.sizes());
  DETSEG_CHECK(at::isFloatingType(t.scalar_type()), what, ": expected floating boxes, got ",
               t.scalar_type());
  // The NaN scan reads a value on the host: CPU only, so the device training path does not
  // synchronise on every box operation (see host_value_checks).
  DETSEG_CHECK(t.numel() == 0 || !host_value_checks(t) || !at::isnan(t).any().item<bool>(), what,
               ": boxes contain NaN");
}

Boxes::Boxes(at::Tensor xyxy) : boxes(std::move(xyxy)) { check_boxes(boxes, "Boxes"); }

const at::Tensor& Boxes::field(const std::string& name) const {
  for (const auto& kv : extra)
    if (kv.first == name) return kv.second;
  std::string known;
  for (const auto& kv : extra) known += (known.empty() ? "" : ", ") + kv.first;
  throw Error(str("Boxes: no field '", name, "' (fields: ", known.empty() ? "none" : known, ")"));
}

bool Boxes::has_field(const std::string& name) const {
  for (const auto& kv : extra)
    if (kv.first == name) return true;
  return false;
}

void Boxes::set_field(const std::string& name, at::Tensor value) {
  DETSEG_CHECK(value.defined() && value.dim() >= 1 && value.size(0) == size(), "Boxes: field '",
               name, "' must have first dimension ", size(), ", got ",
               value.defined() ? value.sizes() : at::IntArrayRef{});
  for (auto& kv : extra)
    if (kv.first == name) {
      kv.second = std::move(value);
      return;
    }
  extra.emplace_back(name, std::move(value));
}

namespace {
at::Tensor index_rows(const at::Tensor& t, const at::Tensor& index) {
  if (!t.defined()) return t;
  if (index.scalar_type() == at::kBool) return t.index({index});
  return t.index_select(0, index.to(t.device()));
}
}  // namespace

Boxes Boxes::index(const at::Tensor& index) const {
  DETSEG_CHECK(index.dim() == 1, "Boxes::index: expected a 1-D index, got ", index.sizes());
  DETSEG_CHECK(index.scalar_type() == at::kBool || index.scalar_type() == at::kLong,
               "Boxes::index: expected int64 indices or a bool mask, got ", index.scalar_type());
  if (index.scalar_type() == at::kBool)
    DETSEG_CHECK(index.size(0) == size(), "Boxes::index: mask has ", index.size(0),
                 " entries for ", size(), " boxes");
  Boxes out;
  out.boxes = index_rows(boxes, index);
  out.scores = index_rows(scores, index);
  out.classes = index_rows(classes, index);
  out.masks = index_rows(masks, index);
  for (const auto& kv : extra) out.extra.emplace_back(kv.first, index_rows(kv.second, index));
  return out;
}

Boxes Boxes::to(const at::Device& device) const {
  auto move = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  Boxes out;
  out.boxes = move(boxes);
  out.scores = move(scores);
  out.classes = move(classes);
  out.masks = move(masks);
  for (const auto& kv : extra) out.extra.emplace_back(kv.first, move(kv.second));
  return out;
}

void Boxes::validate() const {
  check_boxes(boxes, "Boxes");
  auto check = [&](const at::Tensor& t, const std::string& name) {
    if (t.defined())
      DETSEG_CHECK(t.dim() >= 1 && t.size(0) == size(), "Boxes: field '", name, "' has shape ",
                   t.sizes(), " for ", size(), " boxes");
  };
  check(scores, "scores");
  check(classes, "classes");
  check(masks, "masks");
  for (const auto& kv : extra) check(kv.second, kv.first);
}

Boxes cat(const std::vector<Boxes>& parts) {
  DETSEG_CHECK(!parts.empty(), "cat(Boxes): nothing to concatenate");
  auto join = [&](auto get, const std::string& name) -> at::Tensor {
    std::vector<at::Tensor> ts;
    bool first = get(parts[0]).defined();
    for (const auto& p : parts) {
      DETSEG_CHECK(get(p).defined() == first, "cat(Boxes): field '", name,
                   "' is present in some parts and absent in others");
      if (first) ts.push_back(get(p));
    }
    return first ? at::cat(ts, 0) : at::Tensor();
  };
  Boxes out;
  out.boxes = join([](const Boxes& b) -> const at::Tensor& { return b.boxes; }, "boxes");
  out.scores = join([](const Boxes& b) -> const at::Tensor& { return b.scores; }, "scores");
  out.classes = join([](const Boxes& b) -> const at::Tensor& { return b.classes; }, "classes");
  out.masks = join([](const Boxes& b) -> const at::Tensor& { return b.masks; }, "masks");
  for (const auto& kv : parts[0].extra) {
    std::vector<at::Tensor> ts;
    for (const auto& p : parts) ts.push_back(p.field(kv.first));
    out.extra.emplace_back(kv.first, at::cat(ts, 0));
  }
  return out;
}

namespace {
void check_four(const at::Tensor& t, const char* what) {
  DETSEG_CHECK(t.defined() && t.dim() == 2 && t.size(1) == 4, what,
               ": expected a [N, 4] tensor, got ", t.defined() ? t.sizes() : at::IntArrayRef{});
}
}  // namespace

at::Tensor xywh_to_xyxy(const at::Tensor& b) {
  check_four(b, "xywh_to_xyxy");
  auto xy = b.slice(1, 0, 2);
  return at::cat({xy, xy + b.slice(1, 2, 4)}, 1);
}

at::Tensor xyxy_to_xywh(const at::Tensor& b) {
  check_four(b, "xyxy_to_xywh");
  auto xy = b.slice(1, 0, 2);
  return at::cat({xy, b.slice(1, 2, 4) - xy}, 1);
}

at::Tensor cxcywh_to_xyxy(const at::Tensor& b) {
  check_four(b, "cxcywh_to_xyxy");
  auto c = b.slice(1, 0, 2);
  auto half = b.slice(1, 2, 4) * 0.5;
  return at::cat({c - half, c + half}, 1);
}

at::Tensor xyxy_to_cxcywh(const at::Tensor& b) {
  check_four(b, "xyxy_to_cxcywh");
  auto lo = b.slice(1, 0, 2), hi = b.slice(1, 2, 4);
  return at::cat({(lo + hi) * 0.5, hi - lo}, 1);
}

at::Tensor normalized_yxyx_to_xyxy(const at::Tensor& b, double height, double width) {
  check_four(b, "normalized_yxyx_to_xyxy");
  DETSEG_CHECK(height > 0 && width > 0, "normalized_yxyx_to_xyxy: image size must be positive, got ",
               height, "x", width);
  auto u = b.unbind(1);
  return at::stack({u[1] * width, u[0] * height, u[3] * width, u[2] * height}, 1);
}

at::Tensor xyxy_to_normalized_yxyx(const at::Tensor& b, double height, double width) {
  check_four(b, "xyxy_to_normalized_yxyx");
  DETSEG_CHECK(height > 0 && width > 0, "xyxy_to_normalized_yxyx: image size must be positive, got ",
               height, "x", width);
  auto u = b.unbind(1);
  return at::stack({u[1] / height, u[0] / width, u[3] / height, u[2] / width}, 1);
}

}  // namespace detseg
