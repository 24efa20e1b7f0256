// Implements: timing of detseg's COCO evaluation on the shared reference cases, phase by phase
// (JSON load, evaluate, accumulate, summarize) beside pycocotools' timings recorded in
// ../shared/coco_cases/*/ref.json; then the whole `detseg coco-eval` process against whole
// pycocotools 2.0.11 and faster-coco-eval 1.8.0 processes run in the same invocation (from the venv,
// DETSEG_PYTHON), with their 12 stats compared (they must agree within 1e-6).
// Usage: bench_coco_eval [case ...] [--repeats N] [--threads N] [--detseg PATH]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "detseg/core/json.h"
#include "detseg/core/threads.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"
#include "test_paths.h"

extern char** environ;

using namespace detseg;

namespace {

// User + system CPU seconds of the whole process (all threads): steadier than wall time on a
// shared machine.
double cpu_now() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Recorded {
  double evaluate_accumulate = 0, whole = 0;
};

// pycocotools' own timings from ref.json; "whole" adds loading and summarize as recorded.
Recorded recorded(const std::string& dir) {
  JsonDocument doc;
  load_json(dir + "/ref.json", doc);
  Recorded r;
  auto timing = doc.root["timing"];
  r.evaluate_accumulate = double(timing["evaluate_accumulate_s"]);
  r.whole = r.evaluate_accumulate + double(timing["load_gt_s"]) + double(timing["load_dt_s"]) +
            double(timing["summarize_s"]);
  return r;
}

struct ProcessRun {
  double wall = 0, cpu = 0;
  int status = -1;
};

// Runs `argv` with stdout/stderr to /dev/null; wall and CPU time of the child. (Not its peak RSS:
// Linux carries this process's high-water mark across the child's exec; use /usr/bin/time -v.)
ProcessRun run_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  ProcessRun r;
  const double t0 = now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) return r;
  rusage usage{};
  int status = 0;
  wait4(pid, &status, 0, &usage);
  r.wall = now() - t0;
  r.cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  r.status = status;
  posix_spawn_file_actions_destroy(&actions);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  std::vector<std::string> cases;
  int repeats = 5, threads = 0;
  std::string detseg = DETSEG_BINARY;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--detseg") && i + 1 < argc) detseg = argv[++i];
    else cases.push_back(argv[i]);
  }
  if (cases.empty()) cases = {"case_small", "case_medium", "case_large"};
  if (threads <= 0) threads = hardware_threads();
  std::printf("detseg COCO eval (bbox), %d threads, best of %d runs. The pycocotools figures of this first\n"
              "table are the ones recorded in coco_cases/*/ref.json; the second table runs the peers.\n\n",
              threads, repeats);
  std::printf("%-12s %8s %8s %8s %8s %9s %9s | %10s %10s | %8s %8s %8s\n", "case", "load", "evaluate", "accum",
              "summ", "whole", "cpu whole", "pycoco e+a", "pycoco all", "x e+a", "x whole", "x cpu");
  for (const auto& name : cases) {
    const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/" + name;
    double best_load = 1e9, best_eval = 1e9, best_acc = 1e9, best_sum = 1e9, best_whole = 1e9, best_cpu = 1e9;
    for (int r = 0; r < repeats; ++r) {
      const double c0 = cpu_now();
      const double t0 = now();
      CocoDataset gt = read_coco(dir + "/gt.json");
      CocoDataset dt = read_coco_results(dir + "/dt.json", gt);
      const double t1 = now();
      CocoEvalResult result = coco_evaluate(gt, dt, CocoEvalParams(), threads);
      const double t2 = now();
      const double t3 = now();
      std::string text = coco_summary_text(result);  // summarize() itself runs inside coco_evaluate
      const double t4 = now();
      best_cpu = std::min(best_cpu, cpu_now() - c0);
      best_load = std::min(best_load, t1 - t0);
      best_eval = std::min(best_eval, result.seconds_evaluate);
      best_acc = std::min(best_acc, result.seconds_accumulate);
      best_sum = std::min(best_sum, (t2 - t1) - result.seconds_evaluate - result.seconds_accumulate + (t4 - t3));
      best_whole = std::min(best_whole, t4 - t0);
    }
    Recorded rec = recorded(dir);
    std::printf("%-12s %8.4f %8.4f %8.4f %8.4f %9.4f %9.4f | %10.3f %10.3f | %7.1fx %7.1fx %7.1fx\n", name.c_str(),
                best_load, best_eval, best_acc, best_sum, best_whole, best_cpu, rec.evaluate_accumulate, rec.whole,
                rec.evaluate_accumulate / (best_eval + best_acc), rec.whole / best_whole, rec.whole / best_cpu);
  }

  // Whole processes, as a user runs them: `detseg coco-eval` against pycocotools and
  // faster-coco-eval (bench/peers/coco_eval_peer.py: load, evaluate, accumulate, summarize), each
  // the best of `repeats`, and their 12 stats compared.
  std::printf("\nwhole processes, best of %d: `%s --threads %d coco-eval` vs pycocotools and faster-coco-eval\n"
              "(%s, bench/peers/coco_eval_peer.py); |stats difference| is the largest over the 12 numbers\n\n",
              repeats, detseg.c_str(), threads, DETSEG_PYTHON);
  std::printf("%-12s %9s | %9s %8s %10s | %9s %8s %10s\n", "case", "detseg", "pycoco", "x", "|stats d|",
              "faster", "x", "|stats d|");
  const std::string tmp = "/tmp/detseg_bench_coco_eval." + std::to_string(getpid());
  int failures = 0;
  for (const auto& name : cases) {
    const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/" + name;
    auto best_of = [&](const std::vector<std::string>& args) {
      ProcessRun best;
      best.wall = 1e9;
      for (int r = 0; r < repeats; ++r) {
        ProcessRun run = run_process(args);
        if (run.status != 0) {
          std::fprintf(stderr, "%s failed on %s (status %d)\n", args[0].c_str(), name.c_str(), run.status);
          best.status = run.status;
          return best;
        }
        if (run.wall < best.wall) best = run;
      }
      return best;
    };
    auto stats_of = [](const std::string& file) {
      std::vector<double> out;
      JsonDocument doc;
      load_json(file, doc);
      for (auto v : doc.root["stats"].get_array()) out.push_back(double(v));
      return out;
    };
    auto max_difference = [](const std::vector<double>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return 1e9;
      double d = 0;
      for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
      return d;
    };
    const ProcessRun ours = best_of({detseg, "--threads", std::to_string(threads), "coco-eval", "--gt", dir + "/gt.json",
                                     "--dt", dir + "/dt.json", "--json", tmp + ".detseg.json"});
    const ProcessRun pycoco = best_of({DETSEG_PYTHON, std::string(DETSEG_SOURCE_DIR) + "/bench/peers/coco_eval_peer.py", "pycocotools",
                                       dir + "/gt.json", dir + "/dt.json", tmp + ".pycoco.json"});
    const ProcessRun faster = best_of({DETSEG_PYTHON, std::string(DETSEG_SOURCE_DIR) + "/bench/peers/coco_eval_peer.py",
                                       "faster-coco-eval", dir + "/gt.json", dir + "/dt.json", tmp + ".faster.json"});
    if (ours.status != 0 || pycoco.status != 0 || faster.status != 0) {
      ++failures;
      continue;
    }
    const std::vector<double> s_ours = stats_of(tmp + ".detseg.json");
    const double d_pycoco = max_difference(s_ours, stats_of(tmp + ".pycoco.json"));
    const double d_faster = max_difference(s_ours, stats_of(tmp + ".faster.json"));
    if (d_pycoco > 1e-6 || d_faster > 1e-6) ++failures;
    std::printf("%-12s %9.4f | %9.4f %7.1fx %10.1e | %9.4f %7.1fx %10.1e\n", name.c_str(), ours.wall, pycoco.wall,
                pycoco.wall / ours.wall, d_pycoco, faster.wall, faster.wall / ours.wall, d_faster);
  }
  for (const char* suffix : {".detseg.json", ".pycoco.json", ".faster.json"}) std::remove((tmp + suffix).c_str());
  if (failures) {
    std::printf("\n%d case(s) failed or disagreed beyond 1e-6\n", failures);
    return 1;
  }
  return 0;
}
