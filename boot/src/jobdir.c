/* jobdir.c - the softvia-run back end: everything goes through files in the job
 * directory (see softvia_boot.h). Files are written once under a temporary name and
 * renamed into place, so a reader never sees partial data and needs no locking.
 */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define POLL_MIN_US 20
#define POLL_MAX_US 1000
#define g sv_boot_g

/* Unique suffix for temporary files written by this process. */
static atomic_ulong tmp_seq;

/* Strict decimal parse: digits only, fits in int. */
static int parse_uint(const char *s, int *out)
{
    long v = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return -1;
    }
    *out = (int)v;
    return 0;
}

/* <dir>/<sub>/<name>; -EINVAL if it does not fit. */
static int make_path(char *out, size_t cap, const char *sub, const char *name)
{
    int n = snprintf(out, cap, "%s/%s/%s", g.dir, sub, name);
    return (n < 0 || (size_t)n >= cap) ? -EINVAL : 0;
}

/* The job directory vanishing means the launcher is gone: stop waiting. */
static int kv_dir_exists(void)
{
    char path[PATH_MAX];
    struct stat st;
    if (make_path(path, sizeof path, "kv", ".") != 0)
        return 0;
    if (stat(path, &st) == 0)
        return 1;
    return !(errno == ENOENT || errno == ENOTDIR);
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes <dir>/<sub>/<name> via a temporary file + rename. */
static int write_atomic(const char *sub, const char *name, const void *data, size_t len)
{
    char tmp[PATH_MAX], dst[PATH_MAX], tname[64];
    int fd = -1;

    if (make_path(dst, sizeof dst, sub, name) != 0)
        return -EINVAL;
    for (;;) {
        /* '~' never appears in keys, and the leading '.' hides it from scanners. */
        snprintf(tname, sizeof tname, ".tmp~%ld~%lu", (long)getpid(),
                 atomic_fetch_add(&tmp_seq, 1));
        if (make_path(tmp, sizeof tmp, sub, tname) != 0)
            return -EINVAL;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST && errno != EINTR)
            return -EIO; /* includes ENOENT: the job directory is gone */
    }
    if (write_all(fd, data, len) != 0) {
        close(fd);
        unlink(tmp);
        return -EIO;
    }
    if (close(fd) != 0 || rename(tmp, dst) != 0) {
        unlink(tmp);
        return -EIO;
    }
    return 0;
}

/* Reads a whole (immutable) file into val. */
static int read_value(int fd, void *val, size_t cap, size_t *len)
{
    struct stat st;
    size_t size, done = 0;

    if (fstat(fd, &st) != 0)
        return -EIO;
    size = (size_t)st.st_size;
    if (len)
        *len = size;
    if (size > cap)
        return -ENOSPC;
    while (done < size) {
        ssize_t n = read(fd, (char *)val + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO; /* the file never shrinks once renamed into place */
        done += (size_t)n;
    }
    return 0;
}

/* Waits for kv/<key> to appear (until deadline, -1 = forever) and reads it.
 * Polls with a sleep that grows from 20 us to 1 ms: fast when the peer is
 * close behind, cheap when it is far behind. */
static int wait_read(const char *key, void *val, size_t cap, size_t *len, int64_t deadline)
{
    char path[PATH_MAX];
    int64_t nap_us = POLL_MIN_US;

    if (make_path(path, sizeof path, "kv", key) != 0)
        return -EINVAL;
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            int rc = read_value(fd, val, cap, len);
            close(fd);
            return rc;
        }
        if (errno == EINTR)
            continue;
        if (errno != ENOENT || !kv_dir_exists())
            return -EIO;

        int64_t now = sv_boot_now_ns();
        if (deadline >= 0 && now >= deadline)
            return -ETIMEDOUT;
        int64_t nap = nap_us * 1000;
        if (deadline >= 0 && deadline - now < nap)
            nap = deadline - now;
        sv_boot_nap_ns(nap);
        nap_us = nap_us * 2 > POLL_MAX_US ? POLL_MAX_US : nap_us * 2;
    }
}

