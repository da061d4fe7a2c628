/* intrange.c - integer bounds as a grammar, by digit-range decomposition.
 *
 * The numbers of one digit count between two bounds split into a few
 * prefix patterns: 123..456 is 12[3-9] | 1[3-9][0-9] | [23][0-9][0-9] |
 * 4[0-4][0-9] | 45[0-6]. Different digit counts are handled one count at a
 * time, and an open upper end as "any longer number" (the 16-digit cap of
 * the plain integer rule). Negative ranges are "-" and the range of their
 * magnitudes; "-0" is never produced.
 *
 * Numbers split the same way on the integer part I of I.F: strictly
 * between the bounds' integer parts any fraction F will do; where I equals
 * a bound's integer part, F is compared digit by digit with the bound's
 * fraction digits (the same prefix patterns, on at most 15 digits). */
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

/* ---- numbers ----
 * A bound's magnitude is an integer part and its fraction digits, without
 * trailing zeros ("2.5" is {2, "5"}, "3" is {3, ""}). */
#define FRAC_DIGITS 15

typedef struct dec {
    long long i;
    char d[FRAC_DIGITS + 1];
} dec;

/* |v| as the fewest decimals that read back as v; false past 15. */
static bool dec_of(double v, dec *o) {
    if (v < 0) v = -v;
    for (int n = 0; n <= FRAC_DIGITS; n++) {
        char t[64];
        snprintf(t, sizeof t, "%.*f", n, v);
        if (strtod(t, NULL) != v) continue;
        char *dot = strchr(t, '.');
        o->i = strtoll(t, NULL, 10);
        o->d[0] = 0;
        if (dot) {
            size_t len = strlen(dot + 1);
            while (len && dot[len] == '0') len--;
            memcpy(o->d, dot + 1, len);
            o->d[len] = 0;
        }
        return true;
    }
    return false;
}

/* Fraction digits F (at most FRAC_DIGITS - pos more; at least one when
 * `first`) with lo <= .F (lo < .F when lo_ex) while `a` is still tight
 * against the lower bound's digits, and .F <= hi (<) while `z` is tight.
 * NULL: that side no longer constrains. An exhausted bound ("") compares
 * against zeros. Appends the expression (possibly nothing, when only the
 * end of F is left) and returns whether any F is possible. */
static bool frac_digits(sbuf *b, const char *a, bool lo_ex, const char *z, bool hi_ex, int pos, bool first) {
    if (a && !a[0] && !lo_ex) a = NULL; /* equal so far: anything more keeps F >= lo */
    const int rem = FRAC_DIGITS - pos;
    /* stopping here: the rest of F is zeros */
    const bool stop = !first && !a && (!z || z[0] || !hi_ex);
    if (!a && !z) {
        if (rem > 0) g_sb_fmt(b, " [0-9]{%d,%d}", first ? 1 : 0, rem);
        return rem > 0 || stop;
    }
    sbuf alts = {0};
    int k = 0;
    if (rem > 0) {
        const char lc = a ? (a[0] ? a[0] : '0') : '0', hc = z ? (z[0] ? z[0] : '0') : '9';
        /* digits strictly inside release both sides */
        const char i0 = (char)(a ? lc + 1 : lc), i1 = (char)(z ? hc - 1 : hc);
        if (i0 <= i1) {
            g_sb_str(&alts, k++ ? " |" : "");
            if (i0 == i1) g_sb_fmt(&alts, " \"%c\"", i0);
            else g_sb_fmt(&alts, " [%c-%c]", i0, i1);
            if (rem > 1) g_sb_fmt(&alts, " [0-9]{0,%d}", rem - 1);
        }
        const char *an = a ? (a[0] ? a + 1 : a) : NULL, *zn = z ? (z[0] ? z + 1 : z) : NULL;
        /* the bounds' own digits: both tight, or one side tight */
        const struct { bool on; char c; const char *a, *z; } next[3] = {
            {a && z && lc == hc, lc, an, zn},
            {a && (!z || lc < hc), lc, an, NULL},
            {z && (!a || hc > lc), hc, NULL, zn},
        };
        for (int i = 0; i < 3; i++) {
            if (!next[i].on) continue;
            sbuf t = {0};
            if (frac_digits(&t, next[i].a, lo_ex, next[i].z, hi_ex, pos + 1, false))
                g_sb_fmt(&alts, "%s \"%c\"%s", k++ ? " |" : "", next[i].c, t.s ? t.s : "");
            if (t.oom) alts.oom = true;
            free(t.s);
        }
    }
    if (k) g_sb_fmt(b, stop ? " (%s )?" : " (%s )", alts.s);
    if (alts.oom) b->oom = true;
    free(alts.s);
    return k > 0 || stop;
}

