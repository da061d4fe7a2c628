/* insert.c - INSERT INTO EDGES: a new feature at one layer that makes the
 * model continue a prompt with a chosen token, as an overlay op.
 *
 *   gate  reads d, the direction that tells the prompt's FFN input at the
 *         layer (last position) apart from ordinary ones (insert_gate.c; the
 *         reference: the prompt's inner positions and N_REF positions of
 *         the model's own greedy text from BOS). With t(x) = d.x / d.xe (1 on
 *         the prompt) and b(x) = mu.x / mu.xe (about 1 on any residual, mu
 *         the reference mean: the bias the FFN lacks), the gate's input is
 *         G (t - TAU b), GATE_PRE on the prompt: it opens only where a
 *         residual is nearly the prompt's, not in proportion to t;
 *   up    d / d.xe (t itself; gated FFNs), so the activation on the prompt
 *         is silu(GATE_PRE) and falls off fast elsewhere;
 *   down  the target's direction in the residual stream (its output row,
 *         minus the mean row, through the output norm's weight), times a
 *         strength: the smallest found by doubling and bisection with which
 *         the target is the model's top token on the prompt, times ALPHA.
 * Every trial runs the whole model with the overlay (earlier edits too). */
#include "vindex/vindex.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GATE_PRE 6.0f     /* silu(6) = 5.985: the feature is well on at the entity */
#define DEFAULT_ALPHA 1.5f
#ifndef TAU
#define TAU 0.8
#endif
#define BISECT 8          /* strength found to within 2^-8 of its doubling step */

#define N_REF 48           /* reference positions: the model's own text from BOS */

typedef struct capture {
    mf_walk *w;
    int layer;
    float *rows;  /* [cap][n_embd] the FFN input at `layer`, appended while recording */
    int n, cap;
    bool record;
} capture;

static int capture_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                       const int32_t *pos, void *ud) {
    capture *c = ud;
    if (c->record && layer == c->layer && c->n + n_rows <= c->cap) {
        memcpy(c->rows + (size_t)c->n * n_embd, xn, (size_t)n_rows * n_embd * sizeof(float));
        c->n += n_rows;
    }
    return mf_walk_ffn(layer, xn, out, n_rows, n_embd, seq, pos, c->w);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Decodes the prompt afresh; *top = the last position's argmax. */
static mf_status run(mf_context *ctx, const mf_token *t, int n, int V, int *top, float *logits) {
    mf_kv_truncate(ctx, 0);
    mf_status s = mf_decode(ctx, t, n, false);
    if (s) return s;
    const float *lg = mf_get_logits(ctx, -1);
    *top = argmax(lg, V);
    if (logits) memcpy(logits, lg, (size_t)V * sizeof(float));
    return MF_OK;
}

/* dst = one row of a GGUF tensor as floats */
static mf_status tensor_row(const gguf_file *g, const char *name, int64_t row, float *dst) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) return mf_err(MF_ERR_FORMAT, "tensor %s is not in the vindex's weights", name);
    const mf_type_traits *tr = mf_type_traits_ref(t->type);
    if (!tr || !tr->to_float || row < 0 || row >= t->ne[1])
        return mf_err(MF_ERR_UNSUPPORTED, "tensor %s: cannot read row %lld", name, (long long)row);
    const size_t rb = mf_row_size(t->type, t->ne[0]);
    tr->to_float((const uint8_t *)t->data + (size_t)row * rb, dst, t->ne[0]);
    return MF_OK;
}

static mf_status dir_of(const mf_vindex *v, const mf_model *m, mf_token target, bool centred, float *dir);

mf_status vx_target_dir(const mf_vindex *v, const mf_model *m, mf_token t, float *dir) { return dir_of(v, m, t, true, dir); }
mf_status vx_logit_dir(const mf_vindex *v, const mf_model *m, mf_token t, float *dir) { return dir_of(v, m, t, false, dir); }

/* centred: the unit direction that raises the target's logit against the
 * others; else the target's output row through the norm's weight, as is. */
static mf_status dir_of(const mf_vindex *v, const mf_model *m, mf_token target, bool centred, float *dir) {
    const int E = v->ix.n_embd, V = v->ix.n_vocab;
    gguf_file *g;
    mf_status s = vx_open_gguf(v->dir, false, &g);
    if (s) return s;
    float *row = malloc((size_t)E * sizeof *row);
    double *mean = calloc((size_t)E, sizeof *mean);
    s = !row || !mean ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    for (int t = 0; !s && centred && t < V; t++) {
        s = tensor_row(g, m->output->name, t, row);
        for (int e = 0; !s && e < E; e++) mean[e] += row[e] / V;
    }
    if (!s) s = tensor_row(g, m->output->name, target, dir);
    if (!s && m->output_norm) {
        s = tensor_row(g, m->output_norm->name, 0, row);
        for (int e = 0; !s && e < E; e++) dir[e] = (float)((dir[e] - mean[e]) * row[e]);
    } else if (!s) {
        for (int e = 0; e < E; e++) dir[e] = (float)(dir[e] - mean[e]);
    }
    double nn = 0;
    for (int e = 0; !s && e < E; e++) nn += (double)dir[e] * dir[e];
    if (!centred) {
        free(row), free(mean);
        gguf_close(g);
        return s;
    }
    if (!s && !(nn > 0)) s = mf_err(MF_ERR_INVALID_ARG, "token %d's output row is the mean row: no direction", target);
    for (int e = 0; !s && e < E; e++) dir[e] = (float)(dir[e] / sqrt(nn));
    free(row), free(mean);
    gguf_close(g);
    return s;
}

