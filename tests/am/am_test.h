/*
 * am_test.h -- helpers for the AM tests (tests/am): checks that name the AM code, a
 * watchdog, bounded polling. Exit codes: 0 pass, 1 fail, 77 skip.
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

enum { T_PASS = 0, T_FAIL = 1, T_SKIP = 77 };
static int at_failures;
static const char *at_phase_name = "start";
static const char *at_prog = "am-test";

#define AT_MSG(...)                                                          \
    do {                                                                     \
        fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, at_phase_name);  \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
    } while (0)
/* call must return AM_OK, else the test stops */
#define AM_CHECK(call)                                                                   \
    do {                                                                                 \
        int r_ = (call);                                                                 \
        if (r_ != AM_OK) {                                                               \
            AT_MSG("%s -> %s (want AM_OK)", #call, AMX_ErrorString(r_));                 \
            exit(T_FAIL);                                                                \
        }                                                                                \
    } while (0)
/* call must return want, else a failure is recorded and the test goes on */
#define AM_EXPECT_RC(call, want)                                                         \
    do {                                                                                 \
        int r_ = (call);                                                                 \
        if (r_ != (want)) {                                                              \
            AT_MSG("%s -> %s (want %s)", #call, AMX_ErrorString(r_), AMX_ErrorString(want)); \
            at_failures++;                                                               \
        }                                                                                \
    } while (0)
#define AT_EXPECT(cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            AT_MSG("expected %s", #cond);                                                \
            fprintf(stderr, "    ");                                                     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            at_failures++;                                                               \
        }                                                                                \
    } while (0)
#define AT_FATAL(...)          \
    do {                       \
        AT_MSG(__VA_ARGS__);   \
        exit(T_FAIL);          \
    } while (0)

static inline void at_phase(const char *p) { at_phase_name = p; }

static void at_alarm(int sig) {
    (void)sig;
    const char *a = "watchdog: test hung in phase: ";
    ssize_t n = write(2, a, strlen(a));
    n = write(2, at_phase_name, strlen(at_phase_name));
    n = write(2, "\n", 1);
    (void)n;
    _exit(T_FAIL);
}

static inline void at_init(const char *prog, unsigned watchdog_s) {
    at_prog = prog;
    signal(SIGALRM, at_alarm);
    alarm(watchdog_s ? watchdog_s : 60);
    const char *s = getenv("AMVIA_STEERING");
    printf("%s: AMVIA_STEERING=%s SOFTVIA_PROGRESS=%s\n", prog, s ? s : "(unset)",
           getenv("SOFTVIA_PROGRESS") ? getenv("SOFTVIA_PROGRESS") : "(unset)");
    fflush(stdout);
}

static inline int at_result(void) {
    if (at_failures) {
        fprintf(stderr, "%s: FAIL (%d check%s failed)\n", at_prog, at_failures, at_failures == 1 ? "" : "s");
        return T_FAIL;
    }
    printf("%s: PASS\n", at_prog);
    return T_PASS;
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
            AT_MSG("AM_Poll -> %s", AMX_ErrorString(r));
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
