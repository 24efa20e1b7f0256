// Implements: DeepLabv3 / DeepLabv3+'s network (see the header).
#include "detseg/models/deeplab_network.h"

#include <ATen/ATen.h>

#include "detseg/core/error.h"
#include "detseg/models/registry.h"

namespace detseg {
namespace {

std::shared_ptr<BackboneImpl> make_backbone(const DeepLabNetworkOptions& o) {
  const int64_t os = o.output_stride();
  DETSEG_CONFIG_CHECK(os == 8 || os == 16 || os == 32, "DeepLab: output_stride must be 8, 16 or 32, got ", os);
  BackboneOptions b;
  b.output_stride = os;
  b.frozen_bn = o.frozen_bn();
  b.low_level = o.decoder();
  return build_backbone(o.backbone(), b);
}

}  // namespace

std::vector<std::string> deeplab_last_layers() { return {"aspp.", "decoder.", "head_conv.", "classifier."}; }

DeepLabNetworkImpl::DeepLabNetworkImpl(const DeepLabNetworkOptions& options_) : options(options_) {
  backbone = register_module("backbone", make_backbone(options));
  const std::vector<FeatureSpec> specs = backbone->feature_specs();
  DETSEG_CHECK(specs.back().stride == options.output_stride(), "DeepLab: backbone ", options.backbone(),
               " ends at stride ", specs.back().stride, ", expected ", options.output_stride());
  aspp = register_module("aspp", Aspp(AsppOptions(specs.back().channels, aspp_rates_for_output_stride(options.output_stride()))
                                          .channels(options.aspp_channels())
                                          .dropout(options.aspp_dropout())
                                          .image_pooling(options.image_pooling())));
  int64_t head_channels = options.aspp_channels();
  if (options.decoder()) {
    DETSEG_CHECK(specs.front().stride == 4, "DeepLab decoder: low-level features must have stride 4, got ",
                 specs.front().stride);
    decoder = register_module("decoder", DeepLabDecoder(DeepLabDecoderOptions(specs.front().channels, options.aspp_channels())
                                                            .low_level_channels(options.low_level_channels())
                                                            .channels(options.decoder_channels())));
    head_channels = options.decoder_channels();
  } else if (options.head_conv()) {
    head_conv = register_module("head_conv", ConvBnAct(ConvBnActOptions(head_channels, head_channels, 3)));
  }
  classifier = register_module("classifier", torch::nn::Conv2d(torch::nn::Conv2dOptions(head_channels, options.num_classes(), 1)));
}

std::vector<at::Tensor> DeepLabNetworkImpl::features(const at::Tensor& images) { return backbone->forward(images); }

int64_t DeepLabNetworkImpl::logits_stride() const { return options.decoder() ? 4 : options.output_stride(); }

at::Tensor DeepLabNetworkImpl::forward(const at::Tensor& images) {
  const std::vector<at::Tensor> maps = backbone->forward(images);
  at::Tensor x = aspp->forward(maps.back());
  if (decoder) x = decoder->forward(x, maps.front());
  if (head_conv) x = head_conv->forward(x);
  return classifier->forward(x);
}

}  // namespace detseg
