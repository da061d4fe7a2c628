/* eval.c - walks the AST: scopes, statements, expressions, calls, attribute and item access. */
#include "chat/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_EVAL_DEPTH 3000

static _Thread_local int g_eval_depth; /* per render; reset by jrender */

_Noreturn void jerr(jctx *c, const char *type, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mf_status code = !strcmp(type, "TemplateError") ? MF_ERR_INVALID_ARG
                     : !strcmp(type, "UnsupportedError") ? MF_ERR_UNSUPPORTED
                                                          : MF_ERR_FORMAT;
    jraise(c->fail, code, c->line, type, "%s", msg);
}

_Noreturn void jerr_undef(jctx *c, jval u) {
    if (u.f & JF_UNSAFE) jerr(c, "SecurityError", "%.*s", (int)u.s.n, u.s.p);
    jerr(c, "UndefinedError", "%.*s", (int)u.s.n, u.s.p ? u.s.p : "value is undefined");
}

void jstep(jctx *c) {
    if (++c->steps > c->max_steps)
        jerr(c, "LimitError", "template ran more than %llu steps (endless or huge loop?)", (unsigned long long)c->max_steps);
}

static jscope *new_scope(jctx *c, jscope *parent) {
    jscope *s = ja_alloc(c->a, sizeof *s);
    s->parent = parent;
    return s;
}

static void reset_scope(jscope *s) {
    s->vars.n = 0;
    if (s->vars.idx) memset(s->vars.idx, 0, s->vars.idx_cap * sizeof *s->vars.idx);
}

static jval *lookup(jscope *s, const char *name) {
    jval key = jv_str(name);
    for (; s; s = s->parent) {
        jval *v = jd_get(&s->vars, key);
        if (v) return v;
    }
    return NULL;
}

static void set_var(jctx *c, jscope *s, const char *name, jval v) { jd_set(c->a, &s->vars, jv_str(name), v); }

jval jstr_val(jctx *c, jval v) { return jv_to_str(c->a, v); }

/* ---- iteration -------------------------------------------------------- */

