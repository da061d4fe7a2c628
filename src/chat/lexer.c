/* lexer.c - Jinja tokenizer: text/tag splitting with whitespace control, then tokens inside tags. */
#include "chat/lexer.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    jarena *a;
    const char *s;
    size_t n, pos;
    int line;
    jtok *t;
    size_t nt, cap;
} lexer;

static const char *g_op_text[] = {
    "", "+", "-", "*", "/", "//", "%", "**", "~", "[", "]", "(", ")", "{", "}",
    "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";",
};

const char *jop_text(int op) { return op >= 0 && op <= OP_SEMICOLON ? g_op_text[op] : "?"; }

_Noreturn static void lex_fail(lexer *L, int line, const char *fmt, const char *arg) {
    jraise(L->a->fail, MF_ERR_FORMAT, line, "TemplateSyntaxError", fmt, arg);
}

static jtok *push(lexer *L, int type, int line) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        L->t = ja_grow(L->a, L->t, L->cap * sizeof(jtok), cap * sizeof(jtok));
        L->cap = cap;
    }
    jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = line;
    return t;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void advance(lexer *L, size_t to) {
    L->line += count_nl(L->s + L->pos, to - L->pos);
    L->pos = to;
}

static size_t skip_ws(const lexer *L, size_t i) {
    while (i < L->n && is_ws(L->s[i])) i++;
    return i;
}

static bool at(const lexer *L, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i + k <= L->n && !memcmp(L->s + i, lit, k);
}

/* Decodes a string literal body the way Jinja does (Python "unicode-escape"
 * over the raw text, with non-ASCII characters passed through). */
static void decode_string(lexer *L, jtok *t, const char *s, size_t n) {
    jsb b;
    sb_init(&b, L->a);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            sb_putc(&b, c);
            continue;
        }
        char e = s[++i];
        int hex = 0;
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': sb_putc(&b, '\\'); break;
        case '\'': sb_putc(&b, '\''); break;
        case '"': sb_putc(&b, '"'); break;
        case 'a': sb_putc(&b, '\a'); break;
        case 'b': sb_putc(&b, '\b'); break;
        case 'f': sb_putc(&b, '\f'); break;
        case 'n': sb_putc(&b, '\n'); break;
        case 'r': sb_putc(&b, '\r'); break;
        case 't': sb_putc(&b, '\t'); break;
        case 'v': sb_putc(&b, '\v'); break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') v = v * 8 + (uint32_t)(s[i++] - '0'), k++;
                i--;
                sb_utf8(&b, v);
            } else {
                sb_putc(&b, '\\'); /* unknown escapes stay as written */
                sb_putc(&b, e);
            }
        }
        if (hex) {
            uint32_t v = 0;
            for (int k = 0; k < hex; k++) {
                char h = i + 1 < n ? s[i + 1] : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) lex_fail(L, t->line, "truncated \\%s escape in string literal", e == 'x' ? "x" : e == 'u' ? "u" : "U");
                v = v * 16 + (uint32_t)d;
                i++;
            }
            if (v > 0x10FFFF) lex_fail(L, t->line, "%s", "illegal Unicode character in string literal");
            sb_utf8(&b, v);
        }
    }
    t->p = b.p ? b.p : "";
    t->n = b.n;
}

