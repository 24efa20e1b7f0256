// Implements: EfficientDet's D0-D7 table (see efficientdet_sizes.h).
#include "detseg/config/efficientdet_sizes.h"

#include "detseg/core/error.h"

namespace detseg {

EfficientDetScaling efficientdet_scaling(int64_t compound_coef) {
  // Paper Table 1: resolution, backbone, BiFPN width/depth, box/class depth.
  static const EfficientDetScaling table[8] = {
      {512, 0, 64, 3, 3},   {640, 1, 88, 4, 3},   {768, 2, 112, 5, 3},  {896, 3, 160, 6, 4},
      {1024, 4, 224, 7, 4}, {1280, 5, 288, 7, 4}, {1280, 6, 384, 8, 5}, {1536, 6, 384, 8, 5}};
  DETSEG_CONFIG_CHECK(compound_coef >= 0 && compound_coef <= 7,
                      "EfficientDet: compound coefficient must be 0..7 (D0..D7), got ", compound_coef);
  return table[compound_coef];
}

}  // namespace detseg
