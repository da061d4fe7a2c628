/* chat.c - the public chat-template API: render a template over an OpenAI-style
 * conversation, check a template, read a GGUF's template (ChatML fallback). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/eval.h"
#include "gguf/gguf.h"

#define RENDER_MEMORY_LIMIT ((size_t)256 << 20)

static const char g_chatml[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

const char *mf_chat_template_chatml(void) { return g_chatml; }

mf_chat_params mf_chat_default_params(void) {
    mf_chat_params p = {.add_generation_prompt = true};
    return p;
}

static jval from_json(jarena *a, json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jval d = jv_dict(a);
        const char *k;
        json_t *v;
        /* jansson iterates objects in insertion order */
        json_object_foreach(j, k, v) jd_set(a, d.m, jv_strn(ja_strndup(a, k, strlen(k)), strlen(k)), from_json(a, v));
        return d;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jval l = jv_list(a, n);
        for (size_t i = 0; i < n; i++) l.l->v[i] = from_json(a, json_array_get(j, i));
        l.l->n = n;
        return l;
    }
    case JSON_STRING: {
        size_t n = json_string_length(j);
        return jv_strn(ja_strndup(a, json_string_value(j), n), n);
    }
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    default: return jv_none();
    }
}

static mf_status parse_json(const char *what, const char *text, json_t **out) {
    json_error_t e;
    *out = json_loadb(text, strlen(text), JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!*out) return mf_err(MF_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", what, e.line, e.column, e.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return mf_err(MF_ERR_FORMAT, "%s: expected a JSON object", what);
    }
    return MF_OK;
}

