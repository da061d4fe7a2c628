/* mixture.c - per-tensor type decisions for `quantize` (see mixture.h): the
 * target table, tensor roles, which tensors stay as they are, the mixture
 * clauses and the row-length fallback chain, matching llama-quantize. */
#include "quantize/mixture.h"
#include "core/error.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- targets ---- */

#define C(when, type) {(when) | QZ_ON, (type)}

/* Rows: name, general.file_type, base type, then the attn_v, ffn_down and
 * attn_output clauses. Targets without clauses quantize every eligible tensor
 * to the base type (apart from output.weight, handled for all targets alike).
 * The legacy types have llama.cpp rules only when an importance matrix is
 * given, which minfer does not take, so they have none here. */
static const qz_ftype g_ftypes[] = {
    {"Q4_0", 2, MF_TYPE_Q4_0, {{0}}, {{0}}, {{0}}},
    {"Q4_1", 3, MF_TYPE_Q4_1, {{0}}, {{0}}, {{0}}},
    {"Q5_0", 8, MF_TYPE_Q5_0, {{0}}, {{0}}, {{0}}},
    {"Q5_1", 9, MF_TYPE_Q5_1, {{0}}, {{0}}, {{0}}},
    {"Q8_0", 7, MF_TYPE_Q8_0, {{0}}, {{0}}, {{0}}},
    {"Q2_K", 10, MF_TYPE_Q2_K,
     {C(QZ_GQA4, MF_TYPE_Q4_K), C(0, MF_TYPE_Q3_K)},
     {C(0, MF_TYPE_Q3_K)},
     {C(QZ_FALCON, QZ_KEEP), C(QZ_MOE8, MF_TYPE_Q5_K), C(0, MF_TYPE_Q3_K)}},
    {"Q3_K_S", 11, MF_TYPE_Q3_K,
     {{0}},
     {{0}},
     {C(QZ_NOT_FALCON | QZ_MOE8, MF_TYPE_Q5_K)}},
    {"Q3_K_M", 12, MF_TYPE_Q3_K,
     {C(QZ_FIRST2, MF_TYPE_Q5_K), C(0, MF_TYPE_Q4_K)},
     {C(QZ_SIXTEENTH, MF_TYPE_Q5_K), C(QZ_NOT_FALCON, MF_TYPE_Q4_K), C(QZ_MORE_BITS, MF_TYPE_Q4_K), C(0, MF_TYPE_Q3_K)},
     {C(QZ_FALCON, QZ_KEEP), C(QZ_MOE8, MF_TYPE_Q5_K), C(0, MF_TYPE_Q4_K)}},
    {"Q3_K_L", 13, MF_TYPE_Q3_K,
     {C(0, MF_TYPE_Q5_K)},
     {C(QZ_FALCON, MF_TYPE_Q4_K), C(0, MF_TYPE_Q5_K)},
     {C(QZ_FALCON, MF_TYPE_Q4_K), C(QZ_NOT_MOE8, MF_TYPE_Q5_K)}},
    {"Q4_K_S", 14, MF_TYPE_Q4_K,
     {C(QZ_FIRST4, MF_TYPE_Q5_K)},
     {C(QZ_NOT_FALCON | QZ_EIGHTH, MF_TYPE_Q5_K)},
     {C(QZ_NOT_FALCON | QZ_MOE8, MF_TYPE_Q5_K)}},
    {"Q4_K_M", 15, MF_TYPE_Q4_K,
     {C(QZ_MORE_BITS, MF_TYPE_Q6_K)},
     {C(QZ_FALCON | QZ_SIXTEENTH, MF_TYPE_Q6_K), C(QZ_FALCON | QZ_MORE_BITS, MF_TYPE_Q5_K), C(QZ_FALCON, QZ_KEEP),
      C(QZ_MORE_BITS, MF_TYPE_Q6_K)},
     {C(QZ_NOT_FALCON | QZ_MOE8, MF_TYPE_Q5_K)}},
    {"Q5_K_S", 16, MF_TYPE_Q5_K, {{0}}, {{0}}, {{0}}},
    {"Q5_K_M", 17, MF_TYPE_Q5_K,
     {C(QZ_MORE_BITS, MF_TYPE_Q6_K)},
     {C(QZ_MORE_BITS, MF_TYPE_Q6_K)},
     {{0}}},
    {"Q6_K", 18, MF_TYPE_Q6_K, {{0}}, {{0}}, {{0}}},
    {"IQ4_NL", 25, MF_TYPE_IQ4_NL,
     {C(QZ_GQA4, MF_TYPE_Q5_K)},
     {C(QZ_EIGHTH, MF_TYPE_Q5_K)},
     {C(QZ_NOT_FALCON | QZ_MOE8, MF_TYPE_Q5_K)}},
    {"IQ4_XS", 30, MF_TYPE_IQ4_XS,
     {C(QZ_GQA4, MF_TYPE_Q5_K)},
     {C(QZ_EIGHTH, MF_TYPE_Q5_K)},
     {C(QZ_NOT_FALCON | QZ_MOE8, MF_TYPE_Q5_K)}},
    {"F16", 1, MF_TYPE_F16, {{0}}, {{0}}, {{0}}},
    {"BF16", 32, MF_TYPE_BF16, {{0}}, {{0}}, {{0}}},
    {"F32", 0, MF_TYPE_F32, {{0}}, {{0}}, {{0}}},
};
#define N_FTYPES (sizeof g_ftypes / sizeof g_ftypes[0])

