/* test_chat_unit.c - lexer/parser/evaluator unit tests (expected values taken from real
 * Jinja2 under transformers' settings), API behaviour, and hostile templates that must
 * fail cleanly: these parse untrusted input, so they also run under ASan/UBSan. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minfer.h"
#include "testutil.h"

/* Variables every snippet in unit_cases.inc sees. */
static const char VARS[] =
    "{\"l\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": \"y\"}}, \"s\": \"h\\u00e9llo W\\u00f6rld\","
    " \"n\": null, \"e\": [], \"f\": 1.5,"
    " \"ms\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\","
    " \"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}]}],"
    " \"t\": true, \"z\": 0, \"neg\": -7, \"txt\": \"  a\\n b  \\n\\n c\\t\", \"u\": \"x\\u00e9\\u4e2d\\ud83d\\ude00\"}";

static const char *const g_cases[][2] = {
#include "unit_cases.inc"
};

#define NOW_2024_07_26 1721952000

static mf_status render(const char *tmpl, const char *conv, const char *kwargs, char **out) {
    mf_chat_params p = mf_chat_default_params();
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.kwargs_json = kwargs;
    p.now = NOW_2024_07_26;
    return mf_chat_render(tmpl, conv, &p, out, NULL);
}

/* Renders and expects an error whose message contains every `want` piece. */
static void expect_error(const char *tmpl, mf_status code, const char *want1, const char *want2) {
    char *out = NULL;
    mf_status st = render(tmpl, "{\"messages\": []}", NULL, &out);
    const char *msg = mf_last_error();
    CHECK(st != MF_OK, "expected an error from %.80s, got output %.80s", tmpl, out ? out : "");
    if (code != MF_OK) CHECK(st == code, "%.80s: status %s, want %s (%s)", tmpl, mf_status_name(st), mf_status_name(code), msg);
    if (want1) CHECK(strstr(msg, want1), "%.80s: message '%s' lacks '%s'", tmpl, msg, want1);
    if (want2) CHECK(strstr(msg, want2), "%.80s: message '%s' lacks '%s'", tmpl, msg, want2);
    free(out);
}

static void expect_output(const char *tmpl, const char *conv, const char *want) {
    char *out = NULL;
    mf_status st = render(tmpl, conv, NULL, &out);
    CHECK(st == MF_OK && !strcmp(out, want), "%.80s: got '%s', want '%s'", tmpl, st ? mf_last_error() : out, want);
    free(out);
}

static void test_snippets(void) {
    int pass = 0, n = (int)(sizeof g_cases / sizeof g_cases[0]);
    for (int i = 0; i < n; i++) {
        const char *tmpl = g_cases[i][0], *want = g_cases[i][1];
        char *out = NULL;
        mf_status st = render(tmpl, "{\"messages\": []}", VARS, &out);
        bool ok;
        if (want[0] == '!') {
            char tag[80];
            snprintf(tag, sizeof tag, "%s: ", want + 1);
            ok = st != MF_OK && strstr(mf_last_error(), tag);
            CHECK(ok, "snippet %d %s: want %s, got %s", i, tmpl, want + 1, st ? mf_last_error() : out);
        } else {
            ok = st == MF_OK && !strcmp(out, want);
            CHECK(ok, "snippet %d %s:\n  want '%s'\n  got  '%s'", i, tmpl, want, st ? mf_last_error() : out);
        }
        pass += ok;
        free(out);
    }
    fprintf(stderr, "jinja snippets: %d/%d agree with Jinja2\n", pass, n);
}

