/* boot.c - the front of the bootstrap library: picks the back end from the environment,
 * checks arguments once for both back ends, and keeps the reason of the last failure. */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Initialisation (lazy or explicit) from several threads: one at a time, and the state
 * published only once complete. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_done;

static void clear_error(void) { sv_boot_clear_error(); }

/* ---- argument checks ------------------------------------------------------------ */

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

#define NAME_ADDR_MAX 65536

static int ensure_init(void)
{
    if (!atomic_load_explicit(&init_done, memory_order_acquire))
        sv_boot_init(NULL, NULL);
    return sv_boot_g.init_rc;
}

static int set(const char *name) { const char *v = getenv(name); return v != NULL && *v != '\0'; }

/* ---- public API ---------------------------------------------------------------- */

int sv_boot_init(int *rank, int *size)
{
    int rc;
    clear_error();
    pthread_mutex_lock(&init_lock);
    /* The epoch survives re-initialisation so keys never repeat. */
    sv_boot_g.inited = 1;
    sv_boot_g.dir[0] = '\0';
    sv_boot_g.rank = 0;
    sv_boot_g.size = 1;
    /* softvia-run's rank first (a softvia-run job started from inside an MPI job), then a
     * PMIx launcher's; a job directory alone (left over in the environment) does not hide
     * the PMIx launcher's ranks. */
    if (set("SOFTVIA_RANK") || set("SOFTVIA_SIZE")) {
        sv_boot_g.kind = SV_BOOT_JOBDIR;
        rc = jd_init();
    } else if (set("PMIX_NAMESPACE") || set("PMIX_RANK")) {
        sv_boot_g.kind = SV_BOOT_PMIX;
        rc = px_init();
    } else if (getenv("SOFTVIA_JOB_DIR")) {
        sv_boot_g.kind = SV_BOOT_JOBDIR; /* a job of one with a directory for put/get */
        rc = jd_init();
    } else {
        sv_boot_g.kind = SV_BOOT_NONE;
        rc = 0;
    }
    if (rc != 0) {
        sv_boot_g.kind = SV_BOOT_NONE;
        sv_boot_g.rank = 0;
        sv_boot_g.size = 1;
        sv_boot_g.dir[0] = '\0';
    }
    sv_boot_g.init_rc = rc;
    atomic_store_explicit(&init_done, 1, memory_order_release);
    if (rank)
        *rank = sv_boot_g.rank;
    if (size)
        *size = sv_boot_g.size;
    pthread_mutex_unlock(&init_lock);
    return rc;
}

void sv_boot_finalize(void)
{
    if (sv_boot_g.kind == SV_BOOT_PMIX || px_connected_elsewhere())
        px_finalize_all();
}

const char *sv_boot_backend(void)
{
    ensure_init();
    switch (sv_boot_g.kind) {
    case SV_BOOT_JOBDIR: return "jobdir";
    case SV_BOOT_PMIX: return "pmix";
    default: return "none";
    }
}

const char *sv_boot_job_dir(void)
{
    if (ensure_init() != 0 || sv_boot_g.dir[0] == '\0')
        return NULL;
    return sv_boot_g.dir;
}

/* The back end that stores and finds keys: the job directory only when there is one. */
static enum sv_boot_kind store(void)
{
    if (sv_boot_g.kind == SV_BOOT_JOBDIR && sv_boot_g.dir[0] == '\0')
        return SV_BOOT_NONE;
    return sv_boot_g.kind;
}

/* No launcher: the calls that need one say so. */
static int no_launcher(const char *what)
{
    if (sv_boot_g.kind == SV_BOOT_JOBDIR)
        return sv_boot_fail(-ENOENT, "%s: SOFTVIA_JOB_DIR is not set: no job directory to use", what);
    return sv_boot_fail(-ENOENT, "%s: not started by a launcher (neither SOFTVIA_RANK nor PMIX_RANK is set)",
                        what);
}

int sv_boot_put(const char *key, const void *val, size_t len)
{
    int rc;
    clear_error();
    if (!valid_key(key) || (val == NULL && len > 0))
        return sv_boot_fail(-EINVAL, "sv_boot_put: bad key or value");
    if ((rc = ensure_init()) != 0)
        return rc;
    switch (store()) {
    case SV_BOOT_JOBDIR: return jd_put(key, val, len);
    case SV_BOOT_PMIX: return px_put(key, val, len);
    default: return no_launcher("sv_boot_put");
    }
}

