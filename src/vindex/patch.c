/* patch.c - .vlp patch files: JSON naming the base (the source model's
 * sha256) and a list of operations, read into the overlay (overlay.c) and
 * written from it. The base files are never written.
 *   {"format": "minfer-vindex-patch", "version": 1, "name": "...", "base": "<sha256>",
 *    "ops": [{"op": "delete", "layer": 3, "feature": 17},
 *            {"op": "insert", "layer": 4, "gate": [n_embd numbers], "up": [...], "down": [...],
 *             "bias": 0, "entity": "...", "relation": "...", "target": "...", "strength": 1.5},
 *            {"op": "update", "layer": 2, "feature": 9, "down": [...]}]}
 * "up" is absent for a non-gated FFN; "bias" only there. An inserted feature
 * gets the next id of its layer (n_features, n_features + 1, ...), so ops
 * after it may name it. Vectors are written with %.9g: floats read back
 * exactly. A patch is checked whole before anything applies: a bad one is
 * refused with the op's index and changes nothing. */
#include "vindex/vindex.h"
#include "core/error.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VLP_FORMAT "minfer-vindex-patch"

/* n_embd finite numbers, malloc'd into *out */
static mf_status read_vec(const char *path, size_t i, json_t *op, const char *key, int E, float **out) {
    *out = NULL;
    json_t *a = json_object_get(op, key);
    if (!json_is_array(a) || json_array_size(a) != (size_t)E)
        return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"%s\" must be an array of %d numbers", path, i, key, E);
    float *v = malloc((size_t)E * sizeof *v);
    if (!v) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (int e = 0; e < E; e++) {
        json_t *x = json_array_get(a, (size_t)e);
        const double d = json_number_value(x);
        if (!json_is_number(x) || !isfinite(d) || fabs(d) > 3.4e38) {
            free(v);
            return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"%s\"[%d] is not a finite number", path, i, key, e);
        }
        v[e] = (float)d;
    }
    *out = v;
    return MF_OK;
}

static mf_status int_field(const char *path, size_t i, json_t *op, const char *key, int64_t lo, int64_t hi,
                           int32_t *out) {
    json_t *x = json_object_get(op, key);
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"%s\" must be an integer in range [%lld, %lld]", path, i, key,
                      (long long)lo, (long long)hi);
    *out = (int32_t)json_integer_value(x);
    return MF_OK;
}

/* ops[i] into *o (vectors malloc'd); feature ids checked by the overlay */
static mf_status read_op(const mf_vindex *v, const char *path, size_t i, json_t *op, vx_op *o) {
    memset(o, 0, sizeof *o);
    const char *kind = json_string_value(json_object_get(op, "op"));
    const int E = v->ix.n_embd;
    if (!json_is_object(op) || !kind)
        return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: not an object with a string \"op\"", path, i);
    mf_status s = int_field(path, i, op, "layer", 0, v->ix.n_layer - 1, &o->layer);
    if (s) return s;
    if (!strcmp(kind, "delete") || !strcmp(kind, "update")) {
        o->kind = kind[0] == 'd' ? VX_OP_DELETE : VX_OP_UPDATE;
        s = int_field(path, i, op, "feature", 0, INT32_MAX, &o->feature);
        if (!s && o->kind == VX_OP_UPDATE) s = read_vec(path, i, op, "down", E, &o->down);
        return s;
    }
    if (strcmp(kind, "insert"))
        return mf_err(MF_ERR_UNSUPPORTED, "%s: ops[%zu]: unknown op \"%s\" (delete, insert, update)", path, i, kind);
    o->kind = VX_OP_INSERT;
    s = read_vec(path, i, op, "gate", E, &o->gate);
    if (!s && v->ix.gated) s = read_vec(path, i, op, "up", E, &o->up);
    else if (!s && json_object_get(op, "up"))
        s = mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"up\" given, but this model's FFN is not gated", path, i);
    if (!s) s = read_vec(path, i, op, "down", E, &o->down);
    json_t *b = json_object_get(op, "bias");
    if (!s && b && (!json_is_number(b) || !isfinite(json_number_value(b))))
        s = mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"bias\" is not a finite number", path, i);
    if (!s && b) o->bias = (float)json_number_value(b);
    if (!s) {
        /* what the insert was for, kept as written (strings only) */
        json_t *note = json_object();
        static const char *keys[] = {"entity", "relation", "target"};
        for (int k = 0; k < 3; k++) {
            json_t *x = json_object_get(op, keys[k]);
            if (x && !json_is_string(x)) {
                json_decref(note);
                s = mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: \"%s\" is not a string", path, i, keys[k]);
                break;
            }
            if (x) json_object_set(note, keys[k], x);
        }
        json_t *st = json_object_get(op, "strength");
        if (!s && st && json_is_number(st)) json_object_set(note, "strength", st);
        if (!s) {
            o->note = json_dumps(note, JSON_COMPACT | JSON_PRESERVE_ORDER);
            json_decref(note);
        }
    }
    if (s) free(o->gate), free(o->up), free(o->down), o->gate = o->up = o->down = NULL;
    return s;
}

/* Checks the feature ids of ops[0..n) as they would apply in order
 * (inserted features get ids as they come), so that applying cannot fail
 * half way for anything but memory. */
