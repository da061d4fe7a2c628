/* lookup.c - prompt-lookup drafting: text that quotes, edits or summarises
 * its input repeats it, so the tokens that followed the last earlier
 * occurrence of the current n-gram are a good guess at what comes next, for
 * the price of a scan of the history (no second model). */
#include "minfer.h"

#include <string.h>

int32_t mf_lookup_draft(const mf_token *hist, int32_t n_hist, int32_t ngram_min, int32_t ngram_max, int32_t max,
                        mf_token *out) {
    if (!hist || !out || max <= 0 || n_hist < 2) return 0;
    if (ngram_min < 1) ngram_min = 1;
    if (ngram_max < ngram_min) ngram_max = ngram_min;
    /* longest n-grams first: a longer match predicts better */
    for (int32_t n = ngram_max < n_hist - 1 ? ngram_max : n_hist - 1; n >= ngram_min; n--) {
        const mf_token *tail = hist + n_hist - n;
        /* most recent first; the match must leave at least one token after it */
        for (int32_t at = n_hist - n - 1; at >= 0; at--) {
            if (hist[at] != tail[0] || memcmp(hist + at, tail, sizeof *tail * (size_t)n)) continue;
            int32_t from = at + n, k = n_hist - from;
            if (k > max) k = max;
            memcpy(out, hist + from, sizeof *out * (size_t)k);
            return k;
        }
    }
    return 0;
}
