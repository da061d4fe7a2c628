/* gguf_write.h - builds GGUF v3 files: metadata in insertion order, tensors
 * whose data comes from memory or is streamed by a callback.
 *
 * Usage: gguf_writer_new(), set keys (gguf_writer_set_*, or copy them from a
 * parsed file with gguf_writer_copy_kv), add tensors (gguf_writer_add_tensor
 * for data in memory, gguf_writer_add_tensor_fn for data produced while
 * writing, e.g. by a quantizer that holds one tensor at a time), then
 * gguf_writer_write_file() or gguf_writer_write_mem(). Tensor data offsets are
 * assigned at write time, in the order tensors were added, each padded to
 * `general.alignment` (default 32) as llama.cpp's writer does, so copying a
 * file's keys and tensors in order reproduces a file written that way byte
 * for byte.
 *
 * Everything is validated when it is added (key and name lengths, value and
 * element types, nesting depth, tensor dims, type and row length), so a file
 * this writer produces is one the reader accepts. Errors are mf_status values
 * with a message in mf_last_error(). */
#ifndef MF_GGUF_WRITE_H
#define MF_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct gguf_writer gguf_writer;

mf_status gguf_writer_new(gguf_writer **out);
void gguf_writer_free(gguf_writer *w);

/* ---- metadata ----
 * Each setter appends the key, or, when the key is already present, replaces
 * its value (and type) in place, keeping the key's position. Values are copied:
 * the caller's buffers may be freed right after the call. */
mf_status gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
mf_status gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
mf_status gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
mf_status gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
mf_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
mf_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
mf_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
mf_status gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
mf_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
mf_status gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
mf_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
mf_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* A string of `len` arbitrary bytes (GGUF strings may hold NULs). */
mf_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, size_t len);
/* An array of n numbers or bools of type `elem`, given as a C array of the
 * matching host type (uint8_t, int8_t, uint16_t, ..., float, double; bool). */
mf_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem, const void *data, uint64_t n);
/* An array of n NUL-terminated strings. */
mf_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Any value, as the reader represents it: this is how nested arrays are
 * written. For a hand-built value: an array of arrays has arr.elem = GGUF_ARR
 * and arr.items[n], each item itself of type GGUF_ARR; numeric elements are in
 * arr.raw, little-endian, packed; strings in arr.strs. Note that llama.cpp's
 * reader refuses arrays of arrays (minfer's reads them), so files meant for
 * llama.cpp should not contain them. */
mf_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Removes a key; returns false when it was not there. */
bool gguf_writer_remove(gguf_writer *w, const char *key);
uint64_t gguf_writer_n_kv(const gguf_writer *w);

/* Copies keys of a parsed file, in the file's order: all of them when `keep`
 * is NULL, else those for which keep(key, ud) is true. */
typedef bool (*gguf_key_filter)(const char *key, void *ud);
mf_status gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, gguf_key_filter keep, void *ud);

/* ---- tensors ---- */

/* What a tensor callback is asked to produce. */
typedef struct gguf_wtensor {
    const char *name;
    mf_type type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    size_t nbytes;     /* exactly this many bytes must be written */
    uint64_t index;    /* position among the writer's tensors */
} gguf_wtensor;

/* Where a callback writes a tensor's bytes; several calls may split them. */
typedef struct gguf_sink gguf_sink;
mf_status gguf_sink_write(gguf_sink *s, const void *data, size_t n);

/* Produces tensor t's data by calling gguf_sink_write() until exactly
 * t->nbytes bytes are written. A non-OK return aborts the whole write (the
 * callback sets the message with mf_err). */
typedef mf_status (*gguf_tensor_fn)(void *ud, const gguf_wtensor *t, gguf_sink *out);

/* ne[0..n_dims-1]; ne[0] is the row length and must be a multiple of the
 * type's block size. `data` (nbytes of it) is read at write time, not copied:
 * it must stay valid until the writer has written the file. */
mf_status gguf_writer_add_tensor(gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne,
                                 const void *data);
mf_status gguf_writer_add_tensor_fn(gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne,
                                    gguf_tensor_fn fn, void *ud);
/* Adds a tensor of a parsed file with its data (keep `f` open until written). */
mf_status gguf_writer_copy_tensor(gguf_writer *w, const gguf_tensor *t);
uint64_t gguf_writer_n_tensors(const gguf_writer *w);

/* ---- output ---- */

/* Size in bytes of the file the writer would produce now. */
uint64_t gguf_writer_size(const gguf_writer *w);
/* Writes to a temporary file beside `path` and renames it into place only
 * when everything was written, so a failed write never leaves a partial
 * file (and an input file being read through mmap stays intact). */
mf_status gguf_writer_write_file(gguf_writer *w, const char *path);
/* Writes into a malloc'd buffer (*out, *size); the caller frees it. */
mf_status gguf_writer_write_mem(gguf_writer *w, uint8_t **out, size_t *size);

#endif
