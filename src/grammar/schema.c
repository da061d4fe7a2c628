/* schema.c - JSON Schema -> GBNF.
 *
 * Supported: type (one or a list), properties / required /
 * additionalProperties, enum / const, items / prefixItems / minItems /
 * maxItems, minLength / maxLength, pattern (regex.c), format date / time /
 * date-time / uuid, minimum / maximum / exclusiveMinimum / exclusiveMaximum
 * (intrange.c; on numbers whole bounds only), $ref to "#..." JSON pointers ($defs,
 * definitions, recursion), anyOf / oneOf, allOf of object schemas (merged),
 * and the annotations (title, description, ...). Every other keyword is
 * refused by name: a grammar that silently ignored a constraint would
 * produce output the schema rejects.
 *
 * Choices: properties come out in the schema's order, required ones always
 * and optional ones optionally; extra properties only where the schema has no
 * `properties` (an open map); oneOf is generated as anyOf (exact when the
 * alternatives are disjoint, as in tagged unions); each string character in
 * one JSON spelling (no \u escape where a plain character will do). */
#include "minfer.h"
#include "core/error.h"
#include "sbuf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rule {
    char *name;
    sbuf body;
    char *ref; /* the $ref this rule stands for, if any */
} rule;

typedef struct conv {
    json_t *root;
    rule *r;
    size_t n, cap;
    mf_status st;
    unsigned depth;
} conv;

static mf_status fail(conv *c, mf_status code, const char *path, const char *fmt, const char *arg) {
    if (c->st) return c->st;
    char msg[300];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    c->st = mf_err(code, "json schema: %s (at %s)", msg, *path ? path : "the root");
    return c->st;
}

/* A rule name from a hint, made unique. */
static rule *new_rule(conv *c, const char *hint) {
    if (c->st) return NULL;
    char base[64];
    size_t k = 0;
    for (const char *p = hint; *p && k < sizeof base - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        base[k++] = ok ? ch : '-';
    }
    if (!k) base[k++] = 'r';
    base[k] = 0;
    char name[96];
    snprintf(name, sizeof name, "%s", base);
    for (unsigned i = 1;; i++) {
        bool used = false;
        for (size_t j = 0; j < c->n && !used; j++) used = !strcmp(c->r[j].name, name);
        if (!used) break;
        snprintf(name, sizeof name, "%s-%u", base, i);
    }
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 16;
        rule *q = realloc(c->r, sizeof *q * nc);
        if (!q) { c->st = mf_err(MF_ERR_NOMEM, "out of memory"); return NULL; }
        c->r = q;
        c->cap = nc;
    }
    rule *r = &c->r[c->n];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    if (!r->name) { c->st = mf_err(MF_ERR_NOMEM, "out of memory"); return NULL; }
    c->n++;
    return r;
}

static rule *find_rule(conv *c, const char *name) {
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->r[i].name, name)) return &c->r[i];
    return NULL;
}

/* A fixed helper rule, defined once; returns its name. */
static const char *prim(conv *c, const char *name) {
    static const struct { const char *name, *body; } P[] = {
        {"ws", "[ \\t\\n]{0,4}"},
        {"char", "[^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" uhex )"},
        {"uhex", "[0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex"},
        {"hex", "[0-9a-fA-F]"},
        {"string", "\"\\\"\" char* \"\\\"\""},
        {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
        {"number", "integer ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?"},
        {"boolean", "\"true\" | \"false\""},
        {"null", "\"null\""},
        {"value", "object | array | string | number | boolean | null"},
        {"object", "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\""},
        {"array", "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\""},
        /* days per month; the 29th of February only in leap years */
        {"date", "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                 "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                 "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | leap-year \"-02-29\""},
        {"leap-year", "[0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) \"00\""},
        {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
                 "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
        {"date-time", "date \"T\" time"},
        {"uuid", "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}"},
    };
    static const char *deps[][4] = {
        {"ws"}, {"char", "uhex"}, {"uhex", "hex"}, {"hex"}, {"string", "char"}, {"integer"}, {"number", "integer"},
        {"boolean"}, {"null"}, {"value", "object", "array", "string"}, {"object", "ws", "string", "value"},
        {"array", "ws", "value"}, {"date", "leap-year"}, {"leap-year"}, {"time"}, {"date-time", "date", "time"}, {"uuid", "hex"},
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
        if (strcmp(P[i].name, name)) continue;
        if (find_rule(c, name)) return P[i].name;
        rule *r = new_rule(c, name);
        if (!r) return name;
        g_sb_str(&r->body, P[i].body);
        for (int d = 1; d < 4 && deps[i][d]; d++) prim(c, deps[i][d]);
        if (!strcmp(name, "value")) { prim(c, "number"); prim(c, "boolean"); prim(c, "null"); }
        return P[i].name;
    }
    return name;
}

/* A GBNF string literal for the bytes of s. */
static void sb_literal(sbuf *b, const char *s) {
    g_sb_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { char e[3] = {'\\', (char)*p, 0}; g_sb_str(b, e); }
        else if (*p < 0x20 || *p == 0x7F) g_sb_fmt(b, "\\x%02X", *p);
        else g_sb_add(b, (const char *)p, 1);
    }
    g_sb_str(b, "\"");
}

/* The compact JSON text of v as a GBNF literal. */
static void sb_json_literal(conv *c, sbuf *b, json_t *v) {
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!t) { c->st = mf_err(MF_ERR_NOMEM, "out of memory"); return; }
    sb_literal(b, t);
    free(t);
}

