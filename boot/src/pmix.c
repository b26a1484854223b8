/* pmix.c - the PMIx back end: for processes started by a PMIx launcher (Open MPI's
 * mpirun, Slurm's srun --mpi=pmix). Nothing is shared between hosts but the launcher:
 *   put/get          PMIx_Publish / PMIx_Lookup (polled until the deadline); where the
 *                    server has neither (Slurm), the putter's own data and a PMIx_Get
 *                    of every rank's
 *   allgather        PMIx_Put + PMIx_Commit, a fence collecting data, PMIx_Get per rank
 *   barrier          a fence without data
 *   names            two published keys: the name's address and the address's name
 * Fences run non-blocking and are waited for with the caller's deadline, so a rank that
 * never arrives gives -ETIMEDOUT instead of a hang (a PMIx fence has no timeout of its
 * own that every server honours). */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#ifdef SOFTVIA_HAVE_PMIX
#include <pmix.h>

#define g sv_boot_g
static pmix_proc_t me;
static int connected;
static pid_t connected_pid; /* a forked child has the parent's connection: not its own */
/* A collective that timed out left this rank's part of a fence with the server: later
 * fences would be matched against it, so the ranks are out of step for good. */
static unsigned long broken_epoch;

/* A server without publish/lookup (Slurm's PMIx plugin answers PMIX_ERR_NOT_SUPPORTED):
 * keys then go into this rank's own data (PMIx_Put + PMIx_Commit), and a reader asks
 * every rank for them. Each process finds out on its first publish or lookup. */
static int no_publish;

/* Published keys: "sv.k.<key>" (put/get), "sv.n.<name>", "sv.a.<hex address>". */
static int pub_key(char *out, size_t cap, const char *kind, const char *what)
{
    int n = snprintf(out, cap, "sv.%s.%s", kind, what);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void disconnect(void)
{
    if (connected && getpid() == connected_pid) {
        connected = 0;
        PMIx_Finalize(NULL, 0);
    }
}

int px_connected_elsewhere(void) { return PMIx_Initialized() ? 1 : 0; }

void px_finalize_all(void)
{
    if (connected && getpid() != connected_pid)
        return;
    connected = 0;
    while (PMIx_Initialized())
        if (PMIx_Finalize(NULL, 0) != PMIX_SUCCESS)
            break;
}

/* Published data stays within this job (the default range is the whole session: other
 * jobs of a persistent launcher would see it and clash). */
static void range_info(pmix_info_t *info)
{
    pmix_data_range_t range = PMIX_RANGE_NAMESPACE;
    PMIX_INFO_LOAD(info, PMIX_RANGE, &range, PMIX_DATA_RANGE);
}

int px_init(void)
{
    const char *ns = getenv("PMIX_NAMESPACE"), *rs = getenv("PMIX_RANK");
    if (ns == NULL || *ns == '\0')
        return sv_boot_fail(-EINVAL, "PMIX_RANK is set but PMIX_NAMESPACE is not: an incomplete PMIx environment");
    if (rs == NULL || *rs == '\0')
        return sv_boot_fail(-EINVAL, "PMIX_NAMESPACE is set but PMIX_RANK is not: an incomplete PMIx environment");
    if (connected && getpid() != connected_pid)
        return sv_boot_fail(-EINVAL, "a forked child cannot use its parent's PMIx connection (PMIX_RANK=%s is the "
                            "parent's rank)", rs);
    if (!connected) {
        pmix_status_t rc = PMIx_Init(&me, NULL, 0);
        if (rc != PMIX_SUCCESS)
            return sv_boot_fail(-EIO, "PMIx_Init failed (%s): the PMIx server named by PMIX_SERVER_URI* is not "
                                "reachable", PMIx_Error_string(rc));
        connected = 1;
        connected_pid = getpid();
        /* A launcher takes a process that connected and exits without PMIx_Finalize
         * for one that died ("exiting improperly"): disconnect at exit. */
        atexit(disconnect);
    }
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_UINT32 || v->data.uint32 < 1 ||
        v->data.uint32 > INT32_MAX || me.rank >= v->data.uint32) {
        if (v)
            PMIX_VALUE_RELEASE(v);
        return sv_boot_fail(-EIO, "PMIx: no job size for namespace %s (%s)", me.nspace, PMIx_Error_string(rc));
    }
    g.size = (int)v->data.uint32;
    g.rank = (int)me.rank;
    PMIX_VALUE_RELEASE(v);
    return 0;
}

