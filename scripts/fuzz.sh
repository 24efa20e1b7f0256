#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang with ASan + UBSan, no LibTorch) into build-fuzz/
# and runs each one: first its saved crash reproducers (fuzz/regressions/<harness>/), then
# fuzzing for a fixed time from the seed corpora. One line per harness; exits 1 on any crash,
# naming the reproducer. See docs/fuzzing.md.
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--keep-going] [--torch] [harness...]
#     --seconds N    fuzz each harness N seconds (default 30; 0: only replay reproducers and seeds)
#     --jobs J       run J harnesses at a time (default 1; each uses one core)
#     --keep-going   fork mode: a crash is saved and fuzzing goes on (-ignore_crashes), to collect
#                    several findings in one long run
#     --torch        also the LibTorch readers' harnesses (pth safetensors checkpoint), built into
#                    build-fuzz-torch/ with the venv's LibTorch (a few minutes to build)
#     harness        coco_gt coco_eval_pair voc_xml config_yaml seg_png image (default: these),
#                    pth safetensors checkpoint
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-fuzz
seconds=30
keep_going=0
parallel=1
torch=0
harnesses=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) parallel=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --torch) torch=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
torch_harnesses=" pth safetensors checkpoint "
((${#harnesses[@]})) || harnesses=(coco_gt coco_eval_pair voc_xml config_yaml seg_png image)
((torch)) && harnesses+=(pth safetensors checkpoint)
for h in "${harnesses[@]}"; do [[ $torch_harnesses == *" $h "* ]] && torch=1; done

# Inputs larger than these add bytes, not code paths; the seeds fit.
declare -A max_len=([coco_gt]=16384 [coco_eval_pair]=32768 [voc_xml]=8192 [config_yaml]=8192 [seg_png]=16384
                  [image]=32768 [pth]=16384 [safetensors]=8192 [checkpoint]=8192)
# libFuzzer takes one dictionary: the format's tokens (fuzz/dict/), plus every config key.
declare -A dicts=([coco_gt]=fuzz/dict/json.dict [coco_eval_pair]=fuzz/dict/json.dict [voc_xml]=fuzz/dict/xml.dict
                  [config_yaml]="fuzz/dict/yaml.dict $build/dict/config_keys.dict" [seg_png]=fuzz/dict/png.dict
                  [image]=fuzz/dict/image.dict [pth]=fuzz/dict/pickle.dict [safetensors]=fuzz/dict/json.dict
                  [checkpoint]=fuzz/dict/json.dict)

start=$SECONDS
bash scripts/build_sanitized.sh fuzzers
((torch)) && bash scripts/build_sanitized.sh --torch torch_fuzzers
echo "fuzz: built in $((SECONDS - start)) s"
# Seed corpora from ../shared and configs/ (made here so the repository carries none of them).
python3 fuzz/make_seeds.py "$build" "$root" "$root/../shared"

# The readers take paths: each input goes through a scratch file, in memory where possible.
scratch=$(mktemp -d "$( [[ -w /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/detseg-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
# Leaks are findings too (LeakSanitizer, on by default with ASan); symbolized reports.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p "$build/logs"

# One harness: its summary on stdout, status 1 when it crashed.
run_harness() {
  local h=$1 failed=0
  bin=$build/fuzz_$h
  [[ $torch_harnesses == *" $h "* ]] && bin=$root/build-fuzz-torch/fuzz_$h
  [[ -x $bin ]] || { echo "fuzz: unknown harness '$h'"; return 1; }
  # LibTorch keeps allocations for the life of the process (its own caches), which LeakSanitizer
  # would report after every input.
  asan=$ASAN_OPTIONS
  [[ $torch_harnesses == *" $h "* ]] && asan=$ASAN_OPTIONS:detect_leaks=0
  dict=$build/dict/$h.dict
  cat ${dicts[$h]} > "$dict"
  log=$build/logs/$h.log
  mkdir -p "$build/logs" "$build/corpus/$h" "$build/crashes/$h"
  # -timeout: an input still running after 10 s is a finding (a hang: a YAML alias bomb walked
  # for hours), in the reproducers' replay as in fuzzing; -rss_limit_mb: so is a 2 GB appetite.
  common=(-max_len="${max_len[$h]}" -rss_limit_mb=2048 -timeout=10 -dict="$dict" -close_fd_mask=1
          -artifact_prefix="$build/crashes/$h/" -print_final_stats=1)

  # 1. Every crash found so far stays fixed.
  regressions=(fuzz/regressions/$h/*)
  if [[ -e ${regressions[0]} ]]; then
    if ! ASAN_OPTIONS=$asan "$bin" "${common[@]}" "${regressions[@]}" > "$log.regressions" 2>&1; then
      echo "fuzz: $h: a saved reproducer crashes again: see $log.regressions"
      grep -a "Running: " "$log.regressions" | tail -1 | sed 's/^/fuzz:   /' || true  # the last one ran into it
      return 1
    fi
  fi

  # 2. Fuzz. The first corpus folder is the one libFuzzer adds to; the seeds are read only.
  corpora=("$build/corpus/$h" "$build/seeds/$h")
  [[ -d fuzz/corpus/$h ]] && corpora+=("fuzz/corpus/$h")
  if ((seconds == 0)); then
    run=(-runs=0)
  elif ((keep_going)); then
    run=(-max_total_time="$seconds" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  else
    run=(-max_total_time="$seconds")
  fi
  before=$(ls "$build/crashes/$h" | wc -l)
  t0=$SECONDS
  rc=0
  ASAN_OPTIONS=$asan "$bin" "${common[@]}" "${run[@]}" "${corpora[@]}" > "$log" 2>&1 || rc=$?
  runs=$(grep -h -o -E 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{s += $2} END {print s + 0}' || true)
  if ((keep_going)); then
    runs=$(grep -o -E '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  fi
  new=$(($(ls "$build/crashes/$h" | wc -l) - before))
  crashes=$new
  ((rc != 0 && crashes == 0)) && crashes=1
  printf 'fuzz: %-15s %9s runs in %3d s, %d crash(es), corpus %d inputs\n' "$h" "${runs:-0}" \
    $((SECONDS - t0)) "$crashes" "$(ls "$build/corpus/$h" | wc -l)"
  if ((crashes)); then
    failed=1
    ls -t "$build/crashes/$h" | head -n "$((new > 0 ? new : 1))" | sed "s|^|fuzz:   reproducer: $build/crashes/$h/|"
    grep -a -m3 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FINDING|terminate called" "$log" |
      sed 's/^/fuzz:   /' || true
    echo "fuzz:   log: $log (replay: $bin <reproducer>)"
  fi
  return $failed
}

# Harnesses run `parallel` at a time (--jobs); their lines are printed in order once each is done.
failed=0
pids=()
for h in "${harnesses[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  run_harness "$h" > "$build/logs/$h.summary" 2>&1 &
  pids+=($!)
done
for i in "${!harnesses[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$build/logs/${harnesses[$i]}.summary"
done
echo "fuzz: total $((SECONDS - start)) s"
exit $failed
