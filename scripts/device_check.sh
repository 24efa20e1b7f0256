#!/usr/bin/env bash
# The GPU checks in one prepared run (issue 19): the CUDA tests (every kernel against the CPU kernel,
# a training forward of each model on CUDA against the CPU, bf16/fp16 steps, a checkpoint written on
# CUDA restored on the CPU), then the GPU benchmark against torchvision on the same GPU. Writes one
# JSON with everything (device_check.json) and a log.
#
#   scripts/device_check.sh --prepare      on the build machine: builds test_cuda and bench_gpu and
#                                          gathers them, with the non-torch shared libraries they
#                                          need, into .devcheck/ (git-ignored, well under 64 MiB)
#   scripts/device_check.sh                on the GPU machine, from the repository root with
#                                          .devcheck/ carried in: runs everything against that
#                                          machine's own torch (python3's); results in $OUT (or
#                                          build/device_check/)
#   scripts/device_check.sh --cpu-dry-run  on the build machine: the same binaries and steps on the
#                                          CPU at tiny sizes, to prove the script before a GPU run
set -uo pipefail
cd "$(dirname "$0")/.."
mode=gpu
case "${1:-}" in
  --prepare) mode=prepare ;;
  --cpu-dry-run) mode=dry ;;
  "") ;;
  *) echo "usage: scripts/device_check.sh [--prepare | --cpu-dry-run]" >&2; exit 2 ;;
esac

