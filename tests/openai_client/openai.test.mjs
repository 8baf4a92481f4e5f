// sift serve driven by the official `openai` npm client (pinned by package-lock.json).
//
//   node openai.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
//        --template ../shared/chat-templates/templates/qwen2.5-instruct.jinja
//
// run.sh installs the client (npm ci) beside a copy of this file in the build folder and
// runs it; CTest registers it as server_openai_client (label npm). Starts `sift serve` on
// 127.0.0.1 (any free port) with a tools-capable template and checks, through the client:
// a chat, streamed and not; tool calls with tool_choice auto, required and a named function
// (stories260K's text is meaningless, but a constrained call must come back well-formed:
// its name in the tool list, its arguments JSON valid against the function's schema),
// streamed as tool-call deltas too; the tool result sent back and a final answer; n: 2;
// and a 400 for a tool_choice naming no tool; content parts; tool_choice required with
// max_tokens 120 under the Hermes, Llama 3.1 JSON, Mistral, Llama 4 JSON and gpt-oss templates
// (issue 27: calls that close); a thinking template's reasoning_content, streamed and not; the
// Responses API (client.responses.create: streamed and not, a function call, a 400). Prints each check, then
// "N passed, M failed".
import OpenAI from "openai";
import { spawn } from "node:child_process";

const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const SIFT = arg("--sift"), MODEL = arg("--model"), TEMPLATE = arg("--template");
if (!SIFT || !MODEL || !TEMPLATE) {
  console.error("usage: openai.test.mjs --sift SIFT --model MODEL --template JINJA");
  process.exit(2);
}

function startServer(template = TEMPLATE, extra = []) {
  return new Promise((resolve, reject) => {
    const p = spawn(SIFT, ["serve", "-m", MODEL, "--chat-template-file", template, "--host", "127.0.0.1", "--port", "0",
                           "-np", "2", "-c", "4096", ...extra], { stdio: ["ignore", "ignore", "pipe"] });
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
  const type = schema.type;
  if (schema.enum && !schema.enum.some((x) => JSON.stringify(x) === JSON.stringify(v))) errs.push(`${path}: not in enum`);
  if (type === "object") {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return [`${path}: not an object`];
    for (const k of schema.required ?? []) if (!(k in v)) errs.push(`${path}: missing ${k}`);
    for (const [k, x] of Object.entries(v)) {
      const ps = schema.properties?.[k];
      if (ps) errs.push(...validate(ps, x, `${path}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${path}: extra key ${k}`);
    }
  } else if (type === "integer") {
    if (!Number.isInteger(v)) errs.push(`${path}: not an integer`);
    if (schema.minimum !== undefined && v < schema.minimum) errs.push(`${path}: below minimum`);
    if (schema.maximum !== undefined && v > schema.maximum) errs.push(`${path}: above maximum`);
  } else if (type === "string") {
    if (typeof v !== "string") errs.push(`${path}: not a string`);
    else if (schema.maxLength !== undefined && [...v].length > schema.maxLength) errs.push(`${path}: too long`);
  } else if (type === "boolean") {
    if (typeof v !== "boolean") errs.push(`${path}: not a boolean`);
  }
  return errs;
}

const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city for some days.",
    parameters: { type: "object", additionalProperties: false, required: ["city", "days"], properties: {
      city: { type: "string", enum: ["Paris", "Tokyo", "Lima"] },
      days: { type: "integer", minimum: 1, maximum: 7 },
      metric: { type: "boolean" } } } } },
  { type: "function", function: { name: "get_time", description: "The time in a time zone.",
    parameters: { type: "object", additionalProperties: false, required: ["zone"], properties: {
      zone: { type: "string", maxLength: 6 } } } } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

// A call is well-formed: an id, type function, a known name, arguments valid JSON and valid
// against the function's schema. Returns the problems.
function callProblems(c) {
  const p = [];
  if (typeof c.id !== "string" || !c.id) p.push("no id");
  if (c.type !== "function") p.push(`type ${c.type}`);
  const schema = schemaOf[c.function?.name];
  if (!schema) return [...p, `unknown function ${c.function?.name}`];
  let args;
  try { args = JSON.parse(c.function.arguments); } catch (e) { return [...p, `arguments not JSON: ${c.function.arguments}`]; }
  return [...p, ...validate(schema, args)];
}

const t0 = Date.now();
const server = await startServer();
const client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 60000 });
const model = "stories260K";
const user = [{ role: "system", content: "You are a helpful assistant." },
              { role: "user", content: "What is the weather in Paris for the next three days?" }];
