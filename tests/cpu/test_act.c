/* test_act.c - SwiGLU: the AVX2 kernel (mf_cpu_swiglu_avx2) gives the same
 * bits as its scalar twin mf_silu_ref(g) * u on random values over many
 * magnitudes, special values (+-0, +-inf, NaN, the exp cut-off at -87,
 * subnormals) and every tail length (NaN in, NaN out, sign unspecified);
 * and mf_silu_ref is within 2.5e-7 relative of a double-precision silu down
 * to -80, and within 1e-35 absolute below (the exp flushes to 0 under -87;
 * x / (1 + expf(-x)) gave -0 under -88.7 too). */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/cpu.h"
#include "cpu/kern/features.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the same bits, or both NaN (a NaN's sign and payload are not specified) */
static int same(float x, float y) { return isnan(x) ? isnan(y) : !memcmp(&x, &y, 4); }

int main(void) {
    qrand r = {424242};
    enum { N = 4096 };
    static float g[N], u[N], a[N], b[N];
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 87.0f, -87.0f, -87.5f, 88.0f, -88.0f, 89.0f, -89.0f,
                             1e30f, -1e30f, 1e-40f, -1e-40f, 1e-20f, -1e-20f, 0.5f, -0.5f, 3.4e38f, -3.4e38f};
    const int ns = sizeof special / sizeof special[0];
    for (int i = 0; i < N; i++) {
        const double mag = pow(10.0, -4.0 + 6.5 * qrand_uniform(&r)); /* 1e-4 .. ~3e2 */
        g[i] = i < ns ? special[i] : (float)(mag * (qrand_uniform(&r) < 0.5 ? -1 : 1));
        u[i] = (float)qrand_gauss(&r);
    }
    /* accuracy of the reference against double */
    double worst = 0, worst_x = 0;
    for (int i = ns; i < N; i++) {
        /* below -80 the result (|x| e^x < 1e-33) nears float's subnormals,
         * where relative error means nothing: checked in absolute terms */
        const double x = g[i], want = x / (1.0 + exp(-x)), got = mf_silu_ref(g[i]);
        if (x < -80) {
            CHECK(fabs(got - want) < 1e-35, "mf_silu_ref(%g) = %g, want %g", x, got, want);
            continue;
        }
        const double err = fabs(got - want) / fabs(want);
        if (err > worst) worst = err, worst_x = x;
    }
    CHECK(worst < 2.5e-7, "mf_silu_ref: worst relative error %.3g at %g", worst, worst_x);
    CHECK(mf_silu_ref(0.0f) == 0.0f && isnan(mf_silu_ref(NAN)) && mf_silu_ref(INFINITY) == INFINITY &&
              mf_silu_ref(-100.0f) > -1e-30f && mf_silu_ref(-100.0f) <= 0.0f,
          "mf_silu_ref special values");
    if (mf_cpu_level_supported() < MF_CPU_AVX2) {
        printf("test_act: no AVX2 on this CPU; only the reference was checked\n");
        return test_summary("test_act");
    }
    for (int i = 0; i < N; i++) a[i] = mf_silu_ref(g[i]) * u[i];
    int bad = 0;
    for (int len = 0; len <= 37; len++) /* every tail, at several offsets */
        for (int off = 0; off + len <= N; off += 997) {
            memset(b, 0x55, sizeof b);
            mf_cpu_swiglu_avx2(g + off, u + off, b + off, len);
            for (int i = 0; i < len; i++) bad += !same(a[off + i], b[off + i]);
            bad += off + len < N && memcmp(&b[off + len], "\x55\x55\x55\x55", 4) != 0; /* nothing written past n */
        }
    mf_cpu_swiglu_avx2(g, u, b, N);
    for (int i = 0; i < N; i++) bad += !same(a[i], b[i]);
    CHECK(!bad, "mf_cpu_swiglu_avx2: %d values differ from mf_silu_ref(g) * u (or were written past the end)", bad);
    printf("test_act: worst relative error of mf_silu_ref %.3g; AVX2 kernel bitwise equal\n", worst);
    return test_summary("test_act");
}
