/* hnsw_file.c - the HNSW graph cache: every layer's graph (hnsw.c) saved in
 * one file of the vindex directory and mapped back, because a build takes
 * minutes per layer at 64k features and a load a few milliseconds.
 *
 * Only what a search reads is saved: levels, level offsets and links. The
 * build's similarities (pruning) and the transform's extra coordinate are
 * build-time state, so a loaded graph cannot grow, and need not.
 *
 * Layout (integers little-endian, like every vindex file):
 *   [0, 256)  header: "MFHNSW\0\0", u32 version, u32 build version (HN_ALGO),
 *             u32 n_layer, n_features, n_embd, feature type, m, m0,
 *             ef_construction, mips_transform; u64 gate_vectors.bin size,
 *             its sha256 (64 hex digits, from index.json), u64 file size,
 *             u64 checksum (at 128, of the whole file with these 8 bytes
 *             zero), zeros to 256
 *   [256, ..) per layer 48 bytes: u64 offset, u64 bytes, u64 upper-level
 *             slots, u32 entry, u32 top level, 16 zero bytes
 *   each layer at the next multiple of 64 after the one before:
 *             u8 level[n], zeros to a multiple of 8, i64 up_off[n] (-1: no
 *             upper levels), i32 link0[n][1 + m0] (count, ids, zeros),
 *             i32 up[slots] (per node and level 1..: count, ids, zeros)
 * The layout is canonical (offsets follow from the counts, unused slots are
 * zero), so the bytes depend only on the graph, which depends only on the
 * gates and the parameters: never on the thread count.
 *
 * Loading trusts nothing: the size, the checksum (damage), then every count,
 * offset and link id against the layout (a file crafted to pass the
 * checksum still cannot make a search read outside it), and the identity:
 * the parameters asked for, the build version, and the gate file it was
 * built from. Whichever fails is refused with a message naming the file; a
 * stale or foreign file is refused, not ignored, so that a run never
 * silently pays minutes of build (or answers from the wrong graph). */
#include "vindex/hnsw_int.h"
#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the vindex files are little-endian and mapped as they are"
#endif

#define HN_FILE_VERSION 1
static const uint8_t hn_magic[8] = {'M', 'F', 'H', 'N', 'S', 'W', 0, 0};

/* ---- checksum: four independent multiply-rotate lanes over 8-byte words
 * (several GB/s; sha256 would be ~15x slower and load time is the point) ---- */

#define CK_P1 0x9e3779b97f4a7c15ull
#define CK_P2 0xc2b2ae3d27d4eb4full

static inline uint64_t ck_mix(uint64_t h, uint64_t w) {
    /* each step is a bijection of h for a fixed w and of w for a fixed h: a
     * change in one word always changes the lane */
    h ^= w * CK_P1;
    h = (h << 31) | (h >> 33);
    return h * CK_P2;
}

void vx_cksum_init(vx_cksum *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 4; i++) c->lane[i] = CK_P2 * (uint64_t)(i + 1);
}

static void ck_block(vx_cksum *c, const uint8_t *p) {
    for (int i = 0; i < 4; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        c->lane[i] = ck_mix(c->lane[i], w);
    }
}

void vx_cksum_update(vx_cksum *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->n += n;
    if (c->fill) {
        const size_t t = n < 32 - c->fill ? n : 32 - c->fill;
        memcpy(c->buf + c->fill, p, t);
        c->fill += t, p += t, n -= t;
        if (c->fill < 32) return;
        ck_block(c, c->buf);
        c->fill = 0;
    }
    for (; n >= 32; p += 32, n -= 32) ck_block(c, p);
    memcpy(c->buf, p, n);
    c->fill = n;
}

uint64_t vx_cksum_final(const vx_cksum *c) {
    vx_cksum t = *c;
    if (t.fill) {
        /* the tail zero-padded; the length below tells "ab" from "ab\0" */
        memset(t.buf + t.fill, 0, 32 - t.fill);
        ck_block(&t, t.buf);
    }
    uint64_t h = ck_mix(CK_P1, t.n);
    for (int i = 0; i < 4; i++) h = ck_mix(h, t.lane[i]);
    return h ^ (h >> 29);
}

