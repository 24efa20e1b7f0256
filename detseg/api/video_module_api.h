// Implements: the contract between api/video_io.cpp (in the library) and libdetseg_video.so (the
// module that links OpenCV's videoio, api/video_module.cpp): one C entry point handing out a table
// of factories. Errors come back as text in our words, never as exceptions across the boundary.
#pragma once

#include <string>

#include "detseg/api/video_io.h"

namespace detseg::video_module {

// Raised when the table changes, so a stale module is refused instead of called wrongly.
constexpr int kAbiVersion = 1;

struct Api {
  int abi_version;
  // nullptr with `error` set when the source cannot be opened.
  VideoReader* (*open_reader)(const std::string& source, VideoSourceKind kind, std::string& error);
  // nullptr with `error` set when the file cannot be created.
  VideoWriter* (*open_writer)(const std::string& path, double fps, int width, int height, std::string& error);
};

}  // namespace detseg::video_module

extern "C" const detseg::video_module::Api* detseg_video_module_api();
