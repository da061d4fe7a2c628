/* regex.c - a JSON Schema `pattern` (ECMAScript regex syntax) as GBNF.
 *
 * Supported: literals, escapes (\d \w \s and their negations, \t \n \r \f
 * \v \0, \xHH, \uHHHH, \u{H..}, escaped syntax characters), classes with
 * ranges and negation, `.`, `* + ? {m} {m,} {m,n}` (lazy forms too: same
 * language), groups `( )`, `(?: )`, `(?<name> )`, alternation, and ^ / $ at
 * the ends of the top-level alternatives. Lookaround, backreferences, word
 * boundaries, property escapes, anchors elsewhere and unbounded repeats of
 * a group that can match "" (a left-recursive rule) are refused by name.
 *
 * The pattern constrains the decoded string, the grammar the JSON text, so
 * every matched character is written in its JSON form: `"` as \", control
 * characters escaped. Only one spelling of each character is produced (no
 * \u escape where a plain character will do), which every JSON parser reads
 * back as the same string. */
#include "sbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CP     0x10FFFFu
#define MAX_REPEAT 10000
#define MAX_DEPTH  64

typedef struct crange {
    uint32_t lo, hi;
} crange;

typedef struct cset {
    crange r[256];
    size_t n;
    bool full; /* more ranges than fit: treated as an error */
} cset;

typedef struct rx {
    const char *p;
    const char *any;
    sbuf *out;
    char *err;
    size_t errcap;
    bool failed;
    int depth;
    bool nullable; /* what the last item, sequence or alternation parsed can match "" */
} rx;

static bool rx_fail(rx *R, const char *what) {
    if (!R->failed) snprintf(R->err, R->errcap, "%s", what);
    R->failed = true;
    return false;
}

static void cs_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == sizeof s->r / sizeof *s->r) { s->full = true; return; }
    s->r[s->n++] = (crange){lo, hi};
}

static int cmp_range(const void *a, const void *b) {
    const crange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorted, merged ranges. */
static void cs_norm(cset *s) {
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && s->r[i].lo <= s->r[k - 1].hi + 1) {
            if (s->r[i].hi > s->r[k - 1].hi) s->r[k - 1].hi = s->r[i].hi;
        } else s->r[k++] = s->r[i];
    }
    s->n = k;
}

static void cs_negate(cset *s) {
    cs_norm(s);
    cset t = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) cs_add(&t, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= MAX_CP) cs_add(&t, next, MAX_CP);
    t.full |= s->full;
    *s = t;
}

static bool cs_has(const cset *s, uint32_t c) {
    for (size_t i = 0; i < s->n; i++)
        if (c >= s->r[i].lo && c <= s->r[i].hi) return true;
    return false;
}

/* The class escapes \d \w \s (negated when upper case) into s. */
static void class_escape(cset *s, char e) {
    cset t = {0};
    char l = (char)(e | 0x20);
    if (l == 'd') cs_add(&t, '0', '9');
    else if (l == 'w') { cs_add(&t, '0', '9'); cs_add(&t, 'A', 'Z'); cs_add(&t, 'a', 'z'); cs_add(&t, '_', '_'); }
    else { /* ECMAScript white space and line terminators */
        cs_add(&t, 0x09, 0x0D); cs_add(&t, 0x20, 0x20); cs_add(&t, 0xA0, 0xA0); cs_add(&t, 0x1680, 0x1680);
        cs_add(&t, 0x2000, 0x200A); cs_add(&t, 0x2028, 0x2029); cs_add(&t, 0x202F, 0x202F);
        cs_add(&t, 0x205F, 0x205F); cs_add(&t, 0x3000, 0x3000); cs_add(&t, 0xFEFF, 0xFEFF);
    }
    if (e != l) cs_negate(&t);
    for (size_t i = 0; i < t.n; i++) cs_add(s, t.r[i].lo, t.r[i].hi);
}

/* One code point of GBNF literal or class text. */
static void gbnf_cp(sbuf *b, uint32_t c, bool in_class) {
    if (c == '"' || c == '\\' || (in_class && (c == ']' || c == '-' || c == '^'))) g_sb_fmt(b, "\\%c", (char)c);
    else if (c >= 0x20 && c < 0x7F) g_sb_fmt(b, "%c", (char)c);
    else if (c <= 0xFFFF) g_sb_fmt(b, "\\u%04X", (unsigned)c);
    else g_sb_fmt(b, "\\U%08X", (unsigned)c);
}

/* The short JSON escape letter of c, or 0. */
static char json_short(uint32_t c) {
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case 0x08: return 'b';
    case 0x09: return 't';
    case 0x0A: return 'n';
    case 0x0C: return 'f';
    case 0x0D: return 'r';
    default: return 0;
    }
}

/* A literal character as the GBNF for its JSON text. */
static void emit_char(rx *R, uint32_t c) {
    sbuf *b = R->out;
    char e = json_short(c);
    if (e == '"' || e == '\\') g_sb_fmt(b, " \"\\\\\\%c\"", e);
    else if (e) g_sb_fmt(b, " \"\\\\%c\"", e);
    else if (c < 0x20) g_sb_fmt(b, " \"\\\\u%04x\"", (unsigned)c);
    else { g_sb_str(b, " \""); gbnf_cp(b, c, false); g_sb_str(b, "\""); }
}

/* A set of characters as the GBNF for their JSON text: the plain ones as a
 * class, the rest as escapes. */
static bool emit_set(rx *R, cset *s) {
    if (s->full) return rx_fail(R, "a class with more than 256 ranges");
    cs_norm(s);
    sbuf *b = R->out;
    int parts = 0;
    g_sb_str(b, " (");
    /* plain: from U+0020 up, less '"', '\' and the surrogates */
    cset plain = {0};
    static const crange cut[] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        /* split [lo, hi] around the cut ranges (sorted, disjoint) */
        for (size_t k = 0; k < sizeof cut / sizeof *cut && lo <= hi; k++) {
            if (cut[k].hi < lo || cut[k].lo > hi) continue;
            if (cut[k].lo > lo) cs_add(&plain, lo, cut[k].lo - 1);
            lo = cut[k].hi + 1;
        }
        if (lo <= hi) cs_add(&plain, lo, hi);
    }
    if (plain.n) {
        g_sb_str(b, " [");
        for (size_t i = 0; i < plain.n; i++) {
            gbnf_cp(b, plain.r[i].lo, true);
            if (plain.r[i].hi != plain.r[i].lo) { g_sb_str(b, "-"); gbnf_cp(b, plain.r[i].hi, true); }
        }
        g_sb_str(b, "]");
        parts++;
    }
    char letters[8];
    size_t nl = 0;
    for (uint32_t c = 0; c < 0x60; c++)
        if (json_short(c) && cs_has(s, c)) letters[nl++] = json_short(c);
    if (nl) {
        g_sb_str(b, parts++ ? " | \"\\\\\" [" : " \"\\\\\" [");
        for (size_t i = 0; i < nl; i++) g_sb_fmt(b, "%s%c", letters[i] == '"' || letters[i] == '\\' ? "\\" : "", letters[i]);
        g_sb_str(b, "]");
    }
    /* other control characters: \u00XX */
    uint32_t others = 0, n_others = 0;
    for (uint32_t c = 0; c < 0x20; c++)
        if (!json_short(c)) { n_others++; others += cs_has(s, c); }
    if (others == n_others) {
        g_sb_str(b, parts++ ? " | " : " ");
        g_sb_str(b, "\"\\\\u00\" ( \"0\" [0-7bBeEfF] | \"1\" [0-9a-fA-F] )");
    } else {
        for (uint32_t c = 0; c < 0x20; c++) {
            if (json_short(c) || !cs_has(s, c)) continue;
            g_sb_fmt(b, "%s\"\\\\u%04x\"", parts++ ? " | " : " ", (unsigned)c);
        }
    }
    g_sb_str(b, " )");
    if (!parts) return rx_fail(R, "a class that matches nothing");
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

static bool hex_digits(rx *R, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        int h = hexval(R->p[i]);
        if (h < 0) return rx_fail(R, "an escape \\x or \\u without its hex digits");
        v = v << 4 | (uint32_t)h;
    }
    R->p += n;
    *out = v;
    return true;
}

/* One UTF-8 code point of the pattern (jansson gave valid UTF-8). */
static uint32_t next_cp(rx *R) {
    const unsigned char *p = (const unsigned char *)R->p;
    int n = p[0] < 0x80 ? 0 : p[0] < 0xE0 ? 1 : p[0] < 0xF0 ? 2 : 3;
    uint32_t v = n ? p[0] & (0x3F >> n) : p[0];
    for (int i = 1; i <= n && p[i]; i++) v = v << 6 | (p[i] & 0x3F);
    R->p += 1 + n;
    return v;
}

/* After a backslash: a single character into *c, or a class escape into s
 * (then *c is UINT32_MAX). in_class: inside [...], where \b is backspace. */
static bool escape(rx *R, bool in_class, cset *s, uint32_t *c) {
    char e = *R->p;
    if (!e) return rx_fail(R, "a trailing backslash");
    R->p++;
    *c = UINT32_MAX;
    switch (e) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': class_escape(s, e); return true;
    case 't': *c = 0x09; return true;
    case 'n': *c = 0x0A; return true;
    case 'v': *c = 0x0B; return true;
    case 'f': *c = 0x0C; return true;
    case 'r': *c = 0x0D; return true;
    case '0':
        if (*R->p >= '0' && *R->p <= '9') return rx_fail(R, "an octal escape \\0N");
        *c = 0;
        return true;
    case 'x': return hex_digits(R, 2, c);
    case 'u':
        if (*R->p == '{') {
            R->p++;
            uint32_t v = 0;
            int n = 0;
            for (; hexval(*R->p) >= 0 && n < 7; n++, R->p++) v = v << 4 | (uint32_t)hexval(*R->p);
            if (!n || *R->p != '}' || v > MAX_CP) return rx_fail(R, "a malformed escape \\u{...}");
            R->p++;
            *c = v;
            return true;
        }
        return hex_digits(R, 4, c);
    case 'b':
        if (in_class) { *c = 0x08; return true; }
        return rx_fail(R, "the word boundary \\b");
    case 'B': return rx_fail(R, "the non-word boundary \\B");
    case 'k': return rx_fail(R, "the named backreference \\k");
    case 'p': case 'P': return rx_fail(R, "the Unicode property escape \\p");
    case 'c': return rx_fail(R, "the control escape \\c");
    default: break;
    }
    if (e >= '1' && e <= '9') return rx_fail(R, "a backreference \\N");
    if (strchr("^$\\.*+?()[]{}|/", e) || (in_class && e == '-')) { *c = (uint32_t)e; return true; }
    char msg[40];
    snprintf(msg, sizeof msg, "the escape \\%c", e);
    return rx_fail(R, msg);
}

static bool parse_class(rx *R) {
    R->p++; /* '[' */
    cset s = {0};
    bool neg = *R->p == '^';
    if (neg) R->p++;
    while (*R->p && *R->p != ']') {
        uint32_t lo;
        if (*R->p == '\\') {
            R->p++;
            if (!escape(R, true, &s, &lo)) return false;
            if (lo == UINT32_MAX) continue; /* \d and the like */
        } else lo = next_cp(R);
        if (R->p[0] == '-' && R->p[1] && R->p[1] != ']') {
            R->p++;
            uint32_t hi;
            if (*R->p == '\\') {
                R->p++;
                if (!escape(R, true, &s, &hi)) return false;
                if (hi == UINT32_MAX) return rx_fail(R, "a class escape as the end of a range");
            } else hi = next_cp(R);
            if (hi < lo) return rx_fail(R, "a range out of order");
            cs_add(&s, lo, hi);
        } else cs_add(&s, lo, lo);
    }
    if (*R->p != ']') return rx_fail(R, "an unterminated class [");
    R->p++;
    if (neg) cs_negate(&s);
    return emit_set(R, &s);
}

static bool parse_alt(rx *R);

/* {m}, {m,} or {m,n}: lo, hi (-1: no upper bound). */
static bool parse_count(rx *R, long *lo, long *hi) {
    const char *p = R->p + 1;
    char *e;
    if (*p < '0' || *p > '9') return rx_fail(R, "a '{' that does not start a count {m}, {m,} or {m,n}");
    *lo = strtol(p, &e, 10);
    *hi = *lo;
    if (*e == ',') {
        p = e + 1;
        if (*p == '}') { *hi = -1; e = (char *)p; }
        else if (*p >= '0' && *p <= '9') *hi = strtol(p, &e, 10);
        else return rx_fail(R, "a malformed count {m,n}");
    }
    if (*e != '}') return rx_fail(R, "a malformed count {m,n}");
    if (*lo > MAX_REPEAT || *hi > MAX_REPEAT) return rx_fail(R, "a count above 10000");
    if (*hi >= 0 && *hi < *lo) return rx_fail(R, "a count {m,n} with n below m");
    R->p = e + 1;
    return true;
}

/* The quantifier after an atom (R->nullable: whether the atom matches ""). An
 * unbounded repeat of such an atom would be a left-recursive grammar rule. */
static bool parse_quant(rx *R) {
    char q = *R->p;
    bool empty_atom = R->nullable;
    if (q == '*' || q == '+' || q == '?') {
        if (empty_atom && q != '?') return rx_fail(R, "a repeated group that can match the empty string");
        g_sb_fmt(R->out, "%c", q);
        R->p++;
        R->nullable |= q != '+';
    } else if (q == '{') {
        long lo = 0, hi = 0;
        if (!parse_count(R, &lo, &hi)) return false;
        if (empty_atom && hi < 0) return rx_fail(R, "a repeated group that can match the empty string");
        R->nullable |= lo == 0;
        if (hi < 0) g_sb_fmt(R->out, "{%ld,}", lo);
        else if (hi == lo) g_sb_fmt(R->out, "{%ld}", lo);
        else g_sb_fmt(R->out, "{%ld,%ld}", lo, hi);
    } else return true;
    if (*R->p == '?') R->p++; /* lazy: the same strings */
    if (*R->p && strchr("*+?{", *R->p)) return rx_fail(R, "a quantifier after a quantifier");
    return true;
}

/* One item: an atom and its quantifier. */
static bool parse_item(rx *R) {
    char c = *R->p;
    R->nullable = false;
    if (c == '(') {
        R->p++;
        if (*R->p == '?') {
            const char *g = R->p + 1;
            if (*g == ':') R->p += 2;
            else if (*g == '=') return rx_fail(R, "the lookahead (?=");
            else if (*g == '!') return rx_fail(R, "the negative lookahead (?!");
            else if (g[0] == '<' && g[1] == '=') return rx_fail(R, "the lookbehind (?<=");
            else if (g[0] == '<' && g[1] == '!') return rx_fail(R, "the negative lookbehind (?<!");
            else if (*g == '<') { /* a named group matches what an unnamed one does */
                const char *e = strchr(g, '>');
                if (!e) return rx_fail(R, "an unterminated group name (?<");
                R->p = e + 1;
            } else return rx_fail(R, "the group modifier (?");
        }
        if (++R->depth > MAX_DEPTH) return rx_fail(R, "groups nested more than 64 deep");
        g_sb_str(R->out, " (");
        if (!parse_alt(R)) return false;
        if (*R->p != ')') return rx_fail(R, "an unterminated group (");
        R->p++;
        R->depth--;
        g_sb_str(R->out, " )"); /* R->nullable: the group's */
    } else if (c == '[') {
        if (!parse_class(R)) return false;
    } else if (c == '.') { /* anything but a line terminator */
        R->p++;
        cset s = {0};
        cs_add(&s, 0x0A, 0x0A);
        cs_add(&s, 0x0D, 0x0D);
        cs_add(&s, 0x2028, 0x2029);
        cs_negate(&s);
        if (!emit_set(R, &s)) return false;
    } else if (c == '\\') {
        R->p++;
        cset s = {0};
        uint32_t cp;
        if (!escape(R, false, &s, &cp)) return false;
        if (cp == UINT32_MAX) { if (!emit_set(R, &s)) return false; }
        else emit_char(R, cp);
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return rx_fail(R, "a quantifier with nothing to repeat");
    } else if (c == ')') {
        return rx_fail(R, "an unbalanced )");
    } else if (c == ']' || c == '}') {
        return rx_fail(R, c == ']' ? "a lone ]" : "a lone }");
    } else {
        emit_char(R, next_cp(R));
    }
    return parse_quant(R);
}

/* A sequence up to '|', ')' or the end. At the top level, ^ may open it
 * and $ close it; elsewhere they are refused. */
static bool parse_seq(rx *R) {
    bool top = R->depth == 0, start = false, end = false;
    g_sb_str(R->out, " (");
    if (top && *R->p == '^') { start = true; R->p++; }
    if (top && !start) g_sb_fmt(R->out, " %s*", R->any);
    size_t mark = R->out->n;
    bool nullable = true;
    while (*R->p && *R->p != '|' && *R->p != ')') {
        if (*R->p == '^') return rx_fail(R, "the anchor ^ inside the pattern (only at the start of an alternative)");
        if (*R->p == '$') {
            if (top && (R->p[1] == 0 || R->p[1] == '|')) { end = true; R->p++; break; }
            return rx_fail(R, "the anchor $ inside the pattern (only at the end of an alternative)");
        }
        if (!parse_item(R)) return false;
        nullable &= R->nullable;
    }
    R->nullable = nullable;
    if (top && !end) g_sb_fmt(R->out, " %s*", R->any);
    if (R->out->n == mark && (!top || end)) g_sb_str(R->out, " \"\"");
    g_sb_str(R->out, " )");
    return true;
}

static bool parse_alt(rx *R) {
    if (!parse_seq(R)) return false;
    bool nullable = R->nullable;
    while (*R->p == '|') {
        R->p++;
        g_sb_str(R->out, " |");
        if (!parse_seq(R)) return false;
        nullable |= R->nullable;
    }
    R->nullable = nullable;
    return true;
}

bool g_regex_gbnf(const char *re, const char *any_char, sbuf *out, char *err, size_t errcap) {
    rx R = {.p = re, .any = any_char, .out = out, .err = err, .errcap = errcap};
    g_sb_str(out, "(");
    if (!parse_alt(&R)) return false;
    if (*R.p == ')') return rx_fail(&R, "an unbalanced )");
    g_sb_str(out, " )");
    return true;
}