/* llama-quantize's short names for the medium K mixtures */
static const struct {
    const char *alias, *name;
} g_aliases[] = {{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}};

static bool ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

const qz_ftype *qz_ftype_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof g_aliases / sizeof g_aliases[0]; i++)
        if (ieq(name, g_aliases[i].alias)) name = g_aliases[i].name;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ieq(name, g_ftypes[i].name)) return &g_ftypes[i];
    /* a bare file-type number, as llama-quantize also takes */
    char *end;
    long v = strtol(name, &end, 10);
    if (end != name && !*end)
        for (size_t i = 0; i < N_FTYPES; i++)
            if (g_ftypes[i].file_type == v) return &g_ftypes[i];
    return NULL;
}

static char g_names[256];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void build_names(void) {
    size_t o = 0;
    for (size_t i = 0; i < N_FTYPES; i++)
        o += (size_t)snprintf(g_names + o, sizeof g_names - o, "%s%s", i ? ", " : "", g_ftypes[i].name);
}

/* built once from the table, so the list in messages cannot drift from it */
const char *qz_ftype_names(void) {
    pthread_once(&g_names_once, build_names);
    return g_names;
}

bool qz_type_is_quantized(mf_type t) {
    const mf_type_geom *g = mf_type_geom_get((int)t);
    return g && g->blck > 1;
}

/* Tensor types an override may name: those with a reference quantizer,
 * except the activation-only Q8_1 / Q8_K. */
static bool producible(int t) {
    const mf_type_traits *tr = mf_type_traits_ref(t);
    return tr && tr->from_float_ref && t != MF_TYPE_Q8_1 && t != MF_TYPE_Q8_K;
}

mf_status qz_parse_tensor_type(const char *name, const char *what, mf_type *out) {
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        const char *n = mf_type_geom_get(t) ? mf_type_geom_get(t)->name : NULL;
        if (n && ieq(n, name)) {
            if (!producible(t)) break;
            *out = (mf_type)t;
            return MF_OK;
        }
    }
    char list[256];
    size_t o = 0;
    for (int t = 0; t < MF_TYPE_COUNT; t++)
        if (producible(t)) o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", mf_type_name(t));
    return mf_err(MF_ERR_INVALID_ARG, "%s: unknown or unsupported tensor type '%s' (valid: %s)", what, name, list);
}

/* ---- tensor roles ---- */

