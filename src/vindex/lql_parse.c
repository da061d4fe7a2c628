/* lql_parse.c - LQL's lexer and recursive-descent parser. Every token keeps
 * its line and column so an error says where it is. */
#include "vindex/lql.h"
#include "core/error.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum tk { T_END, T_WORD, T_STR, T_NUM, T_PUNCT } tk;

typedef struct lexer {
    const char *p, *end;
    int line, col;
    /* the current token */
    tk t;
    const char *s;   /* start of a word or number, in the text */
    size_t n;
    char *str;       /* a string's decoded bytes (owned until taken) */
    char punct;
    long num;
    double fnum;     /* a number's value, fraction included */
    bool frac;       /* the number had a fraction (not an integer) */
    int tline, tcol;
} lexer;

static mf_status lerr(const lexer *L, const char *what) {
    return mf_err(MF_ERR_FORMAT, "line %d, column %d: %s", L->tline, L->tcol, what);
}

static void adv(lexer *L) {
    if (*L->p == '\n') L->line++, L->col = 1;
    else L->col++;
    L->p++;
}

static mf_status next(lexer *L) {
    free(L->str);
    L->str = NULL;
    for (;;) {
        while (L->p < L->end && isspace((unsigned char)*L->p)) adv(L);
        if (L->end - L->p >= 2 && L->p[0] == '-' && L->p[1] == '-') {
            while (L->p < L->end && *L->p != '\n') adv(L);
            continue;
        }
        break;
    }
    L->tline = L->line, L->tcol = L->col;
    if (L->p >= L->end) {
        L->t = T_END;
        return MF_OK;
    }
    const char c = *L->p;
    if (isalpha((unsigned char)c) || c == '_') {
        L->s = L->p;
        while (L->p < L->end && (isalnum((unsigned char)*L->p) || *L->p == '_')) adv(L);
        L->n = (size_t)(L->p - L->s);
        L->t = T_WORD;
        return MF_OK;
    }
    if (isdigit((unsigned char)c)) {
        long v = 0;
        while (L->p < L->end && isdigit((unsigned char)*L->p)) {
            if (v > (LONG_MAX - 9) / 10) return lerr(L, "number too large");
            v = v * 10 + (*L->p - '0');
            adv(L);
        }
        double f = (double)v, scale = 1;
        L->frac = false;
        if (L->p + 1 < L->end && *L->p == '.' && isdigit((unsigned char)L->p[1])) {
            L->frac = true;
            adv(L);
            for (int nd = 0; L->p < L->end && isdigit((unsigned char)*L->p); nd++) {
                if (nd < 17) scale /= 10, f += (*L->p - '0') * scale;
                adv(L);
            }
        }
        if (L->p < L->end && (isalpha((unsigned char)*L->p) || *L->p == '.' || *L->p == '_')) return lerr(L, "malformed number");
        L->fnum = f;
        L->num = v;
        L->t = T_NUM;
        return MF_OK;
    }
    if (c == '"' || c == '\'') {
        adv(L);
        size_t cap = 16, n = 0;
        char *b = malloc(cap);
        if (!b) return mf_err(MF_ERR_NOMEM, "out of memory");
        for (;;) {
            if (L->p >= L->end) {
                free(b);
                return lerr(L, "unterminated string");
            }
            char ch = *L->p;
            if (ch == c) {
                adv(L);
                break;
            }
            if (ch == '\\' && L->p + 1 < L->end) {
                adv(L);
                ch = *L->p == 'n' ? '\n' : *L->p == 't' ? '\t' : *L->p;
            }
            adv(L);
            if (n + 2 > cap) {
                char *nb = realloc(b, cap *= 2);
                if (!nb) {
                    free(b);
                    return mf_err(MF_ERR_NOMEM, "out of memory");
                }
                b = nb;
            }
            b[n++] = ch;
        }
        b[n] = '\0';
        L->str = b;
        L->t = T_STR;
        return MF_OK;
    }
    if (strchr(";,=*-()", c)) {
        L->punct = c;
        adv(L);
        L->t = T_PUNCT;
        return MF_OK;
    }
    return lerr(L, "unexpected character");
}