try {
  // 1. a chat, not streamed and streamed
  {
    const r = await client.chat.completions.create({ model, messages: user, max_tokens: 24, seed: 1 });
    const ch = r.choices[0];
    check("chat: one choice, assistant message with text", r.choices.length === 1 && ch.message.role === "assistant" &&
          typeof ch.message.content === "string" && ch.message.content.length > 0, JSON.stringify(r));
    check("chat: finish_reason stop or length, usage", ["stop", "length"].includes(ch.finish_reason) &&
          r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0, JSON.stringify(r));
    const stream = await client.chat.completions.create({ model, messages: user, max_tokens: 24, seed: 1, stream: true,
                                                          stream_options: { include_usage: true } });
    let text = "", roles = 0, finish = null, usage = null, chunks = 0;
    for await (const c of stream) {
      chunks++;
      if (c.usage) usage = c.usage;
      const x = c.choices[0];
      if (!x) continue;
      if (x.delta.role) roles++;
      if (x.delta.content) text += x.delta.content;
      if (x.finish_reason) finish = x.finish_reason;
    }
    check("chat stream: role once, text, finish_reason, usage", roles === 1 && text.length > 0 && finish !== null &&
          usage?.completion_tokens > 0, `roles ${roles} text ${JSON.stringify(text)} finish ${finish} chunks ${chunks}`);
    check("chat stream: the same text as not streamed (same seed)", text === ch.message.content,
          `${JSON.stringify(text)} vs ${JSON.stringify(ch.message.content)}`);
  }

  // 2. tool_choice auto: free to answer or call; whatever comes must be well-formed
  {
    const r = await client.chat.completions.create({ model, messages: user, tools, tool_choice: "auto", max_tokens: 48, seed: 2 });
    const ch = r.choices[0];
    const calls = ch.message.tool_calls ?? [];
    const ok = calls.length ? ch.finish_reason === "tool_calls" && calls.every((c) => callProblems(c).length === 0)
                            : typeof ch.message.content === "string" && ["stop", "length"].includes(ch.finish_reason);
    check(`tool_choice auto: well-formed (${calls.length ? calls.length + " call(s)" : "an answer"})`, ok, JSON.stringify(r));
  }

  // 3. tool_choice required: a constrained call, well-formed
  let firstCall = null;
  {
    const r = await client.chat.completions.create({ model, messages: user, tools, tool_choice: "required", max_tokens: 200, seed: 3 });
    const ch = r.choices[0];
    const calls = ch.message.tool_calls ?? [];
    check("tool_choice required: finish_reason tool_calls, one call", ch.finish_reason === "tool_calls" && calls.length === 1,
          JSON.stringify(r));
    const probs = calls.flatMap(callProblems);
    check("tool_choice required: name in the tools, arguments valid against its schema", calls.length && !probs.length,
          probs.join("; ") + " " + JSON.stringify(calls));
    console.log("      call:", JSON.stringify(calls[0]));
    firstCall = calls[0];
  }

  // 4. the same, streamed: tool-call deltas (head with id, type, name, arguments ""; then arguments)
  {
    const stream = await client.chat.completions.create({ model, messages: user, tools, tool_choice: "required", max_tokens: 200,
                                                          seed: 3, stream: true });
    const acc = [];
    let finish = null, head = null, fragments = 0;
    for await (const c of stream) {
      const x = c.choices[0];
      if (!x) continue;
      for (const d of x.delta.tool_calls ?? []) {
        if (!acc[d.index]) { acc[d.index] = { id: d.id, type: d.type, function: { name: d.function?.name, arguments: "" } }; head ??= d; }
        if (d.function?.arguments) fragments++;
        acc[d.index].function.arguments += d.function?.arguments ?? "";
      }
      if (x.finish_reason) finish = x.finish_reason;
    }
    check("stream tool_choice required: the first delta has index, id, type, name, arguments \"\"",
          head && head.index === 0 && head.id && head.type === "function" && head.function?.name && head.function?.arguments === "",
          JSON.stringify(head));
    const probs = acc.flatMap(callProblems);
    check("stream tool_choice required: finish_reason tool_calls, calls well-formed", finish === "tool_calls" && acc.length === 1 &&
          !probs.length, `${finish} ${probs.join("; ")} ${JSON.stringify(acc)}`);
    check(`stream tool_choice required: the arguments in fragments as they come (${fragments})`, fragments > 1, "");
    check("stream tool_choice required: the same call as not streamed (same seed)", acc[0]?.function.name === firstCall?.function.name &&
          acc[0]?.function.arguments === firstCall?.function.arguments, JSON.stringify([acc[0], firstCall]));
  }

  // 5. a named function
  {
    const r = await client.chat.completions.create({ model, messages: user, tools, max_tokens: 200, seed: 4,
                                                     tool_choice: { type: "function", function: { name: "get_time" } } });
    const calls = r.choices[0].message.tool_calls ?? [];
    const probs = calls.flatMap(callProblems);
    check("named function: one call to get_time, well-formed", r.choices[0].finish_reason === "tool_calls" && calls.length === 1 &&
          calls[0].function.name === "get_time" && !probs.length, probs.join("; ") + " " + JSON.stringify(r));
  }

  // 6. parallel_tool_calls with required: one or more calls, all well-formed
  {
    const r = await client.chat.completions.create({ model, messages: user, tools, tool_choice: "required", parallel_tool_calls: true,
                                                     max_tokens: 300, seed: 5 });
    const calls = r.choices[0].message.tool_calls ?? [];
    const probs = calls.flatMap(callProblems);
    const ids = new Set(calls.map((c) => c.id));
    // (the model may go on calling until max_tokens: then finish_reason is "length", the complete calls stand)
    check(`parallel_tool_calls: ${calls.length} call(s), well-formed, distinct ids`,
          ["tool_calls", "length"].includes(r.choices[0].finish_reason) &&
          calls.length >= 1 && !probs.length && ids.size === calls.length, probs.join("; ") + " " + JSON.stringify(r));
  }

  // 7. the tool result sent back, then a final answer
  if (firstCall) {
    const messages = [...user,
      { role: "assistant", content: null, tool_calls: [firstCall] },
      { role: "tool", tool_call_id: firstCall.id, content: JSON.stringify({ temperature: 18, sky: "cloudy" }) }];
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 32, seed: 6 });
    const ch = r.choices[0];
    const calls = ch.message.tool_calls ?? [];
    const ok = calls.length ? calls.every((c) => callProblems(c).length === 0)
                            : typeof ch.message.content === "string" && ch.message.content.length > 0;
    check("tool result back: a final answer (or well-formed calls)", ok, JSON.stringify(r));
    check("tool result back: the call and its result were in the prompt", r.usage.prompt_tokens > 0, JSON.stringify(r.usage));
    const plain = await client.chat.completions.create({ model, messages: user, tools, max_tokens: 1, seed: 6 });
    check("tool result back: the prompt grew by the call and the result", r.usage.prompt_tokens > plain.usage.prompt_tokens + 20,
          `${r.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
    const r2 = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", max_tokens: 16, seed: 6 });
    check("tool result back, tool_choice none: an answer, no calls", !r2.choices[0].message.tool_calls?.length &&
          typeof r2.choices[0].message.content === "string", JSON.stringify(r2));
  }

  // 8. bad requests are 400s the client reports
  {
    let status = 0, msg = "";
    try {
      await client.chat.completions.create({ model, messages: user, tools, tool_choice: { type: "function", function: { name: "nope" } } });
    } catch (e) { status = e.status; msg = e.message; }
    check("tool_choice naming no tool: 400 with a message", status === 400 && /nope/.test(msg), `${status} ${msg}`);
  }

  // 9. n: 2 (two choices)
  {
    let r = null, err = "";
    try { r = await client.chat.completions.create({ model, messages: user, max_tokens: 16, n: 2, seed: 7 }); }
    catch (e) { err = `${e.status} ${e.message}`; }
    check("n: 2 gives two choices, indexes 0 and 1", r && r.choices.length === 2 &&
          r.choices.map((c) => c.index).sort().join() === "0,1", err || JSON.stringify(r));
  }

  // 10. content parts (issue 27): text parts flattened as llama-server does (the same prompt
  // as the joined string), an image part a 400 the client reports
  {
    const parts = [{ type: "text", text: "What is the weather" }, { type: "text", text: "in Paris?" }];
    const a = await client.chat.completions.create({ model, messages: [{ role: "user", content: parts }], max_tokens: 4, seed: 8 });
    const b = await client.chat.completions.create({ model, messages: [{ role: "user", content: "What is the weather\nin Paris?" }],
                                                     max_tokens: 4, seed: 8 });
    check("content parts: the same prompt and reply as the newline-joined string",
          a.usage.prompt_tokens === b.usage.prompt_tokens && a.choices[0].message.content === b.choices[0].message.content,
          JSON.stringify([a.usage, b.usage]));
    let status = 0, msg = "";
    try {
      await client.chat.completions.create({ model, max_tokens: 4, messages: [{ role: "user", content: [parts[0],
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }] });
    } catch (e) { status = e.status; msg = e.message; }
    check("content parts: an image part is a 400 naming it", status === 400 && /content\[1\].*image/.test(msg), `${status} ${msg}`);
  }

  // 11. calls that close (issue 27): tool_choice required, max_tokens 120, a free-form string
  // argument, under each format's template (Hermes, Llama 3.1 JSON, Mistral): the call must
  // end within the budget (finish_reason tool_calls), its arguments parse and fit the schema
  {
    const dir = TEMPLATE.replace(/[^/]*$/, "");
    const free = [{ type: "function", function: { name: "get_weather", description: "The weather in a city.",
      parameters: { type: "object", required: ["city", "days"], properties: { city: { type: "string" }, days: { type: "integer" } } } } }];
    schemaOf.get_weather_free = free[0].function.parameters;
    // 3 seeds under template t (server flags extra): each reply must be one call that closes
    // within max_tokens and fits the schema (and, with thinking, has reasoning_content)
    const closes = async (t, extra, maxTokens, label, thinking = false) => {
      const srv = await startServer(t.startsWith("/") ? t : dir + t, extra);
      const cl = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 60000 });
      try {
        let good = 0;
        const bad = [];
        for (const seed of [1, 2, 3]) {
          const r = await cl.chat.completions.create({ model, messages: [{ role: "user", content: "What is the weather in Paris?" }],
                                                       tools: free, tool_choice: "required", max_tokens: maxTokens, seed });
          const ch = r.choices[0], calls = ch.message.tool_calls ?? [];
          const probs = calls.flatMap((c) => callProblems({ ...c, function: { ...c.function, name: "get_weather_free" } }));
          if (ch.finish_reason === "tool_calls" && calls.length === 1 && calls[0].function.name === "get_weather" && !probs.length &&
              (!thinking || ch.message.reasoning_content)) good++;
          else bad.push(JSON.stringify(ch));
        }
        check(`${label}: 3 of 3 calls close, arguments fit the schema`, good === 3, bad.join(" "));
      } finally { srv.proc.kill("SIGTERM"); }
    };
    for (const t of ["vllm-tool_chat_template_hermes.jinja", "vllm-tool_chat_template_llama3.1_json.jinja",
                     "vllm-tool_chat_template_mistral.jinja"])
      await closes(t, [], 120, `${t}, tool_choice required, max_tokens 120`);
    // Llama 4's JSON template (sift's own, tests/data/templates: Llama 4's markup, vLLM's llama4_json
    // call format): Llama 3.x's {"name", "parameters"} object, no longer the generic format
    const src = process.env.SIFT_SOURCE_DIR;
    if (src) await closes(`${src}/tests/data/templates/llama4-json-tools.jinja`, [], 120,
                          "Llama 4 JSON template, tool_choice required, max_tokens 120");
    // gpt-oss's harmony: "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}"
    // (its prompt is long: this server's slots hold 2048 tokens)
    await closes("../../llama-server-tests/models/templates/openai-gpt-oss-120b.jinja", [], 120,
                 "gpt-oss template (harmony), tool_choice required, max_tokens 120");
    // a new format: Functionary v3.1's <function=NAME>{...}</function> (llama.cpp's copy of the template)
    await closes("../../llama-server-tests/models/templates/meetkai-functionary-medium-v3.1.jinja", [], 120,
                 "Functionary v3.1 template, tool_choice required, max_tokens 120");
    // a new format: DeepSeek R1's native calls, after a thought cut by --reasoning-budget 8.
    // (max_tokens 300: the markup alone, "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>...```json ...
    // ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", is about 100 of stories260K's byte-sized tokens)
    await closes("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ["--reasoning-budget", "8"], 300,
                 "DeepSeek R1 template (native calls), thinking then tool_choice required, max_tokens 300", true);
  }

  // 12. a thinking template (DeepSeek R1's, which opens <think> in the prompt) with
  // --reasoning-budget 6: reasoning_content apart from the content (the client passes the
  // extra field through), streamed as reasoning_content deltas that add up to the same, and a
  // json_schema'd answer after the thinking
  {
    const dir = TEMPLATE.replace(/[^/]*$/, "");
    const srv = await startServer(dir + "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ["--reasoning-budget", "6"]);
    const cl = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 60000 });
    try {
      const body = { model, messages: [{ role: "user", content: "Hi" }], max_tokens: 60, seed: 1,
                     response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "object",
                       properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: false } } } };
      const r = await cl.chat.completions.create(body);
      const m = r.choices[0].message;
      let parsed = null;
      try { parsed = JSON.parse(m.content); } catch (e) { /* reported below */ }
      check("thinking template: reasoning_content apart, the content the schema's JSON after it",
            typeof m.reasoning_content === "string" && m.reasoning_content.length > 0 && Number.isInteger(parsed?.a) &&
            r.choices[0].finish_reason === "stop", JSON.stringify(r.choices[0]));
      const stream = await cl.chat.completions.create({ ...body, stream: true });
      let rs = "", ct = "", nr = 0;
      for await (const c of stream) {
        const d = c.choices[0]?.delta ?? {};
        if (d.reasoning_content) { rs += d.reasoning_content; nr++; }
        if (d.content) ct += d.content;
      }
      check(`thinking template, streamed: reasoning_content deltas (${nr}) and content add up to the same`,
            nr > 1 && rs === m.reasoning_content && ct === m.content, JSON.stringify([rs, ct, m]));
      // the same through /v1/responses: a reasoning item, then the message; text.format as response_format
      const rr = await cl.responses.create({ model, input: "Hi", max_output_tokens: 60, seed: 1,
        text: { format: { type: "json_schema", name: "a", schema: body.response_format.json_schema.schema } } });
      check("thinking template, responses: a reasoning item (content and summary) with the same text, then the same answer",
            rr.output[0]?.type === "reasoning" && rr.output[0].content[0]?.text === m.reasoning_content &&
            rr.output[0].summary[0]?.text === m.reasoning_content && rr.output[1]?.type === "message" && rr.output_text === m.content,
            JSON.stringify(rr.output));
    } finally { srv.proc.kill("SIGTERM"); }
  }

  // 13. the Responses API (POST /v1/responses, responses.c) through client.responses.create:
  // a reply not streamed and streamed (the events in order, sequence numbers 0..n-1, the
  // deltas adding up to the same text), under the Hermes template a function call with
  // tool_choice required (flat function tools), streamed as argument deltas, its output sent
  // back as input items, and the 400s a stateless server gives
  {
    const input = "What is the weather in Paris for the next three days?";
    const instructions = "You are a helpful assistant.";
    const r = await client.responses.create({ model, input, instructions, max_output_tokens: 24, seed: 1 });
    const msg = r.output.find((o) => o.type === "message");
    check("responses: a response object, a message item with output_text, usage",
          r.object === "response" && /^resp_/.test(r.id) && ["completed", "incomplete"].includes(r.status) &&
          msg?.role === "assistant" && msg.content[0]?.type === "output_text" && r.output_text.length > 0 &&
          r.usage.output_tokens > 0 && r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens, JSON.stringify(r));
    check("responses: status incomplete (max_output_tokens) exactly when the limit ended it",
          (r.status === "incomplete") === (r.usage.output_tokens === 24) &&
          (r.status !== "incomplete" || r.incomplete_details?.reason === "max_output_tokens"), JSON.stringify(r));
    const chat = await client.chat.completions.create({ model, messages: user, max_tokens: 24, seed: 1 });
    check("responses: instructions + input are the chat's system + user (same prompt, same text)",
          r.usage.input_tokens === chat.usage.prompt_tokens && r.output_text === chat.choices[0].message.content,
          JSON.stringify([r.usage, chat.usage, r.output_text]));
    const stream = await client.responses.create({ model, input, instructions, max_output_tokens: 24, seed: 1, stream: true });
    const events = [];
    for await (const ev of stream) events.push(ev);
    const types = events.map((ev) => ev.type);
    const deltas = events.filter((ev) => ev.type === "response.output_text.delta").map((ev) => ev.delta).join("");
    const last = events.at(-1);
    check("responses stream: created, in_progress, item added, part added, deltas, text done, part done, item done, completed",
          types[0] === "response.created" && types[1] === "response.in_progress" && types[2] === "response.output_item.added" &&
          types[3] === "response.content_part.added" && types.at(-4) === "response.output_text.done" &&
          types.at(-3) === "response.content_part.done" && types.at(-2) === "response.output_item.done" &&
          ["response.completed", "response.incomplete"].includes(types.at(-1)), types.join(" "));
    check("responses stream: sequence_number 0, 1, 2, ...", events.every((ev, i) => ev.sequence_number === i),
          events.map((ev) => ev.sequence_number).join());
    check("responses stream: the deltas add up to the text, the same as not streamed", deltas === r.output_text &&
          events.at(-4).text === deltas && last.response.output[0].content[0].text === deltas && last.response.usage.output_tokens > 0,
          JSON.stringify([deltas, r.output_text]));

    const dir = TEMPLATE.replace(/[^/]*$/, "");
    const srv = await startServer(dir + "vllm-tool_chat_template_hermes.jinja");
    const cl = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 60000 });
    try {
      const flat = tools.map((t) => ({ type: "function", ...t.function }));
      const body = { model, input, tools: flat, tool_choice: "required", max_output_tokens: 200, seed: 3 };
      const t1 = await cl.responses.create(body);
      const calls = t1.output.filter((o) => o.type === "function_call");
      const probs = calls.flatMap((c) => callProblems({ id: c.call_id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      check("responses tool_choice required (Hermes): one function_call item, call_id, name in the tools, arguments valid",
            t1.status === "completed" && calls.length === 1 && !probs.length && /^fc_/.test(calls[0].id), JSON.stringify(t1) + probs.join());
      const ts = await cl.responses.create({ ...body, stream: true });
      let args = "", nargs = 0, done = null, added = null;
      for await (const ev of ts) {
        if (ev.type === "response.output_item.added" && ev.item.type === "function_call") added = ev.item;
        if (ev.type === "response.function_call_arguments.delta") { args += ev.delta; nargs++; }
        if (ev.type === "response.function_call_arguments.done") done = ev;
      }
      check(`responses stream tool call: the item added with its name, arguments in deltas (${nargs}), done, the same call`,
            added?.name === calls[0]?.name && typeof added?.call_id === "string" && added.call_id.length > 0 && nargs > 1 &&
            args === done?.arguments && args === calls[0]?.arguments && done?.name === calls[0]?.name, JSON.stringify([added, done, args]));
      const back = await cl.responses.create({ model, tools: flat, tool_choice: "none", max_output_tokens: 16, seed: 6,
        input: [{ role: "user", content: input }, { type: "function_call", call_id: calls[0]?.call_id ?? "c1", name: calls[0]?.name ?? "get_time",
                  arguments: calls[0]?.arguments ?? "{}" },
                { type: "function_call_output", call_id: calls[0]?.call_id ?? "c1", output: "Sunny, 21 C." }] });
      check("responses: the call and its output sent back as items, tool_choice none: a message, no calls",
            back.output.every((o) => o.type !== "function_call") && back.output.some((o) => o.type === "message") &&
            back.usage.input_tokens > t1.usage.input_tokens, JSON.stringify(back));
    } finally { srv.proc.kill("SIGTERM"); }

    for (const [label, extra, re] of [["previous_response_id", { previous_response_id: "resp_abc" }, /previous_response_id.*stateless/],
                                       ["a function tool_choice naming no tool", { tools: [{ type: "function", name: "f", parameters: {} }],
                                         tool_choice: { type: "function", name: "nope" } }, /nope/],
                                       ["an input_image part", { input: [{ role: "user", content: [{ type: "input_image", image_url: "data:," }] }] },
                                        /input\[0\]\.content\[0\].*input_image/]]) {
      let status = 0, m = "";
      try { await client.responses.create({ model, input, max_output_tokens: 4, ...extra }); }
      catch (e) { status = e.status; m = e.message; }
      check(`responses: ${label} is a 400 the client reports`, status === 400 && re.test(m), `${status} ${m}`);
    }
  }
} catch (e) {
  failed++;
  console.log(`FAIL  unexpected error: ${e.stack || e}`);
} finally {
  server.proc.kill("SIGTERM");
}
console.log(`${passed} passed, ${failed} failed (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
process.exit(failed ? 1 : 0);
