/* parse.c - GBNF text -> the flat element form of grammar.h.
 *
 * The syntax is llama.cpp's: `name ::= alternatives`, `|`, `( )`, `* + ?`,
 * `{m} {m,} {m,n}`, "literals", [classes] with ranges and `^`, `.`, `#`
 * comments. A rule ends at a newline unless inside parentheses or right after
 * `::=` or `|`. Repetitions and groups become generated rules (right
 * recursive, so matching never needs left recursion). Every error names the
 * line and column where it was found. */
#include "grammar/grammar.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G_MAX_NESTING 256 /* bounds the parser's recursion */
#define G_MAX_NESTING_S "256"

typedef struct evec {
    gelem *e;
    uint32_t n, cap;
} evec;

typedef struct prule {
    char *name;
    evec body;      /* alternatives separated by G_ALT; the final G_END is added at the end */
    bool defined;
    const char *ref; /* first reference, for "undefined rule" */
    uint32_t n_gen;  /* rules generated from this one so far (for their names) */
} prule;

typedef struct parser {
    const char *src, *p, *end;
    prule **r; /* pointers: a body being parsed stays put while rules are added */
    uint32_t n_rules, cap_rules;
    gclass *cls;
    uint32_t n_cls, cap_cls;
    uint32_t (*rng)[2];
    uint32_t n_rng, cap_rng;
    uint32_t *hash;  /* open addressing over rule names: rule id + 1, 0 = empty */
    uint32_t hcap;
    uint64_t total; /* elements in all rules */
    uint32_t depth; /* open parentheses */
    mf_status st;   /* first error (MF_OK until one) */
} parser;

static mf_status perr(parser *P, const char *at, const char *fmt, const char *arg) {
    if (P->st) return P->st;
    int line = 1, col = 1;
    for (const char *q = P->src; q < at && q < P->end; q++) {
        if (*q == '\n') { line++; col = 1; }
        else if (((unsigned char)*q & 0xC0) != 0x80) col++;
    }
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    P->st = mf_err(MF_ERR_FORMAT, "grammar: line %d, column %d: %s", line, col, msg);
    return P->st;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elsz) {
    if (need <= *cap) return true;
    uint32_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elsz);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static bool emit(parser *P, evec *v, uint8_t type, uint32_t val) {
    if (P->st) return false;
    if (++P->total > G_MAX_ELEMS) {
        P->st = mf_err(MF_ERR_FORMAT, "grammar: too large (more than %u elements after expanding repetitions)",
                       G_MAX_ELEMS);
        return false;
    }
    if (!grow((void **)&v->e, &v->cap, v->n + 1, sizeof *v->e)) {
        P->st = mf_err(MF_ERR_NOMEM, "out of memory");
        return false;
    }
    v->e[v->n++] = (gelem){type, val};
    return true;
}

