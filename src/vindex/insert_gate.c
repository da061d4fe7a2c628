/* insert_gate.c - the direction an inserted feature's gate reads: the one
 * that best tells the prompt's residual xe apart from ordinary residuals
 * (a reference set R at the same layer), i.e. the whitened difference
 *   d = (Sigma + lambda I)^-1 (xe - mu),   mu, Sigma: R's mean and covariance,
 * made orthogonal to mu (the FFN has no bias, so d . x must already be
 * near 0 on average over R). Sigma is low-rank (|R| rows), so Woodbury
 * gives d from an |R| x |R| solve whatever n_embd is:
 *   (lambda I + C C^T / N)^-1 v = (v - C (N lambda I + C^T C)^-1 C^T v) / lambda,
 * C = the centred rows. lambda is RIDGE times the mean variance. */
#include "vindex/vindex.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RIDGE 0.05

/* solves the SPD system A x = b in place (A: n x n, row-major) by Cholesky */
static bool cholesky_solve(double *A, double *b, int n) {
    for (int j = 0; j < n; j++) {
        double s = A[(size_t)j * n + j];
        for (int k = 0; k < j; k++) s -= A[(size_t)j * n + k] * A[(size_t)j * n + k];
        if (!(s > 0)) return false;
        const double l = sqrt(s);
        A[(size_t)j * n + j] = l;
        for (int i = j + 1; i < n; i++) {
            double t = A[(size_t)i * n + j];
            for (int k = 0; k < j; k++) t -= A[(size_t)i * n + k] * A[(size_t)j * n + k];
            A[(size_t)i * n + j] = t / l;
        }
    }
    for (int i = 0; i < n; i++) { /* L y = b */
        double t = b[i];
        for (int k = 0; k < i; k++) t -= A[(size_t)i * n + k] * b[k];
        b[i] = t / A[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
        double t = b[i];
        for (int k = i + 1; k < n; k++) t -= A[(size_t)k * n + i] * b[k];
        b[i] = t / A[(size_t)i * n + i];
    }
    return true;
}

mf_status vx_insert_gate(const float *xe, const float *ref, int N, int E, float *d) {
    double *mu = calloc((size_t)E, sizeof *mu), *C = malloc((size_t)N * E * sizeof *C), *v = malloc((size_t)E * sizeof *v);
    double *A = malloc((size_t)N * N * sizeof *A), *y = malloc((size_t)N * sizeof *y);
    mf_status s = !mu || !C || !v || !A || !y ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    if (!s && N < 2) s = mf_err(MF_ERR_INVALID_ARG, "%d reference positions (2 at least)", N);
    if (!s) {
        for (int i = 0; i < N; i++)
            for (int e = 0; e < E; e++) mu[e] += ref[(size_t)i * E + e] / N;
        double var = 0;
        for (int i = 0; i < N; i++)
            for (int e = 0; e < E; e++) {
                C[(size_t)i * E + e] = ref[(size_t)i * E + e] - mu[e];
                var += C[(size_t)i * E + e] * C[(size_t)i * E + e];
            }
        const double lambda = RIDGE * (var / N / E > 0 ? var / N / E : 1.0);
        for (int e = 0; e < E; e++) v[e] = xe[e] - mu[e];
        /* A = N lambda I + C C^T (rows of C are the centred references), y = C v */
        for (int i = 0; i < N; i++) {
            double t = 0;
            for (int e = 0; e < E; e++) t += C[(size_t)i * E + e] * v[e];
            y[i] = t;
            for (int j = 0; j <= i; j++) {
                double a = 0;
                for (int e = 0; e < E; e++) a += C[(size_t)i * E + e] * C[(size_t)j * E + e];
                A[(size_t)i * N + j] = A[(size_t)j * N + i] = a + (i == j ? N * lambda : 0.0);
            }
        }
        if (!cholesky_solve(A, y, N)) s = mf_err(MF_ERR_INVALID_ARG, "the reference residuals are degenerate");
        for (int e = 0; !s && e < E; e++) {
            double t = v[e];
            for (int i = 0; i < N; i++) t -= C[(size_t)i * E + e] * y[i];
            v[e] = t / lambda;
        }
        /* orthogonal to the mean: d . x is then d . (x - mu) */
        double vm = 0, mm = 0, dx = 0;
        for (int e = 0; !s && e < E; e++) vm += v[e] * mu[e], mm += mu[e] * mu[e];
        for (int e = 0; !s && e < E; e++) {
            d[e] = (float)(v[e] - (mm > 0 ? vm / mm : 0.0) * mu[e]);
            dx += (double)d[e] * xe[e];
        }
        if (!s && !(dx > 0)) s = mf_err(MF_ERR_INVALID_ARG, "the prompt's residual has no direction of its own");
    }
    free(mu), free(C), free(v), free(A), free(y);
    return s;
}
