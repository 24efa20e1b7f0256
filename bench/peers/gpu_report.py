#!/usr/bin/python3
# Implements: the GPU benchmark's report: reads bench_gpu's and bench_gpu_torchvision.py's JSON,
# prints one table (detseg / torchvision ratios of ms per step and of peak memory, and bf16's
# speed-up over fp32) and writes both with the ratios to one JSON file.
# Usage: gpu_report.py DETSEG_JSON TORCHVISION_JSON OUT_JSON
import json
import sys


def main():
    ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
    rows, report = [], {"detseg": ours, "torchvision": peer, "ratios": {}}
    print(f"{'model precision phase':34} {'detseg ms':>10} {'tv ms':>10} {'ratio':>6}   "
          f"{'detseg MiB':>10} {'tv MiB':>10} {'ratio':>6}   {'img/s':>7}")
    for model, by_precision in ours.get("results", {}).items():
        for precision, o in by_precision.items():
            t = peer.get("results", {}).get(model, {}).get(precision)
            if "error" in o or (t and "error" in t):
                print(f"{model} {precision}: failed: {o.get('error') or t.get('error')}")
                continue
            for phase in ("train", "infer"):
                ms, mb = o[phase + "_ms"], o[phase + "_peak_mb"]
                r_ms = ms / t[phase + "_ms"] if t else None
                r_mb = mb / t[phase + "_peak_mb"] if t and t[phase + "_peak_mb"] > 0 else None
                report["ratios"][f"{model}/{precision}/{phase}"] = {"time": r_ms, "peak_memory": r_mb}
                fmt = lambda v, spec: format(v, spec) if v is not None else "-"
                print(f"{model + ' ' + precision + ' ' + phase:34} {ms:10.1f} {fmt(t and t[phase + '_ms'], '10.1f'):>10} "
                      f"{fmt(r_ms, '6.2f'):>6}   {mb:10.0f} {fmt(t and t[phase + '_peak_mb'], '10.0f'):>10} "
                      f"{fmt(r_mb, '6.2f'):>6}   {o[phase + '_img_s']:7.1f}")
        if all(p in by_precision and "error" not in by_precision[p] for p in ("fp32", "bf16")):
            for phase in ("train", "infer"):
                speedup = by_precision["fp32"][phase + "_ms"] / by_precision["bf16"][phase + "_ms"]
                report["ratios"][f"{model}/bf16_speedup/{phase}"] = speedup
                print(f"{model} {phase}: bf16 is {speedup:.2f}x as fast as fp32")
    for model, by_precision in ours.get("results", {}).items():
        o = by_precision.get("fp32", {}).get("train_profile")
        t = peer.get("results", {}).get(model, {}).get("fp32", {}).get("train_profile")
        if not o:
            continue
        print(f"{model} fp32 train step GPU kernels: detseg {o['kernel_ms_per_step']:.1f} ms in "
              f"{o['kernels_per_step']} kernels" + (f", torchvision {t['kernel_ms_per_step']:.1f} ms in "
                                                      f"{t['kernels_per_step']} kernels" if t else ""))
        for name, ms, calls in o["top"][:12]:
            print(f"   detseg {ms:8.2f} ms {calls:5d}x  {name[:100]}")
        for name, ms, calls in (t or {}).get("top", [])[:12]:
            print(f"   tv     {ms:8.2f} ms {calls:5d}x  {name[:100]}")
    for op, ms in ours.get("ops", {}).items():
        t = peer.get("ops", {}).get(op)
        report["ratios"]["ops/" + op] = ms / t if t else None
        print(f"{op:34} {ms:10.3f} {t if t is not None else float('nan'):10.3f} {ms / t if t else float('nan'):6.2f}")
    json.dump(report, open(sys.argv[3], "w"), indent=1)


if __name__ == "__main__":
    main()
