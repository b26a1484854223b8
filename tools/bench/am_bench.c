/*
 * am_bench -- Active Messages (AM-2 over VIPL) between two processes.
 *
 *   softvia-run -n 2 --pin am_bench [--mode steer|marshal] [--iters N] [--msgs N]
 *                                    [--csv FILE] [--label TEXT] [--only lat|rate|logp|sizes]
 *                                    [--logp-csv FILE] [--sizes LIST] [--bulk-mib N]
 *
 * lat:  rank 0 sends a short request with 2 arguments (8 bytes), rank 1's handler
 *       replies with 2 arguments, rank 0 polls until the reply handler ran; one-way =
 *       half of each round trip, median and p99 (as ucx_perftest -t ucp_am_lat).
 * rate: rank 0 sends a stream of short requests with 2 arguments whose handler does
 *       not reply (credits come back batched, as the implicit reply); the figure is
 *       messages per second until rank 1 has run every handler (as -t ucp_am_bw -s 8).
 * logp: the LogP signature (Culler et al.): bursts of B requests with a delay D
 *       between sends; time per message against D gives o_s (D = 0, one message) and
 *       g (D = 0, long bursts). o_r is the receiver's time per message when messages
 *       are already waiting: rank 1 stops polling for 200 us, rank 0 sends a burst
 *       of 32 meanwhile, and rank 1 times how long its polls take to handle them all
 *       (with inline progress that includes its NIC's receive work, which the host
 *       CPU does). L = one-way latency - o_s - o_r. CSV with --logp-csv.
 * sizes: the paper's Figure 6-1 for medium messages of each size in --sizes (default 4 to
 *       4096 bytes): one-way time (a medium request of n bytes whose handler answers with a
 *       medium reply of n bytes; half the round trip, median and p99) and streaming
 *       bandwidth (a stream of medium requests of n bytes, handlers that do not reply,
 *       until rank 1 has run them all). CSV: am_size_lat,<label>,n,median,p99,, and
 *       am_size_bw,<label>,n,,,MB/s,msgs/s.
 * bulk: 1 MiB transfers, each as 16 long requests of AM_MaxLong() (64 KiB) into rank 1's
 *       segment (AM_RequestXfer), back to back, --bulk-mib MiB in all; the last request's
 *       handler answers once every earlier one ran (a channel's handlers run in order), and
 *       every handler checks that its chunk arrived whole (first and last words). The
 *       figure is MiB/s from the first send to that answer. CSV: am_bulk,<label>,1048576,,,
 *       MiB/s,transfers/s.
 * The mode (firmware request/reply steering or host marshalling) applies to both ranks.
 */
#define _GNU_SOURCE
#include <am.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "am_bench: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CK(x) do { int r_ = (x); if (r_ != AM_OK) DIE("%s failed: %s (line %d)", #x, AMX_ErrorString(r_), __LINE__); } while (0)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static eb_t eb;
static ep_t ep;
static int rank;
static volatile int replies, received, done_replies;
static volatile int stream_count;
static volatile uint64_t recv_busy_ns;

static void ping(void *token, int a, int b) { AM_Reply2(token, 2, a, b); }
static void pong(void *token, int a, int b) { (void)token; (void)a; (void)b; replies++; }
static void sink(void *token, int a, int b) { (void)token; (void)a; (void)b; received++; }
static void done_req(void *token, int want) {
    /* in order on the short channel: every earlier request has been handled */
    AM_Reply1(token, 4, received - want);
    stream_count = 0;
}
static volatile int done_diff;
static void done_rep(void *token, int diff) { (void)token; done_diff = diff; done_replies++; }

static void wait_replies(volatile int *c, int want) {
    while (*c < want) AM_Poll(eb);
}

/* medium messages (sizes) */
static char medbuf[65536];
static void mping(void *token, void *buf, size_t n) { AM_ReplyI0(token, 11, buf, n); }
static void mpong(void *token, void *buf, size_t n) { (void)token; (void)buf; (void)n; replies++; }
static void msink(void *token, void *buf, size_t n) { (void)token; (void)buf; (void)n; received++; }

