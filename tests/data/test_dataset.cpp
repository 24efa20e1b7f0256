// Implements: tests of DetectionDataset / SegmentationDataset on real files and on hand-made bad annotations.
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.h"
#include "detseg/core/files.h"
#include "detseg/data/dataset.h"
#include "detseg/data/image_io.h"
#include "detseg/data/readers/voc.h"
#include "test_paths.h"

using namespace detseg;
using detseg::datatest::error_of;
using detseg::datatest::shared_data;

namespace {
// One 640x480 image (a real bccd JPEG) with the given xywh boxes in category 5.
CocoDataset one_image(const std::vector<std::vector<double>>& xywh) {
  CocoDataset d;
  d.source = "hand.json";
  d.images.push_back({42, "BloodImage_00000.jpg", 640, 480});
  d.categories.push_back({5, "cell", ""});
  d.categories.push_back({9, "other", ""});
  int64_t id = 1;
  for (const auto& b : xywh) {
    CocoAnnotation a;
    a.id = id++;
    a.image_id = 42;
    a.category_id = 9;
    for (int k = 0; k < 4; ++k) a.bbox[k] = b[static_cast<size_t>(k)];
    d.annotations.push_back(a);
  }
  return d;
}

DetectionDatasetOptions bccd_images(BoxPolicy policy = BoxPolicy::kClip) {
  DetectionDatasetOptions o;
  o.image_dir = shared_data("bccd/BCCD/JPEGImages");
  o.invalid_boxes = policy;
  return o;
}
}  // namespace

TEST(DetectionDataset, BccdDropsTheTwoZeroAreaBoxes) {
  DetectionDataset ds(read_voc(shared_data("bccd/BCCD")), bccd_images());
  EXPECT_EQ(ds.size(), 364);
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.box_stats().total, 4888);
  EXPECT_EQ(ds.box_stats().dropped_degenerate, 2);
  EXPECT_EQ(ds.box_stats().kept, 4886);
  EXPECT_EQ(ds.box_stats().clipped, 0);
  Example ex = ds.get(0);
  EXPECT_EQ(ex.image.sizes(), (at::IntArrayRef{3, 480, 640}));
  EXPECT_EQ(ex.image_id, 1);
  EXPECT_EQ(ex.boxes.size(1), 4);
  EXPECT_EQ(ex.classes.numel(), ex.boxes.size(0));
  EXPECT_GE(ex.classes.min().item<int64_t>(), 0);
  EXPECT_LE(ex.classes.max().item<int64_t>(), 2);
  EXPECT_EQ(ds.label_to_category_id(1), 2);  // RBC
  EXPECT_EQ(ds.category_id_to_label(3), 2);  // WBC
  EXPECT_EQ(ds.category_id_to_label(99), -1);
}

TEST(DetectionDataset, ContiguousLabelsAndXyxyBoxes) {
  DetectionDataset ds(one_image({{10, 20, 30, 40}}), bccd_images());
  Example ex = ds.get(0);
  EXPECT_EQ(ex.image_id, 42);
  EXPECT_EQ(ex.classes[0].item<int64_t>(), 1);  // category 9 is the second category
  EXPECT_TRUE(ex.boxes.equal(at::tensor({10.f, 20.f, 40.f, 60.f}).view({1, 4})));
}

TEST(DetectionDataset, BoxOutsideImageClipOrDropAndCount) {
  // Inside; crossing the right edge; fully outside; zero width; negative height; NaN.
  const std::vector<std::vector<double>> boxes = {{10, 10, 20, 20}, {630, 10, 20, 20}, {700, 10, 5, 5},
                                                  {5, 5, 0, 10}, {5, 5, 10, -3}, {NAN, 1, 2, 3}};
  DetectionDataset clip(one_image(boxes), bccd_images(BoxPolicy::kClip));
  EXPECT_EQ(clip.box_stats().kept, 2);
  EXPECT_EQ(clip.box_stats().clipped, 1);
  EXPECT_EQ(clip.box_stats().dropped_degenerate, 4);  // fully outside clips to nothing
  Example ex = clip.get(0);
  EXPECT_TRUE(ex.boxes[1].equal(at::tensor({630.f, 10.f, 640.f, 30.f})));

  DetectionDataset drop(one_image(boxes), bccd_images(BoxPolicy::kDrop));
  EXPECT_EQ(drop.box_stats().kept, 1);
  EXPECT_EQ(drop.box_stats().dropped_outside, 2);
  EXPECT_EQ(drop.box_stats().dropped_degenerate, 3);
  EXPECT_EQ(parse_box_policy("drop"), BoxPolicy::kDrop);
  EXPECT_THROW(parse_box_policy("crop"), ConfigError);
}

