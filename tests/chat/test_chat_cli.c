/* test_chat_cli.c - `minfer template` prints golden renders byte for byte and fails
 * with one clear stderr line and a non-zero exit on bad input. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char g_tmp[32][64];
static int g_ntmp;

static const char *write_tmp(const char *data, size_t n) {
    if (g_ntmp == 32) return "/dev/null";
    char *p = g_tmp[g_ntmp++];
    strcpy(p, "/tmp/minfer_cli_XXXXXX");
    int fd = mkstemp(p);
    if (fd < 0 || write(fd, data, n) != (ssize_t)n) fprintf(stderr, "cannot write %s\n", p);
    if (fd >= 0) close(fd);
    return p;
}

static json_t *find_case(json_t *arr, const char *id, json_t *kwargs_want, bool want_kwargs) {
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "case")), id)) continue;
        json_t *kw = json_object_get(c, "extra_kwargs");
        bool has = kw && json_object_size(kw);
        if (has == want_kwargs && (!want_kwargs || json_equal(kw, kwargs_want))) return c;
    }
    return NULL;
}

static char g_out[1 << 20];

/* Renders golden case `id` of `tmpl` through the CLI and compares bytes. */
static void golden_case(json_t *convs, const char *tmpl, const char *id, const char *kwargs, const char *extra_flags) {
    char path[512];
    snprintf(path, sizeof path, "../shared/chat/golden/%s.json", tmpl);
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    CHECK(g, "%s: %s", path, je.text);
    if (!g) return;
    json_t *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    json_t *gc = find_case(json_object_get(g, "cases"), id, kw, kw != NULL);
    json_t *conv = find_case(json_object_get(convs, "cases"), id, NULL, false);
    CHECK(gc && conv, "%s case %s missing", tmpl, id);
    if (gc && conv) {
        json_t *req = json_pack("{s:O, s:O}", "messages", json_object_get(conv, "messages"), "tools", json_object_get(conv, "tools"));
        char *text = json_dumps(req, JSON_PRESERVE_ORDER);
        const char *conv_path = write_tmp(text, strlen(text));
        const char *want = json_string_value(json_object_get(gc, "output"));
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' template --template ../shared/chat/templates/%s.jinja --messages %s --bos '%s' --eos '%s' %s%s%s%s %s",
                 test_minfer_bin(), tmpl, conv_path, json_string_value(json_object_get(g, "bos_token")),
                 json_string_value(json_object_get(g, "eos_token")), json_is_true(json_object_get(gc, "add_generation_prompt")) ? "" : "--no-generation-prompt",
                 kwargs ? " --kwargs '" : "", kwargs ? kwargs : "", kwargs ? "'" : "", extra_flags);
        int rc = test_run(cmd, g_out, sizeof g_out);
        CHECK(rc == 0, "%s: exit %d", cmd, rc);
        CHECK(want && !strcmp(g_out, want), "%s case %s: CLI output differs from the golden\n  got: %.300s", tmpl, id, g_out);
        free(text);
        json_decref(req);
    }
    json_decref(kw);
    json_decref(g);
}

/* Runs a command expected to fail: exit code and a single stderr line containing `want`. */
static void expect_fail(const char *args, int want_rc, const char *want) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' template %s 2>&1 >/dev/null", test_minfer_bin(), args);
    int rc = test_run(cmd, g_out, sizeof g_out);
    size_t lines = 0;
    for (const char *p = g_out; *p; p++) lines += *p == '\n';
    CHECK(rc == want_rc, "minfer template %s: exit %d, want %d (%s)", args, rc, want_rc, g_out);
    CHECK(lines == 1 && strstr(g_out, want), "minfer template %s: stderr '%s' should be one line with '%s'", args, g_out, want);
}

int main(void) {
    size_t n;
    char *convs_text = test_read_file("../shared/chat/conversations.json", &n);
    json_t *convs = convs_text ? json_loadb(convs_text, n, 0, NULL) : NULL;
    CHECK(convs, "conversations.json");
    if (convs) {
        golden_case(convs, "Qwen-Qwen3-0.6B", "c", NULL, "");
        golden_case(convs, "Qwen-Qwen3-0.6B", "a", "{\"enable_thinking\": false}", "");
        golden_case(convs, "Qwen-Qwen3-0.6B", "f", NULL, "");                       /* --no-generation-prompt */
        golden_case(convs, "meta-llama-Llama-3.2-3B-Instruct", "e", NULL, "--date 2024-07-26"); /* strftime_now */
        golden_case(convs, "google-gemma-4-31B-it", "h", NULL, "");
    }

    const char *conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    const char *conv_path = write_tmp(conv, strlen(conv));
    const char *bad_json = write_tmp("{\"messages\": [", 14);
    char args[512];

    expect_fail("", 2, "exactly one of");
    expect_fail("--template x.jinja", 2, "--messages");
    snprintf(args, sizeof args, "-m a.gguf --template b.jinja --messages %s", conv_path);
    expect_fail(args, 2, "exactly one of");
    expect_fail("--frobnicate", 2, "unknown option '--frobnicate'");
    expect_fail("--messages", 2, "needs a value");
    snprintf(args, sizeof args, "--template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --messages %s --date tomorrow", conv_path);
    expect_fail(args, 2, "--date");
    snprintf(args, sizeof args, "--template /nonexistent/t.jinja --messages %s", conv_path);
    expect_fail(args, 1, "cannot open /nonexistent/t.jinja");
    expect_fail("--template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --messages /nonexistent/c.json", 1, "cannot open");
    snprintf(args, sizeof args, "--template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --messages %s", bad_json);
    expect_fail(args, 1, "invalid JSON");
    snprintf(args, sizeof args, "--template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --messages %s --kwargs '{oops'", conv_path);
    expect_fail(args, 1, "kwargs");
    snprintf(args, sizeof args, "-m /nonexistent/model.gguf --messages %s", conv_path);
    expect_fail(args, 1, "/nonexistent/model.gguf");
    /* the template itself refuses the conversation (gemma 2 has no system role) */
    const char *sys = "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]}";
    const char *sys_path = write_tmp(sys, strlen(sys));
    snprintf(args, sizeof args, "--template ../shared/chat/templates/google-gemma-2-2b-it.jinja --messages %s", sys_path);
    expect_fail(args, 1, "TemplateError: System role not supported");
    const char *bad_tmpl = write_tmp("line one\n{% for x in messages %}", 32);
    snprintf(args, sizeof args, "--template %s --messages %s", bad_tmpl, conv_path);
    expect_fail(args, 1, "line 2");

    /* a GGUF without a template: ChatML, and a warning on stderr */
    static const unsigned char gguf[24] = {'G', 'G', 'U', 'F', 3};
    const char *gguf_path = write_tmp((const char *)gguf, sizeof gguf);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' template -m %s --messages %s 2>/dev/null", test_minfer_bin(), gguf_path, conv_path);
    CHECK(test_run(cmd, g_out, sizeof g_out) == 0 && !strcmp(g_out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
          "ChatML fallback output: %s", g_out);
    snprintf(cmd, sizeof cmd, "'%s' template -m %s --messages %s 2>&1 >/dev/null", test_minfer_bin(), gguf_path, conv_path);
    test_run(cmd, g_out, sizeof g_out);
    CHECK(strstr(g_out, "warning") && strstr(g_out, "ChatML"), "fallback warning: %s", g_out);

    for (int i = 0; i < g_ntmp; i++) unlink(g_tmp[i]);
    json_decref(convs);
    free(convs_text);
    return test_summary("chat_cli");
}
