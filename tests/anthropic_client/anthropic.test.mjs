// sift serve's /v1/messages driven by the official Anthropic client, `@anthropic-ai/sdk`
// (pinned by package-lock.json).
//
//   node anthropic.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
//        --template ../shared/chat-templates/templates/qwen2.5-instruct.jinja
//
// run.sh installs the client (npm ci) beside a copy of this file in the build folder and runs
// it; CTest registers it as server_anthropic_client (label npm). Starts `sift serve` on
// 127.0.0.1 (any free port) with a tools-capable template and checks, through the client:
// a message, not streamed and streamed (raw events and the client's own accumulation: the
// same text for the same seed); count_tokens; tools with tool_choice any, tool and auto
// (stories260K's text is meaningless, but a constrained call must come back well-formed: a
// tool_use block whose name is one of the tools and whose input fits its schema), streamed as
// input_json_delta pieces; the tool_result sent back and an answer; stop_sequences; and a 400
// that the client raises as its BadRequestError. Prints each check, then "N passed, M failed".
import Anthropic from "@anthropic-ai/sdk";
import { spawn } from "node:child_process";

const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const SIFT = arg("--sift"), MODEL = arg("--model"), TEMPLATE = arg("--template");
if (!SIFT || !MODEL || !TEMPLATE) {
  console.error("usage: anthropic.test.mjs --sift SIFT --model MODEL --template JINJA");
  process.exit(2);
}

