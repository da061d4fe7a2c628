/* overlay.c - the edit overlay's state: an ordered log of operations
 * (delete, insert, update), each belonging to a patch, and what they add up
 * to (the deleted mask the KNN reads, inserted features per layer, rewritten
 * down vectors). Features point into the ops' own vectors, so nothing is
 * copied twice and the log stays what SAVE PATCH writes. */
#include "vindex/vindex.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static void op_free(vx_op *o) {
    free(o->gate), free(o->up), free(o->down), free(o->note);
    o->gate = o->up = o->down = NULL, o->note = NULL;
}

void vx_overlay_free(mf_vindex *v) {
    vx_overlay *ov = &v->ov;
    for (int i = 0; i < ov->n_op; i++) op_free(&ov->op[i]);
    for (int i = 0; i < ov->n_patch; i++) free(ov->patch[i].name), free(ov->patch[i].file);
    for (int l = 0; ov->ins && l < v->ix.n_layer; l++) free(ov->ins[l]);
    free(ov->op), free(ov->patch), free(ov->ins), free(ov->n_ins), free(ov->cap_ins), free(ov->upd), free(ov->n_edit);
    memset(ov, 0, sizeof *ov);
    ov->open = -1;
}

static mf_status ensure_state(mf_vindex *v) {
    vx_overlay *ov = &v->ov;
    const size_t L = (size_t)v->ix.n_layer;
    if (!ov->n_edit) {
        ov->ins = calloc(L, sizeof *ov->ins);
        ov->n_ins = calloc(L, sizeof *ov->n_ins);
        ov->cap_ins = calloc(L, sizeof *ov->cap_ins);
        ov->n_edit = calloc(L, sizeof *ov->n_edit);
        if (!ov->ins || !ov->n_ins || !ov->cap_ins || !ov->n_edit) {
            free(ov->ins), free(ov->n_ins), free(ov->cap_ins), free(ov->n_edit);
            ov->ins = NULL, ov->n_ins = ov->cap_ins = ov->n_edit = NULL;
            return mf_err(MF_ERR_NOMEM, "out of memory");
        }
    }
    if (!v->deleted && !(v->deleted = calloc(L * v->ix.n_features, 1))) return mf_err(MF_ERR_NOMEM, "out of memory");
    return MF_OK;
}

