// Implements: the resumable libcurl transfer declared in download.h. libcurl is opened with
// dlopen at the first download, not linked: its ~30 dependent libraries (TLS, Kerberos, LDAP)
// cost every `detseg` process ~4 ms of start-up, more than `detseg coco-eval` spends on a small
// evaluation.
#include "detseg/hub/download.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/core/stop_signal.h"

namespace detseg {
namespace {

using Clock = std::chrono::steady_clock;

// The libcurl functions used here, resolved from libcurl.so.4 (the soname of every libcurl 7.x/8.x).
struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
};

template <typename Fn>
void resolve(void* library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(library, name));
  DETSEG_CHECK(fn, "downloads need libcurl 7.85 or newer (libcurl.so.4 has no ", name, ")");
}

const CurlApi& curl_api() {
  static const CurlApi api = [] {
    void* library = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    DETSEG_CHECK(library, "downloads need libcurl (libcurl.so.4 not found: install libcurl4, e.g. apt-get install "
                          "libcurl4), or pass a local path instead of a URL");
    CurlApi a{};
    resolve(library, "curl_global_init", a.global_init);
    resolve(library, "curl_easy_init", a.easy_init);
    resolve(library, "curl_easy_setopt", a.easy_setopt);
    resolve(library, "curl_easy_perform", a.easy_perform);
    resolve(library, "curl_easy_getinfo", a.easy_getinfo);
    resolve(library, "curl_easy_cleanup", a.easy_cleanup);
    resolve(library, "curl_easy_strerror", a.easy_strerror);
    a.global_init(CURL_GLOBAL_DEFAULT);
    return a;
  }();
  return api;
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

bool is_file_url(const std::string& url) {
  return url.size() >= 7 && ::strncasecmp(url.c_str(), "file://", 7) == 0;
}

// What one transfer saw; shared with libcurl's callbacks.
struct Transfer {
  std::string url;
  std::string name;         // the file name, for the progress line
  FILE* file = nullptr;
  bool http = true;
  int64_t offset = 0;       // bytes the file held when the transfer started (0 after a restart)
  int64_t received = 0;     // body bytes this transfer wrote
  long status = 0;          // the last HTTP status line's code (redirects each have their own)
  std::string reason;       // and its reason phrase
  int64_t range_start = -1;  // a 206's Content-Range start
  bool body_started = false;
  bool wrong_range = false;  // a 206 starting elsewhere than asked: start over
  bool restarted = false;    // a 200 to a Range request: the file was rewritten from byte 0
  int write_errno = 0;
  bool stopped = false;      // SIGINT/SIGTERM
  bool connected = false;    // the connection (or the local file) was opened
  bool show_progress = false;
  Clock::time_point start = Clock::now(), last_draw{};
  bool drew = false;
};

std::string trim_line_end(const char* data, size_t size) {
  std::string line(data, size);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  return line;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::string line = trim_line_end(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect, the next one)
    const size_t sp = line.find(' ');
    t.status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    const size_t sp2 = sp == std::string::npos ? std::string::npos : line.find(' ', sp + 1);
    t.reason = sp2 == std::string::npos ? "" : line.substr(sp2 + 1);
    t.range_start = -1;
  } else if (line.size() > 14 && ::strncasecmp(line.c_str(), "content-range:", 14) == 0) {
    long long start = -1;
    if (std::sscanf(line.c_str() + 14, " bytes %lld-", &start) == 1) t.range_start = start;
  }
  return size * count;
}