static const char *const annotations[] = {"title", "description", "$schema", "$id", "$comment", "default",
                                          "examples", "$defs", "definitions", "readOnly", "writeOnly",
                                          "deprecated", NULL};
static const char *const handled[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                      "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
                                      "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                      "exclusiveMaximum", "$ref", "anyOf", "oneOf", "allOf", NULL};
static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};

static bool in_list(const char *k, const char *const *l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return true;
    return false;
}

static void gen(conv *c, json_t *s, const char *hint, const char *path, sbuf *out);

/* Generates s as a rule of its own and appends a reference to it. */
static void gen_rule(conv *c, json_t *s, const char *hint, const char *path, sbuf *out) {
    rule *r = new_rule(c, hint);
    if (!r) return;
    size_t idx = (size_t)(r - c->r);
    char *name = strdup(r->name);
    sbuf body = {0};
    gen(c, s, hint, path, &body);
    c->r[idx].body = body; /* c->r may have moved */
    g_sb_str(out, name);
    free(name);
}

static void sub_path(char *dst, size_t cap, const char *path, const char *a, const char *b) {
    snprintf(dst, cap, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

static bool get_count(conv *c, json_t *s, const char *key, const char *path, long long *out) {
    json_t *v = json_object_get(s, key);
    if (!v) return false;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 10000) {
        fail(c, MF_ERR_UNSUPPORTED, path, "%s must be an integer from 0 to 10000", key);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

/* "{m}", "{m,}" or "{m,n}" */
static void sb_count(sbuf *b, long long lo, long long hi) {
    if (hi < 0) g_sb_fmt(b, "{%lld,}", lo);
    else if (hi == lo) g_sb_fmt(b, "{%lld}", lo);
    else g_sb_fmt(b, "{%lld,%lld}", lo, hi);
}

static void gen_object(conv *c, json_t *s, const char *hint, const char *path, sbuf *out) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) { fail(c, MF_ERR_FORMAT, path, "properties must be an object%s", NULL); return; }
    if (req && !json_is_array(req)) { fail(c, MF_ERR_FORMAT, path, "required must be an array%s", NULL); return; }
    size_t nprops = props ? json_object_size(props) : 0;
    if (addl && !json_is_boolean(addl) && !json_is_object(addl)) {
        fail(c, MF_ERR_FORMAT, path, "additionalProperties must be a boolean or a schema%s", NULL);
        return;
    }
    if (!nprops && (!req || !json_array_size(req))) {
        if (json_is_false(addl)) { g_sb_str(out, "\"{\" ws \"}\""); prim(c, "ws"); return; }
        if (!addl || json_is_true(addl)) { g_sb_str(out, prim(c, "object")); return; }
        /* an open map: string keys, values of the additionalProperties schema */
        char p2[512], h2[96];
        sub_path(p2, sizeof p2, path, "additionalProperties", NULL);
        snprintf(h2, sizeof h2, "%s-value", hint);
        sbuf v = {0};
        gen_rule(c, addl, h2, p2, &v);
        prim(c, "string");
        prim(c, "ws");
        g_sb_fmt(out, "\"{\" ws ( string ws \":\" ws %s ws ( \",\" ws string ws \":\" ws %s ws )* )? \"}\"", v.s ? v.s : "",
               v.s ? v.s : "");
        free(v.s);
        return;
    }
    if (json_is_object(addl)) {
        fail(c, MF_ERR_UNSUPPORTED, path, "additionalProperties with a schema beside properties is not supported%s", NULL);
        return;
    }
    /* member expressions: required ones (in property order, then required names
     * without a schema), then the optional ones */
    size_t cap = nprops + (req ? json_array_size(req) : 0) + 1, nreq = 0, nopt = 0;
    char **reqm = calloc(cap, sizeof *reqm), **optm = calloc(cap, sizeof *optm);
    if (!reqm || !optm) { c->st = mf_err(MF_ERR_NOMEM, "out of memory"); free(reqm); free(optm); return; }
    const char *key;
    json_t *sub;
    prim(c, "ws");
    json_object_foreach(props, key, sub) {
        bool is_req = false;
        for (size_t i = 0; req && i < json_array_size(req); i++)
            if (json_is_string(json_array_get(req, i)) && !strcmp(json_string_value(json_array_get(req, i)), key))
                is_req = true;
        sbuf m = {0};
        json_t *k = json_string(key);
        sb_json_literal(c, &m, k);
        json_decref(k);
        g_sb_str(&m, " ws \":\" ws ");
        char p2[512], h2[96];
        sub_path(p2, sizeof p2, path, "properties", key);
        snprintf(h2, sizeof h2, "%s-%s", hint, key);
        gen_rule(c, sub, h2, p2, &m);
        g_sb_str(&m, " ws");
        if (m.oom) c->st = mf_err(MF_ERR_NOMEM, "out of memory");
        if (is_req) reqm[nreq++] = m.s;
        else optm[nopt++] = m.s;
    }
    for (size_t i = 0; req && i < json_array_size(req) && !c->st; i++) {
        json_t *k = json_array_get(req, i);
        if (!json_is_string(k)) { fail(c, MF_ERR_FORMAT, path, "required must list strings%s", NULL); break; }
        if (props && json_object_get(props, json_string_value(k))) continue;
        if (json_is_false(addl)) {
            fail(c, MF_ERR_FORMAT, path, "'%s' is required but additionalProperties is false", json_string_value(k));
            break;
        }
        sbuf m = {0};
        sb_json_literal(c, &m, k);
        g_sb_fmt(&m, " ws \":\" ws %s ws", prim(c, "value"));
        reqm[nreq++] = m.s;
    }
    g_sb_str(out, "\"{\" ws");
    for (size_t i = 0; i < nreq; i++) g_sb_fmt(out, "%s %s", i ? " \",\" ws" : "", reqm[i] ? reqm[i] : "");
    if (nreq) {
        for (size_t i = 0; i < nopt; i++) g_sb_fmt(out, " ( \",\" ws %s )?", optm[i] ? optm[i] : "");
    } else if (nopt) { /* the first present optional member has no comma before it */
        g_sb_str(out, " (");
        for (size_t i = 0; i < nopt; i++) {
            g_sb_fmt(out, "%s %s", i ? " |" : "", optm[i] ? optm[i] : "");
            for (size_t j = i + 1; j < nopt; j++) g_sb_fmt(out, " ( \",\" ws %s )?", optm[j] ? optm[j] : "");
        }
        g_sb_str(out, " )?");
    }
    g_sb_str(out, " \"}\"");
    for (size_t i = 0; i < nreq; i++) free(reqm[i]);
    for (size_t i = 0; i < nopt; i++) free(optm[i]);
    free(reqm);
    free(optm);
}

/* Arrays: prefixItems give the first elements their own schemas (any of them
 * may be left off from the end), items the rest (false: none); minItems and
 * maxItems bound the total. */
static void gen_array(conv *c, json_t *s, const char *hint, const char *path, sbuf *out) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long long lo = 0, hi = -1;
    get_count(c, s, "minItems", path, &lo);
    get_count(c, s, "maxItems", path, &hi);
    if (c->st) return;
    if (hi >= 0 && hi < lo) { fail(c, MF_ERR_FORMAT, path, "maxItems below minItems%s", NULL); return; }
    if (items && json_is_array(items)) {
        fail(c, MF_ERR_UNSUPPORTED, path, "items as a list (draft-07 tuples) is not supported: use prefixItems%s", NULL);
        return;
    }
    if (prefix && !json_is_array(prefix)) { fail(c, MF_ERR_FORMAT, path, "prefixItems must be a list%s", NULL); return; }
    size_t k = prefix ? json_array_size(prefix) : 0;
    bool no_rest = json_is_false(items);
    if (no_rest && lo > (long long)k) { fail(c, MF_ERR_FORMAT, path, "minItems above the prefixItems count with items false%s", NULL); return; }
    if (no_rest && (hi < 0 || hi > (long long)k)) hi = (long long)k;
    prim(c, "ws");
    g_sb_str(out, "\"[\" ws");
    size_t open = 0, i;
    for (i = 0; i < k && (hi < 0 || (long long)i < hi); i++) {
        char p2[512], h2[96], idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        sub_path(p2, sizeof p2, path, "prefixItems", idx);
        snprintf(h2, sizeof h2, "%s-%zu", hint, i);
        if ((long long)i >= lo) { g_sb_str(out, " ("); open++; }
        g_sb_str(out, i ? " \",\" ws " : " ");
        gen_rule(c, json_array_get(prefix, i), h2, p2, out);
        g_sb_str(out, " ws");
    }
    if (!no_rest && (hi < 0 || hi > (long long)k)) {
        sbuf it = {0};
        char p2[512], h2[96];
        sub_path(p2, sizeof p2, path, "items", NULL);
        snprintf(h2, sizeof h2, "%s-item", hint);
        if (items) gen_rule(c, items, h2, p2, &it);
        else g_sb_str(&it, prim(c, "value"));
        const char *x = it.s ? it.s : "";
        long long rlo = lo > (long long)k ? lo - (long long)k : 0, rhi = hi < 0 ? -1 : hi - (long long)k;
        if (k) {
            g_sb_fmt(out, " ( \",\" ws %s ws )", x);
            sb_count(out, rlo, rhi);
        } else if (rlo == 0) {
            g_sb_fmt(out, " ( %s ws ( \",\" ws %s ws )", x, x);
            sb_count(out, 0, rhi < 0 ? -1 : rhi - 1);
            g_sb_str(out, " )?");
        } else {
            g_sb_fmt(out, " %s ws ( \",\" ws %s ws )", x, x);
            sb_count(out, rlo - 1, rhi < 0 ? -1 : rhi - 1);
        }
        free(it.s);
    }
    for (; open; open--) g_sb_str(out, " )?");
    g_sb_str(out, " \"]\"");
}

