// Downloads from a loopback HTTP server (tests/fixtures/range_server.py): a whole file; a
// connection cut mid-way resumed with a Range request, by the next call or by the same call's
// retry, to identical bytes; a server that ignores Range; a .part that already holds the whole
// file (416); redirects; a stalled server timing out; 404 and hash-mismatch error texts; the
// cached file reused with the server gone; file:// URLs and local paths.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "command_runner.h"
#include "detseg/core/error.h"
#include "detseg/hub/sha256.h"
#include "detseg/hub/weights_cache.h"
#include "error_of.h"
#include "range_server.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using detseg::testing::read_text;

namespace {

// A fresh folder per test: served files in root/, the cache in cache/, the server's state in server/.
struct Scratch {
  detseg::testing::TempDir temp{"test_download"};
  fs::path dir, root, cache;
  std::string data, digest;
  Scratch() {
    dir = temp.path();
    root = dir / "root";
    cache = dir / "cache";
    fs::create_directories(root);
    std::mt19937 rng(7);
    data.resize(3000000);
    for (char& c : data) c = static_cast<char>(rng());
    digest = detseg::sha256_hex(data);
  }
  // Writes the data (or `bytes`) as root/<name>.
  void serve(const std::string& name, const std::string* bytes = nullptr) const {
    std::ofstream(root / name, std::ios::binary) << (bytes ? *bytes : data);
  }
  // torchvision's naming: the hash's first 8 digits after a dash.
  std::string hashed_name(const std::string& stem) const { return stem + "-" + digest.substr(0, 8) + ".pth"; }
};

detseg::DownloadOptions quick(int attempts = 5) {
  detseg::DownloadOptions o;
  o.attempts = attempts;
  o.connect_timeout_s = 5;
  o.stall_timeout_s = 2;
  return o;
}

std::string fetch(const std::string& source, const std::string& sha256, const Scratch& s,
                  const detseg::DownloadOptions& options = quick()) {
  return detseg::fetch_weights(source, sha256, "model.pretrained", "model.pretrained_sha256", s.cache.string(),
                               options);
}

using detseg::testing::error_of;

}  // namespace

TEST(Download, WholeFileWithTheHashFromItsName) {
  Scratch s;
  const std::string name = s.hashed_name("resnet18");
  s.serve(name);
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string path = fetch(server.url("range", name), "", s);
  EXPECT_EQ(path, (s.cache / name).string());
  EXPECT_EQ(read_text(path), s.data);
  EXPECT_FALSE(fs::exists(path + ".part"));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0]["range"].is_null());
  EXPECT_EQ(requests[0]["status"], 200);
}

TEST(Download, CutConnectionIsResumedByTheNextRunWithARangeRequest) {
  Scratch s;
  const std::string name = s.hashed_name("cut");
  s.serve(name);
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string url = server.url("cut", name);
  const std::string part = (s.cache / name).string() + ".part";
  // One attempt: the cut ends the call, and the bytes that arrived stay in the .part.
  const std::string first = error_of([&] { fetch(url, "", s, quick(1)); });
  EXPECT_EQ(first, "model.pretrained: " + url + ": download failed: the connection closed before the whole file "
                   "arrived; the 1.5 MB received are kept in " + part + " and resumed by the next run");
  ASSERT_TRUE(fs::exists(part));
  EXPECT_EQ(fs::file_size(part), 1500000u);
  EXPECT_FALSE(fs::exists(s.cache / name));
  const std::string path = fetch(url, "", s, quick(1));
  EXPECT_EQ(read_text(path), s.data);
  EXPECT_FALSE(fs::exists(part));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0]["range"].is_null());
  EXPECT_EQ(requests[1]["range"], "bytes=1500000-");
  EXPECT_EQ(requests[1]["status"], 206);
}

TEST(Download, CutConnectionIsResumedWithinOneCall) {
  Scratch s;
  s.serve("blob.bin");
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string path = fetch(server.url("cut", "blob.bin"), s.digest, s);
  EXPECT_EQ(read_text(path), s.data);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1]["range"], "bytes=1500000-");
}

TEST(Download, ServerIgnoringRangeRewritesThePartialFile) {
  Scratch s;
  s.serve("blob.bin");
  fs::create_directories(s.cache);
  std::ofstream(s.cache / "blob.bin.part", std::ios::binary) << std::string(1000, 'x');  // not even the right bytes
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string path = fetch(server.url("norange", "blob.bin"), s.digest.substr(0, 16), s);
  EXPECT_EQ(read_text(path), s.data);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["range"], "bytes=1000-");
  EXPECT_EQ(requests[0]["status"], 200);
}

