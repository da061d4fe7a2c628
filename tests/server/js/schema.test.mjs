// JSON Schema -> grammar against an independent validator (ajv, draft
// 2020-12, with ajv-formats): for every schema of the suite, each document
// ajv accepts the grammar accepts and each one ajv rejects the grammar
// rejects; the documents the grammar leaves out on purpose (another JSON
// spelling of the same value, properties in another order than the
// schema's) are listed apart and checked as such. Then
// sampled outputs (temperature 1, stories260K, the server's response_format
// through the openai client) all validate with ajv.
// argv: minfer, shared dir, the schema_accepts helper (tests/grammar).
import { execFileSync } from "node:child_process";
import { check, needModules, startServer, stopServer } from "./common.mjs";

needModules("ajv", "ajv-formats", "openai");
const { default: Ajv2020 } = await import("ajv/dist/2020.js");
const { default: addFormats } = await import("ajv-formats");
const { default: OpenAI } = await import("openai");
const [minfer, shared, accepts] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

// gen: bounded enough for sampled outputs to end well inside the context
const S = [
  { gen: true, schema: { type: "object", properties: { name: { type: "string", minLength: 1, maxLength: 8 },
      age: { type: "integer", minimum: 0, maximum: 120 }, email: { type: "string", maxLength: 6 } },
      required: ["name", "age"], additionalProperties: false },
    valid: ['{"name":"Al","age":3}', '{ "name": "é\\n", "age": 120, "email": "a@b" }'],
    invalid: ['{"name":"","age":3}', '{"age":3}', '{"name":"Al","age":121}', '{"name":"Al","age":-1}',
              '{"name":"Al","age":3,"x":1}', '{"name":"Al","age":3.5}', '{"name":"Al","age":3', 'nonsense'],
    spelling: ['{"name":"Al","age":3.0}', '{"age":0,"name":"x"}'] },
  { gen: true, schema: { enum: ["red", "green", 3, null, { a: [1] }] },
    valid: ['"red"', "3", "null", '{"a":[1]}'], invalid: ['"blue"', "4", '{"a":[2]}'] },
  { gen: true, schema: { type: "array", items: { type: "integer", exclusiveMinimum: -10, exclusiveMaximum: 10 },
                         minItems: 1, maxItems: 4 },
    valid: ["[0]", "[-9, 9, 5]", "[1,2,3,4]"], invalid: ["[]", "[10]", "[-10]", "[1,2,3,4,5]", '["1"]'] },
  { gen: true, schema: { type: "array", prefixItems: [{ type: "string", maxLength: 3 }, { type: "boolean" }],
                         items: false },
    valid: ["[]", '["ab"]', '["ab", true]'], invalid: ['["ab",true,1]', "[true]", '["abcd"]'] },
  { gen: true, schema: { type: "array", prefixItems: [{ const: "x" }], items: { type: "null" }, minItems: 2, maxItems: 3 },
    valid: ['["x",null]', '["x",null,null]'], invalid: ['["x"]', '["x",null,null,null]', '["y",null]', '["x",1]'] },
  { gen: true, schema: { type: "object", properties: { d: { type: "string", format: "date" },
      t: { type: "string", format: "time" }, dt: { type: "string", format: "date-time" },
      id: { type: "string", format: "uuid" } }, required: ["d", "t", "dt", "id"] },
    valid: ['{"d":"2024-02-29","t":"12:30:00Z","dt":"2024-01-01T00:00:00.5+02:00","id":"123e4567-e89b-12d3-a456-426614174000"}',
            '{"d":"2000-02-29","t":"23:59:59-11:30","dt":"1999-12-31T23:59:59Z","id":"00000000-0000-0000-0000-00000000000a"}'],
    invalid: ['{"d":"2023-02-29","t":"12:30:00Z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}',
              '{"d":"1900-02-29","t":"12:30:00Z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}',
              '{"d":"2024-04-31","t":"12:30:00Z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}',
              '{"d":"2024-01-01","t":"24:00:00Z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}',
              '{"d":"2024-01-01","t":"12:30:00Z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-42661417400"}'],
    spelling: ['{"d":"2024-01-01","t":"12:30:00z","dt":"2024-01-01T00:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}'] },
  { gen: true, schema: { type: "string", pattern: "^[A-Z]{2}-\\d{3,4}$" },
    valid: ['"AB-123"', '"ZZ-0000"'], invalid: ['"ab-123"', '"AB-12"', '"AB-12345"', '"xAB-123"', "12"],
    spelling: ['"\\u0041B-123"'] },
  { gen: true, schema: { type: "string", pattern: "^(cat|dog)s?$|^[0-9a-f]{2}(:[0-9a-f]{2}){1,2}$" },
    valid: ['"cat"', '"dogs"', '"0a:ff"', '"00:11:22"'], invalid: ['"cats1"', '""', '"0a"', '"0A:ff"', '"00:11:22:33"'] },
  { schema: { type: "string", pattern: "ab+c" },
    valid: ['"abc"', '"xx abbbc yy"'], invalid: ['"ac"', '""', '"ab c"'] },
  { schema: { type: "string", pattern: '^a\\.b"c\\\\.[^,\\s]*$' },
    valid: ['"a.b\\"c\\\\x"', '"a.b\\"c\\\\xyz\\u0001é"'], invalid: ['"aXb\\"c\\\\x"', '"a.b\\"c\\\\x,y"', '"a.b\\"c\\\\x y"'] },
  { gen: true, schema: { type: "integer", minimum: -1234, maximum: 56789 },
    valid: ["-1234", "-999", "0", "56789", "9999", "10000"], invalid: ["-1235", "56790", "99999", "-10000", "1.5"],
    spelling: ["1e3", "-0"] },
  { schema: { type: "integer", exclusiveMinimum: 99 }, valid: ["100", "123456789"], invalid: ["99", "0", "-5"] },
  { gen: true, schema: { type: "number", minimum: -2, exclusiveMaximum: 3 },
    valid: ["-2", "-2.0", "-1.5", "0", "0.25", "2.999", "2"], invalid: ["3", "3.0", "-2.5", "-2.01", "17", "-100"],
    spelling: ["2e0", "-0"] },
  { gen: true, schema: { type: "array", items: { type: "number", exclusiveMinimum: 0, maximum: 1 }, maxItems: 3 },
    valid: ["[]", "[0.001, 1, 1.000]"], invalid: ["[0]", "[0.0]", "[1.01]", "[-0.5]", "[2]"] },
  { gen: true, schema: { $defs: { base: { type: "object", properties: { id: { type: "integer", minimum: 1, maximum: 9 },
        tag: { enum: ["a", "b"] } }, required: ["id"], additionalProperties: false } },
      allOf: [{ $ref: "#/$defs/base" }, { properties: { tag: { enum: ["a", "b"] }, extra: { type: "null" } },
                                         required: ["tag"] }] },
    valid: ['{"id":1,"tag":"a"}', '{"id":9,"tag":"b"}'], invalid: ['{"id":1}', '{"id":1,"tag":"a","extra":null}',
                                                                    '{"id":0,"tag":"a"}', '{"tag":"a"}'] },
  { gen: true, schema: { $defs: { node: { type: "object", properties: { v: { type: "boolean" },
        kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 } }, required: ["v"] } },
      anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] },
    valid: ['{"v":true,"kids":[{"v":false},{"v":true,"kids":[]}]}', "null"],
    invalid: ['{"v":true,"kids":[{"kids":[]}]}', '{"v":1}', '{"v":true,"kids":[{"v":true},{"v":true},{"v":true}]}'] },
  { gen: true, schema: { oneOf: [{ type: "object", properties: { t: { const: "a" }, x: { type: "integer" } },
                                   required: ["t", "x"], additionalProperties: false },
                                 { type: "object", properties: { t: { const: "b" }, y: { type: "boolean" } },
                                   required: ["t", "y"], additionalProperties: false }] },
    valid: ['{"t":"a","x":1}', '{"t":"b","y":true}'], invalid: ['{"t":"a","y":true}', '{"t":"c","x":1}'] },
  { schema: { type: "object", additionalProperties: { type: "integer", maximum: 5 } },
    valid: ['{"x":1,"y":-2}', "{}"], invalid: ['{"x":"a"}', '{"x":6}'] },
  { schema: { type: ["string", "null"], maxLength: 2 }, valid: ['"ab"', "null"], invalid: ['"abc"', "1"] },
  { gen: true, schema: { type: "number", exclusiveMinimum: -2.25, maximum: 3.1 },
    valid: ["-2.2", "-2.249", "0", "3.1", "3.10", "3.0999", "-0.5"], invalid: ["-2.25", "-2.3", "3.11", "3.1001", "4", "-3"] },
  { schema: { type: "number", minimum: 0.1, exclusiveMaximum: 0.3 },
    valid: ["0.1", "0.10", "0.2999", "0.25"], invalid: ["0.0999", "0.3", "0.30", "1", "0"] },
];