static void gen_string(conv *c, json_t *s, const char *path, sbuf *out) {
    json_t *fmt = json_object_get(s, "format");
    long long lo = 0, hi = -1;
    bool has_lo = get_count(c, s, "minLength", path, &lo), has_hi = get_count(c, s, "maxLength", path, &hi);
    if (c->st) return;
    json_t *pat = json_object_get(s, "pattern");
    if (pat) {
        if (!json_is_string(pat)) { fail(c, MF_ERR_FORMAT, path, "pattern must be a string%s", NULL); return; }
        if (fmt || has_lo || has_hi) {
            fail(c, MF_ERR_UNSUPPORTED, path, "pattern with format, minLength or maxLength is not supported%s", NULL);
            return;
        }
        char err[160];
        sbuf re = {0};
        if (!g_regex_gbnf(json_string_value(pat), prim(c, "char"), &re, err, sizeof err)) {
            char msg[200];
            snprintf(msg, sizeof msg, "pattern: %s is not supported", err);
            fail(c, MF_ERR_UNSUPPORTED, path, "%s", msg);
        } else g_sb_fmt(out, "\"\\\"\" %s \"\\\"\"", re.s ? re.s : "");
        if (re.oom) c->st = mf_err(MF_ERR_NOMEM, "out of memory");
        free(re.s);
        return;
    }
    if (fmt) {
        const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
        if (has_lo || has_hi) { fail(c, MF_ERR_UNSUPPORTED, path, "format with minLength/maxLength is not supported%s", NULL); return; }
        if (strcmp(f, "date") && strcmp(f, "time") && strcmp(f, "date-time") && strcmp(f, "uuid")) {
            fail(c, MF_ERR_UNSUPPORTED, path, "format '%s' is not supported (date, time, date-time, uuid are)", f);
            return;
        }
        g_sb_fmt(out, "\"\\\"\" %s \"\\\"\"", prim(c, f));
        return;
    }
    if (hi >= 0 && hi < lo) { fail(c, MF_ERR_FORMAT, path, "maxLength below minLength%s", NULL); return; }
    if (!has_lo && !has_hi) { g_sb_str(out, prim(c, "string")); return; }
    prim(c, "char");
    g_sb_str(out, "\"\\\"\" char");
    sb_count(out, lo, hi);
    g_sb_str(out, " \"\\\"\"");
}

