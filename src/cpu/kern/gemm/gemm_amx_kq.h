/* gemm_amx_kq.h - the K-quant kernel of gemm_amx.h: one call takes a panel
 * group (2 panels, 32 weight rows) and up to AMX_TB token tiles of 16.
 *
 * Why this loop order. A tile multiply takes 16 cycles and reads a 1 KiB B
 * (weight) tile; a group's folded panels are ~134 KiB per 2048 columns, so a
 * kernel that sweeps the whole row for one token tile reads every B tile from
 * L2, and the previous kernel ran its tile half at a third of the instruction
 * rate for that reason (docs/PERFORMANCE.md). Here the super-block loop is
 * outside the token-tile loop: a super-block's B tiles of both panels
 * (NPL x 4 KiB per panel) come from L2 once per call, prefetched into L1
 * during the previous super-block, and every token tile of the call reads
 * them from L1. Each token tile's A tile (16 tokens x 64 bytes, 4 per
 * super-block) is loaded once and serves all 2 x NPL (x 3 with the mins
 * plane) multiplies of its step. Per multiply that is 1.25 tile loads
 * (A + 4 B per 4 multiplies), 0.25 of them from L2.
 *
 * The float chains of all the call's (row, token) pairs live in f[] (2 KiB
 * per token tile) and still take one term per super-block in super-block
 * order, each the reference's expression of exact integer sums: results are
 * bitwise those of vec_dot whatever the number of tiles per call.
 *
 * Jobs. Vector mins (MT = 0): a job is (super-block, token tile) with both
 * panels' lo/hi sums in tmm4-7, B in tmm2/tmm3, A in tmm0/tmm1 by the parity
 * of the 64-column step. Tile mins (MT = 1, types with mins): the per-
 * sub-block mins are a third B plane (each row's min repeated over its
 * sub-block's columns) against the same A tile, so sum(a * m) arrives from
 * the tiles and the 4 (Q4_K) or 8 (Q2_K) vpdpwssd per 16 rows and token
 * leave the vector side; a job is then (super-block, token tile, panel) with
 * lo/hi/min in tmm4/5/6 and their B in tmm2/3/7. The mins plane is built in
 * L1 (mb[], 4 KiB per panel) once per super-block of the call from the
 * panel's min records: 64 stores, shared by all the call's token tiles.
 * The vector steps of job J - 1 run a quarter of the tokens at a time
 * between the four multiply steps of job J, so the core always has vector
 * work beside the tile instructions in flight. */

/* token tiles per call at most (f[] on the stack: 2 KiB each) */
#define AMX_TB 8

/* software prefetch level: 0 none, 1 the next super-block's B (default),
 * 2 also the next job's A; MINFER_AMX_PF, read once at registration */
static int amx_pf = 1;

/* mins plane B tiles of one panel's super-block: step s (columns 4s..4s+3)
 * holds each row's min of the sub-block of s in all 4 bytes. The min
 * records are int16 pairs (sub-blocks 2m, 2m + 1) per row: bytes 0 / 2 of
 * each row's word. */
AI void amx_min_tiles(const uint8_t *w, uint8_t *mb, const int NPL, const int NMIN) {
    const int sps = 64 / (2 * NMIN); /* steps per sub-block: 8 (Q4_K, Q5_K), 4 (Q2_K) */
    _Alignas(64) uint8_t ctl[2][64];
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 64; i++) ctl[h][i] = (uint8_t)((i & 12) + 2 * h);
    const __m512i c0 = _mm512_load_si512(ctl[0]), c1 = _mm512_load_si512(ctl[1]);
    for (int m = 0; m < NMIN; m++) {
        const __m512i r = _mm512_loadu_si512(w + (size_t)(64 * NPL + m) * REC);
        const __m512i v0 = _mm512_shuffle_epi8(r, c0), v1 = _mm512_shuffle_epi8(r, c1);
        for (int s = 0; s < sps; s++) {
            _mm512_store_si512(mb + (size_t)(2 * m * sps + s) * 64, v0);
            _mm512_store_si512(mb + (size_t)((2 * m + 1) * sps + s) * 64, v1);
        }
    }
}

