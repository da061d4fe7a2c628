/* profile.h - the op-profiling backend decorator behind MINFER_OP_PROFILE=1. */
#ifndef MF_ENGINE_PROFILE_H
#define MF_ENGINE_PROFILE_H

#include "engine/backend.h"

/* Wraps `inner`: every op is timed; the table prints when the wrapper is
 * destroyed (which destroys `inner`). Returns `inner` itself on failure. */
mf_backend *mf_profile_wrap(mf_backend *inner);

#endif
