// Implements: tests of the CUDA kernels against the CPU kernels (nms, batched_nms, soft_nms,
// multiclass NMS, roi_align and crop_and_resize forward and backward) on random and edge inputs.
// Every test is skipped where no CUDA device is visible.
#include "detseg/core/error.h"
#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/cuda_kernels.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

namespace {

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(cuda_kernels_built()) << "a CUDA device, but detseg was built without CUDA kernels";
    at::manual_seed(19);
  }
};

const at::Device kCuda(at::kCUDA, 0);

// n xyxy boxes in [0, extent]^2 with sides in [1, 1 + extent / 5], so many overlap.
at::Tensor random_boxes(int64_t n, double extent, at::ScalarType type = at::kFloat) {
  auto xy = at::rand({n, 2}, at::kDouble) * extent;
  auto wh = at::rand({n, 2}, at::kDouble) * (extent / 5) + 1;
  return at::cat({xy, xy + wh}, 1).to(type);
}
// Scores in steps of 0.05, so ties are common and the tie order is tested.
at::Tensor tied_scores(int64_t n, at::ScalarType type = at::kFloat) {
  return ((at::rand({n}, at::kDouble) * 20).floor() / 20 + 0.01).to(type);
}

void expect_same_on_cuda(const at::Tensor& cuda_result, const at::Tensor& cpu_result,
                         double tol = 0) {
  ASSERT_TRUE(cuda_result.is_cuda());
  ASSERT_EQ(cuda_result.scalar_type(), cpu_result.scalar_type());
  if (tol == 0 && !at::isFloatingType(cpu_result.scalar_type()))
    EXPECT_EQ(to_vec(cuda_result), to_vec(cpu_result));
  else
    expect_close(cuda_result.cpu(), cpu_result, tol);
}

// Gradients are sums of many scattered terms, added in a different order by the CUDA atomics:
// `tol` relative to the largest gradient (at least absolute).
double gradient_tol(const at::Tensor& want, double tol) {
  return tol * std::max(1.0, want.abs().max().item<double>());
}

}  // namespace

TEST_F(CudaOps, NmsMatchesCpuOnRandomBoxes) {
  for (auto type : {at::kFloat, at::kDouble})
    for (int64_t n : {1, 2, 63, 64, 65, 700, 5000})
      for (double thr : {0.0, 0.3, 0.5, 0.8}) {
        auto boxes = random_boxes(n, 200, type);
        auto scores = tied_scores(n, type);
        SCOPED_TRACE(::testing::Message() << "n=" << n << " thr=" << thr << " " << type);
        expect_same_on_cuda(nms(boxes.to(kCuda), scores.to(kCuda), thr), nms(boxes, scores, thr));
      }
}

TEST_F(CudaOps, NmsEdgeCases) {
  auto none = nms(at::zeros({0, 4}, kCuda), at::zeros({0}, kCuda), 0.5);
  EXPECT_TRUE(none.is_cuda());
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.scalar_type(), at::kLong);
  // Identical boxes with equal scores (IoU 1 is not > 1), points (IoU 0/0) and a NaN error.
  auto four = F({0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30, 0, 0, 10, 10}, {4, 4});
  auto four_scores = F({0.9f, 0.8f, 0.7f, 0.9f}, {4});
  for (double thr : {0.5, 0.7, 1.0})
    expect_same_on_cuda(nms(four.to(kCuda), four_scores.to(kCuda), thr), nms(four, four_scores, thr));
  auto points = F({2, 2, 2, 2, 2, 2, 2, 2}, {2, 4});
  EXPECT_EQ(to_vec(nms(points.to(kCuda), F({0.2f, 0.9f}, {2}).to(kCuda), 0.5)),
            (std::vector<int64_t>{1, 0}));
  EXPECT_THROW(nms(four.to(kCuda), F({0.9f, NAN, 0.7f, 0.9f}, {4}).to(kCuda), 0.5), Error);
}

