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

struct mf_grammar_vocab {
    int32_t n_vocab;
    tnode *node;
    uint32_t n_nodes, max_depth;
    int32_t *next_tok; /* per token: the next token with the same piece (-1 = none) */
    uint32_t *off, *len;
    char *bytes;       /* every token's piece (special tokens rendered as nothing) */
    uint8_t *eog;      /* ends generation: allowed only where the grammar may end */
};

#endif
