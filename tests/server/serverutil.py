"""Starting `minfer serve` for a test and talking to it (standard library only)."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Server:
    """A server on a free loopback port; stops it (and checks its exit code) on close."""

    def __init__(self, minfer, model, *args, env=None):
        self.proc = subprocess.Popen([minfer, "serve", "-m", model, "--port", "0", "-t", "2", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://([^:]+):(\d+)", line)
        if not m:
            self.proc.kill()
            fail("server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.host, self.port = m.group(1), int(m.group(2))
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.proc.kill()
        fail("server never became healthy")

    def request(self, method, path, body=None, headers=None, raw=None, timeout=120):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, r.read(), dict(r.getheaders())
        c.close()
        return out

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def post_json(self, path, body, **kw):
        st, data, _ = self.post(path, body, **kw)
        return st, json.loads(data)

    def stream(self, path, body, headers=None):
        """Yields each SSE data payload (a str) of a streamed request."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=120)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, body=json.dumps(body), headers=h)
        r = c.getresponse()
        if r.status != 200:
            fail("stream status %d: %s" % (r.status, r.read()))
        buf = b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                check(ev.startswith(b"data: "), "not an SSE data event: %r" % ev)
                yield ev[6:].decode()
        c.close()

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("server did not stop within %d s of the signal" % timeout)
        err = self.proc.stderr.read()
        check(rc == 0, "server exited with %d: %s" % (rc, err[-3000:]))
        return err
