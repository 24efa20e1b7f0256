// Implements: uint8 -> float normalisation as one multiply-add per pixel.
#include "detseg/data/transforms/normalize.h"

#include "detseg/core/error.h"

namespace detseg {

void normalize_into(const at::Tensor& image, at::Tensor out, const NormalizeOptions& o) {
  DETSEG_CHECK(image.dim() == 3 && image.size(0) == 3 && image.scalar_type() == at::kByte,
               "normalize: expected a [3, H, W] uint8 image, got ", image.sizes(), " ", image.scalar_type());
  DETSEG_CHECK(out.dim() == 3 && out.size(0) == 3 && out.size(1) >= image.size(1) && out.size(2) >= image.size(2) &&
                   out.scalar_type() == at::kFloat && out.stride(2) == 1,
               "normalize: output must be [3, >=H, >=W] float32 with contiguous rows, got ", out.sizes());
  for (int c = 0; c < 3; ++c)
    DETSEG_CHECK(o.std[c] > 0, "normalize: std must be positive, got ", o.std[c], " for channel ", c);
  at::Tensor src = image.to(at::kCPU).contiguous();
  if (!out.device().is_cpu()) {
    out.narrow(1, 0, src.size(1)).narrow(2, 0, src.size(2)).copy_(normalize_image(src, o));
    return;
  }
  const int64_t h = src.size(1), w = src.size(2);
  const uint8_t* in = src.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * o.std[c]);
    const float bias = -o.mean[c] / o.std[c];
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t* row = in + (c * h + y) * w;
      float* out_row = dst + c * out.stride(0) + y * out.stride(1);
      for (int64_t x = 0; x < w; ++x) out_row[x] = static_cast<float>(row[x]) * scale + bias;
    }
  }
}

at::Tensor normalize_image(const at::Tensor& image, const NormalizeOptions& o) {
  DETSEG_CHECK(image.dim() == 3, "normalize: expected a [3, H, W] image, got ", image.sizes());
  at::Tensor out = at::empty({3, image.size(1), image.size(2)}, at::kFloat);
  normalize_into(image, out, o);
  return out.to(image.device());
}

}  // namespace detseg