/* Into this rank's own data, for servers without publish/lookup. */
static int put_own(const char *key, const void *val, size_t len)
{
    pmix_value_t v;
    pmix_byte_object_t bo = {.bytes = (char *)val, .size = len};
    PMIX_VALUE_LOAD(&v, &bo, PMIX_BYTE_OBJECT);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return sv_boot_fail(-EIO, "PMIx_Put/Commit(%s) failed: %s", key, PMIx_Error_string(rc));
    return 0;
}

static int publish(const char *key, const void *val, size_t len)
{
    if (no_publish)
        return put_own(key, val, len);
    pmix_info_t info[2], range;
    pmix_byte_object_t bo = {.bytes = (char *)val, .size = len};
    char *keys[] = {(char *)key, NULL};
    /* sv_boot_put replaces an older value: a key published twice is refused by PMIx (and
     * only its publisher may withdraw it: a key another rank put stays that rank's). */
    range_info(&range);
    PMIx_Unpublish(keys, &range, 1);
    PMIX_INFO_DESTRUCT(&range);
    PMIX_INFO_LOAD(&info[0], key, &bo, PMIX_BYTE_OBJECT);
    range_info(&info[1]);
    pmix_status_t rc = PMIx_Publish(info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_ERR_NOT_SUPPORTED) {
        no_publish = 1;
        return put_own(key, val, len);
    }
    if (rc != PMIX_SUCCESS)
        return sv_boot_fail(-EIO, "PMIx_Publish(%s) failed: %s", key, PMIx_Error_string(rc));
    return 0;
}

/* Every rank's own data, once, without waiting: 0, -ENOENT, -ENOSPC. The server answers
 * from what the ranks of its node committed (PMIX_IMMEDIATE: no request to the resource
 * manager, which would wait for a key that only one rank will ever put). */
static int lookup_ranks(const char *key, void *val, size_t cap, size_t *len)
{
    pmix_info_t info[2];
    bool yes = true;
    PMIX_INFO_LOAD(&info[0], PMIX_IMMEDIATE, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_GET_REFRESH_CACHE, &yes, PMIX_BOOL);
    int out = -ENOENT;
    for (int r = 0; r < g.size && out == -ENOENT; r++) {
        pmix_proc_t p;
        pmix_value_t *got = NULL;
        PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)r);
        if (PMIx_Get(&p, key, info, 2, &got) != PMIX_SUCCESS || got == NULL)
            continue;
        if (got->type == PMIX_BYTE_OBJECT) {
            size_t n = got->data.bo.size;
            if (len)
                *len = n;
            if (n > cap) {
                out = -ENOSPC;
            } else {
                if (n > 0)
                    memcpy(val, got->data.bo.bytes, n);
                out = 0;
            }
        }
        PMIX_VALUE_RELEASE(got);
    }
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return out;
}

/* One lookup: 0, -ENOENT (not published yet), -ENOSPC, -EIO. */
static int lookup_once(const char *key, void *val, size_t cap, size_t *len)
{
    if (no_publish)
        return lookup_ranks(key, val, cap, len);
    pmix_pdata_t pd;
    PMIX_PDATA_CONSTRUCT(&pd);
    snprintf(pd.key, sizeof pd.key, "%s", key);
    pmix_info_t range;
    range_info(&range);
    pmix_status_t rc = PMIx_Lookup(&pd, 1, &range, 1);
    PMIX_INFO_DESTRUCT(&range);
    int out;
    if (rc == PMIX_ERR_NOT_FOUND || (rc == PMIX_SUCCESS && pd.value.type == PMIX_UNDEF)) {
        out = -ENOENT;
    } else if (rc == PMIX_ERR_NOT_SUPPORTED) {
        no_publish = 1;
        out = lookup_ranks(key, val, cap, len);
    } else if (rc != PMIX_SUCCESS || pd.value.type != PMIX_BYTE_OBJECT) {
        out = sv_boot_fail(-EIO, "PMIx_Lookup(%s) failed: %s", key, PMIx_Error_string(rc));
    } else {
        size_t n = pd.value.data.bo.size;
        if (len)
            *len = n;
        if (n > cap) {
            out = -ENOSPC;
        } else {
            if (n > 0)
                memcpy(val, pd.value.data.bo.bytes, n);
            out = 0;
        }
    }
    PMIX_PDATA_DESTRUCT(&pd);
    return out;
}

