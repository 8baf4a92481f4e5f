// Browser test of the sift serve playground: headless Chromium driven by playwright-core.
//
//   node playground.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
//        [--chromium /usr/bin/chromium] [--out build/tests/browser/artifacts]
//
// (CTest's server_browser runs it through run.sh, which installs playwright-core first.)
// Starts `sift serve` on 127.0.0.1 (any free port), opens the page, sets top_k and
// temperature (and a seed), generates, and checks that the streamed text appears (the same
// text the API gives for the same request), that the request carried the values set, and
// that the chain inspector shows the stages of a clicked token with probability bars.
// Then the chat view: a two-turn conversation through /v1/chat/completions (streamed; the
// system prompt and the earlier turns sent each time), the inspector on an assistant token,
// the stop button cutting an endless reply short, and tool calls shown from a streamed
// response (a canned one: the page's rendering of delta.tool_calls is what is tested).
// Markdown (markdown-it and DOMPurify, vendored and inlined into the page): a canned streamed
// reply with headings, emphasis, lists, code, a table and links renders as those elements,
// and the <script>, <img onerror> and javascript: link in it are shown as text, never run;
// its image is not loaded, and the page fetches nothing but from its server. Layout: the chat at 1280, 420 and 360 px wide (the chat column
// at least 300 px wide on a phone, the controls a drawer). Conversations: kept across a
// reload, switched, deleted. API key: a second server with --api-key; the page asks for
// the key, a wrong one gets the 401 message, the right one works and is kept.
// Saves screenshots (playground.png, chat-1280.png, chat-360.png) in --out. Prints
// "N passed, M failed".
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
const API_KEY = "sift-browser-test-key";
if (!SIFT || !MODEL) {
  console.error("usage: playground.test.mjs --sift SIFT --model MODEL [--chromium PATH] [--out DIR]");
  process.exit(2);
}

function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const p = spawn(SIFT, ["serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0", "-np", "2", "-c", "1024", ...extra],
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

// sends a chat message; returns the #chat-status data-done count that marks its end
async function chatSend(page, text, press = false) {
  const before = Number(await page.getAttribute("#chat-status", "data-done") || 0);
  await page.fill("#chat-input", text);
  if (press) await page.press("#chat-input", "Enter"); else await page.click("#send");
  return before + 1;
}
const chatDone = (page, n, timeout = 30000) => page.waitForSelector(`#chat-status[data-done='${n}']`, { timeout, state: "attached" })
  .catch(async (e) => { throw new Error(`${e.message}\nchat status: ${await page.textContent("#chat-status")} / ${await page.textContent("#chat-error")}`); });
const words = (t) => (t.match(/[A-Za-z0-9]+/g) || []).join(" ");   // text as markdown leaves it
const width = (page, sel) => page.locator(sel).evaluate((e) => e.getBoundingClientRect().width);
const noHScroll = (page) => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

// a canned streamed chat reply (content in small pieces, markdown split mid-syntax)
function cannedChat(route, text) {
  const ev = (o) => `data: ${JSON.stringify(o)}\n\n`;
  const ch = (delta, fin = null) => ({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: fin }] });
  let body = ev(ch({ role: "assistant", content: "" }));
  for (let i = 0; i < text.length; i += 7) body += ev(ch({ content: text.slice(i, i + 7) }));
  route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream" }, body: body + ev(ch({}, "stop")) + "data: [DONE]\n\n" });
}

const MARKDOWN = [
  "# Plan",
  "",
  "Some **bold**, *italic*, ~~gone~~ and `inline <b>code</b>` text.",
  "",
  "- one",
  "- two",
  "  - nested",
  "",
  "1. first",
  "2. second",
  "",
  "```js",
  "if (a < b && c > d) console.log(\"<tag>\");",
  "```",
  "",
  "> quoted",
  "",
  "| a | b |",
  "|---|--:|",
  "| 1 | 2 |",
  "",
  "<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\">",
  "[safe](https://example.com/x) [bad](javascript:window.__pwned=3) [<img src=y onerror=\"window.__pwned=4\">](https://example.com/z) https://example.org/y.",
  "![pixel](https://example.com/pixel.png)",
].join("\n");

