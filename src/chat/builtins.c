/* builtins.c - Jinja's filters and tests, the Python methods templates call, and the
 * globals transformers provides (range, namespace, raise_exception, strftime_now). */
#include "chat/pystr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- argument binding ---------------------------------------------------- */

/* Binds positional then keyword arguments to `names` (NULL-terminated).
 * Returns a bitmask of the parameters given. */
static unsigned bind(jctx *c, const char *fname, jargs *a, const char *const *names, jval *out) {
    size_t np = 0;
    while (names[np]) np++;
    if (a->npos > np) jerr(c, "TypeError", "%s() takes at most %zu argument(s) (%zu given)", fname, np, a->npos);
    unsigned given = 0;
    for (size_t i = 0; i < a->npos; i++) {
        out[i] = a->pos[i];
        given |= 1u << i;
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && strcmp(names[i], a->kwn[k])) i++;
        if (i == np) jerr(c, "TypeError", "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]);
        if (given & (1u << i)) jerr(c, "TypeError", "%s() got multiple values for argument '%s'", fname, names[i]);
        out[i] = a->kwv[k];
        given |= 1u << i;
    }
    return given;
}

#define BIND(fname, ...)                                                  \
    static const char *const names_[] = {__VA_ARGS__, NULL};              \
    jval arg[sizeof names_ / sizeof names_[0]];                           \
    memset(arg, 0, sizeof arg);                                           \
    unsigned given = bind(c, fname, a, names_, arg);                      \
    (void)given
#define GIVEN(i) (given & (1u << (i)))

static void no_args(jctx *c, const char *fname, jargs *a) {
    if (a->npos || a->nkw) jerr(c, "TypeError", "%s() takes no arguments", fname);
}

static int64_t want_int(jctx *c, jval v, const char *what) {
    if (v.t == JV_INT) return v.i;
    if (v.t == JV_BOOL) return v.b;
    jerr(c, "TypeError", "%s must be an integer, not %s", what, jv_type_name(v));
}

static jval want_str(jctx *c, jval v, const char *what) {
    if (v.t != JV_STR) jerr(c, "TypeError", "%s must be str, not %s", what, jv_type_name(v));
    return v;
}

static jval mkgen(jctx *c, jlist *items, const char *origin) {
    jval g = {.t = JV_GEN};
    g.g = ja_alloc(c->a, sizeof *g.g);
    g.g->items = items;
    g.g->origin = origin;
    return g;
}

static jval list_of(jctx *c, jlist *l) {
    jval r = jv_list(c->a, l->n);
    if (l->n) memcpy(r.l->v, l->v, l->n * sizeof(jval));
    r.l->n = l->n;
    return r;
}

static jval tuple2(jctx *c, jval a, jval b) {
    jval t = jv_list(c->a, 2);
    t.f = JL_TUPLE;
    t.l->v[0] = a;
    t.l->v[1] = b;
    t.l->n = 2;
    return t;
}

static jval undef_to_empty(jval v) { return v.t == JV_UNDEF ? jv_str("") : v; }

/* len() as Python computes it; Undefined has length 0 */
static int64_t py_len(jctx *c, jval v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)u8_len(v.s.p, v.s.n);
    case JV_LIST: return (int64_t)v.l->n;
    case JV_DICT: return (int64_t)v.m->n;
    default: jerr(c, "TypeError", "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* Jinja's attribute getter for map/sort/selectattr: "a.b.0" walks items */
static jval get_path(jctx *c, jval item, jval attr) {
    if (attr.t != JV_STR) return jgetitem(c, item, attr);
    const char *p = attr.s.p, *e = p + attr.s.n;
    for (;;) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        const char *pe = dot ? dot : e;
        jval key = jv_strn(p, (size_t)(pe - p));
        bool digits = pe > p;
        for (const char *q = p; q < pe; q++) digits &= *q >= '0' && *q <= '9';
        if (digits) key = jv_int(strtoll(p, NULL, 10));
        item = jgetitem(c, item, key);
        if (!dot) return item;
        p = dot + 1;
    }
}

/* ---- sorting (stable, Python ordering) ---------------------------------- */

typedef struct sort_ent {
    jval key, val;
} sort_ent;

static int ent_cmp(jctx *c, const sort_ent *x, const sort_ent *y) {
    bool ok;
    int r = jv_cmp(x->key, y->key, &ok);
    if (!ok) jerr(c, "TypeError", "'<' not supported between instances of '%s' and '%s'", jv_type_name(x->key), jv_type_name(y->key));
    return r;
}

