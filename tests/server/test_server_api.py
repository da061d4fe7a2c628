"""minfer serve end to end over HTTP: every endpoint's values, streaming equal
to whole replies, greedy output equal to `minfer run`, prefix reuse, 16
concurrent clients whose outputs equal the same requests run alone, a
cancelled stream freeing its slot, metrics, and a clean SIGTERM."""
import json
import math
import socket
import subprocess
import sys
import threading
import time

from serverutil import Server, check, fail

MINFER, SHARED = sys.argv[1], sys.argv[2]
MODEL = SHARED + "/models/stories260K.gguf"


def completion(s, prompt, **kw):
    body = {"prompt": prompt, "temperature": 0, "max_tokens": 24}
    body.update(kw)
    st, r = s.post_json("/v1/completions", body)
    check(st == 200, "completions %d %s" % (st, r))
    return r


def stream_text(s, path, body):
    text, finish, usage, chunks = "", None, None, 0
    for ev in s.stream(path, body):
        if ev == "[DONE]":
            continue
        j = json.loads(ev)
        if j.get("usage"):
            usage = j["usage"]
        for c in j["choices"]:
            chunks += 1
            d = c.get("delta", c)
            text += d.get("content") or d.get("text") or ""
            finish = c.get("finish_reason") or finish
    return text, finish, usage, chunks


def main():
    s = Server(MINFER, MODEL, "-np", "4", "-c", "4096")
    try:
        run(s)
    finally:
        err = s.close()
    check("SIGTERM: stopping" in err, "no shutdown message: %s" % err[-500:])
    shutdown_grace()
    reasoning()
    parking()
    print("ok")


