/* run.c - `minfer run`: one-shot generation streamed to stdout; with --cnv
 * it hands the parsed options to the chat loop in chat.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/env.h"
#include "core/timer.h"
#include "minfer.h"
#include "run.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer run -m MODEL.gguf [-p PROMPT] [options]\n"
            "       minfer run -m MODEL.gguf --cnv [-sys TEXT] [--session FILE] [options]\n"
            "  -m, --model FILE       GGUF model to run\n"
            "  -p, --prompt TEXT      prompt (read from stdin when absent); with --cnv the first message\n"
            "  -n, --n-predict N      tokens to generate (default 128, -1 = until EOS or context full;\n"
            "                         with --cnv per reply, default -1)\n"
            "  -t, --threads N        worker threads (default: all CPUs)\n"
            "  -c, --n-ctx N          context size (default 4096, clamped to the model's)\n"
            "  -b, --batch-size N     max tokens per forward pass (default 512)\n"
            "  --cache-type T         KV cache type: f16 (default), f32, q8_0\n"
            "  -s, --seed N           sampling seed (default 0xdeadbeef)\n"
            "  --temp T               temperature (default 0.8; 0 = greedy)\n"
            "  --top-k N              top-k (default 40; 0 = off)\n"
            "  --top-p P              top-p (default 0.95; 1 = off)\n"
            "  --min-p P              min-p (default 0.05; 0 = off)\n"
            "  --repeat-penalty R     repetition penalty (default 1.0 = off)\n"
            "  --repeat-last-n N      tokens the penalties look back over (default 64)\n"
            "  --frequency-penalty F  (default 0)\n"
            "  --presence-penalty F   (default 0)\n"
            "  --ignore-eos           keep generating past end-of-generation tokens\n"
            "  --no-bos               do not prepend BOS even if the model asks for it\n"
            "  --no-mmap              read the model into memory (2 MiB pages) instead of mapping it\n"
            "  --no-repack            keep the weights in the file's layout (no 16-row interleave for decode)\n"
            "  --grammar TEXT         constrain the output to a GBNF grammar (llama.cpp's format, start rule root)\n"
            "  --grammar-file F       the same, read from a file\n"
            "  --json                 constrain the output to one JSON value\n"
            "  --json-schema F        constrain the output to JSON valid under the JSON Schema in F\n"
            "  -md, --draft-model F   speculative decoding with F (same vocabulary) drafting for -m\n"
            "  --lookup               speculative decoding with drafts looked up in the context (no second model)\n"
            "  --draft-max N          tokens per draft at most (default 16; --lookup: 8)\n"
            "  --draft-min N          drafts shorter than N are not tried (default 0)\n"
            "  --draft-p-min P        the draft model stops below this top probability (default 0.75)\n"
            "  --lookup-ngram MIN,MAX n-gram lengths --lookup matches, longest first (default 2,4)\n"
            "  --verbose              explain backend and kernel choices (chat: prefill per turn)\n"
            "  --backend NAME         cpu (default), cpu-ref or cuda\n"
            "  -ngl N|all|auto        layers on the GPU (cuda): all, the last N (the first ones on the CPU), or as many as fit; 0: the CPU\n"
            "  --ffn dense|walk       walk: each FFN runs over only the top-K gate features of a vindex\n"
            "  --walk-k K[%%]          features per token for --ffn walk (a count, or a percentage; default all)\n"
            "  --vindex DIR           the vindex for --ffn walk (default: -m when it names a vindex directory)\n"
            "  --patch FILE.vlp       apply a vindex patch (deleted, inserted, rewritten features): to the walk\n"
            "                         FFN, or without --ffn walk to the model's own dense FFN (-m or --vindex DIR)\n"
            "  --hnsw, --hnsw-m M, --hnsw-ef EF, --hnsw-efc N, --hnsw-no-cache\n"
            "                         --ffn walk's top-K through per-layer HNSW graphs (approximate; mapped from the\n"
            "                         vindex's hnsw_m<M>_efc<N>.bin if `minfer vindex hnsw` saved it, else built on first\n"
            "                         use; M links per node, default 16; beam EF, default 64, at least K; build beam N)\n"
            "Prefill and decode speed go to stderr at the end; MINFER_TIMING=1 adds per-token times.\n"
            "\n"
            "chat mode (reads one message per line from stdin; a line ending in \\ continues):\n"
            "  -cnv, --cnv            multi-turn chat with the model's chat template\n"
            "  -sys, --system TEXT    system message\n"
            "  --chat-template FILE   Jinja template to use instead of the GGUF's\n"
            "  --think, --no-think    enable_thinking = true / false for templates that read it\n"
            "  --session FILE         restore the conversation and KV cache from FILE (if it exists)\n"
            "                         and save both there on exit: resuming prefills nothing\n"
            "  commands: /clear /regen /exit /help; Ctrl-C stops a reply, twice at the prompt exits\n");
}

/* Writes the complete UTF-8 prefix of the pending bytes, keeps the rest. */
static void flush_utf8(char *pend, size_t *np, bool all) {
    size_t ok = all ? *np : mf_utf8_complete(pend, *np);
    if (ok) {
        fwrite(pend, 1, ok, stdout);
        fflush(stdout);
        memmove(pend, pend + ok, *np - ok);
        *np -= ok;
    }
}

