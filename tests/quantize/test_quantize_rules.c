/* test_quantize_rules.c - the per-tensor type rules on synthetic models that
 * the golden files cannot reach: 16 layers (position-dependent promotions),
 * grouped-query attention, tied embeddings, falcon, 8-expert MoE, the 70B
 * class, tensors that are never quantized, odd row lengths, --pure and the
 * output / token-embedding overrides.
 *
 * The expectations below were recorded from llama-quantize --dry-run
 * (llama.cpp 3f545bec) on exactly these models; `quantize_rules --write DIR`
 * writes them as GGUF files (and prints the cases) to record them again.
 *
 * Expectation syntax: space-separated entries. "output.weight=q6_K" names a
 * tensor; "attn_v.weight=q6_K@0,1,4" names blk.N.attn_v.weight for the listed
 * layers ("@*" for all). Tensors not named get the target's base type.
 * "ERROR" means llama-quantize refuses the case. */
#include "testutil.h"

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "quant/types.h"
#include "quantize/mixture.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- synthetic models ---- */

enum {
    M_TIED = 1 << 0,   /* no output.weight */
    M_ODD = 1 << 1,    /* extra tensors that test eligibility and row lengths */
    M_QKV = 1 << 2,    /* falcon-style fused attn_qkv */
    M_MOE = 1 << 3,    /* expert tensors */
    M_THIN = 1 << 4,   /* only attn_v and ffn_down per layer (for 80 layers) */
    M_ODDROW = 1 << 5, /* ffn_down rows of 96 (a multiple of 32, not of 256) */
};

typedef struct model_spec {
    const char *id, *arch;
    int n_layer, n_head, n_head_kv, n_expert;
    unsigned flags;
} model_spec;

static const model_spec k_models[] = {
    {"llama16", "llama", 16, 32, 8, 0, 0},
    {"llama9tied", "llama", 9, 8, 8, 0, M_TIED | M_ODD},
    {"llama9odd", "llama", 9, 8, 8, 0, M_ODDROW},
    {"falcon8", "falcon", 8, 8, 8, 0, M_QKV},
    {"moe8", "llama", 4, 8, 2, 8, M_MOE},
    {"llama80", "llama", 80, 64, 8, 0, M_THIN},
    {"qwen80", "qwen2", 80, 8, 8, 0, M_THIN},
};

/* Tensor data: zeros for planning; --write fills it with pseudo-random
 * values so that the written models can also be quantized for real. */
static float g_data[256 * 2 * 8];

static mf_status add(gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3] = {ne0, ne1, ne2};
    uint32_t nd = ne2 > 1 ? 3 : ne1 > 0 ? 2 : 1;
    if (ne1 <= 0) ne[1] = 1;
    return gguf_writer_add_tensor(w, name, MF_TYPE_F32, nd, ne, g_data);
}

static mf_status add_blk(gguf_writer *w, int l, const char *suffix, int64_t ne0, int64_t ne1, int64_t ne2) {
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s", l, suffix);
    return add(w, name, ne0, ne1, ne2);
}

/* A GGUF in memory with the metadata llama.cpp needs to classify the model
 * and small f32 tensors (2 rows: only row length and dimension count matter). */
static uint8_t *build_model(const model_spec *m, size_t *size) {
    gguf_writer *w;
    if (gguf_writer_new(&w)) return NULL;
    char key[128];
    gguf_writer_set_str(w, "general.architecture", m->arch);
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, m->arch), key)
    gguf_writer_set_u32(w, KEY("context_length"), 256);
    gguf_writer_set_u32(w, KEY("embedding_length"), 256);
    gguf_writer_set_u32(w, KEY("feed_forward_length"), 512);
    gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)m->n_layer);
    gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)m->n_head);
    gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)m->n_head_kv);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_epsilon"), 1e-5f);
    if (m->n_expert) {
        gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)m->n_expert);
        gguf_writer_set_u32(w, KEY("expert_used_count"), 2);
    }