if [[ $mode == prepare ]]; then
  set -e
  [[ -f build/build.ninja ]] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  ninja -C build -j "$(nproc)" test_cuda bench_gpu
  rm -rf .devcheck && mkdir -p .devcheck/bin .devcheck/lib
  cp build/tests/test_cuda build/bench/bench_gpu .devcheck/bin/
  strip --strip-unneeded .devcheck/bin/*
  # Every shared library they load except torch's own (the GPU machine links its torch 2.11.0+cu130
  # and the CUDA libraries beside it) and the C runtime, which every Linux has.
  for bin in .devcheck/bin/*; do ldd "$bin"; done | awk '/=> \// {print $1, $3}' | sort -u |
    while read -r name path; do
      case "$path" in */torch/lib/*|*/nvidia/*|*/cuda/*) continue ;; esac
      case "$name" in libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) continue ;; esac
      cp -L "$path" .devcheck/lib/
    done
  grep -qx '/.devcheck/' .git/info/exclude 2>/dev/null || echo '/.devcheck/' >> .git/info/exclude
  echo "device_check: .devcheck/ holds $(ls .devcheck/lib | wc -l) libraries, $(du -sh .devcheck | cut -f1) in all"
  exit 0
fi

[[ -x .devcheck/bin/test_cuda ]] || { echo "device_check: run scripts/device_check.sh --prepare first" >&2; exit 2; }
out="${OUT:-build/device_check}"
mkdir -p "$out"
python="${DETSEG_PYTHON:-python3}"
[[ $mode == dry && -x .venv/bin/python ]] && python="${DETSEG_PYTHON:-.venv/bin/python}"
torch_lib="$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
export LD_LIBRARY_PATH="$PWD/.devcheck/lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log="$out/device_check.log"
: > "$log"
say() { echo "$*" | tee -a "$log"; }

if [[ $mode == dry ]]; then
  bench_args=(--size 128 --seg-size 64 --batch 2 --iters 1 --device cpu)
else
  bench_args=(--size 1024 --seg-size 512 --batch 8 --iters 8 --device cuda --profile retinanet,faster_rcnn)
fi
# DEVICE_CHECK_BENCH="--models retinanet --iters 3" (say) narrows the benchmark for a quick run.
read -r -a extra <<< "${DEVICE_CHECK_BENCH:-}"
bench_args+=("${extra[@]}")
say "device_check $(date -u +%FT%TZ) mode $mode, torch from $torch_lib"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$log"
"$python" -c 'import torch, torchvision; print("python torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tee -a "$log"
if command -v cuobjdump >/dev/null; then
  say "cuda code in test_cuda: $(cuobjdump --list-elf .devcheck/bin/test_cuda 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')"
  say "ptx in test_cuda: $(cuobjdump --list-ptx .devcheck/bin/test_cuda 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')"
fi

# (a) the CUDA tests, each in its own process so a crash shows as that test's failure and the rest
# still run (they skip on the CPU dry run, which still proves the binaries load and link).
start=$SECONDS
parts="$(mktemp -d)"
tests_rc=0
suite=""
while IFS= read -r line; do
  if [[ $line != " "* ]]; then suite="${line%% *}"; continue; fi
  name="$suite${line#  }"; name="${name%% *}"
  if timeout 120 .devcheck/bin/test_cuda --gtest_brief=1 --gtest_filter="$name" \
       --gtest_output="json:$parts/$(echo "$name" | tr '/' '_').json" >> "$parts/log" 2>&1; then
    echo "ok   $name" >> "$log"
  else
    tests_rc=1
    say "FAIL $name"
    [[ -f "$parts/$(echo "$name" | tr '/' '_').json" ]] || echo "{\"crashed\": \"$name\"}" > "$parts/$(echo "$name" | tr '/' '_').json"
  fi
done < <(.devcheck/bin/test_cuda --gtest_list_tests)
grep -E "Failure|error|Expected|Which is|Value of|actual|SKIPPED|what\(\)|Exception|Segmentation|Aborted" "$parts/log" | head -n 80 | tee -a "$log"
"$python" - "$parts" "$out/cuda_tests.json" <<'EOF2'
import glob, json, os, sys
merged = {"tests": 0, "failures": 0, "crashed": [], "testsuites": []}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    j = json.load(open(f))
    if "crashed" in j:
        merged["crashed"].append(j["crashed"]); continue
    merged["tests"] += j.get("tests", 0); merged["failures"] += j.get("failures", 0)
    merged["testsuites"] += j.get("testsuites", [])
json.dump(merged, open(sys.argv[2], "w"))
EOF2
rm -rf "$parts"
say "cuda tests: exit $tests_rc in $((SECONDS - start)) s"

# (b) the benchmark: detseg, then torchvision on the same device, then the ratios.
start=$SECONDS
timeout 240 .devcheck/bin/bench_gpu "${bench_args[@]}" > "$out/bench_detseg.json" 2> >(tee -a "$log" >&2)
bench_rc=$?
timeout 240 "$python" bench/peers/bench_gpu_torchvision.py "${bench_args[@]}" > "$out/bench_torchvision.json" 2> >(tee -a "$log" >&2)
peer_rc=$?
say "benchmarks: detseg exit $bench_rc, torchvision exit $peer_rc in $((SECONDS - start)) s"
if [[ $bench_rc == 0 && $peer_rc == 0 ]]; then
  "$python" bench/peers/gpu_report.py "$out/bench_detseg.json" "$out/bench_torchvision.json" "$out/bench.json" 2>&1 | tee -a "$log"
fi

"$python" - "$out" "$mode" "$tests_rc" "$bench_rc" "$peer_rc" <<'EOF'
import json, os, sys
out, mode, tests_rc, bench_rc, peer_rc = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
tests = load("cuda_tests.json")
summary = {"mode": mode, "tests_exit": tests_rc, "bench_exit": bench_rc, "peer_exit": peer_rc,
           "tests": tests and {k: tests.get(k) for k in ("tests", "failures", "crashed")},
           "failed_tests": [f"{s['name']}.{t['name']}" for s in (tests or {}).get("testsuites", [])
                            for t in s.get("testsuite", []) if t.get("failures")],
           "bench": load("bench.json")}
json.dump(summary, open(os.path.join(out, "device_check.json"), "w"), indent=1)
print("device_check:", json.dumps({k: summary[k] for k in ("tests_exit", "bench_exit", "peer_exit", "tests", "failed_tests")}))
EOF
[[ $tests_rc == 0 && $bench_rc == 0 && $peer_rc == 0 ]]