int sv_boot_get(const char *key, void *val, size_t cap, size_t *len, int timeout_ms)
{
    int rc;
    clear_error();
    if (!valid_key(key) || (val == NULL && cap > 0))
        return sv_boot_fail(-EINVAL, "sv_boot_get: bad key or buffer");
    if ((rc = ensure_init()) != 0)
        return rc;
    int64_t deadline = sv_boot_deadline(timeout_ms);
    switch (store()) {
    case SV_BOOT_JOBDIR: return jd_get(key, val, cap, len, deadline);
    case SV_BOOT_PMIX: return px_get(key, val, cap, len, deadline);
    default: return no_launcher("sv_boot_get");
    }
}

static int collective(char kind, const void *mine, size_t len, void *all, int timeout_ms)
{
    int rc;
    clear_error();
    if (len > 0 && (mine == NULL || all == NULL))
        return sv_boot_fail(-EINVAL, "sv_boot_allgather: NULL buffer");
    if ((rc = ensure_init()) != 0)
        return rc;
    if (sv_boot_g.size == 1) {
        if (len > 0)
            memmove(all, mine, len);
        return 0;
    }
    if (len > SIZE_MAX / (size_t)sv_boot_g.size)
        return sv_boot_fail(-EINVAL, "sv_boot_allgather: %zu bytes times %d ranks overflows", len,
                            sv_boot_g.size);
    int64_t deadline = sv_boot_deadline(timeout_ms);
    if (sv_boot_g.kind == SV_BOOT_PMIX)
        return px_collective(kind, mine, len, all, deadline);
    return jd_collective(kind, mine, len, all, deadline);
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
    int rc;
    clear_error();
    if (!valid_name(name) || addr == NULL || len == 0 || len > NAME_ADDR_MAX)
        return sv_boot_fail(-EINVAL, "sv_boot_publish_name: bad name or address");
    if ((rc = ensure_init()) != 0)
        return rc;
    switch (store()) {
    case SV_BOOT_JOBDIR: return jd_publish_name(name, addr, len);
    case SV_BOOT_PMIX: return px_publish_name(name, addr, len);
    default: return no_launcher("sv_boot_publish_name");
    }
}

/* The vipl name service looks names up in every program: under a PMIx launcher, only
 * when the process is connected already (a program that never asked for its rank must not
 * connect, nor must a child that inherited its parent's PMIx environment). */
static int lookups_skip_launcher(void)
{
    if (atomic_load_explicit(&init_done, memory_order_acquire))
        return 0;
    return (set("PMIX_NAMESPACE") || set("PMIX_RANK")) &&
           !(set("SOFTVIA_RANK") || set("SOFTVIA_SIZE") || getenv("SOFTVIA_JOB_DIR")) && !px_connected_elsewhere();
}

int sv_boot_lookup_name(const char *name, void *addr, size_t cap, size_t *len)
{
    clear_error();
    if (lookups_skip_launcher())
        return -ENOENT;
    if (!valid_name(name) || (addr == NULL && cap > 0) || len == NULL)
        return sv_boot_fail(-EINVAL, "sv_boot_lookup_name: bad name or buffer");
    if (ensure_init() != 0)
        return -ENOENT;
    switch (store()) {
    case SV_BOOT_JOBDIR: return jd_lookup_name(name, addr, cap, len);
    case SV_BOOT_PMIX: return px_lookup_name(name, addr, cap, len);
    default: return -ENOENT;
    }
}

int sv_boot_lookup_addr(const void *addr, size_t len, char *name, size_t cap)
{
    clear_error();
    if (lookups_skip_launcher())
        return -ENOENT;
    if (addr == NULL || len == 0 || len > NAME_ADDR_MAX || (name == NULL && cap > 0))
        return sv_boot_fail(-EINVAL, "sv_boot_lookup_addr: bad address or buffer");
    if (ensure_init() != 0)
        return -ENOENT;
    switch (store()) {
    case SV_BOOT_JOBDIR: return jd_lookup_addr(addr, len, name, cap);
    case SV_BOOT_PMIX: return px_lookup_addr(addr, len, name, cap);
    default: return -ENOENT;
    }
}