/* Internal keys start with '@', which user keys cannot contain.
 * rank < 0 names the combined result published by rank 0. */
static void coll_key(char *out, size_t cap, char kind, unsigned long epoch, int rank)
{
    if (rank < 0)
        snprintf(out, cap, "@" SV_BOOT_COLL_NS "%c.%lu.all", kind, epoch);
    else
        snprintf(out, cap, "@" SV_BOOT_COLL_NS "%c.%lu.%d", kind, epoch, rank);
}

/* ---- the back end ------------------------------------------------------------- */

int jd_init(void)
{
    const char *rs = getenv("SOFTVIA_RANK");
    const char *ss = getenv("SOFTVIA_SIZE");
    const char *ds = getenv("SOFTVIA_JOB_DIR");
    int r = 0, s = 1;

    if (ds != NULL) {
        if (ds[0] != '/' || strlen(ds) >= sizeof g.dir)
            return sv_boot_fail(-EINVAL, "SOFTVIA_JOB_DIR='%.64s' is not an absolute path that fits", ds);
        strcpy(g.dir, ds);
    }
    if (rs != NULL || ss != NULL) {
        if (parse_uint(rs, &r) != 0 || parse_uint(ss, &s) != 0 || s < 1 || r >= s)
            return sv_boot_fail(-EINVAL, "SOFTVIA_RANK='%.32s' SOFTVIA_SIZE='%.32s': not a rank below a size",
                                rs ? rs : "(unset)", ss ? ss : "(unset)");
        if (s > 1 && g.dir[0] == '\0')
            return sv_boot_fail(-EINVAL, "SOFTVIA_SIZE=%d without SOFTVIA_JOB_DIR: no way to reach the peers", s);
    }
    g.rank = r;
    g.size = s;
    return 0;
}

/* A reason for the failures the file operations report only by code. */
static int explain(int rc, const char *what, const char *key)
{
    if (rc == -ETIMEDOUT)
        return sv_boot_fail(rc, "%s(%s): nobody put it in time", what, key);
    if (rc == -EIO)
        return sv_boot_fail(rc, "%s(%s): the job directory %s is gone or unreadable (the launcher has ended?)",
                            what, key, g.dir);
    if (rc == -EINVAL)
        return sv_boot_fail(rc, "%s(%s): the path under SOFTVIA_JOB_DIR is too long", what, key);
    return rc;
}

int jd_put(const char *key, const void *val, size_t len)
{
    return explain(write_atomic("kv", key, val, len), "sv_boot_put", key);
}

int jd_get(const char *key, void *val, size_t cap, size_t *len, int64_t deadline)
{
    return explain(wait_read(key, val, cap, len, deadline), "sv_boot_get", key);
}

/* Gather to rank 0, which publishes the combined result: O(size) file
 * operations in total instead of O(size^2) for everyone reading everyone. */
int jd_collective(char kind, const void *mine, size_t len, void *all, int64_t deadline)
{
    char key[64];
    size_t got = 0;
    int rc;
    size_t total = len * (size_t)g.size;
    unsigned long epoch = ++g.epoch;

    if (g.rank != 0) {
        coll_key(key, sizeof key, kind, epoch, g.rank);
        if ((rc = write_atomic("kv", key, mine, len)) != 0)
            return explain(rc, "collective", key);
        /* mine was copied out above, so reading into all is safe in place. */
        coll_key(key, sizeof key, kind, epoch, -1);
        rc = wait_read(key, all, total, &got, deadline);
        if (rc == -ENOSPC || (rc == 0 && got != total))
            return sv_boot_fail(-EIO, "collective %lu: the ranks passed different lengths", epoch);
        if (rc == -ETIMEDOUT)
            return sv_boot_fail(rc, "collective %lu: rank 0 did not announce its completion in time (a rank "
                                "has not arrived)", epoch);
        if (rc != 0)
            return explain(rc, "collective", key);
    } else {
        if (len > 0)
            memmove(all, mine, len);
        for (int r = 1; r < g.size; r++) {
            char *slot = len > 0 ? (char *)all + (size_t)r * len : NULL;
            coll_key(key, sizeof key, kind, epoch, r);
            rc = wait_read(key, slot, len, &got, deadline);
            if (rc == -ENOSPC || (rc == 0 && got != len))
                return sv_boot_fail(-EIO, "collective %lu: rank %d passed another length", epoch, r);
            if (rc == -ETIMEDOUT)
                return sv_boot_fail(rc, "collective %lu: rank %d did not arrive in time", epoch, r);
            if (rc != 0)
                return explain(rc, "collective", key);
        }
        coll_key(key, sizeof key, kind, epoch, -1);
        if ((rc = write_atomic("kv", key, all, total)) != 0)
            return explain(rc, "collective", key);
    }

    /* Finishing this collective proves every rank entered it, hence finished
     * reading the previous one: our file from that one can go. */
    if (g.prev_epoch != 0) {
        char path[PATH_MAX];
        coll_key(key, sizeof key, g.prev_kind, g.prev_epoch, g.rank == 0 ? -1 : g.rank);
        if (make_path(path, sizeof path, "kv", key) == 0)
            unlink(path);
    }
    g.prev_kind = kind;
    g.prev_epoch = epoch;
    return 0;
}

