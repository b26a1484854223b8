/* sc_samplesort -- the Split-C idiom of a sample sort across processes:
 *  1. every process draws N keys (a deterministic generator per process);
 *  2. each stores S samples into process 0 (bulk_store, all_store_sync); process 0 sorts
 *     them and picks PROCS-1 splitters, which everyone reads (bulk_read);
 *  3. each counts its keys per bucket and stores the counts into their buckets' owners;
 *     each owner works out where every sender's keys go and puts the offsets back;
 *  4. every process bulk_stores each bucket into its owner at that offset; all_store_sync;
 *  5. each sorts what it received.
 * Checked: every process's keys are sorted, each one's last key <= its right neighbour's
 * first (read_int), the count and two checksums of all keys are those of the input.
 *
 * usage: sc_samplesort [--keys N]   (per process; 20000) */
#include <stdlib.h>

#include "sc_test.h"

#define S 32 /* samples per process */
#define MAXP 64

int splitters[MAXP];
long counts_in[MAXP];  /* [w]: how many keys w sends here */
long offsets_at[MAXP]; /* [q]: where this process's keys go at q */
long recv_n;           /* how many keys this process received */

static int cmp(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int next_key(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int)(*s >> 34); /* 0 .. 2^30 - 1 */
}

int splitc_main(int argc, char **argv) {
    const long n = argc == 3 && !strcmp(argv[1], "--keys") ? atol(argv[2]) : 20000;
    const int P = PROCS;
    CHECK(P <= MAXP && n >= S, "at most %d processes, at least %d keys", MAXP, S);
    int *keys = malloc(sizeof(int) * (size_t)n);
    uint64_t seed = 77 + (uint64_t)MYPROC * 1000;
    long in_sum = 0, in_sq = 0;
    for (long i = 0; i < n; i++) {
        keys[i] = next_key(&seed);
        in_sum += keys[i];
        in_sq += (long)(keys[i] % 1000003) * (keys[i] % 1000003);
    }

    /* 2. samples to process 0, splitters back */
    int *samples = all_malloc(sizeof(int) * S * (size_t)P);
    int mine[S];
    for (int k = 0; k < S; k++) mine[k] = keys[(long)k * (n / S)];
    bulk_store(toglobal(0, &samples[MYPROC * S]), mine, sizeof mine);
    all_store_sync();
    if (MYPROC == 0) {
        qsort(samples, (size_t)(S * P), sizeof(int), cmp);
        for (int q = 1; q < P; q++) splitters[q - 1] = samples[q * S];
    }
    barrier();
    if (P > 1) bulk_read(splitters, toglobal(0, splitters), sizeof(int) * (size_t)(P - 1));

    /* 3. buckets, counts to the owners, offsets back */
    int *bucket_of = malloc(sizeof(int) * (size_t)n);
    long count[MAXP] = {0};
    for (long i = 0; i < n; i++) {
        int b = 0;
        while (b < P - 1 && keys[i] >= splitters[b]) b++;
        bucket_of[i] = b;
        count[b]++;
    }
    for (int q = 0; q < P; q++) store_long(toglobal(q, &counts_in[MYPROC]), count[q]);
    all_store_sync();
    long at = 0;
    for (int w = 0; w < P; w++) {
        put_long(toglobal(w, &offsets_at[MYPROC]), at);
        at += counts_in[w];
    }
    recv_n = at;
    sync();
    const long most = all_reduce_to_all_max_long(recv_n); /* all_malloc takes the same size everywhere */
    int *recv = all_malloc(sizeof(int) * (size_t)(most > 0 ? most : 1));
    CHECK(recv != NULL, "all_malloc of %ld keys", most);

    /* 4. each bucket in one bulk_store */
    int *out = malloc(sizeof(int) * (size_t)n);
    long start[MAXP], fill[MAXP];
    for (int q = 0, s = 0; q < P; q++) start[q] = s, fill[q] = s, s += (int)count[q];
    for (long i = 0; i < n; i++) out[fill[bucket_of[i]]++] = keys[i];
    for (int q = 0; q < P; q++)
        bulk_store(toglobal(q, &recv[offsets_at[q]]), &out[start[q]], sizeof(int) * (size_t)count[q]);
    all_store_sync();

    /* 5. sort and check */
    qsort(recv, (size_t)recv_n, sizeof(int), cmp);
    long sum = 0, sq = 0;
    for (long i = 0; i < recv_n; i++) {
        if (i) CHECK(recv[i - 1] <= recv[i], "not sorted at %ld", i);
        if (MYPROC > 0) CHECK(recv[i] >= splitters[MYPROC - 1], "key %d below my splitter", recv[i]);
        if (MYPROC < P - 1) CHECK(recv[i] < splitters[MYPROC], "key %d above my splitter", recv[i]);
        sum += recv[i];
        sq += (long)(recv[i] % 1000003) * (recv[i] % 1000003);
    }
    barrier();
    /* my last key <= the first key of the next process that has any */
    if (recv_n > 0) {
        for (int q = MYPROC + 1; q < P; q++) {
            if (read_long(toglobal(q, &recv_n)) == 0) continue;
            int first = read_int(toglobal(q, &recv[0]));
            CHECK(recv[recv_n - 1] <= first, "process %d's first key %d < my last %d", q, first, recv[recv_n - 1]);
            break;
        }
    }
    CHECK(all_reduce_to_all_add_long(recv_n) == n * P, "keys lost or duplicated");
    CHECK(all_reduce_to_all_add_long(sum) == all_reduce_to_all_add_long(in_sum), "checksum (sum) differs");
    CHECK(all_reduce_to_all_add_long(sq) == all_reduce_to_all_add_long(in_sq), "checksum (squares) differs");
    barrier();
    all_free(recv);
    all_free(samples);
    free(out);
    free(bucket_of);
    free(keys);
    return sc_done("sc_samplesort");
}
