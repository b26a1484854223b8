/* boot.c - bootstrap library for programs started by softvia-run.
 *
 * Everything goes through files in the job directory (see softvia_boot.h).
 * Files are written once under a temporary name and renamed into place, so a
 * reader never sees partial data and needs no locking.
 */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAME_ADDR_MAX 65536
#define POLL_MIN_US 20
#define POLL_MAX_US 1000

static struct {
    int inited;
    int init_rc;
    int rank;
    int size;
    char dir[PATH_MAX]; /* "" when SOFTVIA_JOB_DIR is not set */
    /* Collective sequence number: makes every collective use fresh keys. */
    unsigned long epoch;
    /* The previous collective, whose own files we delete once the next one
     * completes (by then every rank has finished reading them). */
    char prev_kind;
    unsigned long prev_epoch;
} g;

/* Unique suffix for temporary files written by this process. */
static atomic_ulong tmp_seq;

/* ---- small helpers ------------------------------------------------------------ */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Absolute deadline in ns, or -1 for "wait forever". */
static int64_t deadline_from(int timeout_ms)
{
    if (timeout_ms < 0)
        return -1;
    return now_ns() + (int64_t)timeout_ms * 1000000;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    /* An early wake-up is harmless: the caller just polls again sooner. */
    nanosleep(&ts, NULL);
}

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

static int valid_key(const char *key)
{
    size_t n;
    if (key == NULL)
        return 0;
    n = strlen(key);
    if (n == 0 || n > SV_BOOT_KEY_MAX || strcmp(key, ".") == 0 || strcmp(key, "..") == 0)
        return 0;
    for (const char *p = key; *p; p++) {
        char c = *p;
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

/* Names may look like host names or "host:port"; only what would break the
 * file layout (or the "name hex" hosts-file format) is refused. */
static int valid_name(const char *name)
{
    size_t n;
    if (name == NULL)
        return 0;
    n = strlen(name);
    if (n == 0 || n > SV_BOOT_KEY_MAX || name[0] == '.')
        return 0;
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c >= 0x7f || c == '/')
            return 0;
    }
    return 1;
}

static int ensure_init(void)
{
    if (!g.inited)
        sv_boot_init(NULL, NULL);
    return g.init_rc;
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

        int64_t now = now_ns();
        if (deadline >= 0 && now >= deadline)
            return -ETIMEDOUT;
        int64_t nap = nap_us * 1000;
        if (deadline >= 0 && deadline - now < nap)
            nap = deadline - now;
        sleep_ns(nap);
        nap_us = nap_us * 2 > POLL_MAX_US ? POLL_MAX_US : nap_us * 2;
    }
}

/* A copy of this file built into a library (libamvia) counts its collectives apart
 * from the program's own copy: SV_BOOT_COLL_NS keeps their keys apart too. */
#ifndef SV_BOOT_COLL_NS
#define SV_BOOT_COLL_NS ""
#endif

/* Internal keys start with '@', which user keys cannot contain.
 * rank < 0 names the combined result published by rank 0. */
static void coll_key(char *out, size_t cap, char kind, unsigned long epoch, int rank)
{
    if (rank < 0)
        snprintf(out, cap, "@" SV_BOOT_COLL_NS "%c.%lu.all", kind, epoch);
    else
        snprintf(out, cap, "@" SV_BOOT_COLL_NS "%c.%lu.%d", kind, epoch, rank);
}

/* ---- public API ---------------------------------------------------------------- */

int sv_boot_init(int *rank, int *size)
{
    const char *rs = getenv("SOFTVIA_RANK");
    const char *ss = getenv("SOFTVIA_SIZE");
    const char *ds = getenv("SOFTVIA_JOB_DIR");
    int r = 0, s = 1, rc = 0;

    /* The epoch survives re-initialisation so keys never repeat. */
    g.inited = 1;
    g.dir[0] = '\0';

    if (ds != NULL) {
        if (ds[0] != '/' || strlen(ds) >= sizeof g.dir)
            rc = -EINVAL;
        else
            strcpy(g.dir, ds);
    }
    if (rc == 0 && (rs != NULL || ss != NULL)) {
        if (parse_uint(rs, &r) != 0 || parse_uint(ss, &s) != 0 || s < 1 || r >= s)
            rc = -EINVAL;
        else if (s > 1 && g.dir[0] == '\0')
            rc = -EINVAL; /* collectives would be impossible */
    }
    if (rc != 0) {
        r = 0;
        s = 1;
        g.dir[0] = '\0';
    }
    g.init_rc = rc;
    g.rank = r;
    g.size = s;
    if (rank)
        *rank = r;
    if (size)
        *size = s;
    return rc;
}

