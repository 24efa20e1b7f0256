// Implements: tests of Loader: collate padding, seeded determinism across thread counts, epochs, subsampling, sharding,
// error propagation, and a real-data run on bccd.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data_test_util.h"
#include "detseg/data/dataset.h"
#include "detseg/data/loader.h"
#include "detseg/data/readers/voc.h"
#include "detseg/data/readers/seg_folder.h"

#include <cmath>

using namespace detseg;
using detseg::datatest::error_of;
using detseg::datatest::synthetic_example;

namespace {
// Example i: a (20 + i) x (30 + 2i) image with i % 3 boxes; class = i.
Example make(int64_t i) {
  std::vector<std::vector<float>> boxes;
  for (int64_t k = 0; k < i % 3; ++k) boxes.push_back({1.f + k, 2.f, 10.f + k, 12.f});
  Example ex = synthetic_example(20 + i, 30 + 2 * i, boxes);
  ex.classes.fill_(i);
  ex.image_id = 1000 + i;
  return ex;
}

std::vector<Batch> drain(Loader& loader) {
  std::vector<Batch> out;
  Batch b;
  while (loader.next(b)) out.push_back(b);
  return out;
}

LoaderOptions augmenting(int workers, uint64_t seed) {
  LoaderOptions o;
  o.batch_size = 3;
  o.num_workers = workers;
  o.seed = seed;
  o.epochs = 2;
  o.augment.resize = AugmentOptions::Resize::kScaleJitter;
  o.augment.out_h = o.augment.out_w = 32;
  o.augment.random_flip = true;
  return o;
}
}  // namespace

TEST(Collate, PadsImagesBoxesAndLabelMaps) {
  std::vector<Example> ex = {make(0), make(2)};  // 20x30 with 0 boxes, 22x34 with 2 boxes
  ex[0].label_map = at::full({20, 30}, 1, at::kByte);
  ex[1].label_map = at::full({22, 34}, 2, at::kByte);
  CollateOptions o;
  o.size_divisibility = 8;
  Batch b = collate(ex, o);
  EXPECT_EQ(b.images.sizes(), (at::IntArrayRef{2, 3, 24, 40}));
  EXPECT_TRUE(b.image_sizes.equal(at::tensor({20, 30, 22, 34}, at::kLong).view({2, 2})));
  EXPECT_TRUE(b.num_boxes.equal(at::tensor({0, 2}, at::kLong)));
  EXPECT_EQ(b.boxes.sizes(), (at::IntArrayRef{2, 2, 4}));
  EXPECT_TRUE(b.classes.equal(at::tensor({-1, -1, 2, 2}, at::kLong).view({2, 2})));
  EXPECT_TRUE(b.boxes[1][1].equal(at::tensor({2.f, 2.f, 11.f, 12.f})));
  EXPECT_EQ(b.images[0].narrow(1, 20, 4).abs().sum().item<float>(), 0.f);  // zero padding
  EXPECT_EQ(b.label_maps[0][19][29].item<int64_t>(), 1);
  EXPECT_EQ(b.label_maps[0][20][0].item<int64_t>(), 255);
  EXPECT_EQ(b.image_ids, (std::vector<int64_t>{1000, 1002}));
  // A keep-aspect canvas makes the batch at least that big.
  ex[0].canvas_height = ex[0].canvas_width = 64;
  EXPECT_EQ(collate(ex).images.sizes(), (at::IntArrayRef{2, 3, 64, 64}));
}

TEST(Loader, SameSeedSameBatchesWhateverTheThreads) {
  auto run = [](int workers, uint64_t seed) {
    Loader loader(10, make, augmenting(workers, seed));
    return drain(loader);
  };
  const std::vector<Batch> a = run(0, 7), b = run(3, 7), c = run(1, 7), d = run(3, 8);
  ASSERT_EQ(a.size(), 8u);  // 2 epochs x ceil(10 / 3)
  for (size_t i = 0; i < a.size(); ++i) {
    for (const auto* other : {&b[i], &c[i]}) {
      EXPECT_EQ(a[i].image_ids, other->image_ids);
      EXPECT_TRUE(a[i].images.equal(other->images)) << "batch " << i;
      EXPECT_TRUE(a[i].boxes.equal(other->boxes)) << "batch " << i;
    }
  }
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs |= a[i].image_ids != d[i].image_ids;
  EXPECT_TRUE(differs);
}