static bool type_ok(const char *t, json_t *v) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return false;
}

/* Does v satisfy the schema's `type` (absent: anything)? */
static bool types_allow(json_t *type, json_t *v) {
    if (!type) return true;
    if (json_is_string(type)) return type_ok(json_string_value(type), v);
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t)
        if (json_is_string(t) && type_ok(json_string_value(t), v)) return true;
    return false;
}

static bool has_any(json_t *s, const char *const *keys) {
    for (; *keys; keys++)
        if (json_object_get(s, *keys)) return true;
    return false;
}

/* Bound keyword k of s: 1 with its value in *x, 0 when absent, -1 after
 * failing (not a number, or beyond what the digit ranges express). */
static int read_bound(conv *c, json_t *s, const char *path, const char *k, double *x) {
    json_t *v = json_object_get(s, k);
    if (!v) return 0;
    if (!json_is_number(v)) { fail(c, MF_ERR_FORMAT, path, "%s must be a number", k); return -1; }
    *x = json_number_value(v);
    if (!(fabs(*x) < 1e15)) { fail(c, MF_ERR_UNSUPPORTED, path, "%s beyond +-10^15 is not supported", k); return -1; }
    return 1;
}

/* An integer under minimum / maximum / exclusiveMinimum / exclusiveMaximum:
 * the bounds become the inclusive integer range they allow. */
