/* mapfile.h - read-only memory map of a whole file (the GGUF zero-copy view). */
#ifndef MF_CORE_MAPFILE_H
#define MF_CORE_MAPFILE_H

#include <stddef.h>
#include <stdint.h>
#include "minfer.h"

typedef struct mf_mapfile {
    const uint8_t *data;
    size_t size;
} mf_mapfile;

mf_status mf_mapfile_open(const char *path, mf_mapfile *out);
void mf_mapfile_close(mf_mapfile *m);

#endif