int px_put(const char *key, const void *val, size_t len)
{
    char k[PMIX_MAX_KEYLEN + 1];
    if (pub_key(k, sizeof k, "k", key) != 0)
        return sv_boot_fail(-EINVAL, "sv_boot_put: key too long for PMIx");
    return publish(k, val, len);
}

/* Polls with a nap growing from 100 us to 10 ms: each lookup is a round trip to the
 * launcher's data server. */
int px_get(const char *key, void *val, size_t cap, size_t *len, int64_t deadline)
{
    char k[PMIX_MAX_KEYLEN + 1];
    int64_t nap_us = 100;
    if (pub_key(k, sizeof k, "k", key) != 0)
        return sv_boot_fail(-EINVAL, "sv_boot_get: key too long for PMIx");
    for (;;) {
        int rc = lookup_once(k, val, cap, len);
        if (rc != -ENOENT)
            return rc;
        int64_t now = sv_boot_now_ns();
        if (deadline >= 0 && now >= deadline) {
            if (no_publish)
                return sv_boot_fail(-ETIMEDOUT, "sv_boot_get(%s): no rank of this node put it in time (this "
                                    "launcher's PMIx server has no publish/lookup: keys put on other nodes "
                                    "cannot be seen)", key);
            return sv_boot_fail(-ETIMEDOUT, "sv_boot_get(%s): nobody published it in time", key);
        }
        int64_t nap = nap_us * 1000;
        if (deadline >= 0 && deadline - now < nap)
            nap = deadline - now;
        sv_boot_nap_ns(nap);
        nap_us = nap_us * 2 > 10000 ? 10000 : nap_us * 2;
    }
}

/* A fence's completion, written by PMIx's progress thread. Left allocated when the
 * caller gives up waiting: the callback may still come. */
struct fence_wait {
    atomic_int done;
    pmix_status_t status;
};

static void fence_done(pmix_status_t status, void *cbdata)
{
    struct fence_wait *w = cbdata;
    w->status = status;
    atomic_store(&w->done, 1);
}

static int fence(int collect, int64_t deadline, unsigned long epoch)
{
    pmix_proc_t wild;
    pmix_info_t info;
    bool flag = collect != 0;
    struct fence_wait *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -ENOMEM;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence_nb(&wild, 1, &info, 1, fence_done, w);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        free(w);
        return sv_boot_fail(-EIO, "PMIx_Fence_nb failed: %s", PMIx_Error_string(rc));
    }
    broken_epoch = epoch; /* until it completes */
    int64_t nap_us = 20;
    while (!atomic_load(&w->done)) {
        int64_t now = sv_boot_now_ns();
        if (deadline >= 0 && now >= deadline)
            return sv_boot_fail(-ETIMEDOUT, "collective %lu: not every rank of the %d reached the PMIx fence in time",
                                epoch, g.size); /* w stays: the callback may still come */
        sv_boot_nap_ns(nap_us * 1000);
        nap_us = nap_us * 2 > 1000 ? 1000 : nap_us * 2;
    }
    rc = w->status;
    free(w);
    broken_epoch = 0;
    if (rc != PMIX_SUCCESS)
        return sv_boot_fail(-EIO, "collective %lu: the PMIx fence failed: %s", epoch, PMIx_Error_string(rc));
    return 0;
}