static uint32_t add_rule(parser *P, const char *name, size_t len) {
    if (!grow((void **)&P->r, &P->cap_rules, P->n_rules + 1, sizeof *P->r)) {
        P->st = mf_err(MF_ERR_NOMEM, "out of memory");
        return 0;
    }
    prule *r = calloc(1, sizeof *r);
    if (r) P->r[P->n_rules] = r;
    if (!r || !(r->name = malloc(len + 1))) {
        if (r) P->n_rules++;
        P->st = mf_err(MF_ERR_NOMEM, "out of memory");
        return 0;
    }
    memcpy(r->name, name, len);
    r->name[len] = 0;
    return P->n_rules++;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static bool hash_put(parser *P, uint32_t id) {
    if ((P->n_rules + 1) * 2 > P->hcap) { /* keep the table at most half full */
        uint32_t nc = P->hcap ? P->hcap * 2 : 64;
        uint32_t *t = calloc(nc, sizeof *t);
        if (!t) return false;
        for (uint32_t i = 0; i < P->hcap; i++) {
            if (!P->hash[i]) continue;
            const char *nm = P->r[P->hash[i] - 1]->name;
            uint32_t j = name_hash(nm, strlen(nm)) & (nc - 1);
            while (t[j]) j = (j + 1) & (nc - 1);
            t[j] = P->hash[i];
        }
        free(P->hash);
        P->hash = t;
        P->hcap = nc;
    }
    const char *nm = P->r[id]->name;
    uint32_t j = name_hash(nm, strlen(nm)) & (P->hcap - 1);
    while (P->hash[j]) j = (j + 1) & (P->hcap - 1);
    P->hash[j] = id + 1;
    return true;
}

static uint32_t rule_id(parser *P, const char *name, size_t len) {
    if (P->hcap) {
        for (uint32_t j = name_hash(name, len) & (P->hcap - 1); P->hash[j]; j = (j + 1) & (P->hcap - 1)) {
            const char *nm = P->r[P->hash[j] - 1]->name;
            if (strlen(nm) == len && !memcmp(nm, name, len)) return P->hash[j] - 1;
        }
    }
    uint32_t id = add_rule(P, name, len);
    if (!P->st && !hash_put(P, id)) P->st = mf_err(MF_ERR_NOMEM, "out of memory");
    return id;
}

/* A rule for a group or repetition inside rule `parent`: "parent_N". */
static uint32_t gen_rule(parser *P, uint32_t parent) {
    char nm[300];
    int k = snprintf(nm, sizeof nm, "%.200s_%u", P->r[parent]->name, ++P->r[parent]->n_gen);
    uint32_t id = add_rule(P, nm, (size_t)k); /* not hashed: a reference can never name it */
    if (!P->st) P->r[id]->defined = true;
    return id;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static void skip_space(parser *P, bool newline_ok) {
    while (P->p < P->end) {
        char c = *P->p;
        if (c == ' ' || c == '\t' || c == '\r') P->p++;
        else if (c == '#') { while (P->p < P->end && *P->p != '\n') P->p++; }
        else if (c == '\n' && newline_ok) P->p++;
        else break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static bool parse_char(parser *P, uint32_t *out) {
    const char *at = P->p;
    if (P->p >= P->end) { perr(P, at, "unexpected end of grammar%s", NULL); return false; }
    unsigned char c = (unsigned char)*P->p;
    if (c == '\\') {
        if (P->p + 1 >= P->end) { perr(P, at, "unfinished escape at end of grammar%s", NULL); return false; }
        char e = P->p[1];
        P->p += 2;
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = P->p < P->end ? hexval(*P->p) : -1;
                if (h < 0) { perr(P, at, "escape \\%s needs hex digits", e == 'x' ? "x" : e == 'u' ? "u" : "U"); return false; }
                v = v << 4 | (uint32_t)h;
                P->p++;
            }
            if (v > 0x10FFFF) { perr(P, at, "code point beyond U+10FFFF%s", NULL); return false; }
            *out = v;
            return true;
        }
        switch (e) {
        case 'n': *out = '\n'; return true;
        case 't': *out = '\t'; return true;
        case 'r': *out = '\r'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *out = (uint32_t)e; return true;
        default: {
            /* a printable character as itself, anything else (a newline,
             * a control or non-ASCII byte) by its code, so the message
             * stays one line */
            char s[32];
            if (e > ' ' && e < 0x7f) snprintf(s, sizeof s, "\\%c", e);
            else snprintf(s, sizeof s, "'\\' before byte 0x%02X", (unsigned)(unsigned char)e);
            perr(P, at, "unknown escape %s", s);
            return false;
        }
        }
    }
    int n = c < 0x80 ? 0 : c >= 0xC2 && c < 0xE0 ? 1 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xF0 && c < 0xF5 ? 3 : -1;
    if (n < 0 || P->p + n >= P->end + (n ? 0 : 1)) { perr(P, at, "invalid UTF-8%s", NULL); return false; }
    uint32_t v = n ? c & (0x3F >> n) : c;
    for (int i = 1; i <= n; i++) {
        unsigned char d = (unsigned char)P->p[i];
        if ((d & 0xC0) != 0x80) { perr(P, at, "invalid UTF-8%s", NULL); return false; }
        v = v << 6 | (d & 0x3F);
    }
    P->p += n + 1;
    *out = v;
    return true;
}

static bool parse_literal(parser *P, evec *v) {
    const char *open = P->p++;
    while (P->p < P->end && *P->p != '"') {
        if (*P->p == '\n') { perr(P, open, "string literal not closed on its line%s", NULL); return false; }
        uint32_t c;
        if (!parse_char(P, &c) || !emit(P, v, G_CHR, c)) return false;
    }
    if (P->p >= P->end) { perr(P, open, "string literal not closed%s", NULL); return false; }
    P->p++;
    return true;
}

static bool parse_class(parser *P, evec *v) {
    const char *open = P->p++;
    gclass k = {P->n_rng, 0, false};
    if (P->p < P->end && *P->p == '^') { k.neg = true; P->p++; }
    while (P->p < P->end && *P->p != ']') {
        if (*P->p == '\n') { perr(P, open, "character class not closed on its line%s", NULL); return false; }
        uint32_t lo, hi;
        if (!parse_char(P, &lo)) return false;
        hi = lo;
        if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
            const char *at = P->p++;
            if (!parse_char(P, &hi)) return false;
            if (hi < lo) { perr(P, at, "range end before its start%s", NULL); return false; }
        }
        if (!grow((void **)&P->rng, &P->cap_rng, P->n_rng + 1, sizeof *P->rng)) {
            P->st = mf_err(MF_ERR_NOMEM, "out of memory");
            return false;
        }
        P->rng[P->n_rng][0] = lo;
        P->rng[P->n_rng][1] = hi;
        P->n_rng++;
        k.n++;
    }
    if (P->p >= P->end) { perr(P, open, "character class not closed%s", NULL); return false; }
    if (!k.n) { perr(P, open, "empty character class%s", NULL); return false; }
    P->p++;
    if (!k.neg && k.n == 1 && P->rng[k.first][0] == P->rng[k.first][1]) { /* [a] is just 'a' */
        P->n_rng--;
        return emit(P, v, G_CHR, P->rng[k.first][0]);
    }
    if (!grow((void **)&P->cls, &P->cap_cls, P->n_cls + 1, sizeof *P->cls)) {
        P->st = mf_err(MF_ERR_NOMEM, "out of memory");
        return false;
    }
    P->cls[P->n_cls] = k;
    return emit(P, v, G_CLS, P->n_cls++);
}

static bool parse_count(parser *P, uint32_t *out) {
    const char *at = P->p;
    uint64_t v = 0;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') { perr(P, at, "expected a number%s", NULL); return false; }
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        v = v * 10 + (uint64_t)(*P->p++ - '0');
        if (v > G_MAX_REPEAT) {
            char s[32];
            snprintf(s, sizeof s, "%u", G_MAX_REPEAT);
            perr(P, at, "repetition count above %s", s);
            return false;
        }
    }
    *out = (uint32_t)v;
    return true;
}

