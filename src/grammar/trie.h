/* trie.h - the vocabulary trie (trie.c) that the token mask (state.c) walks. */
#ifndef MF_GRAMMAR_TRIE_H
#define MF_GRAMMAR_TRIE_H

#include <stdint.h>

#include "minfer.h"

/* A node's children are consecutive: node[first .. first + n); the blocks
 * are in depth-first order. Node 0 is the root. The tokens of the subtree
 * below a node (itself included) are dfs_tok[dfs .. dend): those whose piece
 * ends at the node come first, up to the first child's dfs (or dend), so the
 * mask can name any subtree's tokens as one range of the list. */
typedef struct tnode {
    uint32_t first;
    uint32_t dfs, dend;
    uint16_t n;   /* children (at most 256) */
    uint8_t b;    /* the byte leading here */
    uint8_t own;  /* tokens ending here, 255 = 255 or more (then up to the first child's dfs) */
} tnode;

/* A subtree with tokens below its root, for the mask's shortcut (state.c):
 * when the grammar takes every byte sequence below the node, all its tokens
 * are allowed without walking it. Kept only where every path below is
 * well-formed UTF-8 from some state (a partial character allowed at the end). */
typedef struct tsub {
    uint64_t ascii[2]; /* the ASCII bytes below the node */
    bool nonascii;     /* some byte below is >= 0x80 */
    uint8_t ok;        /* bit k: well-formed when k continuation bytes are due at the node */
    uint16_t depth;    /* the most characters a path below starts (ASCII or lead bytes) */
} tsub;

struct mf_grammar_vocab {
    int32_t n_vocab;
    tnode *node;
    uint32_t n_nodes, max_depth;
    uint32_t *off, *len;
    char *bytes;       /* every token's piece (special tokens rendered as nothing) */
    uint8_t *eog;      /* ends generation: allowed only where the grammar may end */
    uint32_t *big;     /* per node: 1 + its index in sub, or 0 */
    tsub *sub;
    uint32_t n_sub;
    int32_t *dfs_tok;  /* every token with a piece, in depth-first order of the trie */
    uint32_t n_dfs;
    uint64_t *has_piece; /* bitmap of the tokens in dfs_tok: the mask when every piece is allowed */
    int32_t *eog_list;   /* the end-of-generation tokens */
    int32_t n_eog;
};

/* The tokens whose piece ends at node c: dfs_tok[c.dfs .. tnode_own_end(c)). */
static inline uint32_t tnode_own_end(const mf_grammar_vocab *v, const tnode *c) {
    if (c->own < 255) return c->dfs + c->own; /* no load of another node: the walk is bound by memory */
    return c->n ? v->node[c->first].dfs : c->dend;
}

#endif
