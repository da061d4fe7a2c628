/* features.h - CPU feature detection and the run-time choice of SIMD kernels.
 *
 * Levels are cumulative: AVX-512 VNNI implies AVX-512 implies AVX2. Every
 * fast kernel equals the scalar reference bit for bit (quant/lanes.h says how
 * the float orders are fixed), so the level changes speed, never results.
 *
 *   MINFER_NO_AVX512=1  caps the level at AVX2
 *   MINFER_NO_AVX2=1    caps it at scalar
 *   MINFER_NO_VNNI=1    uses AVX-512 without the VNNI instructions
 *   MINFER_NO_GFNI=1    keeps the Q2_K/Q3_K decode kernels off GFNI
 * (read once, by mf_cpu_init). */
#ifndef MF_CPU_FEATURES_H
#define MF_CPU_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/types.h"

/* Feature bits, each set only when the OS also saves the registers it needs. */
enum {
    MF_CPUF_AVX2 = 1u << 0,
    MF_CPUF_FMA = 1u << 1,
    MF_CPUF_F16C = 1u << 2,
    MF_CPUF_BMI2 = 1u << 3,
    MF_CPUF_AVX512F = 1u << 4,
    MF_CPUF_AVX512BW = 1u << 5,
    MF_CPUF_AVX512VL = 1u << 6,
    MF_CPUF_AVX512DQ = 1u << 7,
    MF_CPUF_AVX512VNNI = 1u << 8,
    MF_CPUF_AVX512BF16 = 1u << 9,
    /* AMX: the instructions (CPUID) and the tile state in XCR0; using them
     * also needs the kernel's per-process permission (mf_amx_init) */
    MF_CPUF_AMX_TILE = 1u << 10,
    MF_CPUF_AMX_INT8 = 1u << 11,
    MF_CPUF_AMX_BF16 = 1u << 12,
    MF_CPUF_GFNI = 1u << 13, /* with AVX-512: the 512-bit forms */
};

typedef enum mf_cpu_level {
    MF_CPU_SCALAR = 0,
    MF_CPU_AVX2 = 1,        /* AVX2 + FMA + F16C + BMI2 */
    MF_CPU_AVX512 = 2,      /* + AVX-512 F/BW/VL/DQ */
    MF_CPU_AVX512_VNNI = 3, /* + AVX-512 VNNI */
    MF_CPU_LEVELS = 4,
} mf_cpu_level;

/* CPUID + XGETBV, computed once. */
uint32_t mf_cpu_features(void);
/* The highest level this CPU and OS support (environment not consulted). */
mf_cpu_level mf_cpu_level_supported(void);
/* Chooses the level (supported, capped by the environment) once per process
 * (pthread_once) and returns it: the level whose kernel table CPU backends
 * created from then on use (mf_cpu_traits_for_level). Safe to call from
 * several threads. */
mf_cpu_level mf_cpu_init(void);
/* For tests that run the same work at every level in one process: the level
 * mf_cpu_init returns from now on (models and contexts made after the call
 * use it; a level the CPU lacks is ignored). */
void mf_cpu_level_override(mf_cpu_level level);
/* Whether the Q2_K/Q3_K x16 kernels take GFNI: the CPU has it and
 * MINFER_NO_GFNI is unset (read each call; tables are built once). */
bool mf_cpu_gfni(void);
/* "scalar", "AVX2", "AVX-512", "AVX-512 VNNI". */
const char *mf_cpu_level_name(mf_cpu_level level);

/* The traits of `type` as level `level` would install them: that level's
 * kernels where they exist, the next lower level's otherwise, down to the
 * references. NULL when the type has no kernels or the CPU lacks the level.
 * For tests and benchmarks that compare levels in one process. */
const mf_type_traits *mf_cpu_traits_for_level(int type, mf_cpu_level level);

/* What mf_cpu_init chose, as the backend prints it with --verbose:
 * "AVX-512 VNNI kernels", or "AVX2 kernels (MINFER_NO_AVX512 set; the CPU has
 * AVX-512 VNNI)" when the environment lowered the level. */
const char *mf_cpu_kernels_note(void);


/* AMX tiles for the prefill GEMM (kern/amx.c): whether this process may use
 * them (the CPU has AMX-INT8, the OS saves the tile state, the kernel granted
 * the tile permission). Asks the kernel once; safe from several threads. */
int mf_amx_init(void);
/* Whether the matmul uses them: usable, and neither MINFER_AMX=0 nor
 * MINFER_NO_AMX=1. On by default: bitwise the VNNI GEMM, and on the AMX
 * machine measured (2026-12-07) pp512 ran 1.17-1.74x the VNNI path at
 * 2-16 threads (docs/PERFORMANCE.md). */
int mf_amx_enabled(void);
/* Why AMX is or is not used, for --verbose ("no AMX: the CPU (or the OS) has
 * no AMX-INT8", "AMX int8 tiles (MINFER_AMX=0 turns them off)", ...). */
const char *mf_amx_note(void);

/* AMX bf16 tiles (TDPBF16PS) for F16 and BF16 weights (gemm_amx.h): usable
 * where the CPU has AMX-BF16 and the kernel granted the tiles (the same
 * permission request). Enabled under MINFER_AMX=1 unless MINFER_AMX_BF16=0.
 * Unlike every other kernel these results are not bitwise vec_dot's (f32
 * accumulation inside the tiles; the bound is in gemm_amx.h), which is one
 * more reason they stay opt-in. */
int mf_amx_bf16_init(void);
int mf_amx_bf16_enabled(void);
/* For --verbose: "AMX bf16 tiles for F16/BF16 weights (...)", or why not. */
const char *mf_amx_bf16_note(void);

#endif