int jd_publish_name(const char *name, const void *addr, size_t len)
{
    char *line = malloc(2 * len + 2);
    int rc;
    if (line == NULL)
        return -ENOMEM;
    sv_boot_hex(addr, len, line);
    line[2 * len] = '\n';
    rc = write_atomic("names", name, line, 2 * len + 1);
    free(line);
    return rc;
}

static int parse_name_text(const char *text, ssize_t n, void *addr, size_t cap, size_t *len);

/* names/<name>: one line of hex. Read like a hosts file (regular files only, bounded),
 * so a FIFO or a device put there cannot stall a lookup. -ENOENT for anything else. */
static int read_name_file(const char *name, void *addr, size_t cap, size_t *len)
{
    enum { TEXT_MAX = 2 * 65536 + 2 };
    char path[PATH_MAX];
    struct stat st;
    ssize_t n;
    if (make_path(path, sizeof path, "names", name) != 0)
        return -ENOENT;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -ENOENT;
    char *text = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size >= TEXT_MAX ||
        (text = malloc((size_t)st.st_size + 1)) == NULL) {
        close(fd);
        return -ENOENT;
    }
    n = read(fd, text, (size_t)st.st_size);
    close(fd);
    int rc = parse_name_text(text, n, addr, cap, len);
    free(text);
    return rc;
}

static int parse_name_text(const char *text, ssize_t n, void *addr, size_t cap, size_t *len)
{
    if (n <= 0)
        return -ENOENT;
    size_t hexlen = 0;
    while (hexlen < (size_t)n && text[hexlen] != '\n')
        hexlen++;
    if (hexlen == 0 || hexlen % 2 != 0)
        return -ENOENT;
    *len = hexlen / 2;
    if (*len > cap)
        return -ENOSPC;
    return sv_boot_unhex(text, hexlen, addr, cap) < 0 ? -ENOENT : 0;
}

int jd_lookup_name(const char *name, void *addr, size_t cap, size_t *len)
{
    return read_name_file(name, addr, cap, len);
}

int jd_lookup_addr(const void *addr, size_t len, char *name, size_t cap)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/names", g.dir);
    int rc = -ENOENT;
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENOENT;
    DIR *d = opendir(path);
    if (d == NULL)
        return -ENOENT;
    unsigned char *a = malloc(len);
    struct dirent *e;
    while (a != NULL && (e = readdir(d)) != NULL) {
        size_t got = 0;
        if (e->d_name[0] == '.' || read_name_file(e->d_name, a, len, &got) != 0 || got != len ||
            memcmp(a, addr, len) != 0)
            continue;
        size_t nl = strlen(e->d_name);
        if (nl + 1 > cap) {
            rc = -ENOSPC;
        } else {
            memcpy(name, e->d_name, nl + 1);
            rc = 0;
        }
        break;
    }
    free(a);
    closedir(d);
    return rc;
}
