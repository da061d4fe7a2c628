/* graph_time.h - the CUDA benchmarks' shared pieces: a checked CUDA call
 * (CK), and the timing of a captured CUDA graph: the graph instantiated,
 * replayed once to warm up, then the best of `reps` replays in
 * milliseconds (negative when CUDA failed; the caller says where). */
#ifndef MF_TESTS_CUDA_GRAPH_TIME_H
#define MF_TESTS_CUDA_GRAPH_TIME_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

/* a CUDA call that must succeed: else the benchmark (BENCH_NAME, defined
 * before this header) says which call and why, and exits 1 */
#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            fprintf(stderr, BENCH_NAME ": %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static inline float graph_best_ms(cudaStream_t s, cudaGraph_t g, int reps) {
    cudaGraphExec_t ge;
    cudaEvent_t e0, e1;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) return -1.0f;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    float best = -1.0f;
    if (cudaGraphLaunch(ge, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess) {
        best = 1e30f;
        for (int it = 0; it < reps; it++) {
            float ms = 0.0f;
            cudaEventRecord(e0, s);
            cudaGraphLaunch(ge, s);
            cudaEventRecord(e1, s);
            if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
                best = -1.0f;
                break;
            }
            if (ms < best) best = ms;
        }
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    return best;
}

#endif