static mf_status check_ids(const mf_vindex *v, const char *path, const vx_op *ops, size_t n) {
    const int32_t F = v->ix.n_features;
    for (size_t i = 0; i < n; i++) {
        const vx_op *o = &ops[i];
        if (o->kind == VX_OP_INSERT) continue;
        int32_t ni = v->ov.n_ins ? v->ov.n_ins[o->layer] : 0;
        bool dead = false;
        for (size_t j = 0; j < i; j++) {
            if (ops[j].layer != o->layer) continue;
            if (ops[j].kind == VX_OP_INSERT) ni++;
            else if (ops[j].kind == VX_OP_DELETE && ops[j].feature == o->feature && o->feature >= F) dead = true;
        }
        if (o->feature >= F + ni)
            return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: feature %d of layer %d does not exist (%d features, %d inserted)",
                          path, i, o->feature, o->layer, F, ni);
        if (o->feature >= F && (dead || (o->feature - F < (v->ov.n_ins ? v->ov.n_ins[o->layer] : 0) &&
                                         v->ov.ins[o->layer][o->feature - F].dead)))
            return mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: feature %d of layer %d was deleted", path, i, o->feature, o->layer);
    }
    return MF_OK;
}

mf_status mf_vindex_apply_patch(mf_vindex *v, const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mf_err(MF_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
    mf_status s = MF_OK;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    const char *base = json_string_value(json_object_get(root, "base"));
    const char *name = json_string_value(json_object_get(root, "name"));
    json_t *ver = json_object_get(root, "version"), *ops = json_object_get(root, "ops");
    if (!json_is_object(root) || !fmt || strcmp(fmt, VLP_FORMAT))
        s = mf_err(MF_ERR_FORMAT, "%s: not a vindex patch (format \"%s\")", path, VLP_FORMAT);
    else if (!json_is_integer(ver) || json_integer_value(ver) != 1)
        s = mf_err(MF_ERR_UNSUPPORTED, "%s: patch version is not 1", path);
    else if (!base || strcmp(base, v->ix.source_sha256))
        s = mf_err(MF_ERR_INVALID_ARG, "%s: the patch's base %.16s... is not this vindex's model (%.16s...)", path,
                   base ? base : "(none)", v->ix.source_sha256);
    else if (!json_is_array(ops))
        s = mf_err(MF_ERR_FORMAT, "%s: \"ops\" is missing or not an array", path);
    if (s) {
        json_decref(root);
        return s;
    }
    /* read every op first, so a malformed one changes nothing */
    const size_t n = json_array_size(ops);
    vx_op *rd = calloc(n ? n : 1, sizeof *rd);
    if (!rd) s = mf_err(MF_ERR_NOMEM, "out of memory");
    size_t got = 0;
    for (; !s && got < n; got++) s = read_op(v, path, got, json_array_get(ops, got), &rd[got]);
    if (s) {
        for (size_t i = 0; i < got; i++) free(rd[i].gate), free(rd[i].up), free(rd[i].down), free(rd[i].note);
        free(rd);
        json_decref(root);
        return s;
    }
    if (!s) s = check_ids(v, path, rd, n);
    const int32_t open = v->ov.open;
    if (!s) s = vx_overlay_begin(v, name, path);
    size_t i = 0;
    for (; !s && i < n; i++) {
        s = vx_overlay_push(v, &rd[i]); /* ids were checked: only memory can fail here */
        if (s) s = mf_err_prefix(s, "%s: ops[%zu] (the ops before it stay applied)", path, i);
    }
    for (size_t j = i; j < n; j++) free(rd[j].gate), free(rd[j].up), free(rd[j].down), free(rd[j].note);
    v->ov.open = open; /* an applied patch is closed: later edits go to the patch open before */
    free(rd);
    json_decref(root);
    return s;
}

char *vx_insert_note(const char *entity, const char *relation, const char *target, double strength) {
    json_t *j = json_object();
    if (entity) json_object_set_new(j, "entity", json_string(entity));
    if (relation) json_object_set_new(j, "relation", json_string(relation));
    if (target) json_object_set_new(j, "target", json_string(target));
    json_object_set_new(j, "strength", json_real(strength));
    char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(j);
    return t;
}

static json_t *vec_json(const float *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real((double)x[i]));
    return a;
}

mf_status mf_vindex_save_patch(const mf_vindex *v, const char *path, const char *name) {
    const vx_overlay *ov = &v->ov;
    if (!name) name = ov->open >= 0 ? ov->patch[ov->open].name : "";
    json_t *root = json_pack("{s:s,s:i,s:s,s:s}", "format", VLP_FORMAT, "version", 1, "name", name, "base",
                             v->ix.source_sha256);
    json_t *ops = json_array();
    const int E = v->ix.n_embd;
    for (int i = 0; i < ov->n_op; i++) {
        const vx_op *o = &ov->op[i];
        if (o->patch != ov->open || ov->open < 0) continue;
        static const char *kinds[] = {"delete", "insert", "update"};
        json_t *j = json_pack("{s:s,s:i}", "op", kinds[o->kind], "layer", o->layer);
        if (o->kind != VX_OP_INSERT) json_object_set_new(j, "feature", json_integer(o->feature));
        if (o->kind == VX_OP_INSERT) {
            json_t *note = o->note ? json_loads(o->note, 0, NULL) : NULL;
            const char *k;
            json_t *x;
            json_object_foreach(note, k, x) json_object_set(j, k, x);
            json_decref(note);
            json_object_set_new(j, "gate", vec_json(o->gate, E));
            if (o->up) json_object_set_new(j, "up", vec_json(o->up, E));
            if (!v->ix.gated) json_object_set_new(j, "bias", json_real(o->bias));
        }
        if (o->down) json_object_set_new(j, "down", vec_json(o->down, E));
        json_array_append_new(ops, j);
    }
    json_object_set_new(root, "ops", ops);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mf_status s = MF_OK;
    if (json_dump_file(root, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) != 0)
        s = mf_err(MF_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    else if (rename(tmp, path) != 0)
        s = mf_err(MF_ERR_IO, "%s: %s", path, strerror(errno));
    json_decref(root);
    return s;
}