// The first body bytes decide what the answer means for the file: a 206 continues it, a 200 (a
// server that ignores Range) replaces it, an error page is not written at all.
bool accept_body(Transfer& t) {
  if (!t.http) return true;
  if (t.status >= 300) return false;
  if (t.status == 206) {
    if (t.range_start != t.offset) t.wrong_range = true;
    return !t.wrong_range;
  }
  if (t.offset > 0) {
    if (::ftruncate(::fileno(t.file), 0) != 0) {
      t.write_errno = errno;
      return false;
    }
    t.offset = 0;
    t.restarted = true;
  }
  return true;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (t.http && t.status >= 300 && t.status < 400) return bytes;  // a redirect's page: the next answer counts
  if (!t.body_started) {
    t.body_started = true;
    if (!accept_body(t)) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  if (std::fwrite(data, 1, bytes, t.file) != bytes) {
    t.write_errno = errno ? errno : EIO;
    return 0;
  }
  t.received += static_cast<int64_t>(bytes);
  return bytes;
}

void draw_progress(Transfer& t, int64_t now_bytes, int64_t total_bytes, bool final) {
  const auto now = Clock::now();
  if (!final && now - t.last_draw < std::chrono::milliseconds(200)) return;
  t.last_draw = now;
  const double seconds = std::chrono::duration<double>(now - t.start).count();
  const double rate = seconds > 0 ? static_cast<double>(t.received) / seconds : 0;
  std::string line = str("downloading ", t.name, ": ", format_bytes(now_bytes));
  if (total_bytes > 0)
    line += str(" / ", format_bytes(total_bytes), " (", 100 * now_bytes / total_bytes, "%)");
  line += str(" ", format_bytes(static_cast<int64_t>(rate)), "/s");
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  t.drew = true;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto& t = *static_cast<Transfer*>(user);
  if (stop_signal() != 0) {
    t.stopped = true;
    return 1;  // aborts the transfer (CURLE_ABORTED_BY_CALLBACK)
  }
  if (t.show_progress && t.body_started)
    draw_progress(t, t.offset + static_cast<int64_t>(now), total > 0 ? t.offset + static_cast<int64_t>(total) : -1,
                  false);
  return 0;
}

// libcurl's own words for a failure, rephrased where the user can act on ours.
std::string describe_failure(CURLcode rc, const Transfer& t, const DownloadOptions& options) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST: return "cannot resolve the host name";
    case CURLE_COULDNT_CONNECT: return "cannot connect (no server answering there)";
    case CURLE_OPERATION_TIMEDOUT:
      if (!t.connected) return str("no connection within ", options.connect_timeout_s, " s");
      if (t.status == 0 && t.http) return str("the server sent nothing for ", options.stall_timeout_s, " s");
      return str("stalled: less than 1 byte/s for ", options.stall_timeout_s, " s");
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING: return "the connection closed before the whole file arrived";
    case CURLE_TOO_MANY_REDIRECTS: return "too many redirects";
    case CURLE_UNSUPPORTED_PROTOCOL: return "unsupported URL scheme (http, https and file are supported)";
    case CURLE_URL_MALFORMAT: return "malformed URL";
    case CURLE_FILE_COULDNT_READ_FILE: return "no such file";
    case CURLE_PEER_FAILED_VERIFICATION: return "the server's TLS certificate is not trusted";
    case CURLE_SSL_CONNECT_ERROR: return "TLS handshake failed";
    default: return curl_api().easy_strerror(rc);
  }
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_api().easy_cleanup(c); }
};
struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// One libcurl transfer into `path`, from its current size on.
CURLcode transfer_once(Transfer& t, const std::string& path, const DownloadOptions& options) {
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "ab"));
  DETSEG_CHECK(file, path, ": cannot open for writing: ", std::strerror(errno));
  t.file = file.get();
  const CurlApi& api = curl_api();
  std::unique_ptr<CURL, CurlDeleter> curl(api.easy_init());
  DETSEG_CHECK(curl, "cannot start a download (libcurl failed to initialise)");
  CURL* c = curl.get();
  const std::string range = str(t.offset, "-");
  api.easy_setopt(c, CURLOPT_URL, t.url.c_str());
  api.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
  api.easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");  // a redirect never reads local files
  api.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  api.easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  api.easy_setopt(c, CURLOPT_USERAGENT, "detseg/" DETSEG_VERSION);
  api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: other threads may run
  api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_s * 1000));
  api.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  api.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(std::ceil(options.stall_timeout_s))));
  // Range by hand, not CURLOPT_RESUME_FROM: with that, libcurl fails a 200 answer outright, where
  // we want to start over.
  if (t.offset > 0) api.easy_setopt(c, CURLOPT_RANGE, range.c_str());
  api.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  api.easy_setopt(c, CURLOPT_HEADERDATA, &t);
  api.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  api.easy_setopt(c, CURLOPT_WRITEDATA, &t);
  api.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  api.easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  api.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  const CURLcode rc = api.easy_perform(c);
  long code = 0;
  if (api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code != 0) t.status = code;
  curl_off_t connect_us = 0;
  t.connected = api.easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK && connect_us > 0;
  if (t.show_progress && t.drew) {
    if (rc == CURLE_OK) draw_progress(t, t.offset + t.received, t.offset + t.received, true);
    std::fprintf(stderr, "\n");
  }
  DETSEG_CHECK(std::fflush(file.get()) == 0 && t.write_errno == 0, path, ": write failed: ",
               std::strerror(t.write_errno ? t.write_errno : errno));
  return rc;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  if (bytes < 1000) return str(bytes, " B");
  if (bytes < 1000 * 1000) return str(bytes / 1000, " kB");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

void download_resumable(const std::string& url, const std::string& path, const DownloadOptions& options) {
  curl_api();
  const bool file_url = is_file_url(url);
  // A local copy is cheap: never resume it, so a file that changed cannot leave a spliced copy.
  if (file_url && file_size(path) > 0) DETSEG_CHECK(::truncate(path.c_str(), 0) == 0, path, ": cannot truncate");
  for (int attempt = 1;; ++attempt) {
    Transfer t;
    t.url = url;
    t.name = path.substr(path.rfind('/') + 1);
    if (t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".part") == 0) t.name.resize(t.name.size() - 5);
    t.http = !file_url;
    t.offset = file_size(path);
    t.show_progress = options.progress && ::isatty(2);
    const CURLcode rc = transfer_once(t, path, options);
    if (t.stopped)
      throw Interrupted(stop_signal(), str("download of ", url, " stopped by ", signal_name(stop_signal()), "; the ",
                                           format_bytes(file_size(path)), " received are kept in ", path,
                                           " and resumed next time"));
    if (t.restarted) log_info(url, ": the server ignored the Range request; downloaded from the start");
    if (t.http && t.status >= 300) {
      // The whole file already arrived (a run killed between the last byte and the rename).
      if (t.status == 416 && t.offset > 0) return;
      throw Error(str(url, ": HTTP ", t.status, t.reason.empty() ? "" : " " + t.reason));
    }
    if (rc == CURLE_OK && !t.wrong_range) return;
    if (t.wrong_range) {
      log_warn(url, ": the server resumed at byte ", t.range_start, " instead of ", t.offset, "; starting over");
      DETSEG_CHECK(::truncate(path.c_str(), 0) == 0, path, ": cannot truncate");
    }
    const std::string what = t.wrong_range ? "the server resumed at the wrong byte" : describe_failure(rc, t, options);
    const bool progressed = t.received > 0 || t.wrong_range;
    if (progressed && attempt < options.attempts) {
      log_warn(url, ": ", what, " (", format_bytes(file_size(path)), " so far); resuming (attempt ", attempt + 1,
               " of ", options.attempts, ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
      continue;
    }
    const int64_t kept = file_size(path);
    throw Error(str(url, ": download failed: ", what,
                    kept > 0 ? str("; the ", format_bytes(kept), " received are kept in ", path,
                                   " and resumed by the next run")
                             : std::string()));
  }
}

}  // namespace detseg
