// Implements: one URL's bytes into a local file with libcurl, resuming what an earlier, broken
// transfer left there (an HTTP Range request from its size). Knows nothing of hashes or caches:
// weights_cache.h decides what to fetch, where, and whether the result can be trusted.
#pragma once

#include <cstdint>
#include <string>

namespace detseg {

struct DownloadOptions {
  double connect_timeout_s = 30;  // a host that does not answer
  // A transfer receiving less than 1 byte/s for this long is aborted (a dead server or network
  // cannot hang training), then retried from where it stopped.
  double stall_timeout_s = 60;
  // Transfers tried in all; a new one is started only after one that received bytes was cut
  // (it resumes from there), never for HTTP errors.
  int attempts = 5;
  bool progress = true;  // a live bytes/%/rate line, drawn only when stderr is a terminal
};

// Appends the rest of `url` to `path` (created when absent). When `path` holds N bytes, asks for
// bytes N onwards (Range: bytes=N-); a server that answers with the whole file instead (200) has
// `path` truncated and rewritten. file:// URLs are always copied whole. Throws Error naming the
// URL on an HTTP error status ("HTTP 404 Not Found"), an unreachable host, or a transfer cut
// more often than `options.attempts` allows (`path` then keeps what arrived, for the next call);
// Interrupted when SIGINT/SIGTERM arrive (with install_stop_handlers).
// A 416 (range not satisfiable) for N > 0 means `path` already holds the whole file: it returns.
void download_resumable(const std::string& url, const std::string& path, const DownloadOptions& options = {});

// "12.3 MB", "850 kB", "17 B".
std::string format_bytes(int64_t bytes);

}  // namespace detseg
