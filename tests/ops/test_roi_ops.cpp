// Implements: tests of roi_align and crop_and_resize: hand-worked values, numerical gradient
// checks, bad input; and the torchvision side-by-side fixtures (box_iou, nms, batched_nms,
// roi_align forward and input gradient) from tests/fixtures/make_ops_fixtures.py.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detseg/core/error.h"
#include "detseg/ops/box_ops.h"
#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"
#include "ops/ops_test_util.h"
#include "test_paths.h"

using namespace detseg;
using namespace detseg::testing;

namespace {
// v(y, x) = 4y + x on a 1x1x4x4 map: bilinear sampling of a linear function is exact.
at::Tensor ramp() { return at::arange(16, at::kFloat).view({1, 1, 4, 4}); }

// Checks d(sum(f(x) * w))/dx from autograd against central differences, on double inputs.
template <typename Fn>
void check_gradient(Fn f, at::Tensor x) {
  x = x.to(at::kDouble).requires_grad_(true);
  at::Tensor y = f(x);
  auto w = at::rand(y.sizes(), at::kDouble);
  (y * w).sum().backward();
  auto analytic = x.grad().clone();
  auto xd = x.detach().clone();
  auto flat = xd.view(-1);
  const double eps = 1e-4;
  double worst = 0;
  for (int64_t i = 0; i < flat.numel(); i += 3) {
    const double v = flat[i].item<double>();
    flat[i] = v + eps;
    const at::Tensor up_t = f(xd);
    const double up = (up_t * w).sum().item<double>();
    flat[i] = v - eps;
    const at::Tensor down_t = f(xd);
    const double down = (down_t * w).sum().item<double>();
    flat[i] = v;
    worst = std::max(worst, std::abs((up - down) / (2 * eps) - analytic.view(-1)[i].item<double>()));
  }
  EXPECT_LT(worst, 1e-6);
}

nlohmann::json load_fixture() {
  std::ifstream in(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/ops/torchvision_ops.json");
  EXPECT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}
at::Tensor J(const nlohmann::json& j, std::vector<int64_t> shape) {
  return F(j.get<std::vector<float>>(), shape);
}
}  // namespace

TEST(RoiAlign, HandWorkedRamp) {
  RoiAlignOptions o;
  o.output_size = {2, 2};
  o.sampling_ratio = 2;
  auto rois = F({0, 0, 0, 4, 4}, {1, 5});
  // Not aligned: samples at 0.5, 1.5 | 2.5, 3.5 (3.5 clamps to the last pixel, 3).
  expect_close(roi_align(ramp(), rois, o), F({5, 6.75f, 12, 13.75f}, {1, 1, 2, 2}));
  o.aligned = true;  // shifted by -0.5: samples at 0, 1 | 2, 3
  expect_close(roi_align(ramp(), rois, o), F({2.5f, 4.5f, 10.5f, 12.5f}, {1, 1, 2, 2}));
  // A region entirely outside the map gives zeros; no regions gives [0, C, h, w].
  expect_close(roi_align(ramp(), F({0, 10, 10, 12, 12}, {1, 5}), o), at::zeros({1, 1, 2, 2}));
  EXPECT_EQ(roi_align(ramp(), at::zeros({0, 5}), o).sizes(), (at::IntArrayRef{0, 1, 2, 2}));
  // An inverted region (x2 < x1, y2 < y1) in aligned mode with an adaptive grid has no samples.
  o.sampling_ratio = -1;
  expect_close(roi_align(ramp(), F({0, 3, 3, 1, 0, 0, 3, 1, 1, 3}, {2, 5}), o),
               at::zeros({2, 1, 2, 2}));
  o.sampling_ratio = 2;
  // The list form equals the [K, 5] form.
  expect_close(roi_align(ramp(), std::vector<at::Tensor>{F({0, 0, 4, 4}, {1, 4})}, o),
               roi_align(ramp(), rois, o));
}

TEST(RoiAlign, GradientMatchesFiniteDifferences) {
  at::manual_seed(7);
  auto rois = at::tensor({0.0, 1.2, 0.7, 9.1, 7.3, 1.0, -2.0, 3.0, 5.5, 13.0, 0.0, 4.0, 4.0, 4.5,
                          4.2},
                         at::kDouble)
                  .view({3, 5});
  for (bool aligned : {true, false}) {
    RoiAlignOptions o;
    o.output_size = {3, 2};
    o.spatial_scale = 0.5;
    o.sampling_ratio = aligned ? 2 : -1;
    o.aligned = aligned;
    check_gradient([&](const at::Tensor& x) { return roi_align(x, rois, o); },
                   at::randn({2, 2, 6, 7}));
  }
}

TEST(RoiAlign, BadInput) {
  RoiAlignOptions o;
  EXPECT_THROW(roi_align(ramp(), F({0, 0, 0, 4}, {1, 4}), o), Error);
  EXPECT_THROW(roi_align(ramp(), F({1, 0, 0, 4, 4}, {1, 5}), o), Error);  // batch index 1 of 1
  EXPECT_THROW(roi_align(ramp(), F({0, 0, NAN, 4, 4}, {1, 5}), o), Error);
  EXPECT_THROW(roi_align(ramp().view({4, 4}), F({0, 0, 0, 4, 4}, {1, 5}), o), Error);
  o.output_size = {0, 7};
  EXPECT_THROW(roi_align(ramp(), F({0, 0, 0, 4, 4}, {1, 5}), o), Error);
}

TEST(CropAndResize, HandWorkedTfSemantics) {
  auto img = at::arange(9, at::kFloat).view({1, 1, 3, 3});  // v(y, x) = 3y + x
  CropAndResizeOptions o;
  o.crop_size = {3, 3};
  auto idx = L({0});
  expect_close(crop_and_resize(img, F({0, 0, 1, 1}, {1, 4}), idx, o), img);
  o.crop_size = {2, 2};
  expect_close(crop_and_resize(img, F({0, 0, 0.5f, 0.5f}, {1, 4}), idx, o),
               F({0, 1, 3, 4}, {1, 1, 2, 2}));
  o.crop_size = {1, 1};  // a single sample at the box centre
  expect_close(crop_and_resize(img, F({0, 0, 1, 1}, {1, 4}), idx, o), F({4}, {1, 1, 1, 1}));
  o.crop_size = {3, 1};
  o.extrapolation_value = -1;  // rows at y = 0, 1.5, 3: the last is outside
  expect_close(crop_and_resize(img, F({0, 0, 1.5f, 0}, {1, 4}), idx, o),
               F({0, 4.5f, -1}, {1, 1, 3, 1}));
  o.crop_size = {3, 3};  // y2 < y1, x2 < x1 flips the crop
  expect_close(crop_and_resize(img, F({1, 1, 0, 0}, {1, 4}), idx, o), img.flip({2, 3}));
  EXPECT_EQ(crop_and_resize(img, at::zeros({0, 4}), at::zeros({0}, at::kLong), o).size(0), 0);
}

TEST(CropAndResize, GradientAndBadInput) {
  at::manual_seed(9);
  auto boxes = F({0.1f, 0.2f, 0.8f, 0.9f, -0.2f, 0.3f, 0.6f, 1.3f, 0.5f, 0.5f, 0.5f, 0.5f}, {3, 4});
  auto idx = L({0, 1, 1});
  CropAndResizeOptions o;
  o.crop_size = {4, 3};
  o.extrapolation_value = 0.5;
  check_gradient([&](const at::Tensor& x) { return crop_and_resize(x, boxes, idx, o); },
                 at::randn({2, 2, 5, 6}));
  auto img = at::zeros({2, 1, 4, 4});
  EXPECT_THROW(crop_and_resize(img, boxes, L({0, 1}), o), Error);
  EXPECT_THROW(crop_and_resize(img, boxes, L({0, 2, 1}), o), Error);
  EXPECT_THROW(crop_and_resize(img, F({0, 0, NAN, 1}, {1, 4}), L({0}), o), Error);
  EXPECT_THROW(crop_and_resize(img, boxes, idx.to(at::kFloat), o), Error);
}

TEST(Torchvision, BoxIou) {
  auto j = load_fixture()["iou"];
  expect_close(box_iou_pairwise(J(j["boxes1"], {6, 4}), J(j["boxes2"], {5, 4})),
               J(j["iou"], {6, 5}), 1e-5);
}

TEST(Torchvision, NmsKeepsIdenticalIndices) {
  for (const auto& c : load_fixture()["nms"]) {
    const int64_t n = static_cast<int64_t>(c["scores"].size());
    auto boxes = J(c["boxes"], {n, 4}), scores = J(c["scores"], {n});
    for (size_t t = 0; t < c["iou_thresholds"].size(); ++t)
      EXPECT_EQ(to_vec(nms(boxes, scores, c["iou_thresholds"][t].get<double>())),
                c["keeps"][t].get<std::vector<int64_t>>())
          << n << " boxes, threshold " << c["iou_thresholds"][t];
  }
}

TEST(Torchvision, BatchedNms) {
  auto c = load_fixture()["batched_nms"];
  const int64_t n = static_cast<int64_t>(c["scores"].size());
  auto keep = batched_nms(J(c["boxes"], {n, 4}), J(c["scores"], {n}),
                          L(c["classes"].get<std::vector<int64_t>>()), c["iou_threshold"]);
  EXPECT_EQ(to_vec(keep), c["keep"].get<std::vector<int64_t>>());
}

TEST(Torchvision, RoiAlignForwardAndGradient) {
  auto j = load_fixture()["roi_align"];
  auto shape = j["input_shape"].get<std::vector<int64_t>>();
  auto rois = J(j["rois"], {6, 5});
  auto grad_out = J(j["grad_output"], {6, shape[1], 3, 4});
  for (const auto& c : j["cases"]) {
    RoiAlignOptions o;
    o.output_size = {3, 4};
    o.spatial_scale = j["spatial_scale"];
    o.sampling_ratio = c["sampling_ratio"];
    o.aligned = c["aligned"];
    auto x = J(j["input"], shape).requires_grad_(true);
    auto y = roi_align(x, rois, o);
    expect_close(y.detach(), J(c["output"], {6, shape[1], 3, 4}), 1e-4);
    if (!c.contains("grad_input")) continue;
    y.backward(grad_out);
    expect_close(x.grad(), J(c["grad_input"], shape), 1e-4);
  }
}
