/* lookup.c - prompt-lookup drafting: text that quotes, edits or summarises
 * its input repeats it, so the tokens that followed the last earlier
 * occurrence of the current n-gram are a good guess at what comes next, for
 * the price of a scan of the history (no second model). A match close to
 * the end (text repeating with a short period, as lists and loops do)
 * continues past the end of the history with its own draft: if the text
 * repeats, it keeps repeating. */
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
            const int32_t from = at + n;
            for (int32_t i = 0; i < max; i++)
                out[i] = from + i < n_hist ? hist[from + i] : out[from + i - n_hist];
            return max;
        }
    }
    return 0;
}