TEST(Download, PartialFileHoldingEverythingIsVerifiedAndKept) {
  Scratch s;
  s.serve("blob.bin");
  fs::create_directories(s.cache);
  std::ofstream(s.cache / "blob.bin.part", std::ios::binary) << s.data;  // killed before the rename
  detseg::test::RangeServer server(s.root, s.dir / "server");
  EXPECT_EQ(read_text(fetch(server.url("range", "blob.bin"), s.digest, s)), s.data);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["status"], 416);
}

TEST(Download, FollowsRedirects) {
  Scratch s;
  s.serve("blob.bin");
  detseg::test::RangeServer server(s.root, s.dir / "server");
  EXPECT_EQ(read_text(fetch(server.url("redirect", "blob.bin"), s.digest, s)), s.data);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0]["status"], 302);
  EXPECT_EQ(requests[1]["path"], "/range/blob.bin");
}

TEST(Download, StalledServerTimesOut) {
  Scratch s;
  s.serve("blob.bin");
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string url = server.url("stall", "blob.bin");
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of([&] { fetch(url, s.digest, s, quick(1)); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(error, "model.pretrained: " + url + ": download failed: stalled: less than 1 byte/s for 2 s; the 10 B "
                   "received are kept in " + (s.cache / "blob.bin.part").string() + " and resumed by the next run");
  EXPECT_LT(seconds, 15);  // not the server's 30 s of silence
}

TEST(Download, HttpErrorIsOneLineAndLeavesNothing) {
  Scratch s;
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string url = server.url("range", "missing-0676ba61.pth");
  EXPECT_EQ(error_of([&] { fetch(url, "", s); }), "model.pretrained: " + url + ": HTTP 404 Not Found");
  EXPECT_TRUE(fs::is_empty(s.cache));
}

TEST(Download, HashMismatchDeletesTheDownloadAndNamesBothHashes) {
  Scratch s;
  s.serve("resnet18-0badc0de.pth");
  detseg::test::RangeServer server(s.root, s.dir / "server");
  const std::string url = server.url("range", "resnet18-0badc0de.pth");
  EXPECT_EQ(error_of([&] { fetch(url, "", s); }), "model.pretrained: " + url + ": sha256 mismatch: expected 0badc0de, got " +
                                                      s.digest + " (the download was deleted)");
  EXPECT_TRUE(fs::is_empty(s.cache));
}

TEST(Download, CachedFileIsReusedWithoutTheServer) {
  Scratch s;
  const std::string name = s.hashed_name("cached");
  s.serve(name);
  std::string url, path;
  {
    detseg::test::RangeServer server(s.root, s.dir / "server");
    url = server.url("range", name);
    path = fetch(url, "", s);
  }  // the server is gone
  EXPECT_EQ(fetch(url, "", s), path);
  EXPECT_EQ(fetch(url, s.digest, s), path);
  EXPECT_EQ(read_text(path), s.data);
  // A cached file that does not match the pin is not used: it is fetched again (here: no server).
  const std::string error = error_of([&] { fetch(url, "0badc0de", s); });
  EXPECT_EQ(error, "model.pretrained: " + url + ": download failed: cannot connect (no server answering there)");
  EXPECT_FALSE(fs::exists(path));
}

TEST(Download, FileUrlsAndLocalPaths) {
  Scratch s;
  s.serve("blob.bin");
  const std::string local = (s.root / "blob.bin").string();
  const std::string copied = fetch("file://" + local, s.digest, s);
  EXPECT_EQ(copied, (s.cache / "blob.bin").string());
  EXPECT_EQ(read_text(copied), s.data);
  // A path is used where it is, verified when a hash is given.
  EXPECT_EQ(fetch(local, "", s), local);
  EXPECT_EQ(fetch(local, s.digest.substr(0, 8), s), local);
  EXPECT_EQ(error_of([&] { fetch(local, "0badc0de", s); }),
            "model.pretrained: " + local + ": sha256 mismatch: expected 0badc0de, got " + s.digest);
  EXPECT_EQ(error_of<detseg::ConfigError>([&] { fetch(local + ".nope", "", s); }),
            "model.pretrained: " + local + ".nope: file not found");
  EXPECT_EQ(error_of([&] { fetch("file://" + local + ".nope", s.digest, s); }),
            "model.pretrained: file://" + local + ".nope: download failed: no such file");
}
