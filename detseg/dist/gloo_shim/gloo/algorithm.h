// Declaration-only stand-in (see gloo/rendezvous/store.h).
#pragma once

namespace gloo {
class Context;
}  // namespace gloo
