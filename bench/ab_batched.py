#!/usr/bin/env python3
"""Interleaved A/B of aggregate throughput with B sequences: `minfer bench
--batch` against llama-batched-bench on the same GGUF, following
../shared/BENCHMARKING.md (alternate A B A B ... for --pairs pairs; each side's
median and the median of the per-pair ratios, per level B). Nothing here
builds llama.cpp: pass the path of a llama-batched-bench you built yourself
(its shared libraries are found through LD_LIBRARY_PATH = its folder).

  bench/ab_batched.py --llama-batched-bench /path/to/llama-batched-bench \
      -m model.gguf --npl 1,4,8,16 --npp 128 --ntg 128 --pairs 3 -t 2
"""
import argparse, os, re, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
MINFER = os.path.join(HERE, "..", "build", "bin", "minfer")


def table(text):
    """rows of a markdown-ish table: {B: (S_PP, S_TG)} from both tools' output"""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and re.fullmatch(r"\d+", cells[2] or ""):
            out[int(cells[2])] = (float(cells[5]), float(cells[7]))
    return out


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    if r.returncode != 0:
        sys.exit(f"ab_batched.py: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return table(r.stdout + "\n" + r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--llama-batched-bench", required=True)
    ap.add_argument("--minfer", default=MINFER)
    ap.add_argument("--npl", default="1,4,8,16")
    ap.add_argument("--npp", type=int, default=128)
    ap.add_argument("--ntg", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    levels = [int(x) for x in a.npl.split(",")]
    ctx = max(levels) * (a.npp + a.ntg)
    lb = a.llama_batched_bench
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(lb)))
    mine = [a.minfer, "bench", "-m", a.model, "--batch", a.npl, "-p", str(a.npp), "-n", str(a.ntg), "-r", "1",
            "-t", str(a.threads)]
    theirs = [lb, "-m", a.model, "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", str(a.npp), "-ntg", str(a.ntg),
              "-npl", a.npl, "-t", str(a.threads)]
    res = {b: {"m_pp": [], "m_tg": [], "l_pp": [], "l_tg": []} for b in levels}
    for _ in range(a.pairs):
        m, l = run(mine), run(theirs, env)
        for b in levels:
            res[b]["m_pp"].append(m[b][0]), res[b]["m_tg"].append(m[b][1])
            res[b]["l_pp"].append(l[b][0]), res[b]["l_tg"].append(l[b][1])
    med = statistics.median
    print(f"model {os.path.basename(a.model)}, PP {a.npp}, TG {a.ntg}, -t {a.threads}, {a.pairs} pairs")
    print("| B | minfer S_TG | llama.cpp S_TG | S_TG ratio (pairs) | minfer S_PP | llama.cpp S_PP | S_PP ratio |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for b in levels:
        r = res[b]
        tg = [x / y for x, y in zip(r["m_tg"], r["l_tg"])]
        pp = [x / y for x, y in zip(r["m_pp"], r["l_pp"])]
        print(f"| {b} | {med(r['m_tg']):.2f} | {med(r['l_tg']):.2f} | {med(tg):.2f}x ({', '.join(f'{v:.2f}' for v in tg)}) "
              f"| {med(r['m_pp']):.2f} | {med(r['l_pp']):.2f} | {med(pp):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
