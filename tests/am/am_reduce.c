/*
 * am_reduce: all-to-one reduction. Every rank sends rank 0 its contributions: short
 * requests (one value each) and medium requests (vectors of int64); rank 0 adds them up
 * in handlers, checks the totals against the closed form, and sends the result back to
 * every rank, which checks it too.
 *   softvia-run -n N am_reduce [--count N]     (N >= 2)
 */
#include "am_mp.h"

enum { VEC = 256 };
static volatile int contributions, vectors, result_in;
static long long total, vec_total[VEC], result, vec_result0;

static void add_value(void *token, int hi, int lo) {
    (void)token;
    total += (long long)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
    contributions++;
}
static void add_vector(void *token, void *buf, size_t n) {
    (void)token;
    const long long *v = buf;
    for (size_t i = 0; i < n / sizeof *v; i++) vec_total[i] += v[i];
    vectors++;
}
static void got_result(void *token, int hi, int lo, int v0hi, int v0lo) {
    (void)token;
    result = (long long)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
    vec_result0 = (long long)(((uint64_t)(uint32_t)v0hi << 32) | (uint32_t)v0lo);
    result_in++;
}

static long long value(int rank, int i) { return (long long)rank * 1000003LL + i * 7LL + 1; }

int main(int argc, char **argv) {
    int count = 500;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--count")) count = atoi(argv[i + 1]);
    mp_start("am_reduce", -2, 0, 100);
    AM_CHECK(AM_SetHandler(mp_ep, 1, add_value));
    AM_CHECK(AM_SetHandler(mp_ep, 2, add_vector));
    AM_CHECK(AM_SetHandler(mp_ep, 3, got_result));
    AM_CHECK(AMX_SPMDBarrier());
    th_phase("contributions to rank 0");
    for (int i = 0; i < count; i++) {
        long long v = value(mp_rank, i);
        AM_CHECK(AM_Request2(mp_ep, 0, 1, (int)(v >> 32), (int)(uint32_t)v));
    }
    long long vec[VEC];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < VEC; i++) vec[i] = (long long)(mp_rank + 1) * (i + r);
        AM_CHECK(AM_RequestI0(mp_ep, 0, 2, vec, sizeof vec));
    }
    if (mp_rank == 0) {
        th_phase("rank 0 adds up");
        mp_poll_until(&contributions, count * mp_size, "contributions");
        mp_poll_until(&vectors, 4 * mp_size, "vectors");
        long long want = 0;
        for (int r = 0; r < mp_size; r++)
            for (int i = 0; i < count; i++) want += value(r, i);
        EXPECT(total == want, "sum %lld, want %lld", total, want);
        long long ranks = (long long)mp_size * (mp_size + 1) / 2;
        for (int i = 0; i < VEC; i++) {
            long long w = ranks * (4LL * i + 6);
            if (vec_total[i] != w) {
                EXPECT(vec_total[i] == w, "vector element %d: %lld, want %lld", i, vec_total[i], w);
                break;
            }
        }
        for (int r = 0; r < mp_size; r++)
            AM_CHECK(AM_Request4(mp_ep, r, 3, (int)(total >> 32), (int)(uint32_t)total, (int)(vec_total[0] >> 32),
                                 (int)(uint32_t)vec_total[0]));
        printf("am_reduce: %d ranks x %d values: sum %lld\n", mp_size, count, total);
    }
    th_phase("result back from rank 0");
    mp_poll_until(&result_in, 1, "the result");
    long long want = 0;
    for (int r = 0; r < mp_size; r++)
        for (int i = 0; i < count; i++) want += value(r, i);
    EXPECT(result == want, "result %lld, want %lld", result, want);
    EXPECT(vec_result0 == (long long)mp_size * (mp_size + 1) / 2 * 6, "vector result %lld", vec_result0);
    return mp_finish();
}