static void sizes_run(const char *list, int iters, int msgs, FILE *csv, const char *label) {
    char *copy = strdup(list), *save = NULL;
    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters);
    if (rank == 0) printf("%-10s %8s %10s %10s %12s\n", "op", "bytes", "median_us", "p99_us", "MB/s");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const int n = atoi(tok);
        if (n < 1 || n > AM_MaxMedium()) DIE("--sizes: %s is not a medium message size (1 to %d)", tok, AM_MaxMedium());
        CK(AMX_SPMDBarrier());
        if (rank == 0) {
            const int warm = iters / 10 + 10;
            for (int i = -warm; i < iters; i++) {
                const int want = replies + 1;
                const uint64_t t0 = now_ns();
                CK(AM_RequestI0(ep, 1, 10, medbuf, (size_t)n));
                wait_replies(&replies, want);
                if (i >= 0) t[i] = now_ns() - t0;
            }
            qsort(t, (size_t)iters, sizeof *t, cmp_u64);
            const double med = t[iters / 2] / 2000.0, p99 = t[(size_t)iters * 99 / 100] / 2000.0;
            /* a stream of about msgs * 8 bytes, at least 2000 messages */
            long count = (long)msgs * 8 / n;
            if (count < 2000) count = 2000;
            if (count > msgs) count = msgs;
            const uint64_t s0 = now_ns();
            for (long i = 0; i < count; i++) CK(AM_RequestI0(ep, 1, 12, medbuf, (size_t)n));
            const int want = done_replies + 1;
            CK(AM_Request1(ep, 1, 5, (int)count));
            wait_replies(&done_replies, want);
            const double secs = (now_ns() - s0) / 1e9;
            if (done_diff != 0) DIE("sizes: receiver counted %d messages more than sent", done_diff);
            printf("%-10s %8d %10.3f %10.3f %12.1f\n", "am_medium", n, med, p99, count * (double)n / secs / 1e6);
            if (csv) {
                fprintf(csv, "am_size_lat,%s,%d,%.4f,%.4f,,\n", label, n, med, p99);
                fprintf(csv, "am_size_bw,%s,%d,,,%.2f,%.0f\n", label, n, count * (double)n / secs / 1e6, count / secs);
            }
        }
        CK(AMX_SPMDBarrier());
        if (rank == 1) received = 0;
        CK(AMX_SPMDBarrier());
    }
    free(t);
    free(copy);
}

