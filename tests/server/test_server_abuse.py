"""minfer serve under abuse: 300 malformed requests (bad JSON, wrong types, NUL
bytes, invalid UTF-8, enormous numbers, 10 MB bodies, oversized headers,
garbage request lines, pipelined garbage, clients leaving mid-request and
mid-stream) interleaved with well-formed ones that must keep giving the
right answer, while a slow client sends its headers a byte at a time. The
server must not crash and its memory must come back to where it was."""
import json
import random
import socket
import sys
import threading
import time

from serverutil import Server, check

MINFER, SHARED = sys.argv[1], sys.argv[2]
MODEL = SHARED + "/models/stories260K.gguf"


def raw(s, data, read=True, timeout=10):
    """Sends bytes on a fresh connection; returns what came back (b"" if nothing)."""
    sock = socket.create_connection((s.host, s.port), timeout=timeout)
    try:
        sock.sendall(data)
    except OSError:
        pass
    got = b""
    if read:
        try:
            while True:
                b = sock.recv(65536)
                if not b:
                    break
                got += b
                if b"\r\n\r\n" in got and (b"Content-Length" not in got or len(got.split(b"\r\n\r\n", 1)[1]) >=
                                            int(got.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])):
                    break
        except (OSError, IndexError, ValueError):
            pass
    sock.close()
    return got


def post(path, body, extra=b""):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    return (b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nConnection: close\r\n%s"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), extra, len(body))) + body


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def main():
    s = Server(MINFER, MODEL, "-np", "4", "--timeout", "30")
    try:
        run(s)
    finally:
        s.close()
    print("ok")


def run(s):
    rng = random.Random(1234)
    good_body = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 12}
    st, ref = s.post_json("/v1/completions", good_body)
    ref_text = ref["choices"][0]["text"]
    for _ in range(20):
        s.post_json("/v1/completions", good_body)
        s.post_json("/v1/embeddings", {"input": "warm up"})
    base = s.rss_kb()

    stop = threading.Event()

    def slow_loris():
        sock = socket.create_connection((s.host, s.port))
        req = b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 10000
        for b in req:
            if stop.is_set():
                break
            try:
                sock.send(bytes([b]))
            except OSError:
                break
            time.sleep(0.05)
        sock.close()

    loris = threading.Thread(target=slow_loris)
    loris.start()

    good = json.dumps(good_body)
    cases = [
        lambda: post("/v1/completions", good[: rng.randrange(1, len(good) - 1)]),                       # truncated JSON
        lambda: post("/v1/completions", '{"prompt": %s}' % rng.choice(["1", "true", "{}", "null", "[[]]"])),
        lambda: post("/v1/completions", '{"prompt":"x","%s": {"x": []}}' % rng.choice(
            ["max_tokens", "temperature", "top_k", "seed", "stop", "logit_bias", "stream", "logprobs"])),
        lambda: post("/v1/completions", b'{"prompt":"a\x00b"}'),                                          # NUL byte
        lambda: post("/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xff\xfe\xc3"}]}'),  # bad UTF-8
        lambda: post("/v1/completions", '{"prompt":"x","max_tokens":%s}' % rng.choice(
            ["1e309", "-1e309", "99999999999999999999999", "1.5", "-7", "NaN"])),
        lambda: post("/v1/completions", b'{"prompt":"' + b"x" * (10 << 20) + b'"}'),                      # 10 MB
        lambda: b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nX-Big: " + b"h" * 200000 + b"\r\n\r\n",       # headers
        lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) + b"\r\n\r\n",            # garbage
        lambda: b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n" + b"\x00GARBAGE \x01\x02 HTTP/9\r\n\r\n",       # pipelined
        lambda: post("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"}],"stream":true,'
                                             '"max_tokens":500,"ignore_eos":true}'),                     # leave mid-stream
        lambda: post("/v1/completions", '{"prompt":"Once upon a time","max_tokens":200}')[:-5],          # short body
        lambda: post("/v1/embeddings", '{"input":[[1,2,3],"x",[999999]]}'),
        lambda: post("/v1/chat/completions", '{"messages":[{"role":"user","content":[{"type":"text"}]}]}'),
        lambda: b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n{}",
        lambda: b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ]
    n_bad = 0
    statuses = {}
    for i in range(300):
        k = i % len(cases)
        data = cases[k]()
        leave = k in (10, 11)
        resp = raw(s, data, read=not leave, timeout=10)
        if leave and k == 10:
            # read the start of the stream, then drop the connection
            sock = socket.create_connection((s.host, s.port))
            sock.sendall(data)
            sock.recv(100)
            sock.close()
        st = status_of(resp)
        statuses[st] = statuses.get(st, 0) + 1
        if not leave and st == 200 and k not in (9,):
            check(False, "malformed case %d answered 200: %r" % (k, resp[:300]))
        n_bad += 1
        if i % 10 == 9:
            st2, r = s.post_json("/v1/completions", good_body)
            check(st2 == 200 and r["choices"][0]["text"] == ref_text, "good request after %d bad ones: %s" % (i, r))
    stop.set()
    loris.join()
    check(s.proc.poll() is None, "the server died")
    deadline = time.time() + 5
    while time.time() < deadline and any(x["is_processing"] for x in json.loads(s.get("/slots")[1])):
        time.sleep(0.05)
    check(not any(x["is_processing"] for x in json.loads(s.get("/slots")[1])), "abandoned requests still hold slots")
    for _ in range(20):
        s.post_json("/v1/completions", good_body)
    grown = s.rss_kb() - base
    print("abuse: %d malformed requests, statuses %s, memory %+d KiB" % (n_bad, dict(sorted(statuses.items())), grown))
    check(grown < 64 * 1024, "memory grew by %d KiB" % grown)


if __name__ == "__main__":
    main()
