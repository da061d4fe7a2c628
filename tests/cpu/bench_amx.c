/* bench_amx.c - AMX tile-instruction micro-benchmark (not a ctest): cycles
 * (TSC) per int8 tile multiply with the operands in tiles, with one tile
 * load per multiply from cache (aligned and not), and with a tile store read
 * back by vector loads, to see which part limits a tile GEMM on this CPU.
 * Exits 0 with a note where AMX is not usable. Run: build/tests/bench_amx */
#include "cpu/kern/features.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <x86intrin.h>

#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw")

static const uint8_t g_cfg[64] __attribute__((aligned(64))) = {
    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0};

static uint8_t buf[1 << 20] __attribute__((aligned(64)));

#define N 20000

int main(void) {
    if (!mf_amx_init()) {
        printf("bench_amx: %s\n", mf_amx_note());
        return 0;
    }
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7 + 3);
    _tile_loadconfig(g_cfg);
    _tile_loadd(0, buf, 64);
    _tile_loadd(1, buf + 1024, 64);
    _tile_loadd(2, buf + 2048, 64);
    _tile_loadd(3, buf + 3072, 64);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    uint64_t t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        _tile_dpbssd(4, 0, 1);
        _tile_dpbssd(5, 0, 2);
        _tile_dpbssd(6, 0, 3);
        _tile_dpbssd(7, 0, 1);
    }
    printf("tdpbssd, 4 chains, operands in tiles: %.1f cycles each\n", (double)(__rdtsc() - t0) / (4.0 * N));
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) _tile_dpbssd(4, 0, 1);
    printf("tdpbssd, 1 chain: %.1f cycles each\n", (double)(__rdtsc() - t0) / N);
    for (int off = 0; off <= 16; off += 16) {
        t0 = __rdtsc();
        for (int i = 0; i < N; i++) {
            const uint8_t *p = buf + off + (size_t)(i & 15) * 4096;
            _tile_loadd(1, p, 64);
            _tile_dpbssd(4, 0, 1);
            _tile_loadd(2, p + 1024, 64);
            _tile_dpbssd(5, 0, 2);
            _tile_loadd(3, p + 2048, 64);
            _tile_dpbssd(6, 0, 3);
            _tile_loadd(1, p + 3072, 64);
            _tile_dpbssd(7, 0, 1);
        }
        printf("load B (64 KiB set, offset %d) + tdpbssd, 4 chains: %.1f cycles per pair\n", off,
               (double)(__rdtsc() - t0) / (4.0 * N));
    }
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        const uint8_t *p = buf + (size_t)(i & 255) * 4096; /* 1 MiB: L2 */
        _tile_loadd(1, p, 64);
        _tile_dpbssd(4, 0, 1);
        _tile_loadd(2, p + 1024, 64);
        _tile_dpbssd(5, 0, 2);
        _tile_loadd(3, p + 2048, 64);
        _tile_dpbssd(6, 0, 3);
        _tile_loadd(1, p + 3072, 64);
        _tile_dpbssd(7, 0, 1);
    }
    printf("load B (1 MiB set) + tdpbssd, 4 chains: %.1f cycles per pair\n", (double)(__rdtsc() - t0) / (4.0 * N));
    static int32_t cb[2][256] __attribute__((aligned(64)));
    __m512i acc = _mm512_setzero_si512();
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        _tile_zero(4);
        _tile_dpbssd(4, 0, 1);
        _tile_stored(4, cb[i & 1], 64);
        const int32_t *c = cb[(i & 1) ^ 1];
        for (int r = 0; r < 16; r++) acc = _mm512_add_epi32(acc, _mm512_load_si512(c + 16 * r));
    }
    printf("zero + tdpbssd + store + 16 vector loads of the previous: %.1f cycles each\n", (double)(__rdtsc() - t0) / N);
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        _tile_stored(4, cb[i & 1], 64);
    }
    printf("tilestored alone: %.1f cycles each\n", (double)(__rdtsc() - t0) / N);
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        _tile_loadd(1, buf + (size_t)(i & 15) * 1024, 64);
    }
    printf("tileloadd alone (16 KiB set): %.1f cycles each\n", (double)(__rdtsc() - t0) / N);
    t0 = __rdtsc();
    for (int i = 0; i < N; i++) {
        _tile_loadd(1, buf + (size_t)(i & 15) * 1024, 256);
    }
    printf("tileloadd alone, stride 256: %.1f cycles each\n", (double)(__rdtsc() - t0) / N);
    _tile_release();
    int32_t s[16];
    _mm512_storeu_si512(s, acc);
    printf("(checksum %d)\n", s[0]);
    return 0;
}
