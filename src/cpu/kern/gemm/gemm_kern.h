/* gemm_kern.h - the GEMM panel packers and register-blocked kernels, written
 * once and compiled per SIMD level: gemm_avx2.c (MF_GEMM_W 256, no VNNI),
 * gemm_avx512.c (512, no VNNI: maddubs + madd) and gemm_vnni_avx512.c (512,
 * vpdpbusd + vpdpwssd). Everything here is static; each includer registers
 * its own copies (gemm.h describes the flow and the bitwise contract).
 *
 * Integer kernels keep weight rows in vector lanes. A panel stores, per step
 * of 4 columns, the unsigned levels of 16 rows as 16 words of 4 bytes; the
 * tile stores, per step, one word of 4 signed activation bytes per token.
 * One vpdpbusd (or maddubs) of a panel step with a broadcast token word adds
 * 4 products to each row's sum, so a loaded weight vector serves NT tokens
 * and a broadcast token word serves JV weight vectors.
 *
 * Exactness of the integer part (activation bytes are in [-127, 127]: the
 * Q8_0 / Q8_K quantizers never write -128):
 * - vpdpbusd sums into int32 without intermediate saturation.
 * - Sub-block scales are applied by vpdpwssd / vpmaddwd, which read the
 *   partial sum as int16: every partial sum a kernel scales fits int16:
 *     Q4_K: 16 columns of levels 0..15: |sum| <= 15*127*16 = 30480;
 *     Q5_K: 16 columns of levels 0..31 minus 16 (the offset enters through
 *           the unit's start value -16 * bsum): |sum| <= 16*127*16 = 32512;
 *     Q6_K: 8 columns of levels 0..63 minus 32 (start value -32 * sum of the
 *           8 activations, the reference's own offset): 32*127*8 = 32512.
 *   With VNNI the int32 partial is multiplied by the pair (scale, 0), i.e.
 *   its low 16 bits (the whole value) times the scale.
 * - maddubs (no VNNI) saturates int16 pair sums; levels <= 63 keep a pair
 *   below 63*127*2 = 16002, and the kernels add at most floor(32767 / pair
 *   bound) steps in int16 before widening: 4 steps for levels <= 31, 2 for
 *   levels <= 63, 8 for levels <= 15. Signed-weight types (Q8_0, IQ4_NL)
 *   need VNNI (levels biased by +128 exceed maddubs' range).
 * Float parts are the references' expressions, lane for lane (no FMA
 * contraction: the build uses -ffp-contract=off). */
#ifndef MF_GEMM_W
#error "define MF_GEMM_W (256 or 512) and MF_GEMM_VNNI before including gemm_kern.h"
#endif

#include <immintrin.h>
#include <string.h>

#include "cpu/kern/gemm/gemm.h"
#include "cpu/kern/gemm/gemm_layout.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

static inline int32_t ld32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define AI static inline __attribute__((always_inline))

#if MF_GEMM_W == 512
typedef __m512i vi;
typedef __m512 vf;
#define VL 16
#define VI_ZERO() _mm512_setzero_si512()
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define VI_BCAST(p) _mm512_set1_epi32(ld32(p))
#define VI_ADD32 _mm512_add_epi32
#define VI_ADD16 _mm512_add_epi16
#define VI_MADDUBS _mm512_maddubs_epi16
#define VI_MADD _mm512_madd_epi16
#define VI_SLLI32 _mm512_slli_epi32
#define VI_SET16(v) _mm512_set1_epi16(v)
#define VF_ZERO() _mm512_setzero_ps()
#define VF_CVT _mm512_cvtepi32_ps
#define VF_LOAD(p) _mm512_loadu_ps(p)
#define VF_BCAST(p) _mm512_set1_ps(*(const float *)(p))
#define VF_MUL _mm512_mul_ps
#define VF_ADD _mm512_add_ps
#define VF_SUB _mm512_sub_ps
#define VF_FMA _mm512_fmadd_ps
#define VF_STORE(p, v) _mm512_storeu_ps(p, v)
#define VF_CVTPH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#if MF_GEMM_VNNI
#define VI_DPBUSD _mm512_dpbusd_epi32
#define VI_DPWSSD _mm512_dpwssd_epi32
/* acc + dpbusd(w, the 4 bytes at p in every lane). (The {1to16} memory
 * form of vpdpbusd, through inline asm, measured 15% slower here: with two
 * weight vectors per token each broadcast is loaded twice.) */
AI vi dpbusd_bcast(vi acc, vi w, const uint8_t *p) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(ld32(p))); }
#endif
#elif MF_GEMM_W == 256
typedef __m256i vi;
typedef __m256 vf;
#define VL 8
#define VI_ZERO() _mm256_setzero_si256()
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VI_BCAST(p) _mm256_set1_epi32(ld32(p))
#define VI_ADD32 _mm256_add_epi32
#define VI_ADD16 _mm256_add_epi16
#define VI_MADDUBS _mm256_maddubs_epi16
#define VI_MADD _mm256_madd_epi16
#define VI_SLLI32 _mm256_slli_epi32
#define VI_SET16(v) _mm256_set1_epi16(v)
#define VF_ZERO() _mm256_setzero_ps()
#define VF_CVT _mm256_cvtepi32_ps
#define VF_LOAD(p) _mm256_loadu_ps(p)
#define VF_BCAST(p) _mm256_set1_ps(*(const float *)(p))
#define VF_MUL _mm256_mul_ps
#define VF_ADD _mm256_add_ps
#define VF_SUB _mm256_sub_ps
#define VF_FMA _mm256_fmadd_ps
#define VF_STORE(p, v) _mm256_storeu_ps(p, v)
#define VF_CVTPH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#if MF_GEMM_VNNI
#error "VNNI kernels are 512-bit only"
#endif
#else
#error "MF_GEMM_W must be 256 or 512"
#endif

/* Panels are 16 rows; a 256-bit vector covers half of each 64-byte record. */
#define HALVES (16 / VL)
#define REC 64 /* bytes of one panel record: 16 rows x 4 bytes */

/* Register tiles are arrays of these fixed sizes (GCC keeps an array in
 * registers only when its size is a constant and every index folds);
 * kernels use the first JV x NT entries. */
#ifndef JVMAX
#define JVMAX 2
#define NTMAX 6
#endif
#ifndef RMAX
#define RMAX 14
#define TVMAX 3
#endif

/* ======================= packing ======================= */

/* 8 x 8 transpose of 32-bit words: r[i] = row i in, r[d] = word d of rows 0..7 out */
static inline void tr8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[i] (i < 4) holds words i and i + 4 of rows 0-3 / 4-7 in its halves */
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

static inline __m256i ld32v(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void st32(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
/* 32 nibbles of 16 bytes: low nibbles are elements 0..15, high 16..31 */
static inline __m256i nib32(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1),
                            _mm256_set1_epi8(0x0f));
}

/* byte j = 0x10 where bit j of the 4 bytes at p is set */
static inline __m256i bits_0x10(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* word d of step record s, rows 8h..8h+7 */
#define RECH(out, s, h) ((out) + (size_t)(s) * REC + 32 * (h))

/* Packing decodes 8 rows at a time straight into registers (one vector of
 * 32 levels, i.e. 8 steps, per row), transposes them 8 x 8 and stores the
 * records: nothing goes through memory in between. Rows past nrows read an
 * all-zero block. */
static const uint8_t g_zero_block[256] __attribute__((aligned(64)));

/* per-row block pointers of a panel: row r's block b, or the zero block */
static inline void row_blocks(const uint8_t *w, size_t row_bytes, int nrows, size_t boff, const uint8_t *rp[16]) {
    for (int r = 0; r < 16; r++) rp[r] = r < nrows ? w + (size_t)r * row_bytes + boff : g_zero_block;
}

/* Packing reads 16 rows at once, more streams than the hardware prefetcher
 * follows, and would wait on memory (measured: half the pack time). The
 * panel packed next starts right after this one's rows (rows are
 * contiguous), so step i of n prefetches slice i of those bytes.
 * Prefetches past the tensor's end never fault. */
static inline void prefetch_next(const uint8_t *w, size_t row_bytes, int rows, int64_t i, int64_t n) {
    const size_t len = (size_t)rows * row_bytes, a = len * (size_t)i / (size_t)n, b = len * (size_t)(i + 1) / (size_t)n;
    const uint8_t *base = w + len;
    for (size_t o = a & ~(size_t)63; o < b; o += 64) _mm_prefetch((const char *)(base + o), _MM_HINT_T0);
}

/* One record of 16 floats from the f16 at rp[r] + off. */
static inline void rec_f16(uint8_t *out, const uint8_t *const rp[16], size_t off) {
    uint16_t h[16];
    for (int r = 0; r < 16; r++) memcpy(&h[r], rp[r] + off, 2);
    _mm256_storeu_ps((float *)out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    _mm256_storeu_ps((float *)out + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8))));
}

/* Scale records from per-row bytes b[r] (16 rows):
 * rec_u32: each byte zero-extended to a 32-bit word (VNNI: the pair (sc, 0));
 * rec_dup: (sc, sc) as two 16-bit halves (maddubs path); signed variants for Q6_K. */
