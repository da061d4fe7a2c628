/* run_spec.c - speculative decoding for `minfer run`: opens the draft model
 * (--draft-model) or sets up prompt lookup (--lookup) and proposes each
 * step's draft; the verification loop is in run.c. */
#include <stdio.h>
#include <stdlib.h>

#include "minfer.h"
#include "run.h"

struct run_spec {
    mf_model *dmodel;
    mf_drafter *drafter;
    int32_t max, min, ngram_min, ngram_max;
    float p_min;
    long steps, drafted, accepted;
};

int run_spec_open(const run_opts *o, const mf_model *target, const mf_context *ctx, run_spec **out) {
    *out = NULL;
    if (!o->draft_model && !o->lookup) return -1;
    run_spec *s = calloc(1, sizeof *s);
    if (!s) { fprintf(stderr, "minfer run: out of memory\n"); return 1; }
    s->max = (int32_t)o->draft_max;
    s->min = (int32_t)o->draft_min;
    s->p_min = o->draft_p_min;
    s->ngram_min = (int32_t)o->lookup_ngram_min;
    s->ngram_max = (int32_t)o->lookup_ngram_max;
    if (o->draft_model) {
        mf_model_params mp = mf_model_default_params();
        mp.verbose = o->verbose;
        mp.no_mmap = o->no_mmap;
        mp.no_repack = o->no_repack;
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = mf_context_n_ctx(ctx);
        cp.n_batch = (uint32_t)o->n_batch;
        cp.n_threads = (int32_t)o->n_threads;
        cp.threadpool = run_pool();
        cp.kv_type = o->kv;
        bool dev_ok = cli_dev_backend("run", &o->dev, &mp);
        mp.gpu_layers = 0; /* a draft is small: all of it on the device, whatever -ngl split the target */
        if (!dev_ok || mf_model_load(o->draft_model, &mp, &s->dmodel) ||
            mf_drafter_new(s->dmodel, target, &cp, &s->drafter)) {
            fprintf(stderr, "minfer run: --draft-model %s: %s\n", o->draft_model, mf_last_error());
            run_spec_free(s);
            return 1;
        }
        if (o->verbose) fprintf(stderr, "minfer: draft %s\n", mf_model_desc(s->dmodel));
    }
    *out = s;
    return 0;
}

void run_spec_free(run_spec *s) {
    if (!s) return;
    mf_drafter_free(s->drafter);
    mf_model_free(s->dmodel);
    free(s);
}

int run_spec_prefill(run_spec *s, const mf_token *hist, int32_t n_hist) {
    int32_t n = 0;
    if (s->drafter && mf_drafter_propose(s->drafter, 0, hist, n_hist, 0, s->p_min, NULL, &n)) {
        fprintf(stderr, "minfer run: draft model: %s\n", mf_last_error());
        return 1;
    }
    return 0;
}

int32_t run_spec_draft(run_spec *s, const mf_token *hist, int32_t n_hist, int32_t room, mf_token *out) {
    int32_t max = s->max < room ? s->max : room, n = 0;
    if (max <= 0) return 0;
    if (s->drafter) {
        if (mf_drafter_propose(s->drafter, 0, hist, n_hist, max, s->p_min, out, &n)) {
            fprintf(stderr, "\nminfer run: draft model: %s\n", mf_last_error());
            return -1;
        }
    } else {
        n = mf_lookup_draft(hist, n_hist, s->ngram_min, s->ngram_max, max, out);
    }
    if (n < s->min) n = 0;
    s->steps++;
    s->drafted += n;
    return n;
}

void run_spec_accepted(run_spec *s, int32_t n) { s->accepted += n; }

void run_spec_report(const run_spec *s) {
    fprintf(stderr, "speculative: %ld steps, %ld drafted, %ld accepted (%.1f%%), %.2f tokens per target forward\n",
            s->steps, s->drafted, s->accepted, s->drafted ? 100.0 * (double)s->accepted / (double)s->drafted : 0.0,
            s->steps ? (double)(s->steps + s->accepted) / (double)s->steps : 0.0);
}
