/* compile.c - COMPILE INTO MODEL / VINDEX: the overlay baked into a new GGUF
 * whose FFNs are wider, so any engine runs the edited model.
 *
 * Per layer, the new features are the live inserted ones, then one per base
 * feature whose down vector was rewritten (its gate and up rows copied byte
 * for byte). A deleted or rewritten base feature keeps its slot with zero
 * gate and up rows (and a zero up bias when non-gated): its activation is
 * exactly 0, so its down column stays as it was. Every layer grows to the
 * same width (GGUF has one feed_forward_length): n_ff + the most new
 * features of any layer, rounded up to the down tensor's block size; the
 * spare slots are all zero. So:
 *   ffn_gate / ffn_up  (n_ff rows of n_embd): the old rows' bytes kept, new
 *                      rows quantized to the tensor's type;
 *   ffn_down           (n_embd rows of n_ff): each row's old bytes kept and
 *                      the new features' values appended as whole blocks;
 *   ffn_up.bias        (non-gated): f32, grown likewise.
 * Where a type has no quantizer, that tensor is re-encoded as F32 (its old
 * values decode exactly) and the result says which. Every other tensor and
 * key is copied; feed_forward_length is set to the new width. */
#include "vindex/vindex.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct newfeat {
    const float *gate, *up, *down; /* floats to quantize (inserted), or NULL */
    int32_t copy;                  /* base feature whose gate / up bytes to copy (rewritten), or -1 */
    float bias;
} newfeat;

typedef struct cjob {
    const mf_vindex *v;
    const gguf_file *g;
    int32_t n_ff, n_ff2;
    newfeat **nf;      /* [n_layer][n_add[l]] */
    int32_t *n_add;
    float *row;        /* scratch: max(n_ff2, n_embd) floats */
    uint8_t *qrow;     /* scratch: one encoded row */
} cjob;

typedef struct ctensor {
    cjob *j;
    const gguf_tensor *t;
    int layer;
    char what;         /* 'g' gate, 'u' up, 'f' fused gate-up, 'd' down, 'b' up bias */
    mf_type out_type;
} ctensor;

static bool slot_off(const mf_vindex *v, int l, int f) {
    return mf_vindex_is_deleted(v, l, f) || vx_overlay_down(v, l, f);
}

static bool can_encode(mf_type t) {
    const mf_type_traits *tr = mf_type_traits_ref(t);
    return t == MF_TYPE_F32 || (tr && tr->from_float_ref && tr->to_float);
}

