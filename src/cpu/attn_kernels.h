/* attn_kernels.h - the inner loops of attention, per KV cache type and SIMD
 * level: load a head's slice of a cached K or V row as f32, dot, and the two
 * accumulator updates of the online softmax. */
#ifndef MF_CPU_ATTN_KERNELS_H
#define MF_CPU_ATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "minfer.h"

typedef struct mf_attn_kernels {
    /* f32 view of elements [off, off+n) of a cached row; may return a pointer
     * into the row itself (f32 cache) or fill and return buf */
    const float *(*load_k)(const uint8_t *row, size_t off, int n, float *buf);
    const float *(*load_v)(const uint8_t *row, size_t off, int n, float *buf);
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float *acc, float s, const float *v, int n);       /* acc += s*v */
    void (*scale_add)(float *acc, float c, const float *v, int n);  /* acc = acc*c + v */
    const char *name;
} mf_attn_kernels;

/* Best kernels this CPU runs for the cache type (MINFER_NO_AVX2 forces scalar). */
const mf_attn_kernels *mf_attn_kernels_get(mf_kv_type t);
/* The plain-C set (tests compare against it). */
const mf_attn_kernels *mf_attn_kernels_scalar(mf_kv_type t);
/* AVX2+FMA+F16C set, or NULL when not compiled in. */
const mf_attn_kernels *mf_attn_kernels_avx2(mf_kv_type t);

#endif
