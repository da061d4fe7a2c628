/* bandwidth.c - the device's copy bandwidth, measured in the calling
 * process (the ceiling `minfer bench` sets decode against): a 16-byte
 * grid-stride copy between two buffers of `bytes`, timed with events over
 * ten runs after two warm-ups, counting bytes read plus bytes written. */
#include "cuda/cuda.h"

double mf_cuda_copy_bandwidth(size_t bytes) {
    void *a = NULL, *b = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double gbs = -1;
    bytes &= ~(size_t)15;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaStreamCreate(&s) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess)
        goto done;
    cudaMemsetAsync(a, 1, bytes, s);
    for (int i = 0; i < 2; i++) mfc_copy_bytes(s, b, a, bytes);
    cudaEventRecord(e0, s);
    for (int i = 0; i < 10; i++) mfc_copy_bytes(s, b, a, bytes);
    cudaEventRecord(e1, s);
    if (cudaEventSynchronize(e1) == cudaSuccess) {
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (ms > 0) gbs = 2.0 * (double)bytes * 10 / (ms * 1e-3) / 1e9;
    }
done:
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    return gbs;
}