TEST_F(CudaOps, NmsHundredThousandBoxes) {
  const int64_t n = 100000;
  auto boxes = random_boxes(n, 3000);
  auto scores = at::rand({n});
  expect_same_on_cuda(nms(boxes.to(kCuda), scores.to(kCuda), 0.5), nms(boxes, scores, 0.5));
}

TEST_F(CudaOps, BatchedNmsManyClasses) {
  for (int64_t classes : {1, 7, 80, 1000}) {
    const int64_t n = 4000;
    auto boxes = random_boxes(n, 300);
    auto scores = tied_scores(n);
    // Arbitrary ids, negative ones included.
    auto ids = at::randint(classes, {n}, at::kLong) * 37 - 100;
    SCOPED_TRACE(::testing::Message() << classes << " classes");
    expect_same_on_cuda(batched_nms(boxes.to(kCuda), scores.to(kCuda), ids.to(kCuda), 0.5),
                        batched_nms(boxes, scores, ids, 0.5));
  }
  auto none = batched_nms(at::zeros({0, 4}, kCuda), at::zeros({0}, kCuda),
                          at::zeros({0}, at::TensorOptions(at::kLong).device(kCuda)), 0.5);
  EXPECT_TRUE(none.is_cuda());
  EXPECT_EQ(none.numel(), 0);
}

TEST_F(CudaOps, SoftNmsBothMethodsMatchCpu) {
  for (auto method : {SoftNmsMethod::kLinear, SoftNmsMethod::kGaussian})
    for (int64_t max_output : {int64_t(-1), int64_t(0), int64_t(25)})
      for (int64_t n : {0, 1, 300, 2000}) {
        SoftNmsOptions o;
        o.method = method;
        o.max_output = max_output;
        o.iou_threshold = method == SoftNmsMethod::kLinear ? 0.3 : 0.9;
        auto boxes = random_boxes(n, 150);
        auto scores = tied_scores(n);
        SCOPED_TRACE(::testing::Message() << "n=" << n << " max_output=" << max_output << " linear="
                                          << (method == SoftNmsMethod::kLinear));
        auto cpu = soft_nms(boxes, scores, o);
        auto gpu = soft_nms(boxes.to(kCuda), scores.to(kCuda), o);
        expect_same_on_cuda(gpu.indices, cpu.indices);
        expect_same_on_cuda(gpu.scores, cpu.scores, 1e-5);
      }
}

TEST_F(CudaOps, MulticlassNmsMatchesCpu) {
  const int64_t n = 500, classes = 6;
  auto shared_boxes = random_boxes(n, 100);
  auto per_class_boxes = random_boxes(n * classes, 100).view({n, classes, 4});
  auto scores = tied_scores(n * classes).view({n, classes});
  for (bool per_class : {false, true})
    for (double sigma : {0.0, 0.5}) {
      MultiClassNmsOptions o;
      o.score_threshold = 0.3;
      o.iou_threshold = 0.5;
      o.max_per_class = 40;
      o.max_total = 100;
      o.clip_window = Window{5, 5, 90, 95};
      o.change_coordinate_frame = true;
      o.soft_nms_sigma = sigma;
      const auto& boxes = per_class ? per_class_boxes : shared_boxes;
      SCOPED_TRACE(::testing::Message() << "per_class=" << per_class << " sigma=" << sigma);
      auto cpu = multiclass_nms(boxes, scores, o);
      auto gpu = multiclass_nms(boxes.to(kCuda), scores.to(kCuda), o);
      expect_same_on_cuda(gpu.field("indices"), cpu.field("indices"));
      expect_same_on_cuda(gpu.classes, cpu.classes);
      expect_same_on_cuda(gpu.scores, cpu.scores, 1e-6);
      expect_same_on_cuda(gpu.boxes, cpu.boxes, 1e-6);
    }
  // The padded batch form, with per-image valid counts.
  MultiClassNmsOptions o;
  o.score_threshold = 0.2;
  o.max_total = 50;
  auto batch_boxes = random_boxes(3 * n, 100).view({3, n, 4});
  auto batch_scores = tied_scores(3 * n * classes).view({3, n, classes});
  auto valid = L({n, 0, 123});
  auto cpu = batch_multiclass_nms(batch_boxes, batch_scores, o, valid);
  auto gpu = batch_multiclass_nms(batch_boxes.to(kCuda), batch_scores.to(kCuda), o, valid.to(kCuda));
  expect_same_on_cuda(gpu.num_detections, cpu.num_detections);
  expect_same_on_cuda(gpu.classes, cpu.classes);
  expect_same_on_cuda(gpu.scores, cpu.scores, 1e-6);
  expect_same_on_cuda(gpu.boxes, cpu.boxes, 1e-6);
}

