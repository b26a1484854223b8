/* am_mp.h -- for AM programs under softvia-run: SPMD start-up with a check. */
#ifndef SOFTVIA_AM_MP_H
#define SOFTVIA_AM_MP_H
#include "am_test.h"

static eb_t mp_eb;
static ep_t mp_ep;
static int mp_rank, mp_size;

static inline void mp_start(const char *prog, int want_size, uintptr_t seg_bytes, unsigned watchdog_s) {
    static char name[96];
    AM_CHECK(AMX_SPMDStartup(0xabcd, seg_bytes, &mp_eb, &mp_ep));
    mp_rank = AMX_SPMDMyProc();
    mp_size = AMX_SPMDNumProcs();
    snprintf(name, sizeof name, "%s[rank %d/%d]", prog, mp_rank, mp_size);
    at_init(name, watchdog_s);
    if (want_size > 0 && mp_size != want_size) FATAL("needs softvia-run -n %d", want_size);
    if (want_size < 0 && mp_size < -want_size) FATAL("needs at least %d ranks", -want_size);
}

static inline void mp_poll_until(volatile int *flag, int want, const char *what) {
    if (!at_poll_until(mp_eb, flag, want, 30000)) FATAL("timed out waiting for %s (%d of %d)", what, *flag, want);
}

static inline int mp_finish(void) {
    AM_CHECK(AMX_SPMDExit());
    return th_result();
}
#endif
