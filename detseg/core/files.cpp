#include "detseg/core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include "detseg/core/error.h"

namespace detseg {
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  // An ifstream opens a folder happily and then reports a size of -1.
  DETSEG_CHECK(!is_directory(path), path, ": is a folder, expected a file");
  std::ifstream in(path, std::ios::binary);
  DETSEG_CHECK(in, path, ": cannot open for reading: ", std::strerror(errno));
  std::string data;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) {
    // Not seekable (a pipe such as bash's <(...), /dev/stdin, a /proc file): the size of -1 was
    // taken as 2^64 - 1 bytes (std::length_error). Read to the end instead.
    in.clear();
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    DETSEG_CHECK(!in.bad(), path, ": read failed");
    return data;
  }
  data.resize(static_cast<size_t>(size));
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

void write_file_atomic(const std::string& path, const std::string& data, Durability durability) {
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
  const bool synced = durability == Durability::kSynced;
  if ((synced && ::fsync(fd) != 0) || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(str(tmp, ": fsync/close failed: ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(str(path, ": rename from temp file failed: ", std::strerror(err)));
  }
  if (!synced) return;
  fs::path parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? "." : parent.string(), O_RDONLY | O_DIRECTORY);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void check_outputs_are_not_inputs(const std::vector<std::string>& outputs, const std::string& flag,
                                  const std::vector<CommandInput>& inputs) {
  std::map<std::pair<dev_t, ino_t>, const CommandInput*> known;
  struct stat st {};
  for (const CommandInput& input : inputs)
    if (!input.path.empty() && ::stat(input.path.c_str(), &st) == 0) known.emplace(std::make_pair(st.st_dev, st.st_ino), &input);
  for (const std::string& output : outputs) {
    if (output.empty() || ::stat(output.c_str(), &st) != 0) continue;
    const auto it = known.find({st.st_dev, st.st_ino});
    DETSEG_CONFIG_CHECK(it == known.end(), flag, flag.empty() ? "" : " ", output, ": is ", it->second->what,
                        "; choose another path");
  }
}

void check_output_is_not_an_input(const std::string& output, const std::string& flag,
                                  const std::vector<CommandInput>& inputs) {
  check_outputs_are_not_inputs({output}, flag, inputs);
}

// Without the error_code, a path that cannot be looked at (a symlink loop, a folder without
// permission on the way) throws std::filesystem's own text; here it is just not there, and the
// caller's message names the path.
bool file_exists(const std::string& path) {
  std::error_code error;
  return fs::exists(path, error);
}
bool is_directory(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

std::string why_unreadable(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) return "no such file or folder";
  if (error.value() == ELOOP) return "a symlink loop (the link leads back to itself)";
  if (error) return error.message();
  return "";
}

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  DETSEG_CHECK(!ec, path, ": cannot create directory: ", ec.message());
}

int remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t tag = name.rfind(".tmp.");
    if (tag == std::string::npos || tag + 5 >= name.size()) continue;
    const std::string pid_text = name.substr(tag + 5);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still finish
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  DETSEG_CHECK(fd_ >= 0, path, ": cannot create the lock file: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown");
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    DETSEG_CHECK(error != EWOULDBLOCK, dir, " is in use by ", what, " (pid ", pid,
                 "); wait for it to finish, stop it, or choose another --model-dir");
    throw Error(str(path, ": cannot lock: ", std::strerror(error)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The PID is only shown to a second process; the lock itself holds without it.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace detseg