TEST(Loader, EachEpochIsAPermutationAndEpochsDiffer) {
  LoaderOptions o = augmenting(2, 1);
  o.augment.resize = AugmentOptions::Resize::kNone;
  o.augment.random_flip = false;
  Loader loader(10, make, o);
  std::vector<Batch> batches = drain(loader);
  ASSERT_EQ(batches.size(), 8u);
  std::vector<int64_t> e0, e1;
  for (const auto& b : batches) {
    auto& e = b.epoch == 0 ? e0 : e1;
    e.insert(e.end(), b.image_ids.begin(), b.image_ids.end());
  }
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  std::vector<int64_t> all(10);
  for (int i = 0; i < 10; ++i) all[static_cast<size_t>(i)] = 1000 + i;
  EXPECT_EQ(e0, all);
  EXPECT_EQ(e1, all);
  EXPECT_EQ(batches.back().size(), 1);  // 10 = 3 + 3 + 3 + 1
}

TEST(Loader, SampleOneOfNAndNoShuffleKeepOrder) {
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  o.sample_1_of_n = 3;
  o.augment.resize = AugmentOptions::Resize::kNone;
  Loader loader(10, make, o);
  std::vector<int64_t> ids;
  for (const auto& b : drain(loader)) ids.insert(ids.end(), b.image_ids.begin(), b.image_ids.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{1000, 1003, 1006, 1009}));
}

TEST(Loader, ShardsAreDisjointAndEqualSized) {
  std::set<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o = augmenting(1, 5);
    o.epochs = 1;
    o.rank = rank;
    o.world_size = 2;
    o.augment.resize = AugmentOptions::Resize::kNone;
    Loader loader(10, make, o);
    EXPECT_EQ(loader.examples_per_epoch(), 5);
    for (const auto& b : drain(loader))
      for (int64_t id : b.image_ids) EXPECT_TRUE(seen.insert(id).second) << "image " << id << " on two ranks";
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST(Loader, RepeatsForeverWithEpochsZeroAndStopsCleanly) {
  LoaderOptions o = augmenting(2, 3);
  o.epochs = 0;
  Loader loader(4, make, o);
  Batch b;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.epoch, 3);  // 2 batches per epoch: batch 6 is in epoch 3
}  // destructor joins the workers while they wait on the full queue

TEST(Loader, WorkerErrorReachesTheCaller) {
  LoaderOptions o = augmenting(2, 3);
  o.shuffle = false;
  auto load = [](int64_t i) -> Example {
    if (i == 4) throw Error("images/x4.jpg: corrupt JPEG");
    return make(i);
  };
  Loader loader(6, load, o);
  Batch b;
  EXPECT_TRUE(loader.next(b));
  EXPECT_NE(error_of([&] { loader.next(b); }).find("x4.jpg: corrupt JPEG"), std::string::npos);
}

TEST(Loader, BadOptionsAreErrors) {
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_THROW(Loader(5, make, o), Error);
  EXPECT_THROW(Loader(0, make, LoaderOptions{}), Error);
  LoaderOptions r;
  r.rank = 2;
  r.world_size = 2;
  EXPECT_THROW(Loader(5, make, r), Error);
}

TEST(Loader, BccdKeepAspectBatches) {
  DetectionDatasetOptions d;
  d.image_dir = datatest::shared_data("bccd/BCCD/JPEGImages");
  VocOptions v;
  v.split = "val";
  DetectionDataset ds(read_voc(datatest::shared_data("bccd/BCCD"), v), d);
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  o.augment.resize = AugmentOptions::Resize::kKeepAspect;
  o.augment.random_flip = true;
  Loader loader(ds.size(), [&](int64_t i) { return ds.get(i); }, o);
  EXPECT_EQ(loader.batches_per_epoch(), 22);  // 87 val images
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.images.sizes(), (at::IntArrayRef{4, 3, 512, 512}));
  EXPECT_TRUE(b.image_sizes.equal(at::tensor({384, 512}, at::kLong).repeat({4, 1})));
  EXPECT_NEAR(b.scales[0].item<float>(), 0.8f, 1e-6);
  // Boxes stay inside the resized image and map back inside the original 640x480.
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t n = b.num_boxes[i].item<int64_t>();
    ASSERT_GT(n, 0);
    at::Tensor boxes = b.boxes[i].narrow(0, 0, n);
    EXPECT_LE(boxes.select(1, 2).max().item<float>(), 512.f);
    EXPECT_LE(boxes.select(1, 3).max().item<float>(), 384.f);
    at::Tensor back = geometry_invert_boxes(b.geometries[static_cast<size_t>(i)], boxes);
    EXPECT_GE(back.min().item<float>(), 0.f);
    EXPECT_LE(back.select(1, 2).max().item<float>(), 640.f + 1e-3);
  }
}

