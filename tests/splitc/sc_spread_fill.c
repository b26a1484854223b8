/* sc_spread_fill -- the Split-C idiom of a spread array filled by stores and read back:
 * a cyclic spread array of ints (element i on process i % PROCS) whose elements are
 * stored by processes other than their owners, then all_store_sync, then read back by
 * everyone (read_int, get_int + sync, and bulk_read of each owner's local part), and
 * checked by each owner through its local pointer; and a blocked spread array (blocks of
 * 16 doubles) filled block by block with bulk_store and completed with store_sync (each
 * owner knows how many bytes it gets). */
#include <stdlib.h>

#include "sc_test.h"

static int f(size_t i) { return (int)(i * 2654435761u) ^ 0x5a5a; }
static double g(size_t i, size_t k) { return (double)i + (double)k / 16.0 + 0.125; }

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const size_t P = (size_t)PROCS, me = (size_t)MYPROC;
    const size_t n = 1000 * P + 3;
    int *A = all_spread_malloc(n, sizeof(int));
    CHECK(A != NULL, "all_spread_malloc");
    /* element i is stored by process (i + 1) % P: never its owner when P > 1 */
    for (size_t i = 0; i < n; i++)
        if ((i + 1) % P == me) store_int(spread_gptr(A, sizeof(int), i), f(i));
    all_store_sync();
    /* the owner sees its elements in local memory: A[j] is element j * P + me */
    const size_t local_n = (n - me + P - 1) / P;
    for (size_t j = 0; j < local_n; j++)
        CHECK(A[j] == f(j * P + me), "local element %zu (global %zu) = %d", j, j * P + me, A[j]);
    /* everyone reads everything back, three ways */
    for (size_t i = me; i < n; i += 17) { /* a sample: each is a round trip */
        int v = read_int(spread_gptr(A, sizeof(int), i));
        CHECK(v == f(i), "read_int element %zu = %d", i, v);
    }
    int *got = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++) get_int(&got[i], spread_gptr(A, sizeof(int), i));
    sync();
    for (size_t i = 0; i < n; i++) CHECK(got[i] == f(i), "get_int element %zu = %d", i, got[i]);
    for (size_t q = 0; q < P; q++) {
        const size_t qn = (n - q + P - 1) / P;
        bulk_read(got, toglobal((int)q, A), qn * sizeof(int));
        for (size_t j = 0; j < qn; j++) CHECK(got[j] == f(j * P + q), "bulk_read of %zu's part, element %zu", q, j);
    }
    free(got);
    barrier();
    all_spread_free(A);

    /* blocked: nb blocks of 16 doubles, block b on process b % P */
    const size_t nb = 7 * P + 1, bs = 16 * sizeof(double);
    double *B = all_spread_malloc(nb, bs);
    CHECK(B != NULL, "all_spread_malloc blocked");
    reset_store_sync();
    barrier();
    double blk[16];
    for (size_t b = 0; b < nb; b++) {
        if ((b + P - 1) % P != me) continue; /* stored by the owner's left neighbour */
        for (size_t k = 0; k < 16; k++) blk[k] = g(b, k);
        bulk_store(spread_gptr(B, bs, b), blk, bs);
    }
    const size_t mine = (nb - me + P - 1) / P;
    store_sync(mine * bs);
    for (size_t j = 0; j < mine; j++)
        for (size_t k = 0; k < 16; k++)
            CHECK(B[j * 16 + k] == g(j * P + me, k), "block %zu element %zu = %g", j * P + me, k, B[j * 16 + k]);
    barrier();
    all_spread_free(B);
    return sc_done("sc_spread_fill");
}
