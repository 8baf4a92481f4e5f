// Browser test of the sift serve playground: headless Chromium driven by playwright-core.
//
//   node tests/browser/playground.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
//        [--chromium /usr/bin/chromium] [--out build/tests/browser-artifacts]
//
// Starts `sift serve` on 127.0.0.1 (any free port), opens the page, sets top_k and
// temperature (and a seed), generates, and checks that the streamed text appears (the same
// text the API gives for the same request), that the request carried the values set, and
// that the chain inspector shows the stages of a clicked token with probability bars.
// Then the chat view: a two-turn conversation through /v1/chat/completions (streamed; the
// system prompt and the earlier turns sent each time), the inspector on an assistant token,
// the stop button cutting an endless reply short, and tool calls shown from a streamed
// response (a canned one: the page's rendering of delta.tool_calls is what is tested).
// Saves screenshots (playground.png, chat.png) in --out. Prints "N passed, M failed".
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
  let chatSent = [];
  page.on("request", (r) => {
    if (r.url().endsWith("/completion") && r.method() === "POST") sent = JSON.parse(r.postData());
    if (r.url().endsWith("/v1/chat/completions") && r.method() === "POST") chatSent.push(JSON.parse(r.postData()));
  });

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

  // ---- the chat view: two turns (n_predict 24, ignore_eos, seed 42 from above) ----
  await page.click("#tab-chat");
  check("chat tab shows the chat view", await page.locator("#chat-input").isVisible() && !(await page.locator("#prompt").isVisible()));
  await page.fill("#system", "You are a storyteller.");
  await page.fill("#chat-input", "Tell me about a cat.");
  await page.click("#send");
  await page.waitForSelector("#chat-status[data-done='1']", { timeout: 30000 });
  const t1 = page.locator(".turn.assistant").nth(0).locator(".tok");
  const n1 = await t1.count();
  check("turn 1: the assistant's reply streamed in, 24 tokens", n1 === 24, `got ${n1}`);
  const c1 = chatSent[0] || {};
  check("turn 1: /v1/chat/completions, streamed, system prompt + user message", c1.stream === true && c1.trace === true &&
        JSON.stringify(c1.messages) === JSON.stringify([{ role: "system", content: "You are a storyteller." },
                                                       { role: "user", content: "Tell me about a cat." }]), JSON.stringify(c1));
  const reply1 = (await t1.allTextContents()).join("");
  const api1 = await (await fetch(base + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: c1.messages, top_k: 5, temperature: 0.7, seed: 42, n_predict: 24, ignore_eos: true }) })).json();
  check("turn 1: streamed reply equals the API's (non-streamed) for the same request",
        reply1.length > 0 && reply1 === api1.choices[0].message.content, `${JSON.stringify(reply1)} vs ${JSON.stringify(api1.choices[0].message.content)}`);
  await page.fill("#n_probs", "3"); // turn 2 also asks for the probabilities (OpenAI's logprobs in the chunks)
  await page.fill("#chat-input", "What happened next?");
  await page.press("#chat-input", "Enter");
  await page.waitForSelector("#chat-status[data-done='2']", { timeout: 30000 });
  const c2 = chatSent[1] || { messages: [] };
  check("turn 2: the whole conversation is sent (system, user, assistant, user)",
        c2.messages.map((m) => m.role).join(",") === "system,user,assistant,user" && c2.messages[2].content === reply1,
        JSON.stringify(c2.messages));
  check("turn 2: a second assistant turn streamed", await page.locator(".turn.assistant").nth(1).locator(".tok").count() === 24);
  await page.locator(".turn.assistant").nth(1).locator(".tok").nth(3).click();
  await page.waitForSelector("#insp .stage", { timeout: 5000 });
  const cnames = await page.locator("#insp .stage .head span:first-child").allTextContents();
  check("inspector on an assistant token lists the chain's stages", cnames[0] === "(logits)" && cnames.includes("top-k") &&
        cnames[cnames.length - 1] === "dist", JSON.stringify(cnames));
  check("  and the n_probs probabilities (3 of them)", await page.locator("#insp .stage.probs .cand").count() === 3 &&
        (chatSent[1] || {}).n_probs === 3);
  check("  with the chosen token marked", await page.locator("#insp .cand.chosen").count() >= 1 &&
        await page.locator(".turn.assistant .tok.selected").count() === 1);
  await page.screenshot({ path: join(OUT, "chat.png"), fullPage: false });
  console.log(`screenshot: ${join(OUT, "chat.png")}`);

  // the stop button: a long reply (n_predict -1, ignore_eos: until the slot's context is full)
  // cut short. stories260K writes it in a fraction of a second, faster than a click, so the
  // page's network is throttled (DevTools' emulation, 8 KB/s: each chunk carries its trace)
  // and the reply arrives over many seconds, as a big model's would.
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: 8000, uploadThroughput: -1 });
  await page.fill("#n_predict", "-1");
  await page.fill("#chat-input", "Go on forever.");
  await page.click("#send");
  const t3 = page.locator(".turn.assistant").nth(2).locator(".tok");
  await t3.nth(5).waitFor({ timeout: 30000 });
  check("stop: the button is enabled while streaming", await page.isEnabled("#chat-stop") && await page.isDisabled("#send"));
  await page.click("#chat-stop");
  await page.waitForFunction(() => /\(stopped\)/.test(document.querySelector("#chat-status").textContent), null, { timeout: 10000 });
  const n3 = await t3.count();
  await page.waitForTimeout(300);
  check("stop: the reply ends (no more tokens), Send is enabled again", await t3.count() === n3 && n3 >= 6 &&
        await page.isEnabled("#send") && await page.isDisabled("#chat-stop"), `tokens ${n3} -> ${await t3.count()}`);
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  const partial = await page.evaluate(() => messages[messages.length - 1]);
  check("stop: the partial reply stays in the conversation", partial.role === "assistant" && partial.content.length > 0);

  // tool calls: a canned stream with OpenAI's tool-call deltas (this server's tool support is
  // tested by the API tests; here the page's handling of the deltas is)
  await page.route("**/v1/chat/completions", (route) => {
    const ev = (o) => `data: ${JSON.stringify(o)}\n\n`;
    const ch = (delta, fin = null) => ({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: fin }] });
    route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream" }, body:
      ev(ch({ role: "assistant", content: null })) +
      ev(ch({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] })) +
      ev(ch({ tool_calls: [{ index: 0, function: { arguments: "{\"city\": " } }] })) +
      ev(ch({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] })) +
      ev(ch({}, "tool_calls")) + "data: [DONE]\n\n" });
  });
  await page.locator("details", { has: page.locator("#tools") }).locator("summary").click();
  await page.fill("#tools", JSON.stringify([{ type: "function", function: { name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }]));
  await page.fill("#chat-input", "Weather in Paris?");
  await page.click("#send");
  await page.waitForSelector("#chat-status[data-done='3']", { timeout: 10000 });
  const tc = await page.locator(".turn.assistant .toolcall").allTextContents();
  check("tool calls: shown from the streamed deltas", tc.length === 1 && tc[0] === 'tool call call_1: get_weather({"city": "Paris"})',
        JSON.stringify(tc));
  check("tool calls: the request carried the tools", (chatSent[chatSent.length - 1].tools || []).length === 1);
  await page.unroute("**/v1/chat/completions");
  check("no page errors in the chat view", pageErrors.length === 0, pageErrors.join("; "));
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