static void gen_integer(conv *c, json_t *s, const char *path, sbuf *out) {
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    for (const char *const *k = bounds; *k; k++) {
        double x;
        const int got = read_bound(c, s, path, *k, &x);
        if (got < 0) return;
        if (!got) continue;
        bool upper = strstr(*k, "aximum") != NULL, excl = !strncmp(*k, "exclusive", 9);
        long long b = upper ? (long long)floor(x) : (long long)ceil(x);
        if (excl && (double)b == x) b += upper ? -1 : 1;
        if (upper && (!has_hi || b < hi)) { hi = b; has_hi = true; }
        if (!upper && (!has_lo || b > lo)) { lo = b; has_lo = true; }
    }
    if (has_lo && has_hi && lo > hi) { fail(c, MF_ERR_FORMAT, path, "no integer lies within the bounds%s", NULL); return; }
    if (!has_lo && !has_hi) { g_sb_str(out, prim(c, "integer")); return; }
    g_int_range(out, has_lo, lo, has_hi, hi);
}

/* A number under minimum / maximum / exclusiveMinimum / exclusiveMaximum:
 * no exponent, a fraction of up to 15 digits, each bound compared as its
 * shortest decimal text (intrange.c). */
static void gen_number(conv *c, json_t *s, const char *path, sbuf *out) {
    bool has_lo = false, has_hi = false, lo_ex = false, hi_ex = false;
    double lo = 0, hi = 0;
    for (const char *const *k = bounds; *k; k++) {
        double x;
        const int got = read_bound(c, s, path, *k, &x);
        if (got < 0) return;
        if (!got) continue;
        bool upper = strstr(*k, "aximum") != NULL, excl = !strncmp(*k, "exclusive", 9);
        if (upper && (!has_hi || x < hi || (x == hi && excl))) { hi = x; hi_ex = excl; has_hi = true; }
        if (!upper && (!has_lo || x > lo || (x == lo && excl))) { lo = x; lo_ex = excl; has_lo = true; }
    }
    if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_ex || hi_ex)))) {
        fail(c, MF_ERR_FORMAT, path, "no number lies within the bounds%s", NULL);
        return;
    }
    if (!g_num_range(out, has_lo, lo, lo_ex, has_hi, hi, hi_ex))
        fail(c, MF_ERR_UNSUPPORTED, path, "a number bound with more than 15 decimals is not supported%s", NULL);
}

static void gen_typed(conv *c, json_t *s, const char *t, const char *hint, const char *path, sbuf *out) {
    if (!strcmp(t, "object")) gen_object(c, s, hint, path, out);
    else if (!strcmp(t, "array")) gen_array(c, s, hint, path, out);
    else if (!strcmp(t, "string")) gen_string(c, s, path, out);
    else if (!strcmp(t, "integer")) gen_integer(c, s, path, out);
    else if (!strcmp(t, "number") && has_any(s, bounds)) gen_number(c, s, path, out);
    else if (!strcmp(t, "number") || !strcmp(t, "boolean") || !strcmp(t, "null"))
        g_sb_str(out, prim(c, t));
    else fail(c, MF_ERR_FORMAT, path, "unknown type '%s'", t);
}

