/* sha256.h - SHA-256 (FIPS 180-4), streaming, for the vindex's per-file
 * checksums and the source model's identity. */
#ifndef MF_VINDEX_SHA256_H
#define MF_VINDEX_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "minfer.h"

typedef struct mf_sha256 {
    uint32_t h[8];
    uint64_t n;        /* bytes hashed so far */
    uint8_t buf[64];
    size_t fill;
} mf_sha256;

void mf_sha256_init(mf_sha256 *c);
void mf_sha256_update(mf_sha256 *c, const void *data, size_t n);
/* 64 lower-case hex digits and a NUL into hex[65]. */
void mf_sha256_final_hex(mf_sha256 *c, char hex[65]);
/* The hash of a whole file, read in chunks; *size gets its length. */
mf_status mf_sha256_file(const char *path, char hex[65], uint64_t *size);

#endif
