/* model_load.c - mf_model_load: parse and bind (model/), then the chosen
 * backend's weight loader (backends/registry.c). It sits here, above model/
 * and the backends, so that neither has to know the other. */
#include "backends/registry.h"
#include "model/model.h"
#include "vindex/vindex.h"
#include "gguf/gguf.h"

mf_status mf_model_load(const char *path, const mf_model_params *params, mf_model **out) {
    mf_model_params p = params ? *params : mf_model_default_params();
    mf_status s;
    if (mf_vindex_is_dir(path)) {
        /* a vindex of level inference: its stored header and weights */
        gguf_file *g;
        s = vx_open_gguf(path, p.no_mmap, &g);
        if (!s) s = mf_model_open_gguf(g, &p, out);
    } else {
        s = mf_model_open(path, &p, out);
    }
    if (s || p.vocab_only) return s;
    s = mf_backend_load_weights(p.backend, *out, &p);
    if (s) {
        mf_model_free(*out);
        *out = NULL;
    }
    return s;
}