static bool append_seq(parser *P, evec *v, const gelem *s, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!emit(P, v, s[i].type, s[i].v)) return false;
    return true;
}

/* Replaces the symbol v->e[start..] by `min` copies of it followed by the
 * optional ones (max == UINT32_MAX: any number more). */
static bool repeat(parser *P, uint32_t rule, evec *v, uint32_t start, uint32_t min, uint32_t max) {
    uint32_t n = v->n - start;
    gelem *sym = malloc(sizeof *sym * n);
    if (!sym) { P->st = mf_err(MF_ERR_NOMEM, "out of memory"); return false; }
    memcpy(sym, v->e + start, sizeof *sym * n);
    v->n = start;
    P->total -= n;
    bool ok = true;
    if ((uint64_t)min * n > G_MAX_ELEMS) {
        P->st = mf_err(MF_ERR_FORMAT, "grammar: too large (more than %u elements after expanding repetitions)",
                       G_MAX_ELEMS);
        ok = false;
    }
    for (uint32_t i = 0; ok && i < min; i++) ok = append_seq(P, v, sym, n);
    if (ok && max == UINT32_MAX) { /* R ::= sym R | "" */
        uint32_t r = gen_rule(P, rule);
        ok = !P->st && append_seq(P, &P->r[r]->body, sym, n) && emit(P, &P->r[r]->body, G_REF, r) &&
             emit(P, &P->r[r]->body, G_ALT, 0) && emit(P, v, G_REF, r);
    } else if (ok && max > min) { /* R1 ::= sym R2 | "" ... Rk ::= sym | "" */
        uint32_t prev = UINT32_MAX;
        for (uint32_t i = 0; ok && i < max - min; i++) {
            uint32_t r = gen_rule(P, rule);
            if (P->st) { ok = false; break; }
            evec *b = &P->r[r]->body;
            ok = append_seq(P, b, sym, n) && emit(P, b, G_ALT, 0);
            if (ok && prev != UINT32_MAX) { /* put the link before the ALT of the previous level */
                evec *pb = &P->r[prev]->body;
                ok = emit(P, pb, G_ALT, 0);
                if (ok) { pb->e[pb->n - 2] = (gelem){G_REF, r}; }
            } else if (ok) {
                ok = emit(P, v, G_REF, r);
            }
            prev = r;
        }
    }
    free(sym);
    return ok;
}

