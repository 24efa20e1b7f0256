#include "detseg/api/video_io.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "detseg/api/video_module_api.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModuleName = "libdetseg_video.so";

// Where the module may be, first found wins: $DETSEG_VIDEO_MODULE; next to the running binary (the
// build tree's detseg-engine); bin/../<libdir>/detseg/ (an installed detseg); the build tree and
// the configured install folder, as compiled in (tests, and applications linking libdetseg.a).
std::vector<std::string> module_candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("DETSEG_VIDEO_MODULE"); env != nullptr && *env != '\0') paths.push_back(env);
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back((self.parent_path() / kModuleName).string());
#ifdef DETSEG_VIDEO_MODULE_RELATIVE
    paths.push_back((self.parent_path() / DETSEG_VIDEO_MODULE_RELATIVE).lexically_normal().string());
#endif
  }
#ifdef DETSEG_VIDEO_MODULE_BUILD
  paths.push_back(DETSEG_VIDEO_MODULE_BUILD);
#endif
#ifdef DETSEG_VIDEO_MODULE_INSTALL
  paths.push_back(DETSEG_VIDEO_MODULE_INSTALL);
#endif
  return paths;
}

// Loaded once per process and never unloaded (its readers and writers may outlive any caller).
const video_module::Api& module_api() {
  static std::once_flag once;
  static const video_module::Api* api = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : module_candidates()) {
      if (!file_exists(path)) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = ::dlerror();
        failure = str(path, ": cannot be loaded (", why ? why : "unknown reason",
                      "); it needs OpenCV's videoio: Debian's libopencv-videoio406 (scripts/setup.sh installs it)");
        return;
      }
      using Entry = const video_module::Api* (*)();
      auto entry = reinterpret_cast<Entry>(::dlsym(handle, "detseg_video_module_api"));
      const video_module::Api* found = entry ? entry() : nullptr;
      if (found == nullptr || found->abi_version != video_module::kAbiVersion) {
        failure = str(path, ": not the video module of this detseg build (rebuild the detseg_video target)");
        return;
      }
      api = found;
      return;
    }
    failure = str("video input needs detseg's video module ", kModuleName, ", which is in none of ", tried,
                  " (build the detseg_video target, or set DETSEG_VIDEO_MODULE to its path)");
  });
  DETSEG_CHECK(api != nullptr, failure);
  return *api;
}

}  // namespace

VideoSourceKind video_source_kind(const std::string& input) {
  const size_t scheme = input.find("://");
  if (scheme != std::string::npos && scheme > 0) return VideoSourceKind::kStream;
  if (input.rfind("/dev/", 0) == 0) return VideoSourceKind::kDevice;
  return VideoSourceKind::kFile;
}

std::unique_ptr<VideoReader> open_video(const std::string& source) {
  const VideoSourceKind kind = video_source_kind(source);
  if (kind != VideoSourceKind::kStream) {
    const std::string why = why_unreadable(source);
    DETSEG_CHECK(why.empty(), source, ": ", why);
  }
  std::string error;
  VideoReader* reader = module_api().open_reader(source, kind, error);
  DETSEG_CHECK(reader != nullptr, source, ": ", error);
  return std::unique_ptr<VideoReader>(reader);
}

std::unique_ptr<VideoWriter> create_video(const std::string& path, double fps, int width, int height) {
  DETSEG_CHECK(fps > 0 && width > 0 && height > 0, path, ": a video needs a positive frame rate and size, got ", fps,
               " fps, ", width, "x", height);
  std::string error;
  VideoWriter* writer = module_api().open_writer(path, fps, width, height, error);
  DETSEG_CHECK(writer != nullptr, path, ": ", error);
  return std::unique_ptr<VideoWriter>(writer);
}

}  // namespace detseg