/* The fraction that may follow an integer part: lo / hi are the bound's
 * digits where the integer part equals that bound's (NULL otherwise).
 * Returns false when no fraction (not even none) will do. */
static bool frac(sbuf *b, const char *lo, bool lo_ex, const char *hi, bool hi_ex) {
    /* F = 0 (no fraction, or only zeros) */
    const bool zero_ok = (!lo || (!lo[0] && !lo_ex)) && (!hi || hi[0] || !hi_ex);
    sbuf t = {0};
    const bool some = frac_digits(&t, lo, lo_ex, hi, hi_ex, 0, true);
    if (some) g_sb_fmt(b, zero_ok ? " ( \".\"%s )?" : " \".\"%s", t.s ? t.s : "");
    if (t.oom) b->oom = true;
    free(t.s);
    return some || zero_ok;
}

/* One alternative: integer part I (a single value) and its fraction. */
static void alt(sbuf *b, long long I, const char *lo, bool lo_ex, const char *hi, bool hi_ex, int *k) {
    sbuf t = {0};
    nonneg(&t, I, I);
    const bool ok = frac(&t, lo, lo_ex, hi, hi_ex);
    if (ok) g_sb_fmt(b, "%s (%s )", (*k)++ ? " |" : "", t.s ? t.s : "");
    if (t.oom) b->oom = true;
    free(t.s);
}

/* Magnitudes I.F from L to H (no upper bound without has_h), 0 <= L. */
static void magnitudes(sbuf *b, const dec *L, bool l_ex, bool has_h, const dec *H, bool h_ex, int *k) {
    if (has_h && L->i == H->i) {
        alt(b, L->i, L->d, l_ex, H->d, h_ex, k);
        return;
    }
    alt(b, L->i, L->d, l_ex, NULL, false, k);
    if (!has_h || H->i - L->i > 1) {
        g_sb_str(b, (*k)++ ? " | (" : " (");
        nonneg(b, L->i + 1, has_h ? H->i - 1 : -1);
        g_sb_fmt(b, " ( \".\" [0-9]{1,%d} )? )", FRAC_DIGITS);
    }
    if (has_h) alt(b, H->i, NULL, false, H->d, h_ex, k);
}

bool g_num_range(sbuf *out, bool has_lo, double lo, bool lo_ex, bool has_hi, double hi, bool hi_ex) {
    dec L = {0}, H = {0}, zero = {0};
    if ((has_lo && !dec_of(lo, &L)) || (has_hi && !dec_of(hi, &H))) return false;
    int k = 0;
    g_sb_str(out, "(");
    if (!has_lo || lo < 0) { /* x < 0: magnitude m = -x in (max(0, -hi), -lo] */
        const bool hi_neg = has_hi && hi < 0;
        sbuf m = {0};
        int km = 0;
        magnitudes(&m, hi_neg ? &H : &zero, hi_neg ? hi_ex : true, has_lo, &L, lo_ex, &km);
        if (km) {
            g_sb_fmt(out, " \"-\" (%s )", m.s ? m.s : "");
            k++;
        }
        if (m.oom) out->oom = true;
        free(m.s);
    }
    if (!has_hi || hi > 0 || (hi == 0 && !hi_ex)) { /* x >= 0 */
        const bool lo_pos = has_lo && lo >= 0;
        sbuf m = {0};
        int km = 0;
        magnitudes(&m, lo_pos ? &L : &zero, lo_pos && lo_ex, has_hi, &H, hi_ex, &km);
        if (km) {
            g_sb_fmt(out, "%s (%s )", k ? " |" : "", m.s ? m.s : "");
            k++;
        }
        if (m.oom) out->oom = true;
        free(m.s);
    }
    g_sb_str(out, " )");
    return true;
}
