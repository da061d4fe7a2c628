/* intrange.c - integer bounds as a grammar, by digit-range decomposition.
 *
 * The numbers of one digit count between two bounds split into a few
 * prefix patterns: 123..456 is 12[3-9] | 1[3-9][0-9] | [23][0-9][0-9] |
 * 4[0-4][0-9] | 45[0-6]. Different digit counts are handled one count at a
 * time, and an open upper end as "any longer number" (the 16-digit cap of
 * the plain integer rule). Negative ranges are "-" and the range of their
 * magnitudes; "-0" is never produced.
 *
 * Numbers with integer bounds split the same way on the integer part I of
 * I.F: inside the bounds any fraction F will do, at an inclusive upper
 * bound only a zero one, at an exclusive lower bound only a non-zero one. */
#include "sbuf.h"

#include <stdio.h>
#include <stdlib.h>
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

/* What fraction may follow an integer part. */
enum { F_NONE, F_ANY, F_ZERO, F_NONZERO };

static int frac_meet(int a, int b) {
    if (a == F_NONE || b == F_NONE) return F_NONE;
    if (a == F_ANY) return b;
    if (b == F_ANY || a == b) return a;
    return F_NONE; /* zero and non-zero */
}

static void frac(sbuf *b, int kind) {
    if (kind == F_ANY) g_sb_str(b, " ( \".\" [0-9]{1,15} )?");
    else if (kind == F_ZERO) g_sb_str(b, " ( \".\" \"0\"{1,15} )?");
    else g_sb_str(b, " \".\" \"0\"{0,14} [1-9] [0-9]{0,14}");
}

/* Magnitudes I.F from L to H (H < 0: no upper bound), 0 <= L. */
static void magnitudes(sbuf *b, long long L, bool l_ex, long long H, bool h_ex, int *k) {
    int at_l = l_ex ? F_NONZERO : F_ANY, at_h = h_ex ? F_NONE : F_ZERO;
    if (H >= 0 && L == H) {
        int f = frac_meet(at_l, at_h);
        if (f == F_NONE) return;
        g_sb_str(b, (*k)++ ? " | (" : " (");
        nonneg(b, L, L);
        frac(b, f);
        g_sb_str(b, " )");
        return;
    }
    g_sb_str(b, (*k)++ ? " | (" : " (");
    nonneg(b, L, L);
    frac(b, at_l);
    g_sb_str(b, " )");
    if (H < 0 || H - L > 1) {
        g_sb_str(b, " | (");
        nonneg(b, L + 1, H < 0 ? -1 : H - 1);
        frac(b, F_ANY);
        g_sb_str(b, " )");
    }
    if (H >= 0 && at_h != F_NONE) {
        g_sb_str(b, " | (");
        nonneg(b, H, H);
        frac(b, at_h);
        g_sb_str(b, " )");
    }
}

void g_num_range(sbuf *out, bool has_lo, long long lo, bool lo_ex, bool has_hi, long long hi, bool hi_ex) {
    int k = 0;
    g_sb_str(out, "(");
    if (!has_lo || lo < 0) { /* x < 0: magnitude m = -x in (max(0, -hi), -lo] */
        bool hi_neg = has_hi && hi < 0;
        sbuf m = {0};
        int km = 0;
        magnitudes(&m, hi_neg ? -hi : 0, hi_neg ? hi_ex : true, has_lo ? -lo : -1, lo_ex, &km);
        if (km) {
            g_sb_fmt(out, " \"-\" (%s )", m.s ? m.s : "");
            k++;
        }
        if (m.oom) out->oom = true;
        free(m.s);
    }
    if (!has_hi || hi > 0 || (hi == 0 && !hi_ex)) { /* x >= 0 */
        bool lo_pos = has_lo && lo >= 0;
        sbuf m = {0};
        int km = 0;
        magnitudes(&m, lo_pos ? lo : 0, lo_pos && lo_ex, has_hi ? hi : -1, hi_ex, &km);
        if (km) {
            g_sb_fmt(out, "%s (%s )", k ? " |" : "", m.s ? m.s : "");
            k++;
        }
        if (m.oom) out->oom = true;
        free(m.s);
    }
    g_sb_str(out, " )");
}
