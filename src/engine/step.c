/* step.c - a one-sequence step over pages laid out in order, for tests of
 * single ops and for benchmarks that drive a backend without a context. */
#include "engine/backend.h"

void mf_step_linear(mf_step *st, mf_step_seq *seq, int32_t *pos, int32_t *cell, int32_t *pages, const mf_token *tokens,
                    int n_tok, uint32_t pos0, uint32_t page_size) {
    const uint32_t np = (pos0 + (uint32_t)n_tok) / page_size + 1;
    for (uint32_t i = 0; i < np; i++) pages[i] = (int32_t)i;
    for (int i = 0; i < n_tok; i++) {
        pos[i] = (int32_t)(pos0 + (uint32_t)i);
        cell[i] = pos[i]; /* page i holds positions [i * page_size, (i + 1) * page_size) */
    }
    *seq = (mf_step_seq){0, n_tok, (int32_t)pos0, pages};
    *st = (mf_step){n_tok, tokens, pos, cell, 1, seq, 0, NULL};
}
