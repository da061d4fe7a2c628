/* perplexity.c - `minfer perplexity`: the perplexity of a model over a text
 * file, measured the way llama-perplexity measures it, so the two can be
 * compared number for number.
 *
 * The text is tokenized once (with BOS) and cut into chunks of n_ctx tokens.
 * Each chunk is evaluated from an empty cache with its first token replaced
 * by BOS, and only its second half is scored: the logits at position j
 * predict the token at j+1 for j in [n_ctx/2, n_ctx-1), so every scored
 * token has at least n_ctx/2 tokens of context. Up to b / n_ctx chunks run
 * as separate sequences of one batch. After each chunk the running estimate
 * exp(mean NLL) is printed as `[i]x,`; the last line is the final estimate
 * with the standard error of the mean NLL carried through exp(). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/timer.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer perplexity -m MODEL.gguf -f TEXT.txt [options]\n"
            "  Perplexity over a text file, computed as llama-perplexity does: chunks of\n"
            "  n_ctx tokens, each starting with BOS, the second half of each scored.\n"
            "  -m, --model FILE       GGUF model\n"
            "  -f, --file FILE        text to score (needs at least 2 * n_ctx tokens)\n"
            "  -c, --n-ctx N          tokens per chunk (default 512)\n"
            "  -b, --batch-size N     tokens per batch (default 2048); b / n_ctx chunks run\n"
            "                         at once as separate sequences\n"
            "  --chunks K             score only the first K chunks (default: all)\n"
            "  -t, --threads N        worker threads (default: all CPUs)\n"
            "  --cache-type T         KV cache type: f16 (default), f32, q8_0\n"
            "  --backend NAME         cpu (default), cpu-ref or cuda; -ngl N|all|auto: the last N layers, all, or as many as fit on the GPU (cuda)\n"
            "  --no-mmap              read the model into memory instead of mapping it\n"
            "  --no-repack            keep the weights in the file's layout (no 16-row interleave)\n"
            "The running estimate after each chunk, `[i]ppl,`, and the line\n"
            "`Final estimate: PPL = x +/- err` go to stdout; a progress bar goes to stderr\n"
            "when it is a terminal.\n");
}

/* Accumulated negative log-likelihood of the scored tokens. */
typedef struct nll_acc {
    double nll, nll2;
    long count;
} nll_acc;

/* -log softmax(logits)[tok], in double: the maximum is subtracted first and
 * the exponentials are summed in index order. */
static double token_nll(const float *logits, int32_t n_vocab, mf_token tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += (double)expf(logits[i] - mx);
    return -((double)(logits[tok] - mx) - log(sum));
}

typedef struct bar {
    bool on;       /* stderr is a terminal */
    bool drawn;
    double t0;
} bar;

static void bar_clear(bar *b) {
    if (b->on && b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        b->drawn = false;
    }
}

static void bar_draw(bar *b, int done, int total) {
    if (!b->on) return;
    enum { W = 30 };
    char cells[W + 1];
    const int fill = total ? done * W / total : W;
    for (int i = 0; i < W; i++) cells[i] = i < fill ? '#' : ' ';
    cells[W] = 0;
    const double el = mf_now() - b->t0;
    fprintf(stderr, "\r\033[K[%s] %d/%d chunks", cells, done, total);
    if (done > 0 && done < total) fprintf(stderr, ", %.1f s left", el / done * (total - done));
    fflush(stderr);
    b->drawn = true;
}

/* Appends printf output to a growing string (the chunk estimates, held back
 * while the progress bar shares the terminal with stdout). */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void emit(sbuf *s, bool hold, const char *txt) {
    const size_t k = strlen(txt);
    if (!hold) {
        fputs(txt, stdout);
        fflush(stdout);
        return;
    }
    if (s->n + k + 1 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        while (nc < s->n + k + 1) nc *= 2;
        char *np = realloc(s->p, nc);
        if (!np) return;
        s->p = np;
        s->cap = nc;
    }
    memcpy(s->p + s->n, txt, k + 1);
    s->n += k;
}

