/* test_cpu_dispatch.c - the run-time kernel choice end to end.
 *
 * Without arguments: the forward pass gives bitwise the same logits at every
 * SIMD level the CPU supports (mf_cpu_level_override between the runs: each
 * model and context takes its level's kernel table), on stories260K in F32/F16/BF16/Q4_K_M and on
 * llama-quantize outputs that use every quantized dot (Q4_0 ... IQ4_XS).
 *
 * With an argument naming an environment switch (no-avx512, no-avx2,
 * no-vnni): sets it before the first mf_cpu_init and checks the level chosen
 * and the note --verbose prints. */
#include "testutil.h"

#include "cpu/kern/features.h"
#include "minfer.h"
#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

/* models and contexts made from now on run at level lv */
static void install_level(mf_cpu_level lv) { mf_cpu_level_override(lv); }

/* logits of every position of a fixed prompt (caller frees), NULL on error */
static float *forward(const char *path, int *n_out) {
    static const mf_token toks[] = {1, 450, 300, 27, 500, 100, 12, 13, 260, 400, 350, 290, 7, 88, 400, 31};
    const int n = (int)(sizeof toks / sizeof toks[0]);
    mf_model *m;
    if (mf_model_load(path, NULL, &m) != MF_OK) {
        CHECK(0, "load %s: %s", path, mf_last_error());
        return NULL;
    }
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    mf_context *ctx;
    float *out = NULL;
    if (mf_context_new(m, &cp, &ctx) == MF_OK) {
        if (mf_decode(ctx, toks, n, true) == MF_OK) {
            out = malloc(sizeof(float) * (size_t)V * (size_t)n);
            for (int i = 0; i < n; i++) memcpy(out + (size_t)i * V, mf_get_logits(ctx, i), sizeof(float) * (size_t)V);
            *n_out = V * n;
        } else CHECK(0, "%s: decode failed: %s", path, mf_last_error());
        mf_context_free(ctx);
    } else CHECK(0, "%s: context: %s", path, mf_last_error());
    mf_model_free(m);
    return out;
}

static int levels_agree(void) {
    static const char *models[] = {
        "../shared/models/stories260K.gguf",          "../shared/models/stories260K-f16.gguf",
        "../shared/models/stories260K-bf16.gguf",     "../shared/models/stories260K-q4_k_m.gguf",
        "../shared/golden/quant/quant-q4_0.gguf",     "../shared/golden/quant/quant-q4_1.gguf",
        "../shared/golden/quant/quant-q5_0.gguf",     "../shared/golden/quant/quant-q5_1.gguf",
        "../shared/golden/quant/quant-q8_0.gguf",     "../shared/golden/quant/quant-q2_k.gguf",
        "../shared/golden/quant/quant-q3_k_m.gguf",   "../shared/golden/quant/quant-q4_k_m-pure.gguf",
        "../shared/golden/quant/quant-q5_k_m.gguf",   "../shared/golden/quant/quant-q6_k.gguf",
        "../shared/golden/quant/quant-iq4_nl.gguf",   "../shared/golden/quant/quant-iq4_xs.gguf",
    };
    const mf_cpu_level sup = mf_cpu_level_supported();
    mf_cpu_init(); /* the backend would call it; after this the live table is ours to switch */
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        install_level(MF_CPU_SCALAR);
        int n_ref = 0;
        float *ref = forward(models[i], &n_ref);
        if (!ref) continue;
        for (int lv = MF_CPU_AVX2; lv <= (int)sup; lv++) {
            install_level((mf_cpu_level)lv);
            int n = 0;
            float *got = forward(models[i], &n);
            if (got) {
                int first = -1;
                for (int k = 0; k < n && first < 0; k++)
                    if (memcmp(&got[k], &ref[k], sizeof(float))) first = k;
                CHECK(n == n_ref && first < 0, "%s: %s logits differ from scalar (first at %d: %.9g vs %.9g)", models[i],
                      mf_cpu_level_name((mf_cpu_level)lv), first, first >= 0 ? got[first] : 0.0, first >= 0 ? ref[first] : 0.0);
            }
            free(got);
        }
        free(ref);
    }
    install_level(mf_cpu_init());
    for (int lv = MF_CPU_AVX2; lv < MF_CPU_LEVELS; lv++)
        if (lv > (int)sup) fprintf(stderr, "note: this CPU lacks %s; not compared\n", mf_cpu_level_name((mf_cpu_level)lv));
    return test_summary("cpu_dispatch");
}

static int env_switch(const char *which) {
    const mf_cpu_level sup = mf_cpu_level_supported();
    mf_cpu_level want = sup;
    const char *var = NULL;
    if (!strcmp(which, "no-avx512")) {
        var = "MINFER_NO_AVX512";
        if (want > MF_CPU_AVX2) want = MF_CPU_AVX2;
    } else if (!strcmp(which, "no-avx2")) {
        var = "MINFER_NO_AVX2";
        want = MF_CPU_SCALAR;
    } else if (!strcmp(which, "no-vnni")) {
        var = "MINFER_NO_VNNI";
        if (want == MF_CPU_AVX512_VNNI) want = MF_CPU_AVX512;
    }
    CHECK(var != NULL, "unknown switch %s", which);
    if (!var) return test_summary("cpu_dispatch_env");
    setenv(var, "1", 1);
    const mf_cpu_level got = mf_cpu_init();
    CHECK(got == want, "%s=1: level %s, expected %s (CPU: %s)", var, mf_cpu_level_name(got), mf_cpu_level_name(want),
          mf_cpu_level_name(sup));
    const char *note = mf_cpu_kernels_note();
    CHECK(strstr(note, mf_cpu_level_name(got)) != NULL, "note \"%s\" does not name the level", note);
    if (got != sup) CHECK(strstr(note, var) != NULL, "note \"%s\" does not say why the level is lower", note);
    /* the chosen level's table is what backends take; quant/'s stays the references */
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        const mf_type_traits *ref = mf_type_traits_ref(t), *live = mf_type_traits_get(t);
        if (ref) CHECK(live == ref, "%s: the reference table was overwritten", mf_type_name(t));
        if (ref) CHECK(mf_cpu_traits_for_level(t, got) != NULL, "%s: no kernels at level %s", mf_type_name(t),
                       mf_cpu_level_name(got));
    }
    fprintf(stderr, "%s=1: %s\n", var, note);
    return test_summary("cpu_dispatch_env");
}

int main(int argc, char **argv) { return argc > 1 ? env_switch(argv[1]) : levels_agree(); }