/* ---- layout ---- */

static void put32(uint8_t *p, uint32_t x) { memcpy(p, &x, 4); }
static void put64(uint8_t *p, uint64_t x) { memcpy(p, &x, 8); }
static uint32_t get32(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    return x;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* where a layer's arrays start, from its counts */
typedef struct hn_layout {
    uint64_t up_off, link0, up, bytes;
} hn_layout;

static hn_layout layout_of(uint64_t n, uint64_t m0, uint64_t n_up) {
    hn_layout o;
    o.up_off = align_up(n, 8);
    o.link0 = o.up_off + 8 * n;
    o.up = o.link0 + 4 * n * (1 + m0);
    o.bytes = o.up + 4 * n_up;
    return o;
}

static uint64_t first_layer_off(int n_layer) { return align_up(HN_FILE_HEADER + (uint64_t)HN_FILE_ENTRY * n_layer, VX_ALIGN); }

char *mf_vindex_hnsw_cache_path(const mf_vindex *v, const mf_vindex_hnsw_params *p) {
    if (!p) p = &v->hnsw_p;
    char name[64];
    snprintf(name, sizeof name, "hnsw_m%d_efc%d%s.bin", (int)p->m, (int)p->ef_construction, p->mips_transform ? "_mips" : "");
    return vx_path(v->dir, name);
}

static void params_text(char *buf, size_t cap, uint32_t m, uint32_t efc, uint32_t mips) {
    snprintf(buf, cap, "M %u, efc %u%s", (unsigned)m, (unsigned)efc, mips ? ", MIPS transform" : "");
}

/* ---- saving ---- */

typedef struct hn_writer {
    FILE *f;
    const char *path;
    vx_cksum ck;
    uint64_t size;
    mf_status st;
} hn_writer;

static void wr(hn_writer *w, const void *p, size_t n) {
    if (w->st || !n) return;
    if (fwrite(p, 1, n, w->f) != n) {
        w->st = mf_err(MF_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        return;
    }
    vx_cksum_update(&w->ck, p, n);
    w->size += n;
}

static void wr_zeros(hn_writer *w, uint64_t n) {
    static const uint8_t zero[VX_ALIGN];
    while (n) {
        const size_t t = n < sizeof zero ? (size_t)n : sizeof zero;
        wr(w, zero, t);
        n -= t;
    }
}

/* one link list: count and ids, zeros in the unused slots (the build leaves
 * them uninitialised) */
static void wr_list(hn_writer *w, const int32_t *lk, int cap, int32_t *row) {
    memset(row, 0, (size_t)(1 + cap) * sizeof *row);
    memcpy(row, lk, (size_t)(1 + lk[0]) * sizeof *row);
    wr(w, row, (size_t)(1 + cap) * sizeof *row);
}

static void wr_layer(hn_writer *w, const vx_hnsw *g, int32_t *row) {
    const hn_layout o = layout_of((uint64_t)g->n, (uint64_t)g->m0, (uint64_t)g->n_up);
    wr(w, g->level, (size_t)g->n);
    wr_zeros(w, o.up_off - (uint64_t)g->n);
    wr(w, g->up_off, (size_t)g->n * sizeof *g->up_off);
    for (int32_t j = 0; j < g->n; j++) wr_list(w, g->link0 + (size_t)j * (1 + g->m0), g->m0, row);
    /* up_off is the prefix sum in node order, so this is the array's own order */
    for (int32_t j = 0; j < g->n; j++)
        for (int l = 1; l <= g->level[j]; l++) wr_list(w, g->up + g->up_off[j] + (int64_t)(l - 1) * (1 + g->m), g->m, row);
}

static void fill_header(const mf_vindex *v, uint8_t *h, uint64_t file_size) {
    const mf_vindex_hnsw_params *p = &v->hnsw_p;
    memset(h, 0, HN_FILE_HEADER);
    memcpy(h, hn_magic, 8);
    put32(h + 8, HN_FILE_VERSION), put32(h + 12, HN_ALGO);
    put32(h + 16, (uint32_t)v->ix.n_layer), put32(h + 20, (uint32_t)v->ix.n_features);
    put32(h + 24, (uint32_t)v->ix.n_embd), put32(h + 28, (uint32_t)v->ix.ftype);
    put32(h + 32, (uint32_t)p->m), put32(h + 36, (uint32_t)(2 * p->m));
    put32(h + 40, (uint32_t)p->ef_construction), put32(h + 44, p->mips_transform ? 1 : 0);
    put64(h + 48, v->ix.files[VX_GATE].size);
    memcpy(h + 56, v->ix.files[VX_GATE].sha256, 64);
    put64(h + 120, file_size);
}

mf_status mf_vindex_hnsw_save(mf_vindex *v, const char *path) {
    if (!v->hnsw_on) return mf_err(MF_ERR_INVALID_ARG, "HNSW is not enabled on this vindex");
    const int L = v->ix.n_layer;
    mf_status s = mf_vindex_hnsw_build(v, 0, L - 1);
    if (s) return s;
    char *def = path ? NULL : mf_vindex_hnsw_cache_path(v, NULL);
    if (!path && !(path = def)) return mf_err(MF_ERR_NOMEM, "out of memory");
    const size_t plen = strlen(path) + 5;
    char *tmp = malloc(plen);
    uint8_t *table = calloc((size_t)L, HN_FILE_ENTRY);
    int32_t *row = malloc((size_t)(1 + 2 * v->hnsw_p.m) * sizeof *row);
    if (!tmp || !table || !row) {
        free(def), free(tmp), free(table), free(row);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, plen, "%s.tmp", path);
    /* the table first: every offset follows from the counts */
    uint64_t off = first_layer_off(L), end = off;
    for (int l = 0; l < L; l++) {
        const vx_hnsw *g = v->hnsw[l];
        const hn_layout o = layout_of((uint64_t)g->n, (uint64_t)g->m0, (uint64_t)g->n_up);
        uint8_t *e = table + (size_t)l * HN_FILE_ENTRY;
        put64(e, off), put64(e + 8, o.bytes), put64(e + 16, (uint64_t)g->n_up);
        put32(e + 24, (uint32_t)g->entry), put32(e + 28, (uint32_t)g->max_level);
        end = off + o.bytes;
        off = align_up(end, VX_ALIGN);
    }
    uint8_t hdr[HN_FILE_HEADER];
    fill_header(v, hdr, end);
    hn_writer w = {0};
    w.path = tmp;
    vx_cksum_init(&w.ck);
    w.f = fopen(tmp, "wb");
    if (!w.f) w.st = mf_err(MF_ERR_IO, "%s: %s", tmp, strerror(errno));
    /* the checksum field is zero here and in what the checksum covers */
    wr(&w, hdr, sizeof hdr);
    wr(&w, table, (size_t)L * HN_FILE_ENTRY);
    for (int l = 0; l < L; l++) {
        wr_zeros(&w, get64(table + (size_t)l * HN_FILE_ENTRY) - w.size);
        wr_layer(&w, v->hnsw[l], row);
    }
    if (!w.st && w.size != end) w.st = mf_err(MF_ERR_INTERNAL, "%s: wrote %" PRIu64 " bytes, the layout says %" PRIu64, tmp, w.size, end);
    if (!w.st) {
        uint8_t ck[8];
        put64(ck, vx_cksum_final(&w.ck));
        if (fseek(w.f, HN_OFF_CKSUM, SEEK_SET) != 0 || fwrite(ck, 1, 8, w.f) != 8)
            w.st = mf_err(MF_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (w.f && fclose(w.f) != 0 && !w.st) w.st = mf_err(MF_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (!w.st && rename(tmp, path) != 0) w.st = mf_err(MF_ERR_IO, "%s: %s", path, strerror(errno));
    if (w.st && w.f) remove(tmp);
    free(def), free(tmp), free(table), free(row);
    return w.st;
}

/* ---- loading ---- */

/* One layer's arrays checked against each other and the layout; on success
 * *out (may be NULL) gets a graph pointing into the map. */
static mf_status check_layer(const char *path, int layer, const uint8_t *base, uint64_t n, uint32_t m, uint32_t m0,
                             uint64_t n_up, uint32_t entry, uint32_t top, vx_hnsw **out) {
    const hn_layout o = layout_of(n, m0, n_up);
    const uint8_t *lv = base;
    const int64_t *uo = (const int64_t *)(const void *)(base + o.up_off);
    const int32_t *l0 = (const int32_t *)(const void *)(base + o.link0);
    const int32_t *up = (const int32_t *)(const void *)(base + o.up);
    uint32_t max = 0;
    for (uint64_t j = 0; j < n; j++) {
        if (lv[j] > HN_MAX_LEVEL)
            return mf_err(MF_ERR_FORMAT, "%s: layer %d: node %" PRIu64 " has level %u (at most %d)", path, layer, j, lv[j],
                          HN_MAX_LEVEL);
        if (lv[j] > max) max = lv[j];
    }
    for (uint64_t j = n; j < o.up_off; j++)
        if (lv[j]) return mf_err(MF_ERR_FORMAT, "%s: layer %d: padding after the levels is not zero", path, layer);
    if (max != top || entry >= n || lv[entry] != top)
        return mf_err(MF_ERR_FORMAT, "%s: layer %d: entry %u at top level %u does not match the levels (top %u)", path,
                      layer, entry, top, max);
    int64_t acc = 0;
    for (uint64_t j = 0; j < n; j++) {
        if (uo[j] != (lv[j] ? acc : -1))
            return mf_err(MF_ERR_FORMAT, "%s: layer %d: node %" PRIu64 "'s upper-level offset %" PRId64 " should be %" PRId64,
                          path, layer, j, uo[j], lv[j] ? acc : (int64_t)-1);
        acc += (int64_t)lv[j] * (1 + m);
    }
    if ((uint64_t)acc != n_up)
        return mf_err(MF_ERR_FORMAT, "%s: layer %d: the levels need %" PRId64 " upper-level slots, the table says %" PRIu64,
                      path, layer, acc, n_up);
    /* every list: a count in range, ids of nodes present at that level, zeros after */
    for (uint64_t j = 0; j < n; j++)
        for (uint32_t l = 0; l <= lv[j]; l++) {
            const uint32_t cap = l ? m : m0;
            const int32_t *lk = l ? up + uo[j] + (int64_t)(l - 1) * (1 + m) : l0 + j * (1 + m0);
            if (lk[0] < 0 || (uint32_t)lk[0] > cap)
                return mf_err(MF_ERR_FORMAT, "%s: layer %d: node %" PRIu64 " has %d links at level %u (at most %u)", path,
                              layer, j, lk[0], l, cap);
            for (int32_t i = 1; i <= lk[0]; i++)
                if (lk[i] < 0 || (uint64_t)lk[i] >= n || lv[lk[i]] < l)
                    return mf_err(MF_ERR_FORMAT, "%s: layer %d: node %" PRIu64 " links to %d at level %u, which is not a node there",
                                  path, layer, j, lk[i], l);
            for (uint32_t i = (uint32_t)lk[0] + 1; i <= cap; i++)
                if (lk[i]) return mf_err(MF_ERR_FORMAT, "%s: layer %d: node %" PRIu64 "'s unused link slots are not zero", path, layer, j);
        }
    if (!out) return MF_OK;
    vx_hnsw *g = calloc(1, sizeof *g);
    if (!g) return mf_err(MF_ERR_NOMEM, "out of memory");
    /* the search only reads these: the casts drop const for the shared struct */
    g->n = (int32_t)n, g->m = (int32_t)m, g->m0 = (int32_t)m0, g->max_level = (int32_t)top, g->entry = (int32_t)entry;
    g->level = (uint8_t *)lv, g->up_off = (int64_t *)uo, g->link0 = (int32_t *)l0, g->up = (int32_t *)up;
    g->n_up = (int64_t)n_up;
    g->mapped = true;
    *out = g;
    return MF_OK;
}

/* The whole file: header, identity, checksum, table, layers. want NULL:
 * the file's own parameters (verify). graphs (may be NULL): [n_layer]. */
static mf_status check_file(const mf_vindex *v, const mf_mapfile *mf, const char *path, const mf_vindex_hnsw_params *want,
                            vx_hnsw **graphs) {
    const uint8_t *h = mf->data;
    const uint64_t size = mf->size;
    const vx_index *ix = &v->ix;
    if (size < HN_FILE_HEADER || memcmp(h, hn_magic, 8))
        return mf_err(MF_ERR_FORMAT, "%s: not an HNSW cache file (%s)", path, size < HN_FILE_HEADER ? "too short" : "bad magic");
    if (get32(h + 8) != HN_FILE_VERSION)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: HNSW cache version %u is not supported (this build reads %d)", path, get32(h + 8),
                      HN_FILE_VERSION);
    if (get64(h + 120) != size)
        return mf_err(MF_ERR_FORMAT, "%s: %" PRIu64 " bytes, the header says %" PRIu64 " (truncated or extended)", path, size,
                      get64(h + 120));
    {
        uint8_t h0[HN_FILE_HEADER];
        memcpy(h0, h, sizeof h0);
        memset(h0 + HN_OFF_CKSUM, 0, 8);
        vx_cksum ck;
        vx_cksum_init(&ck);
        vx_cksum_update(&ck, h0, sizeof h0);
        vx_cksum_update(&ck, h + HN_FILE_HEADER, size - HN_FILE_HEADER);
        if (vx_cksum_final(&ck) != get64(h + HN_OFF_CKSUM))
            return mf_err(MF_ERR_FORMAT, "%s: checksum mismatch: the file is damaged", path);
    }
    for (int i = HN_OFF_CKSUM + 8; i < HN_FILE_HEADER; i++)
        if (h[i]) return mf_err(MF_ERR_FORMAT, "%s: reserved header bytes are not zero", path);
    if (get32(h + 12) != HN_ALGO)
        return mf_err(MF_ERR_FORMAT, "%s: made by another version of the HNSW build (%u; this minfer builds %d): "
                      "rebuild it with `minfer vindex hnsw`", path, get32(h + 12), HN_ALGO);
    const uint32_t L = get32(h + 16), n = get32(h + 20), E = get32(h + 24), ft = get32(h + 28);
    const uint32_t m = get32(h + 32), m0 = get32(h + 36), efc = get32(h + 40), mips = get32(h + 44);
    if (L != (uint32_t)ix->n_layer || n != (uint32_t)ix->n_features || E != (uint32_t)ix->n_embd || ft != (uint32_t)ix->ftype)
        return mf_err(MF_ERR_FORMAT, "%s: built for %u layers x %u features of %u (type %u), this vindex has %d x %d of %d (%s)",
                      path, L, n, E, ft, ix->n_layer, ix->n_features, ix->n_embd, mf_type_name(ix->ftype));
    char hs[65];
    memcpy(hs, h + 56, 64), hs[64] = 0;
    if (get64(h + 48) != ix->files[VX_GATE].size || strcmp(hs, ix->files[VX_GATE].sha256))
        return mf_err(MF_ERR_FORMAT, "%s: built for other gate vectors (gate_vectors.bin sha256 %.16s..., %" PRIu64
                      " bytes; this vindex's is %.16s..., %" PRIu64 " bytes): rebuild it with `minfer vindex hnsw`", path,
                      hs, get64(h + 48), ix->files[VX_GATE].sha256, ix->files[VX_GATE].size);
    if (m < 2 || m > 128 || m0 != 2 * m || efc < m || efc > 4096 || mips > 1)
        return mf_err(MF_ERR_FORMAT, "%s: parameters M %u (level 0: %u), efc %u, transform %u are out of range", path, m, m0,
                      efc, mips);
    if (want && (m != (uint32_t)want->m || efc != (uint32_t)want->ef_construction || mips != (want->mips_transform ? 1u : 0u))) {
        char got[64], asked[64];
        params_text(got, sizeof got, m, efc, mips);
        params_text(asked, sizeof asked, (uint32_t)want->m, (uint32_t)want->ef_construction, want->mips_transform);
        return mf_err(MF_ERR_FORMAT, "%s: built with %s, but %s were asked for", path, got, asked);
    }
    if (size < first_layer_off((int)L)) return mf_err(MF_ERR_FORMAT, "%s: too short for its layer table", path);
    uint64_t off = first_layer_off((int)L), end = off;
    for (uint32_t l = 0; l < L; l++) {
        const uint8_t *e = h + HN_FILE_HEADER + (size_t)l * HN_FILE_ENTRY;
        const uint64_t lo = get64(e), nb = get64(e + 8), n_up = get64(e + 16);
        const uint32_t top = get32(e + 28);
        if (get64(e + 32) || get64(e + 40)) return mf_err(MF_ERR_FORMAT, "%s: layer %u: reserved table bytes are not zero", path, l);
        /* n_up bounded first so the layout's arithmetic cannot overflow */
        if (n_up > (uint64_t)n * HN_MAX_LEVEL * (1 + m) || top > HN_MAX_LEVEL)
            return mf_err(MF_ERR_FORMAT, "%s: layer %u: %" PRIu64 " upper-level slots, top level %u are out of range", path, l, n_up, top);
        const hn_layout o = layout_of(n, m0, n_up);
        if (lo != off || nb != o.bytes || lo > size || nb > size - lo)
            return mf_err(MF_ERR_FORMAT, "%s: layer %u: section [%" PRIu64 ", +%" PRIu64 "] should be [%" PRIu64 ", +%" PRIu64
                          "] inside the file (%" PRIu64 " bytes)", path, l, lo, nb, off, o.bytes, size);
        end = off + o.bytes;
        off = align_up(end, VX_ALIGN);
    }
    if (end != size) return mf_err(MF_ERR_FORMAT, "%s: %" PRIu64 " bytes, the layers end at %" PRIu64, path, size, end);
    for (uint32_t l = 0; l < L; l++) {
        const uint8_t *e = h + HN_FILE_HEADER + (size_t)l * HN_FILE_ENTRY;
        const uint64_t lo = get64(e), prev_end = l ? get64(e - HN_FILE_ENTRY) + get64(e - HN_FILE_ENTRY + 8)
                                                   : HN_FILE_HEADER + (uint64_t)HN_FILE_ENTRY * L;
        for (uint64_t i = prev_end; i < lo; i++)
            if (h[i]) return mf_err(MF_ERR_FORMAT, "%s: padding before layer %u is not zero", path, l);
        mf_status s = check_layer(path, (int)l, h + lo, n, m, m0, get64(e + 16), get32(e + 24), get32(e + 28),
                                  graphs ? &graphs[l] : NULL);
        if (s) return s;
    }
    return MF_OK;
}

static void free_graphs(vx_hnsw **g, int n) {
    for (int l = 0; g && l < n; l++) vx_hnsw_free(g[l]);
    free(g);
}

mf_status mf_vindex_hnsw_load(mf_vindex *v, const char *path, bool *loaded) {
    if (loaded) *loaded = false;
    if (!v->hnsw_on) return mf_err(MF_ERR_INVALID_ARG, "HNSW is not enabled on this vindex");
    char *def = path ? NULL : mf_vindex_hnsw_cache_path(v, NULL);
    if (!path && !(path = def)) return mf_err(MF_ERR_NOMEM, "out of memory");
    struct stat st;
    if (def && stat(def, &st) != 0 && errno == ENOENT) {
        free(def);
        return MF_OK; /* no cache for these parameters: graphs are built on first use */
    }
    const int L = v->ix.n_layer;
    mf_mapfile mf = {0};
    vx_hnsw **g = calloc((size_t)L, sizeof *g);
    char *keep = strdup(path);
    mf_status s = !g || !keep ? mf_err(MF_ERR_NOMEM, "out of memory") : mf_mapfile_open(path, &mf);
    if (!s) s = check_file(v, &mf, path, &v->hnsw_p, g);
    free(def);
    if (s) {
        free_graphs(g, L);
        mf_mapfile_close(&mf);
        free(keep);
        return s;
    }
    /* the graphs built or loaded before go; these point into the new map */
    vx_hnsw_release(v);
    v->hnsw = g, v->hnsw_map = mf, v->hnsw_file = keep;
    if ((s = vx_hnsw_need_graphs(v))) {
        vx_hnsw_release(v);
        return s;
    }
    if (loaded) *loaded = true;
    return MF_OK;
}

/* A file under a default name is what --hnsw with those parameters maps:
 * it must hold them (a name of another form is the user's). False when
 * `path`'s name is of the default form but not the one the header's
 * parameters give; want gets that one. */
static bool name_fits(const char *path, const uint8_t *h, char *want, size_t cap) {
    snprintf(want, cap, "hnsw_m%u_efc%u%s.bin", get32(h + 32), get32(h + 40), get32(h + 44) ? "_mips" : "");
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    unsigned a, b;
    char tail[8];
    return !(sscanf(base, "hnsw_m%u_efc%u%7s", &a, &b, tail) == 3 && strcmp(base, want));
}

mf_status vx_hnsw_file_check(const mf_vindex *v, const char *path) {
    mf_mapfile mf;
    mf_status s = mf_mapfile_open(path, &mf);
    if (s) return s;
    s = check_file(v, &mf, path, NULL, NULL);
    char want[64];
    if (!s && !name_fits(path, mf.data, want, sizeof want)) {
        const uint8_t *h = mf.data;
        s = mf_err(MF_ERR_FORMAT, "%s: holds graphs of M %u, efc %u%s, so --hnsw would look for it as %s", path,
                   get32(h + 32), get32(h + 40), get32(h + 44) ? ", MIPS transform" : "", want);
    }
    mf_mapfile_close(&mf);
    return s;
}

/* ---- listing (verify, `vindex info`, SHOW STATS) ---- */

static bool is_cache_name(const char *n) {
    const size_t len = strlen(n);
    return len > 9 && !strncmp(n, "hnsw_", 5) && !strcmp(n + len - 4, ".bin");
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void vx_free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

mf_status vx_hnsw_cache_names(const char *dir, char ***out, size_t *count) {
    *out = NULL, *count = 0;
    DIR *d = opendir(dir);
    if (!d) return mf_err(MF_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    mf_status s = MF_OK;
    for (struct dirent *e; !s && (e = readdir(d));) {
        if (!is_cache_name(e->d_name)) continue;
        if (n == cap) {
            char **t = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *names);
            if (!t) s = mf_err(MF_ERR_NOMEM, "out of memory");
            else names = t;
        }
        if (!s && !(names[n] = strdup(e->d_name))) s = mf_err(MF_ERR_NOMEM, "out of memory");
        if (!s) n++;
    }
    closedir(d);
    if (s) {
        vx_free_names(names, n);
        return s;
    }
    /* name order, so listings and verify's first error are the same on every file system */
    if (n) qsort(names, n, sizeof *names, cmp_names);
    *out = names, *count = n;
    return MF_OK;
}

/* One cache's header against this vindex: the checks loading makes before
 * the checksum and the links (those need the whole file; verify runs them). */
static void describe_cache(const mf_vindex *v, const char *path, mf_vindex_hnsw_cache *c) {
    const vx_index *ix = &v->ix;
    uint8_t h[HN_FILE_HEADER];
    struct stat st;
    FILE *f = fopen(path, "rb");
    const size_t got = f ? fread(h, 1, sizeof h, f) : 0;
    if (f) fclose(f);
    if (!f || stat(path, &st) != 0) {
        snprintf(c->problem, sizeof c->problem, "cannot read it: %s", strerror(errno));
        return;
    }
    c->bytes = (uint64_t)st.st_size;
    if (got < sizeof h || memcmp(h, hn_magic, 8)) {
        snprintf(c->problem, sizeof c->problem, "not an HNSW cache file (%s)", got < sizeof h ? "too short" : "bad magic");
        return;
    }
    if (get32(h + 8) != HN_FILE_VERSION) {
        snprintf(c->problem, sizeof c->problem, "HNSW cache version %u is not supported (this build reads %d)", get32(h + 8),
                 HN_FILE_VERSION);
        return;
    }
    c->n_layer = (int32_t)get32(h + 16), c->n_features = (int32_t)get32(h + 20);
    c->m = (int32_t)get32(h + 32), c->ef_construction = (int32_t)get32(h + 40), c->mips_transform = get32(h + 44) != 0;
    char hs[65];
    memcpy(hs, h + 56, 64), hs[64] = 0;
    c->gates_match = get64(h + 48) == ix->files[VX_GATE].size && !strcmp(hs, ix->files[VX_GATE].sha256);
    char want[64];
    if (get64(h + 120) != c->bytes)
        snprintf(c->problem, sizeof c->problem, "%" PRIu64 " bytes, the header says %" PRIu64 " (truncated or extended)",
                 c->bytes, get64(h + 120));
    else if (get32(h + 12) != HN_ALGO)
        snprintf(c->problem, sizeof c->problem, "made by another version of the HNSW build (%u; this minfer builds %d)",
                 get32(h + 12), HN_ALGO);
    else if (c->n_layer != ix->n_layer || c->n_features != ix->n_features || get32(h + 24) != (uint32_t)ix->n_embd ||
             get32(h + 28) != (uint32_t)ix->ftype)
        snprintf(c->problem, sizeof c->problem, "built for %d layers x %d features of %u (type %u), this vindex has %d x %d of %d (%s)",
                 c->n_layer, c->n_features, get32(h + 24), get32(h + 28), ix->n_layer, ix->n_features, ix->n_embd,
                 mf_type_name(ix->ftype));
    else if (!c->gates_match)
        snprintf(c->problem, sizeof c->problem, "built for other gate vectors (sha256 %.16s...): stale, rebuild it with `minfer vindex hnsw`",
                 hs);
    else if (!name_fits(path, h, want, sizeof want))
        snprintf(c->problem, sizeof c->problem, "named for other parameters than it holds (--hnsw looks for it as %s)", want);
}

mf_status mf_vindex_hnsw_caches(const mf_vindex *v, mf_vindex_hnsw_cache **out, int32_t *count) {
    *out = NULL, *count = 0;
    char **names;
    size_t n;
    mf_status s = vx_hnsw_cache_names(v->dir, &names, &n);
    if (s || !n) return s;
    mf_vindex_hnsw_cache *c = calloc(n, sizeof *c);
    if (!c) {
        vx_free_names(names, n);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(c[i].name, sizeof c[i].name, "%s", names[i]);
        char *p = vx_path(v->dir, names[i]);
        if (!p) {
            free(c), vx_free_names(names, n);
            return mf_err(MF_ERR_NOMEM, "out of memory");
        }
        describe_cache(v, p, &c[i]);
        free(p);
    }
    vx_free_names(names, n);
    *out = c, *count = (int32_t)n;
    return MF_OK;
}

void mf_vindex_hnsw_cache_text(const mf_vindex_hnsw_cache *c, char *buf, size_t cap) {
    const double mib = (double)c->bytes / (1 << 20);
    int w;
    if (!c->m) /* the header could not be read: only the name and size are known */
        w = snprintf(buf, cap, "%s: %" PRIu64 " bytes (%.2f MiB)", c->name, c->bytes, mib);
    else
        w = snprintf(buf, cap, "%s: M %d, efc %d%s, %d layers x %d features, %" PRIu64 " bytes (%.2f MiB), gate_vectors.bin sha256 %s",
                     c->name, (int)c->m, (int)c->ef_construction, c->mips_transform ? ", MIPS transform" : "", (int)c->n_layer,
                     (int)c->n_features, c->bytes, mib, c->gates_match ? "matches" : "differs");
    if (c->problem[0] && w >= 0 && (size_t)w < cap)
        snprintf(buf + w, cap - (size_t)w, "; unusable: %s", c->problem);
}
