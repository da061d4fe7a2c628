/* verify.c - mf_vindex_verify: the structural checks of mf_vindex_open, then
 * every listed file hashed and compared with index.json, then every HNSW
 * graph cache in the directory (hnsw_*.bin) checked as loading checks it.
 * The caches are not listed in index.json: they are derived from
 * gate_vectors.bin (whose sha256 each records), made after the build, may
 * come and go, and index.json stays as the build wrote it. */
#include "vindex/vindex.h"
#include "vindex/sha256.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* the caches in name order, so the first error is the same on every file system */
static mf_status check_caches(const mf_vindex *v, const char *dir, mf_vindex_progress_fn progress, void *ud) {
    char **names;
    size_t n;
    mf_status s = vx_hnsw_cache_names(dir, &names, &n);
    for (size_t i = 0; !s && i < n; i++) {
        if (progress) progress(-1, v->ix.n_layer, names[i], ud);
        char *p = vx_path(dir, names[i]);
        s = p ? vx_hnsw_file_check(v, p) : mf_err(MF_ERR_NOMEM, "out of memory");
        free(p);
    }
    vx_free_names(names, n);
    return s;
}

mf_status mf_vindex_verify(const char *dir, mf_vindex_progress_fn progress, void *ud) {
    mf_vindex *v;
    mf_status s = mf_vindex_open(dir, &v);
    if (s) return s;
    for (int f = 0; !s && f < VX_NFILES; f++) {
        const vx_fileinfo *fi = &v->ix.files[f];
        if (!fi->present) continue;
        if (progress) progress(-1, v->ix.n_layer, vx_file_names[f], ud);
        char *p = vx_path(dir, vx_file_names[f]);
        char hex[65];
        uint64_t size = 0;
        s = p ? mf_sha256_file(p, hex, &size) : mf_err(MF_ERR_NOMEM, "out of memory");
        if (!s && size != fi->size)
            s = mf_err(MF_ERR_FORMAT, "%s: %" PRIu64 " bytes, index.json says %" PRIu64, p, size, fi->size);
        if (!s && strcmp(hex, fi->sha256))
            s = mf_err(MF_ERR_FORMAT, "%s: sha256 %s does not match index.json (%s): the file is damaged", p, hex,
                       fi->sha256);
        free(p);
    }
    if (!s) s = check_caches(v, dir, progress, ud);
    mf_vindex_free(v);
    return s;
}
