// The official openai npm client against minfer serve: chat (whole and
// streamed), completions, embeddings, the models list, and errors surfacing
// as the right APIError subclasses and statuses.
import { unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { check, needModules, startServer, stopServer } from "./common.mjs";

needModules("openai");
const { default: OpenAI } = await import("openai");
const [minfer, shared] = process.argv.slice(2);
const server = await startServer(minfer, shared + "/models/stories260K.gguf", ["--api-key", "test-key", "-np", "2"]);
let failed = null;
try {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "test-key", maxRetries: 0 });

  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === "stories260K.gguf", "models: " + JSON.stringify(models.data));

  const msgs = [{ role: "user", content: "Tell me a story" }];
  const chat = await client.chat.completions.create({ model: "stories260K.gguf", messages: msgs, temperature: 0, max_tokens: 20 });
  const text = chat.choices[0].message.content;
  check(chat.object === "chat.completion" && text.length > 0, "chat: " + JSON.stringify(chat));
  check(chat.choices[0].finish_reason === "length" && chat.usage.completion_tokens === 20, "chat usage: " + JSON.stringify(chat.usage));

  const stream = await client.chat.completions.create({ model: "stories260K.gguf", messages: msgs, temperature: 0, max_tokens: 20,
                                                        stream: true, stream_options: { include_usage: true } });
  let streamed = "", chunks = 0, usage = null, finish = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      streamed += ch.delta.content || "";
      finish = ch.finish_reason || finish;
      chunks++;
    }
  }
  check(streamed === text, `streamed ${JSON.stringify(streamed)} != ${JSON.stringify(text)}`);
  check(chunks > 5 && finish === "length" && usage && usage.completion_tokens === 20, `stream: ${chunks} chunks, ${finish}, ${JSON.stringify(usage)}`);

  const comp = await client.completions.create({ model: "stories260K.gguf", prompt: "Once upon a time", temperature: 0, max_tokens: 12 });
  check(comp.choices[0].text.startsWith(", there was"), "completion: " + JSON.stringify(comp.choices[0]));

  // the client asks for base64 by default and decodes it
  const emb = await client.embeddings.create({ model: "stories260K.gguf", input: ["Once upon a time", "The end"] });
  check(emb.data.length === 2 && emb.data[0].embedding.length === 64, "embeddings: " + emb.data.length);
  const norm = Math.hypot(...emb.data[0].embedding);
  check(Math.abs(norm - 1) < 1e-4, "embedding norm " + norm);
  const embF = await client.embeddings.create({ model: "stories260K.gguf", input: "Once upon a time", encoding_format: "float" });
  check(embF.data[0].embedding.every((x, i) => Math.abs(x - emb.data[0].embedding[i]) < 1e-7), "base64 and float embeddings differ");

  try {
    await client.chat.completions.create({ model: "x", messages: msgs, max_tokens: "ten" });
    check(false, "no error for a bad max_tokens");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, "bad request: " + e);
    check(e.error && e.error.param === "max_tokens", "error param: " + JSON.stringify(e.error));
  }
  try {
    await new OpenAI({ baseURL: server.url + "/v1", apiKey: "wrong", maxRetries: 0 }).models.list();
    check(false, "no error for a wrong key");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, "auth: " + e);
  }
  try {
    await client.models.retrieve("gpt-9");
    check(false, "no error for an unknown model");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.status === 404, "not found: " + e);
  }
} catch (e) {
  failed = e;
} finally {
  await stopServer(server);
}
if (!failed) {
  try {
    await toolCalls();
  } catch (e) {
    failed = e;
  }
}
async function toolCalls() {
  // a Hermes-style template (calls as <tool_call>{json}</tool_call>, results
  // as <tool_response>), so the server reads calls the Hermes way
  const tmpl = join(tmpdir(), `minfer-tools-${process.pid}.jinja`);
  writeFileSync(tmpl,
    "{%- if tools %}tools:{% for t in tools %} {{ t.function.name }}{% endfor %}\n{% endif -%}" +
    "{%- for m in messages -%}" +
    "{%- if m.role == 'tool' -%}<tool_response>{{ m.content }}</tool_response>\n" +
    "{%- elif m.tool_calls -%}assistant:{% for c in m.tool_calls %} <tool_call>{{ c.function.name }}</tool_call>{% endfor %}\n" +
    "{%- else -%}{{ m.role }}: {{ m.content }}\n{%- endif -%}{%- endfor -%}" +
    "{%- if add_generation_prompt %}assistant: {% endif -%}");
  const srv = await startServer(minfer, shared + "/models/stories260K.gguf", ["--chat-template", tmpl]);
  try {
    const client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "x", maxRetries: 0 });
    const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"],
                    additionalProperties: false } } }];
    const msgs = [{ role: "user", content: "What is the weather in Paris?" }];
    const r = await client.chat.completions.create({ model: "m", messages: msgs, tools, tool_choice: "required",
                                                     temperature: 0, max_tokens: 400 });
    const call = r.choices[0].message.tool_calls && r.choices[0].message.tool_calls[0];
    check(r.choices[0].finish_reason === "tool_calls" && call && call.function.name === "get_weather",
          "tool call: " + JSON.stringify(r.choices[0]));
    const args = JSON.parse(call.function.arguments);
    check(typeof args.city === "string" && args.city.length <= 10, "arguments: " + call.function.arguments);
    check(call.type === "function" && call.id === "call_0", "call fields: " + JSON.stringify(call));

    // streamed: the same call as a delta
    const stream = await client.chat.completions.create({ model: "m", messages: msgs, tools, tool_choice: "required",
                                                          temperature: 0, max_tokens: 400, stream: true });
    let sname = "", sargs = "", finish = null;
    for await (const c of stream)
      for (const ch of c.choices) {
        for (const tc of ch.delta.tool_calls || []) {
          sname += (tc.function && tc.function.name) || "";
          sargs += (tc.function && tc.function.arguments) || "";
        }
        finish = ch.finish_reason || finish;
      }
    check(sname === "get_weather" && sargs === call.function.arguments && finish === "tool_calls",
          `streamed call ${sname} ${sargs} ${finish}`);

    // the tool's result goes back through the template; the reply is text
    const back = await client.chat.completions.create({ model: "m", temperature: 0, max_tokens: 10, tools,
      messages: [...msgs, { role: "assistant", content: null, tool_calls: [call] },
                 { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" }] });
    check(back.choices[0].finish_reason === "length" && back.choices[0].message.content.length > 0 &&
          !back.choices[0].message.tool_calls, "after the result: " + JSON.stringify(back.choices[0]));
    const tp = await (await fetch(srv.url + "/apply-template", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tools, messages: [...msgs, { role: "assistant", content: null, tool_calls: [call] },
                                              { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" }] }) })).json();
    check(tp.prompt.includes("<tool_response>sunny, 21 C</tool_response>") && tp.prompt.includes("<tool_call>get_weather</tool_call>"),
          "template of the tool turn: " + JSON.stringify(tp));
  } finally {
    await stopServer(srv);
    unlinkSync(tmpl);
  }
}

if (failed) {
  console.error("FAIL:", failed);
  process.exit(1);
}
console.log("ok");
