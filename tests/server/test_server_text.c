/* The server's text pipeline on its own: stop strings (complete, and a tail
 * held back while it may still become one) and the <think> split, fed one
 * byte at a time and in one piece, which must give the same result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server/tools.h"

static int fails;
#define CHECK(c, ...)                                                     \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            fails++;                                                      \
        }                                                                 \
    } while (0)

typedef struct out {
    char c[512], r[512];
    size_t nc, nr;
} out;

static void emit(void *ud, const char *c, size_t nc, const char *r, size_t nr) {
    out *o = ud;
    if (nc) memcpy(o->c + o->nc, c, nc);
    o->nc += nc;
    if (nr) memcpy(o->r + o->nr, r, nr);
    o->nr += nr;
}

static void split(const char *text, bool inside, size_t step, out *o) {
    memset(o, 0, sizeof *o);
    srv_think t = {.enabled = true, .inside = inside};
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step) srv_think_feed(&t, text + i, i + step < n ? step : n - i, false, emit, o);
    srv_think_feed(&t, NULL, 0, true, emit, o);
}

static void think_case(const char *text, bool inside, const char *content, const char *reasoning) {
    for (size_t step = 1; step <= strlen(text) + 1; step++) {
        out o;
        split(text, inside, step, &o);
        CHECK(o.nc == strlen(content) && !memcmp(o.c, content, o.nc), "%s (step %zu): content '%.*s' != '%s'", text,
              step, (int)o.nc, o.c, content);
        CHECK(o.nr == strlen(reasoning) && !memcmp(o.r, reasoning, o.nr), "%s (step %zu): reasoning '%.*s' != '%s'",
              text, step, (int)o.nr, o.r, reasoning);
    }
}

/* Parses `text` with format f and checks the content length and the calls
 * (as compact JSON of [[name, arguments], ...]). */
static void tool_case(srv_tool_fmt f, const char *text, bool ok, size_t content, const char *want) {
    json_t *calls = NULL;
    size_t clen = 0;
    bool r = srv_tool_parse(f, text, strlen(text), &calls, &clen);
    CHECK(r == ok, "%s: parse returned %d", text, r);
    CHECK(clen == content, "%s: content length %zu, expected %zu", text, clen, content);
    json_t *got = json_array();
    for (size_t i = 0; calls && i < json_array_size(calls); i++) {
        json_t *fn = json_object_get(json_array_get(calls, i), "function");
        json_array_append_new(got, json_pack("[O,O]", json_object_get(fn, "name"), json_object_get(fn, "arguments")));
        char id[32];
        snprintf(id, sizeof id, f == SRV_TOOLS_MISTRAL ? "call%05zu" : "call_%zu", i); /* Mistral: 9 alphanumerics */
        CHECK(!strcmp(json_string_value(json_object_get(json_array_get(calls, i), "id")), id), "%s: call id", text);
    }
    char *g = json_dumps(got, JSON_COMPACT);
    CHECK(!strcmp(g, want), "%s: calls %s, expected %s", text, g, want);
    free(g);
    json_decref(got);
    json_decref(calls);
}

/* Arguments sent back as strings reach the template as objects; a string
 * that is not a JSON object stays as it is. */
