/* intrange.c - integer bounds as a grammar, by digit-range decomposition.
 *
 * The numbers of one digit count between two bounds split into a few
 * prefix patterns: 123..456 is 12[3-9] | 1[3-9][0-9] | [23][0-9][0-9] |
 * 4[0-4][0-9] | 45[0-6]. Different digit counts are handled one count at a
 * time, and an open upper end as "any longer number" (the 16-digit cap of
 * the plain integer rule). Negative ranges are "-" and the range of their
 * magnitudes; "-0" is never produced. */
#include "sbuf.h"

#include <stdio.h>
#include <string.h>

#define MAX_DIGITS 16

/* Digit strings of length n from lo to hi inclusive (lo <= hi). */
static void same_len(sbuf *b, const char *lo, const char *hi, int n) {
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        g_sb_fmt(b, " \"%c\"", lo[0]);
        same_len(b, lo + 1, hi + 1, n - 1);
        return;
    }
    bool lo_min = true, hi_max = true; /* the rest is 00..0 / 99..9 */
    for (int i = 1; i < n; i++) {
        lo_min &= lo[i] == '0';
        hi_max &= hi[i] == '9';
    }
    char nines[MAX_DIGITS + 1], zeros[MAX_DIGITS + 1];
    memset(nines, '9', (size_t)n - 1);
    memset(zeros, '0', (size_t)n - 1);
    nines[n - 1] = zeros[n - 1] = 0;
    int k = 0;
    g_sb_str(b, " (");
    if (!lo_min) {
        g_sb_fmt(b, " \"%c\"", lo[0]);
        same_len(b, lo + 1, nines, n - 1);
        k++;
    }
    char a = (char)(lo_min ? lo[0] : lo[0] + 1), z = (char)(hi_max ? hi[0] : hi[0] - 1);
    if (a <= z) {
        g_sb_str(b, k++ ? " |" : "");
        if (a == z) g_sb_fmt(b, " \"%c\"", a);
        else g_sb_fmt(b, " [%c-%c]", a, z);
        if (n > 1) g_sb_fmt(b, " [0-9]{%d}", n - 1);
    }
    if (!hi_max) {
        g_sb_str(b, k++ ? " |" : "");
        g_sb_fmt(b, " \"%c\"", hi[0]);
        same_len(b, zeros, hi + 1, n - 1);
    }
    g_sb_str(b, " )");
}

/* Non-negative integers from lo to hi (hi < 0: no upper bound). */
static void nonneg(sbuf *b, long long lo, long long hi) {
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%lld", lo);
    int lz = hi < 0 ? MAX_DIGITS : snprintf(z, sizeof z, "%lld", hi);
    int k = 0;
    g_sb_str(b, " (");
    for (int len = la; len <= lz; len++) {
        char from[24], to[24];
        if (len == la) memcpy(from, a, (size_t)la + 1);
        else { memset(from, '0', (size_t)len); from[0] = '1'; from[len] = 0; }
        if (hi < 0 && len > la) { /* every longer number, up to the cap */
            g_sb_str(b, k++ ? " |" : "");
            g_sb_fmt(b, " [1-9] [0-9]{%d,%d}", len - 1, MAX_DIGITS - 1);
            break;
        }
        if (len == lz && hi >= 0) memcpy(to, z, (size_t)lz + 1);
        else { memset(to, '9', (size_t)len); to[len] = 0; }
        g_sb_str(b, k++ ? " |" : "");
        same_len(b, from, to, len);
    }
    g_sb_str(b, " )");
}

void g_int_range(sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi) {
    bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
    g_sb_str(out, "(");
    if (neg) { /* magnitudes from max(1, -hi) to -lo */
        g_sb_str(out, " \"-\"");
        nonneg(out, has_hi && hi < 0 ? -hi : 1, has_lo ? -lo : -1);
    }
    if (pos) {
        g_sb_str(out, neg ? " |" : "");
        nonneg(out, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    g_sb_str(out, " )");
}
