/* golden.c - see golden.h. */
#include "golden.h"
#include "testutil.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int *json_ints(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (int)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

bool golden_load(const char *json_path, const char *model_dir, golden_case *gc) {
    memset(gc, 0, sizeof *gc);
    json_error_t err;
    json_t *j = json_load_file(json_path, 0, &err);
    if (!j) {
        CHECK(0, "cannot read golden %s: %s", json_path, err.text);
        return false;
    }
    const char *slash = strrchr(json_path, '/');
    snprintf(gc->name, sizeof gc->name, "%s", slash ? slash + 1 : json_path);
    snprintf(gc->model_path, sizeof gc->model_path, "%s/%s", model_dir, json_string_value(json_object_get(j, "model")));
    json_t *pr = json_object_get(j, "prompt");
    if (json_is_string(pr)) gc->prompt = strdup(json_string_value(pr));
    gc->add_bos = json_is_true(json_object_get(j, "add_bos"));
    gc->n_vocab = (int)json_integer_value(json_object_get(j, "n_vocab"));
    gc->prompt_tokens = json_ints(json_object_get(j, "prompt_tokens"), &gc->n_prompt);
    gc->greedy = json_ints(json_object_get(j, "greedy_tokens"), &gc->n_greedy);
    json_t *m = json_object_get(j, "greedy_margins");
    gc->margins = malloc(sizeof(float) * (size_t)(gc->n_greedy ? gc->n_greedy : 1));
    for (int i = 0; i < gc->n_greedy; i++) gc->margins[i] = (float)json_number_value(json_array_get(m, (size_t)i));
    char lp[1024];
    snprintf(lp, sizeof lp, "%.*s/%s", (int)(slash ? slash - json_path : 1), slash ? json_path : ".",
             json_string_value(json_object_get(j, "logits_file")));
    json_decref(j);
    size_t sz;
    gc->logits = test_read_file(lp, &sz);
    if (!gc->logits) return false;
    if (sz != sizeof(float) * (size_t)gc->n_prompt * (size_t)gc->n_vocab) {
        CHECK(0, "%s: logits file has %zu bytes, expected %d x %d floats", lp, sz, gc->n_prompt, gc->n_vocab);
        return false;
    }
    return true;
}

void golden_free(golden_case *gc) {
    free(gc->prompt);
    free(gc->prompt_tokens);
    free(gc->greedy);
    free(gc->margins);
    free(gc->logits);
}

float golden_default_tol(const char *model_path) {
    mf_gguf *g;
    float tol = 0.01f;
    if (mf_gguf_open(model_path, &g) != MF_OK) return tol;
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
        mf_gguf_tensor_info ti;
        if (mf_gguf_tensor(g, i, &ti) == MF_OK && ti.type[0] != 'f' && ti.type[0] != 'b') tol = 0.25f;
    }
    mf_gguf_close(g);
    return tol;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

