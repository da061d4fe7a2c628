/* gguf_view.c - the source GGUF rebuilt from a vindex of level inference:
 * header.bin (the file up to its data section) copied in front of
 * weights.bin mapped zero-copy, then parsed and validated as any GGUF. The
 * model thus runs on the original bytes of every tensor. */
#include "vindex/vindex.h"
#include "core/error.h"
#include "core/mapfile.h"
#include "gguf/gguf.h"

#include <stdlib.h>
#include <string.h>

mf_status vx_open_gguf(const char *dir, bool read_copy, gguf_file **out) {
    *out = NULL;
    mf_vindex *v;
    mf_status s = mf_vindex_open(dir, &v);
    if (s) return s;
    if (v->ix.level < MF_VINDEX_INFERENCE) {
        s = mf_err(MF_ERR_UNSUPPORTED, "%s: a vindex of level %s holds no model weights (build it with --level inference)",
                   dir, vx_level_name(v->ix.level));
        mf_vindex_free(v);
        return s;
    }
    mf_vindex_free(v);
    char *hp = vx_path(dir, vx_file_names[VX_HEADER]), *wp = vx_path(dir, vx_file_names[VX_WEIGHTS]);
    mf_mapfile head = {0}, joined;
    s = !hp || !wp ? mf_err(MF_ERR_NOMEM, "out of memory") : mf_mapfile_open(hp, &head);
    if (!s) s = mf_mapfile_join(head.data, head.size, wp, read_copy, &joined);
    mf_mapfile_close(&head);
    if (!s) s = gguf_open_map(joined, dir, out);
    free(hp);
    free(wp);
    return s;
}
