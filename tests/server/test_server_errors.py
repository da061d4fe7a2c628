"""Every error status of minfer serve, sent with curl, with the exact
OpenAI-shaped error JSON: 400 (bad JSON, wrong types, bad values, a prompt
longer than the context), 401, 404, 405, 413, 503 (queue full, with
Retry-After)."""
import json
import os
import subprocess
import sys
import threading
import time

from serverutil import Server, check

MINFER, SHARED = sys.argv[1], sys.argv[2]
MODEL = SHARED + "/models/stories260K.gguf"
KEY = "sekrit-key"


def err(msg, param=None, typ="invalid_request_error", code=None):
    return {"error": {"message": msg, "type": typ, "param": param, "code": code}}


def curl(s, *args, key=KEY):
    cmd = ["curl", "-s", "-D", "-", "http://%s:%d%s" % (s.host, s.port, args[0])] + list(args[1:])
    if key:
        cmd += ["-H", "Authorization: Bearer " + key]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    return status, body, headers


def expect(s, want_status, want_body, *args, key=KEY, header=None):
    st, body, h = curl(s, *args, key=key)
    got = json.loads(body) if body else None
    check(st == want_status, "%s: status %d, expected %d (%s)" % (args[:2], st, want_status, body[:300]))
    check(got == want_body, "%s: body\n  %s\nexpected\n  %s" % (args[:2], got, want_body))
    if header:
        check(h.get(header[0].lower()) == header[1], "%s: header %s = %r" % (args[:2], header[0], h.get(header[0].lower())))


