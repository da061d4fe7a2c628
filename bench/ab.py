#!/usr/bin/env python3
"""Interleaved A/B benchmark: minfer bench vs llama-bench on the same GGUF.

Follows ../shared/BENCHMARKING.md's protocol: for each test, alternate
A B A B ... for --pairs pairs (each invocation does its own warm-up run),
then report each engine's median tok/s and the median of the per-pair
ratios. Nothing here builds llama.cpp: pass the path of a llama-bench you
built yourself with --llama-bench (its shared libraries are found through
LD_LIBRARY_PATH = its folder).

  bench/ab.py --llama-bench /path/to/llama-bench -m model.gguf \
      --tests pp512,tg128,tg128@d4096 --pairs 5 -t 2 [--md out.md]
"""
import argparse, hashlib, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
MINFER = os.path.join(HERE, "..", "build", "bin", "minfer")


def parse_test(t):
    """pp512 | tg128 | tg128@d4096 -> (n_prompt, n_gen, depth)"""
    name, _, depth = t.partition("@d")
    d = int(depth) if depth else 0
    if name.startswith("pp"):
        return int(name[2:]), 0, d
    if name.startswith("tg"):
        return 0, int(name[2:]), d
    sys.exit(f"ab.py: unknown test '{t}' (pp<N>, tg<N>, optional @d<depth>)")


def run_json(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    if r.returncode != 0:
        sys.exit(f"ab.py: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    rows = json.loads(r.stdout)
    return statistics.median(rows[-1]["samples_ts"])


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--minfer", default=MINFER)
    ap.add_argument("--tests", default="pp512,tg128")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("-r", "--reps", type=int, default=1, help="timed runs per invocation")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--md", help="append the result rows (markdown) to this file")
    ap.add_argument("--minfer-args", default="", help="extra minfer bench arguments (e.g. --no-mmap)")
    ap.add_argument("--llama-args", default="", help="extra llama-bench arguments (e.g. -mmp 0)")
    a = ap.parse_args()

    lenv = dict(os.environ)
    lenv["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(a.llama_bench))
    print(f"model {a.model} sha256 {sha256(a.model)[:16]}", flush=True)
    rows = []
    for t in a.tests.split(","):
        p, n, d = parse_test(t)
        common = ["-m", a.model, "-p", str(p), "-n", str(n), "-d", str(d),
                  "-r", str(a.reps), "-t", str(a.threads), "-o", "json"]
        A = [a.minfer, "bench"] + common + ["--no-bandwidth"] + a.minfer_args.split()
        B = [a.llama_bench] + common + a.llama_args.split()
        ma, mb, ratios = [], [], []
        for i in range(a.pairs):
            x = run_json(A)
            y = run_json(B, lenv)
            ma.append(x); mb.append(y); ratios.append(x / y)
            print(f"  {t} pair {i + 1}: minfer {x:8.2f}  llama.cpp {y:8.2f}  ratio {x / y:.3f}", flush=True)
        row = (t, statistics.median(ma), statistics.median(mb), statistics.median(ratios), min(ratios), max(ratios))
        rows.append(row)
        print(f"{t}: minfer {row[1]:.2f} t/s, llama.cpp {row[2]:.2f} t/s, ratio {row[3]:.3f} "
              f"(pairs {row[4]:.3f}..{row[5]:.3f})", flush=True)
    if a.md:
        with open(a.md, "a") as f:
            for r in rows:
                f.write(f"| {os.path.basename(a.model)} {a.minfer_args} {a.llama_args} | {r[0]} | {r[1]:.2f} | {r[2]:.2f} | "
                        f"**{r[3]:.3f}** | {r[4]:.3f}..{r[5]:.3f} |\n")


if __name__ == "__main__":
    main()