static inline void rec_from_bytes(uint8_t *out, const uint8_t b[16], int sgn, int dup) {
    const __m128i x = _mm_loadu_si128((const __m128i *)b);
    __m256i lo, hi;
    if (dup) {
        const __m128i xl = _mm_unpacklo_epi8(x, x), xh = _mm_unpackhi_epi8(x, x);
        lo = sgn ? _mm256_cvtepi8_epi16(xl) : _mm256_cvtepu8_epi16(xl);
        hi = sgn ? _mm256_cvtepi8_epi16(xh) : _mm256_cvtepu8_epi16(xh);
    } else {
        lo = sgn ? _mm256_cvtepi8_epi32(x) : _mm256_cvtepu8_epi32(x);
        hi = sgn ? _mm256_cvtepi8_epi32(_mm_srli_si128(x, 8)) : _mm256_cvtepu8_epi32(_mm_srli_si128(x, 8));
        const __m256i low16 = _mm256_set1_epi32(0xffff); /* (sc, 0): the high half stays 0 */
        lo = _mm256_and_si256(lo, low16), hi = _mm256_and_si256(hi, low16);
    }
    st32(out, lo);
    st32(out + 32, hi);
}

/* the 16-bit pair (a[r] * mul, b[r] * mul) per row */
static inline void rec_pair_bytes(uint8_t *out, const uint8_t a[16], const uint8_t b[16], int sgn, int mul) {
    const __m128i x = _mm_loadu_si128((const __m128i *)a), y = _mm_loadu_si128((const __m128i *)b);
    const __m128i pl = _mm_unpacklo_epi8(x, y), ph = _mm_unpackhi_epi8(x, y);
    __m256i lo = sgn ? _mm256_cvtepi8_epi16(pl) : _mm256_cvtepu8_epi16(pl);
    __m256i hi = sgn ? _mm256_cvtepi8_epi16(ph) : _mm256_cvtepu8_epi16(ph);
    if (mul != 1) lo = _mm256_mullo_epi16(lo, _mm256_set1_epi16((short)mul)), hi = _mm256_mullo_epi16(hi, _mm256_set1_epi16((short)mul));
    st32(out, lo);
    st32(out + 32, hi);
}

/* ---- K-quant panels: per super-block of 256 columns ----
 * [64 level records][NSC scale records][NPRE pre records][4 min records if
 * the type has mins][d record][dmin record if mins]. */

/* Q4_K: 16 units of 16 columns, scale of sub-block u/2. */
#define Q4K_NSC 8
#define Q4K_NPRE 0
#define Q4K_SB (REC * (64 + Q4K_NSC + Q4K_NPRE + 4 + 2))
/* Q5_K: as Q4_K; with VNNI 4 pre records (16 * scale pairs) undo the -16
 * offsets the units start from. */
#define Q5K_NSC 8
#define Q5K_NPRE (MF_GEMM_VNNI ? 4 : 0)
#define Q5K_SB (REC * (64 + Q5K_NSC + Q5K_NPRE + 4 + 2))
/* Q6_K: 32 units of 8 columns, scale of group u/2; without VNNI 8 pre
 * records (-32 * scale pairs) against the bsum pairs carry the offset. */
#define Q6K_NSC 16
#define Q6K_NPRE (MF_GEMM_VNNI ? 0 : 8)
#define Q6K_SB (REC * (64 + Q6K_NSC + Q6K_NPRE + 1))

static size_t panel_bytes_q4k(int64_t k) { return (size_t)(k / QK_K) * Q4K_SB; }
static size_t panel_bytes_q5k(int64_t k) { return (size_t)(k / QK_K) * Q5K_SB; }
static size_t panel_bytes_q6k(int64_t k) { return (size_t)(k / QK_K) * Q6K_SB; }

/* Q4_K / Q5_K: 8 scales and 8 mins of 6 bits from the 12 packed bytes
 * (mf_k4_scale_min), four at a time in 32-bit words; b[0..7] scales,
 * b[8..15] mins */
static inline void k4_unpack(const uint8_t q[12], uint8_t b[16]) {
    uint32_t w0, w1, w2, o[4];
    memcpy(&w0, q, 4), memcpy(&w1, q + 4, 4), memcpy(&w2, q + 8, 4);
    o[0] = w0 & 0x3f3f3f3fu;
    o[1] = (w2 & 0x0f0f0f0fu) | ((w0 >> 6) & 0x03030303u) << 4;
    o[2] = w1 & 0x3f3f3f3fu;
    o[3] = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 6) & 0x03030303u) << 4;
    memcpy(b, o, 16);
}

/* Q4_K and Q5_K share everything but the fifth bit and (with VNNI) the pre records */
AI void pack_k4(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel, const int five) {
    const int64_t nsb = k / QK_K;
    const size_t sbb = five ? Q5K_SB : Q4K_SB, bsz = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t o_sc = five ? offsetof(block_q5_K, scales) : offsetof(block_q4_K, scales);
    const size_t o_qs = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *o = panel + sb * sbb;
        const uint8_t *rp[16];
        row_blocks(w, row_bytes, nrows, (size_t)sb * bsz, rp);
        prefetch_next(w, row_bytes, 16, sb, nsb);
        for (int h = 0; h < 2; h++) {
            __m256i qh[8];
            if (five) {
                for (int i = 0; i < 8; i++) qh[i] = ld32v(rp[8 * h + i] + offsetof(block_q5_K, qh));
                tr8x8(qh);
            }
            for (int c = 0; c < 4; c++) {
                /* word d of qs chunk c: low nibbles are step 16c + d, high 16c + 8 + d */
                __m256i v[8];
                for (int i = 0; i < 8; i++) v[i] = ld32v(rp[8 * h + i] + o_qs + 32 * c);
                tr8x8(v);
                for (int d = 0; d < 8; d++) {
                    __m256i lo = _mm256_and_si256(v[d], m4), hi = _mm256_and_si256(_mm256_srli_epi16(v[d], 4), m4);
                    if (five) {
                        /* fifth bits: bit 2c (2c + 1) of qh byte l is element 64c + l (64c + 32 + l) */
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[d], 2 * c), one), 4));
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[d], 2 * c + 1), one), 4));
                    }
                    st32(RECH(o, 16 * c + d, h), lo);
                    st32(RECH(o, 16 * c + 8 + d, h), hi);
                }
            }
        }
        o += 64 * REC;
        _Alignas(16) uint8_t b[16][16]; /* [scale j / min 8 + j][row] */
        for (int r = 0; r < 16; r++) {
            uint8_t x[16];
            k4_unpack(rp[r] + o_sc, x);
            for (int j = 0; j < 16; j++) b[j][r] = x[j];
        }
        for (int j = 0; j < 8; j++, o += REC) rec_from_bytes(o, b[j], 0, !MF_GEMM_VNNI);
#if MF_GEMM_VNNI
        if (five)
            for (int m = 0; m < Q5K_NPRE; m++, o += REC) rec_pair_bytes(o, b[2 * m], b[2 * m + 1], 0, 16);
#endif
        for (int m = 0; m < 4; m++, o += REC) rec_pair_bytes(o, b[8 + 2 * m], b[9 + 2 * m], 0, 1);
        rec_f16(o, rp, 0);               /* d */
        rec_f16(o + REC, rp, 2);         /* dmin */
    }
}

static void pack_q4k(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) { pack_k4(w, rb, nrows, k, panel, 0); }
static void pack_q5k(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) { pack_k4(w, rb, nrows, k, panel, 1); }

static void pack_q6k(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel) {
    const int64_t nsb = k / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *o = panel + sb * Q6K_SB;
        const uint8_t *rp[16];
        row_blocks(w, row_bytes, nrows, (size_t)sb * sizeof(block_q6_K), rp);
        prefetch_next(w, row_bytes, 16, sb, nsb);
        for (int h = 0; h < 2; h++)
            for (int eh = 0; eh < 2; eh++) {
                /* element half eh, quarter q, byte l: low 4 bits in ql[64eh + 32(q & 1) + l]
                 * (nibble q >> 1), high 2 bits at 2q of qh[32eh + l]; step 32eh + 8q + l/4 */
                __m256i a[8], b[8], q[8];
                for (int i = 0; i < 8; i++) {
                    const block_q6_K *x = (const block_q6_K *)rp[8 * h + i];
                    a[i] = ld32v(x->ql + 64 * eh), b[i] = ld32v(x->ql + 64 * eh + 32), q[i] = ld32v(x->qh + 32 * eh);
                }
                tr8x8(a), tr8x8(b), tr8x8(q);
                for (int d = 0; d < 8; d++) {
                    const int s0 = 32 * eh + d;
                    st32(RECH(o, s0, h), _mm256_or_si256(_mm256_and_si256(a[d], m4), _mm256_slli_epi16(_mm256_and_si256(q[d], m2), 4)));
                    st32(RECH(o, s0 + 8, h), _mm256_or_si256(_mm256_and_si256(b[d], m4),
                                                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[d], 2), m2), 4)));
                    st32(RECH(o, s0 + 16, h), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a[d], 4), m4),
                                                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[d], 4), m2), 4)));
                    st32(RECH(o, s0 + 24, h), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b[d], 4), m4),
                                                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[d], 6), m2), 4)));
                }
            }
        o += 64 * REC;
        _Alignas(16) uint8_t sc[16][16]; /* [group][row], int8 */
        for (int r = 0; r < 16; r++) {
            const int8_t *x = ((const block_q6_K *)rp[r])->scales;
            for (int g = 0; g < 16; g++) sc[g][r] = (uint8_t)x[g];
        }
        for (int g = 0; g < 16; g++, o += REC) rec_from_bytes(o, sc[g], 1, !MF_GEMM_VNNI);
