/* test_vindex_hnsw_cache.c - the HNSW graph cache (src/vindex/hnsw_file.c):
 * answers through a loaded graph equal a freshly built graph's (ids and
 * scores, f32, f16 and q8_0, the gate score and the walk's |activation|
 * key, before and after a deletion, at a beam small enough that the graph's
 * shape decides the answer); the saved bytes are the same for 1 and 3
 * threads and when a loaded graph is saved again; a truncated, bit-flipped,
 * foreign (other gates, other shape, other parameters, other build
 * version) or hostile (checksum fixed up, structure broken) file is refused
 * with its message and the path, and leaves the vindex as it was; the
 * listing `vindex info` prints reads each cache's header back and names
 * the stale, truncated, foreign and misnamed ones. */
#include "testutil.h"
#include "minfer.h"
#include "rand_vindex.h"
#include "vindex/hnsw_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void gauss(float *x, int n, uint64_t *s) {
    for (int i = 0; i < n; i++)
        x[i] = (float)(sqrt(-2 * log(rv_uniform(s) + 1e-300)) * cos(6.283185307179586 * rv_uniform(s)));
}

static char g_tmp[256];

static mf_vindex *open_dir(const char *dir) {
    mf_vindex *v = NULL;
    CHECK(mf_vindex_open(dir, &v) == MF_OK, "open %s: %s", dir, mf_last_error());
    return v;
}

static mf_vindex *make(const char *name, int L, int F, int E, const char *type, uint64_t seed, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", g_tmp, name);
    CHECK(rand_vindex_write(dir, L, F, E, type, seed, 0.5) == 0, "cannot write %s", dir);
    return open_dir(dir);
}

static mf_vindex_hnsw_params params(int m, int ef, int efc) {
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    p.m = m, p.ef = ef, p.ef_construction = efc;
    return p;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) == (size_t)len) *n = (size_t)len;
    fclose(f);
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

/* the checksum as the file defines it, so hostile edits can pass it */
static void fix_checksum(uint8_t *b, size_t n) {
    memset(b + HN_OFF_CKSUM, 0, 8);
    vx_cksum c;
    vx_cksum_init(&c);
    vx_cksum_update(&c, b, n);
    const uint64_t x = vx_cksum_final(&c);
    memcpy(b + HN_OFF_CKSUM, &x, 8);
}

/* every layer's answers for nq queries: gate score, then the |silu| key */
static void answers(mf_vindex *v, int L, const float *x, int nq, int k, int32_t *f, float *s) {
    for (int l = 0; l < L; l++)
        for (int r = 0; r < 2; r++) {
            const size_t o = ((size_t)l * 2 + r) * nq * k;
            const mf_status st = r ? vx_knn(v, l, x, nq, k, VX_RANK_SILU_ABS, NULL, f + o, s + o)
                                   : mf_vindex_knn(v, l, x, nq, k, f + o, s + o);
            CHECK(st == MF_OK, "knn layer %d rank %d: %s", l, r, mf_last_error());
        }
}