/* bulk (1 MiB transfers as 64 KiB long requests) */
enum { BULK_BYTES = 1 << 20, BULK_CHUNK = AM_MaxLong(), BULK_CHUNKS = BULK_BYTES / BULK_CHUNK };
static uint64_t *bulk_src;
static volatile int bulk_bad, bulk_answers;
static volatile long bulk_seen;
/* chunk i of transfer t starts and ends with the word t * BULK_CHUNKS + i + 1 */
static void bulk_fill(long t) {
    for (int i = 0; i < BULK_CHUNKS; i++) {
        uint64_t *w = bulk_src + (size_t)i * (BULK_CHUNK / 8);
        w[0] = w[BULK_CHUNK / 8 - 1] = (uint64_t)(t * BULK_CHUNKS + i + 1);
    }
}
static void bulk_sink(void *token, void *buf, size_t n, int t, int i, int last) {
    const uint64_t *w = buf;
    const uint64_t want = (uint64_t)t * BULK_CHUNKS + (uint64_t)i + 1;
    if (n != BULK_CHUNK || w[0] != want || w[BULK_CHUNK / 8 - 1] != want) bulk_bad++;
    bulk_seen++;
    if (last) AM_Reply2(token, 14, bulk_bad, (int)bulk_seen);
}
static void bulk_done(void *token, int bad, int seen) {
    (void)token;
    bulk_bad = bad;
    bulk_seen = seen;
    bulk_answers++;
}
static void bulk(int mib, FILE *csv, const char *label) {
    CK(AMX_SPMDBarrier());
    if (rank == 0) {
        bulk_src = aligned_alloc(4096, BULK_BYTES);
        if (!bulk_src) DIE("bulk: out of memory");
        memset(bulk_src, 0xab, BULK_BYTES);
        long chunks_sent = 0; /* the receiver counts the warm-up's chunks too */
        for (int warm = 0; warm < 2; warm++) {
            const long transfers = warm ? mib : (mib / 10 + 1);
            const int want = bulk_answers + 1;
            const uint64_t t0 = now_ns();
            for (long t = 0; t < transfers; t++) {
                bulk_fill(t);
                for (int i = 0; i < BULK_CHUNKS; i++)
                    CK(AM_RequestXfer3(ep, 1, (uintptr_t)i * BULK_CHUNK, 13, (char *)bulk_src + (size_t)i * BULK_CHUNK,
                                       BULK_CHUNK, (int)t, i, t == transfers - 1 && i == BULK_CHUNKS - 1));
            }
            wait_replies(&bulk_answers, want);
            chunks_sent += transfers * BULK_CHUNKS;
            const double secs = (now_ns() - t0) / 1e9;
            if (bulk_bad) DIE("bulk: %d chunks arrived damaged or out of place", bulk_bad);
            if (bulk_seen != chunks_sent)
                DIE("bulk: the receiver ran %ld handlers for %ld chunks", (long)bulk_seen, chunks_sent);
            if (!warm) continue;
            const double mibps = transfers / secs;
            printf("%-10s %8d %12.1f MiB/s\n", "am_bulk", BULK_BYTES, mibps);
            if (csv) fprintf(csv, "am_bulk,%s,%d,,,%.2f,%.1f\n", label, BULK_BYTES, mibps, transfers / secs);
        }
        free(bulk_src);
    }
    CK(AMX_SPMDBarrier());
    CK(AMX_SPMDBarrier());
}

static void latency(int iters, FILE *csv, const char *label) {
    int warm = iters / 10 + 10;
    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters);
    CK(AMX_SPMDBarrier());
    if (rank == 0) {
        for (int i = -warm; i < iters; i++) {
            int want = replies + 1;
            uint64_t t0 = now_ns();
            CK(AM_Request2(ep, 1, 1, i, 7));
            wait_replies(&replies, want);
            if (i >= 0) t[i] = now_ns() - t0;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_u64);
        double med = t[iters / 2] / 2000.0, p99 = t[(size_t)iters * 99 / 100] / 2000.0;
        printf("%-10s %8d %10.3f %10.3f\n", "am_lat", 8, med, p99);
        if (csv) fprintf(csv, "am_lat,%s,8,%.4f,%.4f,,\n", label, med, p99);
    }
    CK(AMX_SPMDBarrier());
    free(t);
}

static void rate(int msgs, FILE *csv, const char *label) {
    CK(AMX_SPMDBarrier());
    if (rank == 0) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < msgs; i++) CK(AM_Request2(ep, 1, 3, i, 0));
        int want = done_replies + 1;
        CK(AM_Request1(ep, 1, 5, msgs));
        wait_replies(&done_replies, want);
        double secs = (now_ns() - t0) / 1e9;
        if (done_diff != 0) DIE("rate: receiver counted %d messages more than sent", done_diff);
        printf("%-10s %8d %12.0f msgs/s\n", "am_rate", 8, msgs / secs);
        if (csv) fprintf(csv, "am_rate,%s,8,,,%.2f,%.0f\n", label, msgs * 8 / secs / 1e6, msgs / secs);
    }
    CK(AMX_SPMDBarrier());
    if (rank == 1) received = 0;
    CK(AMX_SPMDBarrier());
}

/* o_r: rank 0 asks rank 1 to hold (handler 7, answered by 8), then sends its burst; rank
 * 1 reports each drain's time (handler 9). */
