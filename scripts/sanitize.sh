#!/usr/bin/env bash
# Builds the torch-free parts of detseg (detseg_base: core, config, evaluation, readers; the
# `detseg` front; the label-PNG decoder) with clang's AddressSanitizer + UndefinedBehaviorSanitizer
# into build-fuzz/ and runs the torch-free test programs there: san_test_config (tests/config),
# san_test_eval (tests/eval, with `detseg coco-eval` run as a sanitized process), san_test_core
# (tests/core/test_files.cpp), san_test_data (tests/data: the reader and label-PNG tests),
# san_test_hub (tests/hub: the weights download and cache). Any sanitizer report fails the run.
# No LibTorch needed. See docs/fuzzing.md.
#   scripts/sanitize.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/build_sanitized.sh sanitized_tests
echo "sanitize: built in $((SECONDS - start)) s"
# Leaks count (LeakSanitizer); a report aborts the program; stack-use-after-return and
# initialization-order checks are off by default in ASan and cheap here.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The tests' temp folders (detseg_data_*, ...) away from those of the main build's tests.
export TMPDIR=$PWD/build-fuzz/tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
t0=$SECONDS
ctest --test-dir build-fuzz --output-on-failure -j "$(nproc)" --timeout 600 "$@"
echo "sanitize: tests ran in $((SECONDS - t0)) s, total $((SECONDS - start)) s"
