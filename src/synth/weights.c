/* weights.c - the values of a synthetic tensor: a counter-based random
 * stream per (seed, tensor, row), so any row can be made on any thread in
 * any order and the file still depends on nothing but the seed. */
#include "synth/synth.h"

#include <math.h>
#include <string.h>

/* SplitMix64's finaliser: a bijective mix of 64 bits, good enough that
 * consecutive counters give independent-looking outputs. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull

/* FNV-1a: the tensor's name, not its position, keys its stream, so adding a
 * tensor to a preset does not change the others. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Llama 3's frequency-dependent RoPE scaling as one divisor per rotated
 * pair: wavelengths shorter than orig_ctx / high keep their frequency, those
 * longer than orig_ctx / low are slowed by `factor`, and the band between
 * blends the two smoothly. Computed in float, as the reference converter
 * does in float32. */
static void rope_factors(const synth_preset *p, int64_t n, float *dst) {
    const float two_pi = 6.283185307179586f;
    const float dim = (float)p->head_dim, orig = (float)p->l3_orig_ctx;
    const float short_wl = orig / p->l3_high, long_wl = orig / p->l3_low;
    for (int64_t i = 0; i < n; i++) {
        const float freq = 1.0f / powf(p->rope_base, (float)(2 * i) / dim);
        const float wl = two_pi / freq;
        if (wl < short_wl) {
            dst[i] = 1.0f;
        } else if (wl > long_wl) {
            dst[i] = p->l3_factor;
        } else {
            const float t = (orig / wl - p->l3_low) / (p->l3_high - p->l3_low);
            dst[i] = 1.0f / ((1.0f - t) / p->l3_factor + t);
        }
    }
}

void synth_fill_row(const synth_preset *p, const synth_tensor *t, uint64_t seed, int64_t row, float *dst) {
    const int64_t n = t->ne[0];
    if (t->kind == SK_ROPE_FREQS) {
        rope_factors(p, n, dst);
        return;
    }
    /* Uniform on [-a, a] has standard deviation a / sqrt(3). Each value is
     * an odd multiple of a / 2^24, (2k + 1 - 2^24) a / 2^24, so it is never
     * exactly zero: random weights stay non-degenerate for every type. */
    const float a = t->scale * 1.7320508f;
    const float step = a / 16777216.0f;
    const float center = t->kind == SK_NORM ? 1.0f : 0.0f;
    uint64_t ctr = mix64(mix64(seed ^ name_hash(t->name)) + (uint64_t)row * GOLDEN);
    for (int64_t j = 0; j < n; j += 2) {
        ctr += GOLDEN;
        const uint64_t r = mix64(ctr);
        const int32_t k0 = (int32_t)(r & 0xffffff), k1 = (int32_t)((r >> 32) & 0xffffff);
        dst[j] = center + (float)(2 * k0 + 1 - (1 << 24)) * step;
        if (j + 1 < n) dst[j + 1] = center + (float)(2 * k1 + 1 - (1 << 24)) * step;
    }
}
