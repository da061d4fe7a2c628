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

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#endif

static int g_ok, g_on;
static char g_note[160];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
    const uint32_t f = mf_cpu_features();
    const char *no = NULL;
    if (!(f & MF_CPUF_AMX_INT8)) no = "the CPU (or the OS) has no AMX-INT8";
    else if (mf_cpu_level_supported() < MF_CPU_AVX512_VNNI) no = "no AVX-512 VNNI beside it";
    else {
#if defined(ARCH_REQ_XCOMP_PERM)
        unsigned long perm = 0;
        if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
            no = "the kernel refused the tile permission (arch_prctl)";
        else if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0 || !(perm & (1ul << XFEATURE_XTILEDATA)))
            no = "the kernel did not grant the tile permission";
#else
        no = "not Linux on x86-64 (no tile permission request)";
#endif
    }
    g_ok = no == NULL;
    g_on = g_ok && mf_env_on("MINFER_AMX");
    if (no) snprintf(g_note, sizeof g_note, "no AMX: %s", no);
    else if (g_on) snprintf(g_note, sizeof g_note, "AMX int8 tiles (MINFER_AMX set)");
    else
        snprintf(g_note, sizeof g_note, "AMX int8 tiles available but off (MINFER_AMX=1 turns them on: not yet "
                                        "faster than VNNI, docs/PERFORMANCE.md)");
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