static volatile int hold_now, hold_replies, drains_reported;
static uint64_t drain_ns[64];
static void hold_req(void *token) { hold_now = 1; AM_Reply0(token, 8); }
static void hold_rep(void *token) { (void)token; hold_replies++; }
static void drain_report(void *token, int ns, int r) {
    (void)token;
    if (r >= 0 && r < 64) drain_ns[r] = (uint64_t)ns;
    drains_reported++;
}
static void counting_sink(void *token, int a, int b) { (void)token; (void)a; (void)b; stream_count++; }

/* LogP: for each delay D and burst size B, rank 0 times B sends with D of busy work
 * between them (time per message = total / B), then waits for rank 1's
 * acknowledgement of the burst outside the timed part. */
static void spin_ns(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) {
    }
}
static void logp(const char *path, const char *label, double lat_us) {
    static const int delays[] = {0, 100, 200, 400, 800, 1600, 3200};
    static const int bursts[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    FILE *f = NULL;
    if (rank == 0 && path) {
        f = fopen(path, "w");
        if (!f) DIE("cannot open %s", path);
        fprintf(f, "label,delay_ns,burst,us_per_msg\n");
    }
    double os = 0, g = 0;
    CK(AMX_SPMDBarrier());
    for (size_t di = 0; di < sizeof delays / sizeof *delays; di++)
        for (size_t bi = 0; bi < sizeof bursts / sizeof *bursts; bi++) {
            int B = bursts[bi], reps = 20;
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                if (rank == 0) {
                    uint64_t t0 = now_ns();
                    for (int i = 0; i < B; i++) {
                        CK(AM_Request2(ep, 1, 3, i, 0));
                        if (delays[di]) spin_ns((uint64_t)delays[di]);
                    }
                    double per = (now_ns() - t0) / 1e3 / B;
                    if (per < best) best = per;
                    int want = done_replies + 1;
                    CK(AM_Request1(ep, 1, 5, 0));
                    wait_replies(&done_replies, want);
                }
            }
            if (rank == 0) {
                if (f) fprintf(f, "%s,%d,%d,%.4f\n", label, delays[di], B, best);
                if (delays[di] == 0 && B == 1) os = best;
                if (delays[di] == 0 && B == 512) g = best;
            }
            CK(AMX_SPMDBarrier());
        }
    /* receive overhead: the time to handle messages that are already waiting */
    CK(AMX_SPMDBarrier());
    enum { OR_REPS = 50, OR_BURST = 32, OR_HOLD_NS = 200000 };
    double orecv = 0;
    if (rank == 0) {
        for (int r = 0; r < OR_REPS; r++) {
            int want = hold_replies + 1;
            CK(AM_Request0(ep, 1, 7));
            wait_replies(&hold_replies, want);
            for (int i = 0; i < OR_BURST; i++) CK(AM_Request2(ep, 1, 3, i, 0)); /* into rank 1's hold */
            wait_replies(&drains_reported, r + 1);
        }
        qsort(drain_ns, OR_REPS, sizeof *drain_ns, cmp_u64);
        orecv = drain_ns[OR_REPS / 2] / 1e3 / OR_BURST;
    } else {
        for (int r = 0; r < OR_REPS; r++) {
            while (!hold_now) AM_Poll(eb);
            hold_now = 0;
            spin_ns(OR_HOLD_NS); /* not polling: the burst waits in our NIC's lane */
            int want = stream_count + OR_BURST;
            uint64_t t0 = now_ns();
            while (stream_count < want) AM_Poll(eb);
            uint64_t dt = now_ns() - t0;
            CK(AM_Request2(ep, 0, 9, (int)(dt & 0x7fffffff), r));
        }
        stream_count = 0;
    }
    CK(AMX_SPMDBarrier());
    if (rank == 0) {
        double L = lat_us - os - orecv;
        printf("logp: o_s %.3f us, o_r %.3f us, g %.3f us, L %.3f us (one-way %.3f us)\n", os, orecv, g, L, lat_us);
        if (f) {
            fprintf(f, "# %s o_s=%.4f o_r=%.4f g=%.4f L=%.4f\n", label, os, orecv, g, L);
            fclose(f);
        }
    }
}

