/* format.c - index.json: written from a vx_index, read back with every field
 * typed, bounded and cross-checked (sections inside their files, aligned, of
 * the size the shapes imply), since a vindex directory is untrusted input. */
#include "vindex/vindex.h"
#include "core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const vx_file_names[VX_NFILES] = {
    "gate_vectors.bin", "down_features.bin", "up_features.bin", "down_meta.bin",
    "embeddings.bin",   "tokenizer.gguf",    "header.bin",      "weights.bin",
};

static const char *const level_names[] = {"browse", "inference", "all"};

const char *vx_level_name(mf_vindex_level l) { return (unsigned)l < 3 ? level_names[l] : "?"; }

char *vx_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

uint64_t vx_section_bytes(const vx_index *ix, vx_file f) {
    const uint64_t F = (uint64_t)ix->n_features;
    if (f == VX_META) return F * (uint64_t)ix->down_top_k * 8;
    return F * mf_row_size(ix->ftype, ix->n_embd);
}

void vx_index_free(vx_index *ix) {
    free(ix->sect);
    ix->sect = NULL;
}

/* ---- writing ---- */

char *vx_index_dump(const vx_index *ix) {
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string(VX_FORMAT));
    json_object_set_new(root, "version", json_integer(VX_VERSION));
    json_object_set_new(root, "level", json_string(vx_level_name(ix->level)));
    json_t *src = json_object();
    json_object_set_new(src, "file", json_string(ix->source_file));
    json_object_set_new(src, "size", json_integer((json_int_t)ix->source_size));
    json_object_set_new(src, "sha256", json_string(ix->source_sha256));
    json_object_set_new(root, "source", src);
    json_t *m = json_object();
    json_object_set_new(m, "architecture", json_string(ix->arch));
    json_object_set_new(m, "ffn", json_string(ix->ffn));
    json_object_set_new(m, "gated", json_boolean(ix->gated));
    json_object_set_new(m, "n_layer", json_integer(ix->n_layer));
    json_object_set_new(m, "n_embd", json_integer(ix->n_embd));
    json_object_set_new(m, "n_vocab", json_integer(ix->n_vocab));
    json_object_set_new(m, "n_ff", json_integer(ix->n_ff));
    json_object_set_new(m, "n_expert", json_integer(ix->n_expert));
    json_object_set_new(m, "n_expert_used", json_integer(ix->n_expert_used));
    json_object_set_new(m, "n_ff_expert", json_integer(ix->n_ff_expert));
    json_object_set_new(m, "embedding_type", json_string(mf_type_name(ix->embd_type)));
    json_object_set_new(root, "model", m);
    json_t *fe = json_object();
    json_object_set_new(fe, "per_layer", json_integer(ix->n_features));
    json_object_set_new(fe, "type", json_string(mf_type_name(ix->ftype)));
    json_object_set_new(fe, "down_top_k", json_integer(ix->down_top_k));
    json_object_set_new(fe, "labels", json_string(ix->n_expert ? "expert,feature" : "feature"));
    json_object_set_new(root, "features", fe);
    json_t *files = json_array();
    for (int f = 0; f < VX_NFILES; f++) {
        if (!ix->files[f].present) continue;
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(vx_file_names[f]));
        json_object_set_new(o, "size", json_integer((json_int_t)ix->files[f].size));
        json_object_set_new(o, "sha256", json_string(ix->files[f].sha256));
        json_array_append_new(files, o);
    }
    json_object_set_new(root, "files", files);
    json_t *layers = json_array();
    for (int l = 0; l < ix->n_layer; l++) {
        json_t *o = json_object();
        json_object_set_new(o, "layer", json_integer(l));
        for (int f = 0; f < VX_NSECT; f++) {
            if (!ix->files[f].present) continue;
            const vx_section *s = &ix->sect[(size_t)l * VX_NSECT + f];
            json_t *pair = json_array();
            json_array_append_new(pair, json_integer((json_int_t)s->off));
            json_array_append_new(pair, json_integer((json_int_t)s->bytes));
            json_object_set_new(o, vx_file_names[f], pair);
        }
        json_array_append_new(layers, o);
    }
    json_object_set_new(root, "layers", layers);
    char *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return out;
}