mf_status mf_chat_render(const char *tmpl, const char *conv_json, const mf_chat_params *params, char **out, size_t *out_len) {
    if (!tmpl || !conv_json || !out) return mf_err(MF_ERR_INVALID_ARG, "mf_chat_render: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    mf_chat_params p = params ? *params : mf_chat_default_params();
    json_t *conv = NULL, *kw = NULL;
    mf_status st = parse_json("conversation", conv_json, &conv);
    if (st) return st;
    json_t *msgs = json_object_get(conv, "messages");
    if (!json_is_array(msgs)) {
        json_decref(conv);
        return mf_err(MF_ERR_FORMAT, "conversation: \"messages\" must be an array");
    }
    if (p.kwargs_json && (st = parse_json("template kwargs", p.kwargs_json, &kw))) {
        json_decref(conv);
        return st;
    }

    /* volatile: assigned before setjmp, read after a longjmp */
    jfail *volatile fail = malloc(sizeof(jfail));
    jarena *volatile arena = malloc(sizeof(jarena));
    if (!fail || !arena) {
        free(fail);
        free(arena);
        json_decref(conv);
        json_decref(kw);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    jarena_init(arena, fail, RENDER_MEMORY_LIMIT);
    if (setjmp(fail->jb)) {
        st = mf_err(fail->code, "chat template: %s", fail->msg);
        goto done;
    }
    jnodes body = jparse(arena, tmpl, strlen(tmpl));
    jctx c = {.a = arena, .fail = fail, .now = p.now};
    c.globals = ja_alloc(arena, sizeof *c.globals);
    jglobals_install(&c, c.globals);
    jscope *g = c.globals;
    jval tools = json_object_get(conv, "tools") ? from_json(arena, json_object_get(conv, "tools")) : jv_none();
    jval docs = json_object_get(conv, "documents") ? from_json(arena, json_object_get(conv, "documents")) : jv_none();
    jd_set(arena, &g->vars, jv_str("messages"), from_json(arena, msgs));
    jd_set(arena, &g->vars, jv_str("tools"), tools);
    jd_set(arena, &g->vars, jv_str("documents"), docs);
    jd_set(arena, &g->vars, jv_str("add_generation_prompt"), jv_bool(p.add_generation_prompt));
    jd_set(arena, &g->vars, jv_str("bos_token"), jv_str(p.bos_token ? p.bos_token : ""));
    jd_set(arena, &g->vars, jv_str("eos_token"), jv_str(p.eos_token ? p.eos_token : ""));
    if (kw) {
        const char *k;
        json_t *v;
        json_object_foreach(kw, k, v) jd_set(arena, &g->vars, jv_str(ja_strndup(arena, k, strlen(k))), from_json(arena, v));
    }
    jsb buf;
    sb_init(&buf, arena);
    c.out = &buf;
    jrender(&c, &body);
    char *r = malloc(buf.n + 1);
    if (!r) {
        st = mf_err(MF_ERR_NOMEM, "out of memory (%zu bytes of rendered prompt)", buf.n);
        goto done;
    }
    if (buf.n) memcpy(r, buf.p, buf.n);
    r[buf.n] = 0;
    *out = r;
    if (out_len) *out_len = buf.n;
    st = MF_OK;
done:
    jarena_free(arena);
    free(arena);
    free(fail);
    json_decref(conv);
    json_decref(kw);
    return st;
}

mf_status mf_chat_check(const char *tmpl) {
    if (!tmpl) return mf_err(MF_ERR_INVALID_ARG, "mf_chat_check: NULL template");
    jfail *volatile fail = malloc(sizeof(jfail));
    jarena *volatile arena = malloc(sizeof(jarena));
    mf_status st = MF_OK;
    if (!fail || !arena) {
        free(fail);
        free(arena);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    jarena_init(arena, fail, RENDER_MEMORY_LIMIT);
    if (setjmp(fail->jb)) st = mf_err(fail->code, "chat template: %s", fail->msg);
    else jparse(arena, tmpl, strlen(tmpl));
    jarena_free(arena);
    free(arena);
    free(fail);
    return st;
}

mf_status mf_chat_template_from_gguf(const char *path, char **out, const char **warning) {
    if (!path || !out) return mf_err(MF_ERR_INVALID_ARG, "mf_chat_template_from_gguf: NULL argument");
    *out = NULL;
    if (warning) *warning = NULL;
    gguf_file *f;
    mf_status st = gguf_open(path, &f);
    if (st) return st;
    const gguf_value *v = gguf_get(f, "tokenizer.chat_template");
    const char *src = g_chatml;
    size_t n = sizeof g_chatml - 1;
    if (v && v->type != GGUF_STR) {
        st = mf_err(MF_ERR_FORMAT, "%s: tokenizer.chat_template is a %s, not a string", path, gguf_vtype_name(v->type));
        gguf_close(f);
        return st;
    }
    if (v) {
        src = v->s.ptr;
        n = (size_t)v->s.len;
        if (memchr(src, 0, n)) {
            gguf_close(f);
            return mf_err(MF_ERR_FORMAT, "%s: tokenizer.chat_template contains a NUL byte", path);
        }
    } else if (warning) {
        *warning = "the model has no tokenizer.chat_template; using ChatML";
    }
    char *r = malloc(n + 1);
    if (!r) {
        gguf_close(f);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    memcpy(r, src, n);
    r[n] = 0;
    gguf_close(f);
    *out = r;
    return MF_OK;
}

size_t mf_chat_turn_end(const char *tmpl, const mf_chat_params *params, char *out, size_t cap) {
    static const char sentinel[] = "\x01MF-SENTINEL\x01";
    if (cap) out[0] = 0;
    json_t *conv = json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "messages", "role", "user", "content", "Hi", "role",
                             "assistant", "content", sentinel);
    char *cs = conv ? json_dumps(conv, JSON_COMPACT) : NULL;
    json_decref(conv);
    mf_chat_params p = params ? *params : mf_chat_default_params();
    p.add_generation_prompt = false;
    char *r = NULL;
    size_t n = 0;
    if (cs && mf_chat_render(tmpl, cs, &p, &r, NULL) == MF_OK) {
        const char *at = strstr(r, sentinel);
        if (at) {
            const char *s = at + sizeof sentinel - 1;
            while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
            n = strcspn(s, " \n\t\r");
            if (n >= cap) n = 0; /* too long to be a marker */
            if (n) {
                memcpy(out, s, n);
                out[n] = 0;
            }
        }
    }
    free(r);
    free(cs);
    return n;
}