#undef KEY
    mf_status s = add(w, "token_embd.weight", 256, 2, 1);
    if (!s) s = add(w, "output_norm.weight", 256, 0, 1);
    if (!s && !(m->flags & M_TIED)) s = add(w, "output.weight", 256, 2, 1);
    if (!s && (m->flags & M_ODD)) {
        s = add(w, "position_embd.weight", 256, 2, 1);    /* never quantized */
        if (!s) s = add(w, "rope_freqs.weight", 256, 0, 1);
    }
    for (int l = 0; l < m->n_layer && !s; l++) {
        if (m->flags & M_THIN) {
            s = add_blk(w, l, "attn_v.weight", 256, 2, 1);
            if (!s) s = add_blk(w, l, "ffn_down.weight", 256, 2, 1);
            continue;
        }
        s = add_blk(w, l, "attn_norm.weight", 256, 0, 1);
        if (m->flags & M_QKV) {
            if (!s) s = add_blk(w, l, "attn_qkv.weight", 256, 2, 1);
        } else {
            if (!s) s = add_blk(w, l, "attn_q.weight", 256, 2, 1);
            if (!s) s = add_blk(w, l, "attn_k.weight", 256, 2, 1);
            if (!s) s = add_blk(w, l, "attn_v.weight", 256, 2, 1);
        }
        if (!s) s = add_blk(w, l, "attn_output.weight", 256, 2, 1);
        if (!s) s = add_blk(w, l, "ffn_norm.weight", 256, 0, 1);
        if (m->flags & M_MOE) {
            if (!s) s = add_blk(w, l, "ffn_gate_inp.weight", 256, 8, 1);   /* router: never quantized */
            if (!s) s = add_blk(w, l, "ffn_gate_exps.weight", 256, 2, 8);
            if (!s) s = add_blk(w, l, "ffn_up_exps.weight", 256, 2, 8);
            if (!s) s = add_blk(w, l, "ffn_down_exps.weight", 256, 2, 8);
        } else {
            if (!s) s = add_blk(w, l, "ffn_gate.weight", 256, 2, 1);
            if (!s) s = add_blk(w, l, "ffn_up.weight", 256, 2, 1);
            if (!s) s = add_blk(w, l, "ffn_down.weight", (m->flags & M_ODDROW) ? 96 : 256, 2, 1);
        }
        if ((m->flags & M_ODD) && l == 0) {
            if (!s) s = add_blk(w, l, "attn_q.bias", 256, 2, 1);        /* not a weight */
            if (!s) s = add_blk(w, l, "attn_q_norm.weight", 256, 2, 1); /* a norm, even if 2-D */
            if (!s) s = add_blk(w, l, "vec.weight", 256, 1, 1);         /* [256, 1]: a vector to ggml */
            if (!s) s = add_blk(w, l, "ssm_conv1d.weight", 256, 2, 1);
        }
    }
    uint8_t *buf = NULL;
    if (!s) s = gguf_writer_write_mem(w, &buf, size);
    gguf_writer_free(w);
    if (s) {
        fprintf(stderr, "building %s: %s\n", m->id, mf_last_error());
        return NULL;
    }
    return buf;
}

/* ---- cases ---- */

typedef struct rule_case {
    const char *model, *type;
    bool pure;
    const char *out_t, *embd_t; /* overrides, NULL = none */
    const char *expect;
} rule_case;


static const rule_case k_cases[] = {
#include "rules_cases.inc"
};

/* ---- checking ---- */

static const char *expected_type(const char *expect, const char *name, const char *base) {
    static char out[32];
    int layer = -1;
    const char *suffix = name;
    if (sscanf(name, "blk.%d.", &layer) == 1) suffix = strchr(name + 4, '.') + 1;
    const char *p = expect;
    while (*p) {
        while (*p == ' ') p++;
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char ent[256];
        snprintf(ent, sizeof ent, "%.*s", (int)len, p);
        p += len;
        char *eq = strchr(ent, '=');
        if (!eq) continue;
        *eq = 0;
        char *type = eq + 1, *at = strchr(type, '@');
        if (at) *at++ = 0;
        if (!at) {
            if (!strcmp(ent, name)) return snprintf(out, sizeof out, "%s", type), out;
            continue;
        }
        if (layer < 0 || strcmp(ent, suffix)) continue;
        if (!strcmp(at, "*")) return snprintf(out, sizeof out, "%s", type), out;
        for (char *tok = strtok(at, ","); tok; tok = strtok(NULL, ","))
            if (atoi(tok) == layer) return snprintf(out, sizeof out, "%s", type), out;
    }
    return base;
}

