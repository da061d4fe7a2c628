// Tool calls through real model families' chat templates, with the openai
// client: for each template (from ../shared/chat/), a synth model whose
// GGUF carries it (`minfer synth --chat-template`) is served without any
// template flag; tool_choice "required" (whole) and a named function
// (streamed) make the grammar force a valid call in the family's own
// format, which comes back as tool_calls; then the call and the tool's
// result go back (role: tool), render in the family's form, and a reply
// comes. openai.test.mjs covers the same API on a hand-written template.
// argv: minfer, shared dir.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, needModules, startServer, stopServer } from "./common.mjs";

needModules("openai");
const { default: OpenAI } = await import("openai");
const [minfer, shared] = process.argv.slice(2);

// the family, its template, how the tool turn must render (a call's
// arguments as an object, not a quoted string; the result in the family's
// wrapper; @ID stands for the call's id)
const FAMILIES = [
  { name: "qwen2.5", file: "Qwen-Qwen2.5-7B-Instruct.jinja",
    call: '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>',
    result: "<tool_response>\n13:05\n</tool_response>" },
  { name: "llama-3.1", file: "meta-llama-Llama-3.1-8B-Instruct.jinja",
    call: '{"name": "get_time", "parameters": {"zone": "CET"}}', result: "<|start_header_id|>ipython<|end_header_id|>\n\n\"13:05\"" },
  { name: "hermes-3", file: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    call: '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>',
    result: "<tool_response>\n13:05\n</tool_response>" },
  { name: "mistral-small-3.2", file: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    call: '[TOOL_CALLS]get_time[CALL_ID]@ID[ARGS]{"zone": "CET"}', result: "[TOOL_RESULTS]@ID[TOOL_CONTENT]13:05[/TOOL_RESULTS]",
    id: /^[A-Za-z0-9]{9}$/ }, // its template refuses other ids
];

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["C", "F"] } },
                  required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "get_time", description: "The time in a zone",
    parameters: { type: "object", properties: { zone: { type: "string", pattern: "^[A-Z]{3}$" } },
                  required: ["zone"], additionalProperties: false } } },
];
const user = [{ role: "user", content: "What is the weather in Paris, and the time?" }];

async function family(f, dir) {
  const model = join(dir, f.name + ".gguf");
  execFileSync(minfer, ["synth", "--preset", "tiny-qwen2", "--type", "Q8_0", "--chat-template",
                        join(shared, "chat/templates", f.file), "-o", model], { stdio: "ignore" });
  const srv = await startServer(minfer, model);
  try {
    const client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "x", maxRetries: 0 });
    // whole: "required" lets the model pick either tool, with valid arguments
    const r = await client.chat.completions.create({ model: "m", messages: user, tools, tool_choice: "required",
                                                     temperature: 1, seed: 7, max_tokens: 300 });
    const ch = r.choices[0], call = ch.message.tool_calls && ch.message.tool_calls[0];
    check(ch.finish_reason === "tool_calls" && call && ch.message.content === null, `${f.name} whole: ${JSON.stringify(ch)}`);
    check(call.type === "function" && typeof call.id === "string" && call.id.length > 0, `${f.name} call: ${JSON.stringify(call)}`);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === "get_weather")
      check(typeof args.city === "string" && args.city.length <= 12 && ["C", "F"].includes(args.unit) &&
            Object.keys(args).length === 2, `${f.name} weather arguments: ${call.function.arguments}`);
    else check(call.function.name === "get_time" && /^[A-Z]{3}$/.test(args.zone), `${f.name} call: ${JSON.stringify(call)}`);

    // streamed: a named function forces that one
    const stream = await client.chat.completions.create({ model: "m", messages: user, tools, temperature: 1, seed: 8,
      tool_choice: { type: "function", function: { name: "get_time" } }, max_tokens: 300, stream: true });
    let name = "", sargs = "", finish = null, id = null;
    for await (const c of stream)
      for (const d of c.choices) {
        for (const tc of d.delta.tool_calls || []) {
          check(tc.index === 0, `${f.name}: one call expected, delta ${JSON.stringify(tc)}`);
          id = tc.id || id;
          name += (tc.function && tc.function.name) || "";
          sargs += (tc.function && tc.function.arguments) || "";
        }
        finish = d.finish_reason || finish;
      }
    check(name === "get_time" && finish === "tool_calls" && id && id === call.id && (!f.id || f.id.test(id)),
          `${f.name} streamed: ${name} ${sargs} ${finish} ${id} (whole: ${call.id})`);
    check(/^[A-Z]{3}$/.test(JSON.parse(sargs).zone), `${f.name} streamed arguments: ${sargs}`);

    // the call (with the id the server gave) and its result go back; the
    // template renders them its way
    const turn = [...user, { role: "assistant", content: null, tool_calls: [{ id, type: "function",
                   function: { name: "get_time", arguments: '{"zone":"CET"}' } }] },
                  { role: "tool", tool_call_id: id, content: "13:05" }];
    const tp = await (await fetch(srv.url + "/apply-template", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tools, messages: turn }) })).json();
    const want = [f.call.replace("@ID", id), f.result.replace("@ID", id)];
    check(tp.prompt && want.every((w) => tp.prompt.includes(w)),
          `${f.name} tool turn lacks ${JSON.stringify(want)}: ${JSON.stringify(tp)}`);
    const back = await client.chat.completions.create({ model: "m", messages: turn, tools, tool_choice: "none",
                                                        temperature: 0, max_tokens: 8 });
    const b = back.choices[0];
    check(b.message.role === "assistant" && !b.message.tool_calls && typeof b.message.content === "string" &&
          ["length", "stop"].includes(b.finish_reason) && back.usage.prompt_tokens > 100,
          `${f.name} after the result: ${JSON.stringify(back)}`);
    console.log(`${f.name}: ${call.function.name}(${call.function.arguments}); streamed get_time(${sargs}); reply after the result`);
  } finally {
    await stopServer(srv);
  }
}

const dir = mkdtempSync(join(tmpdir(), "minfer-tools-"));
try {
  for (const f of FAMILIES) await family(f, dir);
} catch (e) {
  console.error("FAIL:", e);
  process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (!process.exitCode) console.log("ok");