#if !MF_GEMM_VNNI
        for (int m = 0; m < Q6K_NPRE; m++, o += REC) rec_pair_bytes(o, sc[2 * m], sc[2 * m + 1], 1, -32);
#endif
        rec_f16(o, rp, offsetof(block_q6_K, d));
    }
}

/* Q3_K: 16 units of 16 columns, one signed scale (sc - 32) each; 8 pre
 * records (-4 * scale pairs) against the bsum pairs carry the level offset. */
#define Q3K_NSC 16
#define Q3K_NPRE 8
#define Q3K_SB (REC * (64 + Q3K_NSC + Q3K_NPRE + 1))
/* Q2_K: 16 units of 16 columns, a 4-bit scale each, 8 min records. */
#define Q2K_NSC 16
#define Q2K_SB (REC * (64 + Q2K_NSC + 8 + 2))
static size_t panel_bytes_q3k(int64_t k) { return (size_t)(k / QK_K) * Q3K_SB; }
static size_t panel_bytes_q2k(int64_t k) { return (size_t)(k / QK_K) * Q2K_SB; }

/* the 16 six-bit Q3_K scales minus 32, as mf_q3k_scales gives them, eight
 * at a time in 64-bit words: low nibbles from bytes 0..7 (scales 0-7) or
 * their high nibbles (8-15), top 2 bits from bytes 8..11 at shift 2 * (j / 4)
 * (each byte stays within 0..63, so no bit crosses into its neighbour) */
static inline void q3k_unpack(const uint8_t q[12], int8_t s[16]) {
    uint64_t lo8, o[2];
    uint32_t hi4;
    memcpy(&lo8, q, 8), memcpy(&hi4, q + 8, 4);
    const uint64_t m2 = 0x03030303u, m4 = 0x0f0f0f0f0f0f0f0full;
    const uint64_t h0 = ((uint64_t)hi4 & m2) | ((uint64_t)(hi4 >> 2) & m2) << 32;
    const uint64_t h1 = ((uint64_t)(hi4 >> 4) & m2) | ((uint64_t)(hi4 >> 6) & m2) << 32;
    o[0] = (lo8 & m4) | h0 << 4;
    o[1] = ((lo8 >> 4) & m4) | h1 << 4;
    uint8_t u[16];
    memcpy(u, o, 16);
    for (int j = 0; j < 16; j++) s[j] = (int8_t)(u[j] - 32);
}

/* Q2_K / Q3_K levels share the 2-bit layout: byte l of qs[32h..32h+31] holds
 * elements 128h + 32q + l at shift 2q, i.e. step 32h + 8q + l/4; Q3_K adds
 * 4 where bit 4h + q of hmask[l] is set. */
AI void pack_k23(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel, const int three) {
    const int64_t nsb = k / QK_K;
    const size_t sbb = three ? Q3K_SB : Q2K_SB, bsz = three ? sizeof(block_q3_K) : sizeof(block_q2_K);
    const size_t o_qs = three ? offsetof(block_q3_K, qs) : offsetof(block_q2_K, qs);
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *o = panel + sb * sbb;
        const uint8_t *rp[16];
        row_blocks(w, row_bytes, nrows, (size_t)sb * bsz, rp);
        prefetch_next(w, row_bytes, 16, sb, nsb);
        for (int h = 0; h < 2; h++) {
            __m256i hm[8];
            if (three) {
                for (int i = 0; i < 8; i++) hm[i] = ld32v(rp[8 * h + i] + offsetof(block_q3_K, hmask));
                tr8x8(hm);
            }
            for (int eh = 0; eh < 2; eh++) {
                __m256i v[8];
                for (int i = 0; i < 8; i++) v[i] = ld32v(rp[8 * h + i] + o_qs + 32 * eh);
                tr8x8(v);
                for (int q = 0; q < 4; q++)
                    for (int d = 0; d < 8; d++) {
                        __m256i lv = _mm256_and_si256(_mm256_srli_epi16(v[d], 2 * q), m2);
                        if (three)
                            lv = _mm256_or_si256(lv, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm[d], 4 * eh + q), one), 2));
                        st32(RECH(o, 32 * eh + 8 * q + d, h), lv);
                    }
            }
        }
        o += 64 * REC;
        _Alignas(16) uint8_t b[32][16]; /* [scale g / min 16 + g][row] */
        for (int r = 0; r < 16; r++) {
            if (three) {
                int8_t x[16];
                q3k_unpack(((const block_q3_K *)rp[r])->scales, x);
                for (int g = 0; g < 16; g++) b[g][r] = (uint8_t)x[g];
            } else {
                const uint8_t *x = ((const block_q2_K *)rp[r])->scales;
                for (int g = 0; g < 16; g++) b[g][r] = x[g] & 0x0f, b[16 + g][r] = x[g] >> 4;
            }
        }
        for (int g = 0; g < 16; g++, o += REC) rec_from_bytes(o, b[g], three, !MF_GEMM_VNNI);
        if (three) {
            for (int m = 0; m < Q3K_NPRE; m++, o += REC) rec_pair_bytes(o, b[2 * m], b[2 * m + 1], 1, -4);
            rec_f16(o, rp, offsetof(block_q3_K, d));
        } else {
            for (int m = 0; m < 8; m++, o += REC) rec_pair_bytes(o, b[16 + 2 * m], b[17 + 2 * m], 0, 1);
            rec_f16(o, rp, offsetof(block_q2_K, d));
            rec_f16(o + REC, rp, offsetof(block_q2_K, dmin));
        }
    }
}

static void pack_q3k(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) { pack_k23(w, rb, nrows, k, panel, 1); }
static void pack_q2k(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) { pack_k23(w, rb, nrows, k, panel, 0); }

#if MF_GEMM_VNNI
/* IQ4_XS: 8 units of 32 columns; [64 level records][8 scale records as
 * sign-extended int32][d record] */
#define IQ4XS_NSC 8
#define IQ4XS_SB (REC * (64 + IQ4XS_NSC + 1))
static size_t panel_bytes_iq4xs(int64_t k) { return (size_t)(k / QK_K) * IQ4XS_SB; }

static void pack_iq4xs(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel) {
    const int64_t nsb = k / QK_K;
    const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)mf_iq4nl_values), _mm_set1_epi8((char)0x80));
    const __m256i table = _mm256_broadcastsi128_si256(t); /* value + 128 */
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *o = panel + sb * IQ4XS_SB;
        const uint8_t *rp[16];
        row_blocks(w, row_bytes, nrows, (size_t)sb * sizeof(block_iq4_xs), rp);
        prefetch_next(w, row_bytes, 16, sb, nsb);
        for (int h = 0; h < 2; h++)
            for (int ib = 0; ib < 8; ib++) {
                /* sub-block ib: 16 bytes of nibbles, low = columns 0..15, high 16..31 */
                __m256i v[8];
                for (int i = 0; i < 8; i++)
                    v[i] = _mm256_shuffle_epi8(table, nib32(((const block_iq4_xs *)rp[8 * h + i])->qs + 16 * ib));
                tr8x8(v);
                for (int d = 0; d < 8; d++) st32(RECH(o, 8 * ib + d, h), v[d]);
            }
        o += 64 * REC;
        for (int ib = 0; ib < 8; ib++, o += REC) {
            int32_t sc[16];
            for (int r = 0; r < 16; r++) {
                const block_iq4_xs *x = (const block_iq4_xs *)rp[r];
                const int ls = ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((x->scales_h >> (2 * ib)) & 3) << 4;
                sc[r] = ls - 32;
            }
            memcpy(o, sc, REC);
        }
        rec_f16(o, rp, offsetof(block_iq4_xs, d));
    }
}
#endif

/* ---- 32-element block panels: per block, in lane order ----
 * [8 level records][d record] */
#define B32_BYTES (REC * 9)
static size_t panel_bytes_b32(int64_t k) { return (size_t)(k / 32) * B32_BYTES; }

enum { B32_Q4_0, B32_Q5_0, B32_Q8_0, B32_IQ4_NL };

/* the 32 levels of one block (8 steps), unsigned: Q4_0 / Q5_0 as stored,
 * Q8_0 and IQ4_NL values + 128 */
