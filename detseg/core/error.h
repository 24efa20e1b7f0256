// Implements: detseg's error types and checks. Every message names what it is about (a file and
// line, a config key, a tensor shape) so the user can fix the input without a debugger.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace detseg {

// Concatenates anything printable into one string: str("got ", n, " boxes").
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

// A runtime failure: bad data file, missing image, NaN loss, corrupt checkpoint. The CLI exits 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A usage or configuration mistake: unknown key, wrong type, out-of-range value, bad flag.
// The CLI exits 2.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what) {}
};

// "file:line:column: " where known; pieces that are unknown (0 or empty) are left out.
std::string location(const std::string& file, long line = 0, long column = 0);

}  // namespace detseg

// DETSEG_CHECK(cond, parts...) throws detseg::Error with the parts joined when cond is false.
#define DETSEG_CHECK(cond, ...)                             \
  do {                                                      \
    if (!(cond)) throw ::detseg::Error(::detseg::str(__VA_ARGS__)); \
  } while (0)

#define DETSEG_CONFIG_CHECK(cond, ...)                      \
  do {                                                      \
    if (!(cond)) throw ::detseg::ConfigError(::detseg::str(__VA_ARGS__)); \
  } while (0)