static int match_op(const char *s, size_t left) {
    static const struct { const char *txt; int op; } two[] = {
        {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {">=", OP_GE}, {"<=", OP_LE},
    };
    if (left >= 2)
        for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
            if (s[0] == two[i].txt[0] && s[1] == two[i].txt[1]) return two[i].op;
    switch (s[0]) {
    case '+': return OP_ADD;
    case '-': return OP_SUB;
    case '*': return OP_MUL;
    case '/': return OP_DIV;
    case '%': return OP_MOD;
    case '~': return OP_TILDE;
    case '[': return OP_LBRACKET;
    case ']': return OP_RBRACKET;
    case '(': return OP_LPAREN;
    case ')': return OP_RPAREN;
    case '{': return OP_LBRACE;
    case '}': return OP_RBRACE;
    case '>': return OP_GT;
    case '<': return OP_LT;
    case '=': return OP_ASSIGN;
    case '.': return OP_DOT;
    case ':': return OP_COLON;
    case '|': return OP_PIPE;
    case ',': return OP_COMMA;
    case ';': return OP_SEMICOLON;
    }
    return OP_NONE;
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Lexes the inside of {{ }} / {% %} up to and including the end tag.
 * Returns whether the end tag's match ended with a newline. */
static bool lex_tag(lexer *L, bool block, int open_line) {
    int balance = 0;
    for (;;) {
        size_t i = skip_ws(L, L->pos);
        advance(L, i);
        if (i >= L->n)
            lex_fail(L, open_line, "unexpected end of template: %s opened here was never closed", block ? "'{%'" : "'{{'");
        const char *s = L->s + i;
        size_t left = L->n - i;
        if (balance == 0) {
            /* end tag: "-%}" strips all following whitespace, "+%}" keeps it,
             * "%}" drops one newline (trim_blocks); "}}" never trims */
            const char *end = block ? "%}" : "}}";
            size_t mod = (left >= 3 && (s[0] == '-' || (block && s[0] == '+')) && s[1] == end[0] && s[2] == end[1]) ? 1 : 0;
            if (left >= 2 + mod && s[mod] == end[0] && s[mod + 1] == end[1]) {
                push(L, block ? T_BLOCK_END : T_VAR_END, L->line);
                size_t j = i + mod + 2;
                if (mod && s[0] == '-') j = skip_ws(L, j);
                else if (block && !mod && j < L->n && L->s[j] == '\n') j++;
                advance(L, j);
                return j > 0 && L->s[j - 1] == '\n' && j > i + mod + 2;
            }
        }
        if (is_name_start(*s)) {
            size_t k = 1;
            while (k < left && (is_name_start(s[k]) || is_digit(s[k]))) k++;
            jtok *t = push(L, T_NAME, L->line);
            t->p = s;
            t->n = k;
            advance(L, i + k);
            continue;
        }
        if (*s == '\'' || *s == '"') {
            size_t k = 1;
            while (k < left && s[k] != *s) k += s[k] == '\\' ? 2 : 1;
            if (k >= left) lex_fail(L, L->line, "%s", "unterminated string literal");
            jtok *t = push(L, T_STRING, L->line);
            decode_string(L, t, s + 1, k - 1);
            advance(L, i + k + 1);
            continue;
        }
        if (is_digit(*s)) {
            size_t k = 0;
            bool is_float = false;
            jtok *t = push(L, T_INT, L->line);
            if (left > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
                int base = (s[1] | 0x20) == 'x' ? 16 : (s[1] | 0x20) == 'o' ? 8 : 2;
                k = 2;
                while (k < left && (isxdigit((unsigned char)s[k]) || s[k] == '_')) k++;
                char buf[80];
                size_t m = 0;
                for (size_t q = 2; q < k && m < sizeof buf - 1; q++)
                    if (s[q] != '_') buf[m++] = s[q];
                buf[m] = 0;
                errno = 0;
                char *e;
                t->i = (int64_t)strtoll(buf, &e, base);
                if (errno || *e || !m) lex_fail(L, L->line, "%s", "invalid integer literal");
                advance(L, i + k);
                continue;
            }
            while (k < left && (is_digit(s[k]) || (s[k] == '_' && k + 1 < left && is_digit(s[k + 1])))) k++;
            /* "x.0.1" is two subscripts, not a float: Jinja only reads a
             * float when the number does not follow a dot */
            bool after_dot = i > 0 && L->s[i - 1] == '.';
            if (!after_dot && k + 1 < left && s[k] == '.' && is_digit(s[k + 1])) {
                is_float = true;
                k++;
                while (k < left && (is_digit(s[k]) || (s[k] == '_' && k + 1 < left && is_digit(s[k + 1])))) k++;
            }
            if (!after_dot && k < left && (s[k] == 'e' || s[k] == 'E')) {
                size_t q = k + 1;
                if (q < left && (s[q] == '+' || s[q] == '-')) q++;
                if (q < left && is_digit(s[q])) {
                    while (q < left && is_digit(s[q])) q++;
                    k = q;
                    is_float = true;
                }
            }
            char buf[128];
            size_t m = 0;
            for (size_t q = 0; q < k && m < sizeof buf - 1; q++)
                if (s[q] != '_') buf[m++] = s[q];
            buf[m] = 0;
            if (is_float) {
                t->type = T_FLOAT;
                t->d = strtod(buf, NULL);
            } else {
                errno = 0;
                t->i = (int64_t)strtoll(buf, NULL, 10);
                if (errno) lex_fail(L, L->line, "integer literal %s is too large", buf);
            }
            advance(L, i + k);
            continue;
        }
        int op = match_op(s, left);
        if (op == OP_NONE) {
            char c[2] = {*s, 0};
            lex_fail(L, L->line, "unexpected character '%s' in tag", c);
        }
        if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
            if (++balance > 1000) lex_fail(L, L->line, "%s", "brackets nested too deeply");
        } else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
            if (balance == 0) lex_fail(L, L->line, "unexpected '%s'", jop_text(op));
            balance--;
        }
        jtok *t = push(L, T_OP, L->line);
        t->op = (uint8_t)op;
        advance(L, i + (op == OP_FLOORDIV || op == OP_POW || op == OP_EQ || op == OP_NE || op == OP_GE || op == OP_LE ? 2 : 1));
    }
}

/* "{%" [-+]? ws* name ws* ("-%}" ws* | "+%}" | "%}") starting at i: returns
 * the end of the match (0 if it is not that tag) and the modifiers. */