def run(s):
    # models, props, health
    st, m = s.request("GET", "/v1/models")[:2]
    m = json.loads(m)
    check(st == 200 and m["object"] == "list" and m["data"][0]["id"] == "stories260K.gguf", "models: %s" % m)
    check(m["data"][0]["meta"]["n_vocab"] == 512, "models meta: %s" % m)
    st, p = s.request("GET", "/props")[:2]
    p = json.loads(p)
    check(p["total_slots"] == 4 and p["n_ctx"] == 1024, "props: %s" % p)

    # greedy completions equal `minfer run --temp 0`
    ref = subprocess.run([MINFER, "run", "-m", MODEL, "-p", "Once upon a time", "-n", "24", "--temp", "0", "-t", "2"],
                         capture_output=True, text=True, check=True).stdout.rstrip("\n")
    r = completion(s, "Once upon a time")
    c = r["choices"][0]
    check(c["text"] == ref, "server %r != minfer run %r" % (c["text"], ref))
    check(c["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 24, "length: %s" % r)
    check(r["object"] == "text_completion" and r["id"].startswith("cmpl-"), "shape: %s" % r)
    check(r["usage"]["prompt_tokens"] == 5 and r["usage"]["total_tokens"] == 29, "usage: %s" % r["usage"])
    check(r["timings"]["predicted_n"] == 24, "timings: %s" % r["timings"])

    # the same request again finds its prompt in the cache and gives the same text
    r2 = completion(s, "Once upon a time")
    check(r2["choices"][0]["text"] == ref, "second run differs")
    check(r2["usage"]["prompt_tokens_details"]["cached_tokens"] == 4, "prefix reuse: %s" % r2["usage"])

    # streaming gives the same bytes
    text, finish, usage, chunks = stream_text(s, "/v1/completions", {"prompt": "Once upon a time", "temperature": 0,
                                                                    "max_tokens": 24, "stream": True,
                                                                    "stream_options": {"include_usage": True}})
    check(text == ref and finish == "length", "stream %r %r" % (text, finish))
    check(usage and usage["completion_tokens"] == 24, "stream usage %s" % usage)
    check(chunks >= 10, "stream came in %d chunks" % chunks)

    # prompt as token ids
    st, tk = s.post_json("/tokenize", {"content": "Once upon a time", "add_special": True})
    check(st == 200 and len(tk["tokens"]) == 5 and tk["tokens"][0] == 1, "tokenize: %s" % tk)
    r = completion(s, tk["tokens"])
    check(r["choices"][0]["text"] == ref, "token-id prompt differs")
    st, dt = s.post_json("/detokenize", {"tokens": tk["tokens"][1:]})
    check(st == 200 and dt["content"] == "Once upon a time", "detokenize: %s" % dt)
    st, tp = s.post_json("/tokenize", {"content": "Once", "with_pieces": True})
    check(tp["tokens"][0]["piece"].strip() == "Once" or len(tp["tokens"]) > 1, "with_pieces: %s" % tp)

    # several prompts: one choice each, equal to their single runs
    prompts = ["Once upon a time", "The dog", "Lily and Ben went"]
    singles = [completion(s, q)["choices"][0]["text"] for q in prompts]
    r = completion(s, prompts)
    check([c["index"] for c in r["choices"]] == [0, 1, 2], "indices %s" % r["choices"])
    check([c["text"] for c in r["choices"]] == singles, "multi-prompt texts differ")

    # stop strings: cut before the first occurrence, finish "stop"
    stop = ref[10:14]
    r = completion(s, "Once upon a time", stop=[stop, "zzzz"])
    check(r["choices"][0]["text"] == ref[:ref.index(stop)] and r["choices"][0]["finish_reason"] == "stop",
          "stop: %r" % r["choices"][0])
    text, finish, _, _ = stream_text(s, "/v1/completions", {"prompt": "Once upon a time", "temperature": 0,
                                                            "max_tokens": 24, "stream": True, "stop": stop})
    check(text == ref[:ref.index(stop)] and finish == "stop", "stream stop %r" % text)

    # logprobs: one entry per token, sorted alternatives, greedy picks the best
    st, r = s.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0,
                                                 "max_tokens": 6, "logprobs": True, "top_logprobs": 3})
    lp = r["choices"][0]["logprobs"]["content"]
    check(len(lp) == r["usage"]["completion_tokens"] == 6, "logprobs count %d" % len(lp))
    for e in lp:
        tops = [t["logprob"] for t in e["top_logprobs"]]
        check(len(tops) == 3 and tops == sorted(tops, reverse=True), "top_logprobs order %s" % tops)
        check(abs(e["logprob"] - tops[0]) < 1e-6 and e["logprob"] <= 0, "greedy logprob %s" % e)
    check("".join(e["token"] for e in lp) == r["choices"][0]["message"]["content"], "logprob tokens != content")
    total = sum(math.exp(t["logprob"]) for t in lp[0]["top_logprobs"])
    check(0 < total <= 1.0001, "probabilities sum %f" % total)

    # logit_bias: banning the greedy first token changes it
    first = tk["tokens"]  # reuse of ids only
    st, a = s.post_json("/v1/completions", {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 1,
                                           "logprobs": 1})
    t0 = a["choices"][0]["logprobs"]["tokens"][0]
    st, ids = s.post_json("/tokenize", {"content": t0})
    ban = str(ids["tokens"][-1])
    st, b = s.post_json("/v1/completions", {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 1,
                                           "logit_bias": {ban: -100}})
    check(b["choices"][0]["text"] != t0, "logit_bias did not ban %r" % t0)

    # seeds: the same seed samples the same text
    body = {"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 24, "seed": 42}
    check(completion(s, **body)["choices"][0]["text"] == completion(s, **body)["choices"][0]["text"], "seed")

    # chat: whole and streamed agree
    msgs = [{"role": "system", "content": "Be short."}, {"role": "user", "content": [{"type": "text", "text": "Tell"},
                                                                                   {"type": "text", "text": " me"}]}]
    st, whole = s.post_json("/v1/chat/completions", {"messages": msgs, "temperature": 0, "max_tokens": 16})
    check(st == 200 and whole["object"] == "chat.completion", "chat %s" % whole)
    check(whole["choices"][0]["message"]["role"] == "assistant", "chat role")
    text, finish, _, _ = stream_text(s, "/v1/chat/completions", {"messages": msgs, "temperature": 0, "max_tokens": 16,
                                                                 "stream": True})
    check(text == whole["choices"][0]["message"]["content"], "chat stream %r != %r" % (text, whole))
    check(finish == whole["choices"][0]["finish_reason"], "chat finish")
    # constrained output: a grammar, a JSON schema
    st, g = s.post_json("/v1/completions", {"prompt": "Is it", "max_tokens": 8, "temperature": 1.0, "seed": 3,
                                           "grammar": 'root ::= "yes" | "no"'})
    check(g["choices"][0]["text"] in ("yes", "no") and g["choices"][0]["finish_reason"] == "stop", "grammar: %s" % g)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "adult": {"type": "boolean"},
                                               "pet": {"enum": ["cat", "dog"]}},
              "required": ["name", "adult", "pet"], "additionalProperties": False}
    for seed in range(4):
        st, js = s.post_json("/v1/chat/completions", {"messages": msgs, "max_tokens": 120, "temperature": 1.0, "seed": seed,
                                                      "response_format": {"type": "json_schema",
                                                                          "json_schema": {"name": "p", "schema": schema}}})
        check(st == 200 and js["choices"][0]["finish_reason"] == "stop", "schema reply: %s" % js)
        doc = json.loads(js["choices"][0]["message"]["content"])
        check(set(doc) == {"name", "adult", "pet"} and isinstance(doc["name"], str) and len(doc["name"]) <= 12 and
              isinstance(doc["adult"], bool) and doc["pet"] in ("cat", "dog"), "schema: %s" % doc)
    st, jo = s.post_json("/v1/completions", {"prompt": "{", "max_tokens": 200, "temperature": 0,
                                            "response_format": {"type": "json_object"}})
    if jo["choices"][0]["finish_reason"] == "stop":
        json.loads(jo["choices"][0]["text"])

    # tools: a reply that is no call stays content, whole and streamed
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    st, wt = s.post_json("/v1/chat/completions", {"messages": msgs, "temperature": 0, "max_tokens": 16, "tools": tools})
    check(wt["choices"][0]["message"]["content"] == whole["choices"][0]["message"]["content"] and
          "tool_calls" not in wt["choices"][0]["message"], "tools changed a plain reply: %s" % wt["choices"][0])
    text, finish, _, _ = stream_text(s, "/v1/chat/completions", {"messages": msgs, "temperature": 0, "max_tokens": 16,
                                                                 "stream": True, "tools": tools})
    check(text == whole["choices"][0]["message"]["content"] and finish == "length", "tools stream %r" % text)
    st, at = s.post_json("/apply-template", {"messages": msgs})
    check(at["prompt"] == "<|im_start|>system\nBe short.<|im_end|>\n<|im_start|>user\nTell me<|im_end|>\n"
                          "<|im_start|>assistant\n", "apply-template %r" % at)

    # embeddings: unit vectors, the same input gives the same vector
    st, e = s.post_json("/v1/embeddings", {"input": ["Once upon a time", "The dog", "Once upon a time"]})
    n_dog = len(s.post_json("/tokenize", {"content": "The dog", "add_special": True})[1]["tokens"])
    check(st == 200 and len(e["data"]) == 3 and e["usage"]["prompt_tokens"] == 5 + n_dog + 5, "embeddings %s" %
          {k: v for k, v in e.items() if k != "data"})
    v0, v1, v2 = (d["embedding"] for d in e["data"])
    check(len(v0) == 64 and abs(sum(x * x for x in v0) - 1) < 1e-4, "not a unit vector")
    check(v0 == v2 and v0 != v1, "embedding determinism")

    concurrency(s)
    cancel(s)

    st, body, hdr = s.get("/metrics")
    text = body.decode()
    check(st == 200 and hdr["Content-Type"].startswith("text/plain"), "metrics status")
    for name in ["minfer_requests_total{status=\"200\"}", "minfer_time_to_first_token_seconds_count",
                 "minfer_inter_token_latency_seconds_bucket", "minfer_kv_pages_total", "minfer_prefix_cache_hit_tokens_total",
                 "minfer_queue_depth 0", "minfer_slots_busy 0"]:
        check(name in text, "metrics lacks %s" % name)