static bool is_kw(const lexer *L, const char *kw) {
    return L->t == T_WORD && strlen(kw) == L->n && !strncasecmp(L->s, kw, L->n);
}

static bool is_punct(const lexer *L, char c) { return L->t == T_PUNCT && L->punct == c; }

static mf_status expect_kw(lexer *L, const char *kw) {
    if (!is_kw(L, kw)) {
        char m[96];
        snprintf(m, sizeof m, "expected %s", kw);
        return lerr(L, m);
    }
    return next(L);
}

static mf_status take_num(lexer *L, const char *what, long lo, long hi, int *out) {
    if (L->t != T_NUM) {
        char m[96];
        snprintf(m, sizeof m, "expected a number (%s)", what);
        return lerr(L, m);
    }
    if (L->frac) {
        char m[96];
        snprintf(m, sizeof m, "expected a whole number (%s)", what);
        return lerr(L, m);
    }
    if (L->num < lo || L->num > hi) {
        char m[96];
        snprintf(m, sizeof m, "%s %ld is out of range [%ld, %ld]", what, L->num, lo, hi);
        return lerr(L, m);
    }
    *out = (int)L->num;
    return next(L);
}

static mf_status take_real(lexer *L, const char *what, double lo, double hi, double *out) {
    char m[96];
    if (L->t != T_NUM) {
        snprintf(m, sizeof m, "expected a number (%s)", what);
        return lerr(L, m);
    }
    if (!(L->fnum > lo) || L->fnum > hi) {
        snprintf(m, sizeof m, "%s %g is out of range (%g, %g]", what, L->fnum, lo, hi);
        return lerr(L, m);
    }
    *out = L->fnum;
    return next(L);
}

static mf_status take_str(lexer *L, const char *what, char **out) {
    if (L->t != T_STR) {
        char m[96];
        snprintf(m, sizeof m, "expected a quoted string (%s)", what);
        return lerr(L, m);
    }
    *out = L->str;
    L->str = NULL;
    return next(L);
}

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        mf_status s_ = (x);                                                                                            \
        if (s_) return s_;                                                                                             \
    } while (0)

static mf_status layers_clause(lexer *L, lql_stmt *st) {
    /* AT LAYER n | LAYERS a-b */
    if (is_kw(L, "AT")) {
        TRY(next(L));
        TRY(expect_kw(L, "LAYER"));
        TRY(take_num(L, "layer", 0, 1 << 20, &st->layer0));
        st->layer1 = st->layer0;
        return MF_OK;
    }
    TRY(next(L)); /* LAYERS */
    TRY(take_num(L, "first layer", 0, 1 << 20, &st->layer0));
    if (!is_punct(L, '-')) return lerr(L, "expected '-' in a layer range (LAYERS a-b)");
    TRY(next(L));
    TRY(take_num(L, "last layer", 0, 1 << 20, &st->layer1));
    if (st->layer1 < st->layer0) return lerr(L, "the layer range ends before it starts");
    return MF_OK;
}

static mf_status expect_punct(lexer *L, char c, const char *what) {
    if (!is_punct(L, c)) return lerr(L, what);
    return next(L);
}

