/* startup_bench - one point of the start-up figure: how long a job takes from the
 * launcher's start to its first barrier. The launcher records the wall clock before it
 * starts (tools/bench/startup_compare.sh passes it as the argument); every process
 * initialises the bootstrap and enters a barrier, and rank 0 prints the time since then.
 *   softvia-run -n N startup_bench <start time, ns since the epoch>
 *   mpirun -np N startup_bench <start time, ns since the epoch> */
#include "softvia_boot.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: startup_bench <launch time in ns since the epoch>\n");
        return 2;
    }
    long long t0 = atoll(argv[1]);
    int rank, size;
    if (sv_boot_init(&rank, &size) != 0) {
        fprintf(stderr, "startup_bench: %s\n", sv_boot_last_error());
        return 1;
    }
    if (sv_boot_barrier(60000) != 0) {
        fprintf(stderr, "startup_bench: barrier: %s\n", sv_boot_last_error());
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long t1 = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
    if (rank == 0)
        printf("%s %d %.1f\n", sv_boot_backend(), size, (double)(t1 - t0) / 1e6);
    return 0;
}
