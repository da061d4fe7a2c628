/* bench.c - `minfer bench`: prefill and decode throughput in llama-bench's
 * shape (pp512 / tg128 / tg128@d4096, mean ± stddev over -r runs after one
 * warm-up), plus the measured ceiling: decode as a fraction of what the
 * machine's read bandwidth allows for this model's bytes per token, each
 * timed run against a probe taken just before it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_batch.h"
#include "cli.h"
#include "backends/registry.h"
#include "core/timer.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer bench -m MODEL.gguf [options]\n"
            "  -p, --n-prompt N     prefill test of N tokens, 0 = none (default 512)\n"
            "  -n, --n-gen N        decode test of N tokens, 0 = none (default 128)\n"
            "  -d, --n-depth N      tokens already in the KV cache before each test (default 0)\n"
            "  -r, --repetitions N  timed runs per test after one warm-up (default 5)\n"
            "  -t, --threads N      threads (default: all CPUs)\n"
            "  -b, --batch-size N   prefill batch (default 512)\n"
            "  --cache-type T       KV cache type: f16 (default), f32, q8_0\n"
            "  --backend NAME       cpu (default), cpu-ref or cuda\n"
            "  -ngl N|all|auto      layers on the GPU (cuda): all, the last N (the first ones on the CPU), or as many as fit; 0: the CPU\n"
            "  -o, --output FMT     md (default), csv or json\n"
            "  --no-bandwidth       skip the bandwidth probe and ceiling line\n"
            "  --no-mmap            read the model into memory (2 MiB pages) instead of mapping it\n"
            "  --no-repack          keep the weights in the file's layout (no 16-row interleave for decode)\n"
            "  --batch B[,B...]     aggregate throughput with B sequences at once (llama-batched-bench's\n"
            "                       table): one prefill of B prompts of -p tokens, then -n steps that\n"
            "                       each decode one token of every sequence; medians over -r runs\n"
            "Tests use fixed pseudo-random token ids, so any model and vocabulary work.\n");
}

typedef struct result {
    char test[32];
    int n_prompt, n_gen, n_depth;
    int reps;
    double *ts;  /* tokens/s per run */
    double *bw;  /* CPU decode: the read probe's GB/s just before each run */
    double mean, sd;
} result;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static mf_token rand_token(int32_t n_vocab) { return cli_rand_token(&g_rng, n_vocab); }

/* Fills the cache with `depth` tokens (untimed); returns false on error. */
static bool fill(mf_context *ctx, mf_token *buf, int32_t n_vocab, int depth) {
    mf_kv_truncate(ctx, 0);
    if (!depth) return true;
    for (int i = 0; i < depth; i++) buf[i] = rand_token(n_vocab);
    if (mf_decode(ctx, buf, depth, false)) {
        fprintf(stderr, "minfer bench: %s\n", mf_last_error());
        return false;
    }
    return true;
}

/* One timed run: prefill n_prompt tokens or decode n_gen tokens one by one.
 * With a probe, its read bandwidth goes to *bw, taken after the untimed fill
 * and just before the timed part. */
static double run_once(mf_context *ctx, mf_token *buf, int32_t n_vocab, const result *r, mf_bw_probe *probe, double *bw,
                       bool *ok) {
    *ok = fill(ctx, buf, n_vocab, r->n_depth);
    if (!*ok) return 0;
    if (probe) *bw = mf_bw_probe_run(probe, 3);
    double t0, dt;
    if (r->n_prompt) {
        for (int i = 0; i < r->n_prompt; i++) buf[i] = rand_token(n_vocab);
        t0 = mf_now();
        *ok = mf_decode(ctx, buf, r->n_prompt, false) == MF_OK;
        dt = mf_now() - t0;
        return *ok ? r->n_prompt / dt : 0;
    }
    mf_token t = rand_token(n_vocab);
    t0 = mf_now();
    for (int i = 0; i < r->n_gen && *ok; i++) {
        *ok = mf_decode(ctx, &t, 1, false) == MF_OK;
        t = rand_token(n_vocab);
    }
    dt = mf_now() - t0;
    if (!*ok) fprintf(stderr, "minfer bench: %s\n", mf_last_error());
    return *ok ? r->n_gen / dt : 0;
}