static void merge_sort(jctx *c, sort_ent *v, sort_ent *tmp, size_t n, bool reverse) {
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(c, v, tmp, h, reverse);
    merge_sort(c, v + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = ent_cmp(c, &v[j], &v[i]);
        /* take from the right only when strictly before: keeps stability */
        if (reverse ? r > 0 : r < 0) tmp[k++] = v[j++];
        else tmp[k++] = v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static jval sort_key(jctx *c, jval v, bool case_sensitive) {
    if (!case_sensitive && v.t == JV_STR) return py_case(c, v, 'l');
    return v;
}

/* ---- filters ------------------------------------------------------------- */

static jval f_tojson(jctx *c, jval v, jargs *a) {
    BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
    jjson_opts o = {.indent = -1, .item_sep = ", ", .key_sep = ": "};
    o.ensure_ascii = GIVEN(0) && jv_truthy(arg[0]);
    if (GIVEN(1) && arg[1].t != JV_NONE) {
        if (arg[1].t == JV_STR) o.indent_str = ja_strndup(c->a, arg[1].s.p, arg[1].s.n), o.indent = 0;
        else {
            int64_t n = want_int(c, arg[1], "indent");
            o.indent = n < 0 ? 0 : n > 100 ? 100 : (int)n;
        }
        o.item_sep = ",";
    }
    if (GIVEN(2) && arg[2].t != JV_NONE) {
        jlist *s = jiter(c, arg[2]);
        if (s->n != 2 || s->v[0].t != JV_STR || s->v[1].t != JV_STR) jerr(c, "ValueError", "separators must be a pair of strings");
        o.item_sep = ja_strndup(c->a, s->v[0].s.p, s->v[0].s.n);
        o.key_sep = ja_strndup(c->a, s->v[1].s.p, s->v[1].s.n);
    }
    o.sort_keys = GIVEN(3) && jv_truthy(arg[3]);
    jsb b;
    sb_init(&b, c->a);
    const char *bad = NULL;
    if (!jv_tojson(&b, v, &o, &bad, 0)) {
        if (!strcmp(bad, "nesting too deep")) jerr(c, "LimitError", "tojson: value nested too deeply");
        if (strchr(bad, ' ')) jerr(c, "TypeError", "%s", bad);
        jerr(c, "TypeError", "Object of type %s is not JSON serializable", bad);
    }
    return jv_strn(b.p ? b.p : "", b.n);
}

static jval f_length(jctx *c, jval v, jargs *a) {
    no_args(c, "length", a);
    return jv_int(py_len(c, v));
}

static jval f_trim(jctx *c, jval v, jargs *a) {
    BIND("trim", "chars");
    v = jstr_val(c, v.t == JV_STR ? v : undef_to_empty(v));
    return py_strip(c, v, GIVEN(0) ? &arg[0] : NULL, 'b');
}

static jval f_string(jctx *c, jval v, jargs *a) {
    no_args(c, "string", a);
    if (v.t == JV_STR) return v; /* keeps Markup, like soft_str */
    return jstr_val(c, v);
}

static jval f_default(jctx *c, jval v, jargs *a) {
    BIND("default", "default_value", "boolean");
    jval d = GIVEN(0) ? arg[0] : jv_str("");
    if (v.t == JV_UNDEF || (GIVEN(1) && jv_truthy(arg[1]) && !jv_truthy(v))) return d;
    return v;
}

static jval f_join(jctx *c, jval v, jargs *a) {
    BIND("join", "d", "attribute");
    jlist *l = jiter(c, v);
    jsb b;
    sb_init(&b, c->a);
    jval sep = GIVEN(0) ? jstr_val(c, arg[0]) : jv_str("");
    for (size_t i = 0; i < l->n; i++) {
        if (i) sb_put(&b, sep.s.p, sep.s.n);
        jval x = GIVEN(1) && arg[1].t != JV_NONE ? get_path(c, l->v[i], arg[1]) : l->v[i];
        jv_str_append(&b, x);
    }
    return jv_strn(b.p ? b.p : "", b.n);
}

static jval f_items(jctx *c, jval v, jargs *a) {
    no_args(c, "items", a);
    jlist *out = jv_list(c->a, 0).l;
    if (v.t == JV_UNDEF) return mkgen(c, out, "do_items");
    if (v.t != JV_DICT) {
        /* a generator: the error surfaces only when it is iterated */
        jval g = mkgen(c, out, "do_items");
        g.g->err = "Can only get item pairs from a mapping.";
        return g;
    }
    for (size_t i = 0; i < v.m->n; i++) jl_push(c->a, out, tuple2(c, v.m->k[i], v.m->v[i]));
    return mkgen(c, out, "do_items");
}

static jval f_list(jctx *c, jval v, jargs *a) {
    no_args(c, "list", a);
    return list_of(c, jiter(c, v));
}

static jval f_first(jctx *c, jval v, jargs *a) {
    no_args(c, "first", a);
    if (v.t == JV_GEN) {
        if (v.g->err) jerr(c, "TypeError", "%s", v.g->err);
        if (v.g->pos >= v.g->items->n) return jv_undef("No first item, sequence was empty.");
        return v.g->items->v[v.g->pos++];
    }
    jlist *l = jiter(c, v);
    return l->n ? l->v[0] : jv_undef("No first item, sequence was empty.");
}

static jval f_last(jctx *c, jval v, jargs *a) {
    no_args(c, "last", a);
    if (v.t == JV_GEN) jerr(c, "TypeError", "'generator' object is not reversible");
    jlist *l = jiter(c, v);
    return l->n ? l->v[l->n - 1] : jv_undef("No last item, sequence was empty.");
}

static jval f_upper(jctx *c, jval v, jargs *a) {
    no_args(c, "upper", a);
    return py_case(c, jstr_val(c, v), 'u');
}
static jval f_lower(jctx *c, jval v, jargs *a) {
    no_args(c, "lower", a);
    return py_case(c, jstr_val(c, v), 'l');
}
static jval f_capitalize(jctx *c, jval v, jargs *a) {
    no_args(c, "capitalize", a);
    return py_case(c, jstr_val(c, v), 'c');
}
static jval f_title(jctx *c, jval v, jargs *a) {
    no_args(c, "title", a);
    return py_case(c, jstr_val(c, v), 'j');
}

static jval f_replace(jctx *c, jval v, jargs *a) {
    BIND("replace", "old", "new", "count");
    if (!GIVEN(0) || !GIVEN(1)) jerr(c, "TypeError", "replace() needs 'old' and 'new'");
    int64_t count = GIVEN(2) && arg[2].t != JV_NONE ? want_int(c, arg[2], "count") : -1;
    jval s = v.t == JV_STR ? v : jstr_val(c, v);
    jval old = jstr_val(c, arg[0]), rep = jstr_val(c, arg[1]);
    if (s.f & JF_MARKUP) {
        old = jescape(c, old);
        rep = jescape(c, rep);
    }
    return py_replace(c, s, old, rep, count);
}

static jval f_safe(jctx *c, jval v, jargs *a) {
    no_args(c, "safe", a);
    jval s = jstr_val(c, v);
    s.f = JF_MARKUP;
    return s;
}

static jval f_escape(jctx *c, jval v, jargs *a) {
    no_args(c, "escape", a);
    return jescape(c, v);
}

static jval f_forceescape(jctx *c, jval v, jargs *a) {
    no_args(c, "forceescape", a);
    jval s = jstr_val(c, v);
    s.f = 0;
    return jescape(c, s);
}

static jval f_int(jctx *c, jval v, jargs *a) {
    BIND("int", "default", "base");
    jval dflt = GIVEN(0) ? arg[0] : jv_int(0);
    int base = GIVEN(1) ? (int)want_int(c, arg[1], "base") : 10;
    if (v.t == JV_INT) return v;
    if (v.t == JV_BOOL) return jv_int(v.b);
    if (v.t == JV_FLOAT) return isfinite(v.d) && fabs(v.d) < 9.2e18 ? jv_int((int64_t)v.d) : dflt;
    if (v.t == JV_STR) {
        char buf[64];
        size_t m = 0;
        for (size_t i = 0; i < v.s.n && m < sizeof buf - 1; i++)
            if (v.s.p[i] != '_') buf[m++] = v.s.p[i];
        buf[m] = 0;
        char *e;
        long long x = strtoll(buf, &e, base);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (m && !*e && e != buf) return jv_int(x);
        double d = strtod(buf, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (m && !*e && e != buf && isfinite(d)) return jv_int((int64_t)d);
    }
    return dflt;
}

static jval f_float(jctx *c, jval v, jargs *a) {
    BIND("float", "default");
    jval dflt = GIVEN(0) ? arg[0] : jv_float(0);
    if (jv_is_num(v)) return jv_float(jv_num(v));
    if (v.t == JV_STR) {
        char buf[128];
        size_t m = v.s.n < sizeof buf - 1 ? v.s.n : sizeof buf - 1;
        memcpy(buf, v.s.p, m);
        buf[m] = 0;
        char *e;
        double d = strtod(buf, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (m && !*e && e != buf) return jv_float(d);
    }
    return dflt;
}

static jval f_abs(jctx *c, jval v, jargs *a) {
    no_args(c, "abs", a);
    if (v.t == JV_INT) {
        if (v.i == INT64_MIN) jerr(c, "OverflowError", "abs() overflows");
        return jv_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.t == JV_BOOL) return jv_int(v.b);
    if (v.t == JV_FLOAT) return jv_float(fabs(v.d));
    jerr(c, "TypeError", "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jval f_round(jctx *c, jval v, jargs *a) {
    BIND("round", "precision", "method");
    int64_t prec = GIVEN(0) ? want_int(c, arg[0], "precision") : 0;
    if (prec > 300 || prec < -300) prec = prec > 0 ? 300 : -300;
    const char *method = GIVEN(1) ? ja_strndup(c->a, want_str(c, arg[1], "method").s.p, arg[1].s.n) : "common";
    if (!jv_is_num(v)) jerr(c, "TypeError", "type %s doesn't define __round__ method", jv_type_name(v));
    if (v.t != JV_FLOAT && !strcmp(method, "common")) {
        /* round(int, n) stays an int in Python (half to even below the units) */
        int64_t x = v.t == JV_INT ? v.i : v.b;
        if (prec >= 0) return jv_int(x);
        int64_t p = 1;
        for (int64_t k = 0; k < -prec && p <= INT64_MAX / 10; k++) p *= 10;
        int64_t q = x / p, r = x % p;
        if (r < 0) {
            r += p;
            q--;
        }
        if (2 * r > p || (2 * r == p && (q & 1))) q++;
        return jv_int(q * p);
    }
    double x = jv_num(v);
    if (!strcmp(method, "common")) {
        if (prec >= 0) {
            /* correctly rounded decimal conversion = Python's round() */
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            return jv_float(strtod(buf, NULL));
        }
        double p = pow(10, (double)-prec);
        return jv_float(nearbyint(x / p) * p);
    }
    double p = pow(10, (double)prec);
    if (!strcmp(method, "floor")) return jv_float(floor(x * p) / p);
    if (!strcmp(method, "ceil")) return jv_float(ceil(x * p) / p);
    jerr(c, "FilterArgumentError", "method must be common, ceil or floor");
}

static jval f_reverse(jctx *c, jval v, jargs *a) {
    no_args(c, "reverse", a);
    if (v.t == JV_STR) {
        jlist *ch = jiter(c, v);
        jsb b;
        sb_init(&b, c->a);
        for (size_t i = ch->n; i-- > 0;) sb_put(&b, ch->v[i].s.p, ch->v[i].s.n);
        return jv_strn(b.p ? b.p : "", b.n);
    }
    jlist *l = jiter(c, v);
    jlist *r = jv_list(c->a, l->n).l;
    for (size_t i = 0; i < l->n; i++) r->v[i] = l->v[l->n - 1 - i];
    r->n = l->n;
    /* reversed() of a sequence is a lazy iterator; of a generator, a list */
    if (v.t == JV_GEN) return list_of(c, r);
    return mkgen(c, r, "reversed");
}

static jlist *sorted(jctx *c, jlist *l, bool reverse, bool case_sensitive, const jval *attr, int by_items) {
    sort_ent *e = ja_alloc(c->a, (l->n + 1) * sizeof *e), *tmp = ja_alloc(c->a, (l->n + 1) * sizeof *e);
    for (size_t i = 0; i < l->n; i++) {
        jval k = l->v[i];
        if (by_items >= 0) k = k.l->v[by_items];
        else if (attr && attr->t != JV_NONE) k = get_path(c, k, *attr);
        e[i].key = sort_key(c, k, case_sensitive);
        e[i].val = l->v[i];
    }
    merge_sort(c, e, tmp, l->n, reverse);
    jlist *r = jv_list(c->a, l->n).l;
    for (size_t i = 0; i < l->n; i++) r->v[i] = e[i].val;
    r->n = l->n;
    return r;
}

static jval f_sort(jctx *c, jval v, jargs *a) {
    BIND("sort", "reverse", "case_sensitive", "attribute");
    jlist *r = sorted(c, jiter(c, v), GIVEN(0) && jv_truthy(arg[0]), GIVEN(1) && jv_truthy(arg[1]), GIVEN(2) ? &arg[2] : NULL, -1);
    jval out = jv_list(c->a, 0);
    out.l = r;
    return out;
}

static jval f_dictsort(jctx *c, jval v, jargs *a) {
    BIND("dictsort", "case_sensitive", "by", "reverse");
    if (v.t != JV_DICT) jerr(c, "TypeError", "dictsort needs a mapping, not %s", jv_type_name(v));
    int by = 0;
    if (GIVEN(1)) {
        jval b = want_str(c, arg[1], "by");
        if (b.s.n == 5 && !memcmp(b.s.p, "value", 5)) by = 1;
        else if (!(b.s.n == 3 && !memcmp(b.s.p, "key", 3))) jerr(c, "FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    }
    jlist *items = jv_list(c->a, v.m->n).l;
    for (size_t i = 0; i < v.m->n; i++) items->v[i] = tuple2(c, v.m->k[i], v.m->v[i]);
    items->n = v.m->n;
    jval out = jv_list(c->a, 0);
    out.l = sorted(c, items, GIVEN(2) && jv_truthy(arg[2]), GIVEN(0) && jv_truthy(arg[0]), NULL, by);
    return out;
}

static jval f_unique(jctx *c, jval v, jargs *a) {
    BIND("unique", "case_sensitive", "attribute");
    jlist *l = jiter(c, v), *r = jv_list(c->a, 0).l, *seen = jv_list(c->a, 0).l;
    bool cs = GIVEN(0) && jv_truthy(arg[0]);
    for (size_t i = 0; i < l->n; i++) {
        jval k = GIVEN(1) && arg[1].t != JV_NONE ? get_path(c, l->v[i], arg[1]) : l->v[i];
        k = sort_key(c, k, cs);
        if (k.t == JV_DICT || (k.t == JV_LIST && k.f != JL_TUPLE) || k.t == JV_NS)
            jerr(c, "TypeError", "unhashable type: '%s'", jv_type_name(k));
        bool dup = false;
        for (size_t j = 0; j < seen->n && !dup; j++) dup = jv_eq(seen->v[j], k);
        if (dup) continue;
        jstep(c);
        jl_push(c->a, seen, k);
        jl_push(c->a, r, l->v[i]);
    }
    return mkgen(c, r, "do_unique");
}

static jval minmax(jctx *c, jval v, jargs *a, bool want_max) {
    BIND(want_max ? "max" : "min", "case_sensitive", "attribute");
    jlist *l = jiter(c, v);
    if (!l->n) return jv_undef("No aggregated item, sequence was empty.");
    bool cs = GIVEN(0) && jv_truthy(arg[0]);
    size_t best = 0;
    jval bk = {0};
    for (size_t i = 0; i < l->n; i++) {
        jval k = GIVEN(1) && arg[1].t != JV_NONE ? get_path(c, l->v[i], arg[1]) : l->v[i];
        k = sort_key(c, k, cs);
        if (i == 0) {
            bk = k;
            continue;
        }
        sort_ent x = {k, l->v[i]}, y = {bk, l->v[best]};
        int r = ent_cmp(c, &x, &y);
        if (want_max ? r > 0 : r < 0) {
            best = i;
            bk = k;
        }
    }
    return l->v[best];
}
static jval f_min(jctx *c, jval v, jargs *a) { return minmax(c, v, a, false); }
static jval f_max(jctx *c, jval v, jargs *a) { return minmax(c, v, a, true); }

static jval f_sum(jctx *c, jval v, jargs *a) {
    BIND("sum", "attribute", "start");
    jlist *l = jiter(c, v);
    jval acc = GIVEN(1) ? arg[1] : jv_int(0);
    for (size_t i = 0; i < l->n; i++) {
        jval x = GIVEN(0) && arg[0].t != JV_NONE ? get_path(c, l->v[i], arg[0]) : l->v[i];
        if (!jv_is_num(acc) || !jv_is_num(x)) jerr(c, "TypeError", "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
        if (acc.t == JV_FLOAT || x.t == JV_FLOAT) acc = jv_float(jv_num(acc) + jv_num(x));
        else acc = jv_int((int64_t)jv_num(acc) + (int64_t)jv_num(x));
    }
    return acc;
}

/* map / select / reject / selectattr / rejectattr produce generators */
static jval call_named(jctx *c, bool test, jval name, jval v, jargs *rest) {
    if (name.t != JV_STR) jerr(c, "TypeError", "%s name must be a string", test ? "test" : "filter");
    const char *nm = ja_strndup(c->a, name.s.p, name.s.n);
    bool known = false;
    const jbuiltin *b = test ? jtest_find(nm, &known) : jfilter_find(nm, &known);
    if (!b) {
        if (known) jerr(c, "UnsupportedError", "%s '%s' is not supported by minfer", test ? "test" : "filter", nm);
        jerr(c, "TemplateRuntimeError", "No %s named '%s'.", test ? "test" : "filter", nm);
    }
    return b->fn(c, v, rest);
}

static jargs args_from(jargs *a, size_t skip) {
    jargs r = *a;
    r.pos += skip;
    r.npos -= skip;
    r.nkw = 0;
    return r;
}

static jval f_map(jctx *c, jval v, jargs *a) {
    /* Jinja's map/select/reject iterate only a truthy value: none|map(...) is empty */
    jlist *l = jv_truthy(v) ? jiter(c, v) : jv_list(c->a, 0).l, *r = jv_list(c->a, l->n).l;
    jval attr = {0}, dflt = {0};
    bool by_attr = false, has_dflt = false;
    for (size_t k = 0; k < a->nkw; k++) {
        if (!strcmp(a->kwn[k], "attribute")) attr = a->kwv[k], by_attr = true;
        else if (!strcmp(a->kwn[k], "default")) dflt = a->kwv[k], has_dflt = true;
        else jerr(c, "TypeError", "map() got an unexpected keyword argument '%s'", a->kwn[k]);
    }
    if (!by_attr && !a->npos) jerr(c, "TypeError", "map() needs a filter name or attribute=");
    jargs rest = args_from(a, by_attr ? 0 : 1);
    for (size_t i = 0; i < l->n; i++) {
        jstep(c);
        jval x;
        if (by_attr) {
            x = get_path(c, l->v[i], attr);
            if (has_dflt && x.t == JV_UNDEF) x = dflt;
        } else {
            x = call_named(c, false, a->pos[0], l->v[i], &rest);
        }
        r->v[r->n++] = x;
    }
    return mkgen(c, r, "sync_do_map");
}

static jval select_impl(jctx *c, jval v, jargs *a, bool by_attr, bool keep) {
    if (a->nkw) jerr(c, "TypeError", "select/reject take no keyword arguments");
    if (by_attr && !a->npos) jerr(c, "TypeError", "selectattr/rejectattr need an attribute name");
    jlist *l = jv_truthy(v) ? jiter(c, v) : jv_list(c->a, 0).l, *r = jv_list(c->a, 0).l;
    size_t ti = by_attr ? 1 : 0;
    jargs rest = args_from(a, ti + 1);
    for (size_t i = 0; i < l->n; i++) {
        jstep(c);
        jval x = by_attr ? get_path(c, l->v[i], a->pos[0]) : l->v[i];
        bool ok = a->npos > ti ? jv_truthy(call_named(c, true, a->pos[ti], x, &rest)) : jv_truthy(x);
        if (ok == keep) jl_push(c->a, r, l->v[i]);
    }
    return mkgen(c, r, "select_or_reject");
}
static jval f_select(jctx *c, jval v, jargs *a) { return select_impl(c, v, a, false, true); }
static jval f_reject(jctx *c, jval v, jargs *a) { return select_impl(c, v, a, false, false); }
static jval f_selectattr(jctx *c, jval v, jargs *a) { return select_impl(c, v, a, true, true); }
static jval f_rejectattr(jctx *c, jval v, jargs *a) { return select_impl(c, v, a, true, false); }

static jval f_attr(jctx *c, jval v, jargs *a) {
    BIND("attr", "name");
    jval n = want_str(c, arg[0], "name");
    return jgetattr(c, v, ja_strndup(c->a, n.s.p, n.s.n));
}

static jval f_indent(jctx *c, jval v, jargs *a) {
    BIND("indent", "width", "first", "blank");
    jval ind;
    if (GIVEN(0) && arg[0].t == JV_STR) ind = arg[0];
    else {
        int64_t w = GIVEN(0) ? want_int(c, arg[0], "width") : 4;
        if (w < 0) w = 0;
        if (w > 10000) jerr(c, "LimitError", "indent width too large");
        char *sp = ja_alloc(c->a, (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind = jv_strn(sp, (size_t)w);
    }
    bool first = GIVEN(1) && jv_truthy(arg[1]), blank = GIVEN(2) && jv_truthy(arg[2]);
    /* Jinja appends "\n" with +=, which only strings survive */
    if (v.t == JV_UNDEF) jerr_undef(c, v);
    if (v.t != JV_STR) jerr(c, "TypeError", "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    jval s = v;
    /* Jinja appends a newline before splitting so a trailing one survives */
    jsb t;
    sb_init(&t, c->a);
    sb_put(&t, s.s.p, s.s.n);
    sb_putc(&t, '\n');
    jval lines = py_splitlines(c, jv_strn(t.p, t.n), false);
    jsb b;
    sb_init(&b, c->a);
    if (first) sb_put(&b, ind.s.p, ind.s.n);
    for (size_t i = 0; i < lines.l->n; i++) {
        jval ln = lines.l->v[i];
        if (i) {
            sb_putc(&b, '\n');
            if (blank || ln.s.n) sb_put(&b, ind.s.p, ind.s.n);
        }
        sb_put(&b, ln.s.p, ln.s.n);
    }
    jval r = jv_strn(b.p ? b.p : "", b.n);
    r.f = s.f;
    return r;
}

static jval f_wordcount(jctx *c, jval v, jargs *a) {
    no_args(c, "wordcount", a);
    jval s = jstr_val(c, v);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        i += u8_decode(s.s.p, s.s.n, i, &cp);
        bool w = cp == '_' || (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= 0x80 && !u8_is_space(cp));
        if (w && !in_word) n++;
        in_word = w;
    }
    return jv_int(n);
}

static jval f_center(jctx *c, jval v, jargs *a) {
    BIND("center", "width");
    int64_t w = GIVEN(0) ? want_int(c, arg[0], "width") : 80;
    jval s = jstr_val(c, v);
    int64_t len = (int64_t)u8_len(s.s.p, s.s.n);
    if (w > 100000) jerr(c, "LimitError", "center width too large");
    if (w <= len) return s;
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    jsb b;
    sb_init(&b, c->a);
    for (int64_t i = 0; i < left; i++) sb_putc(&b, ' ');
    sb_put(&b, s.s.p, s.s.n);
    for (int64_t i = 0; i < pad - left; i++) sb_putc(&b, ' ');
    return jv_strn(b.p, b.n);
}

static jval f_format(jctx *c, jval v, jargs *a) {
    jval s = jstr_val(c, v);
    if (a->nkw && a->npos) jerr(c, "FilterArgumentError", "can't handle positional and keyword arguments at the same time");
    if (a->nkw) {
        jval d = jv_dict(c->a);
        for (size_t k = 0; k < a->nkw; k++) jd_set(c->a, d.m, jv_str(a->kwn[k]), a->kwv[k]);
        return jpercent_format(c, s, d);
    }
    jval t = jv_list(c->a, a->npos);
    t.f = JL_TUPLE;
    if (a->npos) memcpy(t.l->v, a->pos, a->npos * sizeof(jval));
    t.l->n = a->npos;
    return jpercent_format(c, s, t);
}

/* ---- tests -------------------------------------------------------------- */

#define TEST1(fname, expr)                                   \
    static jval fname(jctx *c, jval v, jargs *a) {           \
        (void)c;                                             \
        (void)a;                                             \
        return jv_bool(expr);                                \
    }

TEST1(t_defined, v.t != JV_UNDEF)
TEST1(t_undefined, v.t == JV_UNDEF)
TEST1(t_none, v.t == JV_NONE)
TEST1(t_boolean, v.t == JV_BOOL)
TEST1(t_false, v.t == JV_BOOL && !v.b)
TEST1(t_true, v.t == JV_BOOL && v.b)
TEST1(t_integer, v.t == JV_INT)
TEST1(t_float, v.t == JV_FLOAT)
TEST1(t_number, jv_is_num(v))
TEST1(t_string, v.t == JV_STR)
TEST1(t_mapping, v.t == JV_DICT)
TEST1(t_iterable, v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR || v.t == JV_GEN || v.t == JV_UNDEF)
TEST1(t_sequence, (v.t == JV_LIST && v.f <= JL_TUPLE) || v.t == JV_DICT || v.t == JV_STR || v.t == JV_UNDEF)
TEST1(t_callable, v.t == JV_FUNC || v.t == JV_UNDEF)
TEST1(t_escaped, v.t == JV_STR && (v.f & JF_MARKUP))

static jval t_odd(jctx *c, jval v, jargs *a) {
    no_args(c, "odd", a);
    return jv_bool((want_int(c, v, "value") & 1) != 0);
}
static jval t_even(jctx *c, jval v, jargs *a) {
    no_args(c, "even", a);
    return jv_bool((want_int(c, v, "value") & 1) == 0);
}
static jval t_divisibleby(jctx *c, jval v, jargs *a) {
    BIND("divisibleby", "num");
    int64_t d = want_int(c, arg[0], "num");
    if (!d) jerr(c, "ZeroDivisionError", "integer division or modulo by zero");
    return jv_bool(want_int(c, v, "value") % d == 0);
}

static jval cmp_test(jctx *c, jval v, jargs *a, int op) {
    if (a->npos != 1 || a->nkw) jerr(c, "TypeError", "comparison test takes one argument");
    jval o = a->pos[0];
    if (op == 0) return jv_bool(jv_eq(v, o));
    if (op == 1) return jv_bool(!jv_eq(v, o));
    bool ok;
    int r = jv_cmp(v, o, &ok);
    if (!ok) jerr(c, "TypeError", "'<' not supported between instances of '%s' and '%s'", jv_type_name(v), jv_type_name(o));
    return jv_bool(op == 2 ? r < 0 : op == 3 ? r <= 0 : op == 4 ? r > 0 : r >= 0);
}
static jval t_eq(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 0); }
static jval t_ne(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 1); }
static jval t_lt(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 2); }
static jval t_le(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 3); }
static jval t_gt(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 4); }
static jval t_ge(jctx *c, jval v, jargs *a) { return cmp_test(c, v, a, 5); }

static jval t_in(jctx *c, jval v, jargs *a) {
    BIND("in", "seq");
    jval s = arg[0];
    if (s.t == JV_STR) {
        if (v.t != JV_STR) jerr(c, "TypeError", "'in <string>' requires string as left operand, not %s", jv_type_name(v));
        return jv_bool(!v.s.n || memmem(s.s.p, s.s.n, v.s.p, v.s.n));
    }
    if (s.t == JV_DICT) return jv_bool(jd_get(s.m, v) != NULL);
    jlist *l = jiter(c, s);
    for (size_t i = 0; i < l->n; i++)
        if (jv_eq(l->v[i], v)) return jv_bool(true);
    return jv_bool(false);
}

static jval t_sameas(jctx *c, jval v, jargs *a) {
    BIND("sameas", "other");
    jval o = arg[0];
    if (v.t != o.t) return jv_bool(false);
    switch (v.t) {
    case JV_NONE: case JV_UNDEF: return jv_bool(true);
    case JV_BOOL: return jv_bool(v.b == o.b);
    case JV_INT: return jv_bool(v.i == o.i && v.i >= -5 && v.i <= 256); /* CPython small-int cache */
    case JV_STR: return jv_bool(jv_eq(v, o)); /* equal literals are one interned object in CPython */
    default: return jv_bool(jv_eq(v, o) && memcmp(&v, &o, sizeof v) == 0);
    }
}

static jval t_lower(jctx *c, jval v, jargs *a) {
    no_args(c, "lower", a);
    if (v.t != JV_STR) return jv_bool(false);
    return jv_bool(jv_eq(py_case(c, v, 'l'), v) && !jv_eq(py_case(c, v, 'u'), v));
}
static jval t_upper(jctx *c, jval v, jargs *a) {
    no_args(c, "upper", a);
    if (v.t != JV_STR) return jv_bool(false);
    return jv_bool(jv_eq(py_case(c, v, 'u'), v) && !jv_eq(py_case(c, v, 'l'), v));
}
static jval t_filter(jctx *c, jval v, jargs *a) {
    no_args(c, "filter", a);
    bool k;
    return jv_bool(v.t == JV_STR && jfilter_find(ja_strndup(c->a, v.s.p, v.s.n), &k));
}
static jval t_test(jctx *c, jval v, jargs *a) {
    no_args(c, "test", a);
    bool k;
    return jv_bool(v.t == JV_STR && jtest_find(ja_strndup(c->a, v.s.p, v.s.n), &k));
}

/* ---- tables -------------------------------------------------------------- */

static const jbuiltin g_filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
    {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float},
    {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent}, {"int", f_int},
    {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
    {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round},
    {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim},
    {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
};

/* Jinja builtins minfer does not implement: an error when reached, not a
 * parse error, because Jinja would accept the template. */
static const char *const g_filters_unimpl[] = {
    "batch", "filesizeformat", "groupby", "pprint", "random", "slice", "striptags", "truncate",
    "urlencode", "urlize", "wordwrap", "xmlattr", NULL,
};

static const jbuiltin g_tests[] = {
    {"!=", t_ne}, {"<", t_lt}, {"<=", t_le}, {"==", t_eq}, {">", t_gt}, {">=", t_ge},
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
    {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {"greaterthan", t_gt}, {"gt", t_gt},
    {"in", t_in}, {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"lessthan", t_lt},
    {"lower", t_lower}, {"lt", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"none", t_none},
    {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas}, {"sequence", t_sequence},
    {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined}, {"upper", t_upper},
};

static const jbuiltin *find(const jbuiltin *t, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

const jbuiltin *jfilter_find(const char *name, bool *known) {
    const jbuiltin *b = find(g_filters, sizeof g_filters / sizeof g_filters[0], name);
    *known = false;
    if (!b)
        for (const char *const *u = g_filters_unimpl; *u; u++)
            if (!strcmp(*u, name)) *known = true;
    return b;
}

const jbuiltin *jtest_find(const char *name, bool *known) {
    *known = false;
    return find(g_tests, sizeof g_tests / sizeof g_tests[0], name);
}

/* ---- methods ------------------------------------------------------------- */

static jval m_strip(jctx *c, jval s, jargs *a) {
    BIND("strip", "chars");
    return py_strip(c, s, GIVEN(0) ? &arg[0] : NULL, 'b');
}
static jval m_lstrip(jctx *c, jval s, jargs *a) {
    BIND("lstrip", "chars");
    return py_strip(c, s, GIVEN(0) ? &arg[0] : NULL, 'l');
}
static jval m_rstrip(jctx *c, jval s, jargs *a) {
    BIND("rstrip", "chars");
    return py_strip(c, s, GIVEN(0) ? &arg[0] : NULL, 'r');
}
static jval m_split(jctx *c, jval s, jargs *a) {
    BIND("split", "sep", "maxsplit");
    return py_split(c, s, GIVEN(0) ? &arg[0] : NULL, GIVEN(1) ? want_int(c, arg[1], "maxsplit") : -1, false);
}
static jval m_rsplit(jctx *c, jval s, jargs *a) {
    BIND("rsplit", "sep", "maxsplit");
    return py_split(c, s, GIVEN(0) ? &arg[0] : NULL, GIVEN(1) ? want_int(c, arg[1], "maxsplit") : -1, true);
}
static jval m_splitlines(jctx *c, jval s, jargs *a) {
    BIND("splitlines", "keepends");
    return py_splitlines(c, s, GIVEN(0) && jv_truthy(arg[0]));
}

static jval affix(jctx *c, jval s, jargs *a, bool end) {
    BIND(end ? "endswith" : "startswith", "prefix", "start", "end");
    if (!GIVEN(0)) jerr(c, "TypeError", "%s() takes at least 1 argument (0 given)", end ? "endswith" : "startswith");
    size_t len = u8_len(s.s.p, s.s.n);
    int64_t lo = 0, hi = (int64_t)len;
    if (GIVEN(1) && arg[1].t != JV_NONE) lo = want_int(c, arg[1], "start");
    if (GIVEN(2) && arg[2].t != JV_NONE) hi = want_int(c, arg[2], "end");
    if (lo < 0) lo = lo + (int64_t)len < 0 ? 0 : lo + (int64_t)len;
    if (hi < 0) hi = hi + (int64_t)len < 0 ? 0 : hi + (int64_t)len;
    if (hi > (int64_t)len) hi = (int64_t)len;
    if (lo > hi) return jv_bool(false);
    size_t bo = u8_offset(s.s.p, s.s.n, (size_t)lo), be = u8_offset(s.s.p, s.s.n, (size_t)hi);
    jval cands = arg[0];
    jlist one = {1, 1, &cands};
    jlist *l = &one;
    if (cands.t == JV_LIST && cands.f == JL_TUPLE) l = cands.l;
    for (size_t i = 0; i < l->n; i++) {
        jval p = l->v[i];
        if (p.t != JV_STR)
            jerr(c, "TypeError", "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", jv_type_name(p));
        if (p.s.n > be - bo) continue;
        if (!memcmp(s.s.p + (end ? be - p.s.n : bo), p.s.p, p.s.n)) return jv_bool(true);
    }
    return jv_bool(false);
}
static jval m_startswith(jctx *c, jval s, jargs *a) { return affix(c, s, a, false); }
static jval m_endswith(jctx *c, jval s, jargs *a) { return affix(c, s, a, true); }

static jval m_upper(jctx *c, jval s, jargs *a) { no_args(c, "upper", a); return py_case(c, s, 'u'); }
static jval m_lower(jctx *c, jval s, jargs *a) { no_args(c, "lower", a); return py_case(c, s, 'l'); }
static jval m_title(jctx *c, jval s, jargs *a) { no_args(c, "title", a); return py_case(c, s, 't'); }
static jval m_capitalize(jctx *c, jval s, jargs *a) { no_args(c, "capitalize", a); return py_case(c, s, 'c'); }

static jval m_replace(jctx *c, jval s, jargs *a) {
    BIND("replace", "old", "new", "count");
    if (!GIVEN(0) || !GIVEN(1)) jerr(c, "TypeError", "replace() takes at least 2 arguments");
    want_str(c, arg[0], "replace() argument 1");
    want_str(c, arg[1], "replace() argument 2");
    jval old = arg[0], rep = arg[1];
    if (s.f & JF_MARKUP) {
        old = jescape(c, old);
        rep = jescape(c, rep);
    }
    return py_replace(c, s, old, rep, GIVEN(2) ? want_int(c, arg[2], "count") : -1);
}

static jval m_format(jctx *c, jval s, jargs *a) { return py_format(c, s, a); }

static jval m_join(jctx *c, jval s, jargs *a) {
    BIND("join", "iterable");
    jlist *l = jiter(c, arg[0]);
    jsb b;
    sb_init(&b, c->a);
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != JV_STR) jerr(c, "TypeError", "sequence item %zu: expected str instance, %s found", i, jv_type_name(l->v[i]));
        if (i) sb_put(&b, s.s.p, s.s.n);
        sb_put(&b, l->v[i].s.p, l->v[i].s.n);
    }
    return jv_strn(b.p ? b.p : "", b.n);
}

static jval find_impl(jctx *c, jval s, jargs *a, int mode) {
    static const char *const fn[] = {"find", "rfind", "count", "index", "rindex"};
    BIND(fn[mode], "sub", "start", "end");
    jval sub = want_str(c, arg[0], "argument");
    (void)GIVEN(1);
    if (mode == 2) {
        if (!sub.s.n) return jv_int((int64_t)u8_len(s.s.p, s.s.n) + 1);
        int64_t n = 0;
        for (const char *p = s.s.p, *e = s.s.p + s.s.n; (p = memmem(p, (size_t)(e - p), sub.s.p, sub.s.n)); p += sub.s.n) n++;
        return jv_int(n);
    }
    const char *hit = NULL;
    if (mode == 1 || mode == 4) {
        for (size_t q = s.s.n >= sub.s.n ? s.s.n - sub.s.n + 1 : 0; q-- > 0;)
            if (!memcmp(s.s.p + q, sub.s.p, sub.s.n)) {
                hit = s.s.p + q;
                break;
            }
    } else {
        hit = memmem(s.s.p, s.s.n, sub.s.p, sub.s.n);
        if (!sub.s.n) hit = s.s.p;
    }
    if (!hit) {
        if (mode >= 3) jerr(c, "ValueError", "substring not found");
        return jv_int(-1);
    }
    return jv_int((int64_t)u8_len(s.s.p, (size_t)(hit - s.s.p)));
}
static jval m_find(jctx *c, jval s, jargs *a) { return find_impl(c, s, a, 0); }
static jval m_rfind(jctx *c, jval s, jargs *a) { return find_impl(c, s, a, 1); }
static jval m_count(jctx *c, jval s, jargs *a) { return find_impl(c, s, a, 2); }
static jval m_index(jctx *c, jval s, jargs *a) { return find_impl(c, s, a, 3); }
static jval m_rindex(jctx *c, jval s, jargs *a) { return find_impl(c, s, a, 4); }

static jval str_class(jctx *c, jval s, jargs *a, int which) {
    no_args(c, "is*", a);
    if (!s.s.n) return jv_bool(false);
    bool any_cased = false;
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        i += u8_decode(s.s.p, s.s.n, i, &cp);
        bool digit = cp >= '0' && cp <= '9';
        bool alpha = (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
        if (cp >= 0x80) alpha = !u8_is_space(cp);
        switch (which) {
        case 0: if (!digit) return jv_bool(false); break;
        case 1: if (!alpha) return jv_bool(false); break;
        case 2: if (!alpha && !digit) return jv_bool(false); break;
        case 3: if (!u8_is_space(cp)) return jv_bool(false); break;
        }
    }
    (void)any_cased;
    return jv_bool(true);
}
static jval m_isdigit(jctx *c, jval s, jargs *a) { return str_class(c, s, a, 0); }
static jval m_isalpha(jctx *c, jval s, jargs *a) { return str_class(c, s, a, 1); }
static jval m_isalnum(jctx *c, jval s, jargs *a) { return str_class(c, s, a, 2); }
static jval m_isspace(jctx *c, jval s, jargs *a) { return str_class(c, s, a, 3); }
static jval m_islower(jctx *c, jval s, jargs *a) { return t_lower(c, s, a); }
static jval m_isupper(jctx *c, jval s, jargs *a) { return t_upper(c, s, a); }

static jval m_removeaffix(jctx *c, jval s, jargs *a, bool suffix) {
    BIND(suffix ? "removesuffix" : "removeprefix", "affix");
    jval p = want_str(c, arg[0], "argument");
    if (p.s.n <= s.s.n && !memcmp(s.s.p + (suffix ? s.s.n - p.s.n : 0), p.s.p, p.s.n)) {
        jval r = jv_strn(s.s.p + (suffix ? 0 : p.s.n), s.s.n - p.s.n);
        r.f = s.f;
        return r;
    }
    return s;
}
static jval m_removeprefix(jctx *c, jval s, jargs *a) { return m_removeaffix(c, s, a, false); }
static jval m_removesuffix(jctx *c, jval s, jargs *a) { return m_removeaffix(c, s, a, true); }

static jval view(jctx *c, jval d, int kind) {
    jval r = jv_list(c->a, d.m->n);
    r.f = (uint8_t)kind;
    for (size_t i = 0; i < d.m->n; i++)
        r.l->v[i] = kind == JL_ITEMS ? tuple2(c, d.m->k[i], d.m->v[i]) : kind == JL_KEYS ? d.m->k[i] : d.m->v[i];
    r.l->n = d.m->n;
    return r;
}
static jval m_items(jctx *c, jval d, jargs *a) { no_args(c, "items", a); return view(c, d, JL_ITEMS); }
static jval m_keys(jctx *c, jval d, jargs *a) { no_args(c, "keys", a); return view(c, d, JL_KEYS); }
static jval m_values(jctx *c, jval d, jargs *a) { no_args(c, "values", a); return view(c, d, JL_VALUES); }
static jval m_get(jctx *c, jval d, jargs *a) {
    BIND("get", "key", "default");
    if (!GIVEN(0)) jerr(c, "TypeError", "get expected at least 1 argument, got 0");
    jval *v = jd_get(d.m, arg[0]);
    return v ? *v : GIVEN(1) ? arg[1] : jv_none();
}
static jval m_copy(jctx *c, jval d, jargs *a) {
    no_args(c, "copy", a);
    if (d.t == JV_LIST) return list_of(c, d.l);
    jval r = jv_dict(c->a);
    for (size_t i = 0; i < d.m->n; i++) jd_set(c->a, r.m, d.m->k[i], d.m->v[i]);
    return r;
}

static jval m_list_index(jctx *c, jval l, jargs *a) {
    BIND("index", "value");
    for (size_t i = 0; i < l.l->n; i++)
        if (jv_eq(l.l->v[i], arg[0])) return jv_int((int64_t)i);
    jerr(c, "ValueError", "value is not in list");
}
static jval m_list_count(jctx *c, jval l, jargs *a) {
    BIND("count", "value");
    int64_t n = 0;
    for (size_t i = 0; i < l.l->n; i++) n += jv_eq(l.l->v[i], arg[0]);
    return jv_int(n);
}

static const jbuiltin g_str_methods[] = {
    {"capitalize", m_capitalize}, {"count", m_count}, {"endswith", m_endswith}, {"find", m_find},
    {"format", m_format}, {"index", m_index}, {"isalnum", m_isalnum}, {"isalpha", m_isalpha},
    {"isdigit", m_isdigit}, {"islower", m_islower}, {"isspace", m_isspace}, {"isupper", m_isupper},
    {"join", m_join}, {"lower", m_lower}, {"lstrip", m_lstrip}, {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix}, {"replace", m_replace}, {"rfind", m_rfind}, {"rindex", m_rindex},
    {"rsplit", m_rsplit}, {"rstrip", m_rstrip}, {"split", m_split}, {"splitlines", m_splitlines},
    {"startswith", m_startswith}, {"strip", m_strip}, {"title", m_title}, {"upper", m_upper},
};
static const jbuiltin g_dict_methods[] = {
    {"copy", m_copy}, {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values},
};
static const jbuiltin g_list_methods[] = {
    {"copy", m_copy}, {"count", m_list_count}, {"index", m_list_index},
};
/* Mutating methods the ImmutableSandboxedEnvironment refuses (SecurityError). */
static const char *const g_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const g_list_unsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};

static bool in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s)) return true;
    return false;
}

jval jmethod_get(jctx *c, jval obj, const char *name) {
    const jbuiltin *t = NULL;
    size_t n = 0;
    const char *const *unsafe = NULL;
    if (name[0] == '_' && name[1] == '_') goto refuse;
    switch (obj.t) {
    case JV_STR: t = g_str_methods, n = sizeof g_str_methods / sizeof *t; break;
    case JV_DICT: t = g_dict_methods, n = sizeof g_dict_methods / sizeof *t, unsafe = g_dict_unsafe; break;
    case JV_LIST:
        if (obj.f == JL_LIST) t = g_list_methods, n = sizeof g_list_methods / sizeof *t, unsafe = g_list_unsafe;
        break;
    default: break;
    }
    if (unsafe && in_list(unsafe, name)) goto refuse;
    const jbuiltin *b = t ? find(t, n, name) : NULL;
    if (!b) return jv_undef(NULL);
    jval f = {.t = JV_FUNC};
    f.fn = ja_alloc(c->a, sizeof *f.fn);
    f.fn->kind = F_METHOD;
    f.fn->name = b->name;
    f.fn->fn = b->fn;
    f.fn->self = obj;
    return f;
refuse: {
    jval u = jv_undeff(c->a, "access to attribute '%s' of '%s' object is unsafe.", name, jv_type_name(obj));
    u.f = JF_UNSAFE;
    return u;
}
}

/* ---- globals -------------------------------------------------------------- */

static jval g_range(jctx *c, jval self, jargs *a) {
    (void)self;
    if (a->nkw || !a->npos || a->npos > 3) jerr(c, "TypeError", "range expected 1 to 3 integer arguments");
    int64_t lo = 0, hi, st = 1;
    if (a->npos == 1) hi = want_int(c, a->pos[0], "range() argument");
    else {
        lo = want_int(c, a->pos[0], "range() argument");
        hi = want_int(c, a->pos[1], "range() argument");
        if (a->npos == 3) st = want_int(c, a->pos[2], "range() argument");
    }
    if (!st) jerr(c, "ValueError", "range() arg 3 must not be zero");
    double cnt = st > 0 ? ceil(((double)hi - (double)lo) / (double)st) : ceil(((double)lo - (double)hi) / (double)-st);
    if (cnt < 0) cnt = 0;
    /* the sandbox's own limit */
    if (cnt > 100000) jerr(c, "OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jval r = jv_list(c->a, (size_t)cnt);
    for (size_t i = 0; i < (size_t)cnt; i++) r.l->v[i] = jv_int(lo + (int64_t)i * st);
    r.l->n = (size_t)cnt;
    return r;
}

static jval g_namespace(jctx *c, jval self, jargs *a) {
    (void)self;
    jval ns = jv_dict(c->a);
    ns.t = JV_NS;
    for (size_t i = 0; i < a->npos; i++) {
        if (a->pos[i].t != JV_DICT) jerr(c, "TypeError", "namespace() positional argument must be a mapping");
        jdict *d = a->pos[i].m;
        for (size_t k = 0; k < d->n; k++) jd_set(c->a, ns.m, d->k[k], d->v[k]);
    }
    for (size_t k = 0; k < a->nkw; k++) jd_set(c->a, ns.m, jv_str(a->kwn[k]), a->kwv[k]);
    return ns;
}

static jval g_dict(jctx *c, jval self, jargs *a) {
    jval d = g_namespace(c, self, a);
    d.t = JV_DICT;
    return d;
}

static jval g_raise_exception(jctx *c, jval self, jargs *a) {
    (void)self;
    BIND("raise_exception", "message");
    jval m = jstr_val(c, arg[0]);
    jerr(c, "TemplateError", "%.*s", (int)m.s.n, m.s.p);
}

static jval g_strftime_now(jctx *c, jval self, jargs *a) {
    (void)self;
    BIND("strftime_now", "format");
    jval f = want_str(c, arg[0], "format");
    time_t t = c->now ? (time_t)c->now : time(NULL);
    struct tm tm;
    if (c->now) gmtime_r(&t, &tm);
    else localtime_r(&t, &tm);
    char fmt[256], out[1024];
    if (f.s.n >= sizeof fmt) jerr(c, "ValueError", "strftime format too long");
    memcpy(fmt, f.s.p, f.s.n);
    fmt[f.s.n] = 0;
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return jv_strn(ja_strndup(c->a, out, n), n);
}

void jglobals_install(jctx *c, jscope *s) {
    static const jbuiltin g[] = {
        {"range", g_range}, {"namespace", g_namespace}, {"dict", g_dict},
        {"raise_exception", g_raise_exception}, {"strftime_now", g_strftime_now},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        jval f = {.t = JV_FUNC};
        f.fn = ja_alloc(c->a, sizeof *f.fn);
        f.fn->kind = F_BUILTIN;
        f.fn->name = g[i].name;
        f.fn->fn = g[i].fn;
        jd_set(c->a, &s->vars, jv_str(g[i].name), f);
    }
}