static void args_cases(void) {
    json_t *m = json_loads("{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":"
                           "\"{\\\"a\\\":[1]}\"}},{\"function\":{\"name\":\"g\",\"arguments\":\"not json\"}},"
                           "{\"function\":{\"name\":\"h\",\"arguments\":\"[1]\"}},{\"function\":{\"name\":\"k\","
                           "\"arguments\":{\"b\":2}}}]}", 0, NULL);
    CHECK(m != NULL, "args case JSON");
    srv_tool_args_to_objects(m);
    char *g = json_dumps(json_object_get(m, "tool_calls"), JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(g && !strcmp(g, "[{\"function\":{\"arguments\":{\"a\":[1]},\"name\":\"f\"}},{\"function\":{\"arguments\":"
                          "\"not json\",\"name\":\"g\"}},{\"function\":{\"arguments\":\"[1]\",\"name\":\"h\"}},"
                          "{\"function\":{\"arguments\":{\"b\":2},\"name\":\"k\"}}]"),
          "arguments to objects: %s", g ? g : "");
    free(g);
    json_decref(m);
}

int main(void) {
    args_cases();
    char *stops[] = {"</s>", "STOP"};
    long at;
    CHECK(srv_stop_scan("hello world", 11, stops, 2, &at) == 11 && at == -1, "no stop");
    CHECK(srv_stop_scan("hello </", 8, stops, 2, &at) == 6 && at == -1, "partial stop held back");
    CHECK(srv_stop_scan("hello </s> more", 15, stops, 2, &at) == 6 && at == 6, "complete stop");
    CHECK(srv_stop_scan("aSTOPb</s>", 10, stops, 2, &at) == 1 && at == 1, "earliest stop wins");
    CHECK(srv_stop_scan("ST", 2, stops, 2, &at) == 0 && at == -1, "all of it may be a stop");
    CHECK(srv_stop_scan("xS", 2, stops, 2, &at) == 1, "one byte held");

    think_case("plain text", false, "plain text", "");
    think_case("<think>why</think>answer", false, "answer", "why");
    think_case("why</think>answer", true, "answer", "why");
    think_case("a<thin", false, "a<thin", "");           /* never completed: text */
    think_case("<think>open", false, "", "open");
    think_case("x<think>1</think>y<think>2</think>z", false, "xyz", "12");
    think_case("</think> stray", false, "</think> stray", "");
    srv_think off = {.enabled = false};
    out o = {0};
    srv_think_feed(&off, "<think>x</think>", 16, true, emit, &o);
    CHECK(o.nc == 16 && o.nr == 0, "disabled split keeps everything as content");

    /* tool calls */
    CHECK(srv_tool_format("{{ '<tool_call>' }}") == SRV_TOOLS_HERMES, "hermes template");
    CHECK(srv_tool_format("[TOOL_CALLS]") == SRV_TOOLS_MISTRAL, "mistral template");
    CHECK(srv_tool_format("<|python_tag|>") == SRV_TOOLS_LLAMA3, "llama3 template");
    CHECK(srv_tool_format("{{ messages }}") == SRV_TOOLS_GENERIC, "generic template");
    tool_case(SRV_TOOLS_HERMES, "no calls here", true, 13, "[]");
    tool_case(SRV_TOOLS_HERMES, "Let me look.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
              true, 12, "[[\"get\",\"{\\\"city\\\":\\\"Paris\\\"}\"]]");
    tool_case(SRV_TOOLS_HERMES, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"b\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>",
              true, 0, "[[\"a\",\"{}\"],[\"b\",\"{\\\"x\\\":1}\"]]");
    tool_case(SRV_TOOLS_HERMES, "text <tool_call>{broken", false, 23, "[]");
    tool_case(SRV_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\":\"f\",\"arguments\":{\"n\":2}}]", true, 0, "[[\"f\",\"{\\\"n\\\":2}\"]]");
    tool_case(SRV_TOOLS_MISTRAL, "[TOOL_CALLS]f[ARGS]{\"n\":2}", true, 0, "[[\"f\",\"{\\\"n\\\":2}\"]]");
    tool_case(SRV_TOOLS_LLAMA3, "<|python_tag|>{\"name\":\"g\",\"parameters\":{\"q\":\"x\"}}", true, 0,
              "[[\"g\",\"{\\\"q\\\":\\\"x\\\"}\"]]");
    tool_case(SRV_TOOLS_LLAMA3, "{\"not\": \"a call\"}", true, 17, "[]");
    tool_case(SRV_TOOLS_GENERIC, "{\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"h\",\"arguments\":{}}}]}",
              true, 0, "[[\"h\",\"{}\"]]");
    tool_case(SRV_TOOLS_GENERIC, "Plain answer.", true, 13, "[]");
    CHECK(srv_tool_safe(SRV_TOOLS_HERMES, "abc<tool", 8) == 3, "hermes: partial marker held");
    CHECK(srv_tool_safe(SRV_TOOLS_HERMES, "abc <tool_call>{", 16) == 4, "hermes: text before the call");
    CHECK(srv_tool_safe(SRV_TOOLS_HERMES, "abc", 3) == 3, "hermes: plain text");
    CHECK(srv_tool_safe(SRV_TOOLS_GENERIC, "  {\"na", 6) == 0, "generic: a JSON start is held");
    CHECK(srv_tool_safe(SRV_TOOLS_GENERIC, "Sure, {x}", 9) == 9, "generic: text first is text");

    json_t *j = srv_json_bytes("a\xff" "b\xc3\xa9", 5);
    CHECK(j && !strcmp(json_string_value(j), "a\xEF\xBF\xBD" "b\xc3\xa9"), "invalid UTF-8 replaced, valid kept");
    json_decref(j);
    if (!fails) printf("ok\n");
    return fails != 0;
}