// keywords the converter cannot enforce are refused, never ignored
const refusedSchemas = [
  [{ type: "integer", multipleOf: 3 }, "keyword 'multipleOf' is not supported"],
  [{ type: "string", pattern: "^(?=a)" }, "the lookahead (?= is not supported"],
  [{ type: "number", minimum: 0.1234567890123456 }, "a number bound with more than 15 decimals is not supported"],
  [{ type: "object", patternProperties: { a: {} } }, "keyword 'patternProperties' is not supported"],
];

function ajvValid(validate, text) {
  let doc;
  try { doc = JSON.parse(text); } catch { return false; }
  return validate(doc);
}

const input = [...S.map((c) => ({ schema: c.schema, docs: [...c.valid, ...c.invalid, ...(c.spelling || [])] })),
               ...refusedSchemas.map(([schema]) => ({ schema, docs: [] }))];
const res = JSON.parse(execFileSync(accepts, [], { input: JSON.stringify(input) }).toString());
let agreed = 0;
S.forEach((c, i) => {
  const validate = ajv.compile(c.schema);
  check(!res[i].error, `converter refused ${JSON.stringify(c.schema)}: ${res[i].error}`);
  const docs = input[i].docs;
  docs.forEach((d, j) => {
    const a = ajvValid(validate, d), g = res[i].accepts[j];
    const kind = j < c.valid.length ? "valid" : j < c.valid.length + c.invalid.length ? "invalid" : "spelling";
    check(a === (kind !== "invalid"), `ajv calls ${d} ${a ? "valid" : "invalid"} under ${JSON.stringify(c.schema)}`);
    if (kind === "spelling") check(!g, `grammar accepts the second spelling ${d} under ${JSON.stringify(c.schema)}`);
    else check(g === a, `grammar ${g ? "accepts" : "rejects"} ${d}, ajv ${a ? "accepts" : "rejects"}, under ${JSON.stringify(c.schema)}`);
    agreed += kind !== "spelling";
  });
});
refusedSchemas.forEach(([schema, msg], k) => {
  const r = res[S.length + k];
  check(r.error && r.error.includes(msg), `${JSON.stringify(schema)}: ${JSON.stringify(r)} lacks "${msg}"`);
});
console.log(`${S.length} schemas: grammar and ajv agree on ${agreed} documents; ${refusedSchemas.length} refused by name`);

