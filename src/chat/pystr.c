/* pystr.c - Python string operations over UTF-8 (code point aware), see pystr.h. */
#include "chat/pystr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static jval mkstr(jsb *b, uint8_t flags) {
    jval r = jv_strn(b->p ? b->p : "", b->n);
    r.f = flags;
    return r;
}

static bool is_cased(uint32_t cp) {
    return utf8proc_toupper((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp ||
           utf8proc_tolower((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp;
}

jval py_case(jctx *c, jval s, char mode) {
    jsb b;
    sb_init(&b, c->a);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.s.n;) {
        uint32_t cp;
        size_t k = u8_decode(s.s.p, s.s.n, i, &cp);
        uint32_t out = cp;
        switch (mode) {
        case 'u': out = (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp); break;
        case 'l': out = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp); break;
        case 'c':
            out = first ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
            break;
        case 't':
            out = prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
            prev_cased = is_cased(cp);
            break;
        case 'j': {
            /* Jinja's |title: words start after runs of '-', whitespace, ( { [ < */
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || u8_is_space(cp);
            out = sep ? cp : prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
            prev_cased = !sep;
            break;
        }
        }
        if (cp == 0xDF && (mode == 'u' || ((mode == 'c' || mode == 't') && out != 0xDF)))
            sb_puts(&b, mode == 'u' ? "SS" : "Ss"); /* the one special casing seen in practice */
        else if (out == cp) sb_put(&b, s.s.p + i, k);
        else sb_utf8(&b, out);
        first = false;
        i += k;
    }
    return mkstr(&b, s.f);
}

static bool in_chars(uint32_t cp, const jval *chars) {
    if (!chars) return u8_is_space(cp);
    for (size_t i = 0; i < chars->s.n;) {
        uint32_t x;
        i += u8_decode(chars->s.p, chars->s.n, i, &x);
        if (x == cp) return true;
    }
    return false;
}

/* byte length of the code point ending at `end` */
static size_t prev_cp(const char *s, size_t end, uint32_t *cp) {
    size_t st = end - 1;
    while (st > 0 && end - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
    size_t k = u8_decode(s, end, st, cp);
    if (st + k != end) { /* not a clean sequence: treat the last byte alone */
        *cp = (unsigned char)s[end - 1];
        return 1;
    }
    return k;
}

jval py_strip(jctx *c, jval s, const jval *chars, char which) {
    if (chars && chars->t == JV_NONE) chars = NULL;
    if (chars && chars->t != JV_STR) jerr(c, "TypeError", "strip arg must be None or str");
    size_t a = 0, b = s.s.n;
    if (which != 'r')
        while (a < b) {
            uint32_t cp;
            size_t k = u8_decode(s.s.p, b, a, &cp);
            if (!in_chars(cp, chars)) break;
            a += k;
        }
    if (which != 'l')
        while (b > a) {
            uint32_t cp;
            size_t k = prev_cp(s.s.p, b, &cp);
            if (!in_chars(cp, chars)) break;
            b -= k;
        }
    jval r = jv_strn(s.s.p + a, b - a);
    r.f = s.f;
    return r;
}

static void push_piece(jctx *c, jlist *l, jval s, size_t a, size_t b) {
    jval p = jv_strn(s.s.p + a, b - a);
    p.f = s.f;
    jl_push(c->a, l, p);
}

jval py_split(jctx *c, jval s, const jval *sep, int64_t maxsplit, bool from_right) {
    jval r = jv_list(c->a, 0);
    const char *p = s.s.p;
    size_t n = s.s.n;
    if (sep && sep->t == JV_NONE) sep = NULL;
    if (sep && sep->t != JV_STR) jerr(c, "TypeError", "must be str or None, not %s", jv_type_name(*sep));
    if (sep && !sep->s.n) jerr(c, "ValueError", "empty separator");
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (!from_right) {
        size_t i = 0;
        if (!sep) {
            for (;;) {
                while (i < n) { /* skip whitespace */
                    uint32_t cp;
                    size_t k = u8_decode(p, n, i, &cp);
                    if (!u8_is_space(cp)) break;
                    i += k;
                }
                if (i >= n) break;
                if (maxsplit-- == 0) {
                    /* the rest, with trailing whitespace kept */
                    push_piece(c, r.l, s, i, n);
                    break;
                }
                size_t st = i;
                while (i < n) {
                    uint32_t cp;
                    size_t k = u8_decode(p, n, i, &cp);
                    if (u8_is_space(cp)) break;
                    i += k;
                }
                push_piece(c, r.l, s, st, i);
            }
            return r;
        }
        for (;;) {
            const char *hit = maxsplit > 0 ? memmem(p + i, n - i, sep->s.p, sep->s.n) : NULL;
            if (!hit) {
                push_piece(c, r.l, s, i, n);
                return r;
            }
            push_piece(c, r.l, s, i, (size_t)(hit - p));
            i = (size_t)(hit - p) + sep->s.n;
            maxsplit--;
        }
    }
    /* rsplit: collect from the right, then reverse */
    size_t end = n;
    if (!sep) {
        for (;;) {
            while (end > 0) {
                uint32_t cp;
                size_t k = prev_cp(p, end, &cp);
                if (!u8_is_space(cp)) break;
                end -= k;
            }
            if (end == 0) break;
            if (maxsplit-- == 0) {
                push_piece(c, r.l, s, 0, end);
                break;
            }
            size_t st = end;
            while (st > 0) {
                uint32_t cp;
                size_t k = prev_cp(p, st, &cp);
                if (u8_is_space(cp)) break;
                st -= k;
            }
            push_piece(c, r.l, s, st, end);
            end = st;
        }
    } else {
        for (;;) {
            const char *hit = NULL;
            if (maxsplit > 0 && end >= sep->s.n)
                for (size_t q = end - sep->s.n + 1; q-- > 0;)
                    if (!memcmp(p + q, sep->s.p, sep->s.n)) {
                        hit = p + q;
                        break;
                    }
            if (!hit) {
                push_piece(c, r.l, s, 0, end);
                break;
            }
            push_piece(c, r.l, s, (size_t)(hit - p) + sep->s.n, end);
            end = (size_t)(hit - p);
            maxsplit--;
        }
    }
    for (size_t i = 0, j = r.l->n; i + 1 < j; i++, j--) {
        jval t = r.l->v[i];
        r.l->v[i] = r.l->v[j - 1];
        r.l->v[j - 1] = t;
    }
    return r;
}

static bool is_line_break(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

jval py_splitlines(jctx *c, jval s, bool keepends) {
    jval r = jv_list(c->a, 0);
    size_t i = 0, st = 0, n = s.s.n;
    while (i < n) {
        uint32_t cp;
        size_t k = u8_decode(s.s.p, n, i, &cp);
        if (is_line_break(cp)) {
            size_t eol = i + k;
            if (cp == '\r' && eol < n && s.s.p[eol] == '\n') eol++;
            push_piece(c, r.l, s, st, keepends ? eol : i);
            st = i = eol;
        } else {
            i += k;
        }
    }
    if (st < n) push_piece(c, r.l, s, st, n);
    return r;
}

jval py_replace(jctx *c, jval s, jval old, jval rep, int64_t count) {
    jsb b;
    sb_init(&b, c->a);
    if (count < 0) count = INT64_MAX;
    if (!old.s.n) {
        /* Python inserts `rep` before every character and at the end */
        size_t i = 0;
        while (i <= s.s.n) {
            if (count-- > 0) sb_put(&b, rep.s.p, rep.s.n);
            else {
                sb_put(&b, s.s.p + i, s.s.n - i);
                break;
            }
            if (i == s.s.n) break;
            uint32_t cp;
            size_t k = u8_decode(s.s.p, s.s.n, i, &cp);
            sb_put(&b, s.s.p + i, k);
            i += k;
        }
        return mkstr(&b, s.f);
    }
    size_t i = 0;
    while (count > 0) {
        const char *hit = memmem(s.s.p + i, s.s.n - i, old.s.p, old.s.n);
        if (!hit) break;
        sb_put(&b, s.s.p + i, (size_t)(hit - s.s.p) - i);
        sb_put(&b, rep.s.p, rep.s.n);
        i = (size_t)(hit - s.s.p) + old.s.n;
        count--;
    }
    sb_put(&b, s.s.p + i, s.s.n - i);
    return mkstr(&b, s.f);
}

/* ---- printf-style `%` --------------------------------------------------- */

static double to_double(jctx *c, jval v, char conv) {
    if (!jv_is_num(v)) jerr(c, "TypeError", "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
    return jv_num(v);
}

jval jpercent_format(jctx *c, jval fmt, jval args) {
    jsb b;
    sb_init(&b, c->a);
    jlist *seq = NULL;
    size_t next = 0;
    if (args.t == JV_LIST && args.f == JL_TUPLE) seq = args.l;
    bool used_single = false;
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    while (p < e) {
        const char *pc = memchr(p, '%', (size_t)(e - p));
        if (!pc) {
            sb_put(&b, p, (size_t)(e - p));
            break;
        }
        sb_put(&b, p, (size_t)(pc - p));
        p = pc + 1;
        if (p >= e) jerr(c, "ValueError", "incomplete format");
        jval arg = {0};
        bool have_arg = false;
        if (*p == '(') {
            const char *q = memchr(p, ')', (size_t)(e - p));
            if (!q) jerr(c, "ValueError", "incomplete format key");
            if (args.t != JV_DICT) jerr(c, "TypeError", "format requires a mapping");
            jval *v = jd_get(args.m, jv_strn(p + 1, (size_t)(q - p - 1)));
            if (!v) jerr(c, "KeyError", "'%.*s'", (int)(q - p - 1), p + 1);
            arg = *v;
            have_arg = true;
            p = q + 1;
        }
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (p < e && strchr("-+ #0", *p) && sn < 8) spec[sn++] = *p++;
        while (p < e && *p >= '0' && *p <= '9' && sn < 16) spec[sn++] = *p++;
        if (p < e && *p == '.') {
            spec[sn++] = *p++;
            while (p < e && *p >= '0' && *p <= '9' && sn < 24) spec[sn++] = *p++;
        }
        if (p >= e) jerr(c, "ValueError", "incomplete format");
        char conv = *p++;
        if (conv == '%') {
            sb_putc(&b, '%');
            continue;
        }
        if (!have_arg) {
            if (seq) {
                if (next >= seq->n) jerr(c, "TypeError", "not enough arguments for format string");
                arg = seq->v[next++];
            } else {
                if (used_single) jerr(c, "TypeError", "not enough arguments for format string");
                arg = args;
                used_single = true;
            }
        }
        char out[512];
        switch (conv) {
        case 's':
        case 'r': {
            jsb t;
            sb_init(&t, c->a);
            if (conv == 's') jv_str_append(&t, arg);
            else jv_repr_append(&t, arg);
            spec[sn++] = 's';
            spec[sn] = 0;
            if (sn == 2) sb_put(&b, t.p ? t.p : "", t.n);
            else sb_printf(&b, spec, t.p ? t.p : "");
            break;
        }
        case 'd': case 'i': case 'x': case 'X': case 'o': case 'c': {
            if (!jv_is_num(arg)) jerr(c, "TypeError", "%%%c format: a number is required, not %s", conv, jv_type_name(arg));
            long long v = arg.t == JV_FLOAT ? (long long)arg.d : arg.t == JV_INT ? (long long)arg.i : arg.b;
            if (conv == 'c') {
                sb_utf8(&b, (uint32_t)v);
                break;
            }
            spec[sn++] = 'l';
            spec[sn++] = 'l';
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            snprintf(out, sizeof out, spec, v);
            sb_puts(&b, out);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
            spec[sn++] = conv;
            spec[sn] = 0;
            snprintf(out, sizeof out, spec, to_double(c, arg, conv));
            sb_puts(&b, out);
            break;
        default: jerr(c, "ValueError", "unsupported format character '%c'", conv);
        }
    }
    /* Python only complains about unused arguments that are not subscriptable
     * (lists, dicts and Jinja's Undefined count as mappings here) */
    bool mapping_like = args.t == JV_DICT || args.t == JV_UNDEF || (args.t == JV_LIST && args.f == JL_LIST);
    if ((seq && next < seq->n) || (!seq && !mapping_like && !used_single))
        jerr(c, "TypeError", "not all arguments converted during string formatting");
    return mkstr(&b, 0);
}

/* ---- str.format ------------------------------------------------------- */

static void format_spec(jctx *c, jsb *b, jval v, const char *spec, size_t n) {
    /* [[fill]align][sign][0][width][.precision][type] */
    char fill = ' ', align = 0, sign = 0, type = 0;
    size_t i = 0;
    int width = 0, prec = -1;
    if (n >= 2 && strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < n && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < n && spec[i] == '0') {
        if (!align) {
            fill = '0';
            align = '=';
        }
        i++;
    }
    while (i < n && spec[i] >= '0' && spec[i] <= '9') width = width * 10 + (spec[i++] - '0');
    if (i < n && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < n && spec[i] >= '0' && spec[i] <= '9') prec = prec * 10 + (spec[i++] - '0');
    }
    if (i < n) type = spec[i++];
    if (i != n || width > 10000 || prec > 1000) jerr(c, "ValueError", "unsupported format specifier '%.*s'", (int)n, spec);
    jsb t;
    sb_init(&t, c->a);
    char num[1100];
    if (type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%') {
        if (!jv_is_num(v)) jerr(c, "ValueError", "unknown format code '%c' for object of type '%s'", type, jv_type_name(v));
        double d = jv_num(v) * (type == '%' ? 100 : 1);
        char f[16];
        snprintf(f, sizeof f, "%%%s.%d%c", sign == '+' ? "+" : sign == ' ' ? " " : "", prec < 0 ? 6 : prec, type == '%' ? 'f' : type);
        snprintf(num, sizeof num, f, d);
        sb_puts(&t, num);
        if (type == '%') sb_putc(&t, '%');
    } else if (type == 'd' || ((v.t == JV_INT) && !type)) {
        if (v.t != JV_INT && v.t != JV_BOOL) jerr(c, "ValueError", "unknown format code 'd' for object of type '%s'", jv_type_name(v));
        long long x = v.t == JV_INT ? (long long)v.i : v.b;
        if (sign == '+' && x >= 0) sb_putc(&t, '+');
        else if (sign == ' ' && x >= 0) sb_putc(&t, ' ');
        sb_printf(&t, "%lld", x);
    } else if (!type || type == 's') {
        jv_str_append(&t, v);
        if (prec >= 0 && t.n) t.n = u8_offset(t.p, t.n, (size_t)prec);
    } else {
        jerr(c, "ValueError", "unsupported format type '%c'", type);
    }
    size_t len = t.p ? u8_len(t.p, t.n) : 0;
    size_t pad = (size_t)width > len ? (size_t)width - len : 0;
    if (!align) align = (jv_is_num(v) && v.t != JV_BOOL) ? '>' : '<';
    size_t left = align == '>' || align == '=' ? pad : align == '^' ? pad / 2 : 0;
    size_t start = 0;
    if (align == '=' && t.n && (t.p[0] == '-' || t.p[0] == '+' || t.p[0] == ' ')) {
        sb_putc(b, t.p[0]);
        start = 1;
    }
    for (size_t k = 0; k < left; k++) sb_putc(b, fill);
    if (t.n > start) sb_put(b, t.p + start, t.n - start);
    for (size_t k = 0; k < pad - left; k++) sb_putc(b, fill);
}

jval py_format(jctx *c, jval fmt, jargs *args) {
    jsb b;
    sb_init(&b, c->a);
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    size_t auto_idx = 0;
    while (p < e) {
        if (*p == '{' && p + 1 < e && p[1] == '{') {
            sb_putc(&b, '{');
            p += 2;
            continue;
        }
        if (*p == '}' && p + 1 < e && p[1] == '}') {
            sb_putc(&b, '}');
            p += 2;
            continue;
        }
        if (*p == '}') jerr(c, "ValueError", "Single '}' encountered in format string");
        if (*p != '{') {
            sb_putc(&b, *p++);
            continue;
        }
        const char *q = ++p;
        while (q < e && *q != '}') q++;
        if (q >= e) jerr(c, "ValueError", "Single '{' encountered in format string");
        const char *fe = p;
        while (fe < q && *fe != '!' && *fe != ':') fe++;
        jval v;
        if (fe == p) {
            if (auto_idx >= args->npos) jerr(c, "IndexError", "Replacement index %zu out of range for positional args tuple", auto_idx);
            v = args->pos[auto_idx++];
        } else if (*p >= '0' && *p <= '9') {
            size_t idx = (size_t)strtoul(p, NULL, 10);
            if (idx >= args->npos) jerr(c, "IndexError", "Replacement index %zu out of range for positional args tuple", idx);
            v = args->pos[idx];
        } else {
            size_t k = 0;
            while (k < args->nkw && (strlen(args->kwn[k]) != (size_t)(fe - p) || memcmp(args->kwn[k], p, (size_t)(fe - p)))) k++;
            if (k == args->nkw) jerr(c, "KeyError", "'%.*s'", (int)(fe - p), p);
            v = args->kwv[k];
        }
        const char *sp = fe;
        if (sp < q && *sp == '!') {
            if (sp + 1 < q && sp[1] == 'r') {
                jsb t;
                sb_init(&t, c->a);
                jv_repr_append(&t, v);
                v = jv_strn(t.p, t.n);
            } else if (sp + 1 < q && sp[1] == 's') {
                v = jv_to_str(c->a, v);
            } else {
                jerr(c, "ValueError", "unknown conversion specifier in format string");
            }
            sp += 2;
        }
        if (sp < q && *sp == ':') format_spec(c, &b, v, sp + 1, (size_t)(q - sp - 1));
        else if (sp == q) jv_str_append(&b, v);
        else jerr(c, "ValueError", "invalid format field");
        p = q + 1;
    }
    return mkstr(&b, 0);
}
