/* verify.c - mf_vindex_verify: the structural checks of mf_vindex_open, then
 * every listed file hashed and compared with index.json. */
#include "vindex/vindex.h"
#include "vindex/sha256.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
    mf_vindex_free(v);
    return s;
}
