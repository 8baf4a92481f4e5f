// Browser test of the sift serve playground: headless Chromium driven by playwright-core.
//
//   node tests/browser/playground.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
//        [--chromium /usr/bin/chromium] [--out build/tests/browser-artifacts]
//
// Starts `sift serve` on 127.0.0.1 (any free port), opens the page, sets top_k and
// temperature (and a seed), generates, and checks that the streamed text appears (the same
// text the API gives for the same request), that the request carried the values set, and
// that the chain inspector shows the stages of a clicked token with probability bars.
// Saves a screenshot (playground.png) in --out. Prints "N passed, M failed".
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const SIFT = arg("--sift"), MODEL = arg("--model");
const CHROMIUM = arg("--chromium", "/usr/bin/chromium");
const OUT = arg("--out", "browser-artifacts");
if (!SIFT || !MODEL) {
  console.error("usage: playground.test.mjs --sift SIFT --model MODEL [--chromium PATH] [--out DIR]");
  process.exit(2);
}

function startServer() {
  return new Promise((resolve, reject) => {
    const p = spawn(SIFT, ["serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0", "-np", "2", "-c", "1024"],
                    { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => reject(new Error("server did not start: " + log)), 30000);
    p.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve({ proc: p, port: Number(m[1]) }); }
    });
    p.on("exit", (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
}

let passed = 0, failed = 0;
function check(name, cond, detail = "") {
  if (cond) { passed++; console.log(`ok    ${name}`); }
  else { failed++; console.log(`FAIL  ${name} ${detail}`); }
}

const t0 = Date.now();
const server = await startServer();
const base = `http://127.0.0.1:${server.port}`;
const profile = mkdtempSync(join(tmpdir(), "sift-chromium-"));
mkdirSync(OUT, { recursive: true });
let context;
try {
  // a fresh profile every run; flags that keep Chromium off the network and quiet
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1400, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync"],
  });
  const page = context.pages()[0] || await context.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  let sent = null;
  page.on("request", (r) => { if (r.url().endsWith("/completion") && r.method() === "POST") sent = JSON.parse(r.postData()); });

  await page.goto(base + "/");
  await page.waitForSelector("body[data-ready='1']", { timeout: 15000 });
  check("page loads with the controls from /props", await page.locator("#top_k").count() === 1 &&
        await page.inputValue("#top_k") === "40");

  await page.fill("#prompt", "Once upon a time");
  await page.fill("#top_k", "5");
  await page.fill("#temperature", "0.7");
  await page.fill("#seed", "42");
  await page.fill("#n_predict", "24");
  await page.check("#ignore_eos");
  await page.click("#generate");
  await page.waitForSelector("#status[data-done='1']", { timeout: 30000 });

  check("request carries top_k and temperature", sent && sent.top_k === 5 && sent.temperature === 0.7 && sent.stream === true &&
        sent.trace === true, JSON.stringify(sent));
  const nTok = await page.locator("#output .tok").count();
  check("24 tokens streamed into the output", nTok === 24, `got ${nTok}`);
  const text = (await page.locator("#output .tok").allTextContents()).join("");
  const api = await (await fetch(base + "/completion", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", top_k: 5, temperature: 0.7, seed: 42, n_predict: 24, ignore_eos: true }) })).json();
  check("streamed text equals the API's for the same request", text.length > 0 && text === api.content,
        `${JSON.stringify(text)} vs ${JSON.stringify(api.content)}`);
  const status = await page.textContent("#status");
  check("status shows the chain with top-k", /top-k/.test(status) && /stopped by limit/.test(status), status);

  // the inspector: click the third token
  await page.locator("#output .tok").nth(2).click();
  await page.waitForSelector("#insp .stage", { timeout: 5000 });
  const names = await page.locator("#insp .stage .head span:first-child").allTextContents();
  check("inspector lists the stages", names[0] === "(logits)" && names.includes("top-k") && names[names.length - 1] === "dist",
        JSON.stringify(names));
  const topk = page.locator("#insp .stage", { hasText: "top-k" }).first();
  check("top-k left 5 candidates", (await topk.locator(".head .n").textContent()) === "5 candidates");
  const bars = await page.locator("#insp .cand .bar").count();
  const widths = await page.locator("#insp .cand .bar").evaluateAll((els) => els.map((e) => parseFloat(e.style.width)));
  check("probability bars drawn", bars > 5 && widths.every((w) => w >= 0 && w <= 100) && widths.some((w) => w > 10),
        JSON.stringify(widths.slice(0, 8)));
  check("the chosen token is marked", await page.locator("#insp .cand.chosen").count() >= 1);
  check("no page errors", pageErrors.length === 0, pageErrors.join("; "));
  await page.screenshot({ path: join(OUT, "playground.png"), fullPage: false });
  console.log(`screenshot: ${join(OUT, "playground.png")}`);
} catch (e) {
  failed++;
  console.log(`FAIL  ${e.stack || e}`);
} finally {
  if (context) await context.close();
  server.proc.kill("SIGTERM");
  rmSync(profile, { recursive: true, force: true });
}
console.log(`browser test: ${((Date.now() - t0) / 1e3).toFixed(1)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
