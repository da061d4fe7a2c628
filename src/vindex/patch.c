/* patch.c - edit overlays: a .vlp file is JSON naming its base (the source
 * model's sha256) and a list of operations; applying one changes the opened
 * vindex in memory only (the base files are never written). Today's
 * operation is "delete": the feature is dropped from the KNN and therefore
 * contributes nothing to the walk FFN.
 *   {"format": "minfer-vindex-patch", "version": 1, "name": "...",
 *    "base": "<sha256>", "ops": [{"op": "delete", "layer": 3, "feature": 17}]} */
#include "vindex/vindex.h"
#include "core/error.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VLP_FORMAT "minfer-vindex-patch"

static mf_status ensure_mask(mf_vindex *v) {
    if (v->deleted) return MF_OK;
    v->deleted = calloc((size_t)v->ix.n_layer * v->ix.n_features, 1);
    return v->deleted ? MF_OK : mf_err(MF_ERR_NOMEM, "out of memory");
}

mf_status mf_vindex_delete_feature(mf_vindex *v, int32_t layer, int32_t feature) {
    if (layer < 0 || layer >= v->ix.n_layer || feature < 0 || feature >= v->ix.n_features)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d feature %d is out of range (%d layers x %d features)", layer, feature,
                      v->ix.n_layer, v->ix.n_features);
    mf_status s = ensure_mask(v);
    if (s) return s;
    uint8_t *m = &v->deleted[(size_t)layer * v->ix.n_features + feature];
    if (!*m) v->n_deleted++;
    *m = 1;
    return MF_OK;
}

bool mf_vindex_is_deleted(const mf_vindex *v, int32_t layer, int32_t feature) {
    return v->deleted && layer >= 0 && layer < v->ix.n_layer && feature >= 0 && feature < v->ix.n_features &&
           v->deleted[(size_t)layer * v->ix.n_features + feature];
}

int32_t mf_vindex_n_deleted(const mf_vindex *v) { return v->n_deleted; }

mf_status mf_vindex_apply_patch(mf_vindex *v, const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mf_err(MF_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
    mf_status s = MF_OK;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    const char *base = json_string_value(json_object_get(root, "base"));
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
    /* check every operation before applying any, so a bad patch changes nothing */
    for (int pass = 0; pass < 2 && !s; pass++) {
        size_t i;
        json_t *op;
        json_array_foreach(ops, i, op) {
            const char *kind = json_string_value(json_object_get(op, "op"));
            json_t *l = json_object_get(op, "layer"), *f = json_object_get(op, "feature");
            if (!kind || strcmp(kind, "delete")) {
                s = mf_err(MF_ERR_UNSUPPORTED, "%s: ops[%zu]: unknown op (\"delete\" is supported)", path, i);
                break;
            }
            if (!json_is_integer(l) || !json_is_integer(f) || json_integer_value(l) < 0 ||
                json_integer_value(l) >= v->ix.n_layer || json_integer_value(f) < 0 ||
                json_integer_value(f) >= v->ix.n_features) {
                s = mf_err(MF_ERR_FORMAT, "%s: ops[%zu]: layer and feature must be integers in range (%d x %d)", path, i,
                           v->ix.n_layer, v->ix.n_features);
                break;
            }
            if (pass == 1) s = mf_vindex_delete_feature(v, (int32_t)json_integer_value(l), (int32_t)json_integer_value(f));
        }
    }
    json_decref(root);
    return s;
}

mf_status mf_vindex_save_patch(const mf_vindex *v, const char *path, const char *name) {
    json_t *root = json_pack("{s:s,s:i,s:s,s:s}", "format", VLP_FORMAT, "version", 1, "name", name ? name : "",
                             "base", v->ix.source_sha256);
    json_t *ops = json_array();
    for (int l = 0; v->deleted && l < v->ix.n_layer; l++)
        for (int f = 0; f < v->ix.n_features; f++)
            if (v->deleted[(size_t)l * v->ix.n_features + f])
                json_array_append_new(ops, json_pack("{s:s,s:i,s:i}", "op", "delete", "layer", l, "feature", f));
    json_object_set_new(root, "ops", ops);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mf_status s = MF_OK;
    if (json_dump_file(root, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0)
        s = mf_err(MF_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    else if (rename(tmp, path) != 0)
        s = mf_err(MF_ERR_IO, "%s: %s", path, strerror(errno));
    json_decref(root);
    return s;
}