function startServer() {
  return new Promise((resolve, reject) => {
    const p = spawn(SIFT, ["serve", "-m", MODEL, "--chat-template-file", TEMPLATE, "--host", "127.0.0.1", "--port", "0",
                           "-np", "2", "-c", "4096"], { stdio: ["ignore", "ignore", "pipe"] });
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

// The subset of JSON Schema the test's tools use.
function validate(schema, v, path = "$") {
  const errs = [];
  if (schema.enum && !schema.enum.some((x) => JSON.stringify(x) === JSON.stringify(v))) errs.push(`${path}: not in enum`);
  if (schema.type === "object") {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return [`${path}: not an object`];
    for (const k of schema.required ?? []) if (!(k in v)) errs.push(`${path}: missing ${k}`);
    for (const [k, x] of Object.entries(v)) {
      const ps = schema.properties?.[k];
      if (ps) errs.push(...validate(ps, x, `${path}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${path}: extra key ${k}`);
    }
  } else if (schema.type === "integer") {
    if (!Number.isInteger(v)) errs.push(`${path}: not an integer`);
    if (schema.minimum !== undefined && v < schema.minimum) errs.push(`${path}: below minimum`);
    if (schema.maximum !== undefined && v > schema.maximum) errs.push(`${path}: above maximum`);
  } else if (schema.type === "string") {
    if (typeof v !== "string") errs.push(`${path}: not a string`);
    else if (schema.maxLength !== undefined && [...v].length > schema.maxLength) errs.push(`${path}: too long`);
  }
  return errs;
}

const tools = [
  { name: "get_weather", description: "The weather in a city for some days.",
    input_schema: { type: "object", additionalProperties: false, required: ["city", "days"], properties: {
      city: { type: "string", enum: ["Paris", "Tokyo", "Lima"] },
      days: { type: "integer", minimum: 1, maximum: 7 } } } },
  { name: "get_time", description: "The time in a time zone.",
    input_schema: { type: "object", additionalProperties: false, required: ["zone"], properties: {
      zone: { type: "string", maxLength: 6 } } } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.name, t.input_schema]));

// A tool_use block is well-formed: an id, a known name, an input valid against its schema.
function useProblems(b) {
  const p = [];
  if (typeof b.id !== "string" || !b.id) p.push("no id");
  const schema = schemaOf[b.name];
  if (!schema) return [...p, `unknown tool ${b.name}`];
  return [...p, ...validate(schema, b.input)];
}

const server = await startServer();
const client = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}`, apiKey: "none", maxRetries: 0, timeout: 60000 });
const model = "stories260K";
const system = "You are a helpful assistant.";
const user = [{ role: "user", content: "What is the weather in Paris for the next three days?" }];
try {
  // 1. a message, not streamed and streamed
  let text0 = "";
  {
    const r = await client.messages.create({ model, system, messages: user, max_tokens: 24, temperature: 0.8, top_k: 40, seed: 11 });
    text0 = r.content[0]?.text ?? "";
    check("message: type message, role assistant, one text block", r.type === "message" && r.role === "assistant" &&
          r.content.length === 1 && r.content[0].type === "text" && text0.length > 0, JSON.stringify(r));
    check("message: stop_reason, usage", ["end_turn", "max_tokens"].includes(r.stop_reason) && r.usage.output_tokens > 0 &&
          r.usage.input_tokens > 0, JSON.stringify(r));
    const n = await client.messages.countTokens({ model, system, messages: user });
    check("count_tokens: the prompt the message read", n.input_tokens === r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0),
          `${JSON.stringify(n)} vs ${JSON.stringify(r.usage)}`);
  }
  {
    const body = { model, system, messages: user, max_tokens: 24, seed: 7 };
    const r = await client.messages.create(body);
    const types = [];
    let text = "", stop = null;
    for await (const ev of await client.messages.create({ ...body, stream: true })) {
      types.push(ev.type);
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
      if (ev.type === "message_delta") stop = ev.delta.stop_reason;
    }
    check("stream: message_start, block start, deltas, block stop, message_delta, message_stop",
          types[0] === "message_start" && types[1] === "content_block_start" &&
          types.slice(-3).join() === "content_block_stop,message_delta,message_stop", types.join());
    check("stream: the same text and stop_reason as not streamed (same seed)", text === r.content[0].text && stop === r.stop_reason,
          `${JSON.stringify(text)} vs ${JSON.stringify(r.content[0].text)}`);
    const final = await client.messages.stream(body).finalMessage();
    check("stream helper: finalMessage() accumulates the same message", final.content[0]?.text === r.content[0].text &&
          final.stop_reason === r.stop_reason && final.usage.output_tokens === r.usage.output_tokens, JSON.stringify(final));
  }

  // 2. tool_choice any: a constrained call, well-formed
  let firstUse = null;
  {
    const r = await client.messages.create({ model, system, messages: user, tools, tool_choice: { type: "any" }, max_tokens: 200, seed: 3 });
    const uses = r.content.filter((b) => b.type === "tool_use");
    const probs = uses.flatMap(useProblems);
    check("tool_choice any: stop_reason tool_use, a well-formed tool_use block", r.stop_reason === "tool_use" && uses.length >= 1 &&
          !probs.length, probs.join("; ") + " " + JSON.stringify(r));
    console.log("      tool_use:", JSON.stringify(uses[0]));
    firstUse = uses[0];
  }

  // 3. the same, streamed: a tool_use block start (id, name), input_json_delta pieces
  {
    const stream = client.messages.stream({ model, system, messages: user, tools, tool_choice: { type: "any" }, max_tokens: 200, seed: 3 });
    let pieces = 0;
    stream.on("inputJson", () => pieces++);
    const final = await stream.finalMessage();
    const uses = final.content.filter((b) => b.type === "tool_use");
    check(`stream tool_choice any: the input in pieces (${pieces}), accumulated to the same call`, pieces > 1 && uses.length >= 1 &&
          uses[0].name === firstUse?.name && JSON.stringify(uses[0].input) === JSON.stringify(firstUse?.input) &&
          final.stop_reason === "tool_use", JSON.stringify(final));
  }

  // 4. a named tool
  {
    const r = await client.messages.create({ model, system, messages: user, tools, tool_choice: { type: "tool", name: "get_time" },
                                             max_tokens: 200, seed: 4 });
    const uses = r.content.filter((b) => b.type === "tool_use");
    const probs = uses.flatMap(useProblems);
    check("tool_choice tool: a call to get_time, well-formed", uses.length >= 1 && uses.every((b) => b.name === "get_time") && !probs.length,
          probs.join("; ") + " " + JSON.stringify(r));
  }

  // 5. tool_choice auto: free to answer or call; whatever comes must be well-formed
  {
    const r = await client.messages.create({ model, system, messages: user, tools, max_tokens: 48, seed: 2 });
    const uses = r.content.filter((b) => b.type === "tool_use");
    const ok = uses.length ? r.stop_reason === "tool_use" && uses.every((b) => useProblems(b).length === 0)
                           : r.content[0]?.type === "text" && ["end_turn", "max_tokens"].includes(r.stop_reason);
    check(`tool_choice auto: well-formed (${uses.length ? uses.length + " call(s)" : "an answer"})`, ok, JSON.stringify(r));
  }

  // 6. the tool result back, then an answer
  {
    const messages = [...user, { role: "assistant", content: [firstUse] },
                      { role: "user", content: [{ type: "tool_result", tool_use_id: firstUse.id, content: "Sunny, 25 C." }] }];
    const r = await client.messages.create({ model, system, messages, tools, max_tokens: 24, seed: 6 });
    check("tool_result: an answer", r.type === "message" && r.content.length > 0, JSON.stringify(r));
    const n = await client.messages.countTokens({ model, system, messages, tools });
    const n0 = await client.messages.countTokens({ model, system, messages: user, tools });
    check("count_tokens: the call and its result are in the prompt", n.input_tokens > n0.input_tokens, `${n.input_tokens} vs ${n0.input_tokens}`);
  }

  // 7. stop_sequences: a word of the reply ends it
  {
    const word = text0.split(/\s+/).filter(Boolean)[1];
    const r = await client.messages.create({ model, system, messages: user, max_tokens: 24, temperature: 0.8, top_k: 40, seed: 11,
                                             stop_sequences: [word] });
    check("stop_sequences: stop_reason stop_sequence with the string", !word || (r.stop_reason === "stop_sequence" &&
          r.stop_sequence === word), `${word} ${JSON.stringify(r)}`);
  }

  // 8. a malformed request: the client's BadRequestError with the server's message
  {
    let err = null;
    try {
      await client.messages.create({ model, messages: [{ role: "user", content: [{ type: "text", text: 3 }] }], max_tokens: 4 });
    } catch (e) { err = e; }
    check("400: BadRequestError, invalid_request_error naming the field", err instanceof Anthropic.BadRequestError &&
          err.error?.error?.type === "invalid_request_error" && /content\[0\]\.text/.test(err.error?.error?.message ?? ""),
          String(err) + " " + JSON.stringify(err?.error));
  }
} catch (e) {
  failed++;
  console.log("FAIL  unexpected error:", e);
} finally {
  server.proc.kill("SIGTERM");
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