static void test_api(void) {
    char *out = (char *)1;
    size_t len = 99;
    const char *conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    const char *chatml = mf_chat_template_chatml();
    mf_chat_params p = mf_chat_default_params();
    CHECK(p.add_generation_prompt && !p.bos_token && !p.eos_token && !p.kwargs_json && !p.now, "default params");
    CHECK(mf_chat_render(chatml, conv, NULL, &out, &len) == MF_OK && len == strlen(out) &&
              !strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
          "ChatML render: %s", out);
    free(out);
    p.add_generation_prompt = false;
    CHECK(mf_chat_render(chatml, conv, &p, &out, NULL) == MF_OK && !strcmp(out, "<|im_start|>user\nhi<|im_end|>\n"), "no generation prompt");
    free(out);
    /* the end-of-turn marker, by probing the template */
    char end[64];
    CHECK(mf_chat_turn_end(chatml, NULL, end, sizeof end) == 10 && !strcmp(end, "<|im_end|>"), "ChatML turn end: '%s'", end);
    CHECK(mf_chat_turn_end("{% for m in messages %}{{ m.content }}{% endfor %}", NULL, end, sizeof end) == 0 && !end[0],
          "a template without a marker: '%s'", end);
    CHECK(mf_chat_turn_end(chatml, NULL, end, 8) == 0, "a marker longer than the buffer is no marker");
    /* variables bound by the caller; kwargs override */
    p = mf_chat_default_params();
    p.bos_token = "B";
    p.kwargs_json = "{\"enable_thinking\": false, \"eos_token\": \"E2\"}";
    CHECK(mf_chat_render("{{ bos_token }}{{ eos_token }}{{ enable_thinking }}{{ tools is none }}{{ documents is none }}", conv, &p, &out, NULL) == MF_OK &&
              !strcmp(out, "BE2FalseTrueTrue"),
          "bound variables: %s", out);
    free(out);
    expect_output("{{ tools|length }}{{ tools[0].function.name }}",
                  "{\"messages\": [], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\"}}]}", "1get");
    /* key order of the input is kept (templates iterate properties in order) */
    expect_output("{% for k, v in messages[0].items() %}{{ k }}{% endfor %}{{ messages[0]|tojson }}",
                  "{\"messages\": [{\"z\": 1, \"a\": 2, \"m\": 3}]}", "zam{\"z\": 1, \"a\": 2, \"m\": 3}");

    /* bad calls and bad JSON */
    CHECK(mf_chat_render(NULL, conv, NULL, &out, NULL) == MF_ERR_INVALID_ARG, "NULL template");
    CHECK(mf_chat_render("x", "{\"messages\": [", NULL, &out, NULL) == MF_ERR_FORMAT && strstr(mf_last_error(), "invalid JSON"),
          "truncated conversation JSON: %s", mf_last_error());
    CHECK(out == NULL, "out is NULL after a failure");
    CHECK(mf_chat_render("x", "[1]", NULL, &out, NULL) == MF_ERR_FORMAT, "conversation not an object");
    CHECK(mf_chat_render("x", "{\"messages\": 3}", NULL, &out, NULL) == MF_ERR_FORMAT && strstr(mf_last_error(), "messages"),
          "messages not an array: %s", mf_last_error());
    p = mf_chat_default_params();
    p.kwargs_json = "{bad";
    CHECK(mf_chat_render("x", conv, &p, &out, NULL) == MF_ERR_FORMAT && strstr(mf_last_error(), "kwargs"), "bad kwargs: %s", mf_last_error());

    /* check without rendering */
    CHECK(mf_chat_check(chatml) == MF_OK, "ChatML checks");
    CHECK(mf_chat_check("{% if x %}{{ x|nosuch }}{% endif %}") == MF_OK, "unknown filter in an if body is a runtime matter");
    CHECK(mf_chat_check("{{ x|nosuch }}") == MF_ERR_FORMAT && strstr(mf_last_error(), "No filter named 'nosuch'"), "%s", mf_last_error());
    CHECK(mf_chat_check("a\nb\n{% for x in y %}") != MF_OK && strstr(mf_last_error(), "line 3") && strstr(mf_last_error(), "endfor"),
          "unclosed for names its line and the missing tag: %s", mf_last_error());

    /* error classes and codes */
    expect_error("line1\n{{ raise_exception('Only user and assistant roles are supported!') }}", MF_ERR_INVALID_ARG,
                 "line 2: TemplateError: Only user and assistant roles are supported!", NULL);
    expect_error("{% include 'other.jinja' %}", MF_ERR_UNSUPPORTED, "{% include %}", "line 1");
    expect_error("{% for x in l recursive %}{% endfor %}", MF_ERR_UNSUPPORTED, "recursive", NULL);
    expect_error("{{ x|batch(2) }}", MF_ERR_UNSUPPORTED, "filter 'batch' is not supported", NULL);
    expect_error("{{ f(*args) }}", MF_ERR_UNSUPPORTED, "*args", NULL);
    expect_error("\n\n{% frobnicate %}", MF_ERR_FORMAT, "line 3", "unknown tag 'frobnicate'");
    expect_error("{{ messages[0].content.items() }}", MF_ERR_FORMAT, "UndefinedError", NULL);
    expect_error("{% set l = [] %}{{ l.append(1) }}", MF_ERR_FORMAT, "SecurityError: access to attribute 'append' of 'list' object is unsafe", NULL);
}