static void usage(void) {
    fprintf(stderr, "usage: softvia-run -n 2 --pin am_bench [--mode steer|marshal] [--iters N] [--msgs N]\n"
                    "       [--csv FILE] [--label TEXT] [--only lat|rate|logp|sizes|bulk] [--logp-csv FILE] [--sizes LIST]\n"
                    "       [--bulk-mib N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *mode = "steer", *csvpath = NULL, *label = NULL, *only = NULL, *logp_csv = NULL;
    const char *size_list = "4,16,64,256,1024,4096";
    int iters = 20000, msgs = 200000, bulk_mib = 2048;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--msgs")) msgs = atoi(v);
        else if (!strcmp(a, "--csv")) csvpath = v;
        else if (!strcmp(a, "--label")) label = v;
        else if (!strcmp(a, "--only")) only = v;
        else if (!strcmp(a, "--logp-csv")) logp_csv = v;
        else if (!strcmp(a, "--sizes")) size_list = v;
        else if (!strcmp(a, "--bulk-mib")) bulk_mib = atoi(v);
        else usage();
        i++;
    }
    if (iters < 10 || msgs < 1 || bulk_mib < 1 || (strcmp(mode, "steer") && strcmp(mode, "marshal"))) usage();
    if (!label) label = !strcmp(mode, "steer") ? "am-steer" : "am-marshal";
    AMX_SetSteering(!strcmp(mode, "steer"));
    const int want_bulk = only && !strcmp(only, "bulk");
    CK(AMX_SPMDStartup(0x62656e63, want_bulk ? BULK_BYTES : 0, &eb, &ep));
    rank = AMX_SPMDMyProc();
    if (AMX_SPMDNumProcs() != 2) DIE("run with: softvia-run -n 2 am_bench ...");
    CK(AM_SetHandler(ep, 1, ping));
    CK(AM_SetHandler(ep, 2, pong));
    CK(AM_SetHandler(ep, 3, sink));
    CK(AM_SetHandler(ep, 4, done_rep));
    CK(AM_SetHandler(ep, 5, done_req));
    CK(AM_SetHandler(ep, 7, hold_req));
    CK(AM_SetHandler(ep, 8, hold_rep));
    CK(AM_SetHandler(ep, 9, drain_report));
    CK(AM_SetHandler(ep, 10, mping));
    CK(AM_SetHandler(ep, 11, mpong));
    CK(AM_SetHandler(ep, 12, msink));
    CK(AM_SetHandler(ep, 13, bulk_sink));
    CK(AM_SetHandler(ep, 14, bulk_done));
    FILE *csv = NULL;
    if (rank == 0 && csvpath && !(csv = fopen(csvpath, "a"))) DIE("cannot open %s", csvpath);
    if (rank == 0) printf("# am_bench: %s, mode=%s, one-way latency in us\n", getenv("SOFTVIA_DEVICE") ? getenv("SOFTVIA_DEVICE") : "shm", mode);
    if (!only || !strcmp(only, "lat")) latency(iters, csv, label);
    if (!only || !strcmp(only, "rate")) rate(msgs, csv, label);
    if (want_bulk) bulk(bulk_mib, csv, label);
    if (only && !strcmp(only, "sizes")) sizes_run(size_list, iters, msgs, csv, label);
    if (only && !strcmp(only, "logp")) {
        /* one-way latency for L, then the signature; rank 1 times its handling */
        int warm = 1000;
        double lat = 0;
        CK(AMX_SPMDBarrier());
        if (rank == 0) {
            uint64_t t0 = 0;
            for (int i = -warm; i < iters; i++) {
                if (i == 0) t0 = now_ns();
                int want = replies + 1;
                CK(AM_Request2(ep, 1, 1, i, 7));
                wait_replies(&replies, want);
            }
            lat = (now_ns() - t0) / 2e3 / iters;
        }
        CK(AM_SetHandler(ep, 3, counting_sink));
        logp(logp_csv, label, lat);
    }
    if (csv) fclose(csv);
    CK(AMX_SPMDExit());
    return 0;
}
