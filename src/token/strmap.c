/* strmap.c - string hashing and the text -> id hash table behind token lookups. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "token/vocab_impl.h"

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Word-at-a-time multiply/rotate hash: token texts are short, so speed of the
 * short path matters more than anything else. */
uint64_t mf_hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t k;
        memcpy(&k, b, 8);
        h ^= k * 0xBF58476D1CE4E5B9ull;
        h = rotl64(h, 31) * 0x94D049BB133111EBull;
        b += 8;
        n -= 8;
    }
    if (n) {
        uint64_t k = 0;
        memcpy(&k, b, n);
        h ^= k * 0xBF58476D1CE4E5B9ull;
        h = rotl64(h, 29) * 0x94D049BB133111EBull;
    }
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

mf_status mf_strmap_init(mf_strmap *m, uint32_t expected) {
    uint32_t cap = 16;
    while (cap < expected * 2u + 16u && cap < (1u << 31)) cap <<= 1;
    m->mask = cap - 1;
    m->count = 0;
    m->slot = calloc(cap, sizeof *m->slot);
    m->hash = calloc(cap, sizeof *m->hash);
    if (!m->slot || !m->hash) {
        mf_strmap_free(m);
        return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for a %u-entry hash table", expected);
    }
    return MF_OK;
}

void mf_strmap_free(mf_strmap *m) {
    free(m->slot);
    free(m->hash);
    m->slot = m->hash = NULL;
    m->mask = m->count = 0;
}

int64_t mf_strmap_find(const mf_strmap *m, const mf_strref *keys, const char *s, size_t n) {
    if (!m->slot) return -1;
    uint32_t h = (uint32_t)mf_hash_bytes(s, n);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) return -1;
        if (m->hash[i] == h) {
            const mf_strref *k = &keys[e - 1];
            if (k->len == n && memcmp(k->s, s, n) == 0) return (int64_t)e - 1;
        }
    }
}

static mf_status grow(mf_strmap *m) {
    uint32_t ncap = (m->mask + 1) * 2;
    uint32_t *slot = calloc(ncap, sizeof *slot), *hash = calloc(ncap, sizeof *hash);
    if (!slot || !hash) {
        free(slot);
        free(hash);
        return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory growing a hash table to %u slots", ncap);
    }
    for (uint32_t i = 0; i <= m->mask; i++) {
        if (!m->slot[i]) continue;
        uint32_t j = m->hash[i] & (ncap - 1);
        while (slot[j]) j = (j + 1) & (ncap - 1);
        slot[j] = m->slot[i];
        hash[j] = m->hash[i];
    }
    free(m->slot);
    free(m->hash);
    m->slot = slot;
    m->hash = hash;
    m->mask = ncap - 1;
    return MF_OK;
}

mf_status mf_strmap_put(mf_strmap *m, const mf_strref *keys, uint32_t idx) {
    if ((m->count + 1) * 2 > m->mask + 1) {
        mf_status s = grow(m);
        if (s) return s;
    }
    const mf_strref *k = &keys[idx];
    uint32_t h = (uint32_t)mf_hash_bytes(k->s, k->len);
    uint32_t i = h & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) break;
        if (m->hash[i] == h) {
            const mf_strref *o = &keys[e - 1];
            if (o->len == k->len && memcmp(o->s, k->s, k->len) == 0) {
                m->slot[i] = idx + 1;
                return MF_OK;
            }
        }
    }
    m->slot[i] = idx + 1;
    m->hash[i] = h;
    m->count++;
    return MF_OK;
}