static void test_gguf(void) {
    /* a minimal GGUF v3 file: no tensors, one string KV */
    char path[] = "/tmp/minfer_chat_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    const char *key = "tokenizer.chat_template", *val = "{{ messages[0].content }}!";
    uint32_t ver = 3, type = 8;
    uint64_t nt = 0, nkv = 1, kl = strlen(key), vl = strlen(val);
    fwrite("GGUF", 1, 4, f);
    fwrite(&ver, 4, 1, f);
    fwrite(&nt, 8, 1, f);
    fwrite(&nkv, 8, 1, f);
    fwrite(&kl, 8, 1, f);
    fwrite(key, 1, kl, f);
    fwrite(&type, 4, 1, f);
    fwrite(&vl, 8, 1, f);
    fwrite(val, 1, vl, f);
    fclose(f);
    char *t = NULL;
    const char *warn = "unset";
    CHECK(mf_chat_template_from_gguf(path, &t, &warn) == MF_OK && t && !strcmp(t, val) && warn == NULL,
          "template from GGUF: %s", t ? t : mf_last_error());
    free(t);

    /* the same file without the key: ChatML, with a warning */
    f = fopen(path, "wb");
    nkv = 0;
    fwrite("GGUF", 1, 4, f);
    fwrite(&ver, 4, 1, f);
    fwrite(&nt, 8, 1, f);
    fwrite(&nkv, 8, 1, f);
    fclose(f);
    t = NULL;
    CHECK(mf_chat_template_from_gguf(path, &t, &warn) == MF_OK && t && !strcmp(t, mf_chat_template_chatml()) && warn &&
              strstr(warn, "ChatML"),
          "fallback to ChatML: %s", t ? t : mf_last_error());
    free(t);
    unlink(path);
    CHECK(mf_chat_template_from_gguf("/nonexistent/model.gguf", &t, &warn) != MF_OK, "missing GGUF is an error");
}

static char *repeat(const char *unit, size_t times, const char *head, const char *tail) {
    size_t u = strlen(unit), h = strlen(head), tl = strlen(tail);
    char *s = malloc(h + u * times + tl + 1), *p = s;
    memcpy(p, head, h), p += h;
    for (size_t i = 0; i < times; i++) memcpy(p, unit, u), p += u;
    memcpy(p, tail, tl), p += tl;
    *p = 0;
    return s;
}

