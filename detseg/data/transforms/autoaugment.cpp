// Implements: (in progress) EfficientDet's AutoAugment detection policies.
#include "detseg/core/error.h"
#include "detseg/data/transforms/augment.h"

namespace detseg {

void autoaugment_image(Example&, const std::string& policy, Rng&) {
  throw Error("autoaugment_image " + policy + ": not built yet");
}

}  // namespace detseg