static void human_size(uint64_t b, char *out, size_t cap) {
    if (b >= (1ull << 30)) snprintf(out, cap, "%.2f GiB", b / 1073741824.0);
    else snprintf(out, cap, "%.2f MiB", b / 1048576.0);
}

static void human_params(uint64_t p, char *out, size_t cap) {
    if (p >= 1000000000ull) snprintf(out, cap, "%.2f B", p / 1e9);
    else snprintf(out, cap, "%.2f M", p / 1e6);
}

int cmd_bench(int argc, char **argv) {
    mf_model_params mp = mf_model_default_params();
    const char *model_path = NULL, *fmt = "md";
    long n_prompt = 512, n_gen = 128, n_depth = 0, reps = 5, n_threads = 0, n_batch = 512;
    bool probe = true;
    int levels[32], n_levels = 0;
    mf_kv_type kv = mf_context_default_params().kv_type;
    cli_dev dev = CLI_DEV_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define INT_OPT(lo, hi, dst) do { if (!cli_int("bench", a, v, lo, hi, &dst)) return 2; i++; } while (0)
        const int dv = cli_dev_opt("bench", a, v, &dev);
        if (dv < 0) return 2;
        if (dv) { i++; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { model_path = v; i++; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) INT_OPT(0, 1 << 20, n_prompt);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) INT_OPT(0, 1 << 20, n_gen);
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) INT_OPT(0, 1 << 24, n_depth);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) INT_OPT(1, 1000, reps);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) INT_OPT(0, 512, n_threads);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) INT_OPT(1, 1 << 16, n_batch);
        else if (!strcmp(a, "--no-bandwidth")) probe = false;
        else if (!strcmp(a, "--batch") && v) {
            for (const char *q = v; *q;) {
                char *end;
                long b = strtol(q, &end, 10);
                if (end == q || b < 1 || b > 4096 || n_levels == 32 || (*end && *end != ',')) {
                    fprintf(stderr, "minfer bench: --batch wants a list of sequence counts 1..4096 (\"1,4,8,16\"), not '%s'\n", v);
                    return 2;
                }
                levels[n_levels++] = (int)b;
                q = *end ? end + 1 : end;
            }
            i++;
        }
        else if (!strcmp(a, "--no-mmap")) mp.no_mmap = true;
        else if (!strcmp(a, "--no-repack")) mp.no_repack = true;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) {
            fmt = v;
            i++;
            if (strcmp(fmt, "md") && strcmp(fmt, "csv") && strcmp(fmt, "json")) {
                fprintf(stderr, "minfer bench: unknown output format '%s' (md, csv, json)\n", fmt);
                return 2;
            }
        } else if (!strcmp(a, "--cache-type") && v) {
            if (!cli_kv_type("bench", v, &kv)) return 2;
            i++;
        } else { fprintf(stderr, "minfer bench: unknown option or missing value '%s' (see --help)\n", a); return 2; }
