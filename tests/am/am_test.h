/*
 * am_test.h -- helpers for the AM tests (tests/am): checks that name the AM code and
 * bounded polling, over tests/test_core.h (exit codes 0 pass, 1 fail, 77 skip; EXPECT,
 * FATAL, th_phase, th_result, the watchdog).
 */
#ifndef SOFTVIA_AM_TEST_H
#define SOFTVIA_AM_TEST_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <am.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../test_core.h"

/* call must return AM_OK, else the test stops */
#define AM_CHECK(call) TH_CHECK_CODE(int, call, AM_OK, AMX_ErrorString, 1)
/* call must return want, else a failure is recorded and the test goes on */
#define AM_EXPECT_RC(call, want) TH_CHECK_CODE(int, call, want, AMX_ErrorString, 0)

/* Call first in main: names the test, starts the watchdog, prints the modes. */
static inline void at_init(const char *prog, unsigned watchdog_s) {
    th_start(prog, watchdog_s ? watchdog_s : 60);
    const char *s = getenv("AMVIA_STEERING");
    printf("%s: AMVIA_STEERING=%s SOFTVIA_PROGRESS=%s\n", prog, s ? s : "(unset)",
           getenv("SOFTVIA_PROGRESS") ? getenv("SOFTVIA_PROGRESS") : "(unset)");
    fflush(stdout);
}

static inline uint64_t at_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Polls eb until *flag reaches want or ms pass; 1 if it did. */
static inline int at_poll_until(eb_t eb, volatile int *flag, int want, unsigned ms) {
    uint64_t end = at_now_ns() + (uint64_t)ms * 1000000ull;
    for (unsigned turn = 0; *flag < want; turn++) {
        int r = AM_Poll(eb);
        if (r != AM_OK) {
            TH_FAILMSG("AM_Poll -> %s", AMX_ErrorString(r));
            return 0;
        }
        if ((turn & 255) == 255) {
            if (at_now_ns() > end) return 0;
            sched_yield();
        }
    }
    return 1;
}
#endif
