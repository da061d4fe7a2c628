/* env.h - environment switches (MINFER_NO_AVX512, MINFER_NO_REPACK, ...). */
#ifndef MF_CORE_ENV_H
#define MF_CORE_ENV_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A switch is on when set to anything but "" or "0". */
static inline bool mf_env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* A default-on switch is off when set to "" or "0" (MINFER_AMX=0,
 * MINFER_CUDA_GRAPH=0, ...); unset leaves it on. */
static inline bool mf_env_off(const char *name) { return getenv(name) && !mf_env_on(name); }

#endif
