/* state.h - what the sampler (sample/sampler.c) needs from a grammar state. */
#ifndef MF_GRAMMAR_STATE_H
#define MF_GRAMMAR_STATE_H

#include <stdint.h>

#include "minfer.h"

/* The allowed-token bitmap (bit t of word t/64) at the state's position;
 * valid until the state is next advanced or masked. */
mf_status g_state_mask(mf_grammar_state *s, const uint64_t **bits, int32_t *n_vocab);

#endif