typedef enum role {
    R_OTHER,
    R_TOKEN_EMBD,
    R_OUTPUT,
    R_ATTN_V, /* attn_v and the fused projections that hold V (qkv, kv_b) */
    R_ATTN_K,
    R_ATTN_Q,
    R_ATTN_OUT,
    R_FFN_UP,
    R_FFN_GATE,
    R_FFN_DOWN,
} role;

/* First matching pattern wins, so the fused names come before attn_v.
 * Substring matches: expert and shared-expert variants share a role. */
static const struct {
    const char *pat;
    role r;
} g_roles[] = {
    {"attn_qkv.weight", R_ATTN_V}, {"attn_kv_b.weight", R_ATTN_V},     {"attn_v.weight", R_ATTN_V},
    {"attn_k.weight", R_ATTN_K},   {"attn_q.weight", R_ATTN_Q},        {"attn_output.weight", R_ATTN_OUT},
    {"ffn_up", R_FFN_UP},          {"ffn_gate", R_FFN_GATE},           {"ffn_down", R_FFN_DOWN},
};

static role role_of(const char *name) {
    if (!strcmp(name, "output.weight")) return R_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return R_TOKEN_EMBD;
    for (size_t i = 0; i < sizeof g_roles / sizeof g_roles[0]; i++)
        if (strstr(name, g_roles[i].pat)) return g_roles[i].r;
    return R_OTHER;
}

/* Names containing any of these stay in their input type: small or
 * sensitive tensors of various architectures (MoE routers, position and
 * token-type embeddings, conv kernels, RWKV mixing vectors, T5 relative
 * bias, vision/audio adapters). */
static const char *const g_keep_sub[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
    "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
    "a.rvq.codebook", "mm.a.code_embd",
};
static const char *const g_keep_exact[] = {"position_embd.weight", "token_types.weight"};

/* Dimensions counted as ggml counts them: trailing 1s do not count, so a
 * [n, 1] matrix is a vector. */
static int eff_dims(const gguf_tensor *t) {
    int d = GGUF_MAX_DIMS;
    while (d > 1 && t->ne[d - 1] == 1) d--;
    return d;
}

static bool quantizable(const gguf_tensor *t) {
    if (eff_dims(t) < 2) return false;
    size_t n = strlen(t->name);
    if (n < 6 || strcmp(t->name + n - 6, "weight")) return false;
    for (size_t i = 0; i < sizeof g_keep_sub / sizeof g_keep_sub[0]; i++)
        if (strstr(t->name, g_keep_sub[i])) return false;
    for (size_t i = 0; i < sizeof g_keep_exact / sizeof g_keep_exact[0]; i++)
        if (!strcmp(t->name, g_keep_exact[i])) return false;
    return true;
}

/* ---- what the rules need from the metadata ---- */

typedef struct model_info {
    int64_t n_layer, n_head, n_head_kv, n_expert;
    bool falcon;
    bool big70; /* llama.cpp classifies the model as 70B, which gets extra attn_v bits */
    bool tied;  /* no output.weight: token_embd doubles as the output matrix */
} model_info;

/* An integer key, or the first element of a per-layer integer array. */
static int64_t meta_int(const gguf_file *f, const char *arch, const char *suffix, int64_t dflt) {
    char key[192];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_value *v = gguf_get(f, key);
    if (!v) return dflt;
    if (gguf_vtype_is_int(v->type)) return v->type == GGUF_I8 || v->type == GGUF_I16 || v->type == GGUF_I32 || v->type == GGUF_I64 ? v->i : (int64_t)v->u;
    if (v->type == GGUF_ARR && gguf_vtype_is_int(v->arr.elem) && v->arr.n > 0) return gguf_arr_int(v, 0);
    return dflt;
}

/* Layer number of a "blk.N." name, -1 otherwise (sscanf, so "blk.7x" is 7
 * too, as llama.cpp reads it). */
static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) return -1;
    return l;
}

