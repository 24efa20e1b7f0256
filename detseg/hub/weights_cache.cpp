// Implements: the weights cache declared in weights_cache.h.
#include "detseg/hub/weights_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/stop_signal.h"
#include "detseg/hub/sha256.h"

namespace detseg {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string scheme_of(const std::string& url) { return lower(url.substr(0, url.find("://"))); }

// Holds an exclusive flock on a folder while one process downloads into it. A second process
// waits (polling, so SIGINT still ends it) and then finds the finished file.
class CacheLock {
 public:
  explicit CacheLock(const std::string& dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DETSEG_CHECK(fd_ >= 0, dir, ": cannot open the weights cache: ", std::strerror(errno));
    bool told = false;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      DETSEG_CHECK(errno == EWOULDBLOCK || errno == EINTR, dir, ": cannot lock: ", std::strerror(errno));
      if (!told) log_info("waiting for another detseg process downloading into ", dir);
      told = true;
      throw_if_stop_requested("waiting for the weights cache");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  ~CacheLock() { ::close(fd_); }  // closing releases the flock
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// fsync the file, rename it into place, fsync the folder: a crash leaves either no file or the
// whole verified one under the final name.
void rename_durably(const std::string& from, const std::string& to) {
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  DETSEG_CHECK(fd >= 0 && ::fsync(fd) == 0, from, ": cannot sync: ", std::strerror(errno));
  ::close(fd);
  DETSEG_CHECK(::rename(from.c_str(), to.c_str()) == 0, to, ": rename from ", from, " failed: ", std::strerror(errno));
  const int dir = ::open(fs::path(to).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::string fetch_url(const std::string& url, const std::string& expected, const std::string& key,
                      const std::string& cache_dir, const DownloadOptions& options) {
  const std::string name = url_file_name(url, key);
  make_directories(cache_dir);
  const std::string final_path = (fs::path(cache_dir) / name).string();
  const std::string part = final_path + ".part";
  CacheLock lock(cache_dir);
  if (file_exists(final_path)) {
    // Re-hashed on every use (~0.6 s for ResNet-50 here): two URLs with one file name must not share it.
    const std::string digest = sha256_file(final_path);
    if (sha256_matches(digest, expected)) {
      log_info(key, ": ", final_path, " (cached, sha256 ", digest.substr(0, 8), ")");
      return final_path;
    }
    log_warn(key, ": ", final_path, " has sha256 ", digest, ", not ", expected, ": downloading it again");
    fs::remove(final_path);
  }
  std::error_code ec;
  const auto kept = file_exists(part) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
  if (kept > 0)
    log_info(key, ": resuming the download of ", url, " after ", format_bytes(kept));
  else
    log_info(key, ": downloading ", url, " to ", final_path);
  // An empty .part (the server was never reached, or answered with an error) is not kept.
  auto drop_empty_part = [&] {
    if (file_exists(part) && fs::file_size(part, ec) == 0) fs::remove(part, ec);
  };
  try {
    download_resumable(url, part, options);
  } catch (const Interrupted&) {
    drop_empty_part();
    throw;
  } catch (const Error& e) {
    drop_empty_part();
    throw Error(str(key, ": ", e.what()));
  }
  const std::string digest = sha256_file(part);
  if (!sha256_matches(digest, expected)) {
    fs::remove(part, ec);
    throw Error(str(key, ": ", url, ": sha256 mismatch: expected ", expected, ", got ", digest,
                    " (the download was deleted)"));
  }
  rename_durably(part, final_path);
  log_info(key, ": saved ", final_path, " (", format_bytes(static_cast<int64_t>(fs::file_size(final_path, ec))),
           ", sha256 ", digest.substr(0, 8), " verified)");
  return final_path;
}

}  // namespace

std::string weights_cache_dir() {
  if (const char* home = std::getenv("DETSEG_HOME"); home && *home) return (fs::path(home) / "weights").string();
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "detseg" / "weights").string();
  const char* home = std::getenv("HOME");
  DETSEG_CHECK(home && *home, "cannot place the weights cache: set DETSEG_HOME (HOME is not set)");
  return (fs::path(home) / ".cache" / "detseg" / "weights").string();
}

bool is_url(const std::string& source) {
  const size_t sep = source.find("://");
  if (sep == std::string::npos || sep == 0) return false;
  for (size_t i = 0; i < sep; ++i)
    if (!std::isalnum(static_cast<unsigned char>(source[i])) && source[i] != '+' && source[i] != '-' &&
        source[i] != '.')
      return false;
  return true;
}

std::string url_file_name(const std::string& url, const std::string& key) {
  std::string rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const size_t slash = rest.rfind('/');
  const std::string name = slash == std::string::npos ? "" : rest.substr(slash + 1);
  DETSEG_CONFIG_CHECK(!name.empty() && name != "." && name != "..", key, ": ", url,
                      ": the URL names no file (expected .../name.pth)");
  return name;
}

std::string hash_in_file_name(const std::string& file_name) {
  // torch.hub: HASH_REGEX = r"-([a-f0-9]*)\." searched in the file name; its first match.
  for (size_t dash = file_name.find('-'); dash != std::string::npos; dash = file_name.find('-', dash + 1)) {
    size_t end = dash + 1;
    while (end < file_name.size() && (std::isdigit(static_cast<unsigned char>(file_name[end])) ||
                                      (file_name[end] >= 'a' && file_name[end] <= 'f')))
      ++end;
    if (end < file_name.size() && file_name[end] == '.') {
      const std::string hex = file_name.substr(dash + 1, end - dash - 1);
      return hex.size() >= 8 ? hex : "";
    }
  }
  return "";
}

std::string expected_sha256(const std::string& source, const std::string& sha256, const std::string& key,
                            const std::string& sha256_key) {
  DETSEG_CONFIG_CHECK(sha256.empty() || is_sha256_prefix(sha256), sha256_key,
                      ": expected 8 to 64 hex digits (a SHA-256 or its start), got '", sha256, "'");
  if (!is_url(source)) return lower(sha256);
  const std::string scheme = scheme_of(source);
  DETSEG_CONFIG_CHECK(scheme == "http" || scheme == "https" || scheme == "file", key, ": ", source,
                      ": unsupported URL scheme '", scheme, "' (http, https or file)");
  if (!sha256.empty()) return lower(sha256);
  const std::string from_name = hash_in_file_name(url_file_name(source, key));
  DETSEG_CONFIG_CHECK(!from_name.empty(), sha256_key, ": required for ", source,
                      " (its file name carries no -<hash>. as torchvision's do): the file's SHA-256, or its "
                      "first 8+ hex digits");
  return from_name;
}

std::string fetch_weights(const std::string& source, const std::string& sha256, const std::string& key,
                          const std::string& sha256_key, const std::string& cache_dir,
                          const DownloadOptions& options) {
  const std::string expected = expected_sha256(source, sha256, key, sha256_key);
  if (is_url(source)) return fetch_url(source, expected, key, cache_dir, options);
  DETSEG_CONFIG_CHECK(file_exists(source) && !is_directory(source), key, ": ", source, ": file not found");
  if (expected.empty()) return source;
  const std::string digest = sha256_file(source);
  DETSEG_CHECK(sha256_matches(digest, expected), key, ": ", source, ": sha256 mismatch: expected ", expected,
               ", got ", digest);
  return source;
}

}  // namespace detseg