/* The vector steps of one super-block of one panel for tokens t0..t0+3 of a
 * token tile: w the panel's super-block, ts the tile's plain entries of it,
 * lo/hi/mn the stored tile sums (mn only with MT), f the tile's chains of
 * this panel ([token][16 rows]). The expression is kq_kernel's. */
AI void amx_kq_finish(const uint8_t *w, const uint8_t *ts, const int32_t *lo, const int32_t *hi, const int32_t *mn,
                      int t0, float *f, const int NPL, const int NMIN, const int MIN_T, const int MT) {
    const size_t D_OFF = (size_t)(64 * NPL + NMIN) * REC;
    const vf xd = VF_LOAD((const float *)(w + D_OFF));
    const vf xm = NMIN ? VF_LOAD((const float *)(w + D_OFF + REC)) : VF_ZERO();
    vi mv[8];
    if (!MT)
        for (int m = 0; m < NMIN && m < 8; m++) mv[m] = VI_LOAD(w + (size_t)(64 * NPL + m) * REC);
#pragma GCC unroll 4
    for (int t = t0; t < t0 + 4; t++) {
        vi is = VI_LOAD(lo + 16 * t);
        if (NPL == 2) is = VI_ADD32(is, VI_SLLI32(VI_LOAD(hi + 16 * t), 8));
        const vf yd = VF_BCAST(ts + ((size_t)MF_T8K_D * MF_TAMX_NT + t) * 4);
        vf term = VF_MUL(VF_MUL(xd, yd), VF_CVT(is));
        if (NMIN) {
            vi m = VI_ZERO();
            if (MT) m = VI_LOAD(mn + 16 * t);
            else
                for (int i = 0; i < NMIN && i < 8; i++)
                    m = VI_DPWSSD(m, mv[i], VI_BCAST(ts + ((size_t)(MIN_T + i) * MF_TAMX_NT + t) * 4));
            term = VF_SUB(term, VF_MUL(VF_MUL(xm, yd), VF_CVT(m)));
        }
        float *fp = f + (size_t)t * 16;
        VF_STORE(fp, VF_ADD(VF_LOAD(fp), term));
    }
}

/* Step kk (64 columns) of a vector-mins job: A into tmm AT, both panels'
 * planes. Q2_K (one plane) takes its two B tiles in tmm2 / tmm3. */
#define AMX_KQ_STEP2(AT, kk)                                                        \
    do {                                                                            \
        TL_LOAD(AT, a + 64 * (kk), 256);                                            \
        TL_LOAD(2, w0 + (size_t)16 * (kk) * REC, REC);                              \
        TL_DPBSUD(4, AT, 2);                                                        \
        if (NPL == 2) {                                                             \
            TL_LOAD(3, w0 + (size_t)(64 + 16 * (kk)) * REC, REC);                   \
            TL_DPBSSD(5, AT, 3);                                                    \
            TL_LOAD(2, w1 + (size_t)16 * (kk) * REC, REC);                          \
            TL_DPBSUD(6, AT, 2);                                                    \
            TL_LOAD(3, w1 + (size_t)(64 + 16 * (kk)) * REC, REC);                   \
            TL_DPBSSD(7, AT, 3);                                                    \
        } else {                                                                    \
            TL_LOAD(3, w1 + (size_t)16 * (kk) * REC, REC);                          \
            TL_DPBSUD(6, AT, 3);                                                    \
        }                                                                           \
    } while (0)

