/* kernels.h - the C face of the CUDA kernels (k_*.cu): one launcher per
 * kernel family, queued on the given stream. Launchers never synchronize;
 * they return false only for shapes or types they do not take (the caller
 * then records an error), and leave launch errors to cudaGetLastError.
 *
 * Step inputs (token ids, positions, cells, page tables) are read by the
 * kernels from device memory (mfc_step_dev), never passed by value, so a
 * captured decode step can be replayed for the next token unchanged. */
#ifndef MF_CUDA_KERNELS_H
#define MF_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device copies of one step's per-row and per-sequence arrays. */
typedef struct mfc_step_dev {
    const int32_t *tok;     /* [n_tok] */
    const int32_t *pos;     /* [n_tok] */
    const int32_t *cell;    /* [n_tok] */
    const int32_t *rowseq;  /* [n_tok] index of the row's sequence */
    const int32_t *out_rows;/* [n_out] */
    const int32_t *seq_pg;  /* [n_seq] offset of each sequence's block table in pages */
    const int32_t *pages;   /* block tables, concatenated */
} mfc_step_dev;

/* KV cache types of the device kernels; q8_0 rows are blocks of MFC_Q8_BLOCK bytes */
#define MFC_KV_F32 0
#define MFC_KV_F16 1
#define MFC_KV_Q8 2
#define MFC_Q8_BLOCK 34

typedef struct mfc_attn {
    int n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale, softcap;
    int window;
    int page_size;
    int k_width, v_width; /* elements per cache row */
    int kvt;              /* cache type: MFC_KV_F32, MFC_KV_F16 or MFC_KV_Q8 */
    /* each row's keys below its own position were written by earlier steps
     * (every sequence has one row in the step), so the tensor-core and tile
     * kernels may start copying them before the kernel before it completes */
    int early;
} mfc_attn;

/* Split (decode) attention cuts a row's n visible keys into shares of
 * mfc_att_share(n) keys: the smallest multiple of 32 that makes at most
 * MFC_ATT_MAX_SHARES of them. It depends on the row's own key count only,
 * never on the step's other rows or the context's size, so a row's result
 * is the same in any batch; short rows get shares of 32 (many blocks at one
 * row), long ones at most 64 shares to merge. */
#define MFC_ATT_MAX_SHARES 64
/* the first key a row at pos sees: 0, or the start of its sliding window */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int mfc_att_first(int window, int pos) { return window > 0 && pos >= window ? pos - window + 1 : 0; }
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int mfc_att_share(int n) {
    const int s = (n + 32 * MFC_ATT_MAX_SHARES - 1) / (32 * MFC_ATT_MAX_SHARES) * 32;
    return s < 32 ? 32 : s;
}
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int mfc_att_n_shares(int n) { return (n + mfc_att_share(n) - 1) / mfc_att_share(n); }

typedef struct mfc_rope {
    int neox;
    int n_rot;
    float theta_scale; /* base^(-2/n_rot), computed on the host with the CPU's powf */
    float freq_scale, ext_factor, attn_factor, corr0, corr1;
    const float *freq_factors; /* device, or NULL */
} mfc_rope;

/* kernels are launched with programmatic dependent launch (launch.cuh);
 * set once by the backend on sm_90+ unless MINFER_CUDA_PDL=0 */
extern bool mfc_pdl_on;

/* whether matmul / get_rows take weights of this mf_type */
bool mfc_type_ok(int type);

/* Q8_0 on the device, rows of whole super-blocks (k % 256 == 0): each run
 * of 8 blocks (272 bytes, as in the file) holds their 8 f16 scales, then
 * their 8 x 32 levels. In the file a block's 32 levels start 2 bytes past
 * its scale, so every other block's levels are only 2-byte aligned: a
 * kernel took three 4-byte loads and two funnel shifts per 8 of those
 * levels, and one 2-byte load per scale. Here levels are 16-byte aligned and a row's
 * 8 scales one 16-byte load. The row size is the file's, so row and expert
 * offsets do not change. The kernels take it as its own type id; weights.c
 * uploads Q8_0 matrices so (mfc_q8_0r_pack), other rows stay as in the
 * file. */