TEST(Loader, CamvidDeepLabCropsCarryIgnorePadding) {
  SegmentationDataset ds(read_seg_folder(camvid_options(datatest::shared_data("camvid/CamVid"), "val")));
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 2;
  o.epochs = 1;
  o.seed = 4;
  o.augment.resize = AugmentOptions::Resize::kDeepLab;
  o.augment.out_h = o.augment.out_w = 400;  // taller than 360: scale 0.5..1 leaves ignore padding
  o.augment.random_flip = true;
  Loader loader(ds.size(), [&](int64_t i) { return ds.get(i); }, o);
  Batch b;
  bool padded = false;
  for (int k = 0; k < 4 && loader.next(b); ++k) {
    ASSERT_EQ(b.label_maps.sizes(), (at::IntArrayRef{2, 400, 400}));
    EXPECT_EQ(b.images.sizes(), (at::IntArrayRef{2, 3, 400, 400}));
    at::Tensor valid = b.label_maps.ne(255);
    EXPECT_LE(b.label_maps.masked_select(valid).max().item<int64_t>(), 10);
    padded |= b.label_maps.eq(255).sum().item<int64_t>() > 0;
  }
  EXPECT_TRUE(padded);
}

TEST(Loader, Coco128MasksFollowTheResize) {
  DetectionDatasetOptions d;
  d.image_dir = datatest::shared_data("coco128/val2017");
  d.with_masks = true;
  DetectionDataset ds(read_coco(datatest::shared_data("coco128/annotations/instances_val2017.json")), d);
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 1;
  o.shuffle = false;
  o.augment.out_h = o.augment.out_w = 320;
  Loader loader(ds.size(), [&](int64_t i) { return ds.get(i); }, o);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  const int64_t m = b.boxes.size(1);
  ASSERT_EQ(b.masks.sizes(), (at::IntArrayRef{2, m, 320, 320}));
  // Each instance mask lies (almost) inside its resized box.
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < b.num_boxes[i].item<int64_t>(); ++k) {
      at::Tensor mask = b.masks[i][k];
      const auto box = b.boxes[i][k];
      const int64_t x1 = static_cast<int64_t>(std::floor(box[0].item<float>())), y1 = static_cast<int64_t>(std::floor(box[1].item<float>()));
      const int64_t x2 = static_cast<int64_t>(std::ceil(box[2].item<float>())), y2 = static_cast<int64_t>(std::ceil(box[3].item<float>()));
      const int64_t inside = mask.narrow(0, y1, std::max<int64_t>(0, y2 - y1)).narrow(1, x1, std::max<int64_t>(0, x2 - x1)).sum().item<int64_t>();
      EXPECT_GE(inside + 2, mask.sum().item<int64_t>()) << "image " << b.image_ids[static_cast<size_t>(i)] << " box " << k;
    }
  }
}

// ---- absent examples (a data set's bad_images: skip)

namespace {
// make(i), or an absent example (no image) for the indices in `absent`.
Loader::LoadFn with_absent(std::set<int64_t> absent) {
  return [absent](int64_t i) { return absent.count(i) ? Example() : make(i); };
}

std::vector<int64_t> ids_of(const std::vector<Batch>& batches) {
  std::vector<int64_t> ids;
  for (const Batch& b : batches) ids.insert(ids.end(), b.image_ids.begin(), b.image_ids.end());
  return ids;
}
}  // namespace