int cmd_perplexity(int argc, char **argv) {
    mf_model_params mp = mf_model_default_params();
    const char *model_path = NULL, *text_path = NULL;
    long n_ctx = 512, n_batch = 2048, max_chunks = -1, n_threads = 0;
    mf_kv_type kv = MF_KV_F16;
    cli_dev dev = CLI_DEV_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define INT_OPT(lo, hi, dst) do { if (!cli_int("perplexity", a, v, lo, hi, &dst)) return 2; i++; } while (0)
        const int dv = cli_dev_opt("perplexity", a, v, &dev);
        if (dv < 0) return 2;
        if (dv) { i++; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { model_path = v; i++; }
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && v) { text_path = v; i++; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--n-ctx") || !strcmp(a, "--ctx-size")) INT_OPT(4, 1L << 20, n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) INT_OPT(1, 1L << 20, n_batch);
        else if (!strcmp(a, "--chunks")) INT_OPT(-1, 1L << 30, max_chunks);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) INT_OPT(0, 512, n_threads);
        else if (!strcmp(a, "--no-mmap")) mp.no_mmap = true;
        else if (!strcmp(a, "--no-repack")) mp.no_repack = true;
        else if (!strcmp(a, "--cache-type")) {
            if (!cli_kv_type("perplexity", v, &kv)) return 2;
            i++;
        } else { fprintf(stderr, "minfer perplexity: unknown option or missing value '%s' (see --help)\n", a); return 2; }
#undef INT_OPT
    }
    if (!model_path) { fprintf(stderr, "minfer perplexity: no model given (-m FILE)\n"); return 2; }
    if (!text_path) { fprintf(stderr, "minfer perplexity: no text given (-f FILE)\n"); return 2; }
    if (max_chunks == 0) { fprintf(stderr, "minfer perplexity: --chunks must be positive (or -1 for all)\n"); return 2; }
    if (!cli_dev_backend("perplexity", &dev, &mp)) return 2;

    int rc = 1;
    char *text = NULL;
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_token *toks = NULL;
    mf_batch batch = {0};
    sbuf held = {0};
    size_t text_len = 0;

    text = cli_read_file(text_path, &text_len);
    if (!text) { fprintf(stderr, "minfer perplexity: cannot read %s: %s\n", text_path, strerror(errno)); goto done; }
    if (mf_model_load(model_path, &mp, &model)) { fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }

    /* the whole file at once, with BOS, special-token texts as plain text */
    int32_t n_tok = mf_tokenize(model, text, text_len, NULL, 0, true, false);
    if (n_tok == INT32_MIN) { fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }
    if (n_tok < 0) {
        const int32_t cap = -n_tok;
        toks = malloc(sizeof *toks * (size_t)cap);
        if (!toks) { fprintf(stderr, "minfer perplexity: out of memory for %d tokens\n", cap); goto done; }
        n_tok = mf_tokenize(model, text, text_len, toks, cap, true, false);
        if (n_tok < 0) { fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }
    }
    free(text);
    text = NULL;
    if ((long)n_tok < 2 * n_ctx) {
        fprintf(stderr,
                "minfer perplexity: %s has %d tokens; at least 2 * n_ctx = %ld are needed (use a smaller -c)\n",
                text_path, n_tok, 2 * n_ctx);
        goto done;
    }
    const int32_t n_train = mf_model_n_ctx_train(model);
    if (n_ctx > n_train) {
        fprintf(stderr, "minfer perplexity: -c %ld is more than the model's training context (%d)\n", n_ctx, n_train);
        goto done;
    }

    const int nc = (int)n_ctx;
    int n_chunk = (int)(n_tok / nc);
    if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = (int)max_chunks;
    int n_seq = n_batch / n_ctx > 1 ? (int)(n_batch / n_ctx) : 1;
    if (n_seq > n_chunk) n_seq = n_chunk; /* no cache for sequences that would never run */

    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (uint32_t)(nc * n_seq);
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_batch = (uint32_t)(n_batch < (long)nc * n_seq ? n_batch : (long)nc * n_seq);
    cp.n_threads = (int32_t)n_threads;
    cp.kv_type = kv;
    if (mf_context_new(model, &cp, &ctx)) { fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }
    if (mf_context_n_ctx(ctx) < (uint32_t)nc) {
        fprintf(stderr, "minfer perplexity: the context holds at most %u positions per sequence, less than -c %d\n",
                mf_context_n_ctx(ctx), nc);
        goto done;
    }
    /* Run fewer chunks at once if the cache cannot hold n_seq of them (an
     * engine that limits the whole cache to the training context). Each
     * sequence's results do not depend on the others in its batch, so the
     * numbers are the same. */
    {
        const uint32_t pages_per_chunk = ((uint32_t)nc + mf_kv_page_size() - 1) / mf_kv_page_size();
        const int fit = (int)(mf_kv_pages_total(ctx) / pages_per_chunk);
        if (fit < n_seq) n_seq = fit > 1 ? fit : 1;
    }
    if (mf_batch_init(&batch, nc * n_seq)) { fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }

    const int32_t n_vocab = mf_model_n_vocab(model);
    const mf_token bos = mf_token_bos(model);
    const bool add_bos = mf_model_add_bos(model) && bos >= 0;
    const int first = nc / 2;
    fprintf(stderr, "minfer perplexity: %d tokens, %d chunks of %d, %d per batch, the last %d tokens of each scored\n",
            n_tok, n_chunk, nc, n_seq, nc - 1 - first);

    bar pb = {.on = isatty(STDERR_FILENO) != 0, .drawn = false, .t0 = mf_now()};
    /* while the bar is drawn on the terminal stdout also writes to, the
     * estimates are held back and printed at the end */
    const bool hold = pb.on && isatty(STDOUT_FILENO);
    nll_acc acc = {0};
    bar_draw(&pb, 0, n_chunk);
    for (int c0 = 0; c0 < n_chunk; c0 += n_seq) {
        const int ns = n_chunk - c0 < n_seq ? n_chunk - c0 : n_seq;
        if (mf_kv_seq_rm(ctx, -1, 0, -1)) { bar_clear(&pb); fprintf(stderr, "minfer perplexity: %s\n", mf_last_error()); goto done; }
        mf_batch_clear(&batch);
        for (int s = 0; s < ns; s++) {
            const mf_token *ct = toks + (size_t)(c0 + s) * nc;
            for (int k = 0; k < nc; k++)
                mf_batch_add(&batch, k == 0 && add_bos ? bos : ct[k], k, s, k >= first);
        }
        if (mf_decode_batch(ctx, &batch)) {
            bar_clear(&pb);
            fprintf(stderr, "minfer perplexity: chunk %d: %s\n", c0 + 1, mf_last_error());
            goto done;
        }
        for (int s = 0; s < ns; s++) {
            const mf_token *ct = toks + (size_t)(c0 + s) * nc;
            for (int j = first; j < nc - 1; j++) {
                const float *lg = mf_get_logits_ith(ctx, s * nc + j);
                if (!lg) {
                    bar_clear(&pb);
                    fprintf(stderr, "minfer perplexity: no logits for chunk %d position %d\n", c0 + s + 1, j);
                    goto done;
                }
                const double v = token_nll(lg, n_vocab, ct[j + 1]);
                acc.nll += v;
                acc.nll2 += v * v;
            }
            acc.count += nc - 1 - first;
            if (!hold) bar_clear(&pb);
            char est[64];
            snprintf(est, sizeof est, "[%d]%.4f,", c0 + s + 1, exp(acc.nll / (double)acc.count));
            emit(&held, hold, est);
        }
        bar_draw(&pb, c0 + ns, n_chunk);
    }
    bar_clear(&pb);
    const double dt = mf_now() - pb.t0;
    if (hold && held.p) fputs(held.p, stdout);
    double nll = acc.nll / (double)acc.count, nll2 = acc.nll2 / (double)acc.count;
    const double ppl = exp(nll);
    nll2 -= nll * nll;
    const double err = nll2 > 0 && acc.count > 1 ? sqrt(nll2 / (double)(acc.count - 1)) * ppl : 0.0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    fflush(stdout);
    fprintf(stderr, "minfer perplexity: %ld tokens scored in %.2f s (%.1f tokens/s evaluated)\n", acc.count, dt,
            dt > 0 ? (double)n_chunk * nc / dt : 0.0);
    rc = 0;
done:
    free(held.p);
    mf_batch_free(&batch);
    free(text);
    free(toks);
    mf_context_free(ctx);
    mf_model_free(model);
    return rc;
}