#define MFC_T_Q8_0R 200
/* Q6_K on the device, rows of an even number of super-blocks (k % 512 ==
 * 0): each odd super-block holds the file's four parts in reverse order,
 * f16 d (2 bytes), 16 scales, 64 bytes of high bits, 128 of low bits;
 * even ones stay as in the file (low bits, high bits, scales, d). A
 * 210-byte block leaves every odd block 2 bytes off a 4-byte boundary, so
 * in the file the kernels read its parts by 2-byte loads (a lane of the
 * one-row product: 17 loads for 24 bytes a super-block); reversed, every
 * part of both blocks of a pair starts on 4 bytes (rows start on 4: an
 * even count of 210-byte blocks). Block offsets and the row size are the
 * file's. */
#define MFC_T_Q6_KP 201
/* the kernels' type of a weight of mf_type `type` with rows of k: 8 is
 * MF_TYPE_Q8_0, 14 MF_TYPE_Q6_K (weights.c asserts it) */
static inline int mfc_dev_type(int type, long long k) {
    return type == 8 && k % 256 == 0 ? MFC_T_Q8_0R : type == 14 && k % 512 == 0 ? MFC_T_Q6_KP : type;
}
/* n_rows Q8_0 rows of k (k % 256 == 0) from src (the file's blocks) into
 * dst (the layout above); src and dst do not overlap */
void mfc_q8_0r_pack(const void *src, void *dst, size_t n_rows, int k);
/* n_rows Q6_K rows of k (k % 512 == 0) into MFC_T_Q6_KP's layout; src and
 * dst do not overlap */
void mfc_q6_kp_pack(const void *src, void *dst, size_t n_rows, int k);
/* n_rows rows of k into the device layout `dev_type` (one of the two
 * above: its packer); false, and nothing written, for any other type */
bool mfc_dev_pack(int dev_type, const void *src, void *dst, size_t n_rows, int k);

/* out[r][j] = x[r] . W[j] (+ b[j]); res[r][j] += out[r][j] when res is given.
 * W: n rows of k elements in type `type` (row_bytes apart). */
bool mfc_matmul(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const float *x, int rows,
                float *out, const float *b, float *res);

/* Activations quantized to int8 blocks of 32 (scale d, scaled sum s per
 * block), for the dp4a decode products (k_mmvq.cu) and the int8 tensor-core
 * ones (k_mmq.cu). Up to 8 rows, row-major: q[r][k], d[r][k/32], s
 * likewise. More rows, tiled for the mma fragments: tiles of 16 rows, per
 * tile and block of 32 a unit (unit = tile * k/32 + block) of 512 bytes in
 * q, 16 (d, s) pairs in d (s unused); byte (4 g + t) * 16 + (e / 4) * 8 +
 * h * 4 + e % 4 of a unit is row g + 8 h of the tile, level 8 t + e of the
 * block (a lane's 16 bytes are its mma A registers in order). Buffers
 * hold whole tiles (rows rounded up to 16), d twice the pairs of rows. */
typedef struct mfc_q8 {
    int8_t *q;
    float *d, *s;
    /* tiled rows of whole super-blocks (q8_g8_on): each 256 activations'
     * 8 blocks share one scale, the largest, so the K-quant mma products
     * sum integers over a super-block (k_mmq.cu). The producer's caller
     * sets it (the CPU rounds K-quants' activations per 256 too, Q8_0's
     * per 32); every consumer reads either kind. */
    int g8;
} mfc_q8;
/* 0: row-major; else the tiled layout's blocks per row */
static inline int mfc_q8_tiled_kb(int rows, int k) { return rows > 8 ? k / 32 : 0; }
/* whether the producers give each super-block of 256 one scale (g8 asked
 * for, the tiled layout kbt, rows of whole super-blocks): they and the
 * consumers decide by this alike */
