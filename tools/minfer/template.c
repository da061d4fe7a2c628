/* template.c - `minfer template`: render a chat template over a conversation and print
 * the prompt exactly (for debugging templates, and for tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer template (-m MODEL.gguf | --template FILE) --messages CONV.json [options]\n"
            "\n"
            "Renders the chat template over the conversation and prints the prompt\n"
            "byte for byte (no newline is added).\n"
            "\n"
            "  -m, --model FILE         use the GGUF's tokenizer.chat_template (ChatML if it has none)\n"
            "  --template FILE          use this Jinja template file instead\n"
            "  --messages FILE          {\"messages\": [...], \"tools\": [...]} (OpenAI shape); - = stdin\n"
            "  --no-generation-prompt   add_generation_prompt = false\n"
            "  --bos S, --eos S         values of bos_token / eos_token (default \"\")\n"
            "  --kwargs JSON            extra template variables, e.g. '{\"enable_thinking\": false}'\n"
            "  --date YYYY-MM-DD[THH:MM:SS]  fix the clock strftime_now() reads (UTC)\n");
}

static char *read_all(const char *path) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "minfer template: cannot open %s\n", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    bool err = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || err) {
        fprintf(stderr, "minfer template: cannot read %s\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        fprintf(stderr, "minfer template: %s contains a NUL byte\n", path);
        free(buf);
        return NULL;
    }
    return buf;
}

/* "2024-07-26" or "2024-07-26T13:05:00" -> seconds since the epoch (UTC) */
static bool parse_date(const char *s, int64_t *out) {
    int y, mo, d, h = 0, mi = 0, se = 0, used = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3) return false;
    if (s[used] == 'T' || s[used] == ' ') {
        int u2 = 0;
        if (sscanf(s + used + 1, "%2d:%2d:%2d%n", &h, &mi, &se, &u2) != 3) return false;
        used += 1 + u2;
    }
    if (s[used] || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970) return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = se};
    time_t t = timegm(&tm);
    if (t <= 0) return false;
    *out = (int64_t)t;
    return true;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *tmpl_path = NULL, *conv_path = NULL;
    mf_chat_params p = mf_chat_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--template")) tmpl_path = val;
        else if (!strcmp(a, "--messages")) conv_path = val;
        else if (!strcmp(a, "--bos")) p.bos_token = val;
        else if (!strcmp(a, "--eos")) p.eos_token = val;
        else if (!strcmp(a, "--kwargs")) p.kwargs_json = val;
        else if (!strcmp(a, "--date")) {
            if (val && !parse_date(val, &p.now)) {
                fprintf(stderr, "minfer template: --date expects YYYY-MM-DD[THH:MM:SS], got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--no-generation-prompt")) {
            p.add_generation_prompt = false;
            takes = false;
        } else {
            fprintf(stderr, "minfer template: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (takes) {
            if (!val) {
                fprintf(stderr, "minfer template: option %s needs a value\n", a);
                return 2;
            }
            i++;
        }
    }
    if (!model == !tmpl_path) {
        fprintf(stderr, "minfer template: give exactly one of -m MODEL.gguf or --template FILE (see --help)\n");
        return 2;
    }
    if (!conv_path) {
        fprintf(stderr, "minfer template: --messages CONV.json is required (see --help)\n");
        return 2;
    }
    char *tmpl = NULL;
    if (model) {
        const char *warning = NULL;
        if (mf_chat_template_from_gguf(model, &tmpl, &warning)) {
            fprintf(stderr, "minfer template: %s\n", mf_last_error());
            return 1;
        }
        if (warning) fprintf(stderr, "minfer template: warning: %s: %s\n", model, warning);
    } else if (!(tmpl = read_all(tmpl_path))) {
        return 1;
    }
    char *conv = read_all(conv_path);
    if (!conv) {
        free(tmpl);
        return 1;
    }
    char *out = NULL;
    size_t n = 0;
    mf_status st = mf_chat_render(tmpl, conv, &p, &out, &n);
    free(tmpl);
    free(conv);
    if (st) {
        fprintf(stderr, "minfer template: %s\n", mf_last_error());
        return 1;
    }
    bool ok = fwrite(out, 1, n, stdout) == n && fflush(stdout) == 0;
    free(out);
    if (!ok) {
        fprintf(stderr, "minfer template: cannot write the output\n");
        return 1;
    }
    return 0;
}