double golden_check(const golden_case *gc, const golden_opts *o) {
    mf_model *m = NULL;
    mf_context *ctx = NULL;
    double maxd = -1;
    mf_model_params mp = mf_model_default_params();
    mp.backend = o->backend;
    if (mf_model_load(gc->model_path, &mp, &m) != MF_OK) {
        CHECK(0, "%s: load failed: %s", gc->name, mf_last_error());
        return -1;
    }
    CHECK(mf_model_n_vocab(m) == gc->n_vocab, "%s: n_vocab %d, golden %d", gc->name, mf_model_n_vocab(m), gc->n_vocab);
    if (o->check_tokens && gc->prompt) {
        mf_token toks[1024];
        int32_t n = mf_tokenize(m, gc->prompt, strlen(gc->prompt), toks, 1024, gc->add_bos, false);
        bool same = n == gc->n_prompt;
        for (int i = 0; same && i < n; i++) same = toks[i] == gc->prompt_tokens[i];
        CHECK(same, "%s: prompt tokens differ from llama.cpp's (%d vs %d tokens)", gc->name, n, gc->n_prompt);
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (uint32_t)(gc->n_prompt + gc->n_greedy + 8);
    cp.n_threads = o->n_threads;
    cp.kv_type = o->kv_type;
    if (mf_context_new(m, &cp, &ctx) != MF_OK) {
        CHECK(0, "%s: context: %s", gc->name, mf_last_error());
        goto done;
    }
    /* 1. logits at every prompt position, one batched forward */
    if (mf_decode(ctx, gc->prompt_tokens, gc->n_prompt, true) != MF_OK) {
        CHECK(0, "%s: decode: %s", gc->name, mf_last_error());
        goto done;
    }
    maxd = 0;
    int worst_pos = 0, worst_id = 0;
    for (int t = 0; t < gc->n_prompt; t++) {
        const float *l = mf_get_logits(ctx, t);
        for (int i = 0; i < gc->n_vocab; i++) {
            double d = fabs((double)l[i] - gc->logits[(size_t)t * gc->n_vocab + i]);
            if (!(d <= maxd)) {
                maxd = d;
                worst_pos = t;
                worst_id = i;
            }
        }
    }
    CHECK(maxd <= o->tol, "%s: max |logit diff| %.6g at position %d token %d exceeds %.3g", gc->name, maxd, worst_pos,
          worst_id, o->tol);

    /* 2. teacher-forced: feed the golden continuation, check each confident argmax */
    /* near-ties (golden margin < near_tie) only need the golden token in our top 2 */
    const float tie = o->near_tie > 0 ? o->near_tie : 0.05f;
    int tf_bad = 0, tf_checked = 0;
    const float *l = mf_get_logits(ctx, -1);
    for (int i = 0; i < gc->n_greedy; i++) {
        tf_checked++;
        int a = argmax(l, gc->n_vocab);
        bool ok = a == gc->greedy[i];
        if (!ok && gc->margins[i] < tie) {
            int above = 0; /* tokens scoring above the golden one */
            for (int v = 0; v < gc->n_vocab; v++) above += l[v] > l[gc->greedy[i]];
            ok = o->near_tie_gap > 0 ? l[a] - l[gc->greedy[i]] <= o->near_tie_gap
                                     : above < (o->near_tie_rank > 0 ? o->near_tie_rank : 2);
        }
        if (!ok) {
            if (!tf_bad) fprintf(stderr, "%s: teacher-forced step %d: argmax %d, golden %d (margin %.3f)\n", gc->name, i,
                                 a, gc->greedy[i], gc->margins[i]);
            tf_bad++;
        }
        if (i + 1 < gc->n_greedy && mf_decode(ctx, &gc->greedy[i], 1, false) != MF_OK) {
            CHECK(0, "%s: decode step %d: %s", gc->name, i, mf_last_error());
            goto done;
        }
        l = mf_get_logits(ctx, -1);
    }
    CHECK(tf_bad == 0, "%s: %d of %d teacher-forced steps differ", gc->name, tf_bad, tf_checked);

    /* 3. free-running greedy: identical up to and including the first near-tie */
    mf_kv_truncate(ctx, 0);
    mf_decode(ctx, gc->prompt_tokens, gc->n_prompt, false);
    int must = gc->n_greedy;
    for (int i = 0; i < gc->n_greedy; i++)
        if (gc->margins[i] < tie) {
            must = i + 1;
            break;
        }
    for (int i = 0; i < must; i++) {
        const float *gl = mf_get_logits(ctx, -1);
        mf_token a = (mf_token)argmax(gl, gc->n_vocab);
        /* the last step checked is a near-tie: with a gap, the golden token need only be that close */
        if (a != gc->greedy[i] && i == must - 1 && gc->margins[i] < tie && o->near_tie_gap > 0 &&
            gl[a] - gl[gc->greedy[i]] <= o->near_tie_gap)
            break;
        if (a != gc->greedy[i]) {
            CHECK(0, "%s: greedy step %d: %d, golden %d", gc->name, i, a, gc->greedy[i]);
            break;
        }
        if (i + 1 < must && mf_decode(ctx, &a, 1, false) != MF_OK) break;
    }
    fprintf(stderr, "%s: max|dlogit| %.3g (tol %.3g), teacher-forced %d steps, greedy %d/%d steps checked\n", gc->name,
            maxd, o->tol, tf_checked, must, gc->n_greedy);
done:
    mf_context_free(ctx);
    mf_model_free(m);
    return maxd;
}
