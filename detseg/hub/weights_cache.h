// Implements: pretrained weights named by a URL or a path (model.pretrained, `detseg fetch`),
// pinned by a SHA-256: a URL is downloaded once into the weights cache and reused from there
// without the network; nothing unverified is ever put in place or loaded.
#pragma once

#include <string>

#include "detseg/hub/download.h"

namespace detseg {

// $DETSEG_HOME/weights, else $XDG_CACHE_HOME/detseg/weights, else ~/.cache/detseg/weights.
std::string weights_cache_dir();

// True for "scheme://..." (http, https, file, or any other scheme, refused later by name).
bool is_url(const std::string& source);

// The last path segment of a URL, without query or fragment: the name it is cached under.
// Throws ConfigError naming `key` and the URL when there is none ("https://host/").
std::string url_file_name(const std::string& url, const std::string& key);

// The hash prefix torchvision puts in its file names, as torch.hub's check_hash reads it
// ("-<hex>." : resnet50-0676ba61.pth -> 0676ba61); "" when there is none or it is shorter than 8.
std::string hash_in_file_name(const std::string& file_name);

// The hash `source` must match: `sha256` when given, else for a URL the one in its file name;
// "" for a path without `sha256` (used unverified). Throws ConfigError naming `key` (and
// `sha256_key` for the hash) when `sha256` is not 8-64 hex digits, when a URL has neither, or
// when a URL's scheme is not http, https or file.
std::string expected_sha256(const std::string& source, const std::string& sha256, const std::string& key,
                            const std::string& sha256_key);

// The local file of `source`. A URL: <cache_dir>/<file name> when that exists and matches the
// hash; otherwise downloaded into <file name>.part (resuming a .part an earlier run left),
// verified, and renamed into place. One process at a time downloads into `cache_dir` (the others
// wait, then find the file). A path: checked to exist and, with a hash, verified. Errors (Error,
// ConfigError for a missing path) start with `key`: "model.pretrained: URL: HTTP 404 Not Found",
// "model.pretrained: URL: sha256 mismatch: expected E, got G (the download was deleted)".
std::string fetch_weights(const std::string& source, const std::string& sha256, const std::string& key,
                          const std::string& sha256_key, const std::string& cache_dir = weights_cache_dir(),
                          const DownloadOptions& options = {});

}  // namespace detseg
