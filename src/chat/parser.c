/* parser.c - recursive-descent parser from tokens to the AST, following Jinja's grammar
 * and operator precedence; then a pass that resolves filter and test names. */
#include "chat/eval.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 200

typedef struct parser {
    jarena *a;
    jtok *t;
    size_t n, pos;
    int depth;
    int loop_depth;
} parser;

_Noreturn static void pfail(parser *P, int line, const char *fmt, ...) MF_PRINTF(3, 4);
_Noreturn static void pfail(parser *P, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jraise(P->a->fail, MF_ERR_FORMAT, line, "TemplateSyntaxError", "%s", msg);
}

static jtok *cur(parser *P) { return &P->t[P->pos]; }
static jtok *look(parser *P) { return &P->t[P->pos + (P->t[P->pos].type != T_EOF)]; }
static void next(parser *P) {
    if (P->t[P->pos].type != T_EOF) P->pos++;
}
static bool is_op(parser *P, int op) { return cur(P)->type == T_OP && cur(P)->op == op; }
static bool tok_is_name(const jtok *t, const char *s) {
    return t->type == T_NAME && t->n == strlen(s) && !memcmp(t->p, s, t->n);
}
static bool is_name(parser *P, const char *s) { return tok_is_name(cur(P), s); }
static bool skip_name(parser *P, const char *s) {
    if (!is_name(P, s)) return false;
    next(P);
    return true;
}
static bool skip_op(parser *P, int op) {
    if (!is_op(P, op)) return false;
    next(P);
    return true;
}

static const char *describe(parser *P, const jtok *t) {
    static const char *names[] = {"end of template", "template data", "'{{'", "'}}'", "'{%'", "'%}'",
                                  "name", "string", "integer", "float", "operator"};
    if (t->type == T_NAME || t->type == T_OP) {
        const char *s = t->type == T_NAME ? ja_strndup(P->a, t->p, t->n) : jop_text(t->op);
        size_t n = strlen(s) + 3;
        char *q = ja_alloc(P->a, n);
        snprintf(q, n, "'%s'", s);
        return q;
    }
    return names[t->type];
}

static void expect_op(parser *P, int op) {
    if (!skip_op(P, op)) pfail(P, cur(P)->line, "expected '%s', got %s", jop_text(op), describe(P, cur(P)));
}
static void expect_type(parser *P, int type, const char *what) {
    if (cur(P)->type != type) pfail(P, cur(P)->line, "expected %s, got %s", what, describe(P, cur(P)));
    next(P);
}
static const char *expect_ident(parser *P) {
    jtok *t = cur(P);
    if (t->type != T_NAME) pfail(P, t->line, "expected a name, got %s", describe(P, t));
    next(P);
    return ja_strndup(P->a, t->p, t->n);
}

