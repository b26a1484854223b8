/* sc_test.h -- checks for the Split-C conformance programs (tests/splitc).
 *
 * A failed CHECK prints where, which process and why, then ends the whole job with
 * status 1 (splitc_exit), so a failure is never lost in a process that another one's
 * exit brings down. sc_done() prints the count of passed checks of this process. */
#ifndef SC_TEST_H
#define SC_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <splitc.h>

static long sc_checks_;

#define CHECK(cond, ...)                                                                             \
    do {                                                                                             \
        sc_checks_++;                                                                                \
        if (!(cond)) {                                                                               \
            fflush(stdout);                                                                          \
            fprintf(stderr, "%s:%d: process %d of %d (%s): check failed: %s: ", __FILE__, __LINE__,  \
                    MYPROC, PROCS, splitc_backend(), #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            fflush(stderr);                                                                          \
            splitc_exit(1);                                                                          \
        }                                                                                            \
    } while (0)

static inline int sc_done(const char *prog) {
    printf("%s: process %d of %d (%s): %ld checks passed\n", prog, MYPROC, PROCS, splitc_backend(),
           sc_checks_);
    fflush(stdout);
    return 0;
}

/* A byte pattern that differs at every scale (a misplaced 4 KiB piece shows): a mix of
 * the position and a seed (who wrote it, to whom, which round). */
static inline uint8_t sc_pattern(size_t i, uint32_t seed) {
    uint32_t x = (uint32_t)i * 0x9E3779B1u + seed * 0x85EBCA77u + (uint32_t)(i >> 32);
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    return (uint8_t)x;
}

static inline void sc_fill(void *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = sc_pattern(i, seed);
}

/* The index of the first byte of p[0..n) that is not the pattern, or n. */
static inline size_t sc_mismatch(const void *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != sc_pattern(i, seed)) return i;
    return n;
}

#endif /* SC_TEST_H */