static bool parse_alternates(parser *P, uint32_t rule, evec *v, bool nested);

static bool parse_sequence(parser *P, uint32_t rule, evec *v, bool nested) {
    uint32_t last = UINT32_MAX; /* start of the last symbol, for a postfix operator */
    while (P->p < P->end && !P->st) {
        char c = *P->p;
        const char *at = P->p;
        if (c == '"') {
            last = v->n;
            if (!parse_literal(P, v)) return false;
        } else if (c == '[') {
            last = v->n;
            if (!parse_class(P, v)) return false;
        } else if (c == '.') {
            last = v->n;
            P->p++;
            if (!emit(P, v, G_ANY, 0)) return false;
        } else if (is_name_char(c)) {
            const char *s = P->p;
            while (P->p < P->end && is_name_char(*P->p)) P->p++;
            uint32_t r = rule_id(P, s, (size_t)(P->p - s));
            if (P->st) return false;
            if (!P->r[r]->ref) P->r[r]->ref = s;
            last = v->n;
            if (!emit(P, v, G_REF, r)) return false;
        } else if (c == '(') {
            if (++P->depth > G_MAX_NESTING) return perr(P, at, "groups nested more than %s deep", G_MAX_NESTING_S), false;
            P->p++;
            skip_space(P, true);
            uint32_t r = gen_rule(P, rule);
            if (P->st || !parse_alternates(P, r, &P->r[r]->body, true)) return false;
            P->depth--;
            if (P->p >= P->end || *P->p != ')') return perr(P, P->p, "expected ')' to close the group%s", NULL), false;
            P->p++;
            last = v->n;
            if (!emit(P, v, G_REF, r)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == UINT32_MAX || last == v->n) return perr(P, at, "'%s' has nothing before it to repeat", c == '{' ? "{" : c == '*' ? "*" : c == '+' ? "+" : "?"), false;
            uint32_t min = 0, max = UINT32_MAX;
            P->p++;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(P, nested);
                if (!parse_count(P, &min)) return false;
                skip_space(P, nested);
                max = min;
                if (P->p < P->end && *P->p == ',') {
                    P->p++;
                    skip_space(P, nested);
                    max = UINT32_MAX;
                    if (P->p < P->end && *P->p != '}') {
                        const char *mat = P->p;
                        if (!parse_count(P, &max)) return false;
                        if (max < min) return perr(P, mat, "repetition maximum below its minimum%s", NULL), false;
                    }
                    skip_space(P, nested);
                }
                if (P->p >= P->end || *P->p != '}') return perr(P, P->p, "expected '}'%s", NULL), false;
                P->p++;
            }
            if (!repeat(P, rule, v, last, min, max)) return false;
            last = UINT32_MAX;
        } else {
            break;
        }
        skip_space(P, nested);
    }
    return !P->st;
}

static bool parse_alternates(parser *P, uint32_t rule, evec *v, bool nested) {
    if (!parse_sequence(P, rule, v, nested)) return false;
    while (P->p < P->end && *P->p == '|') {
        P->p++;
        skip_space(P, true);
        if (!emit(P, v, G_ALT, 0) || !parse_sequence(P, rule, v, nested)) return false;
    }
    return true;
}

static void parser_free(parser *P) {
    for (uint32_t i = 0; i < P->n_rules; i++) {
        free(P->r[i]->name);
        free(P->r[i]->body.e);
        free(P->r[i]);
    }
    free(P->r);
    free(P->hash);
    free(P->cls);
    free(P->rng);
}

void mf_grammar_free(mf_grammar *g) {
    if (!g) return;
    if (g->rule_name)
        for (uint32_t i = 0; i < g->n_rules; i++) free(g->rule_name[i]);
    free(g->rule_name);
    free(g->elem);
    free(g->rule_start);
    free(g->alt_first);
    free(g->alts);
    free(g->cls);
    free(g->ranges);
    free(g);
}