/* INSERT INTO EDGES [(entity, relation, target)] VALUES ("e", "r", "t") [AT LAYER n] [ALPHA a] */
static mf_status insert_stmt(lexer *L, lql_stmt *st) {
    st->kind = LQL_INSERT;
    TRY(next(L));
    TRY(expect_kw(L, "INTO"));
    TRY(expect_kw(L, "EDGES"));
    if (is_punct(L, '(')) {
        static const char *cols[] = {"entity", "relation", "target"};
        TRY(next(L));
        for (int i = 0; i < 3; i++) {
            if (!is_kw(L, cols[i])) {
                char m[96];
                snprintf(m, sizeof m, "expected the column %s (the columns are entity, relation, target)", cols[i]);
                return lerr(L, m);
            }
            TRY(next(L));
            TRY(expect_punct(L, i < 2 ? ',' : ')', i < 2 ? "expected ','" : "expected ')'"));
        }
    }
    TRY(expect_kw(L, "VALUES"));
    TRY(expect_punct(L, '(', "expected '(' before the values"));
    TRY(take_str(L, "entity", &st->text));
    TRY(expect_punct(L, ',', "expected ',' (three values: entity, relation, target)"));
    TRY(take_str(L, "relation", &st->rel));
    TRY(expect_punct(L, ',', "expected ',' (three values: entity, relation, target)"));
    TRY(take_str(L, "target", &st->target));
    TRY(expect_punct(L, ')', "expected ')' after the three values"));
    for (;;) {
        if (is_kw(L, "AT")) TRY(layers_clause(L, st));
        else if (is_kw(L, "ALPHA")) {
            TRY(next(L));
            TRY(take_real(L, "ALPHA", 0, 1e6, &st->alpha));
        } else break;
    }
    if (!*st->text || !*st->rel || !*st->target) return lerr(L, "INSERT: entity, relation and target must not be empty");
    return MF_OK;
}

/* UPDATE FEATURES SET down = "token" [ALPHA a] WHERE layer = n AND feature = f */
static mf_status update_stmt(lexer *L, lql_stmt *st) {
    st->kind = LQL_UPDATE;
    TRY(next(L));
    TRY(expect_kw(L, "FEATURES"));
    TRY(expect_kw(L, "SET"));
    TRY(expect_kw(L, "down"));
    TRY(expect_punct(L, '=', "expected '='"));
    TRY(take_str(L, "the token the down vector writes", &st->target));
    if (is_kw(L, "ALPHA")) {
        TRY(next(L));
        TRY(take_real(L, "ALPHA", 0, 1e6, &st->alpha));
    }
    TRY(expect_kw(L, "WHERE"));
    for (;;) {
        const bool layer = is_kw(L, "layer");
        if (!layer && !is_kw(L, "feature")) return lerr(L, "expected layer or feature");
        TRY(next(L));
        TRY(expect_punct(L, '=', "expected '='"));
        if (layer) TRY(take_num(L, "layer", 0, 1 << 20, &st->layer0));
        else TRY(take_num(L, "feature", 0, 1 << 24, &st->feature));
        if (!is_kw(L, "AND")) break;
        TRY(next(L));
    }
    if (st->layer0 < 0 || st->feature < 0) return lerr(L, "UPDATE needs both layer = n and feature = f");
    st->layer1 = st->layer0;
    return MF_OK;
}

