/* qsearch.c - the scale searches shared by the K-quant reference quantizers
 * (see qsearch.h). Expressions keep llama.cpp's evaluation order on purpose:
 * e.g. `w * x * l` is (w*x)*l and `w * l * l` is (w*l)*l, and changing either
 * changes which candidate scale wins on some blocks. */
#include "quant/qsearch.h"

#include <math.h>

const int8_t mf_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* value of largest magnitude (first one on ties), and that magnitude */
static float signed_absmax(int n, const float *x, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) {
            amax = a;
            max = x[i];
        }
    }
    *amax_out = amax;
    return max;
}

float mf_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *weights) {
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < MF_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    /* first candidate: the extreme element lands exactly on level -nmax */
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(mf_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = weights ? weights[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx; /* = sumlx^2 / suml2, the error reduction of this fit */
    /* stretch the grid by +-0.1..0.9 of a level; keep a candidate only when it
     * reduces the weighted error (compared without dividing) */
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        iscale = -(nmax + 0.1f * step) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(mf_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = weights ? weights[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(mf_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float mf_make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < MF_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(mf_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    /* coordinate descent: re-level one element at a time against the scale the
     * other elements imply; accept when sumlx^2/suml2 grows */
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = clamp_int(mf_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float mf_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min,
                          uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0; /* the offset only ever subtracts */
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_err = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = mf_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clamp_int(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_err += weights[i] * diff;
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * step + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(mf_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        /* weighted least squares for (scale, min) given these levels */
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float s = (sum_w * sum_xl - sum_x * sum_l) / D;
            float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (m > 0) { /* a positive offset is not representable: refit scale alone */
                m = 0;
                s = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = s * Laux[i] + m - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                err += weights[i] * diff;
            }
            if (err < best_err) {
                memcpy(L, Laux, (size_t)n);
                best_err = err;
                scale = s;
                min = m;
            }
        }
    }
    *neg_min = -min;
    return scale;
}
