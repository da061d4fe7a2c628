/* test_vindex_hostile.c - damaged and foreign vindex directories are refused
 * with a message naming the file, never a crash (also under ASan + UBSan):
 * every file truncated, missing or altered by one byte (open checks sizes,
 * verify checks sha256s), index.json mutated field by field (types, ranges,
 * sections out of bounds or misaligned, unknown and duplicated files, wrong
 * format and version), cut short at many lengths and byte-flipped at
 * random; .vlp patches of another model, with unknown or out-of-range
 * operations, or malformed, refused without changing anything, a good one
 * round-trips; a browse vindex has no model to load; an empty directory and a
 * plain file are not vindexes. */
#include "testutil.h"
#include "minfer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[512];

static const char *files[] = {"gate_vectors.bin", "down_features.bin", "down_meta.bin", "embeddings.bin",
                              "tokenizer.gguf", "index.json"};

static char *path(const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static void put(const char *name, const void *data, size_t n) {
    FILE *f = fopen(path(name), "wb");
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* open refused, with the message naming `want` */
static void expect_refused(const char *what, const char *want) {
    mf_vindex *v = NULL;
    mf_status s = mf_vindex_open(g_dir, &v);
    CHECK(s != MF_OK && v == NULL, "%s: accepted", what);
    if (s != MF_OK) CHECK(strstr(mf_last_error(), want) != NULL, "%s: message '%s' does not name %s", what, mf_last_error(), want);
    mf_vindex_free(v);
}

typedef void (*mutate_fn)(json_t *root);
static void m_format(json_t *r) { json_object_set_new(r, "format", json_string("gguf")); }
static void m_version(json_t *r) { json_object_set_new(r, "version", json_integer(99)); }
static void m_version_str(json_t *r) { json_object_set_new(r, "version", json_string("1")); }
static void m_level(json_t *r) { json_object_set_new(r, "level", json_string("everything")); }
static void m_layers(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_layer", json_integer(6)); }
static void m_layers_big(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_layer", json_integer(1 << 30)); }
static void m_embd(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_embd", json_integer(65)); }
static void m_embd_neg(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_embd", json_integer(-64)); }
static void m_vocab(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_vocab", json_integer(513)); }
static void m_ffn(json_t *r) { json_object_set_new(json_object_get(r, "model"), "ffn", json_string("relu")); }
static void m_gated(json_t *r) { json_object_set_new(json_object_get(r, "model"), "gated", json_integer(1)); }
static void m_experts(json_t *r) { json_object_set_new(json_object_get(r, "model"), "n_expert", json_integer(4)); }
static void m_etype(json_t *r) { json_object_set_new(json_object_get(r, "model"), "embedding_type", json_string("q9_9")); }
static void m_perlayer(json_t *r) { json_object_set_new(json_object_get(r, "features"), "per_layer", json_integer(171)); }
static void m_ftype(json_t *r) { json_object_set_new(json_object_get(r, "features"), "type", json_string("q4_0")); }
static void m_topk(json_t *r) { json_object_set_new(json_object_get(r, "features"), "down_top_k", json_integer(11)); }
static void m_topk_neg(json_t *r) { json_object_set_new(json_object_get(r, "features"), "down_top_k", json_integer(-1)); }
static void m_sha(json_t *r) { json_object_set_new(json_object_get(r, "source"), "sha256", json_string("zz")); }
static void m_fsha(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "files"), 0), "sha256", json_string("00")); }
static void m_fname(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "files"), 0), "name", json_string("../../etc/passwd")); }
static void m_fsize(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "files"), 0), "size", json_integer(1)); }
static void m_fdup(json_t *r) {
    json_t *f = json_object_get(r, "files");
    json_array_append(f, json_array_get(f, 0));
}
static void m_fdrop(json_t *r) { json_array_remove(json_object_get(r, "files"), 0); }
static void m_nolayers(json_t *r) { json_object_del(r, "layers"); }
static void m_layer_idx(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "layers"), 1), "layer", json_integer(0)); }
static json_t *sect(json_t *r) { return json_object_get(json_array_get(json_object_get(r, "layers"), 2), "gate_vectors.bin"); }
static void m_off_mis(json_t *r) { json_array_set_new(sect(r), 0, json_integer(json_integer_value(json_array_get(sect(r), 0)) + 4)); }
static void m_off_far(json_t *r) { json_array_set_new(sect(r), 0, json_integer(1ll << 40)); }
static void m_off_neg(json_t *r) { json_array_set_new(sect(r), 0, json_integer(-64)); }
static void m_bytes(json_t *r) { json_array_set_new(sect(r), 1, json_integer(json_integer_value(json_array_get(sect(r), 1)) - 4)); }
static void m_sect_str(json_t *r) { json_object_set_new(json_array_get(json_object_get(r, "layers"), 2), "gate_vectors.bin", json_string("0")); }
static void m_sect_extra(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "layers"), 0), "up_features.bin", json_pack("[ii]", 0, 64));
}
static void m_array(json_t *r) { (void)r; }

