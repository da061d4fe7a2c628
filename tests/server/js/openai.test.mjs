// The official openai npm client against minfer serve: chat (whole and
// streamed), completions, embeddings, the models list, and errors surfacing
// as the right APIError subclasses and statuses.
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
if (failed) {
  console.error("FAIL:", failed);
  process.exit(1);
}
console.log("ok");