/* Resolves "#/a/b" (JSON pointer, ~0 ~1 escapes) against the root. */
static json_t *resolve(conv *c, const char *ref, const char *path) {
    if (ref[0] != '#') { fail(c, MF_ERR_UNSUPPORTED, path, "$ref '%s': only references inside the schema (#...) are supported", ref); return NULL; }
    json_t *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') { fail(c, MF_ERR_UNSUPPORTED, path, "$ref '%s': anchors are not supported", ref); return NULL; }
    while (*p == '/' && cur) {
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/' && k < sizeof seg - 1) {
            if (p[0] == '~' && p[1] == '0') { seg[k++] = '~'; p += 2; }
            else if (p[0] == '~' && p[1] == '1') { seg[k++] = '/'; p += 2; }
            else seg[k++] = *p++;
        }
        seg[k] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, seg);
        else if (json_is_array(cur)) cur = json_array_get(cur, (size_t)strtoul(seg, NULL, 10));
        else cur = NULL;
    }
    if (!cur) fail(c, MF_ERR_FORMAT, path, "$ref '%s' points at nothing", ref);
    return cur;
}

/* allOf of object schemas, merged into one: the union of their properties
 * and required names; an entry with additionalProperties false allows only
 * its own properties, so the others are dropped (or refused if required). */
static void gen_allof(conv *c, json_t *s, const char *hint, const char *path, sbuf *out) {
    json_t *all = json_object_get(s, "allOf");
    if (!json_is_array(all) || !json_array_size(all)) { fail(c, MF_ERR_FORMAT, path, "allOf must be a non-empty list%s", NULL); return; }
    json_t *props = json_object(), *req = json_array(), *allowed = NULL;
    for (size_t i = 0; i <= json_array_size(all) && !c->st; i++) {
        json_t *e = i ? json_array_get(all, i - 1) : s;
        char p2[512], idx[24];
        snprintf(idx, sizeof idx, "%zu", i - 1);
        if (i) sub_path(p2, sizeof p2, path, "allOf", idx);
        else snprintf(p2, sizeof p2, "%s", path);
        for (int hop = 0; i && json_is_object(e) && json_object_get(e, "$ref") && !c->st; hop++) {
            json_t *r = json_object_get(e, "$ref");
            if (hop == 16 || !json_is_string(r)) { fail(c, MF_ERR_UNSUPPORTED, p2, "$ref chain in allOf too long or malformed%s", NULL); break; }
            if (json_object_size(e) > 1) { fail(c, MF_ERR_UNSUPPORTED, p2, "keywords beside $ref in an allOf entry are not supported%s", NULL); break; }
            snprintf(p2, sizeof p2, "%s", json_string_value(r));
            e = resolve(c, json_string_value(r), p2);
        }
        if (c->st || json_is_true(e)) continue;
        if (!json_is_object(e)) { fail(c, MF_ERR_FORMAT, p2, "an allOf entry must be an object schema%s", NULL); break; }
        const char *key;
        json_t *v;
        json_object_foreach(e, key, v) {
            if (in_list(key, annotations) || (!i && !strcmp(key, "allOf"))) continue;
            if (!strcmp(key, "type")) {
                if (!json_is_string(v) || strcmp(json_string_value(v), "object")) {
                    fail(c, MF_ERR_UNSUPPORTED, p2, "allOf is supported only for object schemas (type object)%s", NULL);
                    break;
                }
            } else if (!strcmp(key, "properties") && json_is_object(v)) {
                const char *name;
                json_t *sub;
                json_object_foreach(v, name, sub) {
                    json_t *had = json_object_get(props, name);
                    if (had && !json_equal(had, sub)) {
                        fail(c, MF_ERR_UNSUPPORTED, p2, "allOf: property '%s' has different schemas in two entries", name);
                        break;
                    }
                    json_object_set(props, name, sub);
                }
            } else if (!strcmp(key, "required") && json_is_array(v)) {
                size_t j;
                json_t *n;
                json_array_foreach(v, j, n) json_array_append(req, n);
            } else if (!strcmp(key, "additionalProperties") && json_is_boolean(v)) {
                if (json_is_true(v)) continue;
                json_t *own = json_object_get(e, "properties"), *next = json_object();
                const char *name;
                json_t *sub;
                json_object_foreach(own, name, sub)
                    if (!allowed || json_object_get(allowed, name)) json_object_set(next, name, json_true());
                json_decref(allowed);
                allowed = next;
            } else {
                fail(c, MF_ERR_UNSUPPORTED, p2, "'%s' in an allOf entry is not supported (type object, properties, "
                     "required and additionalProperties false are)", key);
                break;
            }
        }
    }
    if (!c->st && allowed) {
        size_t j;
        json_t *n;
        json_array_foreach(req, j, n)
            if (json_is_string(n) && !json_object_get(allowed, json_string_value(n))) {
                fail(c, MF_ERR_FORMAT, path, "allOf: '%s' is required but an entry's additionalProperties false forbids it",
                     json_string_value(n));
                break;
            }
        const char *name;
        json_t *sub;
        void *tmp;
        json_object_foreach_safe(props, tmp, name, sub)
            if (!json_object_get(allowed, name)) json_object_del(props, name);
    }
    if (!c->st) {
        json_t *m = json_pack("{s:s,s:O,s:O}", "type", "object", "properties", props, "required", req);
        if (allowed && m) json_object_set_new(m, "additionalProperties", json_false());
        if (m) gen_object(c, m, hint, path, out);
        else c->st = mf_err(MF_ERR_NOMEM, "out of memory");
        json_decref(m);
    }
    json_decref(props);
    json_decref(req);
    json_decref(allowed);
}