/* Records a generated token in the penalty history and streams its text. */
static void emit_token(const mf_model *model, mf_sampler *smp, mf_token t, char *pend, size_t *np) {
    mf_sampler_accept(smp, t);
    char piece[256];
    int32_t len = mf_token_to_piece(model, t, piece, sizeof piece, false);
    if (len > 0) {
        if (*np + (size_t)len > 256) flush_utf8(pend, np, true);
        memcpy(pend + *np, piece, (size_t)len);
        *np += (size_t)len;
        flush_utf8(pend, np, false);
    }
}

/* With a draft model, target and draft share one pool, and the walk FFN's
 * vindex uses the context's: two pools would take turns spinning on the same
 * cores. */
static mf_threadpool *g_pool;
mf_threadpool *run_pool(void) { return g_pool; }

/* The walk FFN outlives every context of the process (freed at exit). */
static mf_vindex *g_walk_vindex;
static mf_walk *g_walk;

static void walk_free(void) {
    mf_walk_free(g_walk);
    mf_vindex_free(g_walk_vindex);
}

static bool walk_open(const run_opts *o, const mf_model *model) {
    const char *dir = o->vindex ? o->vindex : o->model_path;
    if (mf_vindex_open(dir, &g_walk_vindex)) {
        fprintf(stderr, "minfer run: --ffn walk: %s\n", mf_last_error());
        return false;
    }
    atexit(walk_free);
    /* the context's pool (run_open makes it shared for the walk) */
    if (mf_vindex_set_threadpool(g_walk_vindex, g_pool)) {
        fprintf(stderr, "minfer run: --ffn walk: %s\n", mf_last_error());
        return false;
    }
    if (!cli_hnsw_apply("run", &o->hnsw, g_walk_vindex)) return false;
    if (o->patch && mf_vindex_apply_patch(g_walk_vindex, o->patch)) {
        fprintf(stderr, "minfer run: --patch: %s\n", mf_last_error());
        return false;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(g_walk_vindex, &vi);
    long k = o->walk_k_pct ? (o->walk_k * vi.n_features + 99) / 100 : o->walk_k;
    if (o->walk ? mf_walk_new(g_walk_vindex, model, (int32_t)k, &g_walk) : mf_walk_new_overlay(g_walk_vindex, model, &g_walk)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        return false;
    }
    if (o->verbose && !o->walk) fprintf(stderr, "minfer: dense FFN with the edits of %s\n", o->patch);
    else if (o->verbose)
        fprintf(stderr, "minfer: walk FFN over %ld of %d features per layer from %s\n", k ? k : vi.n_features,
                vi.n_features, dir);
    return true;
}

bool run_open(const run_opts *o, mf_model **model, mf_context **ctx) {
    *model = NULL;
    *ctx = NULL;
    mf_model_params mp = mf_model_default_params();
    mp.verbose = o->verbose;
    mp.no_mmap = o->no_mmap;
    mp.no_repack = o->no_repack;
    if (!cli_dev_backend("run", &o->dev, &mp)) return false;
    double t_load = mf_now();
    if (mf_model_load(o->model_path, &mp, model)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        return false;
    }
    if (o->verbose) fprintf(stderr, "minfer: %s (loaded in %.1f ms)\n", mf_model_desc(*model), (mf_now() - t_load) * 1e3);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (int32_t)o->n_threads;
    cp.kv_type = o->kv;
    cp.verbose = o->verbose;
    /* shared with a draft model, or with the walk FFN's vindex: two pools would
     * take turns spinning on the same cores */
    if ((o->draft_model || o->walk || o->patch) && !g_pool && mf_threadpool_new((int32_t)o->n_threads, &g_pool)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        mf_model_free(*model);
        *model = NULL;
        return false;
    }
    cp.threadpool = g_pool;
    if (o->walk || o->patch) {
        if (!walk_open(o, *model)) {
            mf_model_free(*model);
            *model = NULL;
            return false;
        }
        cp.ffn_cb = mf_walk_ffn;
        cp.ffn_ud = g_walk;
    }
    if (mf_context_new(*model, &cp, ctx)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        mf_model_free(*model);
        *model = NULL;
        return false;
    }
    return true;
}

/* Fills *o from the command line; returns -1 to go on, else an exit status. */
static int parse_opts(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->dev = (cli_dev)CLI_DEV_INIT;
    o->think = -1;
    o->sp = mf_sampler_default_params();
    o->kv = mf_context_default_params().kv_type;
    o->draft_max = -1;
    o->draft_p_min = 0.75f;
    o->lookup_ngram_min = 2;
    o->lookup_ngram_max = 4;
    mf_sampler_params *sp = &o->sp;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long iv;
        double dv;
#define INT_OPT(lo, hi, dst) do { if (!cli_int("run", a, v, lo, hi, &iv)) return 2; dst = iv; i++; } while (0)
#define FLT_OPT(dst) do { if (!cli_float("run", a, v, &dv)) return 2; dst = (float)dv; i++; } while (0)
#define STR_OPT(dst) do { if (!v) goto missing; dst = v; i++; } while (0)
        const int hn = cli_hnsw_opt("run", a, v, &o->hnsw);
        if (hn < 0) return 2;
        if (hn) {
            i += hn - 1;
            continue;
        }
        const int dev_opt = cli_dev_opt("run", a, v, &o->dev);
        if (dev_opt < 0) return 2;
        if (dev_opt) { i++; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) STR_OPT(o->model_path);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) STR_OPT(o->prompt);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { INT_OPT(-1, 1L << 30, o->n_predict); o->n_predict_set = true; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) INT_OPT(0, 512, o->n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--n-ctx")) INT_OPT(0, 1L << 24, o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) INT_OPT(1, 1L << 16, o->n_batch);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) { if (!cli_int("run", a, v, 0, 0x7fffffffffffffffL, &iv)) return 2; sp->seed = (uint64_t)iv; i++; }
        else if (!strcmp(a, "--temp")) FLT_OPT(sp->temp);
        else if (!strcmp(a, "--top-k")) INT_OPT(0, 1L << 30, sp->top_k);
        else if (!strcmp(a, "--top-p")) FLT_OPT(sp->top_p);
        else if (!strcmp(a, "--min-p")) FLT_OPT(sp->min_p);
        else if (!strcmp(a, "--repeat-penalty")) FLT_OPT(sp->repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) INT_OPT(0, 1L << 20, sp->penalty_last_n);
        else if (!strcmp(a, "--frequency-penalty")) FLT_OPT(sp->freq_penalty);
        else if (!strcmp(a, "--presence-penalty")) FLT_OPT(sp->presence_penalty);
        else if (!strcmp(a, "--cache-type")) {
            if (!v) goto missing;
            if (!cli_kv_type("run", v, &o->kv)) return 2;
            i++;
        }
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = true;
        else if (!strcmp(a, "--no-bos")) o->no_bos = true;
        else if (!strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "--no-mmap")) o->no_mmap = true;
        else if (!strcmp(a, "--no-repack")) o->no_repack = true;
        else if (!strcmp(a, "--ffn")) {
            if (!v) goto missing;
            if (strcmp(v, "dense") && strcmp(v, "walk")) { fprintf(stderr, "minfer run: --ffn must be dense or walk (got '%s')\n", v); return 2; }
            o->walk = !strcmp(v, "walk");
            i++;
        }
        else if (!strcmp(a, "--vindex")) STR_OPT(o->vindex);
        else if (!strcmp(a, "--patch")) STR_OPT(o->patch);
        else if (!strcmp(a, "--walk-k")) {
            if (!v) goto missing;
            char num[32];
            size_t n = strlen(v);
            o->walk_k_pct = n && v[n - 1] == '%';
            snprintf(num, sizeof num, "%.*s", (int)(o->walk_k_pct ? n - 1 : n), v);
            if (!cli_int("run", a, num, 0, o->walk_k_pct ? 100 : 1L << 30, &iv)) return 2;
            o->walk_k = iv;
            i++;
        }
        else if (!strcmp(a, "-cnv") || !strcmp(a, "--cnv") || !strcmp(a, "--conversation")) o->cnv = true;
        else if (!strcmp(a, "-sys") || !strcmp(a, "--system")) STR_OPT(o->system);
        else if (!strcmp(a, "--chat-template")) STR_OPT(o->chat_template);
        else if (!strcmp(a, "--session")) STR_OPT(o->session);
        else if (!strcmp(a, "--think")) o->think = 1;
        else if (!strcmp(a, "--no-think")) o->think = 0;
        else if (!strcmp(a, "--grammar")) STR_OPT(o->grammar);
        else if (!strcmp(a, "--grammar-file")) STR_OPT(o->grammar_file);
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--json-schema")) STR_OPT(o->json_schema);
        else if (!strcmp(a, "-md") || !strcmp(a, "--draft-model") || !strcmp(a, "--model-draft")) STR_OPT(o->draft_model);
        else if (!strcmp(a, "--lookup")) o->lookup = true;
        else if (!strcmp(a, "--draft-max") || !strcmp(a, "--draft")) INT_OPT(1, 256, o->draft_max);
        else if (!strcmp(a, "--draft-min")) INT_OPT(0, 256, o->draft_min);
        else if (!strcmp(a, "--draft-p-min")) FLT_OPT(o->draft_p_min);
        else if (!strcmp(a, "--lookup-ngram")) {
            if (!v) goto missing;
            int lo, hi, used = 0;
            if (sscanf(v, "%d,%d%n", &lo, &hi, &used) != 2 || v[used] || lo < 1 || hi < lo || hi > 64) {
                fprintf(stderr, "minfer run: --lookup-ngram takes MIN,MAX with 1 <= MIN <= MAX <= 64 (got '%s')\n", v);
                return 2;
            }
            o->lookup_ngram_min = lo;
            o->lookup_ngram_max = hi;
            i++;
        }
        else { fprintf(stderr, "minfer run: unknown option '%s' (see --help)\n", a); return 2; }
        continue;
    missing:
        fprintf(stderr, "minfer run: option %s needs a value\n", a);
        return 2;
#undef INT_OPT
#undef FLT_OPT
#undef STR_OPT
    }
    if (!o->model_path) { fprintf(stderr, "minfer run: no model given (-m FILE)\n"); return 2; }
    if (o->walk_k && !o->walk) { fprintf(stderr, "minfer run: --walk-k needs --ffn walk\n"); return 2; }
    if ((o->hnsw.on || o->hnsw.m || o->hnsw.ef || o->hnsw.efc || o->hnsw.no_cache) && !o->walk) {
        fprintf(stderr, "minfer run: --hnsw and its options need --ffn walk\n");
        return 2;
    }
    if (o->vindex && !o->walk && !o->patch) { fprintf(stderr, "minfer run: --vindex needs --ffn walk or --patch\n"); return 2; }
    if (sp->repeat_penalty <= 0) { fprintf(stderr, "minfer run: --repeat-penalty must be > 0\n"); return 2; }
    if (!o->cnv && (o->system || o->chat_template || o->session || o->think >= 0)) {
        fprintf(stderr, "minfer run: -sys, --chat-template, --session and --think/--no-think need --cnv\n");
        return 2;
    }
    if (o->cnv && (o->grammar || o->grammar_file || o->json || o->json_schema)) {
        fprintf(stderr, "minfer run: --grammar, --grammar-file, --json and --json-schema do not work with --cnv\n");
        return 2;
    }
    if (o->draft_model && o->lookup) { fprintf(stderr, "minfer run: --draft-model and --lookup exclude each other\n"); return 2; }
    if (o->draft_max < 0) o->draft_max = o->lookup ? 8 : 16;
    if (o->draft_min > o->draft_max) { fprintf(stderr, "minfer run: --draft-min %ld exceeds --draft-max %ld\n", o->draft_min, o->draft_max); return 2; }
    if (!(o->draft_p_min >= 0 && o->draft_p_min <= 1)) { fprintf(stderr, "minfer run: --draft-p-min must be in [0, 1]\n"); return 2; }
    if (o->cnv && (o->draft_model || o->lookup)) {
        fprintf(stderr, "minfer run: --draft-model and --lookup do not work with --cnv\n");
        return 2;
    }
    return -1;
}

