/* fuzz_gguf.c - libFuzzer harness for the GGUF reader (clang only; see
 * tests/gguf/CMakeLists.txt). Any input must be refused with a one-line
 * message or accepted with every tensor inside the buffer; an accepted file
 * copied through the writer must be accepted again with the same content. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"

static void require(int cond) {
    if (!cond) abort(); /* the fuzzer reports the input */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy, so that ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    gguf_file *f = NULL;
    mf_status s = gguf_parse(buf, size, "fuzz", &f);
    if (s) {
        const char *msg = mf_last_error();
        require(msg[0] != 0 && strchr(msg, '\n') == NULL);
        free(buf);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint8_t *d = t->data;
        require(d >= buf && t->nbytes <= size && d + t->nbytes <= buf + size);
        sink ^= d[0] ^ d[t->nbytes - 1];
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_value *v = &f->kv[i].v;
        if (v->type == GGUF_ARR && gguf_vtype_size(v->arr.elem) && v->arr.n)
            sink ^= (uint8_t)gguf_arr_int(v, v->arr.n - 1);
    }
    (void)sink;

    /* the copy pads to the file's alignment; skip declared alignments whose
     * padding alone would be megabytes (legal, but slow to fuzz) */
    gguf_writer *w = NULL;
    if (f->alignment <= 65536 && gguf_writer_new(&w) == MF_OK) {
        mf_status ws = gguf_writer_copy_kv(w, f, NULL, NULL);
        for (uint64_t i = 0; i < f->n_tensors && !ws; i++) ws = gguf_writer_copy_tensor(w, &f->tensors[i]);
        uint8_t *out = NULL;
        size_t n = 0;
        if (!ws) ws = gguf_writer_write_mem(w, &out, &n);
        require(ws == MF_OK);
        gguf_file *g = NULL;
        require(gguf_parse(out, n, "fuzz-copy", &g) == MF_OK);
        require(g->n_kv == f->n_kv && g->n_tensors == f->n_tensors);
        for (uint64_t i = 0; i < f->n_tensors; i++)
            require(g->tensors[i].nbytes == f->tensors[i].nbytes &&
                    !memcmp(g->tensors[i].data, f->tensors[i].data, f->tensors[i].nbytes));
        gguf_close(g);
        free(out);
        gguf_writer_free(w);
    }
    gguf_close(f);
    free(buf);
    return 0;
}
