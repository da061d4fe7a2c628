/* open.c - mf_vindex_open: index.json validated, each listed file's size
 * checked against the index and the feature files mapped; readers of single
 * features and embeddings. */
#include "vindex/vindex.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool mf_vindex_is_dir(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    char *p = vx_path(path, "index.json");
    const bool ok = p && stat(p, &st) == 0;
    free(p);
    return ok;
}

void mf_vindex_free(mf_vindex *v) {
    if (!v) return;
    for (int f = 0; f < VX_NFILES; f++) mf_mapfile_close(&v->map[f]);
    vx_hnsw_release(v);
    if (v->pool_owned) mf_pool_free(v->pool);
    vx_overlay_free(v);
    free(v->heap_s), free(v->heap_i), free(v->heads), free(v->deleted);
    free(v->pre_lb), free(v->pre_e), free(v->pre_ub), free(v->pre_dx), free(v->pre_c), free(v->pre_lbi), free(v->pre_u);
    vx_index_free(&v->ix);
    free(v->dir);
    free(v);
}

mf_status mf_vindex_open(const char *dir, mf_vindex **out) {
    *out = NULL;
    mf_vindex *v = calloc(1, sizeof *v);
    if (!v || !(v->dir = strdup(dir))) {
        free(v);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    v->ov.open = -1;
    /* the q8_0 integer pre-scan is opt-in: measured no faster end to end
     * than the prefetching float scan (docs/PERFORMANCE.md) */
    const char *i8 = getenv("MINFER_KNN_INT8");
    v->q8pre_mode = i8 && *i8 && strcmp(i8, "0") ? 0 : 1;
    mf_status s = vx_index_load(dir, &v->ix);
    for (int f = 0; !s && f < VX_NFILES; f++) {
        if (!v->ix.files[f].present) continue;
        char *p = vx_path(dir, vx_file_names[f]);
        if (!p) {
            s = mf_err(MF_ERR_NOMEM, "out of memory");
            break;
        }
        struct stat st;
        if (stat(p, &st) != 0) s = mf_err(MF_ERR_FORMAT, "%s: missing (listed in index.json)", p);
        else if ((uint64_t)st.st_size != v->ix.files[f].size)
            s = mf_err(MF_ERR_FORMAT, "%s: %" PRIu64 " bytes, index.json says %" PRIu64 " (damaged or replaced)", p,
                       (uint64_t)st.st_size, v->ix.files[f].size);
        else if (f < VX_NSECT || f == VX_EMBD)
            s = mf_mapfile_open(p, &v->map[f]);
        free(p);
    }
    if (!s) s = mf_vindex_set_threads(v, 0);
    if (s) {
        mf_vindex_free(v);
        return s;
    }
    v->row_bytes = mf_row_size(v->ix.ftype, v->ix.n_embd);
    *out = v;
    return MF_OK;
}

void mf_vindex_get_info(const mf_vindex *v, mf_vindex_info *o) {
    const vx_index *ix = &v->ix;
    memset(o, 0, sizeof *o);
    o->arch = ix->arch;
    o->source_file = ix->source_file;
    o->source_sha256 = ix->source_sha256;
    o->feature_type = mf_type_name(ix->ftype);
    o->level = ix->level;
    o->n_layer = ix->n_layer, o->n_embd = ix->n_embd, o->n_vocab = ix->n_vocab;
    o->n_features = ix->n_features, o->n_expert = ix->n_expert, o->n_ff_expert = ix->n_ff_expert;
    o->down_top_k = ix->down_top_k;
    o->gated = ix->gated;
    for (int f = 0; f < VX_NFILES; f++) o->bytes += ix->files[f].present ? ix->files[f].size : 0;
}

const void *vx_layer_rows(const mf_vindex *v, vx_file f, int layer) {
    if (!v->ix.files[f].present || layer < 0 || layer >= v->ix.n_layer) return NULL;
    return v->map[f].data + v->ix.sect[(size_t)layer * VX_NSECT + f].off;
}

int32_t mf_vindex_feature_tokens(const mf_vindex *v, int32_t layer, int32_t feature, mf_token *tok, float *score,
                                 int32_t cap) {
    const uint8_t *p = vx_layer_rows(v, VX_META, layer);
    if (!p || feature < 0 || feature >= v->ix.n_features) return -1;
    const int k = v->ix.down_top_k;
    p += (size_t)feature * k * 8;
    int n = 0;
    for (int i = 0; i < k && n < cap; i++) {
        int32_t t;
        float sc;
        memcpy(&t, p + 8 * i, 4), memcpy(&sc, p + 8 * i + 4, 4);
        if (t < 0 || t >= v->ix.n_vocab) continue; /* an unused slot, or a damaged record */
        tok[n] = t, score[n] = sc, n++;
    }
    return n;
}

mf_status mf_vindex_feature_row(const mf_vindex *v, int32_t which, int32_t layer, int32_t feature, float *out) {
    static const vx_file files[3] = {VX_GATE, VX_UP, VX_DOWN};
    if (which < 0 || which > 2) return mf_err(MF_ERR_INVALID_ARG, "feature row kind %d (0 gate, 1 up, 2 down)", which);
    const uint8_t *p = vx_layer_rows(v, files[which], layer);
    if (!p) return mf_err(MF_ERR_INVALID_ARG, "layer %d: no %s in this vindex", layer, vx_file_names[files[which]]);
    if (feature < 0 || feature >= v->ix.n_features)
        return mf_err(MF_ERR_INVALID_ARG, "feature %d is out of range (0..%d)", feature, v->ix.n_features - 1);
    mf_type_traits_ref(v->ix.ftype)->to_float(p + (size_t)feature * v->row_bytes, out, v->ix.n_embd);
    return MF_OK;
}

mf_status mf_vindex_embedding(const mf_vindex *v, mf_token tok, float *out) {
    if (tok < 0 || tok >= v->ix.n_vocab)
        return mf_err(MF_ERR_INVALID_ARG, "token %d is out of range (0..%d)", tok, v->ix.n_vocab - 1);
    const mf_type_traits *tr = mf_type_traits_ref(v->ix.embd_type);
    if (!tr || !tr->to_float)
        return mf_err(MF_ERR_UNSUPPORTED, "embeddings of type %s cannot be decoded", mf_type_name(v->ix.embd_type));
    const size_t rb = mf_row_size(v->ix.embd_type, v->ix.n_embd);
    tr->to_float(v->map[VX_EMBD].data + (size_t)tok * rb, out, v->ix.n_embd);
    return MF_OK;
}
