/* A Split-C program built against an installed softvia: one process (not launched), a
 * spread array, a store, a read through a global pointer, a reduction. Prints OK. */
#include <splitc.h>
#include <stdio.h>

long total;

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    long *a = all_spread_malloc(4, sizeof(long));
    for (int i = 0; i < 4; i++) store_long(spread_gptr(a, sizeof(long), (size_t)i), 10 * i);
    all_store_sync();
    total = all_reduce_to_all_add_long(read_long(spread_gptr(a, sizeof(long), 3)));
    barrier();
    if (PROCS != 1 || total != 30 || read_long(toglobal(MYPROC, &total)) != 30) {
        printf("sc_app: PROCS %d, total %ld\n", PROCS, total);
        return 1;
    }
    printf("sc_app on %s\nOK\n", splitc_backend());
    return 0;
}