static inline bool q8_g8_on(int g8, int kbt) { return g8 && kbt && kbt % 8 == 0; }
/* 0: every producer's scales per 32 (MINFER_CUDA_Q8_G8=0, A/B); else the
 * backend asks for g8 where every consumer is a K-quant */
extern int mfc_q8_g8;
/* one product of a multi-product launch: n rows of w (type, row_bytes
 * apart) into out, plus b, and res += out when res is given */
typedef struct mfc_mm_seg {
    const void *w;
    size_t row_bytes;
    int type, n;
    float *out;
    const float *b;
    float *res;
} mfc_mm_seg;
#define MFC_MAX_SEGS 4
#define MFC_MAX_HEAD_DIM 256

/* whether mfc_mmvq takes this product (type: the kernels' type, so Q8_0
 * as MFC_T_Q8_0R): up to 8 rows by dp4a, 9 .. mfc_mmq_rows on the int8
 * tensor cores (k_mmq.cu; Q4_K, Q6_K and Q8_0 only: Q2_K, Q3_K, IQ4_NL and
 * IQ4_XS up to 8 rows) */
bool mfc_mmvq_takes(int type, int k, int rows);
extern int mfc_mmq_rows;
extern int mfc_mmq_chunk; /* activation rows per launch chunk: 16, 32 or 64 (0: by the weights' size) */
extern int mfc_mmq_stage; /* 0: activations read per mma, not staged in shared memory (A/B) */
/* the int8 tensor-core products (any rows, in chunks of mfc_mmq_chunk rows), as mfc_mmvq_n */
void mfc_mmq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows);
int mfc_mmq_team(int k);
extern int mfc_mmq_w; /* 1, 2 or 4 forces mfc_mmq_team (benchmarks; 0: by k) */
/* mfc_mmq_tile_rows rows or more with both operands staged in shared
 * memory (k_mmq_tile.cu); false (nothing queued) for fewer rows, other types, or
 * with mfc_mmq_tile_on off (MINFER_CUDA_MMQ_TILE=0) */
extern bool mfc_mmq_tile_on;
extern int mfc_mmq_tile_rows; /* the fewest rows the tiles take: 65 (MINFER_CUDA_MMQ_TILE_ROWS, at least 9) */
bool mfc_mmq_tile(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows);
/* warps per weight row the products take for rows of k (a function of k
 * only); mfc_mmvq_w = 1, 2 or 4 forces it (benchmarks; 0: by k) */
int mfc_mmvq_team(int k);
extern int mfc_mmvq_w;
/* the 64-register variant for large one-row K-quant grids (k_mmvq.cu); 0: off */
extern int mfc_mmvq_occ;
void mfc_quant_x(cudaStream_t s, const float *x, int k, int rows, const mfc_q8 *q);
/* as mfc_matmul, over activations mfc_quant_x wrote into q */
void mfc_mmvq(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const mfc_q8 *q, int rows,
              float *out, const float *b, float *res);

/* up to MFC_MAX_SEGS products of the same activations (Q/K/V) in one
 * launch; each output row as mfc_mmvq computes it */
void mfc_mmvq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows);
/* gate and up products (one type, no bias) as one launch, then the gated
 * activation: act[r][j] = glu(gate[r][j], up[r][j]) (act: 0 SwiGLU, 1 GEGLU),
 * gate and up written too; when qout is given, act also quantized into it as
 * mfc_quant_x would. False when the shape does not fit (n % 32). */
bool mfc_mmvq_glu(cudaStream_t s, int act, const mfc_mm_seg *gate, const mfc_mm_seg *up, int k, const mfc_q8 *q,
                  int rows, float *act_out, const mfc_q8 *qout);
/* norm (as mfc_norm) whose output is also quantized into q (as
 * mfc_quant_x): false unless n % 32 == 0 */
bool mfc_norm_quant(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows, int n,
                    float eps, float *out, const mfc_q8 *q);