static const struct {
    const char *name;
    mutate_fn fn;
    const char *want;
} g_mut[] = {
    {"format", m_format, "not a minfer vindex"},     {"version", m_version, "version 99"},
    {"version type", m_version_str, "version"},      {"level", m_level, "level"},
    {"n_layer", m_layers, "layers"},                 {"n_layer huge", m_layers_big, "n_layer"},
    {"n_embd", m_embd, "index.json"},                {"n_embd negative", m_embd_neg, "n_embd"},
    {"n_vocab", m_vocab, "embeddings.bin"},          {"ffn", m_ffn, "ffn"},
    {"gated type", m_gated, "gated"},                {"n_expert", m_experts, "features per layer"},
    {"embedding type", m_etype, "embedding type"},   {"per_layer", m_perlayer, "features per layer"},
    {"feature type", m_ftype, "feature type"},       {"down_top_k", m_topk, "down_meta.bin"},
    {"down_top_k negative", m_topk_neg, "down_top_k"}, {"source sha256", m_sha, "sha256"},
    {"file sha256", m_fsha, "sha256"},               {"file name", m_fname, "unknown file"},
    {"file size", m_fsize, "index.json"},            {"file listed twice", m_fdup, "twice"},
    {"file not listed", m_fdrop, "not listed"},      {"no layers", m_nolayers, "layers"},
    {"layer index", m_layer_idx, "layer"},           {"misaligned section", m_off_mis, "gate_vectors.bin"},
    {"section past the end", m_off_far, "gate_vectors.bin"}, {"negative offset", m_off_neg, "gate_vectors.bin"},
    {"short section", m_bytes, "gate_vectors.bin"},  {"section type", m_sect_str, "gate_vectors.bin"},
    {"section of an unlisted file", m_sect_extra, "up_features.bin"}, {"unchanged", m_array, NULL},
};

