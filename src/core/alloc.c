/* alloc.c - aligned zeroed allocation for kernel buffers (cache-line / AVX-512 aligned). */
#include "core/alloc.h"

#include <string.h>

void *mf_alloc_aligned(size_t size) {
    if (size == SIZE_MAX) return NULL;
    size_t rounded = (size + 63) & ~(size_t)63;
    if (rounded < size) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) return NULL;
    memset(p, 0, rounded ? rounded : 64);
    return p;
}