/* ---- reading ---- */

typedef struct rd {
    const char *name;
} rd;

static mf_status get_int(const rd *r, json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return mf_err(MF_ERR_FORMAT, "%s: \"%s\" is missing or not an integer", r->name, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return mf_err(MF_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", r->name, key,
                      (int64_t)x, lo, hi);
    *out = x;
    return MF_OK;
}

static mf_status get_i32(const rd *r, json_t *o, const char *key, int64_t lo, int64_t hi, int32_t *out) {
    int64_t x = 0;
    mf_status s = get_int(r, o, key, lo, hi, &x);
    if (!s) *out = (int32_t)x;
    return s;
}

static mf_status get_str(const rd *r, json_t *o, const char *key, char *buf, size_t cap) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) return mf_err(MF_ERR_FORMAT, "%s: \"%s\" is missing or not a string", r->name, key);
    size_t n = json_string_length(v);
    const char *p = json_string_value(v);
    if (n >= cap || memchr(p, 0, n)) return mf_err(MF_ERR_FORMAT, "%s: \"%s\" is too long or holds a NUL", r->name, key);
    memcpy(buf, p, n + 1);
    return MF_OK;
}

static bool is_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static int type_by_name(const char *n) {
    for (int t = 0; t < 64; t++)
        if (mf_type_geom_get(t) && !strcmp(mf_type_name(t), n)) return t;
    return -1;
}

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        mf_status s_ = (x);                                                                                            \
        if (s_) {                                                                                                      \
            json_decref(root);                                                                                         \
            vx_index_free(out);                                                                                        \
            return s_;                                                                                                 \
        }                                                                                                              \
    } while (0)
#define FAIL(...) TRY(mf_err(MF_ERR_FORMAT, __VA_ARGS__))