AI __m256i b32_levels(const uint8_t *blk, const int T) {
    switch (T) {
    case B32_Q4_0: return nib32(((const block_q4_0 *)blk)->qs);
    case B32_Q5_0: return _mm256_or_si256(nib32(((const block_q5_0 *)blk)->qs), bits_0x10(((const block_q5_0 *)blk)->qh));
    case B32_Q8_0: return _mm256_xor_si256(ld32v(((const block_q8_0 *)blk)->qs), _mm256_set1_epi8((char)0x80));
    default: {
        const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)mf_iq4nl_values), _mm_set1_epi8((char)0x80));
        return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), nib32(((const block_iq4_nl *)blk)->qs));
    }
    }
}

AI void pack_b32(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel, const size_t bsize, const int T) {
    const int64_t nb = k / 32;
    int64_t lstart[8], pos = 0; /* first position of lane l */
    for (int l = 0; l < 8; l++) lstart[l] = pos, pos += l < nb ? (nb - l + 7) / 8 : 0;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = panel + (size_t)(lstart[b % 8] + b / 8) * B32_BYTES;
        const uint8_t *rp[16];
        row_blocks(w, row_bytes, nrows, (size_t)b * bsize, rp);
        prefetch_next(w, row_bytes, 16, b, nb);
        for (int h = 0; h < 2; h++) {
            __m256i v[8];
            for (int i = 0; i < 8; i++) v[i] = b32_levels(rp[8 * h + i], T);
            tr8x8(v);
            for (int d = 0; d < 8; d++) st32(RECH(o, d, h), v[d]);
        }
        rec_f16(o + 8 * REC, rp, 0); /* d is the first field of every 32-element block */
    }
}

static void pack_q4_0(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) { pack_b32(w, rb, n, k, p, sizeof(block_q4_0), B32_Q4_0); }
static void pack_q5_0(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) { pack_b32(w, rb, n, k, p, sizeof(block_q5_0), B32_Q5_0); }
#if MF_GEMM_VNNI
static void pack_q8_0(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) { pack_b32(w, rb, n, k, p, sizeof(block_q8_0), B32_Q8_0); }
static void pack_iq4_nl(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) { pack_b32(w, rb, n, k, p, sizeof(block_iq4_nl), B32_IQ4_NL); }
#endif

/* ======================= output ======================= */

/* f holds JV vectors x NT tokens of VL floats: rows v0*VL.. of the call.
 * Whole aligned vectors go out as non-temporal stores: every output line is
 * written once, by one call, and a plain store would first read it from
 * memory (measured: +15-30% kernel throughput on 512-token products). The
 * matmul driver fences (sfence) before its threads finish. */
AI void store_rows(float *out, size_t ldo, const float *f, int jv, int nt, int v0, int nrows, int ntok) {
    for (int j = 0; j < jv; j++) {
        const int r0 = (v0 + j) * VL;
        int n = nrows - r0;
        if (n <= 0) continue;
        if (n > VL) n = VL;
        for (int t = 0; t < ntok; t++) {
            float *dst = out + (size_t)t * ldo + r0;
            if (n == VL && ((uintptr_t)dst & (VL * 4 - 1)) == 0)
#if MF_GEMM_W == 512
                _mm512_stream_ps(dst, _mm512_load_ps(f + ((size_t)j * nt + t) * VL));
#else
                _mm256_stream_ps(dst, _mm256_load_ps(f + ((size_t)j * nt + t) * VL));
#endif
            else memcpy(dst, f + ((size_t)j * nt + t) * VL, (size_t)n * 4);
        }
    }
}

/* base of vector v of a call: panel v / HALVES, half v % HALVES */
AI const uint8_t *vec_base(const uint8_t *panels, size_t panel_bytes, int v) {
    return panels + (size_t)(v / HALVES) * panel_bytes + (size_t)(v % HALVES) * (VL * 4);
}

/* ======================= K-quant kernel ======================= */

/* One call: NV = rows / VL vectors, JV at a time, NT tokens.
 * UNIT: steps per unit (one int16-safe partial, see the top comment);
 * INIT_T: tile entry of the units' start values (VNNI; -1 = start at 0);
 * NSC/NPRE: scale / pre records (pre: pairs against tile entries PRE_T..,
 * added to the integer sum first); NMIN: min records against tile entries
 * MIN_T.. (Q4_K/Q5_K: 4 pairs of 32-element sums; Q2_K: 8 of 16-element).
 * MUL32 (VNNI): the unit's int32 partial does not fit int16 (IQ4_XS), so its
 * scale (a sign-extended 32-bit record) is applied by a 32-bit multiply. */
AI void kq_kernel(const uint8_t *panels, size_t panel_bytes, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                  int nrows, int ntok, const int NV, const int JV, const int NT, const int UNIT, const int INIT_T,
                  const int NSC, const int NPRE, const int PRE_T, const int NMIN, const int MIN_T, const size_t SB,
                  const int MUL32) {
    const int HAS_MIN = NMIN > 0;
    const int64_t nsb = k / QK_K;
    const size_t tsb = (size_t)MF_T8K_WORDS * 4 * NT;
    const int NU = 64 / UNIT;
    const size_t SC_OFF = 64 * REC, PRE_OFF = SC_OFF + (size_t)NSC * REC, MN_OFF = PRE_OFF + (size_t)NPRE * REC;
    const size_t D_OFF = MN_OFF + (size_t)NMIN * REC;
    for (int v0 = 0; v0 < NV; v0 += JV) {
        _Alignas(64) float f[JVMAX * NTMAX * VL];
        for (int i = 0; i < JV * NT * VL; i++) f[i] = 0.0f;
        const uint8_t *wb[JVMAX];
        for (int j = 0; j < JV; j++) wb[j] = vec_base(panels, panel_bytes, v0 + j);
        for (int64_t sb = 0; sb < nsb; sb++) {
            const uint8_t *ts = tile + (size_t)sb * tsb;
            const uint8_t *w[JVMAX];
            for (int j = 0; j < JV; j++) w[j] = wb[j] + (size_t)sb * SB;
            vi isum[JVMAX][NTMAX], tmp[JVMAX][NTMAX];
#pragma GCC unroll 16
            for (int j = 0; j < JV; j++)
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) isum[j][t] = VI_ZERO();
            for (int m = 0; m < NPRE; m++) {
                vi pv[JVMAX];
#pragma GCC unroll 16
                for (int j = 0; j < JV; j++) pv[j] = VI_LOAD(w[j] + PRE_OFF + (size_t)m * REC);
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) {
                    const vi b = VI_BCAST(ts + ((size_t)(PRE_T + m) * NT + t) * 4);
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++)
#if MF_GEMM_VNNI
                        isum[j][t] = VI_DPWSSD(isum[j][t], pv[j], b);
#else
                        isum[j][t] = VI_ADD32(isum[j][t], VI_MADD(pv[j], b));
#endif
                }
            }
            for (int u = 0; u < NU; u++) {
#if MF_GEMM_VNNI
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) {
                    const vi s0 = INIT_T >= 0 ? VI_BCAST(ts + ((size_t)(INIT_T + u) * NT + t) * 4) : VI_ZERO();
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) tmp[j][t] = s0;
                }
#endif
#pragma GCC unroll 8
                for (int s = 0; s < UNIT; s++) {
                    const int step = u * UNIT + s;
                    vi wv[JVMAX];
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) wv[j] = VI_LOAD(w[j] + (size_t)step * REC);
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++) {
                        const uint8_t *ap = ts + ((size_t)step * NT + t) * 4;
#if MF_GEMM_VNNI
#pragma GCC unroll 16
                        for (int j = 0; j < JV; j++) tmp[j][t] = dpbusd_bcast(tmp[j][t], wv[j], ap);
#else
                        const vi a = VI_BCAST(ap);
#pragma GCC unroll 16
                        for (int j = 0; j < JV; j++) {
                            const vi p = VI_MADDUBS(wv[j], a);
                            tmp[j][t] = s == 0 ? p : VI_ADD16(tmp[j][t], p);
                        }
#endif
                    }
                }
#pragma GCC unroll 16
                for (int j = 0; j < JV; j++) {
                    const vi sc = VI_LOAD(w[j] + SC_OFF + (size_t)(u * NSC / NU) * REC);
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++)
#if MF_GEMM_VNNI
                        isum[j][t] = MUL32 ? VI_ADD32(isum[j][t], _mm512_mullo_epi32(tmp[j][t], sc))
                                           : VI_DPWSSD(isum[j][t], tmp[j][t], sc);
#else
                        isum[j][t] = VI_ADD32(isum[j][t], VI_MADD(tmp[j][t], sc));
#endif
                }
            }
            if (HAS_MIN) {
#pragma GCC unroll 16
                for (int j = 0; j < JV; j++)
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++) tmp[j][t] = VI_ZERO();
                for (int m = 0; m < NMIN; m++) {
                    vi mv[JVMAX];
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) mv[j] = VI_LOAD(w[j] + MN_OFF + (size_t)m * REC);
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++) {
                        const vi b = VI_BCAST(ts + ((size_t)(MIN_T + m) * NT + t) * 4);
#pragma GCC unroll 16
                        for (int j = 0; j < JV; j++)
#if MF_GEMM_VNNI
                            tmp[j][t] = VI_DPWSSD(tmp[j][t], mv[j], b);
#else
                            tmp[j][t] = VI_ADD32(tmp[j][t], VI_MADD(mv[j], b));
#endif
                    }
                }
            }
            /* the reference's super-block term: sum += d * isum - dmin * summ
             * with d = f16(x.d) * y.d, dmin = f16(x.dmin) * y.d */
