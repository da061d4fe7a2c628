/* tools.c - reading tool calls back out of a model's reply.
 *
 * The request's `tools` go through the chat template, which tells the model
 * how to call them; each model family writes its calls its own way. The
 * format is chosen from the template's text:
 *   hermes   <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen 2.5/3, Hermes)
 *   mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name[ARGS]{...}
 *   llama3   the whole reply is {"name": ..., "parameters": {...}}, maybe after <|python_tag|>
 *   generic  the whole reply is such an object, an array of them, or {"tool_calls": [...]}
 * Calls come out in OpenAI's shape, arguments as a JSON string, ids call_N
 * (callNNNNN for Mistral, whose templates take only 9 alphanumerics). */
#include "tools.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

srv_tool_fmt srv_tool_format(const char *tmpl) {
    if (!tmpl) return SRV_TOOLS_GENERIC;
    if (strstr(tmpl, "<tool_call>")) return SRV_TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return SRV_TOOLS_MISTRAL;
    if (strstr(tmpl, "<|python_tag|>") || (strstr(tmpl, "ipython") && strstr(tmpl, "\"parameters\"")))
        return SRV_TOOLS_LLAMA3;
    return SRV_TOOLS_GENERIC;
}

const char *srv_tool_format_name(srv_tool_fmt f) {
    switch (f) {
    case SRV_TOOLS_HERMES: return "hermes";
    case SRV_TOOLS_MISTRAL: return "mistral";
    case SRV_TOOLS_LLAMA3: return "llama3";
    default: return "generic";
    }
}

static const char *skip_ws(const char *s, const char *e) {
    while (s < e && isspace((unsigned char)*s)) s++;
    return s;
}

static const char *find(const char *s, const char *e, const char *needle) {
    size_t m = strlen(needle);
    for (const char *p = s; p + m <= e; p++)
        if (!memcmp(p, needle, m)) return p;
    return NULL;
}

/* One call object: name + arguments (or parameters), arguments an object or a
 * JSON string. Appends {id, type, function: {name, arguments}} to calls. */
static bool add_call(json_t *calls, json_t *o) {
    json_t *fn = json_object_get(o, "function");
    if (json_is_object(fn)) o = fn; /* {"type": "function", "function": {...}} */
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_string(name) || !json_string_length(name)) return false;
    char *a;
    if (!args || json_is_null(args)) a = strdup("{}");
    else if (json_is_string(args)) a = strdup(json_string_value(args));
    else a = json_dumps(args, JSON_COMPACT);
    if (!a) return false;
    char id[32];
    snprintf(id, sizeof id, "call_%zu", json_array_size(calls));
    json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:O,s:s}}", "id", id, "type", "function", "function", "name",
                                           name, "arguments", a));
    free(a);
    return true;
}

/* A JSON value at [s, e): a call object, an array of them, or {"tool_calls": [...]}. */
static bool add_calls_json(json_t *calls, const char *s, const char *e) {
    json_t *v = json_loadb(s, (size_t)(e - s), JSON_DISABLE_EOF_CHECK, NULL);
    if (!v) return false;
    json_t *tc = json_is_object(v) ? json_object_get(v, "tool_calls") : NULL;
    json_t *list = json_is_array(tc) ? tc : v;
    bool ok = true;
    if (json_is_array(list)) {
        size_t i;
        json_t *o;
        json_array_foreach(list, i, o) ok &= json_is_object(o) && add_call(calls, o);
        ok &= json_array_size(list) > 0;
    } else {
        ok = json_is_object(list) && add_call(calls, list);
    }
    json_decref(v);
    return ok;
}

