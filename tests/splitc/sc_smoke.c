#include <stdio.h>
#include <string.h>
#include <splitc.h>

int counter_g;
long table_g[64];

int splitc_main(int argc, char **argv) {
    (void)argc; (void)argv;
    printf("proc %d of %d on %s\n", MYPROC, PROCS, splitc_backend());
    int right = (MYPROC + 1) % PROCS;
    table_g[MYPROC] = 100 + MYPROC;
    barrier();
    long v = read_long(toglobal(right, &table_g[right]));
    if (v != 100 + right) { printf("read %ld want %d\n", v, 100 + right); return 1; }
    write_int(toglobal(right, &counter_g), 7 + MYPROC);
    barrier();
    int left = (MYPROC + PROCS - 1) % PROCS;
    if (counter_g != 7 + left) { printf("counter %d want %d\n", counter_g, 7 + left); return 1; }
    int *arr = all_spread_malloc(PROCS * 4, sizeof(int));
    for (int i = 0; i < PROCS * 4; i++) store_int(spread_gptr(arr, sizeof(int), (size_t)i), i * 3);
    all_store_sync();
    for (int i = 0; i < 4; i++) if (arr[i] != (i * PROCS + MYPROC) * 3) { printf("arr[%d]=%d\n", i, arr[i]); return 1; }
    long s = all_reduce_to_all_add_long(MYPROC + 1);
    if (s != (long)PROCS * (PROCS + 1) / 2) { printf("sum %ld\n", s); return 1; }
    long old = atomic_fetch_add_long(toglobal(0, &table_g[0]), 1);
    (void)old;
    barrier();
    if (MYPROC == 0 && table_g[0] != 100 + PROCS) { printf("fetch_add: %ld\n", table_g[0]); return 1; }
    char buf[10000];
    memset(buf, MYPROC + 1, sizeof buf);
    char *big = all_malloc(sizeof buf);
    bulk_put(toglobal(right, big), buf, sizeof buf);
    sync();
    barrier();
    for (size_t i = 0; i < sizeof buf; i++) if (big[i] != left + 1) { printf("big[%zu]=%d\n", i, big[i]); return 1; }
    char back[10000];
    bulk_get(back, toglobal(right, big), sizeof back);
    sync();
    for (size_t i = 0; i < sizeof back; i++) if (back[i] != MYPROC + 1) { printf("back[%zu]=%d\n", i, back[i]); return 1; }
    printf("proc %d: ok\n", MYPROC);
    return 0;
}