// patterns against ECMAScript's own regexes (what ajv runs) on random
// strings over a small alphabet that hits the patterns' characters, and on
// one-character edits of strings that match
const PATTERNS = [["^a(b|cd)*e?$", "abcdbe"], ["b{2,3}", "xbbby"], ["^[^a-c]+x$", "d\"\\x"], ["^(?:ab|a)(?:c|bc)$", "abc"],
                  ["^\\d+(\\.\\d{1,2})?$", "12.5"], ["a|^b|c$", "xxc"], ["^[\\w-]{2}\\s[\\\\\"]$", "_-\t\\"],
                  ["^.{3}$", "a\tb"], ["^(a|b)+?c{0,2}$", "abbac"], ["x[^\\S ]y", "ax\nyb"], ["^\\D\\W$", "é\u2028"]];
const ALPHA = ["a", "b", "c", "d", "e", "x", "y", "1", "2", ".", " ", "\t", "\n", "-", "_", '"', "\\", "é", "\u2028"];
let seed = 12345;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const edit = (x) => {
  const a = [...x], i = rnd(a.length + 1), c = ALPHA[rnd(ALPHA.length)], k = rnd(3);
  if (k === 0) a.splice(i, 0, c); else if (k === 1) a.splice(i, 1); else a.splice(i, 1, c);
  return a.join("");
};
const pinput = PATTERNS.map(([p, example]) => {
  const strs = [example];
  for (let i = 0; i < 200; i++) strs.push(Array.from({ length: rnd(7) }, () => ALPHA[rnd(ALPHA.length)]).join(""));
  for (let i = 0; i < 200; i++) strs.push(edit(rnd(2) ? example : edit(example)));
  return { schema: { type: "string", pattern: p }, docs: strs.map((x) => JSON.stringify(x)), strs };
});
const pres = JSON.parse(execFileSync(accepts, [], { input: JSON.stringify(pinput) }).toString());
let pm = 0, pn = 0;
pinput.forEach((c, i) => {
  let m = 0;
  check(!pres[i].error, `pattern ${c.schema.pattern} refused: ${pres[i].error}`);
  const re = new RegExp(c.schema.pattern, "u");
  c.strs.forEach((x, j) => {
    const want = re.test(x);
    check(pres[i].accepts[j] === want, `pattern ${c.schema.pattern}: grammar ${pres[i].accepts[j] ? "accepts" : "rejects"} ` +
          `${JSON.stringify(x)}, RegExp ${want ? "matches" : "does not"}`);
    m += want;
  });
  check(m >= 5 && m <= c.strs.length - 5, `pattern ${c.schema.pattern}: ${m} of ${c.strs.length} match (want both kinds)`);
  pm += m;
  pn += c.strs.length;
});
console.log(`${PATTERNS.length} patterns: grammar and RegExp agree on ${pn} random strings (${pm} matching)`);

