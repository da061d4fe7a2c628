/* launch.cuh - kernel launches with programmatic dependent launch (PDL,
 * Hopper and later).
 *
 * A decode step is a chain of small kernels, each a few microseconds long;
 * in stream order each one starts only after the previous one has drained,
 * so every boundary costs a launch and a ramp. Launched with PDL, a kernel's
 * blocks may be scheduled while its predecessor still runs: they do what
 * does not depend on it (load weights, which nothing in a step writes), then
 * wait in pdl_wait() until the predecessor has completed and its writes are
 * visible. The rule that makes this safe: a kernel launched by launch_k
 * reads and writes activations only after pdl_wait(); what no kernel of
 * the step writes may be read before it: the step's arrays (uploaded before
 * the step) and KV cells of earlier steps (the decode attention's
 * tensor-core and tile kernels copy those early). Waiting is
 * transitive (the predecessor itself finished only after its own wait), so
 * every earlier kernel of the stream is complete by then too.
 *
 * pdl_open() lets the next kernel be scheduled; kernels call it right after
 * their wait, so at most two kernels overlap. On GPUs before sm_90 both are
 * no-ops and launches are plain (mfc_pdl_on stays false). */
#ifndef MF_CUDA_LAUNCH_CUH
#define MF_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#include "cuda/kernels.h"

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_open() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* both, for kernels with nothing to do before their inputs are ready */
__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_open();
}

/* Queue kernel k on stream s: with the PDL attribute when mfc_pdl_on is
 * set (the kernel must then follow the rule above), plainly otherwise. */
template <typename... KArgs, typename... Args>
static inline void launch_k(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = mfc_pdl_on ? 1 : 0;
    cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

#endif