bool srv_tool_parse(srv_tool_fmt f, const char *text, size_t n, json_t **calls_out, size_t *content_len) {
    const char *s = text, *e = text + n;
    json_t *calls = json_array();
    *calls_out = NULL;
    *content_len = n;
    const char *first = NULL;
    bool ok = false;
    if (f == SRV_TOOLS_HERMES) {
        for (const char *p = s; (p = find(p, e, "<tool_call>"));) {
            if (!first) first = p;
            const char *body = p + 11, *end = find(body, e, "</tool_call>");
            ok = add_calls_json(calls, skip_ws(body, end ? end : e), end ? end : e);
            if (!ok || !end) break;
            p = end + 12;
        }
    } else if (f == SRV_TOOLS_MISTRAL) {
        first = find(s, e, "[TOOL_CALLS]");
        if (first) {
            const char *body = skip_ws(first + 12, e);
            const char *args = find(body, e, "[ARGS]");
            if (args && body < e && *body != '[' && *body != '{') {
                /* name[ARGS]{...}, possibly repeated */
                ok = true;
                for (const char *p = body; ok && p < e;) {
                    const char *a = find(p, e, "[ARGS]");
                    if (!a) break;
                    const char *next = find(a + 6, e, "[TOOL_CALLS]");
                    json_t *argv = json_loadb(a + 6, (size_t)((next ? next : e) - (a + 6)), JSON_DISABLE_EOF_CHECK, NULL);
                    char *name = strndup(p, (size_t)(a - p));
                    json_t *o = argv && name ? json_pack("{s:s,s:O}", "name", name, "arguments", argv) : NULL;
                    ok = o && add_call(calls, o);
                    json_decref(o);
                    json_decref(argv);
                    free(name);
                    p = next ? skip_ws(next + 12, e) : e;
                }
            } else {
                ok = add_calls_json(calls, body, e);
            }
        }
    } else {
        const char *b = skip_ws(s, e);
        if (f == SRV_TOOLS_LLAMA3 && find(b, e, "<|python_tag|>") == b) b = skip_ws(b + 14, e);
        if (b < e && (*b == '{' || *b == '[')) {
            first = s;
            ok = add_calls_json(calls, b, e);
        }
    }
    if (!ok || !json_array_size(calls)) {
        json_decref(calls);
        /* no call, or a marker without a readable call (all of it stays text) */
        return first == NULL || f == SRV_TOOLS_LLAMA3 || f == SRV_TOOLS_GENERIC;
    }
    if (f == SRV_TOOLS_MISTRAL) { /* Mistral's templates refuse any id but 9 letters or digits */
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c) {
            char id[16];
            snprintf(id, sizeof id, "call%05zu", i % 100000);
            json_object_set_new(c, "id", json_string(id));
        }
    }
    while (first > s && isspace((unsigned char)first[-1])) first--;
    *content_len = (size_t)(first - s);
    *calls_out = calls;
    return true;
}

size_t srv_tool_safe(srv_tool_fmt f, const char *text, size_t n) {
    const char *marker = f == SRV_TOOLS_HERMES ? "<tool_call>" : f == SRV_TOOLS_MISTRAL ? "[TOOL_CALLS]" : NULL;
    if (marker) {
        const char *at = find(text, text + n, marker);
        if (at) return (size_t)(at - text);
        size_t m = strlen(marker);
        for (size_t l = m - 1; l > 0; l--)
            if (l <= n && !memcmp(text + n - l, marker, l)) return n - l;
        return n;
    }
    /* llama3 / generic: a reply that opens with JSON may be a call; anything
     * else is text */
    const char *b = skip_ws(text, text + n);
    if (b == text + n) return 0;
    if (*b == '{' || *b == '[' || *b == '<') return 0;
    return n;
}

void srv_tool_args_to_objects(json_t *m) {
    json_t *calls = json_object_get(m, "tool_calls"), *c;
    size_t i;
    json_array_foreach(calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        json_t *a = json_object_get(fn, "arguments");
        if (!json_is_string(a)) continue;
        json_t *o = json_loads(json_string_value(a), 0, NULL);
        if (json_is_object(o)) json_object_set_new(fn, "arguments", o);
        else json_decref(o);
    }
}