def cli():
    """Bad command lines: exit 2 with one line naming the option; a missing
    model file: exit 1 naming it; 0.0.0.0 without a key: a warning."""
    def run(*a):
        p = subprocess.run([MINFER, "serve", *a], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr
    rc, e = run()
    check(rc == 2 and e == "minfer serve: -m model.gguf is required (see --help)\n", "no -m: %d %r" % (rc, e))
    rc, e = run("-m", MODEL, "--port", "http")
    check(rc == 2 and "--port" in e and e.count("\n") == 1, "bad port: %d %r" % (rc, e))
    rc, e = run("-m", MODEL, "--reasoning-format", "x")
    check(rc == 2 and e == "minfer serve: unknown --reasoning-format 'x' (deepseek, none)\n", "reasoning: %r" % e)
    rc, e = run("-m", MODEL, "--bogus")
    check(rc == 2 and e == "minfer serve: unknown option --bogus (see --help)\n", "unknown option: %r" % e)
    rc, e = run("-m", "/nonexistent.gguf", "--port", "0")
    check(rc == 1 and "/nonexistent.gguf" in e, "missing model: %d %r" % (rc, e))
    rc, e = run("-m", MODEL, "--host", "not-an-ip", "--port", "0")
    check(rc == 1 and e == "minfer serve: --host not-an-ip is not a numeric IPv4 or IPv6 address\n", "host: %r" % e)
    s = Server(MINFER, MODEL, "--host", "0.0.0.0")
    err_text = s.close()
    check("warning: listening on 0.0.0.0 without --api-key" in err_text, "no warning for 0.0.0.0: %r" % err_text)


def loading():
    """While the model loads the server already listens: /health and the API
    answer 503 "Loading model" with Retry-After, then /health turns 200."""
    import re, signal
    env = dict(os.environ, MINFER_SERVE_LOAD_DELAY_MS="1500")
    p = subprocess.Popen([MINFER, "serve", "-m", MODEL, "--port", "0", "-t", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        m = re.search(r"listening on http://([^:]+):(\d+)", p.stdout.readline())
        check(m is not None, "server did not start")
        base = "http://%s:%s" % (m.group(1), m.group(2))
        want = err("Loading model", typ="unavailable_error")
        for path, extra in (("/health", []), ("/v1/completions", ["-d", '{"prompt":"x"}'])):
            out = subprocess.run(["curl", "-s", "-D", "-", base + path] + extra, capture_output=True, check=True).stdout
            head, _, body = out.partition(b"\r\n\r\n")
            check(head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head, "%s while loading: %r" % (path, head))
            check(json.loads(body) == want, "%s while loading: %s" % (path, body))
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run(["curl", "-s", base + "/health"], capture_output=True).stdout
            if out == b'{"status":"ok"}' or out == b'{"status": "ok"}':
                break
            time.sleep(0.1)
        check(json.loads(out) == {"status": "ok"}, "health after loading: %r" % out)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    check(rc == 0, "server exit %d after the loading test" % rc)


def main():
    cli()
    loading()
    env = dict(os.environ, MINFER_SERVE_STEP_DELAY_MS="20")
    s = Server(MINFER, MODEL, "--api-key", KEY, "-np", "1", "-c", "128", "--max-queue", "1", "--max-body", "4096",
               env=env)
    try:
        run(s)
    finally:
        s.close()
    print("ok")


def run(s):
    ak = err("invalid or missing API key (send \"Authorization: Bearer <key>\")", typ="authentication_error",
             code="invalid_api_key")
    expect(s, 401, ak, "/v1/models", key=None)
    expect(s, 401, ak, "/v1/models", key="wrong")
    expect(s, 401, ak, "/v1/models", key=KEY + "x")
    st, body, _ = curl(s, "/health", key=None)
    check(st == 200 and json.loads(body) == {"status": "ok"}, "health without a key")

    P = "/v1/completions"
    expect(s, 400, err("invalid JSON at line 1, column 10: unexpected token near end of file"), P, "-d", '{"prompt":')
    expect(s, 400, err("the request needs a JSON body"), P, "-X", "POST")
    expect(s, 400, err("the request body must be a JSON object"), P, "-d", "[1,2]")
    expect(s, 400, err("max_tokens: must be an integer", "max_tokens"), P, "-d", '{"prompt":"x","max_tokens":"ten"}')
    expect(s, 400, err("max_tokens: must be at least 1 (or -1 for no limit)", "max_tokens"), P, "-d",
           '{"prompt":"x","max_tokens":0}')
    expect(s, 400, err("temperature: must be between 0 and 100", "temperature"), P, "-d",
           '{"prompt":"x","temperature":-1}')
    expect(s, 400, err("top_p: must be a number", "top_p"), P, "-d", '{"prompt":"x","top_p":"high"}')
    expect(s, 400, err("invalid JSON at line 1, column 50: too big integer"), P, "-d",
           '{"prompt":"x","max_tokens":99999999999999999999999}')
    expect(s, 400, err("invalid JSON at line 1, column 33: real number overflow near '1e400'"), P, "-d",
           '{"prompt":"x","temperature":1e400}')
    expect(s, 400, err("stop[1]: must be a string", "stop"), P, "-d", '{"prompt":"x","stop":["a",1]}')
    expect(s, 400, err("logit_bias: key 'abc' is not a token id between 0 and 511", "logit_bias"), P, "-d",
           '{"prompt":"x","logit_bias":{"abc":1}}')
    expect(s, 400, err("prompt[1]: must be a token id between 0 and 511", "prompt"), P, "-d", '{"prompt":[1,999]}')
    expect(s, 400, err("prompt: must be a string, an array of token ids, or an array of those", "prompt"), P, "-d",
           '{"prompt":{"a":1}}')
    long_prompt = "Once upon a time " * 40
    expect(s, 400, err("prompt: the prompt has 162 tokens, the context holds 128 (prompt and reply together)", "prompt"),
           P, "-d", json.dumps({"prompt": long_prompt}))
    C = "/v1/chat/completions"
    expect(s, 400, err("messages: must be a non-empty array", "messages"), C, "-d", '{"messages":[]}')
    expect(s, 400, err("messages[0].role: must be one of system, user, assistant, tool, developer", "messages"), C, "-d",
           '{"messages":[{"role":"king","content":"hi"}]}')
    expect(s, 400, err("messages[0].content[0]: only parts of type \"text\" are supported", "messages"), C, "-d",
           '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}')
    expect(s, 400, err("n: only 1 choice per request is supported", "n"), C, "-d",
           '{"messages":[{"role":"user","content":"hi"}],"n":2}')
    expect(s, 400, err("response_format.type: must be \"text\", \"json_object\" or \"json_schema\"",
                       "response_format"), C, "-d",
           '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"xml"}}')
    expect(s, 400, err("response_format.json_schema.schema: json schema: keyword 'patternProperties' is not supported "
                       "(at the root)", "response_format"), C, "-d",
           '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",'
           '"json_schema":{"schema":{"type":"object","patternProperties":{}}}}}')
    expect(s, 400, err("tool_choice: needs \"tools\"", "tool_choice"), C, "-d",
           '{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}')
    expect(s, 400, err("grammar: line 1, column 10: unexpected ')'",
                       "grammar"), P, "-d", '{"prompt":"x","grammar":"root ::= )"}')
    expect(s, 400, err("top_logprobs: needs \"logprobs\": true", "top_logprobs"), C, "-d",
           '{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}')
    expect(s, 400, err("input: must be a non-empty string, an array of token ids, or an array of those", "input"),
           "/v1/embeddings", "-d", '{"input":[]}')
    expect(s, 400, err("content: must be a string", "content"), "/tokenize", "-d", '{"content":5}')
    expect(s, 400, err("tokens[0]: must be a token id between 0 and 511", "tokens"), "/detokenize", "-d",
           '{"tokens":[-1]}')
    expect(s, 404, err("no route GET /v2/nothing", typ="not_found_error"), "/v2/nothing")
    expect(s, 404, err("the model 'gpt-9' does not exist (this server has 'stories260K.gguf')", "model",
                       typ="not_found_error"), "/v1/models/gpt-9")
    expect(s, 405, err("DELETE is not allowed on /v1/completions (use POST)"), P, "-X", "DELETE",
           header=("Allow", "POST"))
    expect(s, 405, err("POST is not allowed on /v1/models (use GET)"), "/v1/models", "-d", "{}",
           header=("Allow", "GET, HEAD"))
    big = "x" * 5000
    expect(s, 413, err("the request body is larger than 4096 bytes"), P, "-d", '{"prompt":"%s"}' % big)

    # 503: one slot running, one request queued, the next is refused
    running = threading.Thread(target=lambda: curl(s, P, "-d", '{"prompt":"Once","max_tokens":100,"ignore_eos":true}'))
    running.start()
    wait_metric(s, "minfer_slots_busy 1")
    queued = threading.Thread(target=lambda: curl(s, P, "-d", '{"prompt":"Once","max_tokens":2}'))
    queued.start()
    wait_metric(s, "minfer_queue_depth 1")
    expect(s, 503, err("the server is busy: all 1 slots are running and the queue of 1 is full; retry later",
                       typ="unavailable_error"), P, "-d", '{"prompt":"Once","max_tokens":2}', header=("Retry-After", "1"))
    running.join()
    queued.join()
    st, body, _ = curl(s, "/metrics")
    text = body.decode()
    for code in (400, 401, 404, 405, 413, 503):
        check('minfer_requests_total{status="%d"}' % code in text, "metrics lack status %d" % code)


def wait_metric(s, line):
    deadline = time.time() + 10
    while time.time() < deadline:
        if line in curl(s, "/metrics")[1].decode():
            return
        time.sleep(0.01)
    check(False, "metrics never showed %r" % line)


if __name__ == "__main__":
    main()