static void test_hostile(void) {
    /* deep nesting: parentheses, blocks, operator chains, lists */
    char *s = repeat("(", 100000, "{{ ", "");
    expect_error(s, MF_ERR_FORMAT, "TemplateSyntaxError", NULL);
    free(s);
    s = repeat("{% if true %}", 5000, "", "x");
    expect_error(s, MF_ERR_FORMAT, "nested", NULL);
    free(s);
    s = repeat(" ~ 'a'", 50000, "{{ 'a'", " }}");
    expect_error(s, MF_ERR_FORMAT, "nested too deeply", NULL);
    free(s);
    s = repeat("[", 5000, "{{ ", "");
    expect_error(s, MF_ERR_FORMAT, NULL, NULL);
    free(s);
    s = repeat("not ", 100000, "{{ ", "1 }}");
    expect_error(s, MF_ERR_FORMAT, NULL, NULL);
    free(s);
    s = repeat("|trim", 100000, "{{ 'x'", " }}");
    expect_error(s, MF_ERR_FORMAT, "nested too deeply", NULL);
    free(s);
    /* moderate nesting still works */
    s = repeat("(", 50, "{{ ", "1");
    char *t = repeat(")", 50, s, " }}");
    expect_output(t, "{\"messages\": []}", "1");
    free(s);
    free(t);

    /* runaway work: recursion, huge loops, memory */
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", MF_ERR_FORMAT, "LimitError", "macro");
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", MF_ERR_FORMAT, "LimitError", "steps");
    expect_error("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 MF_ERR_FORMAT, "LimitError", "memory");
    expect_error("{{ 'x' * 1000000000000 }}", MF_ERR_FORMAT, "LimitError", NULL);
    expect_error("{{ [1, 2] * 1000000000000 }}", MF_ERR_FORMAT, "LimitError", NULL);
    expect_error("{{ range(1000000) }}", MF_ERR_FORMAT, "OverflowError", NULL);
    expect_error("{{ 9223372036854775807 + 1 }}", MF_ERR_FORMAT, "OverflowError", NULL);
    expect_error("{{ 2 ** 64 }}", MF_ERR_FORMAT, "OverflowError", NULL);
    expect_error("{{ '%s' % () }}", MF_ERR_FORMAT, "TypeError", NULL);
    expect_error("{{ '{}'.format() }}", MF_ERR_FORMAT, "IndexError", NULL);
    expect_error("{{ '{:999999999d}'.format(1) }}", MF_ERR_FORMAT, "ValueError", NULL);
    expect_error("{{ 'x'|indent(100000000) }}", MF_ERR_FORMAT, "LimitError", NULL);
    expect_error("{{ x|tojson }}", MF_ERR_FORMAT, "TypeError", NULL);
    expect_error("{{ 99999999999999999999999 }}", MF_ERR_FORMAT, "too large", NULL);

    /* unterminated and malformed tags */
    static const char *const broken[] = {
        "{{", "{%", "{#", "{{ x", "{% if", "{% if x %}", "{% for %}", "{% for x in %}", "{% for x y %}", "{{ 'x }}",
        "{{ \"x }}", "{{ x[ }}", "{{ x( }}", "{{ {1: }}", "{{ ) }}", "{{ ] }}", "{% endif %}", "{% elif x %}",
        "{% set x = %}", "{% macro %}", "{% macro m( %}", "{% call %}{% endcall %}", "{% raw %}abc", "{{ x.}}",
        "{{ x|}}", "{{ x is }}", "{{ 1 if }}", "{{ '\\x4' }}", "{{ '\\uZZZZ' }}", "{{ @ }}", "{% filter %}{% endfilter %}",
        "{% set x.y %}{% endset %}", "{% with %}", "{% if x %}{% else %}{% else %}{% endif %}", "{{ x[::] }}{{ y[1:2:3:4] }}",
        "{% for x in y %}{% else %}{% elif %}{% endfor %}", "{{ 0b }}", "{{ 1e }}", "{{ x.1.2 }}",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        char *out = NULL;
        mf_status st = render(broken[i], "{\"messages\": []}", NULL, &out);
        CHECK(st != MF_OK || out, "%s: neither output nor error", broken[i]);
        CHECK(st == MF_OK || mf_last_error()[0], "%s: error without a message", broken[i]);
        free(out);
    }
    expect_error("{{ 'abc", MF_ERR_FORMAT, "unterminated string", NULL);
    expect_error("{% if x %}", MF_ERR_FORMAT, "endif", NULL);
    expect_error("{# never closed", MF_ERR_FORMAT, "comment", NULL);
    expect_error("{% raw %}never closed", MF_ERR_FORMAT, "endraw", NULL);

    /* invalid UTF-8 and control bytes are data, not crashes */
    expect_output("\xff\xfe{{ '\xc3' }}{{ '\xe2\x82'|length }}{{ '\xf0\x9f\x98\x80'|length }}", "{\"messages\": []}", "\xff\xfe\xc3" "21");
}

/* Every prefix of a real template (cut at many points) must parse or fail
 * with a message; so must a template with bytes dropped. */
static void test_truncations(void) {
    static const char *const names[] = {
        "Qwen3-Coder", "google-gemma-4-31B-it", "openai-gpt-oss-120b", "meta-llama-Llama-3.2-3B-Instruct",
        "Kimi-K3", "GLM-4.6", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "deepseek-ai-DeepSeek-V4",
    };
    size_t convn;
    char *convs = test_read_file("../shared/chat/conversations.json", &convn);
    free(convs);
    int renders = 0;
    const char *conv = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"},"
                       " {\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"type\": \"function\", \"function\":"
                       " {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"r\"}],"
                       " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\","
                       " \"properties\": {\"x\": {\"type\": \"integer\"}}}}}]}";
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "../shared/chat/templates/%s.jinja", names[k]);
        size_t n;
        char *t = test_read_file(path, &n);
        if (!t) continue;
        char *cut = malloc(n + 1);
        unsigned seed = 12345u + (unsigned)k;
        for (size_t step = 0; step < 150; step++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % (n + 1);
            /* prefix */
            memcpy(cut, t, at);
            cut[at] = 0;
            char *out = NULL;
            mf_status st = render(cut, conv, NULL, &out);
            CHECK(st == MF_OK || mf_last_error()[0], "%s cut at %zu: error without message", names[k], at);
            free(out);
            /* one byte dropped */
            if (at < n) {
                memcpy(cut, t, at);
                memcpy(cut + at, t + at + 1, n - at - 1);
                cut[n - 1] = 0;
                out = NULL;
                st = render(cut, conv, NULL, &out);
                CHECK(st == MF_OK || mf_last_error()[0], "%s without byte %zu: error without message", names[k], at);
                free(out);
            }
            renders += 2;
        }
        free(cut);
        free(t);
    }
    fprintf(stderr, "truncated/mutated templates: %d renders, none crashed\n", renders);
}

int main(void) {
    test_snippets();
    test_api();
    test_gguf();
    test_hostile();
    test_truncations();
    return test_summary("chat_unit");
}
