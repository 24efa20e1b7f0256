// Declaration-only stand-in (see gloo/rendezvous/store.h): detseg holds Gloo devices and buffers
// only through std::shared_ptr / std::unique_ptr owned and destroyed inside libtorch_cpu.
#pragma once

namespace gloo {
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo
