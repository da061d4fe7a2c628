/* value.c - value constructors, containers, Python truthiness/equality/ordering, str()/repr(), json.dumps. */
#include "chat/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

jval jv_str(const char *p) { return jv_strn(p, strlen(p)); }

jval jv_undef(const char *msg) {
    jval v = {.t = JV_UNDEF};
    v.s.p = msg;
    v.s.n = msg ? strlen(msg) : 0;
    return v;
}

jval jv_undeff(jarena *a, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return jv_undef(ja_strndup(a, tmp, strlen(tmp)));
}

jval jv_list(jarena *a, size_t cap) {
    jval v = {.t = JV_LIST};
    v.l = ja_alloc(a, sizeof *v.l);
    if (cap) {
        v.l->v = ja_alloc(a, cap * sizeof(jval));
        v.l->cap = cap;
    }
    return v;
}

jval jv_dict(jarena *a) {
    jval v = {.t = JV_DICT};
    v.m = ja_alloc(a, sizeof *v.m);
    return v;
}

void jl_push(jarena *a, jlist *l, jval v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        l->v = ja_grow(a, l->v, l->cap * sizeof(jval), cap * sizeof(jval));
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

/* ---- dict ------------------------------------------------------------- */

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static uint64_t key_hash(jval k) {
    switch (k.t) {
    case JV_STR: return hash_bytes(k.s.p, k.s.n);
    case JV_BOOL: return (uint64_t)k.b * 0x9E3779B97F4A7C15ull;
    case JV_INT: return (uint64_t)k.i * 0x9E3779B97F4A7C15ull;
    case JV_FLOAT:
        if (k.d == floor(k.d) && fabs(k.d) < 9e18) return (uint64_t)(int64_t)k.d * 0x9E3779B97F4A7C15ull;
        return hash_bytes((const char *)&k.d, sizeof k.d);
    default: return (uint64_t)k.t;
    }
}

static void dict_reindex(jarena *a, jdict *d) {
    size_t cap = 16;
    while (cap < d->n * 2 + 2) cap *= 2;
    d->idx = ja_alloc(a, cap * sizeof *d->idx);
    d->idx_cap = cap;
    for (size_t i = 0; i < d->n; i++) {
        size_t s = key_hash(d->k[i]) & (cap - 1);
        while (d->idx[s]) s = (s + 1) & (cap - 1);
        d->idx[s] = (uint32_t)(i + 1);
    }
}

static long dict_find(const jdict *d, jval key) {
    if (d->idx) {
        size_t s = key_hash(key) & (d->idx_cap - 1);
        while (d->idx[s]) {
            size_t i = d->idx[s] - 1;
            if (jv_eq(d->k[i], key)) return (long)i;
            s = (s + 1) & (d->idx_cap - 1);
        }
        return -1;
    }
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], key)) return (long)i;
    return -1;
}

jval *jd_get(const jdict *d, jval key) {
    long i = dict_find(d, key);
    return i < 0 ? NULL : &d->v[i];
}

jval *jd_get_str(const jdict *d, const char *key) { return jd_get(d, jv_str(key)); }

void jd_set(jarena *a, jdict *d, jval key, jval val) {
    long i = dict_find(d, key);
    if (i >= 0) {
        d->v[i] = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        d->k = ja_grow(a, d->k, d->cap * sizeof(jval), cap * sizeof(jval));
        d->v = ja_grow(a, d->v, d->cap * sizeof(jval), cap * sizeof(jval));
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
    if (d->n >= 8 && d->n * 2 + 2 > d->idx_cap) {
        dict_reindex(a, d);
    } else if (d->idx) {
        size_t s = key_hash(key) & (d->idx_cap - 1);
        while (d->idx[s]) s = (s + 1) & (d->idx_cap - 1);
        d->idx[s] = (uint32_t)d->n;
    }
}

/* ---- Python semantics --------------------------------------------------- */

bool jv_truthy(jval v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.d != 0;
    case JV_STR: return v.s.n > 0;
    case JV_LIST: return v.l->n > 0;
    case JV_DICT: return v.m->n > 0;
    default: return true;
    }
}

bool jv_is_num(jval v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }

double jv_num(jval v) {
    return v.t == JV_FLOAT ? v.d : v.t == JV_INT ? (double)v.i : v.t == JV_BOOL ? (double)v.b : 0;
}

static bool is_intlike(jval v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int64_t intval(jval v) { return v.t == JV_INT ? v.i : (int64_t)v.b; }

bool jv_eq(jval a, jval b) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) return intval(a) == intval(b);
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    case JV_LIST:
        /* list == tuple is False in Python */
        if ((a.f == JL_TUPLE) != (b.f == JL_TUPLE) || a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_eq(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.m->n != b.m->n) return false;
        for (size_t i = 0; i < a.m->n; i++) {
            jval *o = jd_get(b.m, a.m->k[i]);
            if (!o || !jv_eq(a.m->v[i], *o)) return false;
        }
        return true;
    case JV_NS: return a.m == b.m;
    case JV_GEN: return a.g == b.g;
    case JV_FUNC: return a.fn == b.fn;
    case JV_LOOP: return a.lp == b.lp;
    default: return false;
    }
}

int jv_cmp(jval a, jval b, bool *ok) {
    *ok = true;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) return (intval(a) > intval(b)) - (intval(a) < intval(b));
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = memcmp(a.s.p, b.s.p, n);
        if (c) return c < 0 ? -1 : 1;
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && (a.f == JL_TUPLE) == (b.f == JL_TUPLE) && a.f <= JL_TUPLE) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.l->v[i], b.l->v[i])) continue;
            return jv_cmp(a.l->v[i], b.l->v[i], ok);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    *ok = false;
    return 0;
}

const char *jv_type_name(jval v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.f & JF_MARKUP ? "Markup" : "str";
    case JV_LIST:
        switch ((jlist_kind)v.f) {
        case JL_TUPLE: return "tuple";
        case JL_ITEMS: return "dict_items";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        default: return "list";
        }
    case JV_DICT: return "dict";
    case JV_GEN: return "generator";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

const char *jv_object_repr(jval v) {
    switch (v.t) {
    case JV_NONE: return "None";
    case JV_BOOL: return "bool object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_STR: return v.f & JF_MARKUP ? "markupsafe.Markup object" : "str object";
    case JV_LIST: return v.f == JL_TUPLE ? "tuple object" : v.f == JL_LIST ? "list object" : "dict view object";
    case JV_DICT: return "dict object";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_GEN: return "generator object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    default: return "object";
    }
}

/* ---- UTF-8 ------------------------------------------------------------- */

size_t u8_decode(const char *s, size_t n, size_t i, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s + i;
    size_t left = n - i;
    unsigned c = u[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > left) goto bad;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    uint32_t v = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (u[k] & 0x3F);
    }
    *cp = v;
    return len;
bad:
    *cp = c; /* a stray byte stands for itself */
    return 1;
}

size_t u8_len(const char *s, size_t n) {
    size_t k = 0;
    uint32_t cp;
    for (size_t i = 0; i < n; k++) i += u8_decode(s, n, i, &cp);
    return k;
}

size_t u8_offset(const char *s, size_t n, size_t k) {
    size_t i = 0;
    uint32_t cp;
    while (k-- && i < n) i += u8_decode(s, n, i, &cp);
    return i;
}

bool u8_is_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- str() and repr() -------------------------------------------------- */

void fmt_float(double d, char out[40]) {
    if (isnan(d)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(d)) {
        strcpy(out, d < 0 ? "-inf" : "inf");
        return;
    }
    /* Shortest digits that read back as the same double, then Python's layout:
     * positional for exponents in [-4, 16), scientific otherwise. */
    char tmp[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = tmp;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int e = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = out;
    if (neg) *o++ = '-';
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) *o++ = (size_t)i < nd ? digits[i] : '0';
            *o++ = '.';
            if ((size_t)e + 1 < nd)
                for (size_t i = (size_t)e + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -e - 1; i++) *o++ = '0';
            for (size_t i = 0; i < nd; i++) *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (size_t i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

static bool py_printable(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7f) return false;
    if (cp < 0x7f) return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return false;
    default: return true;
    }
}

static void repr_str(jsb *b, const char *s, size_t n) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char quote = sq && !dq ? '"' : '\'';
    sb_putc(b, quote);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = u8_decode(s, n, i, &cp);
        if (cp == (uint32_t)quote || cp == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)cp);
        } else if (cp == '\t') sb_puts(b, "\\t");
        else if (cp == '\n') sb_puts(b, "\\n");
        else if (cp == '\r') sb_puts(b, "\\r");
        else if (py_printable(cp)) sb_put(b, s + i, len);
        else if (cp <= 0xff) sb_printf(b, "\\x%02x", cp);
        else if (cp <= 0xffff) sb_printf(b, "\\u%04x", cp);
        else sb_printf(b, "\\U%08x", cp);
        i += len;
    }
    sb_putc(b, quote);
}

static void seq_append(jsb *b, jval v, const char *open, const char *close) {
    sb_puts(b, open);
    for (size_t i = 0; i < v.l->n; i++) {
        if (i) sb_puts(b, ", ");
        jv_repr_append(b, v.l->v[i]);
    }
    if (v.f == JL_TUPLE && v.l->n == 1) sb_putc(b, ',');
    sb_puts(b, close);
}

static void dict_append(jsb *b, const jdict *m) {
    sb_putc(b, '{');
    for (size_t i = 0; i < m->n; i++) {
        if (i) sb_puts(b, ", ");
        jv_repr_append(b, m->k[i]);
        sb_puts(b, ": ");
        jv_repr_append(b, m->v[i]);
    }
    sb_putc(b, '}');
}

void jv_repr_append(jsb *b, jval v) {
    switch (v.t) {
    case JV_UNDEF: sb_puts(b, "Undefined"); return;
    case JV_STR:
        if (v.f & JF_MARKUP) {
            sb_puts(b, "Markup(");
            repr_str(b, v.s.p, v.s.n);
            sb_putc(b, ')');
        } else {
            repr_str(b, v.s.p, v.s.n);
        }
        return;
    default: jv_str_append(b, v);
    }
}

void jv_str_append(jsb *b, jval v) {
    char num[40];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: sb_puts(b, "None"); return;
    case JV_BOOL: sb_puts(b, v.b ? "True" : "False"); return;
    case JV_INT: sb_printf(b, "%lld", (long long)v.i); return;
    case JV_FLOAT: fmt_float(v.d, num); sb_puts(b, num); return;
    case JV_STR: sb_put(b, v.s.p, v.s.n); return;
    case JV_LIST:
        switch ((jlist_kind)v.f) {
        case JL_TUPLE: seq_append(b, v, "(", ")"); return;
        case JL_ITEMS: seq_append(b, v, "dict_items([", "])"); return;
        case JL_KEYS: seq_append(b, v, "dict_keys([", "])"); return;
        case JL_VALUES: seq_append(b, v, "dict_values([", "])"); return;
        default: seq_append(b, v, "[", "]"); return;
        }
    case JV_DICT: dict_append(b, v.m); return;
    case JV_NS:
        sb_puts(b, "<Namespace ");
        dict_append(b, v.m);
        sb_putc(b, '>');
        return;
    case JV_GEN: sb_printf(b, "<generator object %s>", v.g->origin ? v.g->origin : "<genexpr>"); return;
    case JV_FUNC: sb_puts(b, "<function>"); return;
    case JV_LOOP: sb_puts(b, "<LoopContext>"); return;
    }
}

jval jv_to_str(jarena *a, jval v) {
    if (v.t == JV_STR) {
        v.f = 0;
        return v;
    }
    jsb b;
    sb_init(&b, a);
    jv_str_append(&b, v);
    return jv_strn(b.p ? b.p : "", b.n);
}

/* ---- json.dumps -------------------------------------------------------- */

static void json_str(jsb *b, const char *s, size_t n, bool ascii) {
    sb_putc(b, '"');
    size_t run = 0; /* bytes copied verbatim are batched */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[16];
        size_t len = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        } else if (c >= 0x80 && ascii) {
            uint32_t cp;
            len = u8_decode(s, n, i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(u, sizeof u, "\\u%04x", cp);
            }
            esc = u;
        }
        if (esc) {
            sb_put(b, s + i - run, run);
            run = 0;
            sb_puts(b, esc);
            i += len;
        } else {
            run++;
            i++;
        }
    }
    sb_put(b, s + n - run, run);
    sb_putc(b, '"');
}

static void json_newline(jsb *b, const jjson_opts *o, int level) {
    sb_putc(b, '\n');
    for (int i = 0; i < level; i++) {
        if (o->indent_str) sb_puts(b, o->indent_str);
        else
            for (int k = 0; k < o->indent; k++) sb_putc(b, ' ');
    }
}

static bool json_key(jsb *b, jval k, const jjson_opts *o, const char **bad) {
    char num[40];
    switch (k.t) {
    case JV_STR: json_str(b, k.s.p, k.s.n, o->ensure_ascii); return true;
    case JV_BOOL: sb_puts(b, k.b ? "\"true\"" : "\"false\""); return true;
    case JV_NONE: sb_puts(b, "\"null\""); return true;
    case JV_INT: sb_printf(b, "\"%lld\"", (long long)k.i); return true;
    case JV_FLOAT: fmt_float(k.d, num); sb_printf(b, "\"%s\"", num); return true;
    default: *bad = "keys must be str, int, float, bool or None"; return false;
    }
}

static int cmp_keys(const void *x, const void *y) {
    const jval *a = *(const jval *const *)x, *b = *(const jval *const *)y;
    bool ok;
    return jv_cmp(*a, *b, &ok);
}

bool jv_tojson(jsb *b, jval v, const jjson_opts *o, const char **bad, int depth) {
    char num[40];
    if (depth > 200) {
        *bad = "nesting too deep";
        return false;
    }
    bool pretty = o->indent >= 0 || o->indent_str;
    switch (v.t) {
    case JV_NONE: sb_puts(b, "null"); return true;
    case JV_BOOL: sb_puts(b, v.b ? "true" : "false"); return true;
    case JV_INT: sb_printf(b, "%lld", (long long)v.i); return true;
    case JV_FLOAT:
        if (isnan(v.d)) sb_puts(b, "NaN");
        else if (isinf(v.d)) sb_puts(b, v.d < 0 ? "-Infinity" : "Infinity");
        else {
            fmt_float(v.d, num);
            sb_puts(b, num);
        }
        return true;
    case JV_STR: json_str(b, v.s.p, v.s.n, o->ensure_ascii); return true;
    case JV_LIST:
        if (v.f > JL_TUPLE) break;
        if (!v.l->n) {
            sb_puts(b, "[]");
            return true;
        }
        sb_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) sb_puts(b, o->item_sep);
            if (pretty) json_newline(b, o, depth + 1);
            if (!jv_tojson(b, v.l->v[i], o, bad, depth + 1)) return false;
        }
        if (pretty) json_newline(b, o, depth);
        sb_putc(b, ']');
        return true;
    case JV_DICT: {
        const jdict *m = v.m;
        if (!m->n) {
            sb_puts(b, "{}");
            return true;
        }
        /* order of entries: input order, or sorted by key */
        const jval **order = ja_alloc(b->a, m->n * sizeof *order);
        for (size_t i = 0; i < m->n; i++) order[i] = &m->k[i];
        if (o->sort_keys) {
            for (size_t i = 1; i < m->n; i++) {
                bool ok;
                jv_cmp(m->k[0], m->k[i], &ok);
                if (!ok) {
                    *bad = "'<' not supported between the dict's keys";
                    return false;
                }
            }
            qsort(order, m->n, sizeof *order, cmp_keys);
        }
        sb_putc(b, '{');
        for (size_t i = 0; i < m->n; i++) {
            size_t e = (size_t)(order[i] - m->k);
            if (i) sb_puts(b, o->item_sep);
            if (pretty) json_newline(b, o, depth + 1);
            if (!json_key(b, m->k[e], o, bad)) return false;
            sb_puts(b, o->key_sep);
            if (!jv_tojson(b, m->v[e], o, bad, depth + 1)) return false;
        }
        if (pretty) json_newline(b, o, depth);
        sb_putc(b, '}');
        return true;
    }
    default: break;
    }
    *bad = jv_type_name(v);
    return false;
}