/* llama.cpp's 70B classes by architecture and block count (the only model
 * size the rules look at). */
static bool is_70b(const char *arch, int64_t n_layer, int64_t n_head, int64_t n_head_kv) {
    if (!strcmp(arch, "llama")) return n_layer == 80 && n_head != n_head_kv;
    if (!strcmp(arch, "qwen2") || !strcmp(arch, "deci") || !strcmp(arch, "olmo")) return n_layer == 80;
    if (!strcmp(arch, "jais2")) return n_layer == 68;
    return false;
}

static void read_model_info(const gguf_file *f, model_info *mi) {
    char arch[64] = "";
    gguf_get_str(f, "general.architecture", false, arch, sizeof arch);
    memset(mi, 0, sizeof *mi);
    mi->n_layer = meta_int(f, arch, "block_count", -1);
    if (mi->n_layer < 0) { /* no block count: infer it from the tensor names */
        mi->n_layer = 0;
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            int l = layer_of(f->tensors[i].name);
            if (l + 1 > mi->n_layer) mi->n_layer = l + 1;
        }
    }
    mi->n_head = meta_int(f, arch, "attention.head_count", 0);
    mi->n_head_kv = meta_int(f, arch, "attention.head_count_kv", mi->n_head);
    mi->n_expert = meta_int(f, arch, "expert_count", 0);
    mi->falcon = !strcmp(arch, "falcon");
    mi->big70 = is_70b(arch, mi->n_layer, mi->n_head, mi->n_head_kv);
    mi->tied = gguf_find_tensor(f, "output.weight") == NULL;
}

/* ---- clauses ---- */

static bool more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool holds(uint32_t when, const model_info *mi, int64_t i, int64_t n) {
    int64_t gqa = mi->n_head_kv ? mi->n_head / mi->n_head_kv : 0;
    if ((when & QZ_GQA4) && !(gqa >= 4)) return false;
    if ((when & QZ_FALCON) && !mi->falcon) return false;
    if ((when & QZ_NOT_FALCON) && mi->falcon) return false;
    if ((when & QZ_MOE8) && mi->n_expert != 8) return false;
    if ((when & QZ_NOT_MOE8) && mi->n_expert == 8) return false;
    if ((when & QZ_FIRST2) && !(i < 2)) return false;
    if ((when & QZ_FIRST4) && !(i < 4)) return false;
    if ((when & QZ_EIGHTH) && !(i < n / 8)) return false;
    if ((when & QZ_SIXTEENTH) && !(i < n / 16)) return false;
    if ((when & QZ_MORE_BITS) && !more_bits(i, n)) return false;
    return true;
}

static mf_type apply(const qz_clause *cl, mf_type cur, const model_info *mi, int64_t i, int64_t n) {
    for (int k = 0; k < QZ_MAX_CLAUSES && cl[k].when; k++)
        if (holds(cl[k].when, mi, i, n)) return cl[k].type == QZ_KEEP ? cur : (mf_type)cl[k].type;
    return cur;
}

/* ---- decisions ---- */

typedef struct plan_state {
    const gguf_file *f;
    const qz_options *o;
    model_info mi;
    int64_t n_attn_v, i_attn_v, i_ffn_down, i_ffn_gate, i_ffn_up;
} plan_state;

/* (position, count) a layer-dependent rule sees: a running count of such
 * tensors, except in MoE models, where expert tensors are not in layer order
 * and the layer is read from the name. */
static mf_status layer_pos(plan_state *st, const char *name, int64_t counter, int64_t *i) {
    *i = counter;
    if (st->mi.n_expert <= 1) return MF_OK;
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1)
        return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': cannot tell its layer (expected blk.N.)", st->f->path, name);
    if (l < 0 || l >= st->mi.n_layer)
        return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': layer %d is outside [0, %" PRId64 ")", st->f->path, name, l,
                      st->mi.n_layer);
    *i = l;
    return MF_OK;
}

