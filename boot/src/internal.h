/* internal.h - the front (boot.c: checks and dispatch), the two back ends it calls
 * (jobdir.c: softvia-run's job directory; pmix.c: a PMIx launcher) and what all three
 * share (common.c). */
#ifndef SOFTVIA_BOOT_INTERNAL_H
#define SOFTVIA_BOOT_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define SV_HIDDEN __attribute__((visibility("hidden")))

/* A copy of the library built into another library (libamvia, libsplitc, libsoftvia_shm)
 * counts its collectives apart from the program's own copy: SV_BOOT_COLL_NS keeps their
 * keys apart too. */
#ifndef SV_BOOT_COLL_NS
#define SV_BOOT_COLL_NS ""
#endif

enum sv_boot_kind { SV_BOOT_NONE, SV_BOOT_JOBDIR, SV_BOOT_PMIX };

struct sv_boot_state {
    int inited;
    int init_rc;
    enum sv_boot_kind kind;
    int rank;
    int size;
    char dir[PATH_MAX]; /* job directory back end: "" when SOFTVIA_JOB_DIR is not set */
    /* Collective sequence number: makes every collective use fresh keys. */
    unsigned long epoch;
    /* The previous collective, whose own files we delete once the next one
     * completes (by then every rank has finished reading them). */
    char prev_kind;
    unsigned long prev_epoch;
};
SV_HIDDEN extern struct sv_boot_state sv_boot_g;

/* common.c. Records why the last call failed (sv_boot_last_error) and returns rc. */
SV_HIDDEN int sv_boot_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
SV_HIDDEN void sv_boot_clear_error(void);

SV_HIDDEN int64_t sv_boot_now_ns(void);
SV_HIDDEN int64_t sv_boot_deadline(int timeout_ms); /* -1: forever */
SV_HIDDEN void sv_boot_nap_ns(int64_t ns);

/* The job directory (jobdir.c). */
SV_HIDDEN int jd_init(void);
SV_HIDDEN int jd_put(const char *key, const void *val, size_t len);
SV_HIDDEN int jd_get(const char *key, void *val, size_t cap, size_t *len, int64_t deadline);
SV_HIDDEN int jd_collective(char kind, const void *mine, size_t len, void *all, int64_t deadline);
SV_HIDDEN int jd_publish_name(const char *name, const void *addr, size_t len);
SV_HIDDEN int jd_lookup_name(const char *name, void *addr, size_t cap, size_t *len);
SV_HIDDEN int jd_lookup_addr(const void *addr, size_t len, char *name, size_t cap);

/* PMIx (pmix.c): the same operations. */
SV_HIDDEN int px_init(void);
SV_HIDDEN int px_put(const char *key, const void *val, size_t len);
SV_HIDDEN int px_get(const char *key, void *val, size_t cap, size_t *len, int64_t deadline);
SV_HIDDEN int px_collective(char kind, const void *mine, size_t len, void *all, int64_t deadline);
SV_HIDDEN int px_publish_name(const char *name, const void *addr, size_t len);
SV_HIDDEN int px_lookup_name(const char *name, void *addr, size_t cap, size_t *len);
SV_HIDDEN int px_lookup_addr(const void *addr, size_t len, char *name, size_t cap);
/* Some other part of the process (another copy of this library) is connected to PMIx. */
SV_HIDDEN int px_connected_elsewhere(void);
/* Disconnects from PMIx however many times the process connected (before _exit). */
SV_HIDDEN void px_finalize_all(void);

/* Lowercase hex of n bytes into out (2n+1 bytes with the NUL); parse: -1 when not exactly
 * an even number of hex digits that fits cap. */
SV_HIDDEN void sv_boot_hex(const void *bytes, size_t n, char *out);
SV_HIDDEN long sv_boot_unhex(const char *s, size_t slen, void *out, size_t cap);

#endif