static mf_status statement(lexer *L, lql_stmt *st) {
    st->line = L->tline, st->col = L->tcol;
    st->layer0 = st->layer1 = -1, st->top = -1, st->feature = -1;
    if (is_kw(L, "DESCRIBE") || is_kw(L, "WALK")) {
        st->kind = is_kw(L, "WALK") ? LQL_WALK : LQL_DESCRIBE;
        TRY(next(L));
        TRY(take_str(L, st->kind == LQL_WALK ? "prompt" : "entity", &st->text));
        for (;;) {
            if ((is_kw(L, "AT") && st->kind == LQL_DESCRIBE) || is_kw(L, "LAYERS")) TRY(layers_clause(L, st));
            else if (is_kw(L, "TOP")) {
                TRY(next(L));
                TRY(take_num(L, "TOP", 1, 4096, &st->top));
            } else break;
        }
        return MF_OK;
    }
    if (is_kw(L, "SELECT")) {
        st->kind = LQL_SELECT;
        TRY(next(L));
        if (!is_punct(L, '*')) return lerr(L, "expected '*' (SELECT * FROM FEATURES)");
        TRY(next(L));
        TRY(expect_kw(L, "FROM"));
        TRY(expect_kw(L, "FEATURES"));
        if (is_kw(L, "WHERE")) {
            do {
                TRY(next(L));
                const bool layer = is_kw(L, "layer"), feature = is_kw(L, "feature"), token = is_kw(L, "token");
                if (!layer && !feature && !token) return lerr(L, "expected layer, feature or token in WHERE");
                TRY(next(L));
                if (!is_punct(L, '=')) return lerr(L, "expected '='");
                TRY(next(L));
                if (layer) {
                    TRY(take_num(L, "layer", 0, 1 << 20, &st->layer0));
                    st->layer1 = st->layer0;
                } else if (feature) {
                    TRY(take_num(L, "feature", 0, 1 << 24, &st->feature));
                } else {
                    free(st->token);
                    st->token = NULL;
                    TRY(take_str(L, "token", &st->token));
                }
            } while (is_kw(L, "AND"));
        }
        if (is_kw(L, "NEAREST")) {
            TRY(next(L));
            TRY(expect_kw(L, "TO"));
            TRY(take_str(L, "text", &st->nearest));
            TRY(expect_kw(L, "AT"));
            TRY(expect_kw(L, "LAYER"));
            TRY(take_num(L, "layer", 0, 1 << 20, &st->layer0));
            st->layer1 = st->layer0;
        }
        if (is_kw(L, "LIMIT")) {
            TRY(next(L));
            TRY(take_num(L, "LIMIT", 1, 1 << 24, &st->top));
        }
        return MF_OK;
    }
    if (is_kw(L, "INFER")) {
        st->kind = LQL_INFER;
        TRY(next(L));
        TRY(take_str(L, "prompt", &st->text));
        for (;;) {
            if (is_kw(L, "TOP")) {
                TRY(next(L));
                TRY(take_num(L, "TOP", 1, 1000, &st->top));
            } else if (is_kw(L, "WALK")) {
                TRY(next(L));
                st->mode = LQL_WALKK;
                TRY(take_num(L, "WALK k", 1, 4096, &st->walk_k));
            } else if (is_kw(L, "DENSE")) {
                TRY(next(L));
                st->mode = LQL_DENSE;
            } else if (is_kw(L, "COMPARE")) {
                TRY(next(L));
                st->mode = LQL_COMPARE;
                if (L->t == T_NUM) TRY(take_num(L, "COMPARE k", 1, 4096, &st->walk_k));
            } else break;
        }
        return MF_OK;
    }
    if (is_kw(L, "DELETE")) {
        st->kind = LQL_DELETE;
        TRY(next(L));
        TRY(expect_kw(L, "FROM"));
        TRY(expect_kw(L, "FEATURES"));
        TRY(expect_kw(L, "WHERE"));
        for (;;) {
            const bool layer = is_kw(L, "layer");
            if (!layer && !is_kw(L, "feature")) return lerr(L, "expected layer or feature");
            TRY(next(L));
            if (!is_punct(L, '=')) return lerr(L, "expected '='");
            TRY(next(L));
            if (layer) TRY(take_num(L, "layer", 0, 1 << 20, &st->layer0));
            else TRY(take_num(L, "feature", 0, 1 << 24, &st->feature));
            if (!is_kw(L, "AND")) break;
            TRY(next(L));
        }
        if (st->layer0 < 0 || st->feature < 0) return lerr(L, "DELETE needs both layer = n and feature = f");
        st->layer1 = st->layer0;
        return MF_OK;
    }
    if (is_kw(L, "SAVE") || is_kw(L, "APPLY") || is_kw(L, "BEGIN")) {
        st->kind = is_kw(L, "SAVE") ? LQL_SAVE_PATCH : is_kw(L, "APPLY") ? LQL_APPLY_PATCH : LQL_BEGIN_PATCH;
        TRY(next(L));
        TRY(expect_kw(L, "PATCH"));
        if (st->kind == LQL_SAVE_PATCH && L->t != T_STR) return MF_OK; /* to the name BEGIN PATCH gave */
        return take_str(L, st->kind == LQL_BEGIN_PATCH ? "patch name" : "patch file", &st->text);
    }
    if (is_kw(L, "INSERT")) return insert_stmt(L, st);
    if (is_kw(L, "UPDATE")) return update_stmt(L, st);
    if (is_kw(L, "COMPILE")) {
        TRY(next(L));
        TRY(expect_kw(L, "INTO"));
        if (is_kw(L, "VINDEX")) st->kind = LQL_COMPILE_VINDEX;
        else if (is_kw(L, "MODEL")) st->kind = LQL_COMPILE_MODEL;
        else return lerr(L, "expected VINDEX or MODEL after COMPILE INTO");
        TRY(next(L));
        return take_str(L, st->kind == LQL_COMPILE_MODEL ? "GGUF file" : "vindex directory", &st->text);
    }
    if (is_kw(L, "EXPLAIN")) {
        st->kind = LQL_EXPLAIN;
        TRY(next(L));
        TRY(expect_kw(L, "INFER"));
        TRY(take_str(L, "prompt", &st->text));
        for (;;) {
            if (is_kw(L, "TOP")) {
                TRY(next(L));
                TRY(take_num(L, "TOP", 1, 4096, &st->top));
            } else break;
        }
        return MF_OK;
    }
    if (is_kw(L, "SHOW")) {
        TRY(next(L));
        if (is_kw(L, "PATCHES")) st->kind = LQL_SHOW_PATCHES;
        else if (is_kw(L, "LAYERS")) st->kind = LQL_SHOW_LAYERS;
        else if (is_kw(L, "STATS")) st->kind = LQL_SHOW_STATS;
        else if (is_kw(L, "FEATURES")) st->kind = LQL_SHOW_FEATURES;
        else return lerr(L, "expected LAYERS, FEATURES, STATS or PATCHES after SHOW");
        TRY(next(L));
        if (st->kind == LQL_SHOW_FEATURES)
            for (;;) {
                if (is_kw(L, "AT")) TRY(layers_clause(L, st));
                else if (is_kw(L, "LIMIT")) {
                    TRY(next(L));
                    TRY(take_num(L, "LIMIT", 1, 1 << 24, &st->top));
                } else break;
            }
        return MF_OK;
    }
    return lerr(L, L->t == T_END ? "expected a statement"
                                 : "unknown statement (DESCRIBE, WALK, SELECT, INFER, EXPLAIN, SHOW, INSERT, UPDATE, "
                                   "DELETE, BEGIN, SAVE, APPLY, COMPILE)");
}

