/* cpasync.cuh - asynchronous global-to-shared copies (cp.async, sm_80+):
 * a kernel issues a tile's loads, works on the previous tile, then waits,
 * so the loads of many threads are in flight at once instead of each
 * thread stalling on its own. */
#ifndef MF_CUDA_CPASYNC_CUH
#define MF_CUDA_CPASYNC_CUH

/* cp.async of 16 bytes (zero-filled when !ok), its groups */
__device__ __forceinline__ void cp16(void *sm, const void *g, bool ok) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(sm);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
/* all but the newest group complete */
__device__ __forceinline__ void cp_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

#endif
