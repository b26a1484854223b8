/*
 * am_pingpong: 2 ranks. Ping-pong (short request, short reply with the value + 1; the
 * round trip checked each time), then pipelined pings: rank 0 sends a stream of short
 * requests (credits pace it), rank 1 checks they arrive in order and replies to each;
 * rank 0 checks every reply. Prints one-way latency and message rate.
 *   softvia-run -n 2 am_pingpong [--iters N] [--pipeline N]
 */
#include "am_mp.h"

static volatile int pongs, pong_val, pings_seen, stream_next, stream_replies;
static volatile long long stream_sum;
static int stream_bad;

static void ping(void *token, int v) {
    pings_seen++;
    AM_Reply1(token, 2, v + 1);
}
static void pong(void *token, int v) {
    (void)token;
    pong_val = v;
    pongs++;
}
static void stream_req(void *token, int seq) {
    if (seq != stream_next) stream_bad++;
    stream_next = seq + 1;
    AM_Reply1(token, 4, seq);
}
static void stream_rep(void *token, int seq) {
    (void)token;
    stream_sum += seq;
    stream_replies++;
}

int main(int argc, char **argv) {
    int iters = 2000, pipeline = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pipeline")) pipeline = atoi(argv[i + 1]);
    }
    mp_start("am_pingpong", 2, 0, 100);
    AM_CHECK(AM_SetHandler(mp_ep, 1, ping));
    AM_CHECK(AM_SetHandler(mp_ep, 2, pong));
    AM_CHECK(AM_SetHandler(mp_ep, 3, stream_req));
    AM_CHECK(AM_SetHandler(mp_ep, 4, stream_rep));
    AM_CHECK(AMX_SPMDBarrier());
    th_phase("ping-pong");
    if (mp_rank == 0) {
        uint64_t t0 = at_now_ns();
        for (int i = 0; i < iters; i++) {
            AM_CHECK(AM_Request1(mp_ep, 1, 1, i * 3));
            mp_poll_until(&pongs, i + 1, "pong");
            if (pong_val != i * 3 + 1) FATAL("pong %d carried %d, want %d", i, pong_val, i * 3 + 1);
        }
        double us = (double)(at_now_ns() - t0) / 1e3 / iters / 2;
        printf("am_pingpong: %d round trips, one-way %.3f us (mean)\n", iters, us);
    }
    AM_CHECK(AMX_SPMDBarrier());
    if (mp_rank == 1) EXPECT(pings_seen == iters, "saw %d pings, want %d", pings_seen, iters);
    th_phase("pipelined pings");
    if (mp_rank == 0) {
        uint64_t t0 = at_now_ns();
        for (int i = 0; i < pipeline; i++) AM_CHECK(AM_Request1(mp_ep, 1, 3, i));
        mp_poll_until(&stream_replies, pipeline, "stream replies");
        double s = (double)(at_now_ns() - t0) / 1e9;
        long long want = (long long)pipeline * (pipeline - 1) / 2;
        EXPECT(stream_sum == want, "sum of replied sequence numbers %lld, want %lld", stream_sum, want);
        printf("am_pingpong: %d pipelined requests, %.0f messages/s\n", pipeline, pipeline / s);
    }
    AM_CHECK(AMX_SPMDBarrier());
    if (mp_rank == 1) {
        EXPECT(stream_next == pipeline && stream_bad == 0, "stream: next %d (want %d), %d out of order", stream_next,
                  pipeline, stream_bad);
    }
    return mp_finish();
}
