/*
 * test_core.h -- what the C test programs share, whatever API they test: exit codes
 * (0 pass, 1 fail, 77 skip), a failure count, phase names, messages that name
 * file:line and the phase, the watchdog, the result. tests/conformance/helpers.h
 * (VIPL) and tests/am/am_test.h (AM) build their checks on TH_CHECK_CODE.
 */
#ifndef SOFTVIA_TEST_CORE_H
#define SOFTVIA_TEST_CORE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_PASS = 0, T_FAIL = 1, T_SKIP = 77 };

static int th_failures;
static const char *th_phase_name = "start";
static const char *th_prog = "test";

#define TH_FAILMSG(...)                                                   \
    do {                                                                  \
        fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, th_phase_name); \
        fprintf(stderr, __VA_ARGS__);                                     \
        fputc('\n', stderr);                                              \
    } while (0)

/* call (of type type) must return want, else a message with both codes named by
 * name_of, then the test stops (fatal) or records a failure and goes on. */
#define TH_CHECK_CODE(type, call, want, name_of, fatal)                              \
    do {                                                                             \
        type r_ = (call);                                                            \
        if (r_ != (want)) {                                                          \
            TH_FAILMSG("%s -> %s (want %s)", #call, name_of(r_), name_of(want));     \
            if (fatal) exit(T_FAIL);                                                 \
            th_failures++;                                                           \
        }                                                                            \
    } while (0)

#define EXPECT(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            TH_FAILMSG("expected %s: ", #cond);                                      \
            fprintf(stderr, "    ");                                                 \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            th_failures++;                                                           \
        }                                                                            \
    } while (0)

#define FATAL(...)                                                                   \
    do {                                                                             \
        TH_FAILMSG(__VA_ARGS__);                                                     \
        exit(T_FAIL);                                                                \
    } while (0)

static inline void th_phase(const char *name) { th_phase_name = name; }

static void th_alarm(int sig) {
    (void)sig;
    /* async-signal-safe output only */
    const char *a = "watchdog: test hung in phase: ";
    ssize_t n = write(2, a, strlen(a));
    n = write(2, th_phase_name, strlen(th_phase_name));
    n = write(2, "\n", 1);
    (void)n;
    _exit(T_FAIL);
}

/* How much slower than a release build this build runs (SOFTVIA_TEST_SLOW, set by the
 * test registration for sanitizer builds: ThreadSanitizer runs these programs about ten
 * times slower). Watchdogs stretch by it; loops that repeat a race many times to catch
 * it once may run fewer rounds (the sanitizer looks at every one). */
static inline unsigned th_slow(void) {
    const char *s = getenv("SOFTVIA_TEST_SLOW");
    unsigned v = s ? (unsigned)strtoul(s, NULL, 10) : 1;
    return v ? v : 1;
}

/* Names the test and starts the watchdog (which names the phase a test hangs in). */
static inline void th_start(const char *prog, unsigned watchdog_s) {
    th_prog = prog;
    signal(SIGALRM, th_alarm);
    alarm(watchdog_s * th_slow());
}

static inline int th_result(void) {
    if (th_failures) {
        fprintf(stderr, "%s: FAIL (%d check%s failed)\n", th_prog, th_failures,
                th_failures == 1 ? "" : "s");
        return T_FAIL;
    }
    printf("%s: PASS\n", th_prog);
    return T_PASS;
}
#endif
