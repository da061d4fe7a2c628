#!/usr/bin/env python3
"""Load test of OpenAI-compatible servers: minfer serve against llama-server.

For each concurrency level N, N clients each send R streamed /v1/completions
requests one after another (the same prompts, greedy, a fixed number of
generated tokens, ignore_eos so every reply has that length). Reports the
aggregate decode rate (generated tokens / wall time of the level) and the
median and p99 time to first token. The two servers run interleaved, one
pair at a time, each freshly started with N slots, as BENCHMARKING.md asks.

  bench/serve_load.py --minfer build/bin/minfer --llama-server PATH/llama-server \
      -m model.gguf --levels 1,4,8,16 --requests 2 --tokens 128 --pairs 2
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = [
    "Write a long story about a dragon who learns to paint, with many details about the colours of the mountains "
    "and the people of the valley below, and the small village where the dragon",
    "Explain in detail how a steam engine works, from the fire in the boiler to the turning of the wheels, for a "
    "reader who has never seen one and wants to understand every part of the machine",
    "List the steps to bake bread at home, including the flour, the water, the yeast, the salt, the kneading, the "
    "rising, the shaping and the baking, with the times and temperatures for each step",
    "Describe a walk through an old city at night: the streets, the lights, the sounds of the river, the smell of the "
    "bakeries opening before dawn, and the people you meet on the way home",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(kind, args, n, ctx_per_slot):
    port = free_port()
    if kind == "minfer":
        cmd = [args.minfer, "serve", "-m", args.model, "-np", str(n), "-c", str(n * ctx_per_slot), "-t",
               str(args.threads), "--port", str(port)]
    else:
        cmd = [args.llama_server, "-m", args.model, "-np", str(n), "-c", str(n * ctx_per_slot), "-t", str(args.threads),
               "--port", str(port), "--host", "127.0.0.1", "--no-webui"]
    env = dict(os.environ)
    if kind == "llama":
        env["LD_LIBRARY_PATH"] = os.path.dirname(args.llama_server)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.2)
    p.kill()
    sys.exit("%s did not start: %s" % (kind, " ".join(cmd)))


def one_request(port, prompt, tokens, out):
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        out.append(("error", r.status))
        return
    ttft, n, buf = None, 0, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                continue
            j = json.loads(ev[6:])
            if j.get("usage"):
                n = j["usage"]["completion_tokens"]
            for ch in j.get("choices", []):
                if ch.get("text") and ttft is None:
                    ttft = time.time() - t0
    c.close()
    out.append(("ok", ttft, n))


def level(port, n, args):
    out = []

    def client(k):
        for r in range(args.requests):
            one_request(port, PROMPTS[(k + r) % len(PROMPTS)], args.tokens, out)

    th = [threading.Thread(target=client, args=(k,)) for k in range(n)]
    t0 = time.time()
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.time() - t0
    errs = [o for o in out if o[0] != "ok"]
    oks = [o for o in out if o[0] == "ok"]
    toks = sum(o[2] for o in oks)
    ttfts = sorted(o[1] for o in oks if o[1] is not None)
    p99 = ttfts[min(len(ttfts) - 1, int(round(0.99 * (len(ttfts) - 1))))] if ttfts else float("nan")
    return {"tok_s": toks / wall, "ttft_med": statistics.median(ttfts) if ttfts else float("nan"), "ttft_p99": p99,
            "errors": len(errs), "tokens": toks, "short": sum(1 for o in oks if o[2] != args.tokens)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minfer", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512, help="positions per slot")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    res = {(k, n): [] for k in ("minfer", "llama") for n in levels}
    for pair in range(args.pairs):
        for n in levels:
            order = ("minfer", "llama") if pair % 2 == 0 else ("llama", "minfer")
            for kind in order:
                p, port = start(kind, args, n, args.ctx)
                level(port, 1, argparse.Namespace(requests=1, tokens=8))  # warm up
                r = level(port, n, args)
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                res[(kind, n)].append(r)
                print("pair %d N=%-2d %-6s %7.1f tok/s  ttft med %.3f s p99 %.3f s  errors %d short %d" %
                      (pair, n, kind, r["tok_s"], r["ttft_med"], r["ttft_p99"], r["errors"], r["short"]), flush=True)
    print("\n| clients | minfer tok/s | llama-server tok/s | ratio | minfer TTFT med / p99 (s) | llama-server TTFT med / p99 (s) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in levels:
        m = [r["tok_s"] for r in res[("minfer", n)]]
        l = [r["tok_s"] for r in res[("llama", n)]]
        med = lambda xs: statistics.median(xs)
        print("| %d | %.1f | %.1f | %.2f | %.3f / %.3f | %.3f / %.3f |" %
              (n, med(m), med(l), med(m) / med(l),
               med([r["ttft_med"] for r in res[("minfer", n)]]), med([r["ttft_p99"] for r in res[("minfer", n)]]),
               med([r["ttft_med"] for r in res[("llama", n)]]), med([r["ttft_p99"] for r in res[("llama", n)]])))


if __name__ == "__main__":
    main()
