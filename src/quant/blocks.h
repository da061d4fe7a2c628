/* blocks.h - the on-disk block layouts of quantized types, identical to GGUF's.
 * Every struct carries a static size check against the format's byte count. */
#ifndef MF_QUANT_BLOCKS_H
#define MF_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>
#include "quant/fp16.h"

#define QK8_0 32
typedef struct {
    mf_fp16 d;          /* scale */
    int8_t qs[QK8_0];   /* x = d * q */
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

#endif
