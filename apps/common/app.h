/* app.h -- what the Split-C applications (apps/) share: options, timing, the report line
 * and the verdict. Header-only: every application is one program.
 *
 * Every application takes
 *   --size NAME     the problem (each application lists its own; "small" for tests,
 *                   "paper" for the paper's size, the default)
 *   --t1 SECONDS    the time of the same problem on one process, to print the speedup
 *   --reps N        time N runs of the kernel (default 1) and report the best
 * and prints, from process 0, one line
 *   app=NAME size=S procs=P backend=B time_s=T rate=R unit=U speedup=X verified=yes|no
 * (speedup "-" without --t1), then exits 0 if its result is right and 1 if not. */
#ifndef APPS_APP_H
#define APPS_APP_H

#include <math.h>
#include <splitc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;  /* the application */
    const char *size;  /* --size */
    double t1;         /* --t1, 0 when not given */
    int reps;          /* --reps */
} app_opts;

static inline double app_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Stops the job with a message (from any process). */
static inline void app_die(const char *name, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static inline void app_die(const char *name, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "%s: process %d: ", name, MYPROC);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    splitc_exit(2);
}

/* Parses the common options; extra(i, argc, argv) handles the application's own (returns
 * how many arguments it took, 0 if none). sizes: the accepted --size values, NULL-ended. */
static inline app_opts app_parse(const char *name, int argc, char **argv, const char *const *sizes,
                                 int (*extra)(int, int, char **)) {
    app_opts o = {name, sizes[0], 0, 1};
    for (int i = 1; i < argc; i++) {
        int took = extra ? extra(i, argc, argv) : 0;
        if (took) {
            i += took - 1;
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            o.size = argv[++i];
            int ok = 0;
            for (const char *const *s = sizes; *s; s++) ok |= !strcmp(*s, o.size);
            if (!ok) {
                char list[256] = "";
                for (const char *const *s = sizes; *s; s++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", s == sizes ? "" : ", ", *s);
                app_die(name, "--size '%s': accepted sizes are %s", o.size, list);
            }
        } else if (!strcmp(argv[i], "--t1") && i + 1 < argc) {
            char *end;
            o.t1 = strtod(argv[++i], &end);
            if (*end || !(o.t1 > 0)) app_die(name, "--t1 '%s': a time in seconds above 0", argv[i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            o.reps = atoi(argv[++i]);
            if (o.reps < 1 || o.reps > 1000) app_die(name, "--reps '%s': 1 to 1000", argv[i]);
        } else {
            app_die(name, "unknown argument '%s' (options: --size S, --t1 SECONDS, --reps N, and the application's own)",
                    argv[i]);
        }
    }
    return o;
}

/* The report line (process 0) and the exit status: 0 when verified. */
static inline int app_report(const app_opts *o, double seconds, double rate, const char *unit, int verified) {
    if (MYPROC == 0) {
        char speedup[32] = "-";
        if (o->t1 > 0 && seconds > 0) snprintf(speedup, sizeof speedup, "%.3f", o->t1 / seconds);
        printf("app=%s size=%s procs=%d backend=%s time_s=%.6f rate=%.3f unit=%s speedup=%s verified=%s\n", o->name,
               o->size, PROCS, splitc_backend(), seconds, rate, unit, speedup, verified ? "yes" : "no");
        fflush(stdout);
    }
    return verified ? 0 : 1;
}

/* The NAS Parallel Benchmarks' generator: x <- a x mod 2^46, returned as x / 2^46. NPB
 * computes it in doubles with 23-bit halves; both are exact, so integers give the same
 * stream. */
static inline double npb_randlc(double *x, double a) {
    const unsigned __int128 p = (unsigned __int128)(uint64_t)a * (uint64_t)*x;
    const uint64_t r = (uint64_t)p & ((UINT64_C(1) << 46) - 1);
    *x = (double)r;
    return (double)r * (1.0 / (double)(UINT64_C(1) << 46));
}
static inline void npb_vranlc(long n, double *x, double a, double *y) {
    const uint64_t m = (UINT64_C(1) << 46) - 1, aa = (uint64_t)a;
    uint64_t v = (uint64_t)*x;
    for (long i = 0; i < n; i++) {
        v = (uint64_t)((unsigned __int128)aa * v) & m;
        y[i] = (double)v * (1.0 / (double)(UINT64_C(1) << 46));
    }
    *x = (double)v;
}
/* a^e mod 2^46 */
static inline double npb_ipow46(double a, long e) {
    double result = 1, q = a;
    if (e == 0) return 1;
    while (e > 1) {
        if (e % 2 == 0) {
            npb_randlc(&q, q);
            e /= 2;
        } else {
            npb_randlc(&result, q);
            e--;
        }
    }
    npb_randlc(&result, q);
    return result;
}

#endif /* APPS_APP_H */
