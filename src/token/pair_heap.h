/* pair_heap.h - the binary min-heap of candidate merges both merge-based
 * tokenizers keep (bpe.c by rank, spm.c by score). MF_PAIR_HEAP(state_t,
 * pair_t, before) defines heap_push and heap_pop for a state with fields
 * heap, heap_n, heap_cap and oom; before(a, b) is true when a is to merge
 * first. A failed growth sets oom and drops the pair: the caller checks oom
 * and fails the encode. */
#ifndef MF_TOKEN_PAIR_HEAP_H
#define MF_TOKEN_PAIR_HEAP_H

#include <stdbool.h>
#include <stdlib.h>

#define MF_PAIR_HEAP(state_t, pair_t, before)                                                  \
    static void heap_push(state_t *s, pair_t p) {                                              \
        if (s->heap_n == s->heap_cap) {                                                        \
            size_t nc = s->heap_cap ? s->heap_cap * 2 : 64;                                    \
            pair_t *h = realloc(s->heap, nc * sizeof *h);                                      \
            if (!h) {                                                                          \
                s->oom = true;                                                                 \
                return;                                                                        \
            }                                                                                  \
            s->heap = h;                                                                       \
            s->heap_cap = nc;                                                                  \
        }                                                                                      \
        size_t i = s->heap_n++;                                                                \
        while (i > 0) {                                                                        \
            size_t up = (i - 1) / 2;                                                           \
            if (!before(&p, &s->heap[up])) break;                                              \
            s->heap[i] = s->heap[up];                                                          \
            i = up;                                                                            \
        }                                                                                      \
        s->heap[i] = p;                                                                        \
    }                                                                                          \
                                                                                               \
    static pair_t heap_pop(state_t *s) {                                                       \
        pair_t top = s->heap[0], last = s->heap[--s->heap_n];                                  \
        size_t i = 0, n = s->heap_n;                                                           \
        for (;;) {                                                                             \
            size_t c = 2 * i + 1;                                                              \
            if (c >= n) break;                                                                 \
            if (c + 1 < n && before(&s->heap[c + 1], &s->heap[c])) c++;                        \
            if (!before(&s->heap[c], &last)) break;                                            \
            s->heap[i] = s->heap[c];                                                           \
            i = c;                                                                             \
        }                                                                                      \
        if (n) s->heap[i] = last;                                                              \
        return top;                                                                            \
    }

#endif