/* prefill products (more than 8 rows) of the types the int8 kernels do not
 * take, on the tensor cores, f16 in, f32 accumulate (k_gemm_tc.cu);
 * mfc_matmul otherwise */
/* A prompt's products on the f16 tensor cores (k_gemm_h.cu): activations
 * in f16, each row scaled by a power of two (h: rows x k halves; s: the
 * factor per row that undoes it), weights decoded to f16 in shared memory.
 * mfc_gemm_h converts x into xh first when x is given (else xh already
 * holds it), then runs the products in one launch; false for types, shapes
 * or row counts it does not take, and for segments of types other than
 * Q4_K/Q6_K unless all of one type (launch those one by one).
 * mfc_gemm_h_rows: the fewest rows it takes (MINFER_CUDA_GEMM_H_ROWS; 0: none). */
typedef struct mfc_xh {
    void *h;
    float *s;
    float *part; /* partial sums of products split along k: rows x MFC_H_PART_PER_ROW
                    floats (NULL: no product is split) */
} mfc_xh;
#define MFC_H_PART_PER_ROW 32768
extern int mfc_gemm_h_rows;
/* most parts a product's k is split into (MINFER_CUDA_GEMM_H_SPLIT; 1: none),
 * and the parts a product of n rows of k gets */
extern int mfc_gemm_h_split;
int mfc_gemm_h_parts(int k, int n);
bool mfc_gemm_h_takes(int type, int k, int rows);
void mfc_x_to_h(cudaStream_t s, const float *x, int k, int rows, const mfc_xh *xh);
bool mfc_gemm_h(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const float *x, int rows, const mfc_xh *xh);
bool mfc_gemm_tc_takes(int type, int k, int rows);
bool mfc_gemm_tc(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const float *x, int rows,
                 float *out, const float *b, float *res);

/* out[r] = row ids[r] of w as f32; ids from the step's tokens or positions */
bool mfc_get_rows(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, const int32_t *ids, int rows,
                  float *out);

void mfc_norm(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows, int n,
              float eps, float *out);
void mfc_add(cudaStream_t s, float *a, const float *b, size_t n);
void mfc_scale(cudaStream_t s, float *x, float f, size_t n);
void mfc_softcap(cudaStream_t s, float *x, float cap, size_t n);
/* act: 0 SwiGLU, 1 GEGLU, 2 GELU (mf_ffn_type order) */
void mfc_glu(cudaStream_t s, int act, const float *gate, const float *up, size_t n, float *out);
void mfc_copy_cols(cudaStream_t s, const float *src, int src_width, int col0, int n, int rows, float *dst);
void mfc_gather_rows(cudaStream_t s, const float *src, const int32_t *idx, int count, int n, float *dst);
void mfc_rope_apply(cudaStream_t s, float *x, int rows, int n_head, int head_dim, const int32_t *pos, const mfc_rope *p);
/* RMS norm of each head (weight w over head_dim) then RoPE, in place; the
 * bits of mfc_norm then mfc_rope_apply. False for heads over
 * MFC_MAX_HEAD_DIM or n_rot > head_dim. */
bool mfc_norm_rope(cudaStream_t s, float *x, const float *w, int rows, int n_head, int head_dim, float eps,
                   const int32_t *pos, const mfc_rope *p);

/* a group of heads for mfc_rope_store: x (rows x n_head x head_dim), in
 * place; norm: an RMS QK-norm (weight w, or none) first */
typedef struct mfc_rope_grp {
    float *x;
    const float *w;
    int n_head;
    bool norm;
    float eps;
} mfc_rope_grp;
/* RoPE of a's heads (Q; n_head may be 0) and b's (K), each after its
 * QK-norm, then b's heads and v stored into the cache as mfc_kv_store
 * stores them: the bits of mfc_norm_rope / mfc_rope_apply then
 * mfc_kv_store, in one launch. False unless k_width == b's heads x
 * head_dim and the head fits MFC_MAX_HEAD_DIM. */