mf_status vx_overlay_check(const mf_vindex *v, int32_t layer, int32_t feature) {
    const int32_t F = v->ix.n_features;
    if (layer < 0 || layer >= v->ix.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", layer, v->ix.n_layer);
    const int32_t ni = v->ov.n_ins ? v->ov.n_ins[layer] : 0;
    if (feature < 0 || feature >= F + ni)
        return mf_err(MF_ERR_INVALID_ARG, "feature %d of layer %d is out of range (%d features%s)", feature, layer, F,
                      ni ? " and the inserted ones after them" : "");
    if (feature >= F && v->ov.ins[layer][feature - F].dead)
        return mf_err(MF_ERR_INVALID_ARG, "feature %d of layer %d was inserted and then deleted", feature, layer);
    return MF_OK;
}

mf_status vx_overlay_begin(mf_vindex *v, const char *name, const char *file) {
    vx_overlay *ov = &v->ov;
    if (ov->n_patch == ov->cap_patch) {
        const int32_t c = ov->cap_patch ? 2 * ov->cap_patch : 4;
        vx_patchrec *np = realloc(ov->patch, (size_t)c * sizeof *np);
        if (!np) return mf_err(MF_ERR_NOMEM, "out of memory");
        ov->patch = np, ov->cap_patch = c;
    }
    vx_patchrec *p = &ov->patch[ov->n_patch];
    p->name = strdup(name ? name : "");
    p->file = file ? strdup(file) : NULL;
    if (!p->name || (file && !p->file)) {
        free(p->name), free(p->file);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    ov->open = ov->n_patch++;
    return MF_OK;
}

static mf_status add_insert(mf_vindex *v, vx_op *o) {
    vx_overlay *ov = &v->ov;
    const int l = o->layer;
    if (ov->n_ins[l] == ov->cap_ins[l]) {
        const int32_t c = ov->cap_ins[l] ? 2 * ov->cap_ins[l] : 4;
        vx_feat *nf = realloc(ov->ins[l], (size_t)c * sizeof *nf);
        if (!nf) return mf_err(MF_ERR_NOMEM, "out of memory");
        ov->ins[l] = nf, ov->cap_ins[l] = c;
    }
    o->feature = v->ix.n_features + ov->n_ins[l];
    ov->ins[l][ov->n_ins[l]++] = (vx_feat){o->gate, o->up, o->down, o->bias, false};
    return MF_OK;
}

mf_status vx_overlay_push(mf_vindex *v, vx_op *o) {
    vx_overlay *ov = &v->ov;
    const int32_t F = v->ix.n_features, E = v->ix.n_embd;
    mf_status s = ensure_state(v);
    if (!s && o->kind != VX_OP_INSERT) s = vx_overlay_check(v, o->layer, o->feature);
    if (!s && o->kind == VX_OP_INSERT && (o->layer < 0 || o->layer >= v->ix.n_layer))
        s = mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", o->layer, v->ix.n_layer);
    if (!s && ((o->kind == VX_OP_INSERT && (!o->gate || (v->ix.gated != (o->up != NULL)))) ||
               (o->kind != VX_OP_DELETE && !o->down)))
        s = mf_err(MF_ERR_INVALID_ARG, "an %s without its vectors", o->kind == VX_OP_INSERT ? "insert" : "update");
    (void)E;
    if (!s && ov->open < 0) s = vx_overlay_begin(v, NULL, NULL);
    if (!s && ov->n_op == ov->cap_op) {
        const int32_t c = ov->cap_op ? 2 * ov->cap_op : 8;
        vx_op *no = realloc(ov->op, (size_t)c * sizeof *no);
        if (!no) s = mf_err(MF_ERR_NOMEM, "out of memory");
        else ov->op = no, ov->cap_op = c;
    }
    if (!s && o->kind == VX_OP_INSERT) s = add_insert(v, o);
    if (!s && o->kind == VX_OP_UPDATE && o->feature < F && !ov->upd &&
        !(ov->upd = calloc((size_t)v->ix.n_layer * F, sizeof *ov->upd)))
        s = mf_err(MF_ERR_NOMEM, "out of memory");
    if (s) {
        op_free(o);
        return s;
    }
    const int l = o->layer, f = o->feature;
    if (o->kind == VX_OP_DELETE) {
        if (f >= F) ov->ins[l][f - F].dead = true;
        else if (!v->deleted[(size_t)l * F + f]) v->deleted[(size_t)l * F + f] = 1, v->n_deleted++;
    } else if (o->kind == VX_OP_UPDATE) {
        if (f >= F) ov->ins[l][f - F].down = o->down;
        else ov->upd[(size_t)l * F + f] = o->down;
    }
    o->patch = ov->open;
    ov->op[ov->n_op++] = *o;
    ov->n_edit[l]++;
    return MF_OK;
}

void vx_overlay_pop_insert(mf_vindex *v) {
    vx_overlay *ov = &v->ov;
    if (!ov->n_op || ov->op[ov->n_op - 1].kind != VX_OP_INSERT) return;
    vx_op *o = &ov->op[--ov->n_op];
    ov->n_ins[o->layer]--;
    ov->n_edit[o->layer]--;
    op_free(o);
}

const float *vx_overlay_down(const mf_vindex *v, int layer, int feature) {
    return v->ov.upd ? v->ov.upd[(size_t)layer * v->ix.n_features + feature] : NULL;
}

/* ---- the public edit calls ---- */

mf_status mf_vindex_delete_feature(mf_vindex *v, int32_t layer, int32_t feature) {
    mf_status s = vx_overlay_check(v, layer, feature);
    if (s) return s;
    if (feature < v->ix.n_features && mf_vindex_is_deleted(v, layer, feature)) return MF_OK; /* already */
    vx_op o = {.kind = VX_OP_DELETE, .layer = layer, .feature = feature};
    return vx_overlay_push(v, &o);
}

mf_status mf_vindex_update_feature(mf_vindex *v, int32_t layer, int32_t feature, const float *down) {
    mf_status s = vx_overlay_check(v, layer, feature);
    if (s) return s;
    for (int e = 0; e < v->ix.n_embd; e++)
        if (!(down[e] == down[e]) || down[e] > 3.4e38f || down[e] < -3.4e38f)
            return mf_err(MF_ERR_INVALID_ARG, "the new down vector of feature %d holds a non-finite value", feature);
    vx_op o = {.kind = VX_OP_UPDATE, .layer = layer, .feature = feature,
               .down = malloc((size_t)v->ix.n_embd * sizeof(float))};
    if (!o.down) return mf_err(MF_ERR_NOMEM, "out of memory");
    memcpy(o.down, down, (size_t)v->ix.n_embd * sizeof(float));
    return vx_overlay_push(v, &o);
}

mf_status mf_vindex_begin_patch(mf_vindex *v, const char *name) { return vx_overlay_begin(v, name, NULL); }

bool mf_vindex_is_deleted(const mf_vindex *v, int32_t layer, int32_t feature) {
    if (layer < 0 || layer >= v->ix.n_layer || feature < 0) return false;
    if (feature >= v->ix.n_features)
        return v->ov.n_ins && feature - v->ix.n_features < v->ov.n_ins[layer] &&
               v->ov.ins[layer][feature - v->ix.n_features].dead;
    return v->deleted && v->deleted[(size_t)layer * v->ix.n_features + feature];
}

int32_t mf_vindex_n_deleted(const mf_vindex *v) { return v->n_deleted; }

int32_t mf_vindex_n_inserted(const mf_vindex *v, int32_t layer) {
    if (!v->ov.n_ins || layer < 0 || layer >= v->ix.n_layer) return 0;
    int32_t n = 0;
    for (int i = 0; i < v->ov.n_ins[layer]; i++) n += !v->ov.ins[layer][i].dead;
    return n;
}

int32_t mf_vindex_n_edits(const mf_vindex *v) { return v->ov.n_op; }
