#!/usr/bin/env python3
"""Constrained sampling on a real model: per-token sampling time and
generation speed with and without a GBNF grammar / JSON Schema, minfer
against llama-server on the same file, interleaved per
../shared/BENCHMARKING.md (every pair runs every configuration once, in the
same order; medians over the pairs).

  bench/ab_grammar.py --minfer build/bin/minfer -m model.gguf -p "prompt" -n 96 \
      --gbnf json.gbnf --schema schema.json --pairs 3 -t 2 \
      [--llama-server /path/to/llama-server]

minfer: `MINFER_TIMING=1 minfer run` prints each token's sampling time (the
grammar's mask and the sampler chain over the logits) and forward time; the
generation speed here is tokens / (sum of both), so the grammar's cost is in
it. llama-server: one server (-np 1), a /completion request per run with
`grammar` or `json_schema`; its predicted_per_second covers the same loop.
Greedy (temperature 0) both sides; a run the grammar ended (end of generation
before -n) must parse as JSON; with random weights (a `minfer synth` model)
most runs stop at -n instead, inside an unfinished value.
"""
import argparse, json, os, re, statistics, subprocess, sys, time, urllib.request


def sh(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"ab_grammar.py: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout, r.stderr


def parses(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def minfer(a, flags):
    env = dict(os.environ, MINFER_TIMING="1")
    cmd = [a.minfer, "run", "-m", a.model, "-p", a.prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.threads)] + flags
    out, err = sh(cmd, env)
    tok = [(float(s), float(f)) for s, f in re.findall(r"\[timing\] token \d+: sample ([\d.]+) ms, forward ([\d.]+) ms", err)]
    if not tok:
        sys.exit(f"ab_grammar.py: no per-token timings from minfer\n{err[-2000:]}")
    sample = [s for s, _ in tok]
    return {"n": len(tok), "tps": len(tok) / (sum(s + f for s, f in tok) / 1e3), "sample_med": statistics.median(sample),
            "sample_mean": statistics.mean(sample), "sample_max": max(sample), "text": out,
            "ended": "stopped: end of generation" in err}


class Server:
    def __init__(self, a):
        self.url = f"http://127.0.0.1:{a.port}"
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(a.llama_server)))
        cmd = [a.llama_server, "-m", a.model, "-t", str(a.threads), "-c", "2048", "-np", "1", "--port", str(a.port)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(240):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.p.poll() is not None:
                sys.exit(f"ab_grammar.py: llama-server exited ({self.p.returncode}): {' '.join(cmd)}")
            time.sleep(0.5)
        self.close()
        sys.exit("ab_grammar.py: llama-server did not come up in 120 s")

    def run(self, a, extra):
        body = dict({"prompt": a.prompt, "n_predict": a.n, "temperature": 0, "cache_prompt": False}, **extra)
        req = urllib.request.Request(self.url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            j = json.loads(r.read())
        t = j["timings"]
        return {"n": t["predicted_n"], "tps": t["predicted_per_second"], "text": j["content"],
                "ended": j.get("stop_type") == "eos"}

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minfer", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--prompt", required=True)
    ap.add_argument("-n", type=int, default=96)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--gbnf", required=True, help="a GBNF file (e.g. llama.cpp's grammars/json.gbnf)")
    ap.add_argument("--schema", required=True, help="a JSON Schema file")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--llama-server")
    ap.add_argument("--port", type=int, default=18093)
    a = ap.parse_args()
    gbnf = open(a.gbnf).read()
    schema = json.load(open(a.schema))
    cfgs = [("plain", [], {}), ("gbnf", ["--grammar-file", a.gbnf], {"grammar": gbnf}),
            ("schema", ["--json-schema", a.schema], {"json_schema": schema})]
    srv = Server(a) if a.llama_server else None
    res = {(e, c[0]): [] for e in ("minfer", "llama") for c in cfgs}
    try:
        if srv:
            srv.run(a, {})  # warm-up
        for pair in range(a.pairs):
            for name, flags, extra in cfgs:
                r = minfer(a, flags)
                res[("minfer", name)].append(r)
                if srv:
                    res[("llama", name)].append(srv.run(a, extra))
                print(f"pair {pair} {name}: minfer {r['n']} tokens {r['tps']:.1f} tok/s, sample median "
                      f"{r['sample_med']:.3f} ms" + (f"; llama-server {res[('llama', name)][-1]['n']} tokens "
                                                     f"{res[('llama', name)][-1]['tps']:.1f} tok/s" if srv else ""),
                      file=sys.stderr)
    finally:
        if srv:
            srv.close()
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print("| engine | constraint | tokens | tok/s (median) | sampling ms/token: median / mean / max | ended by the grammar / of those, parse as JSON |")
    print("| --- | --- | ---: | ---: | --- | --- |")
    for e in ("minfer", "llama"):
        if e == "llama" and not srv:
            continue
        for name, _, _ in cfgs:
            rs = res[(e, name)]
            ended = [r for r in rs if r["ended"]]
            ok = "—" if name == "plain" else f"{len(ended)}/{len(rs)} / {sum(parses(r['text']) for r in ended)}"
            smp = (f"{med(rs, 'sample_med'):.3f} / {med(rs, 'sample_mean'):.3f} / {max(r['sample_max'] for r in rs):.2f}"
                   if e == "minfer" else "(not reported)")
            print(f"| {'minfer' if e == 'minfer' else 'llama-server'} | {name} | {med(rs, 'n'):.0f} | {med(rs, 'tps'):.1f} | {smp} | {ok} |")
    for e in ("minfer", "llama"):
        if e == "llama" and not srv:
            continue
        base = med(res[(e, "plain")], "tps")
        for name in ("gbnf", "schema"):
            c = med(res[(e, name)], "tps")
            print(f"{e}: {name} costs {(1e3 / c - 1e3 / base):.3f} ms per token over plain ({c / base:.3f}x the speed)")
    print("\nlast outputs:")
    for e in ("minfer", "llama"):
        for name in ("gbnf", "schema"):
            if res[(e, name)]:
                print(f"{e} {name}: {res[(e, name)][-1]['text'][:300]!r}")


if __name__ == "__main__":
    main()
