/* dispatch.c - builds one traits table per SIMD level the CPU supports and
 * chooses the level (mf_cpu_init). Each CPU backend instance takes its
 * kernels from the chosen level's table; quant/'s table stays the scalar
 * references (nothing overwrites it). */
#include "cpu/kern/features.h"
#include "core/env.h"
#include "cpu/kern/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* g_tab[level][type]: each level starts as a copy of the level below (the
 * references for scalar) and its files overwrite what they implement. Only
 * levels up to g_supported are filled: the hooks of a higher level are
 * compiled for instructions this CPU may not have. */
static mf_type_traits g_tab[MF_CPU_LEVELS][MF_TYPE_COUNT];
static mf_cpu_level g_supported;
static pthread_once_t g_tab_once = PTHREAD_ONCE_INIT;

static mf_cpu_level g_level;
static char g_note[160];
static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    g_supported = mf_cpu_level_supported();
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        const mf_type_traits *r = mf_type_traits_ref(t);
        if (r) g_tab[MF_CPU_SCALAR][t] = *r;
    }
    for (int lv = MF_CPU_AVX2; lv <= (int)g_supported; lv++) {
        mf_type_traits *tab = g_tab[lv];
        memcpy(tab, g_tab[lv - 1], sizeof g_tab[lv]);
        switch (lv) {
        case MF_CPU_AVX2:
            mf_cpu_reg_dot_float_avx2(tab);
            mf_cpu_reg_dot_legacy_avx2(tab);
            mf_cpu_reg_dot_kquant_avx2(tab);
            mf_cpu_reg_quantize_avx2(tab);
            mf_cpu_reg_dequant_avx2(tab);
            mf_cpu_reg_dotrows_avx2(tab);
            mf_cpu_reg_dotx16_avx2(tab);
            break;
        case MF_CPU_AVX512:
            mf_cpu_reg_dot_float_avx512(tab);
            mf_cpu_reg_dot_int8_avx512(tab);
            mf_cpu_reg_quantize_avx512(tab);
            mf_cpu_reg_dequant_avx512(tab);
            mf_cpu_reg_dotrows_avx512(tab);
            break;
        case MF_CPU_AVX512_VNNI:
            mf_cpu_reg_dot_int8_vnni_avx512(tab);
            mf_cpu_reg_dotrows_vnni_avx512(tab);
            mf_cpu_reg_dotx16_vnni_avx512(tab);
            break;
        default: break;
        }
    }
}

const mf_type_traits *mf_cpu_traits_for_level(int type, mf_cpu_level level) {
    pthread_once(&g_tab_once, build_tables);
    if (type < 0 || type >= MF_TYPE_COUNT || (int)level < 0 || level > g_supported) return NULL;
    const mf_type_traits *t = &g_tab[level][type];
    return t->vec_dot ? t : NULL;
}

static void init_once(void) {
    pthread_once(&g_tab_once, build_tables);
    mf_cpu_level lv = g_supported;
    const char *why = NULL;
    if (lv > MF_CPU_AVX2 && mf_env_on("MINFER_NO_AVX512")) {
        lv = MF_CPU_AVX2;
        why = "MINFER_NO_AVX512";
    }
    if (lv > MF_CPU_SCALAR && mf_env_on("MINFER_NO_AVX2")) {
        lv = MF_CPU_SCALAR;
        why = "MINFER_NO_AVX2";
    }
    if (lv == MF_CPU_AVX512_VNNI && mf_env_on("MINFER_NO_VNNI")) {
        lv = MF_CPU_AVX512;
        why = "MINFER_NO_VNNI";
    }
    g_level = lv;
    if (why)
        snprintf(g_note, sizeof g_note, "%s kernels (%s set; the CPU has %s)", mf_cpu_level_name(lv), why,
                 mf_cpu_level_name(g_supported));
    else snprintf(g_note, sizeof g_note, "%s kernels", mf_cpu_level_name(lv));
    if (lv == MF_CPU_AVX512_VNNI && mf_cpu_gfni()) {
        const size_t u = strlen(g_note);
        snprintf(g_note + u, sizeof g_note - u, ", GFNI for Q2_K/Q3_K decode");
    }
}

mf_cpu_level mf_cpu_init(void) {
    pthread_once(&g_init_once, init_once);
    return g_level;
}

void mf_cpu_level_override(mf_cpu_level level) {
    pthread_once(&g_init_once, init_once);
    if ((int)level >= 0 && level <= g_supported) g_level = level;
}

const char *mf_cpu_kernels_note(void) {
    mf_cpu_init();
    return g_note;
}