static size_t match_simple_tag(const lexer *L, size_t i, const char *name, char *open_mod, char *close_mod) {
    if (!at(L, i, "{%")) return 0;
    size_t j = i + 2;
    *open_mod = 0;
    if (j < L->n && (L->s[j] == '-' || L->s[j] == '+')) *open_mod = L->s[j++];
    j = skip_ws(L, j);
    size_t k = strlen(name);
    if (!at(L, j, name)) return 0;
    j += k;
    if (j < L->n && (is_name_start(L->s[j]) || is_digit(L->s[j]))) return 0;
    j = skip_ws(L, j);
    *close_mod = 0;
    if (j < L->n && (L->s[j] == '-' || L->s[j] == '+')) *close_mod = L->s[j++];
    if (!at(L, j, "%}")) return 0;
    return j + 2;
}

static void emit_text(lexer *L, const char *p, size_t n, int line) {
    if (!n) return;
    jtok *t = push(L, T_TEXT, line);
    t->p = p;
    t->n = n;
}

void jlex(jarena *a, const char *src, size_t n, jtok **out, size_t *ntok) {
    /* Normalize \r\n and \r to \n, and drop one trailing newline
     * (keep_trailing_newline=False). */
    char *s = ja_alloc(a, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--;
    lexer L = {.a = a, .s = s, .n = m, .line = 1};
    bool line_starting = true;
    while (L.pos < L.n) {
        /* find the next tag start */
        size_t i = L.pos;
        const char *hit = NULL;
        while (i + 1 < L.n) {
            if (L.s[i] == '{' && (L.s[i + 1] == '{' || L.s[i + 1] == '%' || L.s[i + 1] == '#')) {
                hit = L.s + i;
                break;
            }
            i++;
        }
        if (!hit) {
            emit_text(&L, L.s + L.pos, L.n - L.pos, L.line);
            advance(&L, L.n);
            break;
        }
        char kind = L.s[i + 1];
        char mod = i + 2 < L.n && (L.s[i + 2] == '-' || L.s[i + 2] == '+') ? L.s[i + 2] : 0;
        /* whitespace control on the text before the tag */
        const char *text = L.s + L.pos;
        size_t tn = i - L.pos;
        if (mod == '-') {
            while (tn && is_ws(text[tn - 1])) tn--;
        } else if (mod != '+' && kind != '{') {
            /* lstrip_blocks: spaces/tabs between a line start and a block or
             * comment tag are dropped */
            size_t l_pos = tn;
            while (l_pos && text[l_pos - 1] != '\n') l_pos--;
            if (l_pos > 0 || line_starting) {
                size_t q = l_pos;
                while (q < tn && (text[q] == ' ' || text[q] == '\t')) q++;
                if (q == tn) tn = l_pos;
            }
        }
        emit_text(&L, text, tn, L.line);
        advance(&L, i);
        int tag_line = L.line;
        char om, cm;
        size_t raw_end = match_simple_tag(&L, i, "raw", &om, &cm);
        if (raw_end) {
            if (cm == '-') raw_end = skip_ws(&L, raw_end);
            advance(&L, raw_end);
            /* body runs to the first {% endraw %} */
            size_t j = raw_end, end = 0;
            for (; j + 1 < L.n; j++)
                if ((end = match_simple_tag(&L, j, "endraw", &om, &cm))) break;
            if (!end) lex_fail(&L, tag_line, "%s", "missing {% endraw %} for {% raw %}");
            size_t bn = j - raw_end;
            if (om == '-') {
                while (bn && is_ws(L.s[raw_end + bn - 1])) bn--;
            } else if (om != '+') {
                /* lstrip_blocks applies to {% endraw %} like any block tag */
                size_t l_pos = bn;
                while (l_pos && L.s[raw_end + l_pos - 1] != '\n') l_pos--;
                bool raw_line_start = raw_end > 0 && L.s[raw_end - 1] == '\n';
                if (l_pos > 0 || raw_line_start) {
                    size_t q = l_pos;
                    while (q < bn && (L.s[raw_end + q] == ' ' || L.s[raw_end + q] == '\t')) q++;
                    if (q == bn) bn = l_pos;
                }
            }
            emit_text(&L, L.s + raw_end, bn, L.line);
            if (cm == '-') end = skip_ws(&L, end);
            else if (cm != '+' && end < L.n && L.s[end] == '\n') end++;
            advance(&L, end);
            line_starting = L.s[end - 1] == '\n';
            continue;
        }
        if (kind == '#') {
            size_t j = i + 2;
            while (j + 1 < L.n && !(L.s[j] == '#' && L.s[j + 1] == '}')) j++;
            if (j + 1 >= L.n) lex_fail(&L, tag_line, "%s", "missing end of comment tag");
            char cmod = j > i + 2 + (mod ? 1 : 0) ? L.s[j - 1] : 0;
            size_t end = j + 2;
            if (cmod == '-') end = skip_ws(&L, end);
            else if (cmod != '+' && end < L.n && L.s[end] == '\n') end++;
            advance(&L, end);
            line_starting = L.s[end - 1] == '\n';
            continue;
        }
        push(&L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, L.line);
        advance(&L, i + 2 + (mod ? 1 : 0));
        line_starting = lex_tag(&L, kind == '%', tag_line);
    }
    push(&L, T_EOF, L.line);
    *out = L.t;
    *ntok = L.nt;
}
