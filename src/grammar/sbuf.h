/* sbuf.h - a growing text buffer for the GBNF the schema converter writes
 * (schema.c, regex.c, intrange.c). Out of memory sets `oom` and makes every
 * later append a no-op, so callers check once at the end. */
#ifndef MF_GRAMMAR_SBUF_H
#define MF_GRAMMAR_SBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

void g_sb_add(sbuf *b, const char *s, size_t n);
void g_sb_str(sbuf *b, const char *s);
void g_sb_fmt(sbuf *b, const char *fmt, ...) MF_PRINTF(2, 3);

/* regex.c: appends a GBNF expression for the JSON text (what lies between
 * the quotes) of every string the regex `re` matches, with JSON Schema's
 * search semantics: an end without ^ or $ matches anything there, through
 * the rule named `any_char` (one JSON string character). On a construct it
 * cannot express, writes a message naming it to err and returns false. */
bool g_regex_gbnf(const char *re, const char *any_char, sbuf *out, char *err, size_t errcap);

/* intrange.c: appends a GBNF expression for the JSON integers n with
 * lo <= n (when has_lo) and n <= hi (when has_hi), at most 16 digits;
 * |lo|, |hi| < 10^15 and lo <= hi are the caller's to check. */
void g_int_range(sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi);

/* intrange.c: the same for JSON numbers (an optional fraction of up to 15
 * digits, no exponent) between bounds, each inclusive or exclusive (*_ex).
 * A bound is compared as the shortest decimal text that reads back as it
 * (0.1, not the binary double's expansion). Returns false, appending
 * nothing, when a bound needs more than 15 decimals. The caller checks that
 * some number lies within the bounds and that |bound| < 10^15. */
bool g_num_range(sbuf *out, bool has_lo, double lo, bool lo_ex, bool has_hi, double hi, bool hi_ex);

#endif
