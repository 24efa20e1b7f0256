#!/usr/bin/env bash
# Data-parallel scaling on one machine: RetinaNet-R18 (configs/demo, 256 px) with a global batch
# of 4, as 1 process x 2 threads (batch 4) and as 2 processes x 1 thread (batch 2 each, Gloo over
# loopback). Prints images/s over steps (WARMUP, STEPS] from rank 0's metrics.jsonl timestamps, and
# the per-step all-reduce figures detseg logs in data-parallel runs: allreduce_wait_s (time blocked
# after backward, i.e. not hidden behind it) and allreduce_span_s (first bucket launched to last
# bucket done). A third run repeats the 2-process one with train.distributed.sync_batch_norm (the
# demo config trains its batch norm), so the synchronised batch norm's cost shows next to it.
# Usage: bash bench/bench_dist.sh [build-dir] [steps] [warmup]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-30}
WARMUP=${3:-5}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/detseg
OUT=$(mktemp -d /tmp/detseg_bench_dist.XXXXXX)
"$BIN" info | grep '^machine'
COMMON=(--config "$HERE/configs/demo/retinanet_r18_bccd.yaml" --set train.num_steps=$STEPS --set train.log_every=1
        --set train.checkpoint_every=100000 --set "eval_input.annotations=''" --set train_input.num_workers=1)

summarise() {  # metrics.jsonl global_batch label
  "${DETSEG_PYTHON:-$HERE/.venv/bin/python}" - "$1" "$2" "$3" "$WARMUP" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
batch, label, warm = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
t = {r["step"]: r["time"] for r in rows}
last = max(t)
steps = last - warm
ips = steps * batch / (t[last] - t[warm])
tail = [r for r in rows if r["step"] > warm]
wait = sum(r.get("allreduce_wait_s", 0) for r in tail) / len(tail)
span = sum(r.get("allreduce_span_s", 0) for r in tail) / len(tail)
print(f"{label:28s} {ips:7.2f} images/s  {1000*(t[last]-t[warm])/steps:7.1f} ms/step  "
      f"allreduce wait {1000*wait:6.1f} ms/step  span {1000*span:6.1f} ms/step")
PY
}

"$BIN" --threads 2 -q train "${COMMON[@]}" --model-dir "$OUT/p1t2" --set train.batch_size=4 > /dev/null
"$BIN" --threads 1 -q train --nproc 2 "${COMMON[@]}" --model-dir "$OUT/p2t1" --set train.batch_size=2 > /dev/null
"$BIN" --threads 1 -q train --nproc 2 "${COMMON[@]}" --model-dir "$OUT/p2t1s" --set train.batch_size=2 \
  --set train.distributed.sync_batch_norm=true > /dev/null
echo "RetinaNet-R18 256px, global batch 4, $STEPS steps (first $WARMUP excluded), load $(cut -d' ' -f1-3 /proc/loadavg)"
summarise "$OUT/p1t2/metrics.jsonl" 4 "1 process x 2 threads"
summarise "$OUT/p2t1/metrics.jsonl" 4 "2 processes x 1 thread"
summarise "$OUT/p2t1s/metrics.jsonl" 4 "2 x 1, sync batch norm"
rm -rf "$OUT"
