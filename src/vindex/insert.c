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
 * The prompt and the reference text run once per INSERT, their rows kept
 * for every layer tried; the target's direction is found once. A trial
 * changes only the new feature's layer and those above it, so it resumes
 * there from the residual stream the prompt's first pass saved
 * (mf_context_set_resume) and computes what a whole pass with the overlay
 * (earlier edits too) would, bit for bit, at the cost of the layers from
 * there up and the output head. */
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

/* What every layer tried shares: the rows of the prompt's pass and of the
 * reference text at each captured layer, and the target's direction. */
typedef struct capture {
    mf_walk *w;
    int l0, nl;       /* layers captured: l0 .. l0 + nl - 1 */
    int n;            /* prompt rows */
    int per;          /* rows per layer: the prompt's n, then N_REF + 1 of the reference text */
    float *ffn_in;    /* [nl][per][n_embd] the FFN inputs, appended while recording */
    float *resid;     /* [nl][n][n_embd] the residual stream entering each layer on the prompt (l >= 1) */
    int *got;         /* [nl] rows recorded */
    bool record, record_resid;
} capture;

static int capture_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                       const int32_t *pos, void *ud) {
    capture *c = ud;
    const int i = layer - c->l0;
    if (c->record && i >= 0 && i < c->nl && c->got[i] + n_rows <= c->per) {
        memcpy(c->ffn_in + ((size_t)i * c->per + c->got[i]) * n_embd, xn, (size_t)n_rows * n_embd * sizeof(float));
        c->got[i] += n_rows;
    }
    return mf_walk_ffn(layer, xn, out, n_rows, n_embd, seq, pos, c->w);
}

/* after layer `layer`: the residual entering layer + 1, where a trial resumes */
static bool capture_layer(int layer, float *x, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos, void *ud) {
    (void)seq, (void)pos;
    capture *c = ud;
    const int i = layer + 1 - c->l0;
    if (c->record_resid && i >= 0 && i < c->nl && n_rows == c->n)
        memcpy(c->resid + (size_t)i * c->n * n_embd, x, (size_t)n_rows * n_embd * sizeof(float));
    return true;
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

/* A GGUF tensor's rows as floats: found and checked once, read per row
 * (the mean row reads all 150k rows of a large vocabulary's head). */
typedef struct rows_of {
    const uint8_t *data;
    const mf_type_traits *tr;
    size_t rb;
    int64_t n_row, ne0;
} rows_of;

static mf_status rows_open(const gguf_file *g, const char *name, rows_of *r) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) return mf_err(MF_ERR_FORMAT, "tensor %s is not in the vindex's weights", name);
    r->tr = mf_type_traits_ref(t->type);
    if (!r->tr || !r->tr->to_float) return mf_err(MF_ERR_UNSUPPORTED, "tensor %s: cannot read its type", name);
    r->data = t->data, r->rb = mf_row_size(t->type, t->ne[0]), r->n_row = t->ne[1], r->ne0 = t->ne[0];
    return MF_OK;
}

static mf_status rows_get(const rows_of *r, const char *name, int64_t row, float *dst) {
    if (row < 0 || row >= r->n_row) return mf_err(MF_ERR_UNSUPPORTED, "tensor %s: cannot read row %lld", name, (long long)row);
    r->tr->to_float(r->data + (size_t)row * r->rb, dst, r->ne0);
    return MF_OK;
}