mf_status vx_index_parse(const char *text, size_t len, const char *name, vx_index *out) {
    memset(out, 0, sizeof *out);
    const rd r = {name};
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mf_err(MF_ERR_FORMAT, "%s: line %d column %d: %s", name, je.line, je.column, je.text);
    if (!json_is_object(root)) FAIL("%s: not a JSON object", name);
    char fmt[64];
    TRY(get_str(&r, root, "format", fmt, sizeof fmt));
    if (strcmp(fmt, VX_FORMAT)) FAIL("%s: format \"%s\" is not a minfer vindex (\"%s\")", name, fmt, VX_FORMAT);
    int32_t ver;
    TRY(get_i32(&r, root, "version", 0, INT32_MAX, &ver));
    if (ver != VX_VERSION)
        TRY(mf_err(MF_ERR_UNSUPPORTED, "%s: vindex version %d is not supported (this build reads %d)", name, ver,
                   VX_VERSION));
    char lv[32];
    TRY(get_str(&r, root, "level", lv, sizeof lv));
    out->level = (mf_vindex_level)-1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(lv, level_names[i])) out->level = (mf_vindex_level)i;
    if ((int)out->level < 0) FAIL("%s: unknown level \"%s\" (browse, inference, all)", name, lv);

    json_t *src = json_object_get(root, "source");
    if (!json_is_object(src)) FAIL("%s: \"source\" is missing or not an object", name);
    TRY(get_str(&r, src, "file", out->source_file, sizeof out->source_file));
    TRY(get_str(&r, src, "sha256", out->source_sha256, sizeof out->source_sha256));
    if (!is_hex64(out->source_sha256)) FAIL("%s: source sha256 is not 64 hex digits", name);
    int64_t v64;
    TRY(get_int(&r, src, "size", 0, INT64_MAX, &v64));
    out->source_size = (uint64_t)v64;

    json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) FAIL("%s: \"model\" is missing or not an object", name);
    TRY(get_str(&r, m, "architecture", out->arch, sizeof out->arch));
    TRY(get_str(&r, m, "ffn", out->ffn, sizeof out->ffn));
    if (strcmp(out->ffn, "swiglu") && strcmp(out->ffn, "geglu") && strcmp(out->ffn, "gelu"))
        FAIL("%s: unknown ffn \"%s\"", name, out->ffn);
    json_t *g = json_object_get(m, "gated");
    if (!json_is_boolean(g)) FAIL("%s: \"gated\" is missing or not a boolean", name);
    out->gated = json_is_true(g);
    TRY(get_i32(&r, m, "n_layer", 1, 512, &out->n_layer));
    TRY(get_i32(&r, m, "n_embd", 1, 1 << 17, &out->n_embd));
    TRY(get_i32(&r, m, "n_vocab", 1, 1 << 24, &out->n_vocab));
    TRY(get_i32(&r, m, "n_ff", 0, 1 << 20, &out->n_ff));
    TRY(get_i32(&r, m, "n_expert", 0, 1024, &out->n_expert));
    TRY(get_i32(&r, m, "n_expert_used", 0, 1024, &out->n_expert_used));
    TRY(get_i32(&r, m, "n_ff_expert", 0, 1 << 20, &out->n_ff_expert));
    char tn[32];
    TRY(get_str(&r, m, "embedding_type", tn, sizeof tn));
    int et = type_by_name(tn);
    if (et < 0) FAIL("%s: unknown embedding type \"%s\"", name, tn);
    out->embd_type = (mf_type)et;

    json_t *fe = json_object_get(root, "features");
    if (!json_is_object(fe)) FAIL("%s: \"features\" is missing or not an object", name);
    TRY(get_i32(&r, fe, "per_layer", 1, 1 << 24, &out->n_features));
    TRY(get_i32(&r, fe, "down_top_k", 0, 1024, &out->down_top_k));
    TRY(get_str(&r, fe, "type", tn, sizeof tn));
    if (!strcmp(tn, "f32")) out->ftype = MF_TYPE_F32;
    else if (!strcmp(tn, "f16")) out->ftype = MF_TYPE_F16;
    else if (!strcmp(tn, "q8_0")) out->ftype = MF_TYPE_Q8_0;
    else FAIL("%s: feature type \"%s\" is not f32, f16 or q8_0", name, tn);
    if (out->ftype == MF_TYPE_Q8_0 && out->n_embd % 32) FAIL("%s: q8_0 features need n_embd %% 32 == 0", name);
    const int64_t want_f = out->n_expert ? (int64_t)out->n_expert * out->n_ff_expert : out->n_ff;
    if (want_f != out->n_features)
        FAIL("%s: %d features per layer, but the FFN shape gives %" PRId64, name, out->n_features, want_f);
    if ((uint64_t)out->n_features * (uint64_t)out->n_embd > (1ull << 34))
        FAIL("%s: %d features of %d is too large", name, out->n_features, out->n_embd);

    json_t *files = json_object_get(root, "files");
    if (!json_is_array(files)) FAIL("%s: \"files\" is missing or not an array", name);
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *o = json_array_get(files, i);
        if (!json_is_object(o)) FAIL("%s: files[%zu] is not an object", name, i);
        char fname[64];
        TRY(get_str(&r, o, "name", fname, sizeof fname));
        int f = -1;
        for (int k = 0; k < VX_NFILES; k++)
            if (!strcmp(fname, vx_file_names[k])) f = k;
        if (f < 0) FAIL("%s: files[%zu] names an unknown file \"%s\"", name, i, fname);
        if (out->files[f].present) FAIL("%s: %s is listed twice", name, fname);
        out->files[f].present = true;
        TRY(get_int(&r, o, "size", 0, INT64_MAX, &v64));
        out->files[f].size = (uint64_t)v64;
        TRY(get_str(&r, o, "sha256", out->files[f].sha256, sizeof out->files[f].sha256));
        if (!is_hex64(out->files[f].sha256)) FAIL("%s: sha256 of %s is not 64 hex digits", name, fname);
    }
    static const vx_file always[] = {VX_GATE, VX_DOWN, VX_EMBD, VX_TOKENIZER};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (!out->files[always[i]].present) FAIL("%s: %s is not listed", name, vx_file_names[always[i]]);
    if (out->down_top_k && !out->files[VX_META].present) FAIL("%s: down_meta.bin is not listed", name);
    if (out->level >= MF_VINDEX_INFERENCE) {
        if (!out->files[VX_HEADER].present || !out->files[VX_WEIGHTS].present)
            FAIL("%s: level %s needs header.bin and weights.bin", name, lv);
        if (out->gated && !out->files[VX_UP].present) FAIL("%s: level %s needs up_features.bin", name, lv);
    }
    const uint64_t embd_bytes = mf_row_size(out->embd_type, out->n_embd) * (uint64_t)out->n_vocab;
    if (out->embd_type != MF_TYPE_F32 && out->n_embd % mf_type_geom_get(out->embd_type)->blck)
        FAIL("%s: n_embd %d is not a whole number of %s blocks", name, out->n_embd, tn);
    if (out->files[VX_EMBD].size != embd_bytes)
        FAIL("%s: embeddings.bin is listed with %" PRIu64 " bytes, the shape gives %" PRIu64, name,
             out->files[VX_EMBD].size, embd_bytes);

    json_t *layers = json_object_get(root, "layers");
    if (!json_is_array(layers) || json_array_size(layers) != (size_t)out->n_layer)
        FAIL("%s: \"layers\" must be an array of %d entries", name, out->n_layer);
    out->sect = calloc((size_t)out->n_layer * VX_NSECT, sizeof *out->sect);
    if (!out->sect) TRY(mf_err(MF_ERR_NOMEM, "out of memory"));
    for (int l = 0; l < out->n_layer; l++) {
        json_t *o = json_array_get(layers, (size_t)l);
        if (!json_is_object(o)) FAIL("%s: layers[%d] is not an object", name, l);
        int64_t li;
        TRY(get_int(&r, o, "layer", l, l, &li));
        for (int f = 0; f < VX_NSECT; f++) {
            json_t *p = json_object_get(o, vx_file_names[f]);
            if (!out->files[f].present) {
                if (p) FAIL("%s: layers[%d] has a %s section, but the file is not listed", name, l, vx_file_names[f]);
                continue;
            }
            if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(json_array_get(p, 0)) ||
                !json_is_integer(json_array_get(p, 1)))
                FAIL("%s: layers[%d].%s must be [offset, bytes]", name, l, vx_file_names[f]);
            const json_int_t off = json_integer_value(json_array_get(p, 0));
            const json_int_t nb = json_integer_value(json_array_get(p, 1));
            const uint64_t want = vx_section_bytes(out, (vx_file)f), size = out->files[f].size;
            if (off < 0 || nb < 0 || (uint64_t)nb != want || (uint64_t)off % VX_ALIGN || (uint64_t)off > size ||
                (uint64_t)nb > size - (uint64_t)off)
                FAIL("%s: layers[%d].%s [%" PRId64 ", %" PRId64 "] is not a %d-byte aligned section of %" PRIu64
                     " bytes inside the file (%" PRIu64 " bytes)",
                     name, l, vx_file_names[f], (int64_t)off, (int64_t)nb, VX_ALIGN, want, size);
            out->sect[(size_t)l * VX_NSECT + f] = (vx_section){(uint64_t)off, (uint64_t)nb};
        }
    }
    json_decref(root);
    return MF_OK;
}

mf_status vx_index_load(const char *dir, vx_index *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(dir, &st) != 0) return mf_err(MF_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return mf_err(MF_ERR_FORMAT, "%s: not a vindex directory", dir);
    char *p = vx_path(dir, "index.json");
    if (!p) return mf_err(MF_ERR_NOMEM, "out of memory");
    FILE *f = fopen(p, "rb");
    if (!f) {
        mf_status s = mf_err(MF_ERR_FORMAT, "%s: %s (not a vindex directory)", p, strerror(errno));
        free(p);
        return s;
    }
    enum { CAP = 64 << 20 };
    char *buf = malloc(CAP + 1);
    size_t n = buf ? fread(buf, 1, CAP + 1, f) : 0;
    fclose(f);
    if (!buf) {
        free(p);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    mf_status s = n > CAP ? mf_err(MF_ERR_FORMAT, "%s: larger than %d MiB", p, CAP >> 20) : vx_index_parse(buf, n, p, out);
    free(buf);
    free(p);
    return s;
}