static void gen(conv *c, json_t *s, const char *hint, const char *path, sbuf *out) {
    if (c->st) return;
    if (++c->depth > 64) { fail(c, MF_ERR_UNSUPPORTED, path, "schema nested more than 64 deep%s", NULL); return; }
    if (json_is_true(s) || (json_is_object(s) && !json_object_size(s))) {
        g_sb_str(out, prim(c, "value"));
        c->depth--;
        return;
    }
    if (!json_is_object(s)) {
        fail(c, MF_ERR_FORMAT, path, json_is_false(s) ? "the schema false matches nothing%s" : "a schema must be an object or a boolean%s", NULL);
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) {
        if (!in_list(key, annotations) && !in_list(key, handled)) {
            fail(c, MF_ERR_UNSUPPORTED, path, "keyword '%s' is not supported", key);
            return;
        }
    }
    json_t *type = json_object_get(s, "type"), *ref = json_object_get(s, "$ref");
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    json_t *any = json_object_get(s, "anyOf") ? json_object_get(s, "anyOf") : json_object_get(s, "oneOf");
    if (type && !json_is_string(type) && !json_is_array(type)) { fail(c, MF_ERR_FORMAT, path, "type must be a string or a list%s", NULL); return; }
    if (json_object_get(s, "allOf")) {
        gen_allof(c, s, hint, path, out);
        c->depth--;
        return;
    }
    if (ref || any) {
        /* beside a reference or a union, only annotations */
        json_object_foreach(s, key, v) {
            if (in_list(key, annotations) || !strcmp(key, ref ? "$ref" : json_object_get(s, "anyOf") ? "anyOf" : "oneOf")) continue;
            fail(c, MF_ERR_UNSUPPORTED, path, "'%s' beside $ref, anyOf or oneOf is not supported", key);
            return;
        }
    }
    if (ref) {
        if (!json_is_string(ref)) { fail(c, MF_ERR_FORMAT, path, "$ref must be a string%s", NULL); return; }
        const char *rs = json_string_value(ref);
        for (size_t i = 0; i < c->n; i++)
            if (c->r[i].ref && !strcmp(c->r[i].ref, rs)) { g_sb_str(out, c->r[i].name); c->depth--; return; }
        json_t *target = resolve(c, rs, path);
        if (!target) return;
        const char *last = strrchr(rs, '/');
        char h[96]; /* "def-" keeps these names apart from the fixed helper rules */
        snprintf(h, sizeof h, "def-%s", last && last[1] ? last + 1 : "root");
        rule *r = new_rule(c, h);
        if (!r) return;
        size_t idx = (size_t)(r - c->r);
        r->ref = strdup(rs);
        char *name = strdup(r->name);
        sbuf body = {0};
        gen(c, target, name, rs, &body); /* the rule exists first, so recursion finds it */
        c->r[idx].body = body;
        g_sb_str(out, name);
        free(name);
    } else if (any) {
        if (!json_is_array(any) || !json_array_size(any)) { fail(c, MF_ERR_FORMAT, path, "anyOf/oneOf must be a non-empty list%s", NULL); return; }
        size_t i;
        json_t *alt;
        g_sb_str(out, "(");
        json_array_foreach(any, i, alt) {
            char p2[512], h2[96], idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            sub_path(p2, sizeof p2, path, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", idx);
            snprintf(h2, sizeof h2, "%s-%zu", hint, i);
            g_sb_str(out, i ? " | " : " ");
            gen_rule(c, alt, h2, p2, out);
        }
        g_sb_str(out, " )");
    } else if (en || cn) {
        json_object_foreach(s, key, v) {
            if (in_list(key, annotations) || !strcmp(key, "enum") || !strcmp(key, "const") || !strcmp(key, "type")) continue;
            fail(c, MF_ERR_UNSUPPORTED, path, "'%s' beside enum or const is not supported", key);
            return;
        }
        if (en && (!json_is_array(en) || !json_array_size(en))) { fail(c, MF_ERR_FORMAT, path, "enum must be a non-empty list%s", NULL); return; }
        size_t i, k = 0;
        json_t *x;
        g_sb_str(out, "(");
        if (cn) {
            if (types_allow(type, cn) && (!en || json_array_size(en))) {
                bool in_enum = !en;
                json_array_foreach(en, i, x) in_enum |= json_equal(x, cn);
                if (in_enum) { g_sb_str(out, " "); sb_json_literal(c, out, cn); k++; }
            }
        } else {
            json_array_foreach(en, i, x) { /* values of another type are outside the schema: dropped */
                if (!types_allow(type, x)) continue;
                g_sb_str(out, k++ ? " | " : " ");
                sb_json_literal(c, out, x);
            }
        }
        if (!k) { fail(c, MF_ERR_FORMAT, path, "no value satisfies enum/const together with type%s", NULL); return; }
        g_sb_str(out, " )");
    } else if (type && json_is_array(type)) {
        size_t i;
        json_t *t;
        g_sb_str(out, "(");
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) { fail(c, MF_ERR_FORMAT, path, "type lists names%s", NULL); return; }
            g_sb_str(out, i ? " | " : " ");
            gen_typed(c, s, json_string_value(t), hint, path, out);
        }
        g_sb_str(out, " )");
    } else if (type) {
        gen_typed(c, s, json_string_value(type), hint, path, out);
    } else if (json_object_get(s, "properties") || json_object_get(s, "required") || json_object_get(s, "additionalProperties")) {
        gen_object(c, s, hint, path, out);
    } else if (json_object_get(s, "items") || json_object_get(s, "prefixItems") || json_object_get(s, "minItems") ||
               json_object_get(s, "maxItems")) {
        gen_array(c, s, hint, path, out);
    } else if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") || json_object_get(s, "format") ||
               json_object_get(s, "pattern")) {
        gen_string(c, s, path, out);
    } else if (has_any(s, bounds)) {
        fail(c, MF_ERR_UNSUPPORTED, path, "minimum/maximum without type integer is not supported%s", NULL);
        return;
    } else {
        g_sb_str(out, prim(c, "value"));
    }
    c->depth--;
}