const t0 = Date.now();
const server = await startServer();
let keyServer = null;
const base = `http://127.0.0.1:${server.port}`;
const profile = mkdtempSync(join(tmpdir(), "sift-chromium-"));
mkdirSync(OUT, { recursive: true });
let context;
try {
  // a fresh profile every run; flags that keep Chromium off the network and quiet
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync"],
  });
  const page = context.pages()[0] || await context.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  let sent = null;
  let chatSent = [];
  const auths = [];
  const elsewhere = [];   // requests not to the server (the vendored libraries are inlined; images not rendered)
  page.on("request", (r) => {
    if (!r.url().startsWith(base + "/")) elsewhere.push(r.url());
    if (/\/(completion|props)$/.test(r.url())) auths.push(r.headers().authorization || "");
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
  await chatDone(page, await chatSend(page, "Tell me about a cat."));
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
  const md1 = await page.locator(".turn.assistant").nth(0).locator(".md").textContent();
  check("turn 1: the reply is shown rendered (its text, markdown), the tokens behind a button",
        words(md1) === words(reply1) && words(md1).length > 0 &&
        await page.locator(".turn.assistant").nth(0).locator(".md").isVisible() &&
        !(await t1.first().isVisible()) && await page.locator(".turn.assistant").nth(0).locator(".tokbtn").isVisible(),
        JSON.stringify(md1));
  await page.fill("#n_probs", "3"); // turn 2 also asks for the probabilities (OpenAI's logprobs in the chunks)
  await chatDone(page, await chatSend(page, "What happened next?", true));
  const c2 = chatSent[1] || { messages: [] };
  check("turn 2: the whole conversation is sent (system, user, assistant, user)",
        c2.messages.map((m) => m.role).join(",") === "system,user,assistant,user" && c2.messages[2].content === reply1,
        JSON.stringify(c2.messages));
  check("turn 2: a second assistant turn streamed", await page.locator(".turn.assistant").nth(1).locator(".tok").count() === 24);
  await page.locator(".turn.assistant").nth(1).locator(".tokbtn").click();
  await page.locator(".turn.assistant").nth(1).locator(".tok").nth(3).click();
  await page.waitForSelector("#insp .stage", { timeout: 5000 });
  const cnames = await page.locator("#insp .stage .head span:first-child").allTextContents();
  check("inspector on an assistant token lists the chain's stages", cnames[0] === "(logits)" && cnames.includes("top-k") &&
        cnames[cnames.length - 1] === "dist", JSON.stringify(cnames));
  check("  and the n_probs probabilities (3 of them)", await page.locator("#insp .stage.probs .cand").count() === 3 &&
        (chatSent[1] || {}).n_probs === 3);
  check("  with the chosen token marked", await page.locator("#insp .cand.chosen").count() >= 1 &&
        await page.locator(".turn.assistant .tok.selected").count() === 1);

  // the stop button: a long reply (n_predict -1, ignore_eos: until the slot's context is full)
  // cut short. stories260K writes it in a fraction of a second, faster than a click, so the
  // page's network is throttled (DevTools' emulation, 8 KB/s: each chunk carries its trace)
  // and the reply arrives over many seconds, as a big model's would.
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: 8000, uploadThroughput: -1 });
  await page.fill("#n_predict", "-1");
  await chatSend(page, "Go on forever.");
  const t3 = page.locator(".turn.assistant").nth(2).locator(".tok");
  await t3.nth(5).waitFor({ state: "attached", timeout: 30000 });
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
  await chatDone(page, await chatSend(page, "Weather in Paris?"), 10000);
  const tc = await page.locator(".turn.assistant .toolcall").allTextContents();
  check("tool calls: shown from the streamed deltas", tc.length === 1 && tc[0] === 'tool call call_1: get_weather({"city": "Paris"})',
        JSON.stringify(tc));
  check("tool calls: the request carried the tools", (chatSent[chatSent.length - 1].tools || []).length === 1);
  await page.unroute("**/v1/chat/completions");
  check("no page errors in the chat view", pageErrors.length === 0, pageErrors.join("; "));

  // ---- markdown: a canned streamed reply in a new conversation ----
  const convA = await page.evaluate(() => conv.id);
  await page.click("#chat-new");
  check("new chat: an empty log", await page.locator(".turn").count() === 0);
  await page.route("**/v1/chat/completions", (route) => cannedChat(route, MARKDOWN));
  await chatDone(page, await chatSend(page, "Show me some markdown."), 10000);
  await page.unroute("**/v1/chat/completions");
  const md = page.locator(".turn.assistant").last().locator(".md");
  const txt = (sel) => md.locator(sel).allTextContents();
  check("markdown: heading, bold, italic, strikethrough", JSON.stringify(await txt("h1")) === '["Plan"]' &&
        JSON.stringify(await txt("p strong")) === '["bold"]' && JSON.stringify(await txt("p em")) === '["italic"]' &&
        JSON.stringify(await txt("p s")) === '["gone"]', await md.innerHTML());
  check("markdown: inline code, its <b> shown as text", JSON.stringify(await txt("p code")) === '["inline <b>code</b>"]' &&
        await md.locator("b").count() === 0);
  check("markdown: a list with a nested list, an ordered list",
        JSON.stringify(await md.locator(":scope > ul > li").evaluateAll((els) => els.map((e) => e.firstChild.textContent.trim()))) === '["one","two"]' &&
        JSON.stringify(await txt("ul ul > li")) === '["nested"]' && JSON.stringify(await txt("ol > li")) === '["first","second"]');
  check("markdown: a fenced code block, its language kept, its text as written",
        JSON.stringify(await txt("pre > code")) === JSON.stringify(['if (a < b && c > d) console.log("<tag>");']) &&
        await md.locator("pre > code").getAttribute("data-lang") === "js");
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  await md.locator("pre .copy").click();
  await md.locator("pre .copy", { hasText: "copied" }).waitFor({ timeout: 5000 });
  check("markdown: a code block's copy button puts its code on the clipboard",
        await page.evaluate(() => navigator.clipboard.readText()) === 'if (a < b && c > d) console.log("<tag>");');
  check("markdown: a block quote and a table", JSON.stringify(await txt("blockquote > p")) === '["quoted"]' &&
        JSON.stringify(await txt("th")) === '["a","b"]' && JSON.stringify(await txt("td")) === '["1","2"]');
  const hrefs = await md.locator("a").evaluateAll((els) => els.map((e) => e.getAttribute("href")));
  check("markdown: links only for http(s) URLs", JSON.stringify(hrefs) ===
        JSON.stringify(["https://example.com/x", "https://example.com/z", "https://example.org/y", "https://example.com/pixel.png"]), JSON.stringify(hrefs));
  const mdText = await md.textContent();
  check("markdown: <script>, <img onerror> and a javascript: link shown as text, not run",
        await md.locator("script, img, iframe").count() === 0 && mdText.includes("<script>window.__pwned = 1</script>") &&
        mdText.includes('<img src=x onerror="window.__pwned = 2">') && mdText.includes("[bad](javascript:window.__pwned=3)") &&
        (await md.locator("a").nth(1).textContent()) === '<img src=y onerror="window.__pwned=4">' &&
        await page.evaluate(() => window.__pwned) === undefined, mdText);
  check("markdown: the image is not loaded, nothing fetched but from the server (the libraries inlined)",
        await md.locator("img").count() === 0 && elsewhere.length === 0 &&
        await page.evaluate(() => typeof window.markdownit === "function" && typeof window.DOMPurify.sanitize === "function"),
        JSON.stringify(elsewhere));
  check("markdown: a reply without traces has no tokens button", !(await page.locator(".turn.assistant").last().locator(".tokbtn").isVisible()));

  // ---- layout: the chat view at 1280, 420 and 360 px wide ----
  await page.screenshot({ path: join(OUT, "chat-1280.png"), fullPage: false });
  console.log(`screenshot: ${join(OUT, "chat-1280.png")}`);
  check("1280 px: controls, chat and inspector side by side", await page.locator("#controls").isVisible() &&
        await page.locator("#inspector").isVisible() && await width(page, "#chat-log") >= 500 && !(await page.locator("#menu").isVisible()));
  await page.setViewportSize({ width: 420, height: 800 });
  const w420 = await width(page, "#chat-log");
  check("420 px: the chat column is the page's width", w420 >= 380 && await noHScroll(page), `${w420} px`);
  await page.setViewportSize({ width: 360, height: 740 });
  const w360 = await width(page, "#chat-log"), wIn = await width(page, "#chat-input"), wPre = await width(page, ".md pre");
  check("360 px: the chat column at least 300 px wide, no sideways scrolling", w360 >= 300 && wIn >= 300 && wPre <= w360 &&
        await noHScroll(page), `log ${w360}, input ${wIn}, code ${wPre}`);
  check("360 px: the controls folded away behind the menu button", !(await page.locator("#controls").isVisible()) &&
        await page.locator("#menu").isVisible() && await page.locator("#send").isVisible());
  await page.screenshot({ path: join(OUT, "chat-360.png"), fullPage: true });
  console.log(`screenshot: ${join(OUT, "chat-360.png")}`);
  await page.click("#tab-completion");
  check("360 px: the completion view has its prompt and Generate on the page", await page.locator("#prompt").isVisible() &&
        await page.locator("#generate").isVisible() && await width(page, "#output") >= 300 && await noHScroll(page));
  await page.click("#tab-chat");
  await page.click("#menu");
  const drawer = await page.locator("#controls").boundingBox();
  check("360 px: the menu opens the controls (conversations, samplers) in a drawer", await page.locator("#conv-list").isVisible() &&
        await page.locator("#top_k").isVisible() && drawer.width <= 360 && await width(page, "#chat-log") === w360);
  await page.click("#controls-close");
  check("360 px: and closes it", !(await page.locator("#controls").isVisible()));
  await page.setViewportSize({ width: 1280, height: 900 });

  // ---- conversations kept in the browser ----
  const convB = await page.evaluate(() => conv.id);
  await page.reload();
  await page.waitForSelector("body[data-ready='1']", { timeout: 15000 });
  check("reload: the chat view and the conversation on screen come back", await page.locator("#chat-log").isVisible() &&
        await page.locator(".turn").count() === 2 && await page.locator(".turn.assistant .md h1").textContent() === "Plan" &&
        await page.evaluate(() => conv.id) === convB);
  check("reload: the list has both conversations, the current one marked",
        await page.locator("#conv-list li").count() === 2 && await page.locator("#conv-list li.on").getAttribute("data-id") === convB);
  await page.locator(`#conv-list li[data-id='${convA}'] .conv-open`).click();
  const kept = await page.evaluate(() => messages.map((m) => m.role + ":" + m.content));
  check("switch: the first conversation's turns, as they were said", await page.locator(".turn").count() === kept.length &&
        kept.length === 8 && kept[0] === "user:Tell me about a cat." && kept[1] === "assistant:" + reply1 &&
        (await page.locator(".turn.assistant .toolcall").allTextContents()).join() === 'tool call call_1: get_weather({"city": "Paris"})',
        JSON.stringify(kept));
  check("switch: the system prompt comes back with it", await page.inputValue("#system") === "You are a storyteller.");
  await page.fill("#n_predict", "8");
  await chatDone(page, await chatSend(page, "One more thing."));
  const c5 = chatSent[chatSent.length - 1];
  check("a kept conversation goes on: its turns are sent again",
        c5.messages.length === 10 && c5.messages[1].content === "Tell me about a cat." && c5.messages[2].content === reply1,
        JSON.stringify(c5.messages.map((m) => m.role)));
  await page.locator(`#conv-list li[data-id='${convB}'] .conv-del`).click();
  check("delete: the conversation leaves the list", await page.locator("#conv-list li").count() === 1);
  await page.reload();
  await page.waitForSelector("body[data-ready='1']", { timeout: 15000 });
  check("delete: and stays deleted after a reload", await page.locator("#conv-list li").count() === 1 &&
        await page.locator(".turn").count() === 10 && await page.evaluate(() => conv.id) === convA);
  check("no page errors with markdown and conversations", pageErrors.length === 0, pageErrors.join("; "));

  // ---- the API key: a server started with --api-key ----
  keyServer = await startServer(["--api-key", API_KEY]);
  const kbase = `http://127.0.0.1:${keyServer.port}`;   // another origin: its own localStorage
  const kp = await context.newPage();
  const kErrors = [];
  kp.on("pageerror", (e) => kErrors.push(String(e)));
  const kAuth = [];
  kp.on("request", (r) => { if (r.url().startsWith(kbase) && !r.url().endsWith("/")) kAuth.push(r.headers().authorization || ""); });
  await kp.goto(kbase + "/");
  await kp.waitForSelector("#key-panel:not([hidden])", { timeout: 15000 });
  const ask = await kp.textContent("#key-msg");
  check("api key: the page asks for the key (/props answered 401)", /401/.test(ask) && /needs an API key/.test(ask) &&
        await kp.locator("#api-key").isVisible(), ask);
  check("api key: the controls are there before the key (defaults from the page)", await kp.inputValue("#n_predict") === "128" &&
        await kp.inputValue("#top_k") === "");
  await kp.click("#generate");
  await kp.waitForFunction(() => document.querySelector("#error").textContent.length > 0, null, { timeout: 10000 });
  const e0 = await kp.textContent("#error");
  check("api key: Generate without the key says 401 and what to do, no null errors", /^401: Invalid API Key/.test(e0) &&
        /needs an API key/.test(e0) && kErrors.length === 0, e0 + " / " + kErrors.join("; "));
  await kp.fill("#api-key", "not-the-key");
  await kp.click("#key-save");
  await kp.waitForFunction(() => /refused/.test(document.querySelector("#key-msg").textContent), null, { timeout: 10000 });
  check("api key: a wrong key gets the 401 message", /^401: Invalid API Key\. The server refused this API key/.test(await kp.textContent("#key-msg")) &&
        await kp.locator("body[data-ready='1']").count() === 0, await kp.textContent("#key-msg"));
  await kp.fill("#api-key", API_KEY);
  await kp.click("#key-save");
  await kp.waitForSelector("body[data-ready='1']", { timeout: 10000 });
  check("api key: the right key is accepted (the field folds away), the controls filled from /props",
        /accepted/.test(await kp.textContent("#key-msg")) && await kp.locator("#key-panel").isHidden() && await kp.inputValue("#top_k") === "40");
  await kp.fill("#n_predict", "8");
  await kp.click("#generate");
  await kp.waitForSelector("#status[data-done='1']", { timeout: 30000 });
  check("api key: generation works, the key sent as a Bearer token", await kp.locator("#output .tok").count() === 8 &&
        kAuth[kAuth.length - 1] === "Bearer " + API_KEY && await kp.textContent("#error") === "", JSON.stringify(kAuth));
  await kp.reload();
  await kp.waitForSelector("body[data-ready='1']", { timeout: 15000 });
  check("api key: kept in the browser (a reload needs no key)", await kp.locator("#key-panel").isHidden() &&
        await kp.evaluate(() => localStorage.getItem("sift.apiKey")) === JSON.stringify(API_KEY));
  await kp.click("#key-toggle");
  await kp.fill("#api-key", "a-wrong-key");
  await kp.click("#key-save");
  await kp.waitForFunction(() => /refused/.test(document.querySelector("#key-msg").textContent), null, { timeout: 10000 });
  await kp.click("#tab-chat");
  await chatDone(kp, await chatSend(kp, "Hello?"), 10000);
  const e1 = await kp.textContent("#chat-error");
  check("api key: a chat with a wrong key shows the 401 message", /^401: Invalid API Key\. The server refused this API key/.test(e1), e1);
  check("api key: no page errors", kErrors.length === 0, kErrors.join("; "));
  check("no key sent to the server without --api-key", auths.every((a) => a === ""), JSON.stringify(auths));
} catch (e) {
  failed++;
  console.log(`FAIL  ${e.stack || e}`);
} finally {
  if (context) await context.close();
  server.proc.kill("SIGTERM");
  if (keyServer) keyServer.proc.kill("SIGTERM");
  rmSync(profile, { recursive: true, force: true });
}
console.log(`browser test: ${((Date.now() - t0) / 1e3).toFixed(1)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