TEST_F(CudaOps, RoiAlignForwardAndBackwardMatchCpu) {
  for (auto type : {at::kFloat, at::kDouble}) {
    const double tol = type == at::kFloat ? 1e-5 : 1e-10;
    auto input = at::randn({2, 3, 17, 23}, type);
    // Rows (batch, x1, y1, x2, y2) in image coordinates of a stride-2 map: inside, partly and
    // wholly outside the image, inverted and tiny regions.
    auto rois = at::cat({at::randint(2, {40, 1}, at::kDouble),
                         at::rand({40, 4}, at::kDouble) * 70 - 15},
                        1)
                    .to(type);
    for (int64_t ratio : {-1, 0, 2})
      for (bool aligned : {false, true}) {
        RoiAlignOptions o;
        o.output_size = {5, 4};
        o.spatial_scale = 0.5;
        o.sampling_ratio = ratio;
        o.aligned = aligned;
        SCOPED_TRACE(::testing::Message() << type << " ratio=" << ratio << " aligned=" << aligned);
        auto cpu = roi_align_forward(input, rois, o);
        expect_same_on_cuda(roi_align_forward(input.to(kCuda), rois.to(kCuda), o), cpu, tol);
        auto grad = at::randn(cpu.sizes(), type);
        auto want = roi_align_backward(grad, rois, input.sizes(), o);
        expect_same_on_cuda(roi_align_backward(grad.to(kCuda), rois.to(kCuda), input.sizes(), o),
                            want, gradient_tol(want, tol));
      }
  }
}

TEST_F(CudaOps, RoiAlignAutogradHalfAndEmpty) {
  RoiAlignOptions o;
  o.output_size = {7, 7};
  o.spatial_scale = 0.25;
  auto input = at::randn({2, 8, 32, 32});
  auto rois = at::cat({at::randint(2, {30, 1}, at::kFloat), at::rand({30, 4}) * 100}, 1);
  // The autograd wrapper: output and input gradient on the device, equal to the CPU ones.
  auto x_cpu = input.clone().requires_grad_(true);
  auto x_gpu = input.to(kCuda).requires_grad_(true);
  auto y_cpu = roi_align(x_cpu, rois, o);
  auto y_gpu = roi_align(x_gpu, rois.to(kCuda), o);
  auto w = at::randn(y_cpu.sizes());
  (y_cpu * w).sum().backward();
  (y_gpu * w.to(kCuda)).sum().backward();
  expect_same_on_cuda(y_gpu.detach(), y_cpu.detach(), 1e-5);
  expect_same_on_cuda(x_gpu.grad(), x_cpu.grad(), gradient_tol(x_cpu.grad(), 1e-5));
  // Half and BFloat16 compute in float: close to the float result.
  for (auto type : {at::kHalf, at::kBFloat16}) {
    auto low = roi_align_forward(input.to(kCuda, type), rois.to(kCuda), o);
    EXPECT_EQ(low.scalar_type(), type);
    expect_close(low.cpu().to(at::kFloat), y_cpu.detach(), type == at::kHalf ? 1e-2 : 5e-2);
    auto grad = roi_align_backward(w.to(kCuda, type), rois.to(kCuda), input.sizes(), o);
    EXPECT_EQ(grad.scalar_type(), type);
    expect_close(grad.cpu().to(at::kFloat), x_cpu.grad(), type == at::kHalf ? 1e-2 : 5e-2);
  }
  // No regions: [0, C, h, w] forward, zero gradient.
  auto none = roi_align_forward(input.to(kCuda), at::zeros({0, 5}, kCuda), o);
  EXPECT_TRUE(none.is_cuda());
  EXPECT_EQ(none.sizes(), (at::IntArrayRef{0, 8, 7, 7}));
  auto zero_grad = roi_align_backward(at::zeros({0, 8, 7, 7}, kCuda), at::zeros({0, 5}, kCuda),
                                      input.sizes(), o);
  EXPECT_TRUE(zero_grad.is_cuda());
  EXPECT_EQ(zero_grad.abs().sum().item<float>(), 0.f);
}

