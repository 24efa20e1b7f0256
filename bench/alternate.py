#!/usr/bin/env python3
"""Times whole processes of several builds of one command, alternating them run by run so that
machine noise falls on all alike; prints each one's median, 10th percentile and minimum wall time.

    python3 bench/alternate.py BIN1,BIN2[,...] RUNS ARGS...

e.g. python3 bench/alternate.py /tmp/detseg-old,build/detseg 400 coco-eval --gt gt.json --dt dt.json
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binaries, runs, args = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3:]
    times = {b: [] for b in binaries}
    with open(os.devnull, "w") as null:
        for _ in range(runs):
            for b in binaries:
                start = time.perf_counter()
                status = subprocess.run([b] + args, stdout=null, stderr=null).returncode
                times[b].append(time.perf_counter() - start)
                if status != 0:
                    sys.exit(f"{b} exited with {status}")
    for b in binaries:
        v = sorted(times[b])
        print(f"{b:32s} median {statistics.median(v) * 1e3:8.3f} ms   p10 {v[len(v) // 10] * 1e3:8.3f}   "
              f"min {v[0] * 1e3:8.3f}")


if __name__ == "__main__":
    main()
