// Declaration-only stand-in for Gloo's rendezvous store interface. LibTorch's packaged headers
// include <gloo/...> from ProcessGroupGloo.hpp but the distribution ships no Gloo headers; detseg
// only constructs c10d::ProcessGroupGloo and calls its (virtual, library-defined) collectives, so it
// needs these types named, never defined. The virtual functions mirror gloo/rendezvous/store.h so
// that the inline c10d::ProcessGroupGloo::GlooStore overrides in the torch header compile.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gloo {
namespace rendezvous {

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(30);
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) = 0;
};

}  // namespace rendezvous
}  // namespace gloo