TEST(DetectionDataset, UnknownCategoryUnknownImageAndEmptyDataset) {
  CocoDataset bad_cat = one_image({{1, 1, 5, 5}});
  bad_cat.annotations[0].category_id = 77;
  std::string msg = error_of([&] { DetectionDataset(bad_cat, bccd_images()); });
  EXPECT_NE(msg.find("hand.json: annotations[0] (id 1) has unknown category id 77"), std::string::npos) << msg;

  CocoDataset bad_image = one_image({{1, 1, 5, 5}});
  bad_image.annotations[0].image_id = 43;
  msg = error_of([&] { DetectionDataset(bad_image, bccd_images()); });
  EXPECT_NE(msg.find("points at unknown image id 43"), std::string::npos) << msg;

  CocoDataset empty = one_image({});
  empty.images.clear();
  msg = error_of([&] { DetectionDataset(empty, bccd_images()); });
  EXPECT_NE(msg.find("hand.json: empty dataset"), std::string::npos) << msg;

  DetectionDatasetOptions skip = bccd_images();
  skip.skip_empty_images = true;
  msg = error_of([&] { DetectionDataset(one_image({}), skip); });
  EXPECT_NE(msg.find("empty dataset (no image has a usable annotation)"), std::string::npos) << msg;
}

TEST(DetectionDataset, MissingImageAndWrongSizeNameTheFile) {
  CocoDataset d = one_image({{1, 1, 5, 5}});
  d.images[0].file_name = "gone.jpg";
  DetectionDataset missing(d, bccd_images());
  std::string msg = error_of([&] { missing.get(0); });
  EXPECT_NE(msg.find("JPEGImages/gone.jpg"), std::string::npos) << msg;

  CocoDataset wrong = one_image({{1, 1, 5, 5}});
  wrong.images[0].width = 600;
  DetectionDataset sized(wrong, bccd_images());
  msg = error_of([&] { sized.get(0); });
  EXPECT_NE(msg.find("BloodImage_00000.jpg: image is 640x480 but the annotations (hand.json) say 600x480"),
            std::string::npos) << msg;
}

TEST(DetectionDataset, Coco128ImagesWithoutAnnotationsAndCrowdMasks) {
  DetectionDatasetOptions o;
  o.image_dir = shared_data("coco128/val2017");
  o.with_masks = true;
  DetectionDataset ds(read_coco(shared_data("coco128/annotations/instances_val2017.json")), o);
  EXPECT_EQ(ds.size(), 128);
  EXPECT_EQ(ds.num_classes(), 80);
  EXPECT_EQ(ds.box_stats().total, 939);
  int empty = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    const CocoImage& im = ds.coco().images[static_cast<size_t>(ds.image_position(i))];
    if (ds.coco().annotations_by_image[static_cast<size_t>(ds.image_position(i))].empty()) {
      ++empty;
      EXPECT_TRUE(im.id == 250 || im.id == 508) << im.id;
    }
    if (im.id != 257 && im.id != 86 && im.id != 250) continue;
    Example ex = ds.get(i);
    ASSERT_EQ(ex.masks.size(0), ex.num_boxes());
    EXPECT_EQ(ex.masks.size(1), im.height);
    EXPECT_EQ(ex.image.size(0), 3);  // 86 is grayscale on disk
    for (int64_t k = 0; k < ex.num_boxes(); ++k) {
      const auto& a = ds.coco().annotations[static_cast<size_t>(ds.coco().annotations_by_image[static_cast<size_t>(ds.image_position(i))][static_cast<size_t>(k)])];
      const double area = ex.masks[k].sum().item<double>();
      if (a.iscrowd) {
        EXPECT_TRUE(ex.iscrowd[k].item<bool>());
        // The crowd RLE of image 257 has 10513 foreground pixels (sum of its odd runs); its "area"
        // field says 11750, a known COCO quirk, so compare with the runs.
        EXPECT_EQ(area, 10513) << "annotation " << a.id;
      } else {
        EXPECT_NEAR(area, a.area, 0.06 * a.area + 30) << "annotation " << a.id;  // polygon raster ~ pycocotools
      }
    }
  }
  EXPECT_EQ(empty, 2);
}

