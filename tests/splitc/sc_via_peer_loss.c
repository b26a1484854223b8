/* sc_via_peer_loss -- a process that goes away in the middle of the job: the others must
 * stop with a clear error within seconds, never hang (docs/splitc.md).
 *
 *   softvia-run -n N sc_via_peer_loss exit|stop
 *
 * Every process but 1 reads, writes and stores into process 1 (and its neighbours) in a
 * loop. Process 1 serves them for 300 ms, then
 *   exit  ends with _exit(0): status 0, so the launcher does not bring the job down;
 *         the others must notice by themselves (a broken VI, or via-unrel's timeout);
 *   stop  stops itself (SIGSTOP): it neither exits nor answers (via-unrel: the peer
 *         timeout, SPLITC_PEER_TIMEOUT_MS, must end the job).
 * The job must fail (a process reports the lost peer and exits 1). A process still
 * running after 60 s says so and exits 3, which the test counts as a failure too. */
#include <signal.h>
#include <splitc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

long cells[64];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int splitc_main(int argc, char **argv) {
    const int stop = argc > 1 && !strcmp(argv[1], "stop");
    if (argc < 2 || (!stop && strcmp(argv[1], "exit"))) {
        fprintf(stderr, "usage: sc_via_peer_loss exit|stop\n");
        return 2;
    }
    if (PROCS < 2) return 77;
    barrier();
    const double t0 = now_s();
    if (MYPROC == 1) {
        while (now_s() - t0 < 0.3) splitc_poll();
        printf("sc_via_peer_loss: process 1 %s now\n", stop ? "stops" : "exits");
        fflush(stdout);
        if (stop) raise(SIGSTOP);
        _exit(0);
    }
    for (long i = 0;; i++) {
        const gptr_t g = toglobal(1, &cells[i % 64]);
        write_long(g, i);
        if (read_long(g) != i) {
            fprintf(stderr, "sc_via_peer_loss: process %d: wrong value\n", MYPROC);
            return 1;
        }
        store_long(toglobal((int)(i % PROCS), &cells[MYPROC]), i);
        if (now_s() - t0 > 60) {
            fprintf(stderr, "sc_via_peer_loss: process %d: still running 60 s after process 1 went away\n", MYPROC);
            return 3;
        }
    }
}