def concurrency(s):
    """16 streaming clients x 4 requests, mixed prompt lengths: each output
    equals the same request run alone."""
    base = "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends"
    words = base.split()
    prompts = [" ".join(words[: 2 + (i * 7) % len(words)]) for i in range(64)]
    lens = [8 + (i * 5) % 40 for i in range(64)]
    alone = [completion(s, p, max_tokens=n)["choices"][0]["text"] for p, n in zip(prompts, lens)]
    results, errors = [None] * 64, []

    def client(k):
        try:
            for r in range(4):
                i = k * 4 + r
                body = {"prompt": prompts[i], "temperature": 0, "max_tokens": lens[i], "stream": True}
                results[i] = stream_text(s, "/v1/completions", body)[0]
        except Exception as ex:  # noqa: BLE001 - reported below
            errors.append(repr(ex))

    th = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    t0 = time.time()
    for t in th:
        t.start()
    for t in th:
        t.join()
    check(not errors, "concurrent errors: %s" % errors[:3])
    bad = [i for i in range(64) if results[i] != alone[i]]
    check(not bad, "%d outputs differ from their solo runs, e.g. #%d %r vs %r" %
          (len(bad), bad[0] if bad else 0, results[bad[0]] if bad else "", alone[bad[0]] if bad else ""))
    print("concurrency: 64 requests from 16 clients in %.2f s, all equal to solo runs" % (time.time() - t0))