/* x rounded through tensor t's type (unchanged for F32 or a type without a quantizer) */
static mf_status snap(const mf_tensor *t, float *x, int E) {
    const mf_type_traits *tr = t ? mf_type_traits_ref(t->type) : NULL;
    if (!t || t->type == MF_TYPE_F32 || !tr || !tr->from_float_ref || !tr->to_float) return MF_OK;
    void *q = malloc(mf_row_size(t->type, E));
    if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
    tr->from_float_ref(x, q, E);
    tr->to_float(q, x, E);
    free(q);
    return MF_OK;
}

/* The insert at one layer; *lost: every strength tried left another token on top. */
static mf_status insert_at(mf_vindex *v, mf_model *m, const mf_vindex_insert_params *p, int layer,
                           mf_vindex_insert_result *r, bool *lost) {
    memset(r, 0, sizeof *r);
    *lost = false;
    const int E = v->ix.n_embd, V = v->ix.n_vocab, n = p->n_prompt;
    if (layer >= v->ix.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", layer, v->ix.n_layer);
    if (n < 1) return mf_err(MF_ERR_INVALID_ARG, "the prompt has no tokens");
    if (p->target < 0 || p->target >= V) return mf_err(MF_ERR_INVALID_ARG, "target token %d is out of range", p->target);
    if (!(p->alpha >= 0) || p->alpha > 1e6f) return mf_err(MF_ERR_INVALID_ARG, "ALPHA %g is out of range (0, 1e6]", p->alpha);
    const float alpha = p->alpha > 0 ? p->alpha : DEFAULT_ALPHA;
    mf_walk *w = NULL;
    mf_context *ctx = NULL;
    capture c = {NULL, layer, malloc((size_t)(n + N_REF + 1) * E * sizeof(float)), 0, n + N_REF + 1, true};
    float *gate = malloc((size_t)E * sizeof *gate), *up = v->ix.gated ? malloc((size_t)E * sizeof *up) : NULL;
    float *dir = malloc((size_t)E * sizeof *dir), *down = malloc((size_t)E * sizeof *down);
    mf_status s = !c.rows || !gate || (v->ix.gated && !up) || !dir || !down ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    if (!s && v->ix.n_expert) s = mf_err(MF_ERR_UNSUPPORTED, "%s has a mixture of experts; only dense FFNs take inserted features", v->ix.arch);
    if (!s) s = mf_walk_new_overlay(v, m, &w);
    c.w = w;
    if (!s) {
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = (uint32_t)(n > N_REF + 1 ? n : N_REF + 1) + 8, cp.n_threads = p->n_threads, cp.ffn_cb = capture_ffn, cp.ffn_ud = &c;
        cp.kv_type = MF_KV_F32;
        s = mf_context_new(m, &cp, &ctx);
    }
    int top = -1;
    if (!s) s = run(ctx, p->prompt, n, V, &top, NULL);
    if (!s) r->top_before = top;
    /* the reference: the model's own greedy text from BOS (its ordinary
     * residuals), each position after the BOS */
    mf_token tok = p->prompt[0];
    if (!s) mf_kv_truncate(ctx, 0);
    for (int i = 0; !s && i <= N_REF; i++) {
        s = mf_decode(ctx, &tok, 1, false);
        if (!s) tok = argmax(mf_get_logits(ctx, -1), V);
    }
    c.record = false;
    const float *xe = c.rows + (size_t)(n - 1) * E;
    if (!s && c.n != n + N_REF + 1) s = mf_err(MF_ERR_INVALID_ARG, "captured %d rows, not %d", c.n, n + N_REF + 1);
    /* the reference rows: the prompt's inner positions, then the text's */
    const int n_in = n > 2 ? n - 2 : 0, n_ref = n_in + N_REF;
    float *ref = s ? NULL : malloc((size_t)n_ref * E * sizeof *ref);
    if (!s && !ref) s = mf_err(MF_ERR_NOMEM, "out of memory");
    if (!s) {
        memcpy(ref, c.rows + (size_t)E, (size_t)n_in * E * sizeof *ref);
        memcpy(ref + (size_t)n_in * E, c.rows + (size_t)(n + 1) * E, (size_t)N_REF * E * sizeof *ref);
        s = vx_insert_gate(xe, ref, n_ref, E, gate);
    }
    if (!s) {
        /* t(x) = d.x / d.xe (1 on the prompt); b(x) = mu.x / mu.xe, about 1 on
         * any residual: the bias the FFN lacks. gate . x = G (t - TAU b) */
        double dx = 0, mx = 0;
        float *mu = calloc((size_t)E, sizeof *mu);
        if (!mu) s = mf_err(MF_ERR_NOMEM, "out of memory");
        for (int i = 0; !s && i < n_ref; i++)
            for (int e = 0; e < E; e++) mu[e] += ref[(size_t)i * E + e] / n_ref;
        for (int e = 0; !s && e < E; e++) dx += (double)gate[e] * xe[e], mx += (double)mu[e] * xe[e];
        const double tau = fabs(mx) > 1e-12 ? TAU : 0.0, G = GATE_PRE / (1.0 - tau);
        for (int e = 0; !s && e < E; e++) {
            const float unit = (float)(gate[e] / dx); /* unit . xe = 1 */
            gate[e] = (float)(G * (unit - (tau ? tau * mu[e] / mx : 0.0)));
            if (up) up[e] = unit;
        }
        free(mu);
    }
    free(ref);
    /* what COMPILE will store: the rows as the model's FFN tensors encode
     * them, so the strength is found for those and the overlay is the
     * compiled model's (the gate's input is a difference of two large terms,
     * so a 4-bit row's rounding would otherwise move the activation a lot) */
    if (!s) {
        const mf_layer *ly = &m->layers[layer];
        s = snap(v->ix.gated ? ly->ffn_gate : ly->ffn_up, gate, E);
        if (!s && up) s = snap(ly->ffn_up, up, E);
    }
    if (!s) s = vx_target_dir(v, m, p->target, dir);
    /* the trial feature, its down vector rescaled in place per strength */
    vx_op op = {.kind = VX_OP_INSERT, .layer = layer, .gate = gate, .up = up, .down = down};
    if (!s) {
        for (int e = 0; e < E; e++) down[e] = 0;
        s = vx_overlay_push(v, &op);
        gate = up = down = NULL; /* the overlay owns them now (freed on error too) */
    }
    vx_feat *f = s ? NULL : &v->ov.ins[layer][v->ov.n_ins[layer] - 1];
    const float a_e = s ? 0 : vx_feat_act(v, m->arch->ffn, f, xe);
    if (!s && !(fabsf(a_e) > 1e-6f)) s = mf_err(MF_ERR_INVALID_ARG, "the new feature does not fire on the prompt");
#define SET(str) for (int e = 0; e < E; e++) f->down[e] = (float)((str) / a_e * dir[e])
    double lo = 0, hi = 0;
    bool won = false;
    for (double st = 0.25; !s && st < 1e9; st *= 2) {
        SET(st);
        s = run(ctx, p->prompt, n, V, &top, NULL);
        r->trials++;
        if (!s && top == p->target) {
            hi = st, won = true;
            break;
        }
        lo = st;
    }
    if (!s && !won) {
        *lost = true;
        s = mf_err(MF_ERR_INVALID_ARG, "no strength makes the target the top token at layer %d (try another layer)", layer);
    }
    for (int i = 0; !s && i < BISECT; i++) {
        const double mid = 0.5 * (lo + hi);
        SET(mid);
        s = run(ctx, p->prompt, n, V, &top, NULL);
        r->trials++;
        if (!s) *(top == p->target ? &hi : &lo) = mid;
    }
    /* the margin; if the target then lost (not monotone), back to hi */
    double strength = hi * alpha;
    if (!s) {
        SET(strength);
        s = run(ctx, p->prompt, n, V, &top, NULL);
        r->trials++;
        if (!s && top != p->target) {
            strength = hi;
            SET(strength);
        }
    }
#undef SET
    if (!s) {
        r->layer = layer, r->feature = v->ix.n_features + v->ov.n_ins[layer] - 1, r->strength = (float)strength;
        v->ov.op[v->ov.n_op - 1].note = vx_insert_note(p->entity, p->relation, p->target_text, strength);
    } else if (f) {
        vx_overlay_pop_insert(v);
    }
    mf_context_free(ctx);
    mf_walk_free(w);
    free(c.rows), free(gate), free(up), free(dir), free(down);
    return s;
}

mf_status mf_vindex_insert(mf_vindex *v, mf_model *m, const mf_vindex_insert_params *p, mf_vindex_insert_result *r) {
    bool lost = false;
    if (p->layer >= 0) return insert_at(v, m, p, p->layer, r, &lost);
    /* no layer given: the last one where the target can win (a post-FFN norm
     * bounds what one feature adds, so the last layer is not always enough) */
    int tried = 0;
    for (int l = v->ix.n_layer - 1; l >= 0; l--, tried++) {
        mf_status s = insert_at(v, m, p, l, r, &lost);
        if (!s || !lost) return s;
    }
    return mf_err(MF_ERR_INVALID_ARG, "no strength at any of the %d layers makes the target the top token", tried);
}
