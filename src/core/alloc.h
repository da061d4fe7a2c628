/* alloc.h - checked allocation helpers (overflow-safe sizes, aligned buffers). */
#ifndef MF_CORE_ALLOC_H
#define MF_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* a*b, or SIZE_MAX on overflow (an allocation of SIZE_MAX then fails cleanly). */
static inline size_t mf_mul_size(size_t a, size_t b) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return SIZE_MAX;
    return r;
}

/* 64-byte aligned, zeroed; free with free(). */
void *mf_alloc_aligned(size_t size);

#endif
