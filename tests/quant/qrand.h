/* qrand.h - deterministic random data for the quant tests (xorshift64 +
 * Box-Muller), so every run sees the same rows and failures reproduce. */
#ifndef MF_TEST_QRAND_H
#define MF_TEST_QRAND_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t s;
} qrand;

static inline double qrand_uniform(qrand *r) { /* [0, 1) */
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (double)(r->s >> 11) * (1.0 / 9007199254740992.0);
}

static inline double qrand_gauss(qrand *r) {
    double u = qrand_uniform(r), v = qrand_uniform(r);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Data shapes the tests use. */
typedef enum {
    QDATA_GAUSS,       /* N(0, 1): the shape of trained weights */
    QDATA_HEAVY,       /* N(0, 1) with 2% of values x10: outliers as in real layers */
    QDATA_UNIFORM,     /* U(-1, 1) */
    QDATA_COUNT
} qdata;

static inline void qrand_fill(qrand *r, float *x, int64_t n, qdata kind, double scale) {
    for (int64_t i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case QDATA_HEAVY: v = qrand_gauss(r) * (qrand_uniform(r) < 0.02 ? 10 : 1); break;
        case QDATA_UNIFORM: v = qrand_uniform(r) * 2 - 1; break;
        default: v = qrand_gauss(r); break;
        }
        x[i] = (float)(v * scale);
    }
}

#endif