static void run_case(const rule_case *c, gguf_file *f) {
    qz_options o = {.ft = qz_ftype_find(c->type), .pure = c->pure, .out_override = -1, .embd_override = -1};
    CHECK(o.ft != NULL, "unknown type %s", c->type);
    if (!o.ft) return;
    mf_type t;
    if (c->out_t && !qz_parse_tensor_type(c->out_t, "out", &t)) o.out_override = (int)t;
    if (c->embd_t && !qz_parse_tensor_type(c->embd_t, "embd", &t)) o.embd_override = (int)t;
    char label[160];
    snprintf(label, sizeof label, "%s %s%s%s%s%s%s", c->model, c->type, c->pure ? " --pure" : "",
             c->out_t ? " --output-tensor-type " : "", c->out_t ? c->out_t : "", c->embd_t ? " --token-embedding-type " : "",
             c->embd_t ? c->embd_t : "");
    qz_choice *ch = calloc(f->n_tensors, sizeof *ch);
    mf_status s = qz_plan(f, &o, ch);
    if (!strcmp(c->expect, "ERROR")) {
        CHECK(s != MF_OK, "%s: llama-quantize refuses this, minfer planned it", label);
        free(ch);
        return;
    }
    CHECK(s == MF_OK, "%s: %s", label, mf_last_error());
    int bad = 0;
    for (uint64_t i = 0; !s && i < f->n_tensors; i++) {
        const char *want = expected_type(c->expect, f->tensors[i].name, mf_type_name(o.ft->base));
        const char *got = mf_type_name(ch[i].type);
        if (strcmp(want, got) && bad++ < 5)
            CHECK(0, "%s: %s is %s, llama-quantize gives %s", label, f->tensors[i].name, got, want);
    }
    CHECK(bad == 0, "%s: %d tensors differ", label, bad);
    qz_choices_free(ch, f->n_tensors);
    free(ch);
}

/* --write DIR: the models as files, and one line per case for recording */
static int write_models(const char *dir) {
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof g_data / sizeof g_data[0]; i++) {
        x = x * 1664525u + 1013904223u;
        g_data[i] = (float)((int32_t)(x >> 8) - (1 << 23)) / (float)(1 << 23);
    }
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        size_t n;
        uint8_t *b = build_model(&k_models[i], &n);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, k_models[i].id);
        FILE *fp = b ? fopen(path, "wb") : NULL;
        if (!fp || fwrite(b, 1, n, fp) != n) return 1;
        fclose(fp);
        free(b);
    }
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const rule_case *c = &k_cases[i];
        printf("%s|%s|%s%s%s%s%s\n", c->model, c->type, c->pure ? "--pure " : "", c->out_t ? "--output-tensor-type " : "",
               c->out_t ? c->out_t : "", c->embd_t ? (c->out_t ? " --token-embedding-type " : "--token-embedding-type ") : "",
               c->embd_t ? c->embd_t : "");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_models(argv[2]);
    gguf_file *files[sizeof k_models / sizeof k_models[0]] = {0};
    uint8_t *bufs[sizeof k_models / sizeof k_models[0]] = {0};
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        size_t n;
        bufs[i] = build_model(&k_models[i], &n);
        CHECK(bufs[i] && gguf_parse(bufs[i], n, k_models[i].id, &files[i]) == MF_OK, "model %s: %s", k_models[i].id,
              mf_last_error());
    }
    int n_cases = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        size_t m = 0;
        while (m < sizeof k_models / sizeof k_models[0] && strcmp(k_models[m].id, k_cases[i].model)) m++;
        CHECK(m < sizeof k_models / sizeof k_models[0], "case %zu: no model %s", i, k_cases[i].model);
        if (m == sizeof k_models / sizeof k_models[0] || !files[m]) continue;
        run_case(&k_cases[i], files[m]);
        n_cases++;
    }
    fprintf(stderr, "%d rule cases checked\n", n_cases);
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        gguf_close(files[i]);
        free(bufs[i]);
    }
    return test_summary("quantize_rules");
}
