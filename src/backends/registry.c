/* registry.c - the table of backends this build can construct. */
#include "backends/registry.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "model/model.h"
#ifdef MINFER_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdio.h>
#include <string.h>

typedef struct entry {
    const char *name;
    mf_backend *(*create)(const mf_backend_config *cfg);
    mf_status (*load_weights)(mf_model *m, const mf_model_params *p);
} entry;

static mf_backend *cpu_create(const mf_backend_config *c) {
    mf_backend *be = mf_cpu_backend_new(c->pool ? 1 : c->n_threads, c->max_rows, c->max_width, c->max_ctx, c->verbose);
    if (be && c->pool) mf_cpu_share_pool(be, c->pool);
    return be;
}

static mf_status cpu_load(mf_model *m, const mf_model_params *p) {
    if (p->gpu_layers)
        return mf_err(MF_ERR_INVALID_ARG, "gpu_layers %d needs a device backend (mf_model_params.backend \"cuda\")",
                      (int)p->gpu_layers);
    return mf_cpu_weights_load(m, p->no_repack);
}

/* the scalar reference kernels of quant/ on the file's layout, no GEMM: the
 * second backend of the parity test (tests/engine/test_backend_parity.c) */
static mf_backend *ref_create(const mf_backend_config *c) {
    mf_backend *be = mf_cpu_backend_new_ref(c->pool ? 1 : c->n_threads, c->max_rows, c->max_width, c->max_ctx, c->verbose);
    if (be && c->pool) mf_cpu_share_pool(be, c->pool);
    return be;
}

static mf_status ref_load(mf_model *m, const mf_model_params *p) {
    (void)m, (void)p;
    return MF_OK;
}

#ifdef MINFER_HAVE_CUDA
/* the device's absence is an error with its reason, never a quiet CPU run */
static char g_cuda_why[256];
static mf_backend *cuda_create(const mf_backend_config *c) { return mf_cuda_backend_new(c, g_cuda_why, sizeof g_cuda_why); }
/* A split model (-ngl N below the layer count, or auto) runs its first
 * layers on the CPU: the CPU's loader takes their tensors, the device's the
 * rest (model/split.c), and contexts pair the two backends. */
static mf_status cuda_load(mf_model *m, const mf_model_params *p) {
    mf_status s = mf_cuda_plan_layers(m, p->gpu_layers);
    if (!s) s = mf_cuda_weights_load(m, p);
    if (!s && m->n_cpu_layers) s = mf_cpu_weights_load(m, p->no_repack);
    return s;
}
#endif

static const entry k_backends[] = {
    {"cpu", cpu_create, cpu_load},
    {"cpu-ref", ref_create, ref_load},
#ifdef MINFER_HAVE_CUDA
    {"cuda", cuda_create, cuda_load},
#endif
};

#ifdef MINFER_HAVE_CUDA
const char *mf_backend_names(void) { return "cpu, cpu-ref, cuda"; }
#else
const char *mf_backend_names(void) { return "cpu, cpu-ref"; }
#endif

/* a name this build knows but lacks */
static mf_status unknown(const char *name) {
    if (!strcmp(name, "cuda"))
        return mf_err(MF_ERR_UNSUPPORTED, "backend \"cuda\": this build has no CUDA backend (nvcc was not found when it "
                                          "was configured; this build has: %s)", mf_backend_names());
    return mf_err(MF_ERR_INVALID_ARG, "unknown backend \"%s\" (this build has: %s)", name, mf_backend_names());
}

static const entry *find(const char *name) {
    for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0]; i++)
        if (!strcmp(k_backends[i].name, name)) return &k_backends[i];
    return NULL;
}

mf_status mf_backend_load_weights(const char *name, mf_model *m, const mf_model_params *p) {
    if (!name || !*name) name = "cpu";
    const entry *e = find(name);
    if (!e) return unknown(name);
    m->backend = e->name;
    return e->load_weights(m, p);
}

mf_status mf_backend_create(const char *name, const mf_backend_config *cfg, mf_backend **out) {
    *out = NULL;
    if (!name || !*name) name = "cpu";
    const entry *e = find(name);
    if (e) {
        *out = e->create(cfg);
#ifdef MINFER_HAVE_CUDA
        if (!*out && e->create == cuda_create && g_cuda_why[0])
            return mf_err(MF_ERR_UNSUPPORTED, "cannot create the cuda backend: %s", g_cuda_why);
#endif
        if (!*out) return mf_err(MF_ERR_NOMEM, "cannot create the %s backend (threads or memory)", name);
        return MF_OK;
    }
    return unknown(name);
}

double mf_backend_copy_bandwidth(const char *name, size_t bytes) {
#ifdef MINFER_HAVE_CUDA
    if (name && !strcmp(name, "cuda")) return mf_cuda_copy_bandwidth(bytes);
#endif
    (void)name, (void)bytes;
    return -1;
}
