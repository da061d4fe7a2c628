// Starting `minfer serve` from a Node test, on a free loopback port.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const here = dirname(fileURLToPath(import.meta.url));

// Exit 77 (ctest: skipped) when the npm packages are missing, unless the
// caller asks for every test to run (CI does, after installing them).
export function needModules(...names) {
  for (const n of names) {
    if (!existsSync(join(here, "node_modules", n))) {
      const msg = `skipped: npm package ${n} is not installed (npm ci --prefix tests/server/js)`;
      if (process.env.MINFER_REQUIRE_ALL_TESTS) {
        console.error("FAIL: " + msg);
        process.exit(1);
      }
      console.log(msg);
      process.exit(77);
    }
  }
}

// Servers still running when a check fails (process.exit) are killed with
// the test, so a failure leaves no server behind.
const live = new Set();
process.on("exit", () => { for (const p of live) p.kill("SIGKILL"); });

export function startServer(minfer, model, args = []) {
  return new Promise((resolve, reject) => {
    const p = spawn(minfer, ["serve", "-m", model, "--port", "0", "-t", "2", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    live.add(p);
    p.on("exit", () => live.delete(p));
    let out = "", err = "";
    p.stderr.on("data", (d) => { err += d; });
    p.stdout.on("data", async (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/);
      if (!m || p.url) return;
      p.url = m[1];
      for (let i = 0; i < 600; i++) {
        try { if ((await fetch(p.url + "/health")).ok) return resolve(p); } catch (e) {}
        await new Promise((r) => setTimeout(r, 50));
      }
      reject(new Error("server never became healthy: " + err));
    });
    p.on("exit", (code) => { if (!p.url) reject(new Error(`server exited ${code}: ${err}`)); });
    p.errText = () => err;
  });
}

export function stopServer(p) {
  return new Promise((resolve, reject) => {
    p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`server exited ${code}: ${p.errText()}`))));
    p.kill("SIGTERM");
  });
}

export function check(cond, msg) {
  if (!cond) {
    console.error("FAIL: " + msg);
    process.exit(1);
  }
}