#pragma GCC unroll 16
            for (int j = 0; j < JV; j++) {
                const vf xd = VF_LOAD((const float *)(w[j] + D_OFF));
                const vf xm = HAS_MIN ? VF_LOAD((const float *)(w[j] + D_OFF + REC)) : VF_ZERO();
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) {
                    const vf yd = VF_BCAST(ts + ((size_t)MF_T8K_D * NT + t) * 4);
                    float *fp = f + ((size_t)j * NT + t) * VL;
                    vf term = VF_MUL(VF_MUL(xd, yd), VF_CVT(isum[j][t]));
                    if (HAS_MIN) term = VF_SUB(term, VF_MUL(VF_MUL(xm, yd), VF_CVT(tmp[j][t])));
                    VF_STORE(fp, VF_ADD(VF_LOAD(fp), term));
                }
            }
        }
        store_rows(out, ldo, f, JV, NT, v0, nrows, ntok);
    }
}

/* ======================= 32-element block kernel ======================= */

/* SHIFT: log2 of the level offset (Q4_0 8, Q5_0 16, Q8_0 / IQ4_NL 128), which
 * enters as the start value -sum(a) << SHIFT. SUMI_FIRST: the reference's
 * value is (sumi * dx) * dy (Q4_0) rather than (dx * dy) * sumi. CH (no VNNI):
 * steps summed in int16 before widening. */
AI void b32_kernel(const uint8_t *panels, size_t panel_bytes, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                   int nrows, int ntok, const int NV, const int JV, const int NT, const int SHIFT,
                   const int SUMI_FIRST, const int CH) {
    const int64_t nb = k / 32;
    const size_t tb = (size_t)MF_T80_WORDS * 4 * NT;
    for (int v0 = 0; v0 < NV; v0 += JV) {
        _Alignas(64) float lanes[8][JVMAX * NTMAX * VL];
        const uint8_t *wb[JVMAX];
        for (int j = 0; j < JV; j++) wb[j] = vec_base(panels, panel_bytes, v0 + j);
        int64_t p = 0;
        for (int l = 0; l < 8; l++) {
            vf acc[JVMAX][NTMAX];
#pragma GCC unroll 16
            for (int j = 0; j < JV; j++)
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) acc[j][t] = VF_ZERO();
            for (int64_t e = l < nb ? (nb - l + 7) / 8 : 0; e > 0; e--, p++) {
                const uint8_t *ts = tile + (size_t)p * tb;
                const uint8_t *w[JVMAX];
                for (int j = 0; j < JV; j++) w[j] = wb[j] + (size_t)p * B32_BYTES;
                vi tmp[JVMAX][NTMAX];
#if MF_GEMM_VNNI
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) {
                    const vi s0 = VI_SLLI32(VI_BCAST(ts + ((size_t)MF_T80_NEG * NT + t) * 4), SHIFT);
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) tmp[j][t] = s0;
                }
#pragma GCC unroll 8
                for (int s = 0; s < 8; s++) {
                    vi wv[JVMAX];
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) wv[j] = VI_LOAD(w[j] + (size_t)s * REC);
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++)
#pragma GCC unroll 16
                        for (int j = 0; j < JV; j++)
                            tmp[j][t] = dpbusd_bcast(tmp[j][t], wv[j], ts + ((size_t)s * NT + t) * 4);
                }
#else
                vi p16[JVMAX][NTMAX];
#pragma GCC unroll 8
                for (int s = 0; s < 8; s++) {
                    vi wv[JVMAX];
#pragma GCC unroll 16
                    for (int j = 0; j < JV; j++) wv[j] = VI_LOAD(w[j] + (size_t)s * REC);
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++) {
                        const vi a = VI_BCAST(ts + ((size_t)s * NT + t) * 4);
#pragma GCC unroll 16
                        for (int j = 0; j < JV; j++) {
                            const vi q = VI_MADDUBS(wv[j], a);
                            p16[j][t] = s % CH == 0 ? q : VI_ADD16(p16[j][t], q);
                        }
                    }
                    if (s % CH == CH - 1) {
#pragma GCC unroll 16
                        for (int t = 0; t < NT; t++) {
                            const vi s0 = s < CH ? VI_SLLI32(VI_BCAST(ts + ((size_t)MF_T80_NEG * NT + t) * 4), SHIFT)
                                                 : VI_ZERO();
#pragma GCC unroll 16
                            for (int j = 0; j < JV; j++) {
                                const vi wide = VI_MADD(p16[j][t], VI_SET16(1));
                                tmp[j][t] = VI_ADD32(s < CH ? s0 : tmp[j][t], wide);
                            }
                        }
                    }
                }
#endif
#pragma GCC unroll 16
                for (int j = 0; j < JV; j++) {
                    const vf dx = VF_LOAD((const float *)(w[j] + 8 * REC));
#pragma GCC unroll 16
                    for (int t = 0; t < NT; t++) {
                        const vf dy = VF_BCAST(ts + ((size_t)MF_T80_D * NT + t) * 4);
                        const vf sf = VF_CVT(tmp[j][t]);
                        const vf val = SUMI_FIRST ? VF_MUL(VF_MUL(sf, dx), dy) : VF_MUL(VF_MUL(dx, dy), sf);
                        acc[j][t] = VF_ADD(acc[j][t], val);
                    }
                }
            }
#pragma GCC unroll 16
            for (int j = 0; j < JV; j++)
#pragma GCC unroll 16
                for (int t = 0; t < NT; t++) VF_STORE(&lanes[l][((size_t)j * NT + t) * VL], acc[j][t]);
        }
        /* mf_lanes_fold over the 8 lanes, each (row, token) in its vector lane */
        for (int h = 4; h >= 1; h /= 2)
            for (int l = 0; l < h; l++)
                for (int i = 0; i < JV * NT; i++)
                    VF_STORE(&lanes[l][(size_t)i * VL],
                             VF_ADD(VF_LOAD(&lanes[l][(size_t)i * VL]), VF_LOAD(&lanes[l + h][(size_t)i * VL])));
        store_rows(out, ldo, lanes[0], JV, NT, v0, nrows, ntok);
    }
}

/* VL bf16 at p as floats; a vector of floats as two vectors of doubles */
#if MF_GEMM_W == 512
#define BF_LDA(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define BF_LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define BF_HI(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1))
#define BD_LOAD _mm512_load_pd
#define BD_STORE _mm512_store_pd
#define BD_ADD _mm512_add_pd
#define BD_ZERO _mm512_setzero_pd
#else
#define BF_LDA(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define BF_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define BF_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
#define BD_LOAD _mm256_load_pd
#define BD_STORE _mm256_store_pd
#define BD_ADD _mm256_add_pd
#define BD_ZERO _mm256_setzero_pd
#endif
#define BDL (VL / 2) /* doubles per vector */

/* n columns of the F16 and BF16 kernels (tokens in vector lanes, weights
 * broadcast): acc[r][v] += weight r x activations v, the tile's 16-bit
 * values widened as f16 or (bf) bf16 */
AI void fma_cols(vf acc[RMAX][TVMAX], const float **wp, const uint8_t **tp, int64_t n, const int R, const int TV,
                 const int bf) {
    const size_t step = (size_t)TV * VL * 2;
    for (; n > 0; n--, *wp += R, *tp += step) {
        vf a[TVMAX];
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) a[v] = bf ? BF_LDA(*tp + (size_t)v * VL * 2) : VF_CVTPH(*tp + (size_t)v * VL * 2);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const vf b = VF_BCAST(*wp + r);
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) acc[r][v] = VF_FMA(b, a[v], acc[r][v]);
        }
    }
}

/* ======================= F16 kernel ======================= */

/* Tokens in vector lanes, weights broadcast: a panel of R rows holds, per
 * column in the F16 order of gemm_layout.h, the R weights as floats; a tile
 * column holds NT = TV * VL f16 activations. lane(row, token) of quant/lanes.h
 * is an fma chain per (row, token) over that lane's columns; lanes finish in
 * the bit-reversed order and fold on a stack (gemm_layout.h). */
static size_t f16_panel_bytes_r(int64_t k, int r) { return (size_t)k * (size_t)r * sizeof(float); }

