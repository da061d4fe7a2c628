/* mapfile.c - mmap a file read-only; empty files get a valid empty view. */
#include "core/mapfile.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

mf_status mf_mapfile_open(const char *path, mf_mapfile *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mf_err(MF_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mf_err(MF_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mf_err(MF_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        static const uint8_t empty[1];
        out->data = empty;
        return MF_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return mf_err(MF_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return MF_OK;
}

void mf_mapfile_close(mf_mapfile *m) {
    if (m->size) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
