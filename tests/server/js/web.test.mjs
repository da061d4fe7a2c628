// The chat page in headless Chromium (Debian's), driven by playwright-core:
// type a message, watch the reply stream in token by token, stop it, and
// keep a screenshot as an artifact.
import { existsSync, mkdirSync } from "node:fs";
import { check, needModules, startServer, stopServer } from "./common.mjs";

needModules("playwright-core");
const chromium_path = process.env.CHROMIUM || "/usr/bin/chromium";
if (!existsSync(chromium_path)) {
  const msg = `skipped: no Chromium at ${chromium_path} (apt-get install chromium)`;
  if (process.env.MINFER_REQUIRE_ALL_TESTS) { console.error("FAIL: " + msg); process.exit(1); }
  console.log(msg);
  process.exit(77);
}
const { chromium } = await import("playwright-core");
const [minfer, shared, artifacts] = process.argv.slice(2);
// a slowed scheduler, so the stream is long enough to watch and to stop
process.env.MINFER_SERVE_STEP_DELAY_MS = "15";
const server = await startServer(minfer, shared + "/models/stories260K.gguf", ["-np", "2"]);
let browser = null, failed = null;
try {
  browser = await chromium.launch({
    executablePath: chromium_path,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage();
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith(server.url)) outside.push(r.url()); });
  await page.goto(server.url + "/");
  check((await page.title()) === "minfer chat", "title");
  await page.waitForFunction(() => document.getElementById("model").textContent.includes("stories260K"));
  await page.fill("#max_tokens", "400");
  await page.dispatchEvent("#max_tokens", "change");
  await page.fill("#temperature", "0");
  await page.dispatchEvent("#temperature", "change");
  await page.fill("#input", "Tell me a story");
  await page.click("#send");

  // the reply grows over several observations: it streams
  const seen = new Set();
  const t0 = Date.now();
  while (Date.now() - t0 < 10000 && seen.size < 4) {
    const t = await page.evaluate(() => {
      const m = document.querySelectorAll(".msg.assistant .body");
      return m.length ? m[m.length - 1].textContent : "";
    });
    if (t) seen.add(t);
    await page.waitForTimeout(40);
  }
  check(seen.size >= 4, `the reply did not stream (${seen.size} distinct states)`);
  check(await page.isEnabled("#stop"), "stop is not enabled while streaming");
  await page.click("#stop");
  await page.waitForFunction(() => document.getElementById("send").disabled === false, null, { timeout: 5000 });
  const final = await page.evaluate(() => document.querySelector(".msg.assistant .body").textContent);
  check(final.length > 0, "empty reply");
  const stats = await page.textContent("#stats");
  check(/\d+ tokens, [\d.]+ tokens\/s/.test(stats), "tokens/s not shown: " + stats);
  // stopped early: far fewer than 400 tokens came
  const n = parseInt(stats, 10);
  check(n > 0 && n < 400, "stop did not stop the reply: " + stats);
  // the conversation survives a reload (local storage)
  await page.reload();
  const kept = await page.evaluate(() => document.querySelectorAll(".msg").length);
  check(kept === 2, "conversation not kept across a reload: " + kept + " messages");
  check(outside.length === 0, "the page made requests outside the server: " + outside.join(", "));
  if (artifacts) {
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: artifacts + "/web-chat.png", fullPage: true });
  }
  // the server freed the stopped request's slot
  const slots = await (await fetch(server.url + "/slots")).json();
  check(slots.every((s) => !s.is_processing), "a slot is still busy after stop: " + JSON.stringify(slots));
} catch (e) {
  failed = e;
} finally {
  if (browser) await browser.close();
  await stopServer(server);
}
if (failed) {
  console.error("FAIL:", failed);
  process.exit(1);
}
console.log("ok");