/* The mixture: the base type adjusted for the tensor's role and position. */
static mf_status mixture(plan_state *st, const gguf_tensor *t, role r, mf_type *type) {
    const qz_ftype *ft = st->o->ft;
    const model_info *mi = &st->mi;
    mf_type nt = *type;
    if (r == R_OUTPUT || (r == R_TOKEN_EMBD && mi->tied)) {
        /* the output matrix gets 6 bits (8 where its rows do not fit the base
         * block or for falcon); Q8_0 models keep Q8_0 */
        if (st->o->out_override >= 0) nt = (mf_type)st->o->out_override;
        else if (mi->falcon || t->ne[0] % mf_type_geom_get(nt)->blck) nt = MF_TYPE_Q8_0;
        else if (nt != MF_TYPE_Q8_0) nt = MF_TYPE_Q6_K;
    } else if (r == R_TOKEN_EMBD) {
        /* untied embeddings: no rule for any target offered here */
    } else if (r == R_ATTN_V) {
        nt = apply(ft->attn_v, nt, mi, st->i_attn_v, st->n_attn_v);
        if (mi->big70 && (nt == MF_TYPE_Q3_K || nt == MF_TYPE_Q4_K)) nt = MF_TYPE_Q5_K;
        if (mi->n_expert == 8) nt = MF_TYPE_Q8_0;
        st->i_attn_v++;
    } else if (r == R_ATTN_K) {
        if (mi->n_expert == 8) nt = MF_TYPE_Q8_0;
    } else if (r == R_FFN_DOWN) {
        int64_t i;
        mf_status s = layer_pos(st, t->name, st->i_ffn_down, &i);
        if (s) return s;
        nt = apply(ft->ffn_down, nt, mi, i, mi->n_layer);
        st->i_ffn_down++;
    } else if (r == R_ATTN_OUT) {
        nt = apply(ft->attn_out, nt, mi, 0, 0);
    } else if (r == R_FFN_GATE || r == R_FFN_UP) {
        /* no rule for the offered targets, but llama.cpp still insists on a
         * readable layer for MoE models */
        int64_t i;
        mf_status s = layer_pos(st, t->name, r == R_FFN_GATE ? st->i_ffn_gate : st->i_ffn_up, &i);
        if (s) return s;
        if (r == R_FFN_GATE) st->i_ffn_gate++;
        else st->i_ffn_up++;
    }
    *type = nt;
    return MF_OK;
}

/* Where a type goes when a row does not hold whole blocks of it: a type of
 * the same family with 32-element blocks. -1: none defined. */
static int fallback_of(mf_type t) {
    switch (t) {
    case MF_TYPE_IQ1_S: case MF_TYPE_IQ1_M: case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S:
    case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S: case MF_TYPE_IQ4_XS: return MF_TYPE_IQ4_NL;
    case MF_TYPE_Q2_0: case MF_TYPE_Q2_K: case MF_TYPE_Q3_K: case MF_TYPE_TQ1_0: case MF_TYPE_TQ2_0: return MF_TYPE_Q4_0;
    case MF_TYPE_Q4_K: return MF_TYPE_Q5_0;
    case MF_TYPE_Q5_K: return MF_TYPE_Q5_1;
    case MF_TYPE_Q6_K: return MF_TYPE_Q8_0;
    default: return -1;
    }
}

