#!/usr/bin/env python3
"""Interleaved A/B of two minfer binaries on the same GGUF (a regression check:
the previous commit's build against this one), following
../shared/BENCHMARKING.md: alternate A B A B ... for --pairs pairs of
`minfer bench` runs per test, report each side's median tok/s and the median
of the per-pair ratios (B / A).

  bench/ab_self.py --a /path/to/old/minfer --b build/bin/minfer -m model.gguf \
      --tests pp512,tg128 --pairs 5 -t 2
"""
import argparse, json, statistics, subprocess, sys

from ab import parse_test


def run(binary, model, test, threads, reps):
    pp, tg, depth = parse_test(test)
    cmd = [binary, "bench", "-m", model, "-p", str(pp), "-n", str(tg), "-d", str(depth), "-r", str(reps),
           "-t", str(threads), "-o", "json", "--no-bandwidth"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"ab_self.py: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return statistics.median(json.loads(r.stdout)[-1]["samples_ts"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="baseline minfer binary")
    ap.add_argument("--b", required=True, help="candidate minfer binary")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tests", default="pp512,tg128")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("-r", "--reps", type=int, default=1)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    print(f"| model | test | A t/s | B t/s | B/A (median of {a.pairs} pairs) | pair ratios |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for test in a.tests.split(","):
        ra, rb, ratio = [], [], []
        for _ in range(a.pairs):
            x = run(a.a, a.model, test, a.threads, a.reps)
            y = run(a.b, a.model, test, a.threads, a.reps)
            ra.append(x), rb.append(y), ratio.append(y / x)
        print(f"| {a.model.split('/')[-1]} | {test} | {statistics.median(ra):.2f} | {statistics.median(rb):.2f} | "
              f"{statistics.median(ratio):.3f} | {', '.join(f'{v:.2f}' for v in ratio)} |", flush=True)


if __name__ == "__main__":
    main()
