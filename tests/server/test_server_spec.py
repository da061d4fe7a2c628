"""Speculative decoding in minfer serve: with a draft model (stories260K's
q4_k_m copy) and with prompt lookup, greedy replies are the text the same
request gives without speculation, alone and with other requests (of either
kind) in the same batches, streamed or not, under max_tokens and stop; the
timings and /metrics count drafts; bad `speculative` fields are 400s that
name the field; a draft with another vocabulary stops the server at start."""
import json
import subprocess
import sys
import threading

from serverutil import Server, check

MINFER, SHARED = sys.argv[1], sys.argv[2]
MODEL = SHARED + "/models/stories260K.gguf"
DRAFT = SHARED + "/models/stories260K-q4_k_m.gguf"
PROMPTS = ["Once upon a time", "Lily and Ben went to the park. Lily", "The cat sat on the mat. The cat",
           "Tom had a red ball. He"]


def complete(s, prompt, spec, **kw):
    body = {"prompt": prompt, "temperature": 0, "max_tokens": 48}
    if spec is not None:
        body["speculative"] = spec
    body.update(kw)
    st, r = s.post_json("/v1/completions", body)
    check(st == 200, "completion %s: %d %s" % (spec, st, r))
    return r


def main():
    s = Server(MINFER, MODEL, "-np", "4", "-c", "2048", "-md", DRAFT, "--draft-p-min", "0", "--draft-max", "6")
    try:
        st, props = s.get("/props")[:2]
        check(json.loads(props)["speculative"] == {"type": "draft", "n_max": 6, "n_min": 0, "p_min": 0.0},
              "props speculative: %s" % props[-200:])
        plain = {p: complete(s, p, {"type": "none"})["choices"][0]["text"] for p in PROMPTS}
        check(all(len(t) > 40 for t in plain.values()), "replies too short to compare: %s" % plain)
        drafted = accepted = 0
        for p in PROMPTS:
            for spec in ({}, {"type": "draft", "n_max": 3}, {"type": "lookup"}, None):
                r = complete(s, p, spec)
                check(r["choices"][0]["text"] == plain[p], "%r with %s: %r, plain %r" % (p, spec, r["choices"][0]["text"], plain[p]))
                t = r["timings"]
                check(t["draft_n_accepted"] <= t["draft_n"], "timings: %s" % t)
                if spec is None or spec.get("type") == "draft" or spec == {}:
                    drafted += t["draft_n"]
                    accepted += t["draft_n_accepted"]
        check(drafted > 50 and accepted > drafted // 2, "draft model: %d drafted, %d accepted" % (drafted, accepted))
        r = complete(s, PROMPTS[0], {"type": "none"})
        check("draft_n" not in r["timings"], "no speculation, yet timings has draft_n: %s" % r["timings"])

        # four at once, mixed kinds: each reply is its plain text
        out, kinds = {}, [None, {"type": "lookup"}, {"type": "none"}, {"n_max": 2}]
        def worker(i):
            out[i] = complete(s, PROMPTS[i], kinds[i])["choices"][0]["text"]
        for rep in range(2):
            th = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
            [t.start() for t in th]
            [t.join() for t in th]
            for i in range(4):
                check(out[i] == plain[PROMPTS[i]], "concurrent %d (%s): %r, plain %r" % (i, kinds[i], out[i], plain[PROMPTS[i]]))

        # limits: max_tokens exact, a stop string cuts the text where plain decoding does
        for spec in (None, {"type": "none"}):
            r = complete(s, PROMPTS[0], spec, max_tokens=7)
            check(r["usage"]["completion_tokens"] == 7 and r["choices"][0]["finish_reason"] == "length", "max_tokens 7: %s" % r)
        a = complete(s, PROMPTS[1], None, stop=["park"])["choices"][0]
        b = complete(s, PROMPTS[1], {"type": "none"}, stop=["park"])["choices"][0]
        check(a == b, "stop with and without a draft: %s / %s" % (a, b))

        # streaming: the same text, one event per token
        text, events = "", 0
        for ev in s.stream("/v1/completions", {"prompt": PROMPTS[2], "temperature": 0, "max_tokens": 48, "stream": True}):
            if ev == "[DONE]":
                continue
            j = json.loads(ev)
            for c in j["choices"]:
                if c.get("text"):
                    events += 1
                text += c.get("text") or ""
        check(text == plain[PROMPTS[2]], "streamed with a draft: %r, plain %r" % (text, plain[PROMPTS[2]]))
        check(events >= 40, "streamed %d text events for 48 tokens" % events)

        st, m, _ = s.get("/metrics")
        m = m.decode()
        vals = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l and not l.startswith("#")}
        check(vals.get("minfer_draft_tokens_total", 0) >= drafted, "metrics drafted: %s" % vals.get("minfer_draft_tokens_total"))
        check(0 < vals.get("minfer_draft_accepted_tokens_total", 0) <= vals["minfer_draft_tokens_total"], "metrics accepted")

        # bad fields: 400 naming them
        for spec, param in ((5, "speculative"), ({"type": "bogus"}, "speculative.type"), ({"n_max": 65}, "speculative.n_max"),
                            ({"n_max": 2, "n_min": 3}, "speculative.n_min"), ({"p_min": 2}, "speculative.p_min")):
            st, r = s.post_json("/v1/completions", {"prompt": "x", "speculative": spec})
            check(st == 400 and r["error"]["param"] == param, "speculative %s: %d %s" % (spec, st, r))
        st, r = s.post_json("/v1/completions", {"prompt": "x", "speculative.n_max": -1})
        check(st == 400 and r["error"]["param"] == "speculative.n_max", "flat speculative.n_max -1: %d %s" % (st, r))
    finally:
        s.close()

    # a server without a draft model: lookup by request works, "draft" is refused
    s = Server(MINFER, MODEL, "-np", "2", "-c", "1024")
    try:
        r = complete(s, PROMPTS[2], {"type": "lookup"})
        check(r["choices"][0]["text"] == plain[PROMPTS[2]], "lookup without flags: %r" % r["choices"][0]["text"])
        st, r = s.post_json("/v1/completions", {"prompt": "x", "speculative": {"type": "draft"}})
        check(st == 400 and r["error"]["param"] == "speculative.type" and "--draft-model" in r["error"]["message"],
              "draft without a draft model: %d %s" % (st, r))
    finally:
        s.close()

    # a draft model with another vocabulary: refused at start, naming the token
    p = subprocess.run([MINFER, "serve", "-m", MODEL, "--port", "0", "-md", SHARED + "/models/zoo/qwen2.gguf"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 1 and "--draft-model" in p.stderr and "vocabulary" in p.stderr,
          "qwen2 draft for stories260K: rc %d, %s" % (p.returncode, p.stderr[-400:]))
    p = subprocess.run([MINFER, "serve", "-m", MODEL, "--lookup", "-md", DRAFT], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "exclude" in p.stderr, "--lookup with -md: rc %d %s" % (p.returncode, p.stderr))
    print("test_server_spec: ok")


main()
