#include "detseg/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "detseg/core/error.h"

namespace detseg {
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DETSEG_CHECK(in, path, ": cannot open for reading: ", std::strerror(errno));
  std::string data;
  in.seekg(0, std::ios::end);
  data.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0, std::ios::beg);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  DETSEG_CHECK(in, path, ": read failed");
  return data;
}

static void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;  // best effort for directories on file systems that refuse it
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  DETSEG_CHECK(fd >= 0, tmp, ": cannot create: ", std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(str(tmp, ": write failed: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(str(tmp, ": fsync/close failed: ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(str(path, ": rename from temp file failed: ", std::strerror(err)));
  }
  fs::path parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? "." : parent.string(), O_RDONLY | O_DIRECTORY);
}

bool file_exists(const std::string& path) { return fs::exists(path); }
bool is_directory(const std::string& path) { return fs::is_directory(path); }

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  DETSEG_CHECK(!ec, path, ": cannot create directory: ", ec.message());
}

}  // namespace detseg
