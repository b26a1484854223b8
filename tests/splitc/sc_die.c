/* sc_die MODE -- the last process dies in the middle of the job while process 0 reads from
 * it in a loop and the others wait in a barrier; sc_expect.sh checks that the job stops
 * within seconds, with a status and message that say so. MODE:
 *   kill9   it is killed (SIGKILL, as kill -9 from outside)
 *   abort   it calls abort()
 *   exit0   it leaves with status 0 without a word (exit(0) in the middle of the job):
 *           nothing tells the launcher; the others must find out themselves */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "sc_test.h"

int word_g = 5;

int splitc_main(int argc, char **argv) {
    CHECK(argc == 2, "usage: sc_die kill9|abort|exit0");
    const char *mode = argv[1];
    const int last = PROCS - 1;
    CHECK(PROCS > 1, "needs 2 processes or more");
    barrier();
    if (MYPROC == last) {
        struct timespec t = {0, 100 * 1000000L};
        for (int i = 0; i < 5; i++) {
            nanosleep(&t, NULL);
            splitc_poll();
        }
        printf("sc_die: process %d dies (%s)\n", MYPROC, mode);
        fflush(stdout);
        if (!strcmp(mode, "kill9")) kill(getpid(), SIGKILL);
        if (!strcmp(mode, "abort")) abort();
        if (!strcmp(mode, "exit0")) exit(0);
        CHECK(0, "unknown mode '%s'", mode);
    }
    if (MYPROC == 0)
        for (;;) CHECK(read_int(toglobal(last, &word_g)) == 5, "read from %d", last);
    barrier();
    printf("sc_die: process %d left a barrier the dead process never entered\n", MYPROC);
    return 9;
}