static void test_same_answers(void) {
    static const char *types[3] = {"f32", "f16", "q8_0"};
    const int L = 2, F = 1200, E = 64, nq = 24, k = 10;
    const size_t na = (size_t)L * 2 * nq * k;
    for (int it = 0; it < 3; it++) {
        char dir[512];
        mf_vindex *v = make(types[it], L, F, E, types[it], 31 + it, dir, sizeof dir);
        if (!v) continue;
        float *x = malloc((size_t)nq * E * sizeof *x), *sa = malloc(na * sizeof *sa), *sb = malloc(na * sizeof *sb);
        int32_t *fa = malloc(na * sizeof *fa), *fb = malloc(na * sizeof *fb);
        uint64_t rs = 3 + it;
        gauss(x, nq * E, &rs);
        /* ef 16 for 1200 rows: approximate, so a different graph would answer differently */
        mf_vindex_hnsw_params p = params(8, 16, 32);
        CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK, "set_hnsw: %s", mf_last_error());
        answers(v, L, x, nq, k, fa, sa);
        CHECK(mf_vindex_hnsw_save(v, NULL) == MF_OK, "%s: save: %s", types[it], mf_last_error());
        /* a second vindex on the directory maps the file */
        mf_vindex *w = open_dir(dir);
        if (!w) continue;
        bool loaded = false;
        CHECK(mf_vindex_set_hnsw(w, &p) == MF_OK && mf_vindex_hnsw_load(w, NULL, &loaded) == MF_OK && loaded,
              "%s: load: %s", types[it], mf_last_error());
        mf_vindex_hnsw_stats st;
        CHECK(mf_vindex_hnsw_get_stats(w, 1, &st) == MF_OK && st.loaded && st.build_ms == 0 && st.n_links > F,
              "%s: stats of the loaded graph: loaded %d, %lld links", types[it], st.loaded, (long long)st.n_links);
        answers(w, L, x, nq, k, fb, sb);
        CHECK(!memcmp(fa, fb, na * sizeof *fa) && !memcmp(sa, sb, na * sizeof *sa),
              "%s: answers through the loaded graph differ from the built graph's", types[it]);
        /* brute force differs at this beam (else the comparison above proves nothing) */
        mf_vindex *bf = open_dir(dir);
        answers(bf, L, x, nq, k, fb, sb);
        CHECK(memcmp(fa, fb, na * sizeof *fa) != 0, "%s: HNSW at ef 16 equals brute force: the test is too easy", types[it]);
        mf_vindex_free(bf);
        /* deletions: the best of layer 0, query 0 and of layer 1, query 3 are walked through, never returned */
        const int32_t d0 = fa[0], d1 = fa[(size_t)2 * nq * k + 3 * k];
        for (int i = 0; i < 2; i++) {
            mf_vindex *u = i ? w : v;
            CHECK(mf_vindex_delete_feature(u, 0, d0) == MF_OK && mf_vindex_delete_feature(u, 1, d1) == MF_OK,
                  "delete: %s", mf_last_error());
        }
        answers(v, L, x, nq, k, fa, sa);
        answers(w, L, x, nq, k, fb, sb);
        CHECK(!memcmp(fa, fb, na * sizeof *fa) && !memcmp(sa, sb, na * sizeof *sa),
              "%s: after deletions the loaded graph's answers differ", types[it]);
        for (size_t i = 0; i < (size_t)2 * nq * k; i++) CHECK(fb[i] != d0, "%s: deleted feature %d returned", types[it], d0);
        for (size_t i = (size_t)2 * nq * k; i < na; i++) CHECK(fb[i] != d1, "%s: deleted feature %d returned", types[it], d1);
        /* a changed beam keeps the mapped graphs */
        mf_vindex_hnsw_params p2 = params(8, 40, 32);
        CHECK(mf_vindex_set_hnsw(w, &p2) == MF_OK && mf_vindex_hnsw_get_stats(w, 0, &st) == MF_OK && st.loaded,
              "%s: a new ef dropped the loaded graphs", types[it]);
        free(x), free(sa), free(sb), free(fa), free(fb);
        mf_vindex_free(w);
        mf_vindex_free(v);
    }
}

static void test_bytes(void) {
    const int L = 3, F = 1500, E = 64;
    char dir[512], a[600], b[600], c[600];
    mf_vindex *v = make("bytes", L, F, E, "f16", 77, dir, sizeof dir);
    if (!v) return;
    snprintf(a, sizeof a, "%s/t1.bin", g_tmp), snprintf(b, sizeof b, "%s/t3.bin", g_tmp), snprintf(c, sizeof c, "%s/again.bin", g_tmp);
    mf_vindex_hnsw_params p = params(10, 16, 40);
    /* 1 thread: layer by layer; 3 threads: layers one per thread */
    mf_vindex_set_threads(v, 1);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK && mf_vindex_hnsw_save(v, a) == MF_OK, "save 1 thread: %s", mf_last_error());
    mf_vindex_free(v);
    v = open_dir(dir);
    mf_vindex_set_threads(v, 3);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK && mf_vindex_hnsw_save(v, b) == MF_OK, "save 3 threads: %s", mf_last_error());
    /* the loaded graph saved again */
    bool loaded = false;
    CHECK(mf_vindex_hnsw_load(v, a, &loaded) == MF_OK && loaded && mf_vindex_hnsw_save(v, c) == MF_OK,
          "load and save again: %s", mf_last_error());
    size_t na, nb, nc;
    uint8_t *ba = slurp(a, &na), *bb = slurp(b, &nb), *bc = slurp(c, &nc);
    CHECK(na > 4096 && na == nb && na == nc, "sizes %zu, %zu, %zu", na, nb, nc);
    CHECK(ba && bb && bc && !memcmp(ba, bb, na), "the file saved on 3 threads differs from the one saved on 1");
    CHECK(ba && bc && !memcmp(ba, bc, na), "a loaded graph saved again differs from the file it came from");
    free(ba), free(bb), free(bc);
    mf_vindex_free(v);
}

