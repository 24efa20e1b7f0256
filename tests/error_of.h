// Implements: error_of, how the tests read an expected error: the message of the E (detseg::Error
// by default) that f throws, or "" when f returns normally. Torch-free (the sanitizer build uses it).
#pragma once

#include <string>

#include "detseg/core/error.h"

namespace detseg::testing {

template <class E = Error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace detseg::testing