#undef INT_OPT
    }
    if (!model_path) { fprintf(stderr, "minfer bench: no model given (-m FILE)\n"); return 2; }
    if (!n_prompt && !n_gen) { fprintf(stderr, "minfer bench: nothing to run (-p 0 and -n 0)\n"); return 2; }
    if (!cli_dev_backend("bench", &dev, &mp)) return 2;
    const bool gpu = mp.backend && !strcmp(mp.backend, "cuda");

    int rc = 1;
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_token *buf = NULL;
    result res[2];
    int n_res = 0;
    mf_bw_probe *bwp = NULL;
    memset(res, 0, sizeof res);
    if (mf_model_load(model_path, &mp, &model)) { fprintf(stderr, "minfer bench: %s\n", mf_last_error()); goto done; }
    if (n_levels) {
        bench_batch_opts bo = {levels, n_levels, (int)n_prompt, (int)n_gen, (int)reps, (int)n_threads, (int)n_batch, kv, fmt};
        rc = bench_batch(model, model_path, &bo);
        goto done;
    }
    const int32_t n_vocab = mf_model_n_vocab(model);
    mf_context_params cp = mf_context_default_params();
    long need = n_depth + (n_prompt > n_gen ? n_prompt : n_gen);
    cp.n_ctx = (uint32_t)need;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (int32_t)n_threads;
    cp.kv_type = kv;
    if (need > mf_model_n_ctx_train(model)) {
        fprintf(stderr, "minfer bench: depth + test = %ld tokens exceeds the model's context of %d\n", need,
                mf_model_n_ctx_train(model));
        goto done;
    }
    if (mf_context_new(model, &cp, &ctx)) { fprintf(stderr, "minfer bench: %s\n", mf_last_error()); goto done; }
    buf = malloc(sizeof *buf * (size_t)(need > 1 ? need : 1));
    if (!buf) goto done;
    if (n_prompt) {
        result *r = &res[n_res++];
        r->n_prompt = (int)n_prompt;
        r->n_depth = (int)n_depth;
        snprintf(r->test, sizeof r->test, n_depth ? "pp%ld @ d%ld" : "pp%ld", n_prompt, n_depth);
    }
    if (n_gen) {
        result *r = &res[n_res++];
        r->n_gen = (int)n_gen;
        r->n_depth = (int)n_depth;
        snprintf(r->test, sizeof r->test, n_depth ? "tg%ld @ d%ld" : "tg%ld", n_gen, n_depth);
    }
    /* CPU decode's ceiling: the read probe runs just before each timed run,
     * so each run has its own ceiling; a neighbour's load on a shared host
     * moves the bandwidth by 10-40% within minutes (docs/PERFORMANCE.md).
     * Its 1 GiB read also evicts the caches before every run, as a decode of
     * any model larger than the last-level cache does by itself. */
    if (probe && n_gen && !gpu && !(bwp = mf_bw_probe_new((int)n_threads, (size_t)1 << 30)))
        fprintf(stderr, "minfer bench: no ceiling line: the bandwidth probe could not get its 1 GiB buffer or its threads\n");
    for (int k = 0; k < n_res; k++) {
        result *r = &res[k];
        r->reps = (int)reps;
        r->ts = calloc((size_t)reps, sizeof *r->ts);
        if (!r->ts) goto done;
        if (r->n_gen && bwp && !(r->bw = calloc((size_t)reps, sizeof *r->bw))) goto done;
        bool ok;
        run_once(ctx, buf, n_vocab, r, NULL, NULL, &ok); /* warm-up */
        if (!ok) goto done;
        double sum = 0, sq = 0;
        for (int i = 0; i < reps; i++) {
            r->ts[i] = run_once(ctx, buf, n_vocab, r, r->bw ? bwp : NULL, r->bw ? &r->bw[i] : NULL, &ok);
            if (!ok) goto done;
            sum += r->ts[i];
        }
        r->mean = sum / reps;
        for (int i = 0; i < reps; i++) sq += (r->ts[i] - r->mean) * (r->ts[i] - r->mean);
        r->sd = reps > 1 ? sqrt(sq / (reps - 1)) : 0;
    }

    char sz[32], pr[32], name[96];
    human_size(mf_model_size(model), sz, sizeof sz);
    human_params(mf_model_n_params(model), pr, sizeof pr);
    snprintf(name, sizeof name, "%s", mf_model_desc(model));
    const char *kvn = cli_kv_name(kv);
    const int threads = n_threads ? (int)n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* a split model says how many layers ran on the GPU, as llama-bench's ngl column */
    char bk[48];
    const int on_gpu = mf_model_gpu_layers(model), n_layer = mf_model_n_layer(model);
    if (gpu && on_gpu < n_layer) snprintf(bk, sizeof bk, "CUDA ngl %d/%d", on_gpu, n_layer);
    else snprintf(bk, sizeof bk, "%s", gpu ? "CUDA" : "CPU");
    if (!strcmp(fmt, "md")) {
        printf("| model | size | params | backend | threads | type_kv | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |\n");
        for (int k = 0; k < n_res; k++)
            printf("| %s | %s | %s | %s | %d | %s | %s | %.2f ± %.2f |\n", mf_model_arch(model), sz, pr, bk, threads, kvn,
                   res[k].test, res[k].mean, res[k].sd);
    } else if (!strcmp(fmt, "csv")) {
        printf("model_filename,model_type,model_size,model_n_params,n_threads,type_kv,n_prompt,n_gen,n_depth,avg_ts,stddev_ts\n");
        for (int k = 0; k < n_res; k++)
            printf("\"%s\",\"%s\",%llu,%llu,%d,%s,%d,%d,%d,%.6f,%.6f\n", model_path, name,
                   (unsigned long long)mf_model_size(model), (unsigned long long)mf_model_n_params(model), threads, kvn,
                   res[k].n_prompt, res[k].n_gen, res[k].n_depth, res[k].mean, res[k].sd);
    } else {
        printf("[\n");
        for (int k = 0; k < n_res; k++) {
            printf("  {\"model_filename\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, "
                   "\"n_threads\": %d, \"type_kv\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
                   "\"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
                   model_path, name, (unsigned long long)mf_model_size(model), (unsigned long long)mf_model_n_params(model),
                   threads, kvn, res[k].n_prompt, res[k].n_gen, res[k].n_depth, res[k].mean, res[k].sd);
            for (int i = 0; i < res[k].reps; i++) printf(i ? ", %.4f" : "%.4f", res[k].ts[i]);
            printf("]}%s\n", k + 1 < n_res ? "," : "");
        }
        printf("]\n");
    }
    if (probe && n_gen && gpu && on_gpu < n_layer) {
        fprintf(stderr, "ceiling: none for a split model (%d of %d layers on the GPU, the rest read from host memory)\n",
                on_gpu, n_layer);
    } else if (probe && n_gen && gpu) {
        /* the device's own copy bandwidth, measured here (2 x 1 GiB buffers) */
        const double gbs = mf_backend_copy_bandwidth("cuda", (size_t)1 << 30);
        const double bpt = (double)mf_model_bytes_per_token(model);
        const result *tg = &res[n_res - 1];
        if (gbs > 0)
            fprintf(stderr, "ceiling: %s decode reads %.1f GB/s of weights = %.1f%% of the %.1f GB/s device copy "
                            "bandwidth (read + write) measured now (%.1f MiB per token, ceiling %.1f t/s)\n",
                    tg->test, tg->mean * bpt / 1e9, 100.0 * tg->mean * bpt / (gbs * 1e9), gbs, bpt / 1048576.0,
                    gbs * 1e9 / bpt);
    } else if (probe && n_gen && bwp) {
        /* runs whose probe failed (0 GB/s) are left out */
        const result *tg = &res[n_res - 1];
        const double bpt = (double)mf_model_bytes_per_token(model);
        double *f = malloc(sizeof *f * (size_t)tg->reps), *bw = malloc(sizeof *bw * (size_t)tg->reps);
        int m = 0;
        for (int i = 0; f && bw && i < tg->reps; i++)
            if (tg->bw[i] > 0) {
                bw[m] = tg->bw[i];
                f[m++] = 100.0 * tg->ts[i] * bpt / (tg->bw[i] * 1e9);
            }
        if (m) {
            /* X: the median of the runs' fractions; Y: the median probe (a
             * separate median, so X is not mean t/s over Y's ceiling) */
            const double fm = cli_median(f, m), gbs = cli_median(bw, m); /* sorts */
            fprintf(stderr, "ceiling: %s decode = %.1f%% of %.1f GB/s measured read bandwidth (median of %d runs, each "
                            "against a probe just before it: %.1f-%.1f%%; %.1f MiB of weights per token, ceiling %.1f t/s)\n",
                    tg->test, fm, gbs, m, f[0], f[m - 1], bpt / 1048576.0, gbs * 1e9 / bpt);
        } else {
            fprintf(stderr, "minfer bench: no ceiling line: the bandwidth probe failed\n");
        }
        free(f);
        free(bw);
    }
    rc = 0;
done:
    for (int k = 0; k < n_res; k++) {
        free(res[k].ts);
        free(res[k].bw);
    }
    mf_bw_probe_free(bwp);
    free(buf);
    mf_context_free(ctx);
    mf_model_free(model);
    return rc;
}