/* dst = one row of a GGUF tensor as floats */
static mf_status tensor_row(const gguf_file *g, const char *name, int64_t row, float *dst) {
    rows_of r;
    mf_status s = rows_open(g, name, &r);
    return s ? s : rows_get(&r, name, row, dst);
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
    rows_of out;
    if (!s && centred) s = rows_open(g, m->output->name, &out);
    for (int t = 0; !s && centred && t < V; t++) {
        s = rows_get(&out, m->output->name, t, row);
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

/* The shared part of an INSERT: the walk overlay and one context, the
 * prompt's pass (its top token, its FFN inputs and the residual entering
 * each captured layer) and the reference text's FFN inputs. */
typedef struct insert_run {
    mf_walk *w;
    mf_context *ctx;
    capture c;
    float *dir;       /* the target's direction */
    int top_before;
    bool can_resume;  /* the prompt is one forward pass */
} insert_run;

static void insert_run_free(insert_run *ir) {
    mf_context_free(ir->ctx);
    mf_walk_free(ir->w);
    free(ir->c.ffn_in), free(ir->c.resid), free(ir->c.got), free(ir->dir);
}

static mf_status insert_run_new(mf_vindex *v, mf_model *m, const mf_vindex_insert_params *p, int l0, int nl,
                                insert_run *ir) {
    memset(ir, 0, sizeof *ir);
    const int E = v->ix.n_embd, V = v->ix.n_vocab, n = p->n_prompt;
    capture *c = &ir->c;
    c->l0 = l0, c->nl = nl, c->n = n, c->per = n + N_REF + 1;
    c->ffn_in = malloc((size_t)nl * c->per * E * sizeof(float));
    c->resid = malloc((size_t)nl * n * E * sizeof(float));
    c->got = calloc((size_t)nl, sizeof *c->got);
    ir->dir = malloc((size_t)E * sizeof *ir->dir);
    mf_status s = !c->ffn_in || !c->resid || !c->got || !ir->dir ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    if (!s) s = mf_walk_new_overlay(v, m, &ir->w);
    c->w = ir->w;
    if (!s) {
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = (uint32_t)(n > N_REF + 1 ? n : N_REF + 1) + 8, cp.n_threads = p->n_threads, cp.ffn_cb = capture_ffn, cp.ffn_ud = c;
        cp.layer_cb = capture_layer, cp.layer_ud = c;
        cp.kv_type = MF_KV_F32;
        cp.n_batch = 512;
        s = mf_context_new(m, &cp, &ir->ctx);
        /* a trial resumes only when the prompt is one forward pass (a longer
         * one runs whole, in the passes the first one had) */
        ir->can_resume = (uint32_t)n <= cp.n_batch;
    }
    c->record = c->record_resid = true;
    if (!s) s = run(ir->ctx, p->prompt, n, V, &ir->top_before, NULL);
    c->record_resid = false;
    /* the reference: the model's own greedy text from BOS (its ordinary
     * residuals), each position after the BOS */
    mf_token tok = p->prompt[0];
    if (!s) mf_kv_truncate(ir->ctx, 0);
    for (int i = 0; !s && i <= N_REF; i++) {
        s = mf_decode(ir->ctx, &tok, 1, false);
        if (!s) tok = argmax(mf_get_logits(ir->ctx, -1), V);
    }
    c->record = false;
    for (int i = 0; !s && i < nl; i++)
        if (c->got[i] != c->per) s = mf_err(MF_ERR_INVALID_ARG, "captured %d rows at layer %d, not %d", c->got[i], l0 + i, c->per);
    if (!s) s = vx_target_dir(v, m, p->target, ir->dir);
    return s;
}

/* The insert at one layer; *lost: every strength tried left another token on top. */
static mf_status insert_at(mf_vindex *v, mf_model *m, const mf_vindex_insert_params *p, int layer, insert_run *ir,
                           mf_vindex_insert_result *r, bool *lost) {
    memset(r, 0, sizeof *r);
    *lost = false;
    const int E = v->ix.n_embd, V = v->ix.n_vocab, n = p->n_prompt;
    const float alpha = p->alpha > 0 ? p->alpha : DEFAULT_ALPHA;
    const capture *c = &ir->c;
    const float *rows = c->ffn_in + (size_t)(layer - c->l0) * c->per * E;
    float *gate = malloc((size_t)E * sizeof *gate), *up = v->ix.gated ? malloc((size_t)E * sizeof *up) : NULL;
    float *down = malloc((size_t)E * sizeof *down);
    mf_status s = !gate || (v->ix.gated && !up) || !down ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    int top = -1;
    r->top_before = ir->top_before;
    const float *xe = rows + (size_t)(n - 1) * E;
    /* the reference rows: the prompt's inner positions, then the text's */
    const int n_in = n > 2 ? n - 2 : 0, n_ref = n_in + N_REF;
    float *ref = s ? NULL : malloc((size_t)n_ref * E * sizeof *ref);
    if (!s && !ref) s = mf_err(MF_ERR_NOMEM, "out of memory");
    if (!s) {
        memcpy(ref, rows + (size_t)E, (size_t)n_in * E * sizeof *ref);
        memcpy(ref + (size_t)n_in * E, rows + (size_t)(n + 1) * E, (size_t)N_REF * E * sizeof *ref);
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
    const float *dir = ir->dir;
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
    /* the layers below `layer` are the prompt's first pass whatever the strength */
    if (!s && layer > 0 && ir->can_resume)
        s = mf_context_set_resume(ir->ctx, layer, c->resid + (size_t)(layer - c->l0) * n * E, n);
#define SET(str) for (int e = 0; e < E; e++) f->down[e] = (float)((str) / a_e * dir[e])
    double lo = 0, hi = 0;
    bool won = false;
    for (double st = 0.25; !s && st < 1e9; st *= 2) {
        SET(st);
        s = run(ir->ctx, p->prompt, n, V, &top, NULL);
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
        s = run(ir->ctx, p->prompt, n, V, &top, NULL);
        r->trials++;
        if (!s) *(top == p->target ? &hi : &lo) = mid;
    }
    /* the margin; if the target then lost (not monotone), back to hi */
    double strength = hi * alpha;
    if (!s) {
        SET(strength);
        s = run(ir->ctx, p->prompt, n, V, &top, NULL);
        r->trials++;
        if (!s && top != p->target) {
            strength = hi;
            SET(strength);
        }
    }
#undef SET
    mf_context_set_resume(ir->ctx, 0, NULL, 0);
    if (!s) {
        r->layer = layer, r->feature = v->ix.n_features + v->ov.n_ins[layer] - 1, r->strength = (float)strength;
        v->ov.op[v->ov.n_op - 1].note = vx_insert_note(p->entity, p->relation, p->target_text, strength);
    } else if (f) {
        vx_overlay_pop_insert(v);
    }
    free(gate), free(up), free(down);
    return s;
}

mf_status mf_vindex_insert(mf_vindex *v, mf_model *m, const mf_vindex_insert_params *p, mf_vindex_insert_result *r) {
    memset(r, 0, sizeof *r);
    const int V = v->ix.n_vocab;
    if (p->layer >= v->ix.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", p->layer, v->ix.n_layer);
    if (p->n_prompt < 1) return mf_err(MF_ERR_INVALID_ARG, "the prompt has no tokens");
    if (p->target < 0 || p->target >= V) return mf_err(MF_ERR_INVALID_ARG, "target token %d is out of range", p->target);
    if (!(p->alpha >= 0) || p->alpha > 1e6f) return mf_err(MF_ERR_INVALID_ARG, "ALPHA %g is out of range (0, 1e6]", p->alpha);
    if (v->ix.n_expert)
        return mf_err(MF_ERR_UNSUPPORTED, "%s has a mixture of experts; only dense FFNs take inserted features", v->ix.arch);
    /* AT LAYER: that layer's rows only; else every layer's, for the search below */
    const int l0 = p->layer >= 0 ? p->layer : 0, nl = p->layer >= 0 ? 1 : v->ix.n_layer;
    insert_run ir;
    mf_status s = insert_run_new(v, m, p, l0, nl, &ir);
    bool lost = false;
    if (!s && p->layer >= 0) s = insert_at(v, m, p, p->layer, &ir, r, &lost);
    /* no layer given: the last one where the target can win (a post-FFN norm
     * bounds what one feature adds, so the last layer is not always enough);
     * a layer that lost took its feature back out, so each starts from the
     * same overlay and the shared rows are what its own passes would give */
    int tried = 0;
    for (int l = v->ix.n_layer - 1; !s && p->layer < 0 && l >= 0; l--, tried++) {
        s = insert_at(v, m, p, l, &ir, r, &lost);
        if (!s) break;
        if (!lost) break;
        s = MF_OK;
        if (!l) s = mf_err(MF_ERR_INVALID_ARG, "no strength at any of the %d layers makes the target the top token", tried + 1);
    }
    insert_run_free(&ir);
    return s;
}