/* refused with MF_ERR_FORMAT or UNSUPPORTED, the message naming the file and holding `want` */
static void expect_refused(mf_vindex *v, const char *path, const char *want, const char *what) {
    bool loaded = true;
    const mf_status s = mf_vindex_hnsw_load(v, path, &loaded);
    const char *m = mf_last_error();
    CHECK((s == MF_ERR_FORMAT || s == MF_ERR_UNSUPPORTED) && !loaded && strstr(m, path) && strstr(m, want),
          "%s: status %d, message '%s' (want '%s' and the path)", what, s, m, want);
}

static void test_refused(void) {
    const int L = 2, F = 300, E = 32;
    char dir[512], other[512], shape[512], good[600], bad[600];
    mf_vindex *v = make("refused", L, F, E, "f32", 5, dir, sizeof dir);
    mf_vindex *o = make("other", L, F, E, "f32", 6, other, sizeof other);
    mf_vindex *sh = make("shape", L, F + 1, E, "f32", 5, shape, sizeof shape);
    if (!v || !o || !sh) return;
    snprintf(good, sizeof good, "%s/hnsw_m6_efc24.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", g_tmp);
    mf_vindex_hnsw_params p = params(6, 12, 24);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK && mf_vindex_hnsw_save(v, NULL) == MF_OK, "save: %s", mf_last_error());
    const float x[32] = {1, -2, 3, 0.5f};
    int32_t f0[10], f1[10];
    float s0[10], s1[10];
    CHECK(mf_vindex_knn(v, 1, x, 1, 10, f0, s0) == MF_OK, "knn before");
    size_t n;
    uint8_t *b = slurp(good, &n), *t = malloc(n);
    CHECK(b && n > 1024, "read %s", good);
    if (!b || !t) return;

    /* truncated */
    const size_t cuts[] = {n - 1, n / 2, 300, 100, 0};
    for (int i = 0; i < 5; i++) {
        spit(bad, b, cuts[i]);
        expect_refused(v, bad, cuts[i] >= 256 ? "truncated" : "not an HNSW cache file", "truncated");
    }
    /* one bit flipped: in the header, the table, the levels, the links, the last byte */
    const size_t flips[] = {20, 40, 130, 256 + 3, 512 + 7, n / 2, n - 1};
    for (int i = 0; i < 7; i++) {
        memcpy(t, b, n);
        t[flips[i]] ^= 0x10;
        spit(bad, t, n);
        expect_refused(v, bad, "checksum mismatch", "bit flip");
    }
    /* other parameters: the file asked for by path while M 8 / efc 30 are set */
    mf_vindex_hnsw_params q = params(8, 12, 24);
    CHECK(mf_vindex_set_hnsw(v, &q) == MF_OK, "set M 8");
    expect_refused(v, good, "built with M 6, efc 24, but M 8, efc 24 were asked for", "other M");
    q = params(6, 12, 30);
    CHECK(mf_vindex_set_hnsw(v, &q) == MF_OK, "set efc 30");
    expect_refused(v, good, "built with M 6, efc 24, but M 6, efc 30 were asked for", "other efc");
    /* no file under the default name of these parameters: not an error, nothing loaded */
    bool loaded = true;
    CHECK(mf_vindex_hnsw_load(v, NULL, &loaded) == MF_OK && !loaded, "absent default cache: %s", mf_last_error());
    snprintf(bad, sizeof bad, "%s/absent.bin", g_tmp);
    CHECK(mf_vindex_hnsw_load(v, bad, &loaded) == MF_ERR_IO && strstr(mf_last_error(), bad), "absent named file accepted");
    snprintf(bad, sizeof bad, "%s/bad.bin", g_tmp);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK, "set back");
    /* other gate vectors (same shape), another shape */
    CHECK(mf_vindex_set_hnsw(o, &p) == MF_OK && mf_vindex_set_hnsw(sh, &p) == MF_OK, "set others");
    expect_refused(o, good, "built for other gate vectors", "other gates");
    expect_refused(sh, good, "built for 2 layers x 300 features", "other shape");
    /* another build version, checksum fixed up */
    memcpy(t, b, n);
    t[12] ^= 0x7;
    fix_checksum(t, n);
    spit(bad, t, n);
    expect_refused(v, bad, "another version of the HNSW build", "build version");
    /* hostile structure with a valid checksum: layer 0's arrays */
    uint64_t off;
    memcpy(&off, b + HN_FILE_HEADER, 8);
    const size_t lv = off, uo = off + (F + 7) / 8 * 8, l0 = uo + 8 * (size_t)F;
    struct {
        size_t at;
        int32_t val;
        int width;
        const char *want;
    } edits[] = {
        {l0 + 4, F, 4, "links to 300 at level 0"},                 /* node 0's first link out of range */
        {l0 + 4, -1, 4, "links to -1 at level 0"},
        {l0, 13, 4, "has 13 links at level 0 (at most 12)"},       /* a count past m0 */
        {l0 + 4 * 13 * 5 + 4 * 12, 7, 4, "unused link slots are not zero"}, /* node 5's last slot (if unused) */
        {lv + 3, 16, 1, "has level 16"},
        {uo + 8 * 4, 123456, 4, "upper-level offset"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        memcpy(t, b, n);
        if (edits[i].width == 1) t[edits[i].at] = (uint8_t)edits[i].val;
        else {
            int32_t cnt;
            memcpy(&cnt, t + l0 + 4 * 13 * 5, 4);
            if (i == 3 && cnt == 12) continue; /* node 5's list is full: no unused slot to spoil */
            memcpy(t + edits[i].at, &edits[i].val, 4);
        }
        fix_checksum(t, n);
        spit(bad, t, n);
        expect_refused(v, bad, edits[i].want, edits[i].want);
    }
    /* a table entry moved: the section must be where the counts put it */
    memcpy(t, b, n);
    t[HN_FILE_HEADER + HN_FILE_ENTRY] += 64;
    fix_checksum(t, n);
    spit(bad, t, n);
    expect_refused(v, bad, "layer 1: section", "moved section");
    /* every refusal left the vindex as it was: the graph built before, not a loaded one */
    mf_vindex_hnsw_stats st;
    CHECK(mf_vindex_hnsw_get_stats(v, 1, &st) == MF_OK && !st.loaded, "a refused file was loaded");
    CHECK(mf_vindex_knn(v, 1, x, 1, 10, f1, s1) == MF_OK && !memcmp(f0, f1, sizeof f0) && !memcmp(s0, s1, sizeof s0),
          "answers changed after refused loads");
    /* the good file still loads; verify's check refuses it under another default name */
    CHECK(mf_vindex_hnsw_load(v, good, &loaded) == MF_OK && loaded, "good file: %s", mf_last_error());
    CHECK(vx_hnsw_file_check(v, good) == MF_OK, "file check of the good file: %s", mf_last_error());
    snprintf(bad, sizeof bad, "%s/hnsw_m16_efc128.bin", g_tmp);
    spit(bad, b, n);
    CHECK(vx_hnsw_file_check(v, bad) == MF_ERR_FORMAT && strstr(mf_last_error(), "would look for it as hnsw_m6_efc24.bin"),
          "a file of M 6 named for M 16: %s", mf_last_error());
    free(b), free(t);
    mf_vindex_free(v), mf_vindex_free(o), mf_vindex_free(sh);
}

