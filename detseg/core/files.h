// Implements: whole-file reads with clear errors, and atomic writes (temp file, fsync, rename) so
// a process killed mid-write leaves the previous file intact.
#pragma once

#include <string>

namespace detseg {

// Reads a whole file; throws Error naming the path when it is missing or unreadable.
std::string read_file(const std::string& path);

// Writes `data` to `path` atomically: the bytes go to `path.tmp.<pid>`, are fsync'ed, then renamed
// over `path`, and the folder is fsync'ed so the rename itself survives a crash.
void write_file_atomic(const std::string& path, const std::string& data);

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
void make_directories(const std::string& path);

}  // namespace detseg