int main(void) {
    char tmp[256], cmd[600];
    snprintf(tmp, sizeof tmp, "/tmp/test_vindex_hostile.%d", (int)getpid());
    snprintf(g_dir, sizeof g_dir, "%s/vx", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmp);
    if (system(cmd) != 0) return 1;
    mf_vindex_build_params bp = mf_vindex_default_build_params();
    bp.n_threads = 2;
    if (mf_vindex_build("../shared/models/stories260K.gguf", g_dir, &bp)) {
        CHECK(0, "build: %s", mf_last_error());
        return test_summary("test_vindex_hostile");
    }
    CHECK(mf_vindex_verify(g_dir, NULL, NULL) == MF_OK, "the good vindex fails verify: %s", mf_last_error());

    /* every file: missing, truncated, one byte altered */
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t n;
        uint8_t *orig = test_read_file(path(files[i]), &n);
        if (!orig) continue;
        unlink(path(files[i]));
        expect_refused(files[i], files[i]);
        put(files[i], orig, n - 2); /* index.json ends in a newline: cut into the JSON */
        expect_refused(files[i], files[i]);
        put(files[i], orig, n);
        if (strcmp(files[i], "index.json")) {
            uint8_t *alt = malloc(n);
            memcpy(alt, orig, n);
            alt[n / 2] ^= 0x10;
            put(files[i], alt, n);
            mf_vindex *v;
            CHECK(mf_vindex_open(g_dir, &v) == MF_OK, "%s: one altered byte refused by open (size is right)", files[i]);
            mf_vindex_free(v);
            CHECK(mf_vindex_verify(g_dir, NULL, NULL) != MF_OK && strstr(mf_last_error(), files[i]) &&
                      strstr(mf_last_error(), "sha256"),
                  "%s: altered byte not caught by verify (%s)", files[i], mf_last_error());
            free(alt);
        }
        put(files[i], orig, n);
        free(orig);
    }

    /* index.json field by field */
    size_t n;
    char *js = test_read_file(path("index.json"), &n);
    if (!js) return test_summary("test_vindex_hostile");
    for (size_t i = 0; i < sizeof g_mut / sizeof g_mut[0]; i++) {
        json_t *root = json_loadb(js, n, 0, NULL);
        g_mut[i].fn(root);
        char *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        put("index.json", out, strlen(out));
        if (g_mut[i].want) {
            expect_refused(g_mut[i].name, g_mut[i].want);
        } else {
            mf_vindex *v;
            CHECK(mf_vindex_open(g_dir, &v) == MF_OK, "re-serialised index refused: %s", mf_last_error());
            mf_vindex_free(v);
        }
        free(out);
        json_decref(root);
    }
    /* cut short: a JSON error with its position, or a missing field */
    for (size_t cut = 0; cut < n; cut += 37) {
        put("index.json", js, cut);
        expect_refused("truncated index.json", "index.json");
    }
    put("index.json", js, 200);
    mf_vindex *v = NULL;
    CHECK(mf_vindex_open(g_dir, &v) != MF_OK && strstr(mf_last_error(), "line"), "a JSON error names no line: %s",
          mf_last_error());
    /* random byte flips: refused or (rarely) still valid, never a crash */
    uint64_t rng = 12345;
    char *alt = malloc(n);
    for (int it = 0; it < 400; it++) {
        memcpy(alt, js, n);
        for (int k = 0; k < 1 + it % 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            alt[(rng >> 33) % n] = (char)(rng >> 20);
        }
        put("index.json", alt, n);
        v = NULL;
        if (mf_vindex_open(g_dir, &v) == MF_OK) mf_vindex_free(v);
        else CHECK(mf_last_error()[0] != 0, "a refusal without a message");
    }
    free(alt);
    put("index.json", js, n);
    free(js);

    /* patches: a good one round-trips and hides its features from the KNN;
     * bad ones are refused and change nothing */
    {
        mf_vindex *pv;
        if (mf_vindex_open(g_dir, &pv) == MF_OK) {
            float x[64];
            for (int e = 0; e < 64; e++) x[e] = (float)(e % 7) - 3.0f;
            int32_t f[172], f2[172];
            float sc[172];
            mf_vindex_knn(pv, 2, x, 1, 172, f, sc);
            CHECK(mf_vindex_delete_feature(pv, 2, f[0]) == MF_OK && mf_vindex_delete_feature(pv, 2, f[5]) == MF_OK,
                  "delete: %s", mf_last_error());
            CHECK(mf_vindex_delete_feature(pv, 5, 0) == MF_ERR_INVALID_ARG, "delete of layer 5 accepted");
            mf_vindex_knn(pv, 2, x, 1, 172, f2, sc);
            int seen = 0;
            for (int i = 0; i < 172; i++) seen += f2[i] == f[0] || f2[i] == f[5];
            CHECK(seen == 0 && f2[170] == -1 && f2[171] == -1 && f2[0] == f[1], "deleted features still returned");
            char pp[600];
            snprintf(pp, sizeof pp, "%s/p.vlp", tmp);
            CHECK(mf_vindex_save_patch(pv, pp, "test") == MF_OK, "save: %s", mf_last_error());
            mf_vindex_free(pv);
            size_t pn;
            char *ptext = test_read_file(pp, &pn);
            static const struct { const char *find, *repl, *want; } bad[] = {
                {"minfer-vindex-patch", "minfer-vindex", "not a vindex patch"},
                {"\"version\": 1", "\"version\": 3", "version"},
                {"\"delete\"", "\"rename\"", "unknown op"},
                {"\"delete\"", "\"insert\"", "\"gate\" must be an array"},
                {"\"layer\": 2", "\"layer\": 7", "in range"},
                {"\"layer\": 2", "\"layer\": \"2\"", "in range"},
                {"\"base\": \"", "\"base\": \"1", "base"},
                {"\"ops\"", "\"opz\"", "ops"},
                {"{", "[", "line"},
            };
            for (size_t b = 0; ptext && b <= sizeof bad / sizeof bad[0]; b++) {
                char *t = malloc(pn + 64);
                if (b < sizeof bad / sizeof bad[0]) {
                    char *at = strstr(ptext, bad[b].find);
                    if (!at) {
                        CHECK(0, "patch text lacks %s", bad[b].find);
                        free(t);
                        continue;
                    }
                    size_t pre = (size_t)(at - ptext), fl = strlen(bad[b].find);
                    snprintf(t, pn + 64, "%.*s%s%s", (int)pre, ptext, bad[b].repl, at + fl);
                } else {
                    snprintf(t, pn + 64, "%.*s", (int)(pn / 2), ptext); /* cut in half */
                }
                char bp2[700];
                snprintf(bp2, sizeof bp2, "%s/bad.vlp", tmp);
                FILE *bf = fopen(bp2, "wb");
                if (bf) fputs(t, bf), fclose(bf);
                mf_vindex *qv;
                if (mf_vindex_open(g_dir, &qv) == MF_OK) {
                    mf_status ps = mf_vindex_apply_patch(qv, bp2);
                    CHECK(ps != MF_OK && (b == sizeof bad / sizeof bad[0] || strstr(mf_last_error(), bad[b].want)),
                          "bad patch %zu accepted or unclear: %s", b, mf_last_error());
                    CHECK(mf_vindex_n_deleted(qv) == 0, "a refused patch changed the vindex");
                    mf_vindex_free(qv);
                }
                free(t);
            }
            /* the good one applies: the same features deleted */
            mf_vindex *qv;
            if (mf_vindex_open(g_dir, &qv) == MF_OK) {
                CHECK(mf_vindex_apply_patch(qv, pp) == MF_OK && mf_vindex_n_deleted(qv) == 2 &&
                          mf_vindex_is_deleted(qv, 2, f[0]) && mf_vindex_is_deleted(qv, 2, f[5]),
                      "patch round trip: %s", mf_last_error());
                mf_vindex_free(qv);
            }
            free(ptext);
        } else CHECK(0, "open: %s", mf_last_error());
    }

    /* a browse vindex holds no model; a plain file and an empty directory are not vindexes */
    mf_model *m = NULL;
    mf_model_params mp = mf_model_default_params();
    CHECK(mf_model_load(g_dir, &mp, &m) != MF_OK && strstr(mf_last_error(), "no model weights"),
          "a browse vindex loaded as a model: %s", mf_last_error());
    mf_model_free(m);
    snprintf(g_dir, sizeof g_dir, "%s/empty", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
    if (system(cmd) != 0) CHECK(0, "mkdir");
    expect_refused("empty directory", "index.json");
    snprintf(g_dir, sizeof g_dir, "../shared/models/stories260K.gguf");
    expect_refused("a GGUF file", "not a vindex directory");

    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", tmp);
    return test_summary("test_vindex_hostile");
}
