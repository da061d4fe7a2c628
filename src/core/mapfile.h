/* mapfile.h - read-only memory map of a whole file (the GGUF zero-copy view). */
#ifndef MF_CORE_MAPFILE_H
#define MF_CORE_MAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "minfer.h"

typedef struct mf_mapfile {
    const uint8_t *data;
    size_t size;
    size_t map_size; /* bytes to unmap: size, or the read copy's rounded size */
} mf_mapfile;

mf_status mf_mapfile_open(const char *path, mf_mapfile *out);
/* The same view, but the bytes are read into private anonymous memory
 * advised for 2 MiB pages (the no-mmap load): a decode streams every weight
 * per token, and with 4 KiB file pages each page costs a TLB walk and stops
 * the hardware prefetcher at its boundary. */
mf_status mf_mapfile_read(const char *path, mf_mapfile *out);
/* A view of `prefix` followed by the whole file at `path`, with the file
 * mapped zero-copy (or read, with read_copy): how a vindex's weights file
 * becomes a GGUF again behind its stored header (vindex/gguf_view.c). */
mf_status mf_mapfile_join(const void *prefix, size_t prefix_len, const char *path, bool read_copy, mf_mapfile *out);
void mf_mapfile_close(mf_mapfile *m);

#endif