/* 8 x 8 float transpose in registers */
static inline void transpose8_ps(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* R rows into the F16 panel: column c of lane l = c % 64 goes to position
 * start[l] + c / 64, its R rows side by side as floats. Whole groups of 64
 * columns (one per lane) go through 8 x 8 transposes of 8 rows at a time;
 * the last partial group and the rows of an R < 8 panel column by column. */
static void pack_f16_r(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel, const int R) {
    float *o = (float *)panel;
    int64_t start[64];
    mf_gemm_lane_starts(k, 64, start);
    const int64_t full = R >= 8 ? k / 64 * 64 : 0;
#if MF_GEMM_W == 512
    if (R > 8 && R <= 16 && full) {
        /* 16 rows x 16 columns per 16 x 16 transpose; R <= 16 rows kept */
        const __mmask16 keep = (__mmask16)((1u << R) - 1);
        for (int64_t c0 = 0; c0 < full; c0 += 16) {
            __m512 v[16], t[16];
            prefetch_next(w, row_bytes, R, c0 / 16, full / 16);
            for (int i = 0; i < 16; i++)
                v[i] = i < nrows && i < R ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (size_t)i * row_bytes + (size_t)c0 * 2)))
                                          : _mm512_setzero_ps();
            for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]), t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
            for (int i = 0; i < 16; i += 4) {
                v[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
            }
            /* v[4q + j]: 128-bit granule g holds column 4g + j of rows 4q..4q+3 */
            for (int i = 0; i < 4; i++) {
                t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], _MM_SHUFFLE(2, 0, 2, 0));
                t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], _MM_SHUFFLE(3, 1, 3, 1));
                t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], _MM_SHUFFLE(2, 0, 2, 0));
                t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], _MM_SHUFFLE(3, 1, 3, 1));
            }
            for (int i = 0; i < 4; i++) {
                /* column j = 4g + i for g = 0..3 */
                const __m512 c0v = _mm512_shuffle_f32x4(t[i], t[i + 8], _MM_SHUFFLE(2, 0, 2, 0));
                const __m512 c2v = _mm512_shuffle_f32x4(t[i], t[i + 8], _MM_SHUFFLE(3, 1, 3, 1));
                const __m512 c1v = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], _MM_SHUFFLE(2, 0, 2, 0));
                const __m512 c3v = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], _MM_SHUFFLE(3, 1, 3, 1));
                const __m512 cols[4] = {c0v, c1v, c2v, c3v};
                for (int g = 0; g < 4; g++) {
                    const int64_t c = c0 + 4 * g + i;
                    _mm512_mask_storeu_ps(o + (start[c % 64] + c / 64) * R, keep, cols[g]);
                }
            }
        }
    } else
#endif
    for (int r0 = 0; r0 < R && full; r0 += 8) {
        const int nr = R - r0 < 8 ? R - r0 : 8; /* rows stored from this group */
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int64_t c0 = 0; c0 < full; c0 += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; i++)
                v[i] = r0 + i < nrows ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + (size_t)(r0 + i) * row_bytes + (size_t)c0 * 2)))
                                      : _mm256_setzero_ps();
            transpose8_ps(v); /* v[i]: column c0 + i, rows r0 .. r0 + 7 */
            for (int i = 0; i < 8; i++) {
                float *dst = o + (start[(c0 + i) % 64] + (c0 + i) / 64) * R + r0;
                if (nr == 8) _mm256_storeu_ps(dst, v[i]);
                else _mm256_maskstore_ps(dst, keep, v[i]);
            }
        }
    }
    for (int64_t c = full; c < k; c++) {
        uint16_t h[16] = {0};
        for (int r = 0; r < R && r < nrows; r++) memcpy(&h[r], w + (size_t)r * row_bytes + (size_t)c * 2, 2);
        float f[16];
        _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        _mm256_storeu_ps(f + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8))));
        memcpy(o + (start[c % 64] + c / 64) * R, f, (size_t)R * sizeof(float));
    }
}

AI void f16_kernel(const uint8_t *panel, const uint8_t *tile, int64_t k, float *out, size_t ldo, int nrows, int ntok,
                   const int R, const int TV) {
    const int NT = TV * VL;
    _Alignas(64) float stk[6][RMAX * TVMAX * VL];
    int depth = 0;
    const float *wp = (const float *)panel;
    const uint8_t *tp = tile;
    for (int kk = 0; kk < 64; kk++) {
        vf acc[RMAX][TVMAX];
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) acc[r][v] = VF_ZERO();
        fma_cols(acc, &wp, &tp, mf_gemm_lane_count(mf_gemm_rev6(kk), k), R, TV, 0);
        /* the pairwise fold as a binary counter: a finished pair of subtrees
         * (earlier one on the stack, later one in acc) adds as earlier + later */
        for (int c = kk + 1; (c & 1) == 0; c >>= 1) {
            depth--;
#pragma GCC unroll 16
            for (int r = 0; r < R; r++)
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++)
                    acc[r][v] = VF_ADD(VF_LOAD(&stk[depth][((size_t)r * TV + v) * VL]), acc[r][v]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) VF_STORE(&stk[depth][((size_t)r * TV + v) * VL], acc[r][v]);
        depth++;
    }
    for (int r = 0; r < R && r < nrows; r++)
        for (int t = 0; t < ntok; t++) out[(size_t)t * ldo + r] = stk[0][(size_t)r * NT + t];
}

/* ======================= the kinds ======================= */

/* MF_GEMM_PACK_ONLY: the includer (gemm_amx.h) takes the packers and helpers
 * and defines kinds of its own */
#ifndef MF_GEMM_PACK_ONLY
#if MF_GEMM_VNNI
#define LVL_NAME "AVX-512 VNNI"
#elif MF_GEMM_W == 512
#define LVL_NAME "AVX-512"
#else
#define LVL_NAME "AVX2"
#endif

/* K-quants: 32 rows (2 panels) x 6 tokens with 32 registers, 16 rows (two
 * 8-row halves one after the other) x 6 tokens with 16 */
#ifndef KQ_JV
#if MF_GEMM_W == 512
#define KQ_NV 2
#define KQ_JV 2
#define KQ_ROWS 32 /* KQ_NV * VL, spelled out for the kind's name */
#else
#define KQ_NV 2
#define KQ_JV 1
#define KQ_ROWS 16
#endif
#define KQ_NT 6
#endif

#define DEF_KQ(NAME, UNIT, INIT_T, NSC, NPRE, PRE_T, NMIN, MIN_T, SB)                                              \
    static void kern_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo, \
                            int nrows, int ntok) {                                                                   \
        kq_kernel(panels, pb, tile, k, out, ldo, nrows, ntok, KQ_NV, KQ_JV, KQ_NT, UNIT, INIT_T, NSC, NPRE, PRE_T,  \
                  NMIN, MIN_T, SB, 0);                                                                               \
    }

DEF_KQ(q4k, 4, -1, Q4K_NSC, Q4K_NPRE, 0, 4, MF_T8K_BS32P, Q4K_SB)
#if MF_GEMM_VNNI
DEF_KQ(q5k, 4, MF_T8K_N16, Q5K_NSC, Q5K_NPRE, MF_T8K_BS32P, 4, MF_T8K_BS32P, Q5K_SB)
DEF_KQ(q6k, 2, MF_T8K_N32, Q6K_NSC, Q6K_NPRE, 0, 0, 0, Q6K_SB)
#else
DEF_KQ(q5k, 4, -1, Q5K_NSC, Q5K_NPRE, 0, 4, MF_T8K_BS32P, Q5K_SB)
DEF_KQ(q6k, 2, -1, Q6K_NSC, Q6K_NPRE, MF_T8K_BSP, 0, 0, Q6K_SB)
#endif
/* Q3_K: levels 0..7, 16-column units (|sum| <= 7*127*16 fits int16 with no
 * offset); the reference's -4 * bsum offset as 8 pre pairs. Q2_K: levels
 * 0..3, 16-column units, 8 min pairs against the bsum pairs. */
DEF_KQ(q3k, 4, -1, Q3K_NSC, Q3K_NPRE, MF_T8K_BSP, 0, 0, Q3K_SB)
DEF_KQ(q2k, 4, -1, Q2K_NSC, 0, 0, 8, MF_T8K_BSP, Q2K_SB)
#if MF_GEMM_VNNI
/* IQ4_XS: table values + 128 as levels, 32-column units starting from
 * -128 * (the sub-block's activation sum), scale (ls - 32) by 32-bit multiply */
static void kern_iq4xs(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                       int nrows, int ntok) {
    kq_kernel(panels, pb, tile, k, out, ldo, nrows, ntok, KQ_NV, KQ_JV, KQ_NT, 8, MF_T8K_N128, IQ4XS_NSC, 0, 0, 0, 0,
              IQ4XS_SB, 1);
}
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#define KQ_KIND(TNAME, NAME, MIN_ROWS)                                                                           \
    static const mf_gemm_kind kind_##NAME = {TNAME " " STR(KQ_ROWS) "x" STR(KQ_NT) " " LVL_NAME, MF_GEMM_ACT_Q8K, KQ_NT, 16, 16 * KQ_NV / HALVES, \
                                             QK_K, MIN_ROWS, panel_bytes_##NAME, pack_##NAME, kern_##NAME, NULL, NULL, 0};
/* Crossovers with vec_dot, measured on the matmul op (2 threads, this
 * repository's benchmark machine; docs/PERFORMANCE.md): the AVX2 K-quant
 * kernels (16 registers: 8 rows x 6 tokens per pass) beat vec_dot only on
 * large batches. */
