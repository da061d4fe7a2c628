/* bench_batch.c - aggregate prefill and decode with B sequences at once.
 *
 * For each level B: a context holding B sequences of n_prompt + n_gen
 * positions; prefill is one batch of B prompts of n_prompt tokens (only each
 * sequence's last token flagged for output), then n_gen steps each decode one
 * token of every sequence in one batch. Like llama-batched-bench: S_PP =
 * B * PP / T_PP, S_TG = B * TG / T_TG, S = all tokens / (T_PP + T_TG). Each
 * figure is the median over -r runs after one warm-up. */
#include "bench_batch.h"
#include "cli.h"
#include "core/timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct level_result {
    int b;
    double t_pp, t_tg; /* medians, seconds */
} level_result;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static mf_token rnd_tok(int32_t n_vocab) { return cli_rand_token(&g_rng, n_vocab); }

/* One run at level B: returns false on error (message printed). */
static bool run_level(mf_context *ctx, mf_batch *bt, int B, const bench_batch_opts *o, int32_t n_vocab, double *t_pp,
                      double *t_tg) {
    mf_kv_seq_rm(ctx, -1, 0, -1);
    mf_batch_clear(bt);
    for (int s = 0; s < B; s++)
        for (int i = 0; i < o->n_prompt; i++) mf_batch_add(bt, rnd_tok(n_vocab), i, s, i == o->n_prompt - 1);
    double t0 = mf_now();
    if (o->n_prompt && mf_decode_batch(ctx, bt)) goto fail;
    *t_pp = mf_now() - t0;
    t0 = mf_now();
    for (int g = 0; g < o->n_gen; g++) {
        mf_batch_clear(bt);
        for (int s = 0; s < B; s++) mf_batch_add(bt, rnd_tok(n_vocab), o->n_prompt + g, s, true);
        if (mf_decode_batch(ctx, bt)) goto fail;
    }
    *t_tg = mf_now() - t0;
    return true;
fail:
    fprintf(stderr, "minfer bench: batch of %d sequences: %s\n", B, mf_last_error());
    return false;
}

int bench_batch(mf_model *model, const char *model_path, const bench_batch_opts *o) {
    const int32_t n_vocab = mf_model_n_vocab(model);
    level_result *res = calloc((size_t)o->n_levels, sizeof *res);
    double *tp = calloc((size_t)o->reps, sizeof *tp), *tt = calloc((size_t)o->reps, sizeof *tt);
    int rc = 1;
    if (!res || !tp || !tt) goto done;
    if (o->n_prompt + o->n_gen > mf_model_n_ctx_train(model)) {
        fprintf(stderr, "minfer bench: %d + %d tokens per sequence exceed the model's context of %d\n", o->n_prompt,
                o->n_gen, mf_model_n_ctx_train(model));
        goto done;
    }
    for (int li = 0; li < o->n_levels; li++) {
        const int B = o->levels[li];
        mf_context_params cp = mf_context_default_params();
        cp.n_seq_max = (uint32_t)B;
        cp.n_ctx = (uint32_t)(B * (o->n_prompt + o->n_gen));
        cp.n_batch = (uint32_t)o->n_batch;
        cp.n_threads = o->n_threads;
        cp.kv_type = o->kv;
        mf_context *ctx;
        if (mf_context_new(model, &cp, &ctx)) {
            fprintf(stderr, "minfer bench: %s\n", mf_last_error());
            goto done;
        }
        mf_batch bt;
        const int cap = B * (o->n_prompt > 1 ? o->n_prompt : 1);
        if (mf_batch_init(&bt, cap)) {
            mf_context_free(ctx);
            goto done;
        }
        double a, b;
        bool ok = run_level(ctx, &bt, B, o, n_vocab, &a, &b); /* warm-up */
        for (int r = 0; r < o->reps && ok; r++) ok = run_level(ctx, &bt, B, o, n_vocab, &tp[r], &tt[r]);
        mf_batch_free(&bt);
        mf_context_free(ctx);
        if (!ok) goto done;
        res[li] = (level_result){B, cli_median(tp, o->reps), cli_median(tt, o->reps)};
    }
    const int PP = o->n_prompt, TG = o->n_gen;
    if (!strcmp(o->fmt, "md")) {
        printf("| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    } else if (!strcmp(o->fmt, "csv")) {
        printf("model_filename,n_threads,type_kv,pp,tg,b,n_kv,t_pp,s_pp,t_tg,s_tg,t,s\n");
    } else {
        printf("[\n");
    }
    for (int li = 0; li < o->n_levels; li++) {
        const level_result *r = &res[li];
        const double s_pp = r->t_pp > 0 ? (double)r->b * PP / r->t_pp : 0, s_tg = r->t_tg > 0 ? (double)r->b * TG / r->t_tg : 0;
        const double t = r->t_pp + r->t_tg, s = t > 0 ? (double)r->b * (PP + TG) / t : 0;
        const int n_kv = r->b * (PP + TG);
        if (!strcmp(o->fmt, "md"))
            printf("| %d | %d | %d | %d | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |\n", PP, TG, r->b, n_kv, r->t_pp,
                   s_pp, r->t_tg, s_tg, t, s);
        else if (!strcmp(o->fmt, "csv"))
            printf("\"%s\",%d,%s,%d,%d,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", model_path, o->n_threads,
                   o->kv == MF_KV_F16 ? "f16" : o->kv == MF_KV_Q8_0 ? "q8_0" : "f32", PP, TG, r->b, n_kv, r->t_pp, s_pp,
                   r->t_tg, s_tg, t, s);
        else
            printf("  {\"pp\": %d, \"tg\": %d, \"b\": %d, \"n_kv\": %d, \"t_pp\": %.6f, \"speed_pp\": %.6f, "
                   "\"t_tg\": %.6f, \"speed_tg\": %.6f, \"t\": %.6f, \"speed\": %.6f}%s\n",
                   PP, TG, r->b, n_kv, r->t_pp, s_pp, r->t_tg, s_tg, t, s, li + 1 < o->n_levels ? "," : "");
    }
    if (strcmp(o->fmt, "md") && strcmp(o->fmt, "csv")) printf("]\n");
    rc = 0;
done:
    free(res);
    free(tp);
    free(tt);
    return rc;
}
