/* test_chat_golden.c - every template x conversation in ../shared/chat/golden renders
 * byte-identical to what transformers produced, or fails where transformers failed. */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "minfer.h"
#include "testutil.h"

#define CHAT_DIR "../shared/chat/"
/* strftime_now() is frozen at 2024-07-26 00:00:00 in the goldens */
#define GOLDEN_NOW 1721952000

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Where the strings first differ, for a readable failure. */
static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "    first difference at byte %zu\n    want: %.120s\n    got:  %.120s\n", i, want + from, got + from);
}

int main(void) {
    json_error_t je;
    size_t n;
    char *convs_text = test_read_file(CHAT_DIR "conversations.json", &n);
    if (!convs_text) return test_summary("chat_golden");
    json_t *convs = json_loadb(convs_text, n, 0, &je);
    CHECK(convs, "conversations.json: %s", je.text);
    if (!convs) return test_summary("chat_golden");

    DIR *d = opendir(CHAT_DIR "golden");
    CHECK(d, "missing " CHAT_DIR "golden");
    if (!d) return test_summary("chat_golden");
    char *names[256];
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    CHECK(nn >= 68, "expected the 68 golden files, found %zu", nn);

    int total_out = 0, pass_out = 0, total_err = 0, pass_err = 0, templates_ok = 0;
    for (size_t t = 0; t < nn; t++) {
        char path[512];
        snprintf(path, sizeof path, CHAT_DIR "golden/%s", names[t]);
        json_t *g = json_load_file(path, 0, &je);
        CHECK(g, "%s: %s", path, je.text);
        if (!g) continue;
        const char *tname = json_string_value(json_object_get(g, "template"));
        snprintf(path, sizeof path, CHAT_DIR "templates/%s", tname ? tname : "?");
        char *tmpl = test_read_file(path, NULL);
        if (!tmpl) {
            json_decref(g);
            continue;
        }
        const char *bos = json_string_value(json_object_get(g, "bos_token"));
        const char *eos = json_string_value(json_object_get(g, "eos_token"));
        json_t *cases = json_object_get(g, "cases");
        int ok = 0, cnt = 0;
        size_t ci;
        json_t *c;
        json_array_foreach(cases, ci, c) {
            const char *id = json_string_value(json_object_get(c, "case"));
            json_t *conv = NULL, *cc;
            size_t k;
            json_array_foreach(json_object_get(convs, "cases"), k, cc)
                if (!strcmp(json_string_value(json_object_get(cc, "case")), id)) conv = cc;
            CHECK(conv, "%s: case %s not in conversations.json", tname, id);
            if (!conv) continue;
            json_t *req = json_object();
            json_object_set(req, "messages", json_object_get(conv, "messages"));
            json_object_set(req, "tools", json_object_get(conv, "tools"));
            char *req_text = json_dumps(req, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
            json_t *kw = json_object_get(c, "extra_kwargs");
            char *kw_text = kw && json_object_size(kw) ? json_dumps(kw, JSON_PRESERVE_ORDER) : NULL;
            mf_chat_params p = mf_chat_default_params();
            p.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
            p.bos_token = bos;
            p.eos_token = eos;
            p.kwargs_json = kw_text;
            p.now = GOLDEN_NOW;
            char *out = NULL;
            mf_status st = mf_chat_render(tmpl, req_text, &p, &out, NULL);
            const char *want = json_string_value(json_object_get(c, "output"));
            const char *want_err = json_string_value(json_object_get(c, "error"));
            const char *want_type = json_string_value(json_object_get(c, "error_type"));
            bool good;
            cnt++;
            if (want) {
                total_out++;
                good = st == MF_OK && !strcmp(out, want);
                CHECK(good, "%s case %s%s: %s", tname, id, kw_text ? " (+kwargs)" : "",
                      st ? mf_last_error() : "output differs");
                if (!good && st == MF_OK) show_diff(want, out);
                pass_out += good;
            } else {
                total_err++;
                /* must fail; the Python exception class is part of our message,
                 * and raise_exception() text must come through verbatim */
                char type_tag[64];
                snprintf(type_tag, sizeof type_tag, "%s: ", want_type ? want_type : "?");
                const char *msg = mf_last_error();
                good = st != MF_OK && strstr(msg, type_tag) &&
                       (strcmp(want_type, "TemplateError") || strstr(msg, want_err));
                CHECK(good, "%s case %s: expected %s (%s), got %s", tname, id, want_type, want_err,
                      st ? msg : "a rendered prompt");
                pass_err += good;
            }
            ok += good;
            free(out);
            free(req_text);
            free(kw_text);
            json_decref(req);
        }
        if (ok == cnt) templates_ok++;
        else fprintf(stderr, "  %-50s %d/%d\n", tname, ok, cnt);
        free(tmpl);
        json_decref(g);
    }
    fprintf(stderr, "chat golden: %d/%zu templates fully pass; outputs %d/%d byte-identical; errors %d/%d raised as golden\n",
            templates_ok, nn, pass_out, total_out, pass_err, total_err);
    for (size_t t = 0; t < nn; t++) free(names[t]);
    json_decref(convs);
    free(convs_text);
    return test_summary("chat_golden");
}
