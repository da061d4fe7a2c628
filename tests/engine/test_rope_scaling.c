/* test_rope_scaling.c - YaRN, Llama-3.1 rope_freqs and Phi-3 longrope against llama.cpp.
 * Also Phi-3's long/short factor pair ("longrope"), on each side of the
 * trained context. Builds the variants described in data/<name>.json from zoo models with the GGUF
 * writer (temp files), runs one batched forward with an f32 KV cache, and
 * compares the stored slice of llama.cpp's logits (data/README.md) within
 * 0.01, the zoo tolerance for float weights. */
#include "testutil.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "minfer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool build_variant(json_t *recipe, const char *out) {
    char src[512];
    snprintf(src, sizeof src, "../shared/models/%s", json_string_value(json_object_get(recipe, "base")));
    gguf_file *f;
    if (gguf_open(src, &f) != MF_OK) {
        CHECK(0, "open %s: %s", src, mf_last_error());
        return false;
    }
    gguf_writer *w;
    gguf_writer_new(&w);
    bool ok = gguf_writer_copy_kv(w, f, NULL, NULL) == MF_OK;
    for (uint64_t i = 0; ok && i < f->n_tensors; i++) ok = gguf_writer_copy_tensor(w, &f->tensors[i]) == MF_OK;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(recipe, "add"), key, v) {
        if (json_is_string(v)) ok = ok && gguf_writer_set_str(w, key, json_string_value(v)) == MF_OK;
        else if (json_is_integer(v)) ok = ok && gguf_writer_set_u32(w, key, (uint32_t)json_integer_value(v)) == MF_OK;
        else ok = ok && gguf_writer_set_f32(w, key, (float)json_number_value(v)) == MF_OK;
    }
    /* f32 vectors of n values a + b*i (frequency factors) */
    static float ff[4][64];
    int nt = 0;
    json_object_foreach(json_object_get(recipe, "add_tensor"), key, v) {
        const int n = (int)json_integer_value(json_object_get(v, "n"));
        const float a = (float)json_number_value(json_object_get(v, "a")), b = (float)json_number_value(json_object_get(v, "b"));
        if (nt == 4 || n <= 0 || n > 64) {
            ok = false;
            break;
        }
        for (int i = 0; i < n; i++) ff[nt][i] = a + b * (float)i;
        const int64_t ne[1] = {n};
        ok = ok && gguf_writer_add_tensor(w, key, MF_TYPE_F32, 1, ne, ff[nt++]) == MF_OK;
    }
    ok = ok && gguf_writer_write_file(w, out) == MF_OK;
    CHECK(ok, "building the variant of %s: %s", src, mf_last_error());
    gguf_writer_free(w);
    gguf_close(f);
    return ok;
}

static void run_case(const char *name) {
    char jp[256], lp[256], tmp[] = "/tmp/minfer-rope-XXXXXX";
    snprintf(jp, sizeof jp, "tests/engine/data/%s.json", name);
    json_error_t err;
    json_t *j = json_load_file(jp, 0, &err);
    CHECK(j != NULL, "cannot read %s", jp);
    if (!j) return;
    int fd = mkstemp(tmp);
    close(fd);
    if (!build_variant(json_object_get(j, "recipe"), tmp)) goto done;
    mf_model *m;
    if (mf_model_load(tmp, NULL, &m) != MF_OK) {
        CHECK(0, "%s: load: %s", name, mf_last_error());
        goto done;
    }
    json_t *ids = json_object_get(j, "ids"), *pos = json_object_get(j, "positions");
    const int n = (int)json_array_size(ids), cols = (int)json_integer_value(json_object_get(j, "columns"));
    mf_token *toks = malloc(sizeof *toks * (size_t)n);
    for (int i = 0; i < n; i++) toks[i] = (mf_token)json_integer_value(json_array_get(ids, (size_t)i));
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = json_object_get(j, "n_ctx") ? (uint32_t)json_integer_value(json_object_get(j, "n_ctx")) : 256;
    cp.kv_type = MF_KV_F32;
    mf_context *ctx;
    mf_context_new(m, &cp, &ctx);
    CHECK(mf_decode(ctx, toks, n, true) == MF_OK, "%s: decode: %s", name, mf_last_error());
    snprintf(lp, sizeof lp, "tests/engine/data/%s", json_string_value(json_object_get(j, "logits_file")));
    size_t sz;
    float *ref = test_read_file(lp, &sz);
    double md = 0;
    if (ref && sz == sizeof(float) * json_array_size(pos) * (size_t)cols)
        for (size_t r = 0; r < json_array_size(pos); r++) {
            const float *l = mf_get_logits(ctx, (int32_t)json_integer_value(json_array_get(pos, r)));
            for (int c = 0; c < cols; c++) md = fmax(md, fabs(l[c] - ref[r * cols + c]));
        }
    else
        CHECK(0, "%s: bad reference file size", lp);
    CHECK(md <= 0.01, "%s: max |logit diff| %.5f vs llama.cpp exceeds 0.01", name, md);
    fprintf(stderr, "%s: max |dlogit| vs llama.cpp %.3g (%s)\n", name, md, mf_model_traits(m));
    free(ref);
    free(toks);
    mf_context_free(ctx);
    mf_model_free(m);
done:
    unlink(tmp);
    json_decref(j);
}

int main(void) {
    run_case("qwen2-yarn");
    run_case("llama-ropefreqs");
    run_case("phi3-longrope-long");  /* context 256 > trained 64: the long factors */
    run_case("phi3-longrope-short"); /* context 256 <= trained 512: the short factors */
    return test_summary("test_rope_scaling");
}
