// Declaration-only stand-in (see gloo/rendezvous/store.h). ProcessGroupGloo::setTimeout, inline in
// the torch header, names Context::setTimeout; that body is never emitted here (ProcessGroupGloo's
// vtable lives in libtorch_cpu), so the declaration is all it needs.
#pragma once

#include <chrono>

namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
