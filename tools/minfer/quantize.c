/* quantize.c - `minfer quantize in.gguf out.gguf TYPE`: llama-quantize's
 * conversion (same per-tensor types and bytes) through mf_quantize(), with a
 * progress bar on a terminal and a one-line summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer quantize [options] in.gguf out.gguf TYPE\n"
            "  Converts a model's weights the way llama-quantize does: the same per-tensor\n"
            "  types (mixtures, fallbacks for rows that do not fit a block) and the same bytes.\n"
            "  TYPE (case-insensitive): %s\n"
            "        (Q3_K, Q4_K, Q5_K mean the _M mixtures)\n"
            "  --pure                      no mixture: every quantized tensor gets TYPE's base type\n"
            "  --output-tensor-type T      tensor type for output.weight (q8_0, q6_K, f16, ...)\n"
            "  --token-embedding-type T    tensor type for token_embd.weight\n"
            "  --allow-requantize          also convert tensors that are already quantized\n"
            "  -t, --threads N             threads (default: all CPUs)\n"
            "  -v, --verbose               one line per tensor\n"
            "Sizes in the summary are of the tensor data, as llama-quantize reports them.\n",
            mf_quantize_type_names());
}

typedef struct ui {
    bool tty, verbose;
    int drawn_pct;     /* last percentage drawn, -1 = none */
    int64_t drawn_idx; /* tensor shown with it */
} ui;

static void clear_bar(ui *u) {
    if (u->tty && u->drawn_pct >= 0) {
        fputs("\r\033[K", stderr);
        u->drawn_pct = -1;
    }
}

static bool on_progress(const mf_quantize_progress *p, void *ud) {
    ui *u = ud;
    if (p->event == MF_QUANTIZE_NOTE) {
        clear_bar(u);
        fprintf(stderr, "minfer quantize: %s\n", p->message);
        return true;
    }
    if (u->verbose && p->tensor_done) {
        clear_bar(u);
        fprintf(stderr, "[%4lld/%4lld] %-40s %-6s -> %s\n", (long long)p->index + 1, (long long)p->n_tensors, p->name,
                p->type_in, p->type_out);
    }
    if (u->tty) {
        int pct = p->total_in ? (int)(p->done_in * 100 / p->total_in) : 100;
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

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int cmd_quantize(int argc, char **argv) {
    mf_quantize_params qp = mf_quantize_default_params();
    ui u = {.tty = isatty(STDERR_FILENO) != 0, .drawn_pct = -1, .drawn_idx = -1};
    const char *pos[3];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--pure")) qp.pure = true;
        else if (!strcmp(a, "--allow-requantize")) qp.allow_requantize = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) u.verbose = true;
        else if (!strcmp(a, "--output-tensor-type") && next) { qp.output_tensor_type = next; i++; }
        else if (!strcmp(a, "--token-embedding-type") && next) { qp.token_embedding_type = next; i++; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            long n;
            if (!cli_int("quantize", a, next, 1, 1024, &n)) return 2;
            qp.n_threads = (int32_t)n;
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "minfer quantize: unknown option or missing value '%s' (see --help)\n", a);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "minfer quantize: unexpected argument '%s' (usage: minfer quantize [options] in.gguf out.gguf TYPE)\n", a);
            return 2;
        }
    }
    if (npos < 3) {
        fprintf(stderr, "minfer quantize: expected in.gguf out.gguf TYPE (see --help)\n");
        return 2;
    }
    qp.type = pos[2];
    qp.progress = on_progress;
    qp.progress_ud = &u;

    mf_quantize_result r;
    mf_status s = mf_quantize(pos[0], pos[1], &qp, &r);
    clear_bar(&u);
    if (s) {
        fprintf(stderr, "minfer quantize: %s\n", mf_last_error());
        return 1;
    }
    double n = r.n_elements ? (double)r.n_elements : 1.0;
    printf("quantized %s -> %s as %s: %.2f MiB -> %.2f MiB (%.2f -> %.2f bits per weight), %lld tensors, "
           "%lld converted, %lld fallbacks, %.2f s\n",
           pos[0], pos[1], pos[2], mib(r.bytes_in), mib(r.bytes_out), (double)r.bytes_in * 8.0 / n,
           (double)r.bytes_out * 8.0 / n, (long long)r.n_tensors, (long long)r.n_converted, (long long)r.n_fallback,
           r.seconds);
    return 0;
}