/* n floats to `type` (F32: as is) */
static void encode(mf_type type, const float *src, void *dst, int64_t n) {
    if (type == MF_TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else mf_type_traits_ref(type)->from_float_ref(src, dst, n);
}

/* the input row r of tensor t in out_type (its own bytes when the type is kept) */
static mf_status put_row(ctensor *c, gguf_sink *out, int64_t r, int64_t n) {
    const size_t rb = mf_row_size(c->t->type, c->t->ne[0]);
    const uint8_t *src = (const uint8_t *)c->t->data + (size_t)r * rb;
    if (c->out_type == c->t->type) return gguf_sink_write(out, src, rb);
    mf_type_traits_ref(c->t->type)->to_float(src, c->j->row, n);
    return gguf_sink_write(out, c->j->row, (size_t)n * sizeof(float));
}

static mf_status put_floats(ctensor *c, gguf_sink *out, const float *x, int64_t n) {
    encode(c->out_type, x, c->j->qrow, n);
    return gguf_sink_write(out, c->j->qrow, mf_row_size(c->out_type, n));
}

static mf_status write_tensor(void *ud, const gguf_wtensor *wt, gguf_sink *out) {
    ctensor *c = ud;
    cjob *j = c->j;
    const int l = c->layer, E = j->v->ix.n_embd, na = j->n_add[l];
    const bool gated = j->v->ix.gated;
    mf_status s = MF_OK;
    float *zero = calloc((size_t)(j->n_ff2 > E ? j->n_ff2 : E), sizeof(float));
    if (!zero) return mf_err(MF_ERR_NOMEM, "out of memory");
    if (c->what == 'g' || c->what == 'u' || c->what == 'f') {
        /* rows of n_embd: the features' input rows; a fused gate-up tensor
         * ('f', Phi-3) is the gate's n_ff rows then the up's, each half grown */
        for (int half = 0; half < (c->what == 'f' ? 2 : 1); half++) {
            const bool is_gate = c->what == 'f' ? half == 0 : c->what == 'g' || !gated;
            const int64_t r0 = (int64_t)half * j->n_ff; /* the half's first row in the input */
            for (int f = 0; !s && f < j->n_ff; f++)
                s = slot_off(j->v, l, f) ? put_floats(c, out, zero, E) : put_row(c, out, r0 + f, E);
            for (int i = 0; !s && i < j->n_ff2 - j->n_ff; i++) {
                const newfeat *n = i < na ? &j->nf[l][i] : NULL;
                if (n && n->copy >= 0) s = put_row(c, out, r0 + n->copy, E);
                else if (n) s = put_floats(c, out, is_gate ? n->gate : n->up, E);
                else s = put_floats(c, out, zero, E);
            }
        }
    } else if (c->what == 'd') {
        /* rows of n_ff: old blocks kept, the new features' values appended */
        const int add = j->n_ff2 - j->n_ff;
        for (int e = 0; !s && e < E; e++) {
            const size_t rb = mf_row_size(c->t->type, j->n_ff);
            const uint8_t *src = (const uint8_t *)c->t->data + (size_t)e * rb;
            for (int i = 0; i < add; i++) j->row[i] = i < na ? j->nf[l][i].down[e] : 0.0f;
            if (c->out_type == c->t->type) {
                s = gguf_sink_write(out, src, rb);
                if (!s && add) s = put_floats(c, out, j->row, add);
            } else {
                float *full = malloc((size_t)j->n_ff2 * sizeof *full);
                if (!full) s = mf_err(MF_ERR_NOMEM, "out of memory");
                else {
                    mf_type_traits_ref(c->t->type)->to_float(src, full, j->n_ff);
                    memcpy(full + j->n_ff, j->row, (size_t)add * sizeof(float));
                    s = gguf_sink_write(out, full, (size_t)j->n_ff2 * sizeof(float));
                    free(full);
                }
            }
        }
    } else {
        /* the up bias of a non-gated FFN */
        float *b = malloc((size_t)j->n_ff2 * sizeof *b);
        if (!b) s = mf_err(MF_ERR_NOMEM, "out of memory");
        else {
            mf_type_traits_ref(c->t->type)->to_float(c->t->data, b, j->n_ff);
            for (int f = 0; f < j->n_ff; f++)
                if (slot_off(j->v, l, f)) b[f] = 0;
            mf_type_traits_ref(c->t->type)->to_float(c->t->data, j->row, j->n_ff);
            for (int i = 0; i < j->n_ff2 - j->n_ff; i++) {
                const newfeat *n = i < na ? &j->nf[l][i] : NULL;
                b[j->n_ff + i] = !n ? 0.0f : n->copy >= 0 ? j->row[n->copy] : n->bias;
            }
            s = gguf_sink_write(out, b, (size_t)j->n_ff2 * sizeof(float));
            free(b);
        }
    }
    free(zero);
    return s;
}

/* Which FFN tensor of which layer a name is ('g', 'u', 'd', 'b'), else 0. */
static char ffn_part(const char *name, int n_layer, int *layer) {
    int l, n = 0;
    char part[32];
    if (sscanf(name, "blk.%d.%31[a-z_.]%n", &l, part, &n) != 2 || name[n] || l < 0 || l >= n_layer) return 0;
    *layer = l;
    if (!strcmp(part, "ffn_gate.weight")) return 'g';
    if (!strcmp(part, "ffn_up.weight")) return 'u';
    if (!strcmp(part, "ffn_down.weight")) return 'd';
    if (!strcmp(part, "ffn_up.bias")) return 'b';
    return 0;
}

static void job_free(cjob *j, int n_layer) {
    for (int l = 0; j->nf && l < n_layer; l++) free(j->nf[l]);
    free(j->nf), free(j->n_add), free(j->row), free(j->qrow);
}

mf_status mf_vindex_compile_model(mf_vindex *v, const char *path, mf_vindex_compile_result *r) {
    memset(r, 0, sizeof *r);
    const vx_index *ix = &v->ix;
    const int L = ix->n_layer, F = ix->n_features, E = ix->n_embd;
    if (ix->n_expert) return mf_err(MF_ERR_UNSUPPORTED, "%s has a mixture of experts; only dense FFNs compile", ix->arch);
    gguf_file *g = NULL;
    mf_status s = vx_open_gguf(v->dir, false, &g);
    if (s) return mf_err_prefix(s, "COMPILE needs the model's weights");
    cjob j = {v, g, F, F, calloc((size_t)L, sizeof(newfeat *)), calloc((size_t)L, sizeof(int32_t)), NULL, NULL};
    if (!j.nf || !j.n_add) s = mf_err(MF_ERR_NOMEM, "out of memory");
    int most = 0;
    for (int l = 0; !s && l < L; l++) {
        const int ni = v->ov.n_ins ? v->ov.n_ins[l] : 0;
        int cap = ni;
        for (int f = 0; f < F; f++) cap += vx_overlay_down(v, l, f) && !mf_vindex_is_deleted(v, l, f);
        j.nf[l] = calloc(cap ? (size_t)cap : 1, sizeof(newfeat));
        if (!j.nf[l]) {
            s = mf_err(MF_ERR_NOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < ni; i++) {
            const vx_feat *x = &v->ov.ins[l][i];
            if (!x->dead) j.nf[l][j.n_add[l]++] = (newfeat){x->gate, x->up, x->down, -1, x->bias};
        }
        for (int f = 0; f < F; f++)
            if (vx_overlay_down(v, l, f) && !mf_vindex_is_deleted(v, l, f))
                j.nf[l][j.n_add[l]++] = (newfeat){NULL, NULL, vx_overlay_down(v, l, f), f, 0};
        if (j.n_add[l] > most) most = j.n_add[l];
        r->n_added += j.n_add[l];
    }
    /* the down tensor's block fixes the step the width grows by */
    char name[96];
    snprintf(name, sizeof name, "blk.0.ffn_down.weight");
    const gguf_tensor *d0 = s ? NULL : gguf_find_tensor(g, name);
    if (!s && (!d0 || d0->ne[0] != F || d0->ne[1] != E))
        s = mf_err(MF_ERR_UNSUPPORTED, "%s is missing or not %d x %d (fused or unusual FFN layouts do not compile)",
                   name, F, E);
    if (!s) {
        const int blk = can_encode(d0->type) ? (int)mf_type_geom_get(d0->type)->blck : 1;
        j.n_ff2 = F + (most + blk - 1) / blk * blk;
        j.row = malloc((size_t)(j.n_ff2 > E ? j.n_ff2 : E) * sizeof(float));
        j.qrow = malloc((size_t)(j.n_ff2 > E ? j.n_ff2 : E) * sizeof(float) + 1024);
        if (!j.row || !j.qrow) s = mf_err(MF_ERR_NOMEM, "out of memory");
    }
    r->n_ff_old = F, r->n_ff_new = j.n_ff2;
    gguf_writer *w = NULL;
    ctensor *ct = s ? NULL : calloc(g->n_tensors, sizeof *ct);
    if (!s && !ct) s = mf_err(MF_ERR_NOMEM, "out of memory");
    if (!s) s = gguf_writer_new(&w);
    if (!s) s = gguf_writer_copy_kv(w, g, NULL, NULL);
    char key[128];
    snprintf(key, sizeof key, "%s.feed_forward_length", ix->arch);
    if (!s) s = gguf_writer_set_u32(w, key, (uint32_t)j.n_ff2);
    if (!s) s = gguf_writer_set_str(w, "minfer.compiled.base_sha256", ix->source_sha256);
    if (!s) s = gguf_writer_set_u32(w, "minfer.compiled.features_added", (uint32_t)r->n_added);
    for (uint64_t i = 0; !s && i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        int l = 0;
        const char part = ffn_part(t->name, L, &l);
        if (!part) {
            s = gguf_writer_copy_tensor(w, t);
            continue;
        }
        ctensor *c = &ct[i];
        *c = (ctensor){&j, t, l, part, can_encode(t->type) ? t->type : MF_TYPE_F32};
        if (part == 'b') c->out_type = MF_TYPE_F32;
        if (c->out_type != t->type && !strstr(r->reencoded, part == 'g' ? "ffn_gate" : part == 'u' ? "ffn_up" : part == 'd' ? "ffn_down" : "ffn_up.bias")) {
            const size_t o = strlen(r->reencoded);
            snprintf(r->reencoded + o, sizeof r->reencoded - o, "%s%s %s->f32", o ? ", " : "",
                     part == 'g' ? "ffn_gate" : part == 'u' ? "ffn_up" : part == 'd' ? "ffn_down" : "ffn_up.bias",
                     mf_type_name(t->type));
        }
        /* Phi-3's fused [gate ; up]: 2 n_ff rows of n_embd */
        if (part == 'u' && ix->gated && t->ne[0] == E && t->ne[1] == 2 * (int64_t)F) c->what = 'f';
        const bool rows_are_feats = part != 'd';
        const int64_t ne[2] = {rows_are_feats ? (part == 'b' ? j.n_ff2 : E) : j.n_ff2,
                               rows_are_feats ? (part == 'b' ? 1 : c->what == 'f' ? 2 * j.n_ff2 : j.n_ff2) : E};
        const bool shape_ok = c->what == 'f' || (part == 'b' ? t->ne[0] == F : t->ne[0] * t->ne[1] == (int64_t)F * E);
        if (!shape_ok)
            s = mf_err(MF_ERR_UNSUPPORTED, "%s is not %d x %d (an FFN layout COMPILE does not know)", t->name,
                       part == 'd' ? F : E, part == 'd' ? E : F);
        else
            s = gguf_writer_add_tensor_fn(w, t->name, c->out_type, part == 'b' ? 1 : 2, ne, write_tensor, c);
    }
    if (!r->reencoded[0]) snprintf(r->reencoded, sizeof r->reencoded, "none");
    if (!s) s = gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    free(ct);
    job_free(&j, L);
    gguf_close(g);
    return s;
}

mf_status mf_vindex_compile_vindex(mf_vindex *v, const char *dir, mf_vindex_compile_result *r) {
    /* the compiled model, then a vindex of it like this one (the same level,
     * feature type and labels); the model file goes once the vindex holds it */
    const size_t n = strlen(dir) + 32;
    char *tmp = malloc(n);
    if (!tmp) return mf_err(MF_ERR_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.compiled.gguf", dir);
    mf_status s = mf_vindex_compile_model(v, tmp, r);
    if (!s) {
        mf_vindex_build_params bp = mf_vindex_default_build_params();
        bp.level = v->ix.level;
        bp.feature_type = mf_type_name(v->ix.ftype);
        bp.down_top_k = v->ix.down_top_k;
        bp.n_threads = v->n_threads;
        s = mf_vindex_build(tmp, dir, &bp);
    }
    unlink(tmp);
    free(tmp);
    return s;
}
