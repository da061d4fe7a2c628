#!/usr/bin/env python3
"""Speculative decoding measured against plain decoding, and against
llama.cpp's own (llama-speculative for a draft model, llama-lookup for prompt
lookup) on the same files, interleaved per ../shared/BENCHMARKING.md: every
pair runs each configuration once, in the same order; the table gives each
one's median decode tok/s, its acceptance, and the median of the per-pair
speed-ups over the same engine's plain decode.

  bench/ab_spec.py --minfer build/bin/minfer -m target.gguf --draft draft.gguf \
      -p "prompt" -n 128 --draft-max 8 --draft-p-min 0 --pairs 3 -t 2 \
      [--llama-dir DIR_WITH_llama-speculative_llama-lookup_llama-bench] [--extra "-ngl all"]

llama.cpp's plain reference is llama-lookup drafting nothing (its generation
loop, one token per forward).

"accepted" is accepted / drafted tokens as each engine counts them; for
minfer "tok/fwd" is tokens per target forward. Every minfer run's greedy text
is compared with the first plain run's (byte for byte), and the last line says
whether all were equal; --load prints the load average before and after.
"""
import argparse, os, re, shlex, statistics, subprocess, sys


def sh(cmd):
    # stdout stays bytes (compared byte for byte; random-weight models write
    # invalid UTF-8), stderr is decoded leniently for the counts
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != 0:
        sys.exit(f"ab_spec.py: command failed ({r.returncode}): {' '.join(cmd)}\n{err[-3000:]}")
    return r.stdout, err


def minfer(a, spec):
    cmd = [a.minfer, "run", "-m", a.model, "-p", a.prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.threads),
           "--ignore-eos"] + shlex.split(a.extra) + spec
    out, err = sh(cmd)
    m = re.search(r"decode:\s+(\d+) tokens in ([\d.]+) ms", err)
    s = re.search(r"speculative: (\d+) steps, (\d+) drafted, (\d+) accepted", err)
    acc = int(s.group(3)) / max(1, int(s.group(2))) if s else None
    f = re.search(r"([\d.]+) tokens per target forward", err)
    return int(m.group(1)) / (float(m.group(2)) / 1e3), acc, out, float(f.group(1)) if f else None


def llama(a, tool, spec):
    cmd = [f"{a.llama_dir}/{tool}", "-m", a.model, "-p", a.prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.threads),
           "--ignore-eos", "-c", "4096"] + spec
    out, err = sh(cmd)
    text = out.decode("utf-8", "replace") + err
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", text)
    acc = re.search(r"accept\s+=\s+([\d.]+)%", text)
    return int(m.group(1)) / float(m.group(2)), float(acc.group(1)) / 100 if acc else None, out, None


def llama_plain(a):
    # llama-lookup drafting nothing: the same generation loop, one token per forward
    ts, _, out, _ = llama(a, "llama-lookup", ["--spec-draft-n-max", "0"])
    return ts, None, out, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minfer", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--draft")
    ap.add_argument("-p", "--prompt", required=True)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--draft-p-min", type=float, default=0.75)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--llama-dir")
    ap.add_argument("--extra", default="", help="more minfer run flags, e.g. -ngl all")
    ap.add_argument("--load", action="store_true", help="print the load average before and after")
    ap.add_argument("--no-lookup", action="store_true", help="skip the prompt-lookup runs (a sweep over draft pairs)")
    a = ap.parse_args()
    k = ["--draft-max", str(a.draft_max)]
    lk = ["--spec-draft-n-max", str(a.draft_max)]  # llama.cpp 3f545bec's name
    cfg = [("minfer", "plain", lambda: minfer(a, []))]
    if a.draft:
        cfg.append(("minfer", "draft", lambda: minfer(a, ["-md", a.draft, "--draft-p-min", str(a.draft_p_min)] + k)))
    if not a.no_lookup:
        cfg.append(("minfer", "lookup", lambda: minfer(a, ["--lookup"] + k)))
    if a.llama_dir:
        cfg.append(("llama.cpp", "plain", lambda: llama_plain(a)))
        if a.draft:
            cfg.append(("llama.cpp", "draft", lambda: llama(a, "llama-speculative",
                                                          ["-md", a.draft, "--spec-draft-p-min", str(a.draft_p_min)] + lk)))
        if not a.no_lookup:
            cfg.append(("llama.cpp", "lookup", lambda: llama(a, "llama-lookup", lk)))
    res = {c[:2]: [] for c in cfg}
    plain_text, same = None, True
    load0 = os.getloadavg()
    for _ in range(a.pairs):
        for eng, kind, f in cfg:
            ts, acc, out, fwd = f()
            res[(eng, kind)].append((ts, acc, fwd))
            if eng == "minfer":
                if plain_text is None:
                    plain_text = out
                same = same and out == plain_text
    load1 = os.getloadavg()
    print(f"| engine | decode | tok/s (median of {a.pairs}) | accepted | tok/fwd | speed-up over its plain (median of pairs) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for eng, kind, _ in cfg:
        v = res[(eng, kind)]
        base = res[(eng, "plain")]
        ups = [x[0] / b[0] for x, b in zip(v, base)]
        accs = [x[1] for x in v if x[1] is not None]
        fwds = [x[2] for x in v if x[2] is not None]
        print(f"| {eng} | {kind} | {statistics.median(x[0] for x in v):.2f} | "
              f"{(f'{100 * statistics.median(accs):.1f}%') if accs else '-'} | "
              f"{(f'{statistics.median(fwds):.2f}') if fwds else '-'} | {statistics.median(ups):.2f}x |")
    print(f"\nminfer's greedy text identical across all {a.pairs} x {sum(c[0] == 'minfer' for c in cfg)} runs "
          f"(plain / draft{'' if a.no_lookup else ' / lookup'}): {'yes' if same else 'NO'}")
    if a.load:
        print("load average (1, 5, 15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f" % (load0 + load1))
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
