// Tests: the device-generic rewrites of the box math, provable on the CPU: box coding upcasts
// bf16/fp16 to float32, the host-scalar forms of the scale factors give bit-identical values to
// the former tensor forms, the forced match (now a scatter with amin, no host loop) gives the
// former lowest-row-wins result, and per-device anchor caching hands out the CPU tensor itself.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "detseg/ops/anchors.h"
#include "detseg/ops/box_coder.h"
#include "detseg/ops/box_ops.h"
#include "detseg/ops/hard_example_miner.h"
#include "detseg/ops/matcher.h"
#include "ops/ops_test_util.h"

namespace detseg {
namespace {

using testing::expect_close;

at::Tensor random_boxes(int64_t n, double size, uint64_t seed) {
  at::manual_seed(seed);
  auto xy = at::rand({n, 2}) * size, wh = at::rand({n, 2}) * (size / 4) + 1;
  return at::cat({xy, xy + wh}, 1);
}

TEST(DeviceGeneric, DecodeOfLowPrecisionCodesReturnsFloat32) {
  const at::Tensor anchors = random_boxes(300, 800, 1);
  at::manual_seed(2);
  const at::Tensor codes = at::randn({2, 300, 4}) * 0.5;
  BoxCoderOptions o;
  o.scale_factors = std::array<double, 4>{10, 10, 5, 5};
  o.max_log_size = std::log(1000.0 / 16);
  for (auto dt : {at::kBFloat16, at::kHalf}) {
    const at::Tensor low = codes.to(dt);
    const at::Tensor got = decode_boxes(low, anchors, o);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    // Exactly the float decode of the rounded codes: the upcast happens before any arithmetic.
    EXPECT_TRUE(at::equal(got, decode_boxes(low.to(at::kFloat), anchors, o)));
    // Encoding low-precision boxes gives float32 codes too.
    EXPECT_EQ(encode_boxes(anchors.to(dt), anchors, o).scalar_type(), at::kFloat);
  }
  // Unscaled (EfficientDet) decode of bf16 deltas as well.
  EXPECT_EQ(decode_boxes(codes.to(at::kBFloat16), anchors).scalar_type(), at::kFloat);
}

TEST(DeviceGeneric, ScalarScaleFactorsAreBitIdenticalToTensorForm) {
  // The former code multiplied/divided by a [4] tensor of the factors; the host-scalar columns
  // must give the same bits.
  const at::Tensor anchors = random_boxes(500, 1000, 3);
  const at::Tensor boxes = random_boxes(500, 1000, 4);
  const std::array<double, 4> s{10, 10, 5, 5};
  BoxCoderOptions o;
  o.scale_factors = s;
  const at::Tensor scale = at::tensor({s[0], s[1], s[2], s[3]}, boxes.options());
  const at::Tensor unscaled = encode_boxes(boxes, anchors);
  EXPECT_TRUE(at::equal(encode_boxes(boxes, anchors, o), unscaled * scale));
  at::manual_seed(5);
  const at::Tensor codes = at::randn({500, 4});
  EXPECT_TRUE(at::equal(decode_boxes(codes, anchors, o), decode_boxes(codes / scale, anchors)));
  // scale_boxes and change_coordinate_frame likewise.
  const at::Tensor sb = at::tensor({0.37, 1.9, 0.37, 1.9}, boxes.options());
  EXPECT_TRUE(at::equal(scale_boxes(boxes, 1.9, 0.37), boxes * sb));
  const Window w{13.5, 7.25, 613.0, 401.5};
  const at::Tensor origin = at::tensor({w[0], w[1], w[0], w[1]}, boxes.options());
  const at::Tensor size = at::tensor({w[2] - w[0], w[3] - w[1], w[2] - w[0], w[3] - w[1]}, boxes.options());
  EXPECT_TRUE(at::equal(change_coordinate_frame(boxes, w), (boxes - origin) / size));
}

// The former host loop: rows in reverse order write their best column, so the lowest row wins.
at::Tensor forced_match_reference(const at::Tensor& sim, const ArgMaxMatcherOptions& o,
                                   const at::Tensor& valid_rows) {
  ArgMaxMatcherOptions no_force = o;
  no_force.force_match_for_each_row = false;
  at::Tensor match = argmax_match(sim, no_force, valid_rows).clone();
  at::Tensor s = sim;
  if (valid_rows.defined())
    s = at::where(valid_rows.unsqueeze(1), sim, at::full({}, -INFINITY, sim.options()));
  const at::Tensor col = std::get<1>(s.max(1));
  for (int64_t r = sim.size(0) - 1; r >= 0; --r) {
    if (valid_rows.defined() && !valid_rows[r].item<bool>()) continue;
    match[col[r].item<int64_t>()] = r;
  }
  return match;
}

TEST(DeviceGeneric, ForcedMatchEqualsLowestRowWinsLoop) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    at::manual_seed(seed);
    const int64_t m = 1 + static_cast<int64_t>(seed % 7), n = 3 + static_cast<int64_t>(seed % 11);
    // Coarse values so that several rows share a best column and ties occur.
    const at::Tensor sim = (at::rand({m, n}) * 4).floor() / 4;
    for (bool with_valid : {false, true}) {
      const at::Tensor valid = with_valid ? at::rand({m}).gt(0.3) : at::Tensor();
      ArgMaxMatcherOptions o;
      o.matched_threshold = 0.7;
      o.unmatched_threshold = 0.3;
      o.force_match_for_each_row = true;
      EXPECT_TRUE(at::equal(argmax_match(sim, o, valid), forced_match_reference(sim, o, valid)))
          << "seed " << seed << " valid rows " << with_valid;
    }
  }
}

TEST(DeviceGeneric, DeviceCachedTensorHandsOutTheCpuTensorOnCpu) {
  const at::Tensor a = multilevel_anchors(testing::two_level_anchor_options());
  DeviceCachedTensor cache(a);
  EXPECT_TRUE(cache.defined());
  EXPECT_TRUE(cache.on(at::kCPU).is_same(a));
  EXPECT_TRUE(cache.cpu().is_same(a));
  DeviceCachedTensor copy = cache;  // copies share the cache
  EXPECT_TRUE(copy.on(at::Device(at::kCPU)).is_same(a));
}

TEST(DeviceGeneric, HardMinerSelectionIsOnTheLossesDevice) {
  at::manual_seed(7);
  const at::Tensor boxes = random_boxes(40, 200, 8);
  const at::Tensor loc = at::rand({1, 40}), cls = at::rand({1, 40});
  HardExampleMinerOptions o;
  o.num_hard_examples = 10;
  o.max_negatives_per_positive = 2.0;
  const at::Tensor match = at::randint(-2, 3, {40}, at::kLong);
  MinedLosses r = mine_hard_examples(loc, cls, {boxes}, o, {match});
  ASSERT_EQ(r.selected.size(), 1u);
  EXPECT_EQ(r.selected[0].device(), loc.device());
  EXPECT_EQ(r.location_loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(r.location_loss.item<double>(), loc[0].index_select(0, r.selected[0]).sum().item<double>(), 1e-6);
}

}  // namespace
}  // namespace detseg