TEST(DetectionDataset, PolygonAndRleMasksByHand) {
  CocoSegmentation square;
  square.kind = CocoSegmentation::kPolygons;
  square.polygons = {{2, 1, 6, 1, 6, 4, 2, 4}};  // x 2..6, y 1..4: pixels x 2..5, y 1..3
  at::Tensor m = segmentation_to_mask(square, 6, 8);
  EXPECT_EQ(m.sum().item<int64_t>(), 12);
  EXPECT_EQ(m[1][2].item<int>(), 1);
  EXPECT_EQ(m[3][5].item<int>(), 1);
  EXPECT_EQ(m[4][5].item<int>(), 0);
  CocoSegmentation rle;
  rle.kind = CocoSegmentation::kRle;
  rle.rle = {3, 2, {1, 2, 3}};  // column-major 0,1,1,0,0,0
  at::Tensor r = segmentation_to_mask(rle, 3, 2);
  EXPECT_TRUE(r.equal(at::tensor({0, 0, 1, 0, 1, 0}, at::kByte).view({3, 2})));
}

TEST(SegmentationDataset, CamvidVoidBecomesIgnore) {
  SegmentationDataset ds(read_seg_folder(camvid_options(shared_data("camvid/CamVid"), "val")));
  EXPECT_EQ(ds.size(), 101);
  Example ex = ds.get(0);
  ASSERT_EQ(ex.label_map.sizes(), (at::IntArrayRef{360, 480}));
  ASSERT_EQ(ex.image.sizes(), (at::IntArrayRef{3, 360, 480}));
  at::Tensor raw = read_label_png(ds.folder().samples[0].label_path);
  EXPECT_EQ(ex.label_map.eq(255).sum().item<int64_t>(), raw.eq(11).sum().item<int64_t>());
  EXPECT_EQ(ex.label_map.lt(11).sum().item<int64_t>(), raw.lt(11).sum().item<int64_t>());
}

TEST(SegmentationDataset, OutOfRangeLabelNamesFile) {
  const std::string dir = datatest::temp_dir("seg_bad");
  std::filesystem::create_directories(dir + "/img");
  std::filesystem::create_directories(dir + "/lab");
  write_image(dir + "/img/x.png", at::zeros({3, 2, 3}, at::kByte));
  at::Tensor label = at::zeros({2, 3}, at::kByte);
  label[1][2] = 40;
  write_image(dir + "/lab/x.png", label);
  SegFolderOptions o;
  o.image_dir = dir + "/img";
  o.label_dir = dir + "/lab";
  o.num_classes = 11;
  SegmentationDataset ds(read_seg_folder(o));
  std::string msg = error_of([&] { ds.get(0); });
  EXPECT_NE(msg.find("lab/x.png: pixel value 40 at (x=2, y=1)"), std::string::npos) << msg;
  write_image(dir + "/img/y.png", at::zeros({3, 2, 3}, at::kByte));
  msg = error_of([&] { read_seg_folder(o); });
  EXPECT_NE(msg.find("img/y.png: no label map"), std::string::npos) << msg;
}

TEST(DemoSet, BundledBccdSubsetLoads) {
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  DetectionDatasetOptions o;
  o.image_dir = demo + "/images";
  DetectionDataset train(read_coco(demo + "/train.json"), o);
  DetectionDataset val(read_coco(demo + "/val.json"), o);
  EXPECT_EQ(train.size(), 60);
  EXPECT_EQ(val.size(), 20);
  EXPECT_EQ(train.class_names(), (std::vector<std::string>{"RBC", "WBC", "Platelets"}));
  EXPECT_EQ(train.box_stats().total, 1001);
  EXPECT_EQ(val.box_stats().total, 339);
  Example ex = val.get(19);
  EXPECT_EQ(ex.image.sizes(), (at::IntArrayRef{3, 480, 640}));
  EXPECT_GT(ex.num_boxes(), 0);
}