static char *dupf(const char *fmt, ...) MF_PRINTF(1, 2);
static char *dupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static mf_status fit_row(plan_state *st, const gguf_tensor *t, mf_type want, qz_choice *c) {
    const int64_t cols = t->ne[0];
    const int32_t bw = mf_type_geom_get(want)->blck;
    c->type = want;
    if (cols % bw == 0) return MF_OK;
    int fb = fallback_of(want);
    if (fb < 0)
        return mf_err(MF_ERR_UNSUPPORTED,
                      "%s: tensor '%s': rows of %" PRId64 " values are not a multiple of %d (the %s block) and %s has no "
                      "fallback type",
                      st->f->path, t->name, cols, (int)bw, mf_type_name(want), mf_type_name(want));
    const int32_t bf = mf_type_geom_get(fb)->blck;
    c->fallback = true;
    if (cols % bf == 0) {
        c->type = (mf_type)fb;
        c->note = dupf("%s: rows of %" PRId64 " are not a multiple of %d (%s) -> falling back to %s", t->name, cols,
                       (int)bw, mf_type_name(want), mf_type_name(fb));
    } else {
        /* not even a multiple of 32: only a float type holds it */
        c->type = MF_TYPE_F16;
        c->note = dupf("%s: rows of %" PRId64 " are not a multiple of %d (%s) nor of %d (%s) -> falling back to f16",
                       t->name, cols, (int)bw, mf_type_name(want), (int)bf, mf_type_name(fb));
    }
    if (!c->note) return mf_err(MF_ERR_NOMEM, "%s: out of memory", st->f->path);
    return MF_OK;
}

static mf_status decide(plan_state *st, const gguf_tensor *t, qz_choice *c) {
    const qz_options *o = st->o;
    c->type = t->type;
    if (!quantizable(t)) return MF_OK;
    role r = role_of(t->name);
    /* explicit types for the two big matrices win over everything */
    if (o->embd_override >= 0 && r == R_TOKEN_EMBD) {
        c->type = (mf_type)o->embd_override;
        return MF_OK;
    }
    if (o->out_override >= 0 && r == R_OUTPUT) {
        c->type = (mf_type)o->out_override;
        return MF_OK;
    }
    mf_type nt = o->ft->base;
    if (!qz_type_is_quantized(nt)) { /* F16 / BF16 / F32: a plain conversion */
        c->type = nt;
        return MF_OK;
    }
    if (!o->pure) {
        mf_status s = mixture(st, t, r, &nt);
        if (s) return s;
    }
    return fit_row(st, t, nt, c);
}

typedef struct visit {
    int layer;
    const char *name;
    uint64_t index;
} visit;

static int by_layer_then_name(const void *pa, const void *pb) {
    const visit *a = pa, *b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return strcmp(a->name, b->name);
}

mf_status qz_plan(const gguf_file *f, const qz_options *o, qz_choice *choices) {
    plan_state st = {.f = f, .o = o};
    read_model_info(f, &st.mi);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        choices[i] = (qz_choice){f->tensors[i].type, false, NULL};
        if (role_of(f->tensors[i].name) == R_ATTN_V) st.n_attn_v++;
    }
    /* llama-quantize visits tensors sorted by layer (non-layer tensors
     * first), then by name; its running counts follow that order */
    visit *order = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (!order) return mf_err(MF_ERR_NOMEM, "%s: out of memory", f->path);
    for (uint64_t i = 0; i < f->n_tensors; i++) order[i] = (visit){layer_of(f->tensors[i].name), f->tensors[i].name, i};
    qsort(order, (size_t)f->n_tensors, sizeof *order, by_layer_then_name);
    mf_status s = MF_OK;
    for (uint64_t k = 0; k < f->n_tensors && !s; k++) {
        const gguf_tensor *t = &f->tensors[order[k].index];
        qz_choice *c = &choices[order[k].index];
        s = decide(&st, t, c);
        /* an explicit type is taken as given, so check that it fits */
        if (!s && c->type != t->type && t->ne[0] % mf_type_geom_get(c->type)->blck)
            s = mf_err(MF_ERR_INVALID_ARG, "%s: tensor '%s': rows of %" PRId64 " values do not fit %s (blocks of %d)",
                       f->path, t->name, t->ne[0], mf_type_name(c->type), (int)mf_type_geom_get(c->type)->blck);
    }
    free(order);
    if (s) qz_choices_free(choices, f->n_tensors);
    return s;
}

void qz_choices_free(qz_choice *choices, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        free(choices[i].note);
        choices[i].note = NULL;
    }
}
