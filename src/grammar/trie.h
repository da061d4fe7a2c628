/* trie.h - the vocabulary trie (trie.c) that the token mask (state.c) walks. */
#ifndef MF_GRAMMAR_TRIE_H
#define MF_GRAMMAR_TRIE_H

#include <stdint.h>

#include "minfer.h"

/* Nodes are in breadth-first order, so a node's children are consecutive:
 * node[first .. first + n). Node 0 is the root. */
typedef struct tnode {
    uint32_t first;
    int32_t tok;  /* a token whose piece ends here (-1 = none); more via next_tok */
    uint16_t n;   /* children (at most 256) */
    uint8_t b;    /* the byte leading here */
} tnode;

/* A subtree with tokens below its root, for the mask's shortcut (state.c):
 * when the grammar takes every byte sequence below the node, all its tokens
 * are allowed without walking it. Kept only where every path below is
 * well-formed UTF-8 from some state (a partial character allowed at the end). */
typedef struct tsub {
    uint64_t ascii[2]; /* the ASCII bytes below the node */
    uint32_t tb, te;   /* its tokens: dfs_tok[tb .. te) */
    bool nonascii;     /* some byte below is >= 0x80 */
    uint8_t ok;        /* bit k: well-formed when k continuation bytes are due at the node */
    uint16_t depth;    /* the most characters a path below starts (ASCII or lead bytes) */
} tsub;

struct mf_grammar_vocab {
    int32_t n_vocab;
    tnode *node;
    uint32_t n_nodes, max_depth;
    int32_t *next_tok; /* per token: the next token with the same piece (-1 = none) */
    uint32_t *off, *len;
    char *bytes;       /* every token's piece (special tokens rendered as nothing) */
    uint8_t *eog;      /* ends generation: allowed only where the grammar may end */
    uint32_t *big;     /* per node: 1 + its index in sub, or 0 */
    tsub *sub;
    uint32_t n_sub;
    int32_t *dfs_tok;  /* every token with a piece, in depth-first order of the trie */
};

#endif
