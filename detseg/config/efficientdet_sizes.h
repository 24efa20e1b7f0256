// Implements: EfficientDet's D0-D7 sizes (the paper's Table 1). The network builder reads them and
// so do the config's checks (a width that a choice must divide), which is why the table is here,
// torch-free, and not in models/.
#pragma once

#include <cstdint>
#include <string>

namespace detseg {

// One row of the paper's Table 1 (D7 uses B6 at a larger input; the paper's D7x is not included).
struct EfficientDetScaling {
  int64_t image_size;    // input resolution R
  int64_t backbone;      // EfficientNet-B variant
  int64_t bifpn_width;   // W_bifpn
  int64_t bifpn_depth;   // D_bifpn
  int64_t head_depth;    // D_box = D_class
};

EfficientDetScaling efficientdet_scaling(int64_t compound_coef);  // 0..7; ConfigError otherwise

// model.efficientdet's size name ("d0".."d7", validated by the config) as its compound coefficient.
inline int64_t efficientdet_compound_coef(const std::string& size) { return size[1] - '0'; }

}  // namespace detseg