static void test_checksum(void) {
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 7 + 3);
    vx_cksum a;
    vx_cksum_init(&a);
    vx_cksum_update(&a, buf, sizeof buf);
    const uint64_t whole = vx_cksum_final(&a);
    /* pieces of any size give the same sum */
    const size_t cuts[] = {1, 5, 31, 32, 33, 64, 999};
    for (int i = 0; i < 7; i++) {
        vx_cksum c;
        vx_cksum_init(&c);
        for (size_t o = 0; o < sizeof buf; o += cuts[i])
            vx_cksum_update(&c, buf + o, o + cuts[i] <= sizeof buf ? cuts[i] : sizeof buf - o);
        CHECK(vx_cksum_final(&c) == whole, "checksum in pieces of %zu differs", cuts[i]);
    }
    /* a trailing zero byte and every single bit flip change it */
    vx_cksum_init(&a);
    vx_cksum_update(&a, buf, 999);
    CHECK(vx_cksum_final(&a) != whole || buf[999] != 0, "length not in the sum");
    for (int bit = 0; bit < 8 * 1000; bit += 37) {
        buf[bit / 8] ^= (uint8_t)(1 << (bit % 8));
        vx_cksum_init(&a);
        vx_cksum_update(&a, buf, sizeof buf);
        CHECK(vx_cksum_final(&a) != whole, "bit %d flipped, same checksum", bit);
        buf[bit / 8] ^= (uint8_t)(1 << (bit % 8));
    }
}