/* Lays the rules out one after another and indexes their alternatives. */
static mf_status flatten(parser *P, uint32_t root, mf_grammar **out) {
    mf_grammar *g = calloc(1, sizeof *g);
    if (!g) return mf_err(MF_ERR_NOMEM, "out of memory");
    uint32_t n = 0, n_alts = 0;
    for (uint32_t i = 0; i < P->n_rules; i++) {
        n += P->r[i]->body.n + 1;
        n_alts++;
        for (uint32_t j = 0; j < P->r[i]->body.n; j++) n_alts += P->r[i]->body.e[j].type == G_ALT;
    }
    g->n_rules = P->n_rules;
    g->n_elem = n;
    g->elem = malloc(sizeof *g->elem * n);
    g->rule_start = malloc(sizeof *g->rule_start * P->n_rules);
    g->alt_first = malloc(sizeof *g->alt_first * (P->n_rules + 1));
    g->alts = malloc(sizeof *g->alts * n_alts);
    g->rule_name = calloc(P->n_rules, sizeof *g->rule_name);
    if (!g->elem || !g->rule_start || !g->alt_first || !g->alts || !g->rule_name) {
        mf_grammar_free(g);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    uint32_t k = 0, a = 0;
    for (uint32_t i = 0; i < P->n_rules; i++) {
        g->rule_start[i] = k;
        g->alt_first[i] = a;
        g->alts[a++] = k;
        for (uint32_t j = 0; j < P->r[i]->body.n; j++) {
            g->elem[k++] = P->r[i]->body.e[j];
            if (P->r[i]->body.e[j].type == G_ALT) g->alts[a++] = k;
        }
        g->elem[k++] = (gelem){G_END, 0};
        g->rule_name[i] = P->r[i]->name;
        P->r[i]->name = NULL;
    }
    g->alt_first[P->n_rules] = a;
    g->cls = P->cls;
    g->ranges = P->rng;
    P->cls = NULL;
    P->rng = NULL;
    g->root = root;
    *out = g;
    return MF_OK;
}

mf_status mf_grammar_parse(const char *text, size_t len, const char *root, mf_grammar **out) {
    if (!out) return mf_err(MF_ERR_INVALID_ARG, "grammar: no output pointer");
    *out = NULL;
    if (!text) return mf_err(MF_ERR_INVALID_ARG, "grammar: no text");
    if (!root) root = "root";
    parser P = {.src = text, .p = text, .end = text + len};
    skip_space(&P, true);
    while (P.p < P.end && !P.st) {
        const char *s = P.p;
        while (P.p < P.end && is_name_char(*P.p)) P.p++;
        if (P.p == s) { perr(&P, s, "expected a rule name%s", NULL); break; }
        uint32_t r = rule_id(&P, s, (size_t)(P.p - s));
        if (P.st) break;
        skip_space(&P, false);
        if (P.end - P.p < 3 || memcmp(P.p, "::=", 3)) { perr(&P, P.p, "expected '::=' after the rule name%s", NULL); break; }
        if (P.r[r]->defined) { perr(&P, s, "rule '%s' defined twice", P.r[r]->name); break; }
        P.r[r]->defined = true;
        P.p += 3;
        skip_space(&P, true);
        if (!parse_alternates(&P, r, &P.r[r]->body, false)) break;
        if (P.p < P.end && *P.p != '\n') {
            char ch[8] = {0};
            size_t cl = 1;
            while (cl < 4 && P.p + cl < P.end && ((unsigned char)P.p[cl] & 0xC0) == 0x80) cl++;
            memcpy(ch, P.p, cl);
            perr(&P, P.p, "unexpected '%s'", ch);
            break;
        }
        skip_space(&P, true);
    }
    uint32_t root_id = UINT32_MAX;
    for (uint32_t i = 0; !P.st && i < P.n_rules; i++) {
        if (!P.r[i]->defined) perr(&P, P.r[i]->ref, "undefined rule '%s'", P.r[i]->name);
        else if (!strcmp(P.r[i]->name, root)) root_id = i;
    }
    if (!P.st && root_id == UINT32_MAX) P.st = mf_err(MF_ERR_FORMAT, "grammar: no rule named '%s'", root);
    mf_status st = P.st;
    mf_grammar *g = NULL;
    if (!st) st = flatten(&P, root_id, &g);
    parser_free(&P);
    if (!st) st = g_check_left_recursion(g);
    if (st) {
        mf_grammar_free(g);
        return st;
    }
    *out = g;
    return MF_OK;
}