bool mfc_rope_store(cudaStream_t s, const mfc_step_dev *st, int rows, const mfc_rope_grp *a, const mfc_rope_grp *b,
                    int head_dim, const mfc_rope *p, const float *v, void *kc, void *vc, int k_width, int v_width,
                    int kvt);
void mfc_kv_store(cudaStream_t s, const mfc_step_dev *st, int rows, const float *k, const float *v, void *kc, void *vc,
                  int k_width, int v_width, int kvt);
/* With part (rows x n_head x nsplit x (head_dim_v + 2) floats; decode
 * steps): each query's keys in shares of mfc_att_share keys (at most nsplit
 * of them per row), then merged; nz (1..nsplit) blocks along the shares, at
 * least the most any row of the step has. Without part: one block per query
 * head over all its keys (prefill). qout (or NULL): out also quantized there
 * as mfc_quant_x would (head_dim_v % 32 == 0), scales per 32 whatever
 * qout->g8 says (a block a head: the caller clears it). */
/* the decode kernel for shares: 2 (the default) the tensor-core one where
 * it takes the shape (f16 cache, heads of 64 or 128, up to 16 query heads
 * a KV head), else as 0; 0 the f32 tile kernel where it takes the shape
 * (f16 cache, heads of 64 or 128, up to 8 query heads a KV head), else the
 * grouped one where it does (groups of up to 8), else one block per query
 * head (MINFER_CUDA_ATT=tile); 1 the grouped one first
 * (MINFER_CUDA_ATT=grouped) */
extern int mfc_att_kernel;
/* tests: the tile and tensor-core kernels' blocks along the shares (0:
 * sized to the device) */
extern int mfc_att_tile_nz;
/* tests: launches of the tensor-core decode kernel so far (which shapes it took) */
extern int mfc_att_mma_runs;
/* the tensor-core decode kernel (k_attn_mma.cu) over the shares, as
 * mfc_attention's part; false (nothing queued) for shapes it does not take */
bool mfc_att_mma(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc, const void *vc,
                 const mfc_attn *p, int nsplit, int nz, float *part);
void mfc_attention(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc, const void *vc,
                   const mfc_attn *p, float *out, int nsplit, int nz, float *part, const mfc_q8 *qout);
/* Prompt rows on the f16 tensor cores (k_fattn.cu): f16 or q8_0 caches,
 * head dimensions 16, 32, 64 or 128 (K and V alike); false for other shapes
 * (and when mfc_fattn_on is off: MINFER_CUDA_FA=0), and nothing queued. */
extern bool mfc_fattn_on;
bool mfc_fattn(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc, const void *vc,
               const mfc_attn *p, float *out);

/* an empty kernel of that many blocks (benchmarks) */
void mfc_empty(cudaStream_t s, int blocks);
/* a streaming copy of n bytes (the bandwidth probe of `minfer bench`) */
void mfc_copy_bytes(cudaStream_t s, void *dst, const void *src, size_t n);

/* mixture of experts (k_moe.cu), as the CPU's ops (cpu/moe.c): routing of
 * n rows of X logits into sel/w [n][K] (false: X > 1024); the product of
 * each of rows x K slots with its expert (w: expert 0's rows, the others
 * slice bytes apart; x one row per token, or per slot); rows scaled by s (or
 * sigmoid(s)); the K slots of each row summed in order */
bool mfc_moe_route(cudaStream_t s, const float *logits, int n, int X, int K, bool sig, bool norm, float scale,
                   int32_t *sel, float *w);
bool mfc_matmul_id(cudaStream_t s, int type, const void *w, size_t slice, size_t row_bytes, int k, int n,
                   const float *x, bool per_slot, int rows, int K, const int32_t *sel, float *out);
void mfc_scale_rows(cudaStream_t s, float *x, const float *sc, bool sig, int rows, int n);
void mfc_sum_slots(cudaStream_t s, const float *src, int rows, int K, int n, float *out);

#ifdef __cplusplus
}
#endif

#endif