#if MF_GEMM_VNNI
KQ_KIND("q4_K", q4k, 4)
KQ_KIND("q5_K", q5k, 5)
KQ_KIND("q6_K", q6k, 6)
KQ_KIND("q3_K", q3k, 4)
KQ_KIND("q2_K", q2k, 4)
KQ_KIND("iq4_xs", iq4xs, 4)
#elif MF_GEMM_W == 512
KQ_KIND("q4_K", q4k, 6)
KQ_KIND("q5_K", q5k, 4)
KQ_KIND("q6_K", q6k, 4)
KQ_KIND("q3_K", q3k, 6)
KQ_KIND("q2_K", q2k, 6)
#else
/* AVX2 Q4_K / Q6_K: 16, where a batched decode of 16 sequences gains most
 * (Llama-3.2-1B's gate/up at 16 tokens: 9.9 ms a call against 16.0 ms by
 * vec_dot_cols / vec_dot; at 8 the GEMM is behind, docs/PERFORMANCE.md) */
KQ_KIND("q4_K", q4k, 16)
KQ_KIND("q5_K", q5k, 4)
KQ_KIND("q6_K", q6k, 16)
KQ_KIND("q3_K", q3k, 32)
KQ_KIND("q2_K", q2k, 32)
#endif

/* 32-element blocks: as the K-quants; without VNNI Q5_0 keeps a third
 * register per (row vector, token) for its two int16 chunks */
#ifndef B_JV
#if MF_GEMM_W == 512
#define B_NV 2
#define B_JV 2
#define B_ROWS 32
#else
#define B_NV 2
#define B_JV 1
#define B_ROWS 16
#endif
#define B_NT 6
#if MF_GEMM_VNNI
#define B_NT5 6
#else
#define B_NT5 4
#endif
#endif

#define DEF_B32(NAME, NT, SHIFT, SUMI_FIRST, CH, MIN_ROWS)                                                         \
    static void kern_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo, \
                            int nrows, int ntok) {                                                                   \
        b32_kernel(panels, pb, tile, k, out, ldo, nrows, ntok, B_NV, B_JV, NT, SHIFT, SUMI_FIRST, CH);              \
    }                                                                                                                \
    static const mf_gemm_kind kind_##NAME = {#NAME " " STR(B_ROWS) "x" STR(NT) " " LVL_NAME, MF_GEMM_ACT_Q80, NT, 16, 16 * B_NV / HALVES, 32,      \
                                             MIN_ROWS, panel_bytes_b32, pack_##NAME, kern_##NAME, NULL, NULL, 0};

#if MF_GEMM_VNNI
DEF_B32(q4_0, B_NT, 3, 1, 8, 4)
DEF_B32(q5_0, B_NT5, 4, 0, 4, 4)
DEF_B32(q8_0, B_NT, 7, 0, 8, 4)
DEF_B32(iq4_nl, B_NT, 7, 0, 8, 4)
#elif MF_GEMM_W == 512
DEF_B32(q4_0, B_NT, 3, 1, 8, 12)
DEF_B32(q5_0, B_NT5, 4, 0, 4, 8)
#else
/* AVX2: below 8 tokens the columns kernels (vec_dot_cols, one decode of the
 * weight blocks for up to 4 tokens) beat the GEMM: Qwen2.5-0.5B's Q5_0
 * gate/up at 4 tokens 0.69 s against 1.37 s (GEMM), even at 8 (1.31 / 1.24),
 * the GEMM ahead at 16 (2.74 / 1.78); docs/PERFORMANCE.md */
DEF_B32(q4_0, B_NT, 3, 1, 8, 8)
DEF_B32(q5_0, B_NT5, 4, 0, 4, 8)
#endif

/* F16: 14 rows x 32 tokens (28 accumulators) with 32 registers: more rows
 * per call mean fewer tile bytes per FMA (2.3 instead of 4 at 8 x 48), which
 * is what large F16 products are bound by; 4 x 24 with 16 registers */
#ifdef F_R
#elif MF_GEMM_W == 512
#define F_R 14
#define F_TV 2
#else
#define F_R 4
#define F_TV 3
#endif
static size_t panel_bytes_f16(int64_t k) { return f16_panel_bytes_r(k, F_R); }
static void pack_f16(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) { pack_f16_r(w, rb, n, k, p, F_R); }
static void kern_f16(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                     int nrows, int ntok) {
    (void)pb;
    f16_kernel(panels, tile, k, out, ldo, nrows, ntok, F_R, F_TV);
}
/* F16 tiles are 32 (16) tokens wide and its panels are floats: it pays
 * only on long batches. AVX-512, synth llama-3.2-1b F16 at 2 threads
 * against the x16 decode kernel per token: 0.87-0.89x at 16 rows, 0.97x
 * at 18, 1.06-1.10x at 20, 1.22x at 24, 1.51-1.54x at 32 (2026-12-05).
 * AVX2 (MINFER_NO_AVX512=1, same machine): 0.57-0.63x at 32, 0.84-0.85x
 * at 48, 0.92-1.13x at 64, 0.99-1.09x at 72, 1.02-1.05x at 80, 1.10-1.18x
 * at 88, 1.18-1.26x at 96 (2026-12-06). */
#if MF_GEMM_W == 512
#define F_MIN_ROWS 20
#else
#define F_MIN_ROWS 80
#endif
#if MF_GEMM_W == 512
/* The F16 panel from the x16 layout: column c of 16 rows is one vcvtph2ps
 * (16 halves at x16 + 32c in each group), so a panel's R rows come from one
 * or two sequential group streams, one permute and one masked store per
 * column, instead of R row streams and transposes. Columns are visited lane
 * by lane, so the panel is written in order. */
static void pack_f16_x16(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel) {
    float *o = (float *)panel;
    if (nrows <= 0) {
        memset(panel, 0, f16_panel_bytes_r(k, F_R));
        return;
    }
    const int64_t g0 = row0 / 16;
    const int off = (int)(row0 % 16), two = (row0 + nrows - 1) / 16 > g0;
    const uint8_t *a = x16 + (size_t)g0 * 32 * (size_t)k, *b = a + 32 * (size_t)k;
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(off), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 keep = (__mmask16)((1u << F_R) - 1), valid = (__mmask16)(nrows >= 16 ? 0xffffu : (1u << nrows) - 1);
    for (int kk = 0; kk < 64; kk++) {
        const int l = mf_gemm_rev6(kk);
        for (int64_t c = l; c < k; c += 64, o += F_R) {
            const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + 32 * c)));
            const __m512 v1 = two ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 32 * c))) : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(o, keep, _mm512_maskz_permutex2var_ps(valid, v0, idx, v1));
        }
    }
}
#define F16_PACK_X16 pack_f16_x16
#else
#define F16_PACK_X16 NULL
#endif
static const mf_gemm_kind kind_f16 = {"f16 " STR(F_R) "x" STR(F_TV) "*" STR(VL) " " LVL_NAME, MF_GEMM_ACT_F16, F_TV * VL, F_R, F_R, 1,
                                      F_MIN_ROWS, panel_bytes_f16, pack_f16, kern_f16, F16_PACK_X16, NULL, 0};

/* ======================= BF16 kernel ======================= */

/* As F16's (tokens in vector lanes, weights broadcast from a panel of
 * floats, BF_R rows x BF_TV * VL tokens), over BF16's order (gemm_layout.h):
 * per lane, the columns in runs of MF_BF16_RUN, each run an f32 fma chain
 * (the product of two bf16 is exact in float) added to the lane's double;
 * the finished lanes fold on a stack of doubles, earlier + later, which is
 * quant/lanes.h's +16, +8, +4, +2, +1. So every output has vec_dot's bits.
 * A run's doubles cost two conversions and two adds per 8 fmas per
 * accumulator: the price of that order, where vdpbf16ps would round
 * differently. With 32 registers the lane's doubles stay in registers:
 * 8 rows x 16 tokens is 8 float and 16 double accumulators (F16's 14 x 32
 * would put the doubles in memory, a load and a store per add: 14 x 32
 * ran pp512 at 0.87x of this, 10 x 16 spilled, 4 x 32 re-read the tile
 * twice as often per fma). With 16 (AVX2) they stay in memory at F16's
 * 4 x 24. */
#if MF_GEMM_W == 512
#define BF_R 8
#define BF_TV 1
#define BF_REG 1
#else
#define BF_R F_R
#define BF_TV F_TV
#define BF_REG 0
#endif
static size_t panel_bytes_bf16(int64_t k) { return (size_t)k * BF_R * sizeof(float); }

/* BF_R rows into the panel: column c of lane l = c % 32 at start[l] + c / 32,
 * its rows side by side as floats (weights not in the x16 layout) */
static void pack_bf16(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel) {
    float *o = (float *)panel;
    int64_t start[32];
    mf_gemm_lane_starts(k, 32, start);
    for (int64_t c = 0; c < k; c++) {
        float *dst = o + (start[c % 32] + c / 32) * BF_R;
        for (int r = 0; r < BF_R; r++) {
            uint16_t h = 0;
            if (r < nrows) memcpy(&h, w + (size_t)r * row_bytes + (size_t)c * 2, 2);
            dst[r] = mf_bf16_to_fp32(h);
        }
    }
}

