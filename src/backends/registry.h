/* registry.h - backends by name. The engine asks for a backend by the name
 * in its context params and never names one itself; this file sits above
 * both engine/ and the backends (cpu/, later cuda/). */
#ifndef MF_BACKENDS_REGISTRY_H
#define MF_BACKENDS_REGISTRY_H

#include "engine/backend.h"
#include "core/threadpool.h"

typedef struct mf_backend_config {
    int n_threads;     /* 0 = all CPUs */
    struct mf_pool *pool; /* a shared pool the backend uses but does not own, or NULL */
    int max_rows;      /* most rows of one op (n_batch) */
    int max_width;     /* widest activation row */
    uint32_t max_ctx;
    bool verbose;
} mf_backend_config;

/* NULL name = "cpu". Unknown names and construction failures are errors
 * with a message (the known names are listed). */
mf_status mf_backend_create(const char *name, const mf_backend_config *cfg, mf_backend **out);
/* The backend's weight loader over a parsed, bound model (the CPU: the x16
 * repack; the reference: nothing); sets m->backend. */
mf_status mf_backend_load_weights(const char *name, mf_model *m, const mf_model_params *p);
/* The device copy bandwidth in GB/s (bytes read + written) of a device
 * backend, measured now; -1 for host backends or without a device. */
double mf_backend_copy_bandwidth(const char *name, size_t bytes);
/* ", "-separated names of the backends this build has. */
const char *mf_backend_names(void);

#endif
