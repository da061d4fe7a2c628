/* lexer.h - splits Jinja template source into tokens, applying Jinja's whitespace rules
 * (trim_blocks, lstrip_blocks, `-`/`+` modifiers) the way transformers configures them. */
#ifndef MF_CHAT_LEXER_H
#define MF_CHAT_LEXER_H

#include "chat/value.h"

typedef enum jtok_type {
    T_EOF = 0,
    T_TEXT,        /* template data between tags */
    T_VAR_BEGIN,   /* {{ */
    T_VAR_END,     /* }} */
    T_BLOCK_BEGIN, /* {% */
    T_BLOCK_END,   /* %} */
    T_NAME,
    T_STRING,      /* decoded value in p/n */
    T_INT,
    T_FLOAT,
    T_OP,
} jtok_type;

typedef enum jop {
    OP_NONE = 0,
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
    OP_LBRACKET, OP_RBRACKET, OP_LPAREN, OP_RPAREN, OP_LBRACE, OP_RBRACE,
    OP_EQ, OP_NE, OP_GT, OP_GE, OP_LT, OP_LE,
    OP_ASSIGN, OP_DOT, OP_COLON, OP_PIPE, OP_COMMA, OP_SEMICOLON,
} jop;

typedef struct jtok {
    uint8_t type;
    uint8_t op;       /* T_OP */
    int line;
    const char *p;    /* text / name / decoded string */
    size_t n;
    int64_t i;
    double d;
} jtok;

/* Tokenizes src (newlines are normalized to \n and one trailing newline is
 * dropped, as Jinja does). The token array ends with T_EOF. Raises
 * TemplateSyntaxError through a->fail. */
void jlex(jarena *a, const char *src, size_t n, jtok **out, size_t *ntok);

const char *jop_text(int op);

#endif
