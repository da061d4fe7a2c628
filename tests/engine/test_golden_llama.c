/* test_golden_llama.c - the llama-family goldens: stories260K (F32, F16,
 * BF16, Q4_K_M mix) and the random llama-2 with the real 32000-token vocab,
 * against llama.cpp's logits and greedy tokens (F32 KV cache). Also checks that
 * logits are bitwise independent of the thread count. */
#include "golden.h"
#include "testutil.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_case(const char *json, const char *model_dir) {
    golden_case gc;
    if (!golden_load(json, model_dir, &gc)) return;
    golden_opts o = {.tol = golden_default_tol(gc.model_path), .n_threads = 2, .kv_type = MF_KV_F32, .check_tokens = true};
    golden_check(&gc, &o);
    golden_free(&gc);
}

/* Same prompt with 1, 2 and 3 threads: logits must be bitwise equal. */
static void thread_independence(const char *model_path, const mf_token *toks, int n) {
    mf_model *m;
    if (mf_model_load(model_path, NULL, &m) != MF_OK) {
        CHECK(0, "load %s: %s", model_path, mf_last_error());
        return;
    }
    const int V = mf_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * (size_t)V * (size_t)n);
    for (int t = 1; t <= 3; t++) {
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = t;
        mf_context *ctx;
        if (mf_context_new(m, &cp, &ctx) != MF_OK) break;
        mf_decode(ctx, toks, n, true);
        for (int i = 0; i < n; i++) {
            const float *l = mf_get_logits(ctx, i);
            if (t == 1) memcpy(ref + (size_t)i * V, l, sizeof(float) * (size_t)V);
            else CHECK(!memcmp(ref + (size_t)i * V, l, sizeof(float) * (size_t)V), "%s: logits at position %d differ with %d threads vs 1",
                       model_path, i, t);
        }
        mf_context_free(ctx);
    }
    free(ref);
    mf_model_free(m);
}

int main(void) {
    const char *dir = "../shared/golden/stories260K";
    DIR *d = opendir(dir);
    CHECK(d != NULL, "missing %s", dir);
    int n_cases = 0;
    if (d) {
        struct dirent *e;
        static char names[64][NAME_MAX + 1];
        while ((e = readdir(d)) && n_cases < 64) {
            size_t L = strlen(e->d_name);
            if (L > 5 && !strcmp(e->d_name + L - 5, ".json")) snprintf(names[n_cases++], sizeof names[0], "%s", e->d_name);
        }
        closedir(d);
        for (int i = 0; i < n_cases; i++) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%.255s", dir, names[i]);
            run_case(p, "../shared/models");
        }
    }
    CHECK(n_cases >= 5, "expected at least 5 stories260K golden cases, found %d", n_cases);
    run_case("../shared/golden/llama-2-tiny-random.hello.json", "../shared/models");

    const mf_token toks[] = {1, 450, 300, 27, 500, 100, 12, 13, 260, 400, 350, 290};
    thread_independence("../shared/models/stories260K.gguf", toks, 12);
    thread_independence("../shared/models/stories260K-f16.gguf", toks, 12);
    return test_summary("test_golden_llama");
}