int cmd_run(int argc, char **argv) {
    run_opts opts;
    int prc = parse_opts(argc, argv, &opts);
    if (prc >= 0) return prc;
    if (opts.cnv) return run_chat(&opts);
    mf_grammar *grammar = NULL;
    prc = run_grammar_load(&opts, &grammar);
    if (prc > 0) return prc;
    const char *prompt = opts.prompt;
    const long n_predict = opts.n_predict;
    const bool ignore_eos = opts.ignore_eos, verbose = opts.verbose;

    char *stdin_text = NULL;
    size_t prompt_len;
    if (!prompt) {
        stdin_text = cli_read_stdin(&prompt_len);
        if (!stdin_text) {
            fprintf(stderr, "minfer run: cannot read the prompt from stdin\n");
            mf_grammar_free(grammar);
            return 1;
        }
        prompt = stdin_text;
    } else {
        prompt_len = strlen(prompt);
    }

    int rc = 1;
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_sampler *smp = NULL;
    mf_token *toks = NULL;
    mf_grammar_vocab *gvocab = NULL;
    mf_grammar_state *gstate = NULL;
    mf_token *hist = NULL, draft[256];
    mf_batch vb = {0};
    run_spec *spec = NULL;
    const bool timing = mf_env_on("MINFER_TIMING");
    if (!run_open(&opts, &model, &ctx)) goto done;
    const uint32_t nctx = mf_context_n_ctx(ctx);
    const int32_t n_vocab = mf_model_n_vocab(model);
    if (mf_sampler_new(&opts.sp, n_vocab, &smp)) { fprintf(stderr, "minfer run: %s\n", mf_last_error()); goto done; }
    if (grammar && (mf_grammar_vocab_new(model, &gvocab) || mf_grammar_state_new(grammar, gvocab, &gstate))) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        goto done;
    }
    if (run_spec_open(&opts, model, ctx, &spec) > 0) goto done;
    if (spec && mf_batch_init(&vb, 1 + (int32_t)opts.draft_max)) { fprintf(stderr, "minfer run: %s\n", mf_last_error()); goto done; }

    bool add_bos = mf_model_add_bos(model) && !opts.no_bos;
    int32_t n = mf_tokenize(model, prompt, prompt_len, NULL, 0, add_bos, true);
    if (n == INT32_MIN) { fprintf(stderr, "minfer run: %s\n", mf_last_error()); goto done; }
    int32_t need = n < 0 ? -n : n;
    toks = malloc(sizeof *toks * (size_t)(need ? need : 1));
    if (!toks) { fprintf(stderr, "minfer run: out of memory\n"); goto done; }
    n = mf_tokenize(model, prompt, prompt_len, toks, need, add_bos, true);
    if (n <= 0) { fprintf(stderr, "minfer run: the prompt is empty (no tokens)\n"); goto done; }
    if ((uint32_t)n >= nctx) {
        fprintf(stderr, "minfer run: the prompt has %d tokens; the context holds %u (raise --n-ctx)\n", n, nctx);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) mf_sampler_accept(smp, toks[i]);

    double t0 = mf_now();
    if (mf_decode(ctx, toks, n, false)) { fprintf(stderr, "minfer run: %s\n", mf_last_error()); goto done; }
    if (spec && run_spec_prefill(spec, toks, n)) goto done;
    double t_prefill = mf_now() - t0;
    if (timing) fprintf(stderr, "[timing] prefill %d tokens: %.3f ms\n", n, t_prefill * 1e3);

    char pend[256];
    size_t np = 0;
    int32_t n_gen = 0, n_fwd = 0;
    double t_decode = 0;
    const char *stop = NULL;
    /* the prompt and what has been generated: the drafters read it */
    hist = malloc(sizeof *hist * nctx);
    if (!hist) { fprintf(stderr, "minfer run: out of memory\n"); goto done; }
    memcpy(hist, toks, sizeof *hist * (size_t)n);
    int32_t n_hist = n;
    const float *logits = mf_get_logits(ctx, -1);
    mf_token t = -1;
    bool have = false; /* t was drawn by the last verification and still needs decoding */
    for (;;) {
        if (n_predict >= 0 && n_gen >= n_predict) break;
        double ts = mf_now();
        if (!have) {
            if (mf_context_n_past(ctx) >= nctx) { stop = "context full"; break; }
            if (!gstate) t = mf_sampler_sample(smp, logits);
            else if (mf_sampler_sample_grammar(smp, logits, gstate, &t)) {
                flush_utf8(pend, &np, true);
                fprintf(stderr, "\nminfer run: %s\n", mf_last_error());
                goto done;
            }
        }
        have = false;
        double t_sample = mf_now() - ts;
        if (!ignore_eos && mf_token_is_eog(model, t)) { stop = "end of generation"; break; }
        emit_token(model, smp, t, pend, &np);
        hist[n_hist++] = t;
        n_gen++;
        if (n_predict >= 0 && n_gen >= n_predict) break; /* its logits would go unused */
        double tf = mf_now();
        if (!spec) {
            if (mf_decode(ctx, &t, 1, false)) { fprintf(stderr, "\nminfer run: %s\n", mf_last_error()); goto done; }
            logits = mf_get_logits(ctx, -1);
            double t_fwd = mf_now() - tf;
            t_decode += t_fwd;
            n_fwd++;
            if (timing) fprintf(stderr, "[timing] token %d: sample %.3f ms, forward %.3f ms\n", n_gen, t_sample * 1e3, t_fwd * 1e3);
            continue;
        }
        /* t, then the draft, in one forward; room keeps it inside the context
         * and inside -n (a draft past the last wanted token is wasted) */
        const int32_t p0 = (int32_t)mf_context_n_past(ctx);
        int32_t room = (int32_t)nctx - p0 - 1;
        if (n_predict >= 0 && n_predict - n_gen < room) room = (int32_t)(n_predict - n_gen);
        const int32_t k = run_spec_draft(spec, hist, n_hist, room, draft);
        if (k < 0) goto done;
        const double t_drafted = mf_now();
        mf_batch_clear(&vb);
        mf_batch_add(&vb, t, p0, 0, true);
        for (int32_t d = 0; d < k; d++) mf_batch_add(&vb, draft[d], p0 + 1 + d, 0, true);
        if (mf_decode_batch(ctx, &vb)) { fprintf(stderr, "\nminfer run: %s\n", mf_last_error()); goto done; }
        /* row d checks draft d; the first replacement ends the step */
        int32_t acc = 0;
        bool end = false;
        for (; acc < k; acc++) {
            mf_token r;
            if (mf_sampler_verify(smp, mf_get_logits_ith(ctx, acc), gstate, draft[acc], &r)) {
                flush_utf8(pend, &np, true);
                fprintf(stderr, "\nminfer run: %s\n", mf_last_error());
                goto done;
            }
            if (r != draft[acc]) {
                t = r;
                have = true;
                break;
            }
            if (!ignore_eos && mf_token_is_eog(model, r)) { stop = "end of generation"; end = true; break; }
            emit_token(model, smp, r, pend, &np);
            hist[n_hist++] = r;
            n_gen++;
            if (n_predict >= 0 && n_gen >= n_predict) { end = true; acc++; break; }
        }
        run_spec_accepted(spec, acc);
        if (end) { t_decode += mf_now() - tf; break; }
        if (have) {
            /* drop the rejected tail: the cache keeps t and the accepted drafts */
            if (mf_kv_seq_rm(ctx, 0, p0 + 1 + acc, -1)) { fprintf(stderr, "\nminfer run: %s\n", mf_last_error()); goto done; }
        } else {
            logits = mf_get_logits_ith(ctx, k);
        }
        double t_fwd = mf_now() - tf;
        t_decode += t_fwd;
        if (timing)
            fprintf(stderr, "[timing] step: %d drafted (%.3f ms), %d accepted, %.3f ms in all\n", k,
                    (t_drafted - tf) * 1e3, acc, t_fwd * 1e3);
    }
    if (spec) n_fwd = n_gen > 0 ? n_gen - 1 : 0; /* every token after the first came out of a decode step */
    flush_utf8(pend, &np, true);
    printf("\n");
    fflush(stdout);
    /* running out of context cuts the text short: always say so */
    if (stop && (verbose || !strcmp(stop, "context full")))
        fprintf(stderr, "minfer: stopped: %s%s\n", stop, strcmp(stop, "context full") ? "" : " (raise --n-ctx for longer output)");
    fprintf(stderr, "prefill: %d tokens in %.2f ms (%.1f tok/s)\n", n, t_prefill * 1e3, n / (t_prefill > 0 ? t_prefill : 1e-9));
    fprintf(stderr, "decode:  %d tokens in %.2f ms (%.1f tok/s)\n", n_fwd, t_decode * 1e3,
            n_fwd ? n_fwd / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
    if (spec) run_spec_report(spec);
    rc = 0;
done:
    free(toks);
    free(hist);
    mf_batch_free(&vb);
    run_spec_free(spec);
    mf_sampler_free(smp);
    mf_grammar_state_free(gstate);
    mf_grammar_vocab_free(gvocab);
    mf_grammar_free(grammar);
    mf_context_free(ctx);
    mf_model_free(model);
    mf_threadpool_free(g_pool);
    g_pool = NULL;
    free(stdin_text);
    return rc;
}
