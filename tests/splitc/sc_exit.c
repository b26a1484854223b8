/* sc_exit CODE [flood N] -- the last process calls splitc_exit(CODE) while the others
 * wait for it (process 0 in a loop of reads from it, the rest in a barrier it never
 * enters): the job must end with status CODE, promptly (sc_expect.sh checks both), CODE 0
 * included. flood N: process 0 computes for a second without polling while the last one
 * sends it N puts and then calls splitc_exit: with one message per put (SPLITC_GATHER=0)
 * and N = the channel's 64 credits, none is left for the exit message at that moment;
 * process 0 must still be told (the code is the job's, not a "lost process"). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sc_test.h"

int word_g = 5;

int splitc_main(int argc, char **argv) {
    CHECK(argc == 2 || (argc == 4 && !strcmp(argv[2], "flood")), "usage: sc_exit CODE [flood N]");
    const int code = atoi(argv[1]);
    const int flood = argc == 4 ? atoi(argv[3]) : 0;
    const int last = PROCS - 1;
    barrier();
    if (flood && MYPROC == 0 && last != 0) {
        struct timespec t = {1, 0};
        nanosleep(&t, NULL); /* not polling: nothing sent to us is acknowledged meanwhile */
    }
    if (flood && MYPROC == last) {
        struct timespec t = {0, 200 * 1000000L}; /* process 0 is asleep by then */
        nanosleep(&t, NULL);
        for (int i = 0; i < flood; i++) put_int(toglobal(0, &word_g), 5);
        printf("sc_exit: process %d calls splitc_exit(%d)\n", MYPROC, code);
        fflush(stdout);
        splitc_exit(code);
    }
    if (MYPROC == last) {
        struct timespec t = {0, 100 * 1000000L}; /* the others are waiting by then */
        for (int i = 0; i < 5; i++) {
            nanosleep(&t, NULL);
            splitc_poll(); /* keep answering the reads */
        }
        printf("sc_exit: process %d calls splitc_exit(%d)\n", MYPROC, code);
        fflush(stdout);
        splitc_exit(code);
    }
    if (MYPROC == 0)
        for (;;) CHECK(read_int(toglobal(last, &word_g)) == 5, "read from %d", last);
    barrier(); /* never complete: the last process does not come */
    printf("sc_exit: process %d left a barrier the last process never entered\n", MYPROC);
    return 9;
}