/* Step kk of a tile-mins job on panel wl (mins plane mbl) */
#define AMX_KQ_STEP3(AT, kk)                                                        \
    do {                                                                            \
        TL_LOAD(AT, a + 64 * (kk), 256);                                            \
        TL_LOAD(2, wl + (size_t)16 * (kk) * REC, REC);                              \
        TL_DPBSUD(4, AT, 2);                                                        \
        if (NPL == 2) {                                                             \
            TL_LOAD(3, wl + (size_t)(64 + 16 * (kk)) * REC, REC);                   \
            TL_DPBSSD(5, AT, 3);                                                    \
        }                                                                           \
        TL_LOAD(7, mbl + (size_t)(kk) * 1024, 64);                                  \
        TL_DPBSUD(6, AT, 7);                                                        \
    } while (0)

/* One quarter of job J: its multiply step kk, the vector steps of job J - 1
 * for tokens 4kk..4kk+3, and a share of the prefetches for what comes next:
 * the next super-block's panel bytes (spread over this super-block's jobs)
 * and the next job's A tile (a quarter per step). */
#define AMX_KQ_PHASE(AT, kk)                                                                                     \
    do {                                                                                                         \
        if (live) {                                                                                              \
            if (MT) AMX_KQ_STEP3(AT, kk);                                                                        \
            else AMX_KQ_STEP2(AT, kk);                                                                           \
        }                                                                                                        \
        if (fin && !AMX_SKIP_VECTOR) {                                                                           \
            if (MT)                                                                                              \
                amx_kq_finish(panels + (size_t)pp * pb + (size_t)sbp * SBF, tsp, c[0], c[1], c[2], 4 * (kk),     \
                              f[jp][pp], NPL, NMIN, MIN_T, 1);                                                   \
            else                                                                                                 \
                for (int q = 0; q < 2; q++)                                                                      \
                    amx_kq_finish(panels + (size_t)q * pb + (size_t)sbp * SBF, tsp, c[2 * q], c[2 * q + 1], NULL, \
                                  4 * (kk), f[jp][q], NPL, NMIN, MIN_T, 0);                                      \
        }                                                                                                        \
        if (pf_b && live && sb + 1 < nsb) {                                                                       \
            const uint8_t *pq = panels + (size_t)((kk) & 1) * pb + (size_t)(sb + 1) * SBF;                        \
            const int l0 = jj * pf_job + ((kk) >> 1) * pf_half;                                                  \
            const int l1 = l0 + pf_half < sbl ? l0 + pf_half : sbl;                                              \
            for (int l = l0; l < l1; l++) _mm_prefetch((const char *)(pq + (size_t)l * 64), _MM_HINT_T0);        \
        }                                                                                                        \
        if (an)                                                                                                  \
            for (int i = 0; i < 16; i++) _mm_prefetch((const char *)(an + (size_t)(kk) * 1024 + 64 * i), _MM_HINT_T0); \
    } while (0)

/* ntiles <= AMX_TB token tiles (tb bytes apart) x one panel group; ntok
 * tokens in all (the last tile may be partial), out row t = token t. */