// sampled outputs under each bounded schema validate with ajv
const PER = 8;
const server = await startServer(minfer, shared + "/models/stories260K.gguf", ["-np", "2"]);
let failed = null;
try {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "x", maxRetries: 0 });
  let n = 0;
  for (const c of S.filter((c) => c.gen)) {
    const validate = ajv.compile(c.schema);
    const outs = await Promise.all(Array.from({ length: PER }, (_, k) => client.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "Once upon a time" }], temperature: 1, seed: 1000 + k,
      max_tokens: 400, response_format: { type: "json_schema", json_schema: { name: "s", schema: c.schema, strict: true } } })));
    for (const r of outs) {
      const text = r.choices[0].message.content;
      check(r.choices[0].finish_reason === "stop", `unfinished under ${JSON.stringify(c.schema)}: ${JSON.stringify(text)}`);
      check(ajvValid(validate, text), `sampled ${JSON.stringify(text)} fails ajv under ${JSON.stringify(c.schema)}: ` +
            JSON.stringify(validate.errors));
      n++;
    }
  }
  // the server refuses an unsupported keyword with a 400 that names it
  try {
    await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 5,
      response_format: { type: "json_schema", json_schema: { name: "s", schema: { type: "integer", multipleOf: 2 } } } });
    check(false, "no error for multipleOf");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && /multipleOf/.test(e.message), "multipleOf: " + e);
  }
  console.log(`${n} sampled outputs at temperature 1 validate with ajv`);
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
