/* registry.c - the table of backends this build can construct. */
#include "backends/registry.h"
#include "core/error.h"
#include "cpu/cpu.h"

#include <string.h>

typedef struct entry {
    const char *name;
    mf_backend *(*create)(const mf_backend_config *cfg);
} entry;

static mf_backend *cpu_create(const mf_backend_config *c) {
    return mf_cpu_backend_new(c->n_threads, c->max_rows, c->max_width, c->max_ctx, c->verbose);
}

static const entry k_backends[] = {
    {"cpu", cpu_create},
};

const char *mf_backend_names(void) { return "cpu"; }

mf_status mf_backend_create(const char *name, const mf_backend_config *cfg, mf_backend **out) {
    *out = NULL;
    if (!name || !*name) name = "cpu";
    for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0]; i++)
        if (!strcmp(k_backends[i].name, name)) {
            *out = k_backends[i].create(cfg);
            if (!*out) return mf_err(MF_ERR_NOMEM, "cannot create the %s backend (threads or memory)", name);
            return MF_OK;
        }
    return mf_err(MF_ERR_INVALID_ARG, "unknown backend \"%s\" (this build has: %s)", name, mf_backend_names());
}
