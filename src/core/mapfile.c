/* mapfile.c - mmap a file read-only (or read it into huge-page-advised
 * memory); empty files get a valid empty view. */
#include "core/mapfile.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static mf_status map_or_read(const char *path, int read_copy, mf_mapfile *out) {
    out->data = NULL;
    out->size = out->map_size = 0;
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
    const size_t size = (size_t)st.st_size;
    if (read_copy) {
        const size_t huge = (size_t)2 << 20;
        const size_t rounded = (size + huge - 1) & ~(huge - 1);
        void *p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mf_err(MF_ERR_NOMEM, "%s: cannot allocate %zu bytes to read the file into: %s", path, size, strerror(e));
        }
#ifdef MADV_HUGEPAGE
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
#endif
        size_t got = 0;
        while (got < size) {
            ssize_t r = pread(fd, (uint8_t *)p + got, size - got, (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                int e = r < 0 ? errno : EIO;
                close(fd);
                munmap(p, rounded);
                return mf_err(MF_ERR_IO, "%s: read failed at byte %zu of %zu: %s", path, got, size,
                              r < 0 ? strerror(e) : "unexpected end of file");
            }
            got += (size_t)r;
        }
        close(fd);
        (void)mprotect(p, rounded, PROT_READ); /* the view is read-only either way */
        out->data = p;
        out->size = size;
        out->map_size = rounded;
        return MF_OK;
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return mf_err(MF_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    out->data = p;
    out->size = out->map_size = size;
    return MF_OK;
}

mf_status mf_mapfile_open(const char *path, mf_mapfile *out) { return map_or_read(path, 0, out); }
mf_status mf_mapfile_read(const char *path, mf_mapfile *out) { return map_or_read(path, 1, out); }

void mf_mapfile_close(mf_mapfile *m) {
    if (m->map_size) {
        /* a joined view (mf_mapfile_join) starts inside its first page */
        const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        const uintptr_t a = (uintptr_t)m->data, base = a & ~(page - 1);
        munmap((void *)base, m->map_size + (a - base));
    }
    m->data = NULL;
    m->size = m->map_size = 0;
}

mf_status mf_mapfile_join(const void *prefix, size_t prefix_len, const char *path, bool read_copy, mf_mapfile *out) {
    out->data = NULL;
    out->size = out->map_size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mf_err(MF_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mf_err(MF_ERR_IO, "%s: not a readable regular file", path);
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t fsize = (size_t)st.st_size, pad = (prefix_len + page - 1) / page * page;
    const size_t total = pad + (fsize ? fsize : 1);
    /* one reservation: the prefix is copied into its first pages so that it
     * ends exactly where the file's mapping begins */
    uint8_t *region = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
        close(fd);
        return mf_err(MF_ERR_NOMEM, "%s: cannot reserve %zu bytes: %s", path, total, strerror(errno));
    }
    uint8_t *base = region + pad - prefix_len;
    memcpy(base, prefix, prefix_len);
    if (fsize && !read_copy) {
        void *p = mmap(region + pad, fsize, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            munmap(region, total);
            return mf_err(MF_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
    } else {
        for (size_t got = 0; got < fsize;) {
            ssize_t r = pread(fd, region + pad + got, fsize - got, (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                close(fd);
                munmap(region, total);
                return mf_err(MF_ERR_IO, "%s: read failed at byte %zu of %zu", path, got, fsize);
            }
            got += (size_t)r;
        }
    }
    close(fd);
    (void)mprotect(region, pad, PROT_READ);
    out->data = base;
    out->size = prefix_len + fsize;
    out->map_size = total - (pad - prefix_len);
    return MF_OK;
}