int px_collective(char kind, const void *mine, size_t len, void *all, int64_t deadline)
{
    unsigned long epoch = ++g.epoch;
    char key[PMIX_MAX_KEYLEN + 1];
    if (broken_epoch != 0)
        return sv_boot_fail(-EIO, "collective %lu: collective %lu did not complete on every rank, so the ranks' "
                            "collectives are out of step", epoch, broken_epoch);
    if (kind == 'b')
        return fence(0, deadline, epoch);
    snprintf(key, sizeof key, "sv.c.%s%c.%lu", SV_BOOT_COLL_NS, kind, epoch);
    int frc = put_own(key, mine, len);
    if (frc == 0)
        frc = fence(1, deadline, epoch);
    if (frc != 0)
        return frc;
    /* mine may alias its slot in all: it went out above. The fence brought every part
     * here: look only in this process's store (no request that could wait). */
    pmix_info_t optional;
    bool yes = true;
    PMIX_INFO_LOAD(&optional, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    for (int r = 0; r < g.size; r++) {
        pmix_proc_t p;
        pmix_value_t *got = NULL;
        PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)r);
        pmix_status_t rc = PMIx_Get(&p, key, &optional, 1, &got);
        if (rc != PMIX_SUCCESS || got == NULL || got->type != PMIX_BYTE_OBJECT || got->data.bo.size != len) {
            if (got)
                PMIX_VALUE_RELEASE(got);
            PMIX_INFO_DESTRUCT(&optional);
            return sv_boot_fail(-EIO, "collective %lu: rank %d's contribution is missing or of another length (%s)",
                                epoch, r, PMIx_Error_string(rc));
        }
        if (len > 0)
            memcpy((char *)all + (size_t)r * len, got->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(got);
    }
    PMIX_INFO_DESTRUCT(&optional);
    return 0;
}

int px_publish_name(const char *name, const void *addr, size_t len)
{
    char k[PMIX_MAX_KEYLEN + 1];
    char *hex = malloc(2 * len + 1);
    int rc;
    if (hex == NULL)
        return -ENOMEM;
    sv_boot_hex(addr, len, hex);
    if (pub_key(k, sizeof k, "n", name) != 0) {
        free(hex);
        return sv_boot_fail(-EINVAL, "sv_boot_publish_name: name too long for PMIx");
    }
    rc = publish(k, addr, len);
    if (rc == 0) {
        if (pub_key(k, sizeof k, "a", hex) == 0)
            rc = publish(k, name, strlen(name) + 1);
        /* an address too long for a PMIx key is found by name only */
    }
    free(hex);
    return rc;
}

int px_lookup_name(const char *name, void *addr, size_t cap, size_t *len)
{
    char k[PMIX_MAX_KEYLEN + 1];
    if (pub_key(k, sizeof k, "n", name) != 0)
        return -ENOENT;
    return lookup_once(k, addr, cap, len);
}

int px_lookup_addr(const void *addr, size_t len, char *name, size_t cap)
{
    char k[PMIX_MAX_KEYLEN + 1];
    char *hex = malloc(2 * len + 1);
    size_t got = 0;
    int rc = -ENOENT;
    if (hex == NULL)
        return -ENOMEM;
    sv_boot_hex(addr, len, hex);
    if (pub_key(k, sizeof k, "a", hex) == 0)
        rc = lookup_once(k, name, cap, &got);
    free(hex);
    if (rc == 0 && (got == 0 || name[got - 1] != '\0'))
        rc = -ENOENT;
    return rc;
}

#else /* built without libpmix */

static int no_pmix(void)
{
    return sv_boot_fail(-ENOTSUP, "started by a PMIx launcher (PMIX_RANK is set), but softvia was built without "
                        "libpmix (install libpmix-dev and rebuild)");
}
int px_init(void) { return no_pmix(); }
int px_put(const char *k, const void *v, size_t l) { (void)k, (void)v, (void)l; return no_pmix(); }
int px_get(const char *k, void *v, size_t c, size_t *l, int64_t d) { (void)k, (void)v, (void)c, (void)l, (void)d; return no_pmix(); }
int px_collective(char k, const void *m, size_t l, void *a, int64_t d) { (void)k, (void)m, (void)l, (void)a, (void)d; return no_pmix(); }
int px_publish_name(const char *n, const void *a, size_t l) { (void)n, (void)a, (void)l; return no_pmix(); }
int px_lookup_name(const char *n, void *a, size_t c, size_t *l) { (void)n, (void)a, (void)c, (void)l; return -ENOENT; }
int px_lookup_addr(const void *a, size_t l, char *n, size_t c) { (void)a, (void)l, (void)n, (void)c; return -ENOENT; }
int px_connected_elsewhere(void) { return 0; }
void px_finalize_all(void) {}

#endif