const char *sv_boot_job_dir(void)
{
    if (ensure_init() != 0 || g.dir[0] == '\0')
        return NULL;
    return g.dir;
}

int sv_boot_put(const char *key, const void *val, size_t len)
{
    int rc;
    if (!valid_key(key) || (val == NULL && len > 0))
        return -EINVAL;
    if ((rc = ensure_init()) != 0)
        return rc;
    if (g.dir[0] == '\0')
        return -ENOENT;
    return write_atomic("kv", key, val, len);
}

int sv_boot_get(const char *key, void *val, size_t cap, size_t *len, int timeout_ms)
{
    int rc;
    if (!valid_key(key) || (val == NULL && cap > 0))
        return -EINVAL;
    if ((rc = ensure_init()) != 0)
        return rc;
    if (g.dir[0] == '\0')
        return -ENOENT;
    return wait_read(key, val, cap, len, deadline_from(timeout_ms));
}

/* Gather to rank 0, which publishes the combined result: O(size) file
 * operations in total instead of O(size^2) for everyone reading everyone. */
static int collective(char kind, const void *mine, size_t len, void *all, int timeout_ms)
{
    char key[64];
    size_t got = 0;
    int rc;

    if (len > 0 && (mine == NULL || all == NULL))
        return -EINVAL;
    if ((rc = ensure_init()) != 0)
        return rc;
    if (g.size == 1) {
        if (len > 0)
            memmove(all, mine, len);
        return 0;
    }
    if (len > SIZE_MAX / (size_t)g.size)
        return -EINVAL;

    size_t total = len * (size_t)g.size;
    int64_t deadline = deadline_from(timeout_ms);
    unsigned long epoch = ++g.epoch;

    if (g.rank != 0) {
        coll_key(key, sizeof key, kind, epoch, g.rank);
        if ((rc = write_atomic("kv", key, mine, len)) != 0)
            return rc;
        /* mine was copied out above, so reading into all is safe in place. */
        coll_key(key, sizeof key, kind, epoch, -1);
        rc = wait_read(key, all, total, &got, deadline);
        if (rc == -ENOSPC || (rc == 0 && got != total))
            return -EIO; /* ranks disagree on len */
        if (rc != 0)
            return rc;
    } else {
        if (len > 0)
            memmove(all, mine, len);
        for (int r = 1; r < g.size; r++) {
            char *slot = len > 0 ? (char *)all + (size_t)r * len : NULL;
            coll_key(key, sizeof key, kind, epoch, r);
            rc = wait_read(key, slot, len, &got, deadline);
            if (rc == -ENOSPC || (rc == 0 && got != len))
                return -EIO;
            if (rc != 0)
                return rc;
        }
        coll_key(key, sizeof key, kind, epoch, -1);
        if ((rc = write_atomic("kv", key, all, total)) != 0)
            return rc;
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

int sv_boot_allgather(const void *mine, size_t len, void *all, int timeout_ms)
{
    return collective('a', mine, len, all, timeout_ms);
}

int sv_boot_barrier(int timeout_ms)
{
    return collective('b', NULL, 0, NULL, timeout_ms);
}

int sv_boot_publish_name(const char *name, const void *addr, size_t len)
{
    static const char hexdig[] = "0123456789abcdef";
    const unsigned char *a = addr;
    char *line;
    int rc;

    if (!valid_name(name) || addr == NULL || len == 0 || len > NAME_ADDR_MAX)
        return -EINVAL;
    if ((rc = ensure_init()) != 0)
        return rc;
    if (g.dir[0] == '\0')
        return -ENOENT;
    line = malloc(2 * len + 1);
    if (line == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++) {
        line[2 * i] = hexdig[a[i] >> 4];
        line[2 * i + 1] = hexdig[a[i] & 0xf];
    }
    line[2 * len] = '\n';
    rc = write_atomic("names", name, line, 2 * len + 1);
    free(line);
    return rc;
}
