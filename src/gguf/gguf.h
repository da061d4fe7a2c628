/* gguf.h - validated, zero-copy view of a GGUF file.
 *
 * gguf_open() maps the file and checks everything before returning: magic,
 * version (2 and 3; 1 is refused), every count, string length, array size,
 * value type, tensor dimension, tensor type, alignment and data offset against
 * the file size. Nothing that reads a gguf_file afterwards needs to re-check a
 * size or offset: every pointer handed out lies inside the mapping.
 *
 * Stricter than the format strictly needs, on purpose: tensors must have 1..4
 * dimensions, none of them 0; duplicate keys or tensor names, overlapping
 * tensors, and tensor data not aligned for its element type are refused.
 * Memory allocated while parsing grows with the bytes actually parsed, never
 * with a count the file merely declares, so a hostile header cannot make the
 * reader allocate more than a small multiple of the file size. */
#ifndef MF_GGUF_H
#define MF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"
#include "core/mapfile.h"
#include "quant/types.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME_LEN 256     /* tensor name bytes (llama.cpp itself allows 63) */
#define GGUF_MAX_KEY_LEN 65535    /* metadata key bytes */
#define GGUF_MAX_ARRAY_DEPTH 8    /* arrays of arrays of ... (llama.cpp allows none) */

typedef enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STR = 8,
    GGUF_ARR = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
    GGUF_VTYPE_COUNT
} gguf_vtype;

/* A string inside the mapping: NOT NUL-terminated. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u;  /* U8..U64 */
        int64_t i;   /* I8..I64 */
        double f;    /* F32, F64 */
        bool b;
        gguf_str s;
        struct {
            gguf_vtype elem;
            uint64_t n;
            const uint8_t *raw;  /* numeric/bool elements, little-endian, possibly unaligned */
            gguf_str *strs;      /* elem == GGUF_STR */
            gguf_value *items;   /* elem == GGUF_ARR (nested arrays) */
        } arr;
    };
};

typedef struct gguf_kv {
    char *key; /* NUL-terminated copy */
    gguf_value v;
} gguf_kv;

typedef struct gguf_tensor {
    char *name;          /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    mf_type type;
    uint64_t offset;     /* relative to the data section */
    int64_t n_elements;  /* ne[0] * ne[1] * ne[2] * ne[3], checked not to overflow */
    size_t nbytes;
    const void *data;    /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file {
    mf_mapfile map;      /* empty when parsed from a caller's buffer */
    const char *path;    /* for messages */
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* absolute offset of the data section (tensor offsets are relative to it) */
    size_t size;
    const uint8_t *base;
} gguf_file;

mf_status gguf_open(const char *path, gguf_file **out);
/* read_copy: read the file into memory instead of mapping it (mapfile.h) */
mf_status gguf_open_ex(const char *path, bool read_copy, gguf_file **out);
/* Parse a caller-owned buffer (it must outlive the result); `name` labels messages. */
mf_status gguf_parse(const uint8_t *data, size_t size, const char *name, gguf_file **out);
/* Parse a prepared view and own it (closed with the result, or on failure). */
mf_status gguf_open_map(mf_mapfile m, const char *name, gguf_file **out);
void gguf_close(gguf_file *f);

const char *gguf_vtype_name(gguf_vtype t);
/* Bytes of one scalar of type t; 0 for strings, arrays and unknown ids. */
size_t gguf_vtype_size(gguf_vtype t);

/* Lookup; NULL if absent. */
const gguf_value *gguf_get(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
/* Index of a key in f->kv, or -1. */
int64_t gguf_find_key(const gguf_file *f, const char *key);

/* Typed getters: MF_OK and *out set; or an error naming the key when the value
 * is present with an incompatible type or out of range. Absent keys return
 * MF_OK and leave *out untouched when !required, else an error. Integer
 * getters accept any integer type that fits; float getters accept F32/F64 and
 * integers. */
mf_status gguf_get_u32(const gguf_file *f, const char *key, bool required, uint32_t *out);
mf_status gguf_get_i32(const gguf_file *f, const char *key, bool required, int32_t *out);
mf_status gguf_get_f32(const gguf_file *f, const char *key, bool required, float *out);
mf_status gguf_get_bool(const gguf_file *f, const char *key, bool required, bool *out);
/* Copies into buf (NUL-terminated, truncated to cap-1). */
mf_status gguf_get_str(const gguf_file *f, const char *key, bool required, char *buf, size_t cap);

/* Integer/float element i of a numeric array (i < n checked by caller);
 * 0 when the elements are strings or arrays. */
int64_t gguf_arr_int(const gguf_value *v, uint64_t i);
double gguf_arr_float(const gguf_value *v, uint64_t i);
bool gguf_vtype_is_int(gguf_vtype t);

#endif
