// Implements: whole-file reads with clear errors, and atomic writes (temp file, fsync, rename) so
// a process killed mid-write leaves the previous file intact.
#pragma once

#include <string>
#include <vector>

namespace detseg {

// Reads a whole file; throws Error naming the path when it is missing or unreadable.
std::string read_file(const std::string& path);

// Writes `data` to `path` atomically: the bytes go to `path.tmp.<pid>`, are fsync'ed, then renamed
// over `path`, and the folder is fsync'ed so the rename itself survives a crash. kAtomicOnly skips
// the two fsyncs (readers still never see a partial file): for small outputs that a rerun
// regenerates in milliseconds, where the ~1 ms of syncing would be most of the command's time.
enum class Durability { kSynced, kAtomicOnly };
void write_file_atomic(const std::string& path, const std::string& data, Durability durability = Durability::kSynced);

// Removes `<name>.tmp.<pid>` files in `dir` (not below it) whose writer process no longer exists,
// the leftovers of a process killed mid-write. Returns how many were removed.
int remove_stale_temp_files(const std::string& dir);

// An exclusive lock on a folder (flock on `dir/.lock`, which records the holder's PID) held for
// the object's lifetime. The kernel drops it when the process dies, so a killed run never blocks
// the next one.
class DirectoryLock {
 public:
  // Throws Error "<dir> is in use by <what> (pid N) ..." when another process holds it.
  DirectoryLock(const std::string& dir, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// One input of a command, for check_output_is_not_an_input: its path and what it is, in the error's
// words ("the ground-truth file given by --gt").
struct CommandInput {
  std::string path;
  std::string what;
};

// True when both paths exist and are the same file or folder (same device and inode, so through
// symlinks and hard links too).
bool same_file(const std::string& a, const std::string& b);

// A command never writes over what it reads: throws ConfigError "<flag> <output>: is <what>; choose
// another path" when `output` is one of `inputs` (same_file). `flag` names the output ("--json"); an
// empty `output` or one that does not exist yet passes.
void check_output_is_not_an_input(const std::string& output, const std::string& flag,
                                  const std::vector<CommandInput>& inputs);
// The same for many outputs at once (a drawing per image of a folder): each path is looked at once.
void check_outputs_are_not_inputs(const std::vector<std::string>& outputs, const std::string& flag,
                                  const std::vector<CommandInput>& inputs);

// Why `path` cannot be looked at, in plain words ("no such file or folder", "a symlink loop (...)",
// the system's reason), or "" when it can.
std::string why_unreadable(const std::string& path);

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
void make_directories(const std::string& path);

}  // namespace detseg