// Evaluation: an absent example leaves its batch one smaller; the others keep their shard
// positions (a sharded evaluation tells the wrap-around repeats by them), and a batch with nothing
// left is not delivered.
TEST(Loader, AbsentExamplesLeaveEvaluationBatchesSmaller) {
  for (int workers : {0, 2}) {
    LoaderOptions o;
    o.batch_size = 3;
    o.shuffle = false;
    o.num_workers = workers;
    o.augment.resize = AugmentOptions::Resize::kNone;
    Loader loader(10, with_absent({1, 2, 6}), o);
    const std::vector<Batch> batches = drain(loader);
    ASSERT_EQ(batches.size(), 4u) << workers;
    EXPECT_EQ(ids_of(batches), (std::vector<int64_t>{1000, 1003, 1004, 1005, 1007, 1008, 1009}));
    EXPECT_EQ(batches[0].positions, (std::vector<int64_t>{0}));
    EXPECT_EQ(batches[2].positions, (std::vector<int64_t>{7, 8}));
    EXPECT_EQ(batches[3].positions, (std::vector<int64_t>{9}));
    Loader none_first(10, with_absent({0, 1, 2}), o);
    const std::vector<Batch> rest = drain(none_first);
    ASSERT_EQ(rest.size(), 3u);  // the first batch had nothing left
    EXPECT_EQ(rest[0].image_ids.front(), 1003);
  }
}

// Training: an absent example's place goes to the next present example of the epoch's order, so
// batches keep their size; every other example is exactly what it is with nothing absent (same
// place, same augmentation), whatever the thread count.
TEST(Loader, AbsentTrainingExamplesAreReplacedAndTheOthersKeepTheirAugmentation) {
  LoaderOptions o = augmenting(0, 7);
  o.replace_absent = true;
  Loader reference_loader(10, make, o);
  const std::vector<Batch> reference = drain(reference_loader);
  for (int workers : {0, 3}) {
    o.num_workers = workers;
    Loader loader(10, with_absent({4}), o);
    const std::vector<Batch> batches = drain(loader);
    ASSERT_EQ(batches.size(), reference.size());
    int replaced = 0;
    for (size_t k = 0; k < batches.size(); ++k) {
      ASSERT_EQ(batches[k].size(), reference[k].size());
      const auto plan = loader.epoch_plan(batches[k].epoch);
      for (int64_t b = 0; b < batches[k].size(); ++b) {
        const int64_t want = reference[k].image_ids[static_cast<size_t>(b)], got = batches[k].image_ids[static_cast<size_t>(b)];
        if (want != 1004) {
          EXPECT_EQ(got, want);
          EXPECT_TRUE(batches[k].images[b].equal(reference[k].images[b])) << "batch " << k << " image " << want;
          continue;
        }
        // The next example in the epoch's order (positions run through the plan's batches).
        std::vector<int64_t> order;
        for (const auto& batch : plan) order.insert(order.end(), batch.begin(), batch.end());
        const auto at = std::find(order.begin(), order.end(), 4) - order.begin();
        EXPECT_EQ(got, 1000 + order[static_cast<size_t>((at + 1) % static_cast<int64_t>(order.size()))]);
        ++replaced;
      }
    }
    EXPECT_EQ(replaced, 2);  // once in each of the 2 epochs
  }
}

TEST(Loader, NothingLeftToTrainOnIsAnError) {
  LoaderOptions o = augmenting(1, 3);
  o.replace_absent = true;
  Loader loader(4, with_absent({0, 1, 2, 3}), o);
  Batch b;
  EXPECT_EQ(error_of([&] { loader.next(b); }),
            "every image of epoch 0's data (4 images) was left out as unusable (bad_images: skip): nothing left to load");
}

// A sharded evaluation tells a shard's wrap-around repeats by position * world_size + rank >= n;
// with an image left out before it, the repeat keeps its position (counting the delivered images
// would have taken it for a fresh one and scored image 0 twice).
TEST(Loader, AbsentExamplesKeepTheShardPositionsOfTheOthers) {
  LoaderOptions o;
  o.batch_size = 3;
  o.shuffle = false;
  o.world_size = 2;
  o.rank = 1;
  o.augment.resize = AugmentOptions::Resize::kNone;
  Loader loader(5, with_absent({1}), o);  // rank 1's shard: indices 1, 3, then 0 (a repeat)
  const std::vector<Batch> batches = drain(loader);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].image_ids, (std::vector<int64_t>{1003, 1000}));
  EXPECT_EQ(batches[0].positions, (std::vector<int64_t>{1, 2}));
  EXPECT_GE(batches[0].positions[1] * o.world_size + o.rank, 5);  // the repeat, told as such
}
