/* sc_exit CODE -- the last process calls splitc_exit(CODE) while the others wait for it
 * (process 0 in a loop of reads from it, the rest in a barrier it never enters): the job
 * must end with status CODE, promptly (sc_expect.sh checks both), CODE 0 included. */
#include <stdlib.h>
#include <time.h>

#include "sc_test.h"

int word_g = 5;

int splitc_main(int argc, char **argv) {
    CHECK(argc == 2, "usage: sc_exit CODE");
    const int code = atoi(argv[1]);
    const int last = PROCS - 1;
    barrier();
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