TEST_F(CudaOps, CropAndResizeForwardAndBackwardMatchCpu) {
  for (auto type : {at::kFloat, at::kDouble}) {
    const double tol = type == at::kFloat ? 1e-5 : 1e-10;
    auto image = at::randn({3, 4, 19, 13}, type);
    // Normalized (y1, x1, y2, x2), partly outside [0, 1], flipped ones (y2 < y1) included.
    auto boxes = at::rand({50, 4}) * 1.4 - 0.2;
    boxes[0] = at::tensor({0.9f, 0.1f, 0.2f, 0.8f});  // y flipped
    boxes[1] = at::tensor({0.5f, 0.5f, 0.5f, 0.5f});  // a point
    auto indices = at::randint(3, {50}, at::kLong);
    const std::vector<std::pair<int64_t, int64_t>> crop_sizes{{1, 1}, {7, 5}, {14, 14}};
    for (const auto& crop : crop_sizes) {
      CropAndResizeOptions o;
      o.crop_size = crop;
      o.extrapolation_value = 0.25;
      SCOPED_TRACE(::testing::Message() << type << " crop " << crop.first << "x" << crop.second);
      auto cpu = crop_and_resize_forward(image, boxes, indices, o);
      expect_same_on_cuda(crop_and_resize_forward(image.to(kCuda), boxes.to(kCuda),
                                                  indices.to(kCuda), o),
                          cpu, tol);
      auto grad = at::randn(cpu.sizes(), type);
      auto want = crop_and_resize_backward(grad, boxes, indices, image.sizes(), o);
      expect_same_on_cuda(crop_and_resize_backward(grad.to(kCuda), boxes.to(kCuda),
                                                   indices.to(kCuda), image.sizes(), o),
                          want, gradient_tol(want, tol));
    }
  }
  // The autograd wrapper, int32 indices, and no boxes.
  CropAndResizeOptions o;
  o.crop_size = {6, 6};
  auto image = at::randn({2, 3, 10, 12});
  auto boxes = at::rand({9, 4});
  auto indices = at::randint(2, {9}, at::kInt);
  auto x_cpu = image.clone().requires_grad_(true);
  auto x_gpu = image.to(kCuda).requires_grad_(true);
  crop_and_resize(x_cpu, boxes, indices, o).sum().backward();
  auto y_gpu = crop_and_resize(x_gpu, boxes.to(kCuda), indices.to(kCuda), o);
  y_gpu.sum().backward();
  EXPECT_TRUE(y_gpu.is_cuda());
  expect_same_on_cuda(x_gpu.grad(), x_cpu.grad(), gradient_tol(x_cpu.grad(), 1e-5));
  auto none = crop_and_resize_forward(image.to(kCuda), at::zeros({0, 4}, kCuda),
                                      at::zeros({0}, at::TensorOptions(at::kLong).device(kCuda)), o);
  EXPECT_EQ(none.sizes(), (at::IntArrayRef{0, 3, 6, 6}));
}
