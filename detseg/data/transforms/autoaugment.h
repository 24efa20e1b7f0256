// Implements: the autoaugment_image step, EfficientDet's AutoAugment for detection (Zoph et al. 2019,
// "Learning Data Augmentation Strategies for Object Detection"; google/automl efficientdet/aug/
// autoaugment.py): the policies v0-v3 as data, each operation's level -> argument mapping, and the
// operations themselves on an Example (boxes, instance masks and label map move with the pixels).
#pragma once

#include <string>
#include <vector>

#include "detseg/data/transforms/augment.h"

namespace detseg {

// One operation of a sub-policy: its name in the reference, the chance it runs and its magnitude
// level (0-10).
struct AutoAugmentOp {
  const char* name;
  double probability;
  int level;
};
using AutoAugmentSubPolicy = std::vector<AutoAugmentOp>;

// The policy names autoaugment_image accepts: v0, v1, v2, v3.
const std::vector<std::string>& autoaugment_policy_names();
// The sub-policies of `name`; an unknown name is an Error naming the step and the value.
const std::vector<AutoAugmentSubPolicy>& autoaugment_policy(const std::string& name);

// The argument `op` takes at `level` before its random sign, as the reference's level_to_arg with
// its hyperparameters: degrees (rotations, level/10 x 30), pixels (translations: 250, box-only 120;
// cutout half-size: 100, box-only 50), shear factor (0.3), enhance factor (level/10 x 1.8 + 0.1),
// posterize bits (4), solarize threshold (256), solarize_add addition (110), BBox_Cutout's size as a
// fraction of the box (0.75); 0 for the operations without one. Error for an unknown operation.
double autoaugment_level_to_arg(const std::string& op, int level);
// Whether the reference negates the argument with chance 1/2 (rotations, shears, translations).
bool autoaugment_random_sign(const std::string& op);

// Carries out `op` with `argument` (its sign included) on `ex`, without the gate. Geometric
// operations fill uncovered pixels with grey 128, masks with 0 and the label map with 255; a
// positive translation moves the content left / up (the reference's sign) by the whole pixels of
// the argument. The *_Only_BBoxes operations change each box's pixels (and the masks and labels
// under them when they move pixels) with chance `box_probability` each, boxes in a random order,
// and leave the boxes as they are. The image must be the example's own tensor (colour operations
// write it in place); masks and label maps are copied before they are changed.
void apply_autoaugment_op(Example& ex, const std::string& op, double argument, double box_probability, Rng& rng);

// The step: a sub-policy of `policy_name` drawn uniformly, then each of its operations in order
// with its probability (the *_Only_BBoxes ones always run, each box with a third of it, as the
// reference's _scale_bbox_only_op_probability). Draws: the sub-policy; per operation U(0, 1) for the
// gate (not for the box-only ones); when it runs, U(0, 1) for the sign where the operation has one,
// then the operation's own (box order, per-box gates, cutout centres).
void autoaugment_image(Example& ex, const std::string& policy_name, Rng& rng);

}  // namespace detseg