/* find a listed cache by name */
static const mf_vindex_hnsw_cache *find_cache(const mf_vindex_hnsw_cache *c, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(c[i].name, name)) return &c[i];
    return NULL;
}

/* The listing `vindex info` and SHOW STATS print: each cache's header read
 * back (parameters, shape, size), and whether it fits these gates. */
static void test_listing(void) {
    const int L = 3, F = 400, E = 32;
    char dir[512], other[512], path[700];
    mf_vindex *v = make("listing", L, F, E, "f16", 21, dir, sizeof dir);
    mf_vindex *o = make("listing_other", L, F, E, "f16", 22, other, sizeof other);
    if (!v || !o) return;
    mf_vindex_hnsw_cache *c = NULL;
    int32_t n = -1;
    CHECK(mf_vindex_hnsw_caches(v, &c, &n) == MF_OK && n == 0 && !c, "no caches yet: %d listed", n);
    mf_vindex_hnsw_params p = params(6, 12, 24), q = params(4, 12, 16);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK && mf_vindex_hnsw_save(v, NULL) == MF_OK, "save M 6: %s", mf_last_error());
    CHECK(mf_vindex_set_hnsw(v, &q) == MF_OK && mf_vindex_hnsw_save(v, NULL) == MF_OK, "save M 4: %s", mf_last_error());
    /* the other vindex's graphs under a name of this one: same shape, other gates */
    snprintf(path, sizeof path, "%s/hnsw_stale.bin", dir);
    CHECK(mf_vindex_set_hnsw(o, &p) == MF_OK && mf_vindex_hnsw_save(o, path) == MF_OK, "save other: %s", mf_last_error());
    /* a truncated copy, a file too short to have a header, a name that is no cache's */
    size_t nb;
    snprintf(path, sizeof path, "%s/hnsw_m6_efc24.bin", dir);
    uint8_t *b = slurp(path, &nb);
    CHECK(b && nb > 1024, "read %s", path);
    if (!b) return;
    snprintf(path, sizeof path, "%s/hnsw_cut.bin", dir), spit(path, b, nb - 8);
    snprintf(path, sizeof path, "%s/hnsw_tiny.bin", dir), spit(path, b, 100);
    snprintf(path, sizeof path, "%s/hnsw_m6_efc24.txt", dir), spit(path, b, nb);
    CHECK(mf_vindex_hnsw_caches(v, &c, &n) == MF_OK && n == 5, "5 caches listed, got %d", n);
    if (n != 5) return;
    static const char *order[5] = {"hnsw_cut.bin", "hnsw_m4_efc16.bin", "hnsw_m6_efc24.bin", "hnsw_stale.bin", "hnsw_tiny.bin"};
    for (int i = 0; i < 5; i++) CHECK(!strcmp(c[i].name, order[i]), "listing %d: '%s', want '%s'", i, c[i].name, order[i]);
    const mf_vindex_hnsw_cache *a = find_cache(c, n, "hnsw_m6_efc24.bin"), *a4 = find_cache(c, n, "hnsw_m4_efc16.bin");
    const mf_vindex_hnsw_cache *st = find_cache(c, n, "hnsw_stale.bin"), *cut = find_cache(c, n, "hnsw_cut.bin");
    const mf_vindex_hnsw_cache *tiny = find_cache(c, n, "hnsw_tiny.bin");
    CHECK(a->m == 6 && a->ef_construction == 24 && !a->mips_transform && a->n_layer == L && a->n_features == F &&
              a->bytes == nb && a->gates_match && !a->problem[0],
          "M 6: m %d efc %d layers %d features %d bytes %llu match %d problem '%s'", a->m, a->ef_construction, a->n_layer,
          a->n_features, (unsigned long long)a->bytes, a->gates_match, a->problem);
    CHECK(a4->m == 4 && a4->ef_construction == 16 && a4->gates_match && !a4->problem[0] && a4->bytes < nb,
          "M 4: m %d efc %d match %d bytes %llu problem '%s'", a4->m, a4->ef_construction, a4->gates_match,
          (unsigned long long)a4->bytes, a4->problem);
    CHECK(st->m == 6 && st->n_features == F && !st->gates_match && strstr(st->problem, "built for other gate vectors") &&
              strstr(st->problem, "minfer vindex hnsw"),
          "stale: match %d problem '%s'", st->gates_match, st->problem);
    CHECK(cut->m == 6 && cut->gates_match && cut->bytes == nb - 8 && strstr(cut->problem, "the header says") &&
              strstr(cut->problem, "truncated"),
          "truncated: problem '%s'", cut->problem);
    CHECK(tiny->m == 0 && tiny->bytes == 100 && !strcmp(tiny->problem, "not an HNSW cache file (too short)"),
          "tiny: m %d problem '%s'", tiny->m, tiny->problem);
    /* the line `vindex info` prints */
    char line[512], want[512];
    mf_vindex_hnsw_cache_text(a, line, sizeof line);
    snprintf(want, sizeof want,
             "hnsw_m6_efc24.bin: M 6, efc 24, 3 layers x 400 features, %zu bytes (%.2f MiB), gate_vectors.bin sha256 matches", nb,
             (double)nb / (1 << 20));
    CHECK(!strcmp(line, want), "text '%s', want '%s'", line, want);
    mf_vindex_hnsw_cache_text(tiny, line, sizeof line);
    CHECK(!strcmp(line, "hnsw_tiny.bin: 100 bytes (0.00 MiB); unusable: not an HNSW cache file (too short)"),
          "tiny text '%s'", line);
    mf_vindex_hnsw_cache_text(st, line, 40); /* cut short, still terminated */
    CHECK(strlen(line) == 39 && !strncmp(line, "hnsw_stale.bin: M 6", 19), "short buffer: '%s'", line);
    /* a file of M 6 under M 16's name: the header fits, the name does not */
    snprintf(path, sizeof path, "%s/hnsw_m16_efc128.bin", dir), spit(path, b, nb);
    free(c);
    CHECK(mf_vindex_hnsw_caches(v, &c, &n) == MF_OK && n == 6, "6 caches listed, got %d", n);
    const mf_vindex_hnsw_cache *mis = c ? find_cache(c, n, "hnsw_m16_efc128.bin") : NULL;
    CHECK(mis && mis->m == 6 && mis->gates_match && strstr(mis->problem, "--hnsw looks for it as hnsw_m6_efc24.bin"),
          "misnamed: '%s'", mis ? mis->problem : "(not listed)");
    free(c), free(b);
    mf_vindex_free(v), mf_vindex_free(o);
}

int main(void) {
    char cmd[512];
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_vindex_hnsw_cache.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", g_tmp);
    if (system(cmd) != 0) return 1;
    test_checksum();
    test_same_answers();
    test_bytes();
    test_refused();
    test_listing();
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", g_tmp);
    return test_summary("test_vindex_hnsw_cache");
}