static jnode *mk(parser *P, int kind, int line) {
    jnode *n = ja_alloc(P->a, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

static void add(parser *P, jnodes *l, jnode *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        l->v = ja_grow(P->a, l->v, l->cap * sizeof(jnode *), cap * sizeof(jnode *));
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static void enter(parser *P) {
    if (++P->depth > MAX_DEPTH) pfail(P, cur(P)->line, "template nested more than %d levels deep", MAX_DEPTH);
}

/* ---- expressions -------------------------------------------------------- */

static jnode *parse_expression(parser *P, bool with_condexpr);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *node);
static jnode *parse_filter(parser *P, jnode *node, bool start_inline);

/* end of a bare tuple: tag end, ')' or one of the extra names ("in", "recursive") */
static bool tuple_end(parser *P, const char *extra) {
    jtok *t = cur(P);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || (t->type == T_OP && t->op == OP_RPAREN)) return true;
    return extra && tok_is_name(t, extra);
}

static jnode *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra, bool explicit_parens) {
    int line = cur(P)->line;
    jnode *tup = mk(P, N_TUPLE, line);
    bool is_tuple = false;
    for (;;) {
        if (tup->list.n) expect_op(P, OP_COMMA);
        if (tuple_end(P, extra)) break;
        add(P, &tup->list, simplified ? parse_primary(P) : parse_expression(P, with_condexpr));
        if (is_op(P, OP_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (tup->list.n) return tup->list.v[0];
        if (!explicit_parens) pfail(P, line, "expected an expression, got %s", describe(P, cur(P)));
    }
    return tup;
}

static void parse_call_args(parser *P, jnodes *args) {
    expect_op(P, OP_LPAREN);
    bool kw = false;
    while (!is_op(P, OP_RPAREN)) {
        if (args->n) {
            expect_op(P, OP_COMMA);
            if (is_op(P, OP_RPAREN)) break;
        }
        if (is_op(P, OP_MUL) || is_op(P, OP_POW))
            jraise(P->a->fail, MF_ERR_UNSUPPORTED, cur(P)->line, "TemplateSyntaxError", "unsupported construct: *args / **kwargs in a call");
        if (cur(P)->type == T_NAME && look(P)->type == T_OP && look(P)->op == OP_ASSIGN) {
            jnode *k = mk(P, N_KWARG, cur(P)->line);
            k->str = expect_ident(P);
            next(P);
            k->a = parse_expression(P, true);
            add(P, args, k);
            kw = true;
        } else {
            if (kw) pfail(P, cur(P)->line, "positional argument follows keyword argument");
            add(P, args, parse_expression(P, true));
        }
    }
    expect_op(P, OP_RPAREN);
}

static const char *dotted_name(parser *P) {
    const char *name = expect_ident(P);
    while (is_op(P, OP_DOT)) {
        next(P);
        const char *more = expect_ident(P);
        size_t n = strlen(name) + strlen(more) + 2;
        char *s = ja_alloc(P->a, n);
        snprintf(s, n, "%s.%s", name, more);
        name = s;
    }
    return name;
}

static jnode *parse_filter(parser *P, jnode *node, bool start_inline) {
    while (is_op(P, OP_PIPE) || start_inline) {
        if (!start_inline) next(P);
        jnode *f = mk(P, N_FILTER, cur(P)->line);
        f->str = dotted_name(P);
        f->a = node;
        if (is_op(P, OP_LPAREN)) parse_call_args(P, &f->list);
        node = f;
        start_inline = false;
    }
    return node;
}

static jnode *parse_test(parser *P, jnode *node) {
    int line = cur(P)->line;
    next(P); /* 'is' */
    bool negated = skip_name(P, "not");
    jnode *t = mk(P, N_TEST, line);
    t->str = dotted_name(P);
    t->a = node;
    jtok *c = cur(P);
    if (is_op(P, OP_LPAREN)) {
        parse_call_args(P, &t->list);
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
                (c->type == T_OP && (c->op == OP_LBRACKET || c->op == OP_LBRACE))) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is")) pfail(P, c->line, "you cannot chain multiple tests with 'is'");
        add(P, &t->list, parse_postfix(P, parse_primary(P)));
    }
    if (negated) {
        jnode *n = mk(P, N_NOT, line);
        n->a = t;
        return n;
    }
    return t;
}

static jnode *parse_filter_expr(parser *P, jnode *node) {
    for (;;) {
        if (is_op(P, OP_PIPE)) node = parse_filter(P, node, false);
        else if (is_name(P, "is")) node = parse_test(P, node);
        else if (is_op(P, OP_LPAREN)) {
            jnode *call = mk(P, N_CALL, cur(P)->line);
            call->a = node;
            parse_call_args(P, &call->list);
            node = call;
        } else break;
    }
    return node;
}

static jnode *parse_subscribed(parser *P) {
    int line = cur(P)->line;
    jnode *s = mk(P, N_SLICE, line);
    if (is_op(P, OP_COLON)) {
        next(P);
    } else {
        jnode *e = parse_expression(P, true);
        if (!is_op(P, OP_COLON)) return e;
        next(P);
        s->a = e;
    }
    if (!is_op(P, OP_COLON) && !is_op(P, OP_RBRACKET) && !is_op(P, OP_COMMA)) s->b = parse_expression(P, true);
    if (is_op(P, OP_COLON)) {
        next(P);
        if (!is_op(P, OP_RBRACKET) && !is_op(P, OP_COMMA)) s->c = parse_expression(P, true);
    }
    return s;
}

static jnode *parse_postfix(parser *P, jnode *node) {
    for (;;) {
        int line = cur(P)->line;
        if (is_op(P, OP_DOT)) {
            next(P);
            jtok *t = cur(P);
            if (t->type == T_NAME) {
                jnode *g = mk(P, N_GETATTR, line);
                g->a = node;
                g->str = expect_ident(P);
                node = g;
            } else if (t->type == T_INT) {
                jnode *g = mk(P, N_GETITEM, line);
                g->a = node;
                g->b = mk(P, N_CONST, line);
                g->b->cval = jv_int(t->i);
                next(P);
                node = g;
            } else {
                pfail(P, line, "expected a name or number after '.', got %s", describe(P, t));
            }
        } else if (is_op(P, OP_LBRACKET)) {
            next(P);
            jnode *tup = mk(P, N_TUPLE, line);
            while (!is_op(P, OP_RBRACKET)) {
                if (tup->list.n) expect_op(P, OP_COMMA);
                add(P, &tup->list, parse_subscribed(P));
            }
            expect_op(P, OP_RBRACKET);
            if (!tup->list.n) pfail(P, line, "empty subscript");
            jnode *g = mk(P, N_GETITEM, line);
            g->a = node;
            g->b = tup->list.n == 1 ? tup->list.v[0] : tup;
            node = g;
        } else if (is_op(P, OP_LPAREN)) {
            jnode *call = mk(P, N_CALL, line);
            call->a = node;
            parse_call_args(P, &call->list);
            node = call;
        } else {
            return node;
        }
    }
}

static jnode *parse_primary(parser *P) {
    enter(P);
    jtok *t = cur(P);
    jnode *node;
    if (t->type == T_NAME) {
        node = mk(P, N_CONST, t->line);
        if (tok_is_name(t, "true") || tok_is_name(t, "True")) node->cval = jv_bool(true);
        else if (tok_is_name(t, "false") || tok_is_name(t, "False")) node->cval = jv_bool(false);
        else if (tok_is_name(t, "none") || tok_is_name(t, "None")) node->cval = jv_none();
        else {
            node->kind = N_NAME;
            node->str = ja_strndup(P->a, t->p, t->n);
        }
        next(P);
    } else if (t->type == T_STRING) {
        /* adjacent literals concatenate: "a" "b" */
        jsb b;
        sb_init(&b, P->a);
        int line = t->line;
        while (cur(P)->type == T_STRING) {
            sb_put(&b, cur(P)->p, cur(P)->n);
            next(P);
        }
        node = mk(P, N_CONST, line);
        node->cval = jv_strn(b.p ? b.p : "", b.n);
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        node = mk(P, N_CONST, t->line);
        node->cval = t->type == T_INT ? jv_int(t->i) : jv_float(t->d);
        next(P);
    } else if (t->type == T_OP && t->op == OP_LPAREN) {
        next(P);
        node = parse_tuple(P, false, true, NULL, true);
        expect_op(P, OP_RPAREN);
    } else if (t->type == T_OP && t->op == OP_LBRACKET) {
        next(P);
        node = mk(P, N_LIST, t->line);
        while (!is_op(P, OP_RBRACKET)) {
            if (node->list.n) expect_op(P, OP_COMMA);
            if (is_op(P, OP_RBRACKET)) break;
            add(P, &node->list, parse_expression(P, true));
        }
        expect_op(P, OP_RBRACKET);
    } else if (t->type == T_OP && t->op == OP_LBRACE) {
        next(P);
        node = mk(P, N_DICT, t->line);
        while (!is_op(P, OP_RBRACE)) {
            if (node->list.n) expect_op(P, OP_COMMA);
            if (is_op(P, OP_RBRACE)) break;
            add(P, &node->list, parse_expression(P, true));
            expect_op(P, OP_COLON);
            add(P, &node->list2, parse_expression(P, true));
        }
        expect_op(P, OP_RBRACE);
    } else {
        pfail(P, t->line, "unexpected %s", describe(P, t));
    }
    P->depth--;
    return node;
}

static jnode *parse_unary(parser *P, bool with_filter) {
    enter(P);
    int line = cur(P)->line;
    jnode *node;
    if (is_op(P, OP_SUB) || is_op(P, OP_ADD)) {
        node = mk(P, is_op(P, OP_SUB) ? N_NEG : N_POS, line);
        next(P);
        node->a = parse_unary(P, false);
    } else {
        node = parse_primary(P);
    }
    node = parse_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    P->depth--;
    return node;
}

static jnode *binop(parser *P, int op, jnode *l, jnode *r, int line) {
    jnode *n = mk(P, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *l = parse_unary(P, true);
    while (is_op(P, OP_POW)) {
        int line = cur(P)->line;
        next(P);
        l = binop(P, OP_POW, l, parse_unary(P, true), line);
    }
    return l;
}

static jnode *parse_math2(parser *P) {
    jnode *l = parse_pow(P);
    while (is_op(P, OP_MUL) || is_op(P, OP_DIV) || is_op(P, OP_FLOORDIV) || is_op(P, OP_MOD)) {
        int op = cur(P)->op, line = cur(P)->line;
        next(P);
        l = binop(P, op, l, parse_pow(P), line);
    }
    return l;
}

static jnode *parse_concat(parser *P) {
    jnode *l = parse_math2(P);
    while (is_op(P, OP_TILDE)) {
        int line = cur(P)->line;
        next(P);
        l = binop(P, OP_TILDE, l, parse_math2(P), line);
    }
    return l;
}

static jnode *parse_math1(parser *P) {
    jnode *l = parse_concat(P);
    while (is_op(P, OP_ADD) || is_op(P, OP_SUB)) {
        int op = cur(P)->op, line = cur(P)->line;
        next(P);
        l = binop(P, op, l, parse_concat(P), line);
    }
    return l;
}

static jnode *parse_compare(parser *P) {
    int line = cur(P)->line;
    jnode *expr = parse_math1(P);
    jnode *cmp = NULL;
    for (;;) {
        int op;
        jtok *t = cur(P);
        if (t->type == T_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT || t->op == OP_LE || t->op == OP_GT || t->op == OP_GE)) {
            op = t->op;
            next(P);
        } else if (is_name(P, "in")) {
            op = CMP_IN;
            next(P);
        } else if (is_name(P, "not") && tok_is_name(look(P), "in")) {
            op = CMP_NOTIN;
            next(P);
            next(P);
        } else {
            break;
        }
        if (!cmp) {
            cmp = mk(P, N_COMPARE, line);
            cmp->a = expr;
        }
        jnode *o = mk(P, N_CMPOP, t->line);
        o->op = (uint8_t)op;
        o->a = parse_math1(P);
        add(P, &cmp->list, o);
    }
    return cmp ? cmp : expr;
}

static jnode *parse_not(parser *P) {
    if (is_name(P, "not")) {
        enter(P);
        jnode *n = mk(P, N_NOT, cur(P)->line);
        next(P);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *l = parse_not(P);
    while (is_name(P, "and")) {
        jnode *n = mk(P, N_AND, cur(P)->line);
        next(P);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}

static jnode *parse_or(parser *P) {
    jnode *l = parse_and(P);
    while (is_name(P, "or")) {
        jnode *n = mk(P, N_OR, cur(P)->line);
        next(P);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static jnode *parse_condexpr(parser *P) {
    jnode *e1 = parse_or(P);
    while (is_name(P, "if")) {
        jnode *n = mk(P, N_COND, cur(P)->line);
        next(P);
        n->a = e1;
        n->b = parse_or(P);
        if (skip_name(P, "else")) n->c = parse_condexpr(P);
        e1 = n;
    }
    return e1;
}

static jnode *parse_expression(parser *P, bool with_condexpr) {
    enter(P);
    jnode *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

/* ---- statements --------------------------------------------------------- */

static jnodes parse_body(parser *P, const char *const *ends, const char *opener, int open_line);

static void end_tag(parser *P) { expect_type(P, T_BLOCK_END, "'%}'"); }

static bool assignable(jnode *t) {
    if (t->kind == N_NAME) return true;
    if (t->kind != N_TUPLE) return false;
    for (size_t i = 0; i < t->list.n; i++)
        if (!assignable(t->list.v[i])) return false;
    return true;
}

static jnode *parse_assign_target(parser *P, bool with_namespace, const char *extra) {
    int line = cur(P)->line;
    if (with_namespace && cur(P)->type == T_NAME && look(P)->type == T_OP && look(P)->op == OP_DOT) {
        jnode *r = mk(P, N_NSREF, line);
        r->str = expect_ident(P);
        next(P);
        r->str2 = expect_ident(P);
        return r;
    }
    jnode *t = parse_tuple(P, true, true, extra, false);
    if (!assignable(t)) pfail(P, line, "can't assign to this expression");
    return t;
}

/* The "name" token of the tag the body stopped at. */
static const char *tag_name(parser *P) { return ja_strndup(P->a, cur(P)->p, cur(P)->n); }

static jnode *parse_if(parser *P, int line) {
    jnode *n = mk(P, S_IF, line);
    n->a = parse_tuple(P, false, false, NULL, false);
    end_tag(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->list = parse_body(P, ends, "if", line);
    if (is_name(P, "elif")) {
        int l2 = cur(P)->line;
        next(P);
        jnode *e = parse_if(P, l2);
        add(P, &n->list2, e);
        return n; /* the nested if consumed endif */
    }
    if (skip_name(P, "else")) {
        end_tag(P);
        static const char *const ends2[] = {"endif", NULL};
        n->list2 = parse_body(P, ends2, "if", line);
    }
    next(P); /* endif */
    end_tag(P);
    return n;
}

static jnode *parse_for(parser *P, int line) {
    jnode *n = mk(P, S_FOR, line);
    n->target = parse_assign_target(P, false, "in");
    if (!skip_name(P, "in")) pfail(P, cur(P)->line, "expected 'in' in for loop, got %s", describe(P, cur(P)));
    n->a = parse_tuple(P, false, false, "recursive", false);
    if (skip_name(P, "if")) n->b = parse_expression(P, true);
    if (skip_name(P, "recursive"))
        jraise(P->a->fail, MF_ERR_UNSUPPORTED, line, "TemplateSyntaxError", "unsupported construct: recursive for loops");
    end_tag(P);
    static const char *const ends[] = {"endfor", "else", NULL};
    P->loop_depth++;
    n->list = parse_body(P, ends, "for", line);
    P->loop_depth--;
    if (skip_name(P, "else")) {
        end_tag(P);
        static const char *const ends2[] = {"endfor", NULL};
        n->list2 = parse_body(P, ends2, "for", line);
    }
    next(P);
    end_tag(P);
    return n;
}

static void parse_signature(parser *P, jnodes *params) {
    expect_op(P, OP_LPAREN);
    while (!is_op(P, OP_RPAREN)) {
        if (params->n) expect_op(P, OP_COMMA);
        jnode *p = mk(P, N_NAME, cur(P)->line);
        p->str = expect_ident(P);
        if (skip_op(P, OP_ASSIGN)) p->a = parse_expression(P, true);
        else
            for (size_t i = 0; i < params->n; i++)
                if (params->v[i]->a) pfail(P, p->line, "non-default argument follows default argument");
        add(P, params, p);
    }
    expect_op(P, OP_RPAREN);
}

static jnodes parse_closed_body(parser *P, const char *end, const char *opener, int line) {
    const char *ends[] = {end, NULL};
    jnodes body = parse_body(P, ends, opener, line);
    next(P);
    end_tag(P);
    return body;
}

static jnode *parse_statement(parser *P) {
    jtok *t = cur(P);
    int line = t->line;
    if (t->type != T_NAME) pfail(P, line, "tag name expected, got %s", describe(P, t));
    const char *name = tag_name(P);
    next(P);
    enter(P);
    jnode *n = NULL;
    if (!strcmp(name, "if")) {
        n = parse_if(P, line);
    } else if (!strcmp(name, "for")) {
        n = parse_for(P, line);
    } else if (!strcmp(name, "set")) {
        jnode *target = parse_assign_target(P, true, NULL);
        if (skip_op(P, OP_ASSIGN)) {
            n = mk(P, S_SET, line);
            n->target = target;
            n->a = parse_tuple(P, false, true, NULL, false);
            end_tag(P);
        } else {
            if (target->kind != N_NAME && target->kind != N_NSREF) pfail(P, line, "a {%% set %%} block assigns one name");
            n = mk(P, S_SETBLOCK, line);
            n->target = target;
            if (is_op(P, OP_PIPE)) n->a = parse_filter(P, NULL, false);
            end_tag(P);
            n->list = parse_closed_body(P, "endset", "set", line);
        }
    } else if (!strcmp(name, "macro")) {
        n = mk(P, S_MACRO, line);
        n->str = expect_ident(P);
        parse_signature(P, &n->list2);
        end_tag(P);
        int saved = P->loop_depth;
        P->loop_depth = 0;
        n->list = parse_closed_body(P, "endmacro", "macro", line);
        P->loop_depth = saved;
    } else if (!strcmp(name, "call")) {
        n = mk(P, S_CALLBLOCK, line);
        if (is_op(P, OP_LPAREN)) parse_signature(P, &n->list2);
        n->a = parse_expression(P, true);
        if (n->a->kind != N_CALL) pfail(P, line, "expected a call in {%% call %%}");
        end_tag(P);
        int saved = P->loop_depth;
        P->loop_depth = 0;
        n->list = parse_closed_body(P, "endcall", "call", line);
        P->loop_depth = saved;
    } else if (!strcmp(name, "filter")) {
        n = mk(P, S_FILTERBLOCK, line);
        n->a = parse_filter(P, NULL, true);
        end_tag(P);
        n->list = parse_closed_body(P, "endfilter", "filter", line);
    } else if (!strcmp(name, "with")) {
        n = mk(P, S_WITH, line);
        while (cur(P)->type != T_BLOCK_END) {
            if (n->list2.n) expect_op(P, OP_COMMA);
            jnode *s = mk(P, S_SET, cur(P)->line);
            s->target = parse_assign_target(P, false, NULL);
            expect_op(P, OP_ASSIGN);
            s->a = parse_expression(P, true);
            add(P, &n->list2, s);
        }
        end_tag(P);
        n->list = parse_closed_body(P, "endwith", "with", line);
    } else if (!strcmp(name, "generation")) {
        /* transformers' assistant-mask tag: renders its body unchanged (as a
         * call block, so in its own scope) */
        n = mk(P, S_WITH, line);
        end_tag(P);
        n->list = parse_closed_body(P, "endgeneration", "generation", line);
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!P->loop_depth) pfail(P, line, "'%s' outside of a loop", name);
        n = mk(P, name[0] == 'b' ? S_BREAK : S_CONTINUE, line);
        end_tag(P);
    } else if (!strcmp(name, "include") || !strcmp(name, "import") || !strcmp(name, "from") ||
               !strcmp(name, "extends") || !strcmp(name, "block") || !strcmp(name, "autoescape") ||
               !strcmp(name, "do") || !strcmp(name, "trans")) {
        jraise(P->a->fail, MF_ERR_UNSUPPORTED, line, "TemplateSyntaxError", "unsupported construct: {%% %s %%}", name);
    } else {
        pfail(P, line, "encountered unknown tag '%s'", name);
    }
    P->depth--;
    return n;
}

/* Parses nodes until a block tag whose name is in `ends` (left as the current
 * token) or, when ends is NULL, the end of the template. */
static jnodes parse_body(parser *P, const char *const *ends, const char *opener, int open_line) {
    jnodes body = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->type == T_EOF) {
            if (ends)
                pfail(P, open_line, "unexpected end of template: the '%s' block opened here needs '{%% end%s %%}'", opener, opener);
            return body;
        }
        if (t->type == T_TEXT) {
            jnode *n = mk(P, S_TEXT, t->line);
            n->str = t->p;
            n->cval = jv_strn(t->p, t->n);
            add(P, &body, n);
            next(P);
        } else if (t->type == T_VAR_BEGIN) {
            jnode *n = mk(P, S_OUTPUT, t->line);
            next(P);
            n->a = parse_tuple(P, false, true, NULL, false);
            expect_type(P, T_VAR_END, "'}}'");
            add(P, &body, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            next(P);
            if (ends)
                for (const char *const *e = ends; *e; e++)
                    if (is_name(P, *e)) return body;
            if (cur(P)->type == T_NAME && cur(P)->n > 3 && !memcmp(cur(P)->p, "end", 3)) {
                const char *nm = tag_name(P);
                if (ends) pfail(P, cur(P)->line, "unexpected '{%% %s %%}': the innermost open block is '%s' (line %d), which needs '{%% end%s %%}'", nm, opener, open_line, opener);
                pfail(P, cur(P)->line, "unexpected '{%% %s %%}' with no open block", nm);
            }
            if (ends && (is_name(P, "else") || is_name(P, "elif")))
                pfail(P, cur(P)->line, "unexpected '{%% %s %%}' inside '%s' (line %d)", tag_name(P), opener, open_line);
            add(P, &body, parse_statement(P));
        } else {
            pfail(P, t->line, "unexpected %s", describe(P, t));
        }
    }
}

/* ---- name resolution ---------------------------------------------------- */

/* Jinja checks that filters and tests exist when it compiles the template,
 * except inside {% if %} bodies/tests and inline `x if c else y` (its "soft"
 * frames), where a missing one only fails if that code runs. Loop, macro and
 * block bodies start a fresh, non-soft frame. */
static bool reads_name(const jnode *n, const char *name) {
    if (!n) return false;
    if (n->kind == N_NAME && !strcmp(n->str, name)) return true;
    if (reads_name(n->a, name) || reads_name(n->b, name) || reads_name(n->c, name)) return true;
    for (size_t i = 0; i < n->list.n; i++)
        if (reads_name(n->list.v[i], name)) return true;
    for (size_t i = 0; i < n->list2.n; i++)
        if (reads_name(n->list2.v[i], name)) return true;
    return false; /* n->target is a store, not a read */
}

static void resolve(parser *P, jnode *n, bool soft);
static void resolve_node(parser *P, jnode *n, bool soft);

static void resolve_list(parser *P, jnodes *l, bool soft) {
    for (size_t i = 0; i < l->n; i++) resolve(P, l->v[i], soft);
}

static void resolve(parser *P, jnode *n, bool soft) {
    if (!n) return;
    /* operator chains (a ~ b ~ c ...) nest without parser recursion; bound
     * the tree height here so neither this pass nor the evaluator can run
     * out of stack */
    if (++P->depth > 2000) pfail(P, n->line, "expression nested too deeply");
    resolve_node(P, n, soft);
    P->depth--;
}

static void resolve_node(parser *P, jnode *n, bool soft) {
    switch (n->kind) {
    case N_FILTER:
    case N_TEST: {
        bool known = false;
        const jbuiltin *b = n->kind == N_FILTER ? jfilter_find(n->str, &known) : jtest_find(n->str, &known);
        n->impl = (void *)b;
        n->soft = soft || known;
        if (!b && !n->soft)
            jraise(P->a->fail, MF_ERR_FORMAT, n->line, "TemplateAssertionError", "No %s named '%s'.",
                   n->kind == N_FILTER ? "filter" : "test", n->str);
        resolve(P, n->a, soft);
        resolve_list(P, &n->list, soft);
        return;
    }
    case N_COND:
        resolve(P, n->a, true);
        resolve(P, n->b, true);
        resolve(P, n->c, true);
        return;
    case S_IF:
        resolve(P, n->a, true);
        resolve_list(P, &n->list, true);
        resolve_list(P, &n->list2, true);
        return;
    case S_FOR:
        resolve(P, n->a, soft);
        resolve(P, n->b, false);
        resolve_list(P, &n->list, false);
        resolve_list(P, &n->list2, soft);
        return;
    case S_MACRO:
    case S_CALLBLOCK:
        for (size_t i = 0; i < n->list2.n; i++) resolve(P, n->list2.v[i]->a, false);
        resolve(P, n->a, soft);
        resolve_list(P, &n->list, false);
        /* like Jinja, a macro accepts extra positional / keyword arguments
         * only when its body reads `varargs` / `kwargs` (checked after
         * resolve() has bounded the tree's height) */
        for (size_t i = 0; i < n->list.n; i++) {
            if (reads_name(n->list.v[i], "varargs")) n->op |= MACRO_VARARGS;
            if (reads_name(n->list.v[i], "kwargs")) n->op |= MACRO_KWARGS;
        }
        return;
    case S_SETBLOCK:
    case S_FILTERBLOCK:
        resolve(P, n->a, false);
        resolve_list(P, &n->list, false);
        return;
    case S_WITH:
        resolve_list(P, &n->list2, soft);
        resolve_list(P, &n->list, false);
        return;
    default:
        resolve(P, n->a, soft);
        resolve(P, n->b, soft);
        resolve(P, n->c, soft);
        resolve_list(P, &n->list, soft);
        resolve_list(P, &n->list2, soft);
    }
}

jnodes jparse(jarena *a, const char *src, size_t n) {
    parser P = {.a = a};
    jlex(a, src, n, &P.t, &P.n);
    jnodes body = parse_body(&P, NULL, NULL, 0);
    resolve_list(&P, &body, false);
    return body;
}