AI void amx_kq(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, int64_t k, float *out,
               size_t ldo, int nrows, int ntok, const int NPL, const int NMIN, const int MIN_T, const int MT) {
    const int64_t nsb = k / QK_K;
    const size_t tsb = (size_t)MF_T8K_WORDS * 4 * MF_TAMX_NT, SBF = amx_sbf(NPL, NMIN);
    const size_t a_off = (size_t)nsb * tsb; /* the token-major quants after the plain tile */
    const int PJ = MT ? 2 : 1, njobs = ntiles * PJ;
    const int64_t total = nsb * njobs;
    /* prefetches (amx_pf, MINFER_AMX_PF): the next super-block's lines of
     * each panel spread over this super-block's jobs (phases 0/2 panel 0,
     * 1/3 panel 1), and with 2 the next job's A tile. They cost vector-side
     * instructions (measured without tiles: 100 per job took the vector half
     * from ~800 to ~530 GFLOP/s), so the B share is kept to what L1 needs. */
    const int sbl = (int)(SBF / 64); /* cache lines of one panel's super-block */
    const int pf_job = (sbl + njobs - 1) / njobs, pf_half = (pf_job + 1) / 2;
    const int pf_b = amx_pf >= 1, pf_a = amx_pf >= 2;
    _Alignas(64) float f[AMX_TB][2][MF_TAMX_NT * 16];
    _Alignas(64) int32_t cb[2][4][16 * 16];
    _Alignas(64) uint8_t mb[2][MT ? 4096 : 64];
    for (int j = 0; j < ntiles; j++)
        for (int i = 0; i < 2 * MF_TAMX_NT * 16; i++) (&f[j][0][0])[i] = 0.0f;
    amx_config(64);
    for (int64_t J = 0; J <= total; J++) {
        const int live = J < total, fin = J > 0;
        const int64_t sb = J / njobs, sbp = (J - fin) / njobs;
        const int jj = (int)(J % njobs), j = jj / PJ, p = jj % PJ;
        const int jjp = (int)((J - fin) % njobs), jp = jjp / PJ, pp = jjp % PJ;
        const uint8_t *a = tiles + (size_t)j * tb + a_off + (size_t)sb * MF_TAMX_SB_BYTES;
        const uint8_t *w0 = panels + (size_t)sb * SBF, *w1 = w0 + pb;
        const uint8_t *wl = p ? w1 : w0, *mbl = mb[p];
        const uint8_t *tsp = tiles + (size_t)jp * tb + (size_t)sbp * tsb;
        const int32_t(*c)[256] = (const int32_t(*)[256])cb[(J - 1) & 1];
        /* the next job's A tile, where it is another tile's (MT: every other job) */
        const int64_t Jn = J + 1;
        const uint8_t *an = NULL;
        if (pf_a && Jn < total && (!MT || (Jn % njobs) % 2 == 0)) {
            const int jn = (int)(Jn % njobs) / PJ;
            an = tiles + (size_t)jn * tb + a_off + (size_t)(Jn / njobs) * MF_TAMX_SB_BYTES;
        }
        (void)wl, (void)mbl, (void)w1;
        if (live) {
            if (MT && jj == 0) {
                amx_min_tiles(w0, mb[0], NPL, NMIN);
                amx_min_tiles(w1, mb[1], NPL, NMIN);
            }
            TL_ZERO(4);
            TL_ZERO(6);
            if (NPL == 2) TL_ZERO(5);
            if (NPL == 2 && !MT) TL_ZERO(7);
        }
        AMX_KQ_PHASE(0, 0);
        AMX_KQ_PHASE(1, 1);
        AMX_KQ_PHASE(0, 2);
        AMX_KQ_PHASE(1, 3);
        if (live) {
            int32_t(*o)[256] = cb[J & 1];
            TL_STORE(4, o[0], 64);
            if (NPL == 2) TL_STORE(5, o[1], 64);
            TL_STORE(6, o[2], 64);
            if (NPL == 2 && !MT) TL_STORE(7, o[3], 64);
        }
    }
    for (int j = 0; j < ntiles; j++) {
        const int n = ntok - 16 * j < 16 ? ntok - 16 * j : 16;
        store_rows(out + (size_t)16 * j * ldo, ldo, &f[j][0][0], 2, MF_TAMX_NT, 0, nrows, n);
    }
}

/* Any number of token tiles: AMX_TB at a time. */
AI void amx_kq_all(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, int64_t k, float *out,
                   size_t ldo, int nrows, int ntok, const int NPL, const int NMIN, const int MIN_T, const int MT) {
    for (int i0 = 0; i0 < ntiles; i0 += AMX_TB) {
        const int n = ntiles - i0 < AMX_TB ? ntiles - i0 : AMX_TB;
        const int nt = ntok - 16 * i0 < 16 * n ? ntok - 16 * i0 : 16 * n;
        amx_kq(panels, pb, tiles + (size_t)i0 * tb, tb, n, k, out + (size_t)16 * i0 * ldo, ldo, nrows, nt, NPL, NMIN,
               MIN_T, MT);
    }
}