mf_status mf_json_schema_to_grammar(const char *schema_json, char **gbnf_out) {
    if (!gbnf_out || !schema_json) return mf_err(MF_ERR_INVALID_ARG, "json schema: no input or output");
    *gbnf_out = NULL;
    json_error_t je;
    json_t *root = json_loads(schema_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!root) return mf_err(MF_ERR_FORMAT, "json schema: line %d, column %d: %s", je.line, je.column, je.text);
    conv c = {.root = root};
    rule *r = new_rule(&c, "root");
    sbuf body = {0};
    gen(&c, root, "root", "", &body);
    if (r) c.r[0].body = body;
    else free(body.s);
    sbuf out = {0};
    for (size_t i = 0; i < c.n && !c.st; i++) {
        if (c.r[i].body.oom) c.st = mf_err(MF_ERR_NOMEM, "out of memory");
        g_sb_fmt(&out, "%s ::= ", c.r[i].name);
        g_sb_str(&out, c.r[i].body.s ? c.r[i].body.s : "");
        g_sb_str(&out, "\n");
    }
    if (!c.st && out.oom) c.st = mf_err(MF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c.n; i++) {
        free(c.r[i].name);
        free(c.r[i].body.s);
        free(c.r[i].ref);
    }
    free(c.r);
    json_decref(root);
    if (c.st) {
        free(out.s);
        return c.st;
    }
    *gbnf_out = out.s;
    return MF_OK;
}
