/* amx.c - whether this process may use the AMX tiles.
 *
 * Linux keeps the 8 KiB tile state off by default: the first tile
 * instruction of a process that has not asked for it raises SIGILL (which is
 * what a program that skips the request sees). The request,
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), is per process and is
 * made once here; ARCH_GET_XCOMP_PERM then confirms it. */
#include "cpu/kern/features.h"
#include "core/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#endif

static int g_ok, g_on, g_bf16_ok, g_bf16_on;
static char g_note[160], g_bf16_note[200];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The tile permission, once for both kinds: NULL when granted, else why not. */
static const char *request_tiles(void) {
#if defined(ARCH_REQ_XCOMP_PERM)
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return "the kernel refused the tile permission (arch_prctl)";
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0 || !(perm & (1ul << XFEATURE_XTILEDATA)))
        return "the kernel did not grant the tile permission";
    return NULL;
#else
    return "not Linux on x86-64 (no tile permission request)";
#endif
}

static void init_once(void) {
    const uint32_t f = mf_cpu_features();
    const char *no = NULL, *no_bf16 = NULL;
    const int vnni = mf_cpu_level_supported() >= MF_CPU_AVX512_VNNI;
    if (!(f & MF_CPUF_AMX_INT8)) no = "the CPU (or the OS) has no AMX-INT8";
    else if (!vnni) no = "no AVX-512 VNNI beside it";
    if (!(f & MF_CPUF_AMX_BF16)) no_bf16 = "the CPU (or the OS) has no AMX-BF16";
    else if (!vnni) no_bf16 = "no AVX-512 VNNI beside it";
    if (!no || !no_bf16) {
        const char *perm = request_tiles();
        if (perm) no = no ? no : perm, no_bf16 = no_bf16 ? no_bf16 : perm;
    }
    g_ok = no == NULL;
    /* int8 tiles: on by default (bitwise the VNNI GEMM, and faster end to end
     * at 2-16 threads where measured: docs/PERFORMANCE.md); MINFER_AMX=0 or
     * MINFER_NO_AMX=1 turns them off for A/B */
    const int amx_zero = mf_env_off("MINFER_AMX");
    g_on = g_ok && !amx_zero && !mf_env_on("MINFER_NO_AMX");
    if (no) snprintf(g_note, sizeof g_note, "no AMX: %s", no);
    else if (g_on) snprintf(g_note, sizeof g_note, "AMX int8 tiles (MINFER_AMX=0 turns them off)");
    else snprintf(g_note, sizeof g_note, "AMX int8 tiles available but off (%s)", amx_zero ? "MINFER_AMX=0" : "MINFER_NO_AMX");
    /* bf16 tiles: only under MINFER_AMX=1 (unlike the int8 kind not bitwise:
     * features.h), MINFER_AMX_BF16=0 alone turns them off for A/B */
    const int bf16_off = mf_env_off("MINFER_AMX_BF16");
    g_bf16_ok = no_bf16 == NULL;
    g_bf16_on = g_bf16_ok && mf_env_on("MINFER_AMX") && !bf16_off;
    if (no_bf16) snprintf(g_bf16_note, sizeof g_bf16_note, "no AMX bf16 for F16/BF16 weights: %s", no_bf16);
    else if (g_bf16_on)
        snprintf(g_bf16_note, sizeof g_bf16_note, "AMX bf16 tiles for F16/BF16 weights (MINFER_AMX set; "
                                                  "MINFER_AMX_BF16=0 turns them off)");
    else if (bf16_off) snprintf(g_bf16_note, sizeof g_bf16_note, "AMX bf16 tiles off (MINFER_AMX_BF16=0)");
    else
        snprintf(g_bf16_note, sizeof g_bf16_note, "AMX bf16 tiles available but off (MINFER_AMX=1 turns them on)");
}

int mf_amx_init(void) {
    pthread_once(&g_once, init_once);
    return g_ok;
}

int mf_amx_enabled(void) {
    pthread_once(&g_once, init_once);
    return g_on;
}

const char *mf_amx_note(void) {
    pthread_once(&g_once, init_once);
    return g_note;
}

int mf_amx_bf16_init(void) {
    pthread_once(&g_once, init_once);
    return g_bf16_ok;
}

int mf_amx_bf16_enabled(void) {
    pthread_once(&g_once, init_once);
    return g_bf16_on;
}

const char *mf_amx_bf16_note(void) {
    pthread_once(&g_once, init_once);
    return g_bf16_note;
}