#if MF_GEMM_W == 512
/* The panel from the x16 layout: line j of a group holds columns 2j and
 * 2j + 1 of its 16 rows, one dword per row (quant/interleave.h), so a
 * column's 16 floats are the line shifted (even) or masked (odd); rows of
 * a panel that straddles two groups come from both through one permute. */
static void pack_bf16_x16(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel) {
    float *o = (float *)panel;
    if (nrows <= 0) {
        memset(panel, 0, panel_bytes_bf16(k));
        return;
    }
    const int64_t g0 = row0 / 16;
    const int off = (int)(row0 % 16), two = (row0 + nrows - 1) / 16 > g0;
    const uint8_t *a = x16 + (size_t)g0 * 32 * (size_t)k, *b = a + 32 * (size_t)k;
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(off), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    const __mmask16 keep = (__mmask16)((1u << BF_R) - 1), valid = (__mmask16)(nrows >= 16 ? 0xffffu : (1u << nrows) - 1);
    for (int kk = 0; kk < 32; kk++) {
        for (int64_t c = mf_gemm_revbits(kk, 5); c < k; c += 32, o += BF_R) {
            const size_t line = 64 * (size_t)(c / 2);
            const __m512i la = _mm512_loadu_si512(a + line);
            const __m512i lb = two ? _mm512_loadu_si512(b + line) : _mm512_setzero_si512();
            const __m512 v0 = _mm512_castsi512_ps(c % 2 ? _mm512_and_si512(la, hi) : _mm512_slli_epi32(la, 16));
            const __m512 v1 = _mm512_castsi512_ps(c % 2 ? _mm512_and_si512(lb, hi) : _mm512_slli_epi32(lb, 16));
            _mm512_mask_storeu_ps(o, keep, _mm512_maskz_permutex2var_ps(valid, v0, idx, v1));
        }
    }
}

#define BF16_PACK_X16 pack_bf16_x16
#elif MF_GEMM_W == 256
/* AVX2: the same lines, BF_R = 4 rows a panel. Panels start at multiples of
 * 4 rows (gemm.h), so a panel's rows are four adjacent dwords of one
 * group's line: one 16-byte load, a shift (even column) or mask (odd), one
 * store. */
static void pack_bf16_x16(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel) {
    _Static_assert(BF_R == 4, "one 16-byte piece of a line per column, never across two groups");
    float *o = (float *)panel;
    if (nrows <= 0) {
        memset(panel, 0, panel_bytes_bf16(k));
        return;
    }
    const int off = (int)(row0 % 16);
    const uint8_t *a = x16 + (size_t)(row0 / 16) * 32 * (size_t)k + 4 * (size_t)off;
    const __m128i hi = _mm_set1_epi32((int)0xffff0000u);
    const __m128i valid = _mm_cmpgt_epi32(_mm_set1_epi32(nrows), _mm_setr_epi32(0, 1, 2, 3));
    for (int kk = 0; kk < 32; kk++) {
        for (int64_t c = mf_gemm_revbits(kk, 5); c < k; c += 32, o += BF_R) {
            const __m128i l = _mm_loadu_si128((const __m128i *)(a + 64 * (size_t)(c / 2)));
            const __m128i v = c % 2 ? _mm_and_si128(l, hi) : _mm_slli_epi32(l, 16);
            _mm_storeu_si128((__m128i *)o, _mm_and_si128(v, valid));
        }
    }
}
#define BF16_PACK_X16 pack_bf16_x16
#else
#define BF16_PACK_X16 NULL
#endif

static void kern_bf16(const uint8_t *panel, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                      int nrows, int ntok) {
    (void)pb;
    enum { R = BF_R, TV = BF_TV, NT = BF_TV * VL, NA = BF_R * BF_TV * VL };
    _Alignas(64) double stk[5][NA]; /* 32 lanes: at most 5 pending subtrees */
    _Alignas(64) double ln[NA];     /* the lane being summed: [r][token] */
    int depth = 0;
    const float *wp = (const float *)panel;
    const uint8_t *tp = tile;
    for (int kk = 0; kk < 32; kk++) {
        const int64_t n = mf_gemm_lanes_count(mf_gemm_revbits(kk, 5), 32, k);
#if BF_REG
        /* the lane's doubles stay in registers: R x TV x 2 of them */
        __m512d lr[BF_R][BF_TV][2];
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) lr[r][v][0] = lr[r][v][1] = BD_ZERO();
#else
        for (int i = 0; i < NA; i += BDL) BD_STORE(ln + i, BD_ZERO());
#endif
        for (int64_t i0 = 0; i0 < n; i0 += MF_BF16_RUN) {
            const int64_t steps = n - i0 < MF_BF16_RUN ? n - i0 : MF_BF16_RUN;
            vf acc[RMAX][TVMAX];
#pragma GCC unroll 16
            for (int r = 0; r < R; r++)
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[r][v] = VF_ZERO();
            fma_cols(acc, &wp, &tp, steps, R, TV, 1);
#pragma GCC unroll 16
            for (int r = 0; r < R; r++)
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) {
#if BF_REG
                    lr[r][v][0] = BD_ADD(lr[r][v][0], BF_LO(acc[r][v]));
                    lr[r][v][1] = BD_ADD(lr[r][v][1], BF_HI(acc[r][v]));
#else
                    double *d = ln + ((size_t)r * TV + v) * VL;
                    BD_STORE(d, BD_ADD(BD_LOAD(d), BF_LO(acc[r][v])));
                    BD_STORE(d + BDL, BD_ADD(BD_LOAD(d + BDL), BF_HI(acc[r][v])));
#endif
                }
        }
#if BF_REG
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) {
                double *d = ln + ((size_t)r * TV + v) * VL;
                BD_STORE(d, lr[r][v][0]);
                BD_STORE(d + BDL, lr[r][v][1]);
            }
#endif
        /* the fold as a binary counter: a finished pair of subtrees adds as
         * earlier (on the stack) + later (ln) */
        for (int c = kk + 1; (c & 1) == 0; c >>= 1) {
            depth--;
            for (int i = 0; i < NA; i += BDL) BD_STORE(ln + i, BD_ADD(BD_LOAD(&stk[depth][i]), BD_LOAD(ln + i)));
        }
        memcpy(stk[depth], ln, sizeof ln);
        depth++;
    }
    for (int r = 0; r < R && r < nrows; r++)
        for (int t = 0; t < ntok; t++) out[(size_t)t * ldo + r] = (float)stk[0][(size_t)r * NT + t];
}

/* AVX-512 (tiles of 16 tokens), synth llama-3.2-1b BF16 at 2 threads
 * against the x16 decode kernel per token: 0.31x at 4 rows, 0.95-0.99x at 16,
 * 0.81-0.85x at 20 and 0.96-0.98x at 24 (a half tile), 1.07-1.20x at 28, 1.25-1.29x
 * at 32, 1.38-1.44x at 48 (2026-12-05). AVX2, where the x16 BF16 kernel is
 * slower: 0.92-0.93x at 16, 1.11-1.15x at 20, 1.16-1.29x at 24, 0.91-0.93x
 * at 28, 1.08-1.33x at 32, 1.31-1.38x at 40, 1.58-1.85x at 48-96 (2026-12-06;
 * it had F16's 96 before). */
#if MF_GEMM_W == 512
#define BF_MIN_ROWS 28
#else
#define BF_MIN_ROWS 20
#endif
static const mf_gemm_kind kind_bf16 = {"bf16 " STR(BF_R) "x" STR(BF_TV) "*" STR(VL) " " LVL_NAME, MF_GEMM_ACT_BF16, BF_TV * VL, BF_R, BF_R, 1,
                                       BF_MIN_ROWS, panel_bytes_bf16, pack_bf16, kern_bf16, BF16_PACK_X16, NULL, 0};

static void register_gemm(const mf_gemm_kind **tab) {
    tab[MF_TYPE_Q4_K] = &kind_q4k;
    tab[MF_TYPE_Q5_K] = &kind_q5k;
    tab[MF_TYPE_Q6_K] = &kind_q6k;
    tab[MF_TYPE_Q3_K] = &kind_q3k;
    tab[MF_TYPE_Q2_K] = &kind_q2k;
#if MF_GEMM_VNNI
    tab[MF_TYPE_IQ4_XS] = &kind_iq4xs;
#endif
    tab[MF_TYPE_Q4_0] = &kind_q4_0;
    tab[MF_TYPE_Q5_0] = &kind_q5_0;
#if MF_GEMM_VNNI
    tab[MF_TYPE_Q8_0] = &kind_q8_0;
    tab[MF_TYPE_IQ4_NL] = &kind_iq4_nl;
#endif
    tab[MF_TYPE_F16] = &kind_f16;
    tab[MF_TYPE_BF16] = &kind_bf16;
}
#endif /* MF_GEMM_PACK_ONLY */