jlist *jiter(jctx *c, jval v) {
    switch (v.t) {
    case JV_LIST: return v.l;
    case JV_UNDEF: return jv_list(c->a, 0).l;
    case JV_DICT: {
        jlist *l = jv_list(c->a, v.m->n).l;
        for (size_t i = 0; i < v.m->n; i++) l->v[i] = v.m->k[i];
        l->n = v.m->n;
        return l;
    }
    case JV_STR: {
        jlist *l = jv_list(c->a, 0).l;
        for (size_t i = 0; i < v.s.n;) {
            uint32_t cp;
            size_t k = u8_decode(v.s.p, v.s.n, i, &cp);
            jval ch = jv_strn(v.s.p + i, k);
            ch.f = v.f;
            jl_push(c->a, l, ch);
            i += k;
        }
        return l;
    }
    case JV_GEN: {
        /* a generator yields its items once */
        if (v.g->err) jerr(c, "TypeError", "%s", v.g->err);
        jlist *l = jv_list(c->a, 0).l;
        l->v = v.g->items->v + v.g->pos;
        l->n = l->cap = v.g->items->n - v.g->pos;
        v.g->pos = v.g->items->n;
        return l;
    }
    default: jerr(c, "TypeError", "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- attribute and item access ------------------------------------------ */

static jval loop_attr(jctx *c, jval obj, const char *name) {
    jloop *L = obj.lp;
    size_t n = L->items->n, i = L->index0;
    if (!strcmp(name, "index")) return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return jv_int((int64_t)i);
    if (!strcmp(name, "revindex")) return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int((int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(L->depth);
    if (!strcmp(name, "depth0")) return jv_int(L->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? L->items->v[i - 1] : jv_undef("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? L->items->v[i + 1] : jv_undef("there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jval f = {.t = JV_FUNC};
        f.fn = ja_alloc(c->a, sizeof *f.fn);
        f.fn->kind = name[1] == 'y' ? F_LOOP_CYCLE : F_LOOP_CHANGED;
        f.fn->name = name;
        f.fn->self = obj;
        return f;
    }
    return jv_undeff(c->a, "'%s' has no attribute '%s'", jv_object_repr(obj), name);
}

jval jgetattr(jctx *c, jval obj, const char *name) {
    if (obj.t == JV_UNDEF) jerr_undef(c, obj);
    if (obj.t == JV_LOOP) return loop_attr(c, obj, name);
    if (obj.t == JV_NS) {
        jval *v = jd_get_str(obj.m, name);
        return v ? *v : jv_undeff(c->a, "'%s' has no attribute '%s'", jv_object_repr(obj), name);
    }
    /* Python attributes (methods) win over dict keys, as in Jinja's getattr */
    jval m = jmethod_get(c, obj, name);
    if (m.t != JV_UNDEF || m.f & JF_UNSAFE) return m;
    if (obj.t == JV_DICT) {
        jval *v = jd_get_str(obj.m, name);
        if (v) return *v;
    }
    return jv_undeff(c->a, "'%s' has no attribute '%s'", jv_object_repr(obj), name);
}

static bool index_of(jval key, size_t n, size_t *out) {
    if (key.t != JV_INT && key.t != JV_BOOL) return false;
    int64_t i = key.t == JV_INT ? key.i : key.b;
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

static jval no_item(jctx *c, jval obj, jval key) {
    if (key.t == JV_STR) {
        const char *name = ja_strndup(c->a, key.s.p, key.s.n);
        jval m = jmethod_get(c, obj, name);
        if (m.t != JV_UNDEF || m.f & JF_UNSAFE) return m;
        return jv_undeff(c->a, "'%s' has no attribute '%s'", jv_object_repr(obj), name);
    }
    jsb b;
    sb_init(&b, c->a);
    jv_repr_append(&b, key);
    return jv_undeff(c->a, "'%s' has no element %s", jv_object_repr(obj), b.p);
}

jval jgetitem(jctx *c, jval obj, jval key) {
    size_t i;
    switch (obj.t) {
    case JV_UNDEF: jerr_undef(c, obj);
    case JV_DICT: {
        jval *v = jd_get(obj.m, key);
        if (v) return *v;
        return no_item(c, obj, key);
    }
    case JV_NS:
        if (key.t == JV_STR) return jgetattr(c, obj, ja_strndup(c->a, key.s.p, key.s.n));
        return no_item(c, obj, key);
    case JV_LIST:
        if (obj.f <= JL_TUPLE && index_of(key, obj.l->n, &i)) return obj.l->v[i];
        return no_item(c, obj, key);
    case JV_STR:
        if (index_of(key, u8_len(obj.s.p, obj.s.n), &i)) {
            size_t off = u8_offset(obj.s.p, obj.s.n, i);
            size_t end = u8_offset(obj.s.p, obj.s.n, i + 1);
            jval r = jv_strn(obj.s.p + off, end - off);
            r.f = obj.f;
            return r;
        }
        return no_item(c, obj, key);
    case JV_LOOP:
        if (key.t == JV_STR) return jgetattr(c, obj, ja_strndup(c->a, key.s.p, key.s.n));
        return no_item(c, obj, key);
    default: return no_item(c, obj, key);
    }
}

/* Python's slice index normalization (PySlice_AdjustIndices). */
static size_t slice_indices(jctx *c, jval lo, jval hi, jval st, size_t len, int64_t *start, int64_t *step) {
    int64_t n = (int64_t)len, s = 1, a, b;
    if (st.t != JV_NONE) {
        if (st.t != JV_INT && st.t != JV_BOOL) jerr(c, "TypeError", "slice indices must be integers or None");
        s = st.t == JV_INT ? st.i : st.b;
        if (s == 0) jerr(c, "ValueError", "slice step cannot be zero");
    }
    for (int k = 0; k < 2; k++) {
        jval v = k ? hi : lo;
        int64_t *out = k ? &b : &a;
        if (v.t == JV_NONE) {
            *out = k ? (s < 0 ? -1 : n) : (s < 0 ? n - 1 : 0);
            continue;
        }
        if (v.t != JV_INT && v.t != JV_BOOL) jerr(c, "TypeError", "slice indices must be integers or None");
        int64_t x = v.t == JV_INT ? v.i : v.b;
        if (x < 0) {
            x += n;
            if (x < 0) x = s < 0 ? -1 : 0;
        } else if (x >= n) {
            x = s < 0 ? n - 1 : n;
        }
        *out = x;
    }
    *start = a;
    *step = s;
    if (s < 0) return b < a ? (size_t)((a - b - 1) / (-s) + 1) : 0;
    return a < b ? (size_t)((b - a - 1) / s + 1) : 0;
}

static jval do_slice(jctx *c, jval obj, jval lo, jval hi, jval st) {
    int64_t start, step;
    if (obj.t == JV_UNDEF) jerr_undef(c, obj);
    if (obj.t == JV_LIST && obj.f <= JL_TUPLE) {
        size_t cnt = slice_indices(c, lo, hi, st, obj.l->n, &start, &step);
        jval r = jv_list(c->a, cnt);
        r.f = obj.f;
        for (size_t k = 0; k < cnt; k++) r.l->v[k] = obj.l->v[start + (int64_t)k * step];
        r.l->n = cnt;
        return r;
    }
    if (obj.t == JV_STR) {
        jlist *chars = jiter(c, obj);
        size_t cnt = slice_indices(c, lo, hi, st, chars->n, &start, &step);
        if (step == 1) {
            size_t off = cnt ? (size_t)(chars->v[start].s.p - obj.s.p) : 0;
            size_t end = cnt ? (size_t)(chars->v[start + (int64_t)cnt - 1].s.p - obj.s.p) + chars->v[start + (int64_t)cnt - 1].s.n : 0;
            jval r = jv_strn(obj.s.p + off, end - off);
            r.f = obj.f;
            return r;
        }
        jsb b;
        sb_init(&b, c->a);
        for (size_t k = 0; k < cnt; k++) {
            jval ch = chars->v[start + (int64_t)k * step];
            sb_put(&b, ch.s.p, ch.s.n);
        }
        jval r = jv_strn(b.p ? b.p : "", b.n);
        r.f = obj.f;
        return r;
    }
    /* slices bypass Jinja's forgiving getitem: Python's TypeError stands */
    jerr(c, "TypeError", "'%s' object is not subscriptable", jv_type_name(obj));
}

/* ---- operators -------------------------------------------------------- */

static void html_escape(jsb *b, jval v) {
    jsb t;
    sb_init(&t, b->a);
    jv_str_append(&t, v);
    for (size_t i = 0; i < t.n; i++) {
        switch (t.p[i]) {
        case '&': sb_puts(b, "&amp;"); break;
        case '<': sb_puts(b, "&lt;"); break;
        case '>': sb_puts(b, "&gt;"); break;
        case '\'': sb_puts(b, "&#39;"); break;
        case '"': sb_puts(b, "&#34;"); break;
        default: sb_putc(b, t.p[i]);
        }
    }
}

jval jescape(jctx *c, jval v);
jval jescape(jctx *c, jval v) {
    if (v.t == JV_STR && v.f & JF_MARKUP) return v;
    jsb b;
    sb_init(&b, c->a);
    html_escape(&b, v);
    jval r = jv_strn(b.p ? b.p : "", b.n);
    r.f = JF_MARKUP;
    return r;
}

static int64_t as_int(jval v) { return v.t == JV_INT ? v.i : (int64_t)v.b; }
static bool intlike(jval v) { return v.t == JV_INT || v.t == JV_BOOL; }

_Noreturn static void bad_operands(jctx *c, const char *op, jval a, jval b) {
    jerr(c, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

static jval repeat(jctx *c, jval seq, int64_t times) {
    if (times < 0) times = 0;
    size_t unit = seq.t == JV_STR ? seq.s.n : seq.l->n;
    if (unit && (uint64_t)times > (c->a->limit / (unit * 16 + 1))) jerr(c, "LimitError", "repetition too large");
    if (seq.t == JV_STR) {
        jsb b;
        sb_init(&b, c->a);
        for (int64_t k = 0; k < times; k++) sb_put(&b, seq.s.p, seq.s.n);
        return jv_strn(b.p ? b.p : "", b.n);
    }
    jval r = jv_list(c->a, 0);
    r.f = seq.f;
    for (int64_t k = 0; k < times; k++)
        for (size_t i = 0; i < unit; i++) jl_push(c->a, r.l, seq.l->v[i]);
    return r;
}

jval jpercent_format(jctx *c, jval fmt, jval args);

static jval binop(jctx *c, int op, jval a, jval b) {
    if (op == OP_TILDE) {
        jsb s;
        sb_init(&s, c->a);
        jv_str_append(&s, a);
        jv_str_append(&s, b);
        return jv_strn(s.p ? s.p : "", s.n);
    }
    if (op == OP_MOD && a.t == JV_STR) return jpercent_format(c, a, b); /* str.__mod__ takes anything */
    if (a.t == JV_UNDEF) jerr_undef(c, a);
    if (b.t == JV_UNDEF) jerr_undef(c, b);
    const char *opname = jop_text(op);
    int64_t r;
    if (intlike(a) && intlike(b)) {
        int64_t x = as_int(a), y = as_int(b);
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) goto overflow;
            return jv_int(r);
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) goto overflow;
            return jv_int(r);
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) goto overflow;
            return jv_int(r);
        case OP_DIV:
            if (!y) jerr(c, "ZeroDivisionError", "division by zero");
            return jv_float((double)x / (double)y);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (!y) jerr(c, "ZeroDivisionError", "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) goto overflow;
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return jv_int(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0) return jv_float(pow((double)x, (double)y));
            int64_t acc = 1;
            for (int64_t k = 0; k < y; k++) {
                if (__builtin_mul_overflow(acc, x, &acc)) goto overflow;
                if (acc == 0 || acc == 1) break;
                if (k > 64 && acc == -1) {
                    acc = (y % 2) ? -1 : 1;
                    break;
                }
            }
            return jv_int(acc);
        }
        }
    }
    if (jv_is_num(a) && jv_is_num(b)) {
        double x = jv_num(a), y = jv_num(b);
        switch (op) {
        case OP_ADD: return jv_float(x + y);
        case OP_SUB: return jv_float(x - y);
        case OP_MUL: return jv_float(x * y);
        case OP_DIV:
            if (y == 0) jerr(c, "ZeroDivisionError", "float division by zero");
            return jv_float(x / y);
        case OP_FLOORDIV:
            if (y == 0) jerr(c, "ZeroDivisionError", "float floor division by zero");
            return jv_float(floor(x / y));
        case OP_MOD: {
            if (y == 0) jerr(c, "ZeroDivisionError", "float modulo");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return jv_float(m);
        }
        case OP_POW: return jv_float(pow(x, y));
        }
    }
    if (op == OP_ADD) {
        if (a.t == JV_STR && b.t == JV_STR) {
            /* Markup + str escapes the plain side (markupsafe) */
            jsb s;
            sb_init(&s, c->a);
            bool ma = a.f & JF_MARKUP, mb = b.f & JF_MARKUP;
            if (mb && !ma) html_escape(&s, a);
            else sb_put(&s, a.s.p, a.s.n);
            if (ma && !mb) html_escape(&s, b);
            else sb_put(&s, b.s.p, b.s.n);
            jval r = jv_strn(s.p ? s.p : "", s.n);
            r.f = (ma || mb) ? JF_MARKUP : 0;
            return r;
        }
        if (a.t == JV_STR) jerr(c, "TypeError", "can only concatenate str (not \"%s\") to str", jv_type_name(b));
        if (a.t == JV_LIST && a.f <= JL_TUPLE) {
            if (b.t != JV_LIST || b.f != a.f)
                jerr(c, "TypeError", "can only concatenate %s (not \"%s\") to %s", jv_type_name(a), jv_type_name(b), jv_type_name(a));
            jval r = jv_list(c->a, a.l->n + b.l->n);
            r.f = a.f;
            if (a.l->n) memcpy(r.l->v, a.l->v, a.l->n * sizeof(jval));
            if (b.l->n) memcpy(r.l->v + a.l->n, b.l->v, b.l->n * sizeof(jval));
            r.l->n = a.l->n + b.l->n;
            return r;
        }
    }
    if (op == OP_MUL) {
        if ((a.t == JV_STR || (a.t == JV_LIST && a.f <= JL_TUPLE)) && intlike(b)) return repeat(c, a, as_int(b));
        if ((b.t == JV_STR || (b.t == JV_LIST && b.f <= JL_TUPLE)) && intlike(a)) return repeat(c, b, as_int(a));
    }
    bad_operands(c, opname, a, b);
overflow:
    jerr(c, "OverflowError", "integer result of '%s' does not fit in 64 bits", opname);
}

static bool contains(jctx *c, jval needle, jval hay) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            jerr(c, "TypeError", "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle.s.n) return true;
        return memmem(hay.s.p, hay.s.n, needle.s.p, needle.s.n) != NULL;
    case JV_DICT: return jd_get(hay.m, needle) != NULL;
    case JV_UNDEF: return false;
    case JV_LIST:
    case JV_GEN: {
        if (hay.t == JV_LIST && hay.f == JL_ITEMS) {
            for (size_t i = 0; i < hay.l->n; i++)
                if (jv_eq(hay.l->v[i], needle)) return true;
            return false;
        }
        jlist *l = jiter(c, hay);
        for (size_t i = 0; i < l->n; i++)
            if (jv_eq(l->v[i], needle)) return true;
        return false;
    }
    default: jerr(c, "TypeError", "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

static bool compare(jctx *c, int op, jval a, jval b) {
    switch (op) {
    case OP_EQ: return jv_eq(a, b);
    case OP_NE: return !jv_eq(a, b);
    case CMP_IN: return contains(c, a, b);
    case CMP_NOTIN: return !contains(c, a, b);
    }
    if (a.t == JV_UNDEF) jerr_undef(c, a);
    if (b.t == JV_UNDEF) jerr_undef(c, b);
    bool ok;
    int r = jv_cmp(a, b, &ok);
    if (!ok)
        jerr(c, "TypeError", "'%s' not supported between instances of '%s' and '%s'", jop_text(op), jv_type_name(a), jv_type_name(b));
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ---- expressions -------------------------------------------------------- */

static jval eval(jctx *c, jscope *s, jnode *n);

static void eval_args(jctx *c, jscope *s, jnodes *l, jargs *out, size_t extra_kw) {
    memset(out, 0, sizeof *out);
    size_t np = 0, nk = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i]->kind == N_KWARG) nk++;
        else np++;
    }
    out->pos = ja_alloc(c->a, (np + 1) * sizeof(jval));
    out->kwv = ja_alloc(c->a, (nk + extra_kw + 1) * sizeof(jval));
    out->kwn = ja_alloc(c->a, (nk + extra_kw + 1) * sizeof(char *));
    for (size_t i = 0; i < l->n; i++) {
        jnode *a = l->v[i];
        if (a->kind == N_KWARG) {
            out->kwn[out->nkw] = a->str;
            out->kwv[out->nkw++] = eval(c, s, a->a);
        } else {
            out->pos[out->npos++] = eval(c, s, a);
        }
    }
}

static jval apply_filter(jctx *c, jscope *s, jnode *f, jval v) {
    jargs args;
    eval_args(c, s, &f->list, &args, 0);
    c->line = f->line;
    if (!f->impl) {
        bool known = false;
        jfilter_find(f->str, &known);
        if (known) jerr(c, "UnsupportedError", "filter '%s' is not supported by minfer", f->str);
        jerr(c, "TemplateRuntimeError", "No filter named '%s' found.", f->str);
    }
    return ((const jbuiltin *)f->impl)->fn(c, v, &args);
}

/* A filter chain whose innermost operand is NULL applies to `v` (filter
 * blocks and {% set x | f %}). */
static jval apply_chain(jctx *c, jscope *s, jnode *f, jval v) {
    if (!f) return v;
    if (f->a) v = apply_chain(c, s, f->a, v);
    return apply_filter(c, s, f, v);
}

static jval eval_inner(jctx *c, jscope *s, jnode *n) {
    c->line = n->line;
    switch (n->kind) {
    case N_CONST: return n->cval;
    case N_NAME: {
        jval *v = lookup(s, n->str);
        return v ? *v : jv_undeff(c->a, "'%s' is undefined", n->str);
    }
    case N_LIST:
    case N_TUPLE: {
        jval r = jv_list(c->a, n->list.n);
        r.f = n->kind == N_TUPLE ? JL_TUPLE : JL_LIST;
        for (size_t i = 0; i < n->list.n; i++) r.l->v[i] = eval(c, s, n->list.v[i]);
        r.l->n = n->list.n;
        return r;
    }
    case N_DICT: {
        jval r = jv_dict(c->a);
        for (size_t i = 0; i < n->list.n; i++) {
            jval k = eval(c, s, n->list.v[i]);
            if (k.t == JV_LIST && k.f != JL_TUPLE) jerr(c, "TypeError", "unhashable type: 'list'");
            if (k.t == JV_DICT) jerr(c, "TypeError", "unhashable type: 'dict'");
            jd_set(c->a, r.m, k, eval(c, s, n->list2.v[i]));
        }
        return r;
    }
    case N_GETATTR: return jgetattr(c, eval(c, s, n->a), n->str);
    case N_GETITEM: {
        jval obj = eval(c, s, n->a);
        jnode *k = n->b;
        if (k->kind == N_SLICE) {
            jval lo = k->a ? eval(c, s, k->a) : jv_none();
            jval hi = k->b ? eval(c, s, k->b) : jv_none();
            jval st = k->c ? eval(c, s, k->c) : jv_none();
            c->line = n->line;
            return do_slice(c, obj, lo, hi, st);
        }
        jval key = eval(c, s, k);
        c->line = n->line;
        return jgetitem(c, obj, key);
    }
    case N_CALL: {
        jval fn = eval(c, s, n->a);
        jargs args;
        eval_args(c, s, &n->list, &args, 0);
        c->line = n->line;
        return jcall(c, fn, &args);
    }
    case N_FILTER: return apply_filter(c, s, n, eval(c, s, n->a));
    case N_TEST: {
        jval v = eval(c, s, n->a);
        jargs args;
        eval_args(c, s, &n->list, &args, 0);
        c->line = n->line;
        if (!n->impl) {
            bool known = false;
            jtest_find(n->str, &known);
            if (known) jerr(c, "UnsupportedError", "test '%s' is not supported by minfer", n->str);
            jerr(c, "TemplateRuntimeError", "No test named '%s' found.", n->str);
        }
        return jv_bool(jv_truthy(((const jbuiltin *)n->impl)->fn(c, v, &args)));
    }
    case N_NOT: return jv_bool(!jv_truthy(eval(c, s, n->a)));
    case N_NEG:
    case N_POS: {
        jval v = eval(c, s, n->a);
        c->line = n->line;
        if (v.t == JV_UNDEF) jerr_undef(c, v);
        bool neg = n->kind == N_NEG;
        if (intlike(v)) {
            if (neg && as_int(v) == INT64_MIN) jerr(c, "OverflowError", "integer negation overflows");
            return jv_int(neg ? -as_int(v) : as_int(v));
        }
        if (v.t == JV_FLOAT) return jv_float(neg ? -v.d : v.d);
        jerr(c, "TypeError", "bad operand type for unary %s: '%s'", neg ? "-" : "+", jv_type_name(v));
    }
    case N_BINOP: {
        jval a = eval(c, s, n->a);
        jval b = eval(c, s, n->b);
        c->line = n->line;
        return binop(c, n->op, a, b);
    }
    case N_COMPARE: {
        jval left = eval(c, s, n->a);
        for (size_t i = 0; i < n->list.n; i++) {
            jval right = eval(c, s, n->list.v[i]->a);
            c->line = n->list.v[i]->line;
            if (!compare(c, n->list.v[i]->op, left, right)) return jv_bool(false);
            left = right;
        }
        return jv_bool(true);
    }
    case N_AND: {
        jval a = eval(c, s, n->a);
        return jv_truthy(a) ? eval(c, s, n->b) : a;
    }
    case N_OR: {
        jval a = eval(c, s, n->a);
        return jv_truthy(a) ? a : eval(c, s, n->b);
    }
    case N_COND:
        if (jv_truthy(eval(c, s, n->b))) return eval(c, s, n->a);
        if (n->c) return eval(c, s, n->c);
        return jv_undeff(c->a, "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
    default: jerr(c, "TemplateSyntaxError", "internal: unexpected node %d in expression", n->kind);
    }
}

static jval eval(jctx *c, jscope *s, jnode *n) {
    if (++g_eval_depth > MAX_EVAL_DEPTH) jerr(c, "LimitError", "template nests or recurses too deeply");
    jval v = eval_inner(c, s, n);
    g_eval_depth--;
    return v;
}

/* ---- statements --------------------------------------------------------- */

static void exec_body(jctx *c, jscope *s, jnodes *body);

static void assign(jctx *c, jscope *s, jnode *target, jval v) {
    if (target->kind == N_NAME) {
        set_var(c, s, target->str, v);
        return;
    }
    if (target->kind == N_NSREF) {
        jval *ns = lookup(s, target->str);
        if (!ns || ns->t != JV_NS) jerr(c, "TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        jd_set(c->a, ns->m, jv_str(target->str2), v);
        return;
    }
    jlist *items = jiter(c, v);
    if (items->n != target->list.n)
        jerr(c, "ValueError", "%s values to unpack (expected %zu, got %zu)", items->n < target->list.n ? "not enough" : "too many",
             target->list.n, items->n);
    for (size_t i = 0; i < items->n; i++) assign(c, s, target->list.v[i], items->v[i]);
}

/* Renders body into a fresh string (macro calls, set/filter blocks). */
static jval capture(jctx *c, jscope *s, jnodes *body) {
    jsb buf, *saved = c->out;
    sb_init(&buf, c->a);
    c->out = &buf;
    exec_body(c, s, body);
    c->out = saved;
    return jv_strn(buf.p ? buf.p : "", buf.n);
}

static jval call_macro(jctx *c, jfunc *f, jargs *args) {
    jnode *m = f->node;
    if (++c->call_depth > JCTX_MAX_CALL_DEPTH)
        jerr(c, "LimitError", "macro calls nested more than %d deep (runaway recursion?)", JCTX_MAX_CALL_DEPTH);
    jstep(c);
    jscope *s = new_scope(c, f->closure);
    jnodes *params = &m->list2;
    bool *given = ja_alloc(c->a, (params->n + 1) * sizeof(bool));
    jval varargs = jv_list(c->a, 0), kwargs = jv_dict(c->a);
    varargs.f = JL_TUPLE;
    for (size_t i = 0; i < args->npos; i++) {
        if (i < params->n) {
            set_var(c, s, params->v[i]->str, args->pos[i]);
            given[i] = true;
        } else if (m->op & MACRO_VARARGS) {
            jl_push(c->a, varargs.l, args->pos[i]);
        } else {
            jerr(c, "TypeError", "macro '%s' takes not more than %zu argument(s)", m->str ? m->str : "caller", params->n);
        }
    }
    jval caller = f->caller;
    for (size_t k = 0; k < args->nkw; k++) {
        size_t i = 0;
        while (i < params->n && strcmp(params->v[i]->str, args->kwn[k])) i++;
        if (i < params->n) {
            if (given[i]) jerr(c, "TypeError", "macro '%s' got multiple values for argument '%s'", m->str ? m->str : "caller", args->kwn[k]);
            set_var(c, s, params->v[i]->str, args->kwv[k]);
            given[i] = true;
        } else if (!strcmp(args->kwn[k], "caller")) {
            caller = args->kwv[k];
        } else if (m->op & MACRO_KWARGS) {
            jd_set(c->a, kwargs.m, jv_str(args->kwn[k]), args->kwv[k]);
        } else {
            jerr(c, "TypeError", "macro '%s' takes no keyword argument '%s'", m->str ? m->str : "caller", args->kwn[k]);
        }
    }
    for (size_t i = 0; i < params->n; i++) {
        if (given[i]) continue;
        jnode *p = params->v[i];
        set_var(c, s, p->str, p->a ? eval(c, s, p->a) : jv_undeff(c->a, "parameter '%s' was not provided", p->str));
    }
    set_var(c, s, "varargs", varargs);
    set_var(c, s, "kwargs", kwargs);
    if (caller.t != JV_UNDEF) set_var(c, s, "caller", caller);
    int saved_ctl = c->loop_ctl;
    c->loop_ctl = 0;
    jval r = capture(c, s, &m->list);
    c->loop_ctl = saved_ctl;
    c->call_depth--;
    return r;
}

jval jcall(jctx *c, jval fn, jargs *args) {
    if (fn.t == JV_UNDEF) jerr_undef(c, fn);
    if (fn.t != JV_FUNC) jerr(c, "TypeError", "'%s' object is not callable", jv_type_name(fn));
    jfunc *f = fn.fn;
    switch (f->kind) {
    case F_BUILTIN:
    case F_METHOD: return f->fn(c, f->self, args);
    case F_MACRO:
    case F_CALLER: return call_macro(c, f, args);
    case F_LOOP_CYCLE: {
        if (!args->npos) jerr(c, "TypeError", "no items for cycling given");
        return args->pos[f->self.lp->index0 % args->npos];
    }
    case F_LOOP_CHANGED: {
        jloop *L = f->self.lp;
        jval cur = jv_list(c->a, args->npos);
        if (args->npos) memcpy(cur.l->v, args->pos, args->npos * sizeof(jval));
        cur.l->n = args->npos;
        bool changed = !L->has_changed || !jv_eq(L->last_changed, cur);
        L->last_changed = cur;
        L->has_changed = true;
        return jv_bool(changed);
    }
    }
    jerr(c, "TypeError", "object is not callable");
}

static void exec_for(jctx *c, jscope *s, jnode *n) {
    jval seq = eval(c, s, n->a);
    c->line = n->line;
    jlist *items = jiter(c, seq);
    if (n->b) {
        /* `for x in xs if cond`: filter first, so loop.index/length count
         * only the kept items */
        jlist *kept = jv_list(c->a, 0).l;
        jscope *fs = new_scope(c, s);
        for (size_t i = 0; i < items->n; i++) {
            jstep(c);
            reset_scope(fs);
            assign(c, fs, n->target, items->v[i]);
            if (jv_truthy(eval(c, fs, n->b))) jl_push(c->a, kept, items->v[i]);
        }
        items = kept;
    }
    if (!items->n) {
        exec_body(c, new_scope(c, s), &n->list2);
        return;
    }
    jloop *L = ja_alloc(c->a, sizeof *L);
    L->items = items;
    L->depth = 1; /* only recursive loops (unsupported) go deeper */
    jval lv = {.t = JV_LOOP};
    lv.lp = L;
    jscope *it = new_scope(c, s);
    for (size_t i = 0; i < items->n; i++) {
        jstep(c);
        /* each iteration starts from the enclosing scope's values: a
         * {% set %} inside the body does not survive to the next iteration.
         * The scope's storage is reused so long loops allocate nothing. */
        reset_scope(it);
        L->index0 = i;
        set_var(c, it, "loop", lv);
        c->line = n->line;
        assign(c, it, n->target, items->v[i]);
        exec_body(c, it, &n->list);
        if (c->loop_ctl) {
            int ctl = c->loop_ctl;
            c->loop_ctl = 0;
            if (ctl == 1) break;
        }
    }
}

static void exec_stmt(jctx *c, jscope *s, jnode *n) {
    c->line = n->line;
    jstep(c);
    switch (n->kind) {
    case S_TEXT: sb_put(c->out, n->cval.s.p, n->cval.s.n); return;
    case S_OUTPUT: jv_str_append(c->out, eval(c, s, n->a)); return;
    case S_IF:
        if (jv_truthy(eval(c, s, n->a))) exec_body(c, s, &n->list);
        else exec_body(c, s, &n->list2);
        return;
    case S_FOR: exec_for(c, s, n); return;
    case S_SET: {
        jval v = eval(c, s, n->a);
        c->line = n->line;
        assign(c, s, n->target, v);
        return;
    }
    case S_SETBLOCK: {
        jval v = capture(c, new_scope(c, s), &n->list);
        v = apply_chain(c, s, n->a, v);
        assign(c, s, n->target, v);
        return;
    }
    case S_FILTERBLOCK: {
        jval v = capture(c, new_scope(c, s), &n->list);
        jv_str_append(c->out, apply_chain(c, s, n->a, v));
        return;
    }
    case S_MACRO: {
        jval f = {.t = JV_FUNC};
        f.fn = ja_alloc(c->a, sizeof *f.fn);
        f.fn->kind = F_MACRO;
        f.fn->name = n->str;
        f.fn->node = n;
        f.fn->closure = s;
        set_var(c, s, n->str, f);
        return;
    }
    case S_CALLBLOCK: {
        jval caller = {.t = JV_FUNC};
        caller.fn = ja_alloc(c->a, sizeof *caller.fn);
        caller.fn->kind = F_CALLER;
        caller.fn->name = "caller";
        caller.fn->node = n;
        caller.fn->closure = s;
        jnode *call = n->a;
        jval fn = eval(c, s, call->a);
        jargs args;
        eval_args(c, s, &call->list, &args, 1);
        args.kwn[args.nkw] = "caller";
        args.kwv[args.nkw++] = caller;
        c->line = n->line;
        jv_str_append(c->out, jcall(c, fn, &args));
        return;
    }
    case S_WITH: {
        jscope *inner = new_scope(c, s);
        for (size_t i = 0; i < n->list2.n; i++) {
            jnode *st = n->list2.v[i];
            assign(c, inner, st->target, eval(c, s, st->a));
        }
        exec_body(c, inner, &n->list);
        return;
    }
    case S_BREAK: c->loop_ctl = 1; return;
    case S_CONTINUE: c->loop_ctl = 2; return;
    default: jerr(c, "TemplateSyntaxError", "internal: unexpected node %d in body", n->kind);
    }
}

static void exec_body(jctx *c, jscope *s, jnodes *body) {
    if (++g_eval_depth > MAX_EVAL_DEPTH) jerr(c, "LimitError", "template nests or recurses too deeply");
    for (size_t i = 0; i < body->n && !c->loop_ctl; i++) exec_stmt(c, s, body->v[i]);
    g_eval_depth--;
}

void jrender(jctx *c, jnodes *body) {
    g_eval_depth = 0;
    if (!c->max_steps) c->max_steps = JCTX_MAX_STEPS;
    exec_body(c, c->globals, body);
}