void lql_prog_free(lql_prog *p) {
    for (int i = 0; i < p->n; i++)
        free(p->s[i].text), free(p->s[i].token), free(p->s[i].nearest), free(p->s[i].rel), free(p->s[i].target);
    free(p->s);
    p->s = NULL, p->n = 0;
}

mf_status lql_parse(const char *text, size_t len, lql_prog *out) {
    memset(out, 0, sizeof *out);
    lexer L = {.p = text, .end = text + len, .line = 1, .col = 1};
    mf_status s = next(&L);
    int cap = 0;
    while (!s && L.t != T_END) {
        if (is_punct(&L, ';')) {
            s = next(&L);
            continue;
        }
        if (out->n == cap) {
            cap = cap ? 2 * cap : 4;
            lql_stmt *ns = realloc(out->s, (size_t)cap * sizeof *ns);
            if (!ns) {
                s = mf_err(MF_ERR_NOMEM, "out of memory");
                break;
            }
            out->s = ns;
        }
        lql_stmt *st = &out->s[out->n++];
        memset(st, 0, sizeof *st);
        s = statement(&L, st);
        if (!s && L.t != T_END && !is_punct(&L, ';')) s = lerr(&L, "expected ';' or the end of the statement");
    }
    free(L.str);
    if (s) lql_prog_free(out);
    return s;
}
