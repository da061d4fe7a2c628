/* features.c - which x86 SIMD extensions this CPU has and the OS enables
 * (CPUID for the instructions, XGETBV for the register state the OS saves). */
#include "cpu/kern/features.h"
#include "core/env.h"

#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* XCR0: which register sets the OS saves on a context switch. Spelled as the
 * instruction so this file needs no -mxsave. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static uint32_t detect(void) {
    unsigned r[4];
    cpuid(0, 0, r);
    const unsigned max_leaf = r[0];
    if (max_leaf < 1) return 0;
    cpuid(1, 0, r);
    const unsigned ecx1 = r[2];
    /* without OSXSAVE, XGETBV faults and the OS saves no YMM/ZMM state */
    if (!(ecx1 & (1u << 27)) || !(ecx1 & (1u << 28))) return 0;
    const uint64_t xcr0 = xgetbv0();
    const int os_ymm = (xcr0 & 0x6) == 0x6;         /* XMM + YMM upper halves */
    const int os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM0-15 upper, ZMM16-31 */
    if (!os_ymm || max_leaf < 7) return 0;

    uint32_t f = 0;
    if (ecx1 & (1u << 12)) f |= MF_CPUF_FMA;
    if (ecx1 & (1u << 29)) f |= MF_CPUF_F16C;
    cpuid(7, 0, r);
    const unsigned ebx7 = r[1], ecx7 = r[2], max_sub7 = r[0];
    if (ebx7 & (1u << 5)) f |= MF_CPUF_AVX2;
    if (ebx7 & (1u << 8)) f |= MF_CPUF_BMI2;
    if (os_zmm) {
        if (ebx7 & (1u << 16)) f |= MF_CPUF_AVX512F;
        if (ebx7 & (1u << 17)) f |= MF_CPUF_AVX512DQ;
        if (ebx7 & (1u << 30)) f |= MF_CPUF_AVX512BW;
        if (ebx7 & (1u << 31)) f |= MF_CPUF_AVX512VL;
        if (ecx7 & (1u << 11)) f |= MF_CPUF_AVX512VNNI;
        if (ecx7 & (1u << 8)) f |= MF_CPUF_GFNI;
        if (max_sub7 >= 1) {
            cpuid(7, 1, r);
            if (r[0] & (1u << 5)) f |= MF_CPUF_AVX512BF16;
        }
        /* AMX: CPUID.7.0 EDX bits 22 (BF16), 24 (TILE), 25 (INT8); XCR0
         * bits 17-18 (XTILECFG, XTILEDATA) say the OS manages the tiles */
        cpuid(7, 0, r);
        if ((xcr0 & 0x60000) == 0x60000 && (r[3] & (1u << 24))) {
            f |= MF_CPUF_AMX_TILE;
            if (r[3] & (1u << 25)) f |= MF_CPUF_AMX_INT8;
            if (r[3] & (1u << 22)) f |= MF_CPUF_AMX_BF16;
        }
    }
    return f;
}
#else
static uint32_t detect(void) { return 0; }
#endif

static uint32_t g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect_once(void) { g_features = detect(); }

uint32_t mf_cpu_features(void) {
    pthread_once(&g_once, detect_once);
    return g_features;
}

mf_cpu_level mf_cpu_level_supported(void) {
    const uint32_t f = mf_cpu_features();
    const uint32_t avx2 = MF_CPUF_AVX2 | MF_CPUF_FMA | MF_CPUF_F16C | MF_CPUF_BMI2;
    const uint32_t avx512 = avx2 | MF_CPUF_AVX512F | MF_CPUF_AVX512BW | MF_CPUF_AVX512VL | MF_CPUF_AVX512DQ;
    if ((f & avx2) != avx2) return MF_CPU_SCALAR;
    if ((f & avx512) != avx512) return MF_CPU_AVX2;
    return f & MF_CPUF_AVX512VNNI ? MF_CPU_AVX512_VNNI : MF_CPU_AVX512;
}

const char *mf_cpu_level_name(mf_cpu_level level) {
    switch (level) {
    case MF_CPU_AVX2: return "AVX2";
    case MF_CPU_AVX512: return "AVX-512";
    case MF_CPU_AVX512_VNNI: return "AVX-512 VNNI";
    default: return "scalar";
    }
}

bool mf_cpu_gfni(void) { return (mf_cpu_features() & MF_CPUF_GFNI) && !mf_env_on("MINFER_NO_GFNI"); }