def slots_busy(s):
    return sum(1 for x in json.loads(s.get("/slots")[1]) if x["is_processing"])


def cancel(s):
    """A client that leaves mid-stream frees its slot."""
    sock = socket.create_connection((s.host, s.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 100000, "ignore_eos": True, "stream": True,
                       "temperature": 0})
    sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    got = b""
    while got.count(b"data: ") < 3:
        got += sock.recv(4096)
    check(slots_busy(s) == 1, "the streaming request holds no slot")
    sock.close()
    deadline = time.time() + 5
    while slots_busy(s) and time.time() < deadline:
        time.sleep(0.02)
    check(slots_busy(s) == 0, "the cancelled stream still holds its slot")
    slots = json.loads(s.get("/slots")[1])
    check(all(x["n_cached"] < 1000 for x in slots), "cancelled slot kept its pages: %s" % slots)


def shutdown_grace():
    """SIGTERM while a request runs: it finishes within the grace, exit 0."""
    import os
    env = dict(os.environ, MINFER_SERVE_STEP_DELAY_MS="20")
    s = Server(MINFER, MODEL, "-np", "1", "--shutdown-timeout", "1", env=env)
    out = {}

    def long_request():
        out["r"] = s.post_json("/v1/completions", {"prompt": "Once", "max_tokens": 1000, "ignore_eos": True})

    t = threading.Thread(target=long_request)
    t.start()
    while slots_busy(s) == 0:
        time.sleep(0.01)
    t0 = time.time()
    s.close(timeout=15)
    t.join()
    took = time.time() - t0
    check(took < 5, "shutdown took %.1f s" % took)
    check(out["r"][0] == 503, "request cut by shutdown: %s" % (out["r"],))


def parking():
    """One slot, two conversations taking turns: each finds its prefix again
    (parked when the other took the slot), with the same greedy text."""
    s = Server(MINFER, MODEL, "-np", "1")
    try:
        a = "Once upon a time there was a little girl named Lily. She loved to play outside in the park. " * 2
        b = "The dog ran to the big red ball and the cat sat on the warm mat by the door of the house. " * 2
        first = completion(s, a, max_tokens=8)
        n_a = first["usage"]["prompt_tokens"]
        completion(s, b, max_tokens=8)
        again = completion(s, a, max_tokens=8)
        check(again["usage"]["prompt_tokens_details"]["cached_tokens"] == n_a - 1,
              "parked prefix not reused: %s (prompt %d)" % (again["usage"], n_a))
        check(again["choices"][0]["text"] == first["choices"][0]["text"], "text after parking differs")
        again_b = completion(s, b, max_tokens=8)
        check(again_b["usage"]["prompt_tokens_details"]["cached_tokens"] > 30, "second parked prefix: %s" %
              again_b["usage"])
        m = s.get("/metrics")[1].decode()
        check("minfer_prefix_cache_sequences 2" in m, "parked sequences in metrics: %s" %
              [l for l in m.splitlines() if "prefix_cache" in l])
    finally:
        s.close()


def reasoning():
    """A template whose prompt ends inside <think>: the reply is reasoning
    (whole and streamed alike); with --reasoning-format none it is content."""
    import os
    import tempfile
    tmpl = ("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant: <think>\n{% endif %}")
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(tmpl)
    body = {"messages": [{"role": "user", "content": "Once upon a time"}], "temperature": 0, "max_tokens": 16}
    try:
        s = Server(MINFER, MODEL, "--chat-template", f.name)
        try:
            st, r = s.post_json("/v1/chat/completions", body)
            m = r["choices"][0]["message"]
            check(st == 200 and m["content"] == "" and len(m.get("reasoning_content", "")) > 10, "split: %s" % m)
            streamed = ""
            for ev in s.stream("/v1/chat/completions", dict(body, stream=True)):
                if ev != "[DONE]":
                    for c in json.loads(ev)["choices"]:
                        check(not c["delta"].get("content"), "content in a thinking stream: %s" % c)
                        streamed += c["delta"].get("reasoning_content", "")
            check(streamed == m["reasoning_content"], "streamed reasoning %r != %r" % (streamed, m))
        finally:
            s.close()
        s = Server(MINFER, MODEL, "--chat-template", f.name, "--reasoning-format", "none")
        try:
            st, r2 = s.post_json("/v1/chat/completions", body)
            m2 = r2["choices"][0]["message"]
            check(m2["content"] == m["reasoning_content"] and "reasoning_content" not in m2, "inline: %s" % m2)
        finally:
            s.close()
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    main()
