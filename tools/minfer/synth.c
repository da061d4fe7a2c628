/* synth.c - `minfer synth --preset NAME --type TYPE -o out.gguf`: a
 * random-weight model of a real shape for benchmarks, through mf_synth(),
 * with a progress bar on a terminal and a one-line summary. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer synth --preset NAME --type TYPE -o out.gguf [options]\n"
            "  Writes a model of a real shape with random weights, for benchmarks: deterministic\n"
            "  for a seed, quantized with llama-quantize's per-tensor rules for TYPE.\n"
            "  --preset NAME     model shape (--list shows them): %s\n"
            "  --type TYPE       %s\n"
            "  -o, --output F    output file\n"
            "  --seed S          random seed (default 1); the same seed gives the same bytes\n"
            "  --vocab F.gguf    copy the tokenizer.* keys of this GGUF instead of generating a\n"
            "                    SentencePiece-style vocabulary (at most the preset's vocabulary\n"
            "                    size; a smaller one is padded with unused tokens)\n"
            "  --chat-template F write the Jinja template in F as tokenizer.chat_template\n"
            "  --extra-layers N  append N layers (1..1024) after the preset's: the preset's tensors\n"
            "                    keep their bytes, so the preset's own file drafts for this one\n"
            "  --extra-scale EPS multiply the extra layers' attn_output and ffn_down by EPS (>= 0,\n"
            "                    default 1; 0 makes them no-ops): the smaller, the more often the\n"
            "                    deeper model's greedy choice is the preset's\n"
            "  -t, --threads N   threads (default: all CPUs)\n"
            "  --dry-run         print every tensor's type and shape and the size; write nothing\n"
            "  --list            list the presets and where their numbers come from\n"
            "  -v, --verbose     fallback notes and one line per tensor\n",
            mf_synth_preset_names(), mf_quantize_type_names());
}

typedef struct ui {
    bool tty, verbose, dry_run;
    int drawn_pct;     /* last percentage drawn, -1 = none */
    int64_t drawn_idx; /* tensor shown with it */
} ui;

static void clear_bar(ui *u) {
    if (u->tty && u->drawn_pct >= 0) {
        fputs("\r\033[K", stderr);
        u->drawn_pct = -1;
    }
}

static bool on_progress(const mf_synth_progress *p, void *ud) {
    ui *u = ud;
    if (p->event == MF_SYNTH_PLAN) {
        if (u->dry_run) {
            char shape[64];
            if (p->n_dims > 1) snprintf(shape, sizeof shape, "%" PRId64 " x %" PRId64, p->ne[0], p->ne[1]);
            else snprintf(shape, sizeof shape, "%" PRId64, p->ne[0]);
            printf("%-32s %-6s %s\n", p->name, p->type, shape);
        }
        return true;
    }
    if (p->event == MF_SYNTH_NOTE) {
        /* fallbacks are many for some shapes (every 896-wide row of
         * qwen2.5-0.5b) and the summary counts them; a padded vocabulary is
         * always worth a line */
        if (u->verbose || p->index < 0) {
            clear_bar(u);
            fprintf(stderr, "minfer synth: %s\n", p->message);
        }
        return true;
    }
    if (u->verbose && p->tensor_done) {
        clear_bar(u);
        fprintf(stderr, "[%4lld/%4lld] %-32s %s\n", (long long)p->index + 1, (long long)p->n_tensors, p->name, p->type);
    }
    if (u->tty) {
        int pct = p->total ? (int)(p->done * 100 / p->total) : 100;
        if (pct != u->drawn_pct || p->index != u->drawn_idx) {
            enum { W = 30 };
            char bar[W + 1];
            int fill = pct * W / 100;
            for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : ' ';
            bar[W] = 0;
            fprintf(stderr, "\r\033[K[%s] %3d%%  %lld/%lld %.40s", bar, pct, (long long)p->index + 1,
                    (long long)p->n_tensors, p->name);
            fflush(stderr);
            u->drawn_pct = pct;
            u->drawn_idx = p->index;
        }
    }
    return true;
}

