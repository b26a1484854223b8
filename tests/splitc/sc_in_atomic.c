/* sc_in_atomic -- an atomic_call function that makes a Split-C call (a read_long): the
 * function runs while its owner handles the request, where the back end cannot be entered
 * again, so the job must stop with status 1 and a message naming the call (not hang, not
 * crash), on every back end and on one process (where the call runs locally). */
#include <stdio.h>

#include "sc_test.h"

long cell_g;

static int64_t reads_inside(void *addr, int64_t arg) {
    (void)addr;
    return read_long(toglobal(0, &cell_g)) + arg;
}

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    barrier();
    if (MYPROC == 0) {
        const int64_t v = atomic_call(reads_inside, toglobal(PROCS - 1, &cell_g), 1);
        printf("sc_in_atomic: the call went through (%lld)\n", (long long)v);
        fflush(stdout);
        splitc_exit(3);
    }
    barrier(); /* process 0 never comes: the job ends before */
    return 0;
}