static bool parse_seed(const char *val, uint64_t *out) {
    if (!val) {
        fprintf(stderr, "minfer synth: option --seed needs a value\n");
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 0);
    if (errno || end == val || *end || val[0] == '-') {
        fprintf(stderr, "minfer synth: --seed expects a non-negative integer, got '%s'\n", val);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

int cmd_synth(int argc, char **argv) {
    mf_synth_params sp = mf_synth_default_params();
    sp.type = NULL;
    const char *out = NULL, *template_path = NULL;
    bool scale_given = false;
    ui u = {.tty = isatty(STDERR_FILENO) != 0, .drawn_pct = -1, .drawn_idx = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--list")) {
            for (int k = 0; mf_synth_preset_desc(k); k++) printf("%s\n", mf_synth_preset_desc(k));
            return 0;
        }
        else if (!strcmp(a, "--dry-run")) sp.dry_run = u.dry_run = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) u.verbose = true;
        else if (!strcmp(a, "--preset") && next) { sp.preset = next; i++; }
        else if (!strcmp(a, "--type") && next) { sp.type = next; i++; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && next) { out = next; i++; }
        else if (!strcmp(a, "--vocab") && next) { sp.vocab_path = next; i++; }
        else if (!strcmp(a, "--chat-template") && next) { template_path = next; i++; }
        else if (!strcmp(a, "--seed")) {
            if (!parse_seed(next, &sp.seed)) return 2;
            i++;
        } else if (!strcmp(a, "--extra-layers")) {
            long n;
            if (!cli_int("synth", a, next, 1, 1024, &n)) return 2;
            sp.extra_layers = (int32_t)n;
            i++;
        } else if (!strcmp(a, "--extra-scale")) {
            double v;
            if (!cli_float("synth", a, next, &v)) return 2;
            if (!(v >= 0.0 && v <= 1e6)) {
                fprintf(stderr, "minfer synth: --extra-scale expects a number from 0 to 1e6, got '%s'\n", next);
                return 2;
            }
            sp.extra_scale = (float)v;
            scale_given = true;
            i++;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            long n;
            if (!cli_int("synth", a, next, 1, 1024, &n)) return 2;
            sp.n_threads = (int32_t)n;
            i++;
        } else {
            fprintf(stderr, "minfer synth: unknown option, missing value or stray argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!sp.preset) {
        fprintf(stderr, "minfer synth: --preset is required (presets: %s)\n", mf_synth_preset_names());
        return 2;
    }
    if (!sp.type) {
        fprintf(stderr, "minfer synth: --type is required (valid: %s)\n", mf_quantize_type_names());
        return 2;
    }
    if (scale_given && sp.extra_layers == 0) {
        fprintf(stderr, "minfer synth: --extra-scale needs --extra-layers N\n");
        return 2;
    }
    if (!out && !sp.dry_run) {
        fprintf(stderr, "minfer synth: -o out.gguf is required\n");
        return 2;
    }
    char *tmpl = NULL;
    if (template_path) {
        tmpl = cli_read_file(template_path, NULL);
        if (!tmpl) {
            fprintf(stderr, "minfer synth: cannot read the chat template %s\n", template_path);
            return 2;
        }
        sp.chat_template = tmpl;
    }
    if (u.dry_run) u.tty = false;
    sp.progress = on_progress;
    sp.progress_ud = &u;

    mf_synth_result r;
    mf_status s = mf_synth(&sp, out, &r);
    free(tmpl);
    clear_bar(&u);
    if (s) {
        fprintf(stderr, "minfer synth: %s\n", mf_last_error());
        return 1;
    }
    char vocab[600];
    if (sp.vocab_path && r.n_vocab_source < r.n_vocab)
        snprintf(vocab, sizeof vocab, "vocab %d (%d from %s, padded)", (int)r.n_vocab, (int)r.n_vocab_source, sp.vocab_path);
    else if (sp.vocab_path) snprintf(vocab, sizeof vocab, "vocab %d from %s", (int)r.n_vocab, sp.vocab_path);
    else snprintf(vocab, sizeof vocab, "vocab %d generated", (int)r.n_vocab);
    const double n = r.n_params ? (double)r.n_params : 1.0;
    if (sp.dry_run) printf("dry run (nothing written): ");
    else printf("wrote %s: ", out);
    char extra[96] = "";
    if (sp.extra_layers > 0)
        snprintf(extra, sizeof extra, " + %d extra layers scaled by %g", (int)sp.extra_layers, (double)sp.extra_scale);
    printf("%s%s (%s) %s, seed %" PRIu64 ", %.2fM params, %lld tensors (%lld fallbacks), %.2f MiB (%.2f bits per "
           "weight), %s, %.2f s\n",
           sp.preset, extra, r.arch, sp.type, sp.seed,
           n / 1e6, (long long)r.n_tensors, (long long)r.n_fallback, (double)r.file_size / (1024.0 * 1024.0),
           (double)r.bytes * 8.0 / n, vocab, r.seconds);
    return 0;
}
