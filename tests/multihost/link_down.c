/*
 * link_down -- a stream of messages across a link that goes down for a while.
 *
 *   softvia-run -n 2 --hosts 2 --at-from stream-start --at 1000:1:down --at 3000:1:up \
 *       link_down LEVEL [EXPECT] [--duration MS] [--outage DOWN:UP] [--simulate]
 *
 *   LEVEL    U, RD or RR: the reliability level of the one VI between the two ranks
 *   EXPECT   reliable levels: "recover" (the retry timeout outlasts the outage: every
 *            message arrives exactly once, in order, intact, and every send succeeds) or
 *            "fail" (it does not: the sender's VI ends in VIP_STATE_ERROR with error
 *            completions, nothing arrives twice or out of order, and the program still
 *            ends in bounded time)
 *   --duration MS     how long rank 0 keeps sending (default 5000)
 *   --outage DOWN:UP  when the link is down, in ms after rank 0 stores the launcher key
 *                     "stream-start" (default 1000:3000); it must match the --at times
 *   --simulate        no launcher outage: both ranks make their own wire lose every frame
 *                     from DOWN to UP with the fault injector (SOFTVIA_FAULTS must be set),
 *                     for wires whose link the launcher cannot pull (shm)
 *
 * The NIC is SOFTVIA_DEVICE's; the retry timeout is SOFTVIA_RETRY_TIMEOUT_MS's. Rank 0
 * sends one message a millisecond (16 B to 3000 B, so some take two frames at MTU 1500),
 * each with its sequence number, length and checksum; rank 1 checks each. Unreliable:
 * whatever arrives is intact and in increasing order; gaps are expected, but nothing sent
 * well inside the outage may arrive. Every run checks that the outage really happened
 * mid-stream: two consecutive arrivals must have been sent at least half the outage
 * apart (each message carries its send time), so a run whose link never went down fails
 * instead of passing for nothing. The ranks tell each other their results through launcher keys,
 * which do not depend on the link. Exits 0 when everything expected was seen.
 */
#define _POSIX_C_SOURCE 200809L
#include <softvia_boot.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vipl.h>

#define DIE(...) do { fprintf(stderr, "link_down[%d]: ", rank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CK(x) do { VIP_RETURN r_ = (x); if (r_ != VIP_SUCCESS) DIE("%s: %s", #x, VipExtReturnString(r_)); } while (0)

enum { RING = 64, MAXMSG = 3000, CREDIT_EVERY = 16, PACE_US = 1000, KEY_POLL_US = 10000 };
enum expect { EXPECT_NONE, EXPECT_RECOVER, EXPECT_FAIL };

static int rank;
static VIP_NIC_HANDLE nic;
static VIP_VI_HANDLE vi;
static VIP_MEM_HANDLE mh;
static VIP_DESCRIPTOR *desc[2 * RING];
static uint8_t *buf[2 * RING];
static int conn_lost; /* VIP_ERROR_CONN_LOST reports */

static struct {
    VIP_RELIABILITY_LEVEL level;
    enum expect expect;
    long duration_ms, down_ms, up_ms;
    int simulate;
    const char *faults; /* SOFTVIA_FAULTS, restored when a simulated outage ends */
} opt = {VIP_SERVICE_UNRELIABLE, EXPECT_NONE, 5000, 1000, 3000, 0, NULL};

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint32_t fnv(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* sent_us: when rank 0 posted the message, in us after it started the stream (one
 * monotonic clock for both ranks: they share a kernel). sum covers sent_us and the body. */
struct hdr { uint32_t seq, len, sum, pad; uint64_t sent_us; };
#define SUMMED_FROM offsetof(struct hdr, sent_us)

static uint32_t make_message(uint8_t *b, uint32_t s, uint64_t sent_us) {
    uint32_t len = 32 + (uint32_t)rand() % (MAXMSG - 32);
    uint64_t x = 0x9E3779B97F4A7C15ull * (s + 1);
    for (uint32_t i = sizeof(struct hdr); i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (uint8_t)x;
    }
    struct hdr h = {s, len, 0, 0, sent_us};
    memcpy(b, &h, sizeof h);
    h.sum = fnv(b + SUMMED_FROM, len - SUMMED_FROM);
    memcpy(b, &h, sizeof h);
    return len;
}

static void set_desc(VIP_DESCRIPTOR *d, void *b, uint32_t len) {
    memset(d, 0, 64);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = b;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

static void repost_recv(VIP_DESCRIPTOR *d) {
    set_desc(d, d->DS[0].Local.Data.Address, MAXMSG);
    CK(VipPostRecv(vi, d, mh));
}

static VIP_VI_STATE vi_state(void) {
    VIP_VI_STATE st;
    VIP_VI_ATTRIBUTES va;
    VIP_BOOLEAN sq, rq;
    CK(VipQueryVi(vi, &st, &va, &sq, &rq));
    return st;
}

static const char *state_name(VIP_VI_STATE s) {
    static const char *n[] = {"IDLE", "CONNECTED", "CONNECT_PENDING", "ERROR"};
    return (unsigned)s < 4 ? n[s] : "?";
}

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    if (ed->ErrorCode == VIP_ERROR_CONN_LOST) conn_lost++;
    else fprintf(stderr, "link_down[%d]: asynchronous error %d\n", rank, (int)ed->ErrorCode);
}

/* The outage clock: rank 0 starts it and stores its start in "stream-start"; rank 1
 * reads it from there. --simulate switches the injector at DOWN and UP. */
static uint64_t t0;
static int sim_phase; /* 0 before the outage, 1 during, 2 after */

static long elapsed_ms(void) { return (long)((now_us() - t0) / 1000); }

static void simulate_outage(void) {
    if (!opt.simulate || sim_phase == 2) return;
    long t = elapsed_ms();
    if (sim_phase == 0 && t >= opt.down_ms) {
        CK(VipExtSetFaults(nic, "drop=1"));
        sim_phase = 1;
    } else if (sim_phase == 1 && t >= opt.up_ms) {
        CK(VipExtSetFaults(nic, opt.faults));
        sim_phase = 2;
    }
}

/* Polls a launcher key without a syscall per loop turn. */
static int key_ready(const char *key, char *val, size_t cap, uint64_t *last_check) {
    uint64_t t = now_us();
    if (t - *last_check < KEY_POLL_US) return 0;
    *last_check = t;
    size_t len;
    if (sv_boot_get(key, val, cap - 1, &len, 0) != 0) return 0;
    val[len] = '\0';
    return 1;
}

/* Whoever waits must stay bounded: the retry timeout plus the stream plus a margin. */
static uint64_t deadline_us;
static void check_deadline(const char *what) {
    if (now_us() > deadline_us) DIE("no end in sight while %s: a hang", what);
}

/* ---- rank 0 ------------------------------------------------------------------------- */

static void sender(void) {
    const int reliable = opt.level != VIP_SERVICE_UNRELIABLE;
    uint32_t posted = 0, completed = 0, ok = 0, errors = 0, credits = reliable ? RING : UINT32_MAX;
    uint64_t next_send = now_us(), last_done = now_us(), longest_stall = 0, failed_at = 0;
    VIP_DESCRIPTOR *d;

    char t0s[32];
    t0 = now_us();
    snprintf(t0s, sizeof t0s, "%llu", (unsigned long long)t0);
    sv_boot_put("stream-start", t0s, strlen(t0s));
    for (;;) {
        check_deadline("sending");
        simulate_outage();
        VipExtProgress(nic);
        while (reliable && VipRecvDone(vi, &d) == VIP_SUCCESS) { /* credits */
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) continue; /* flushed: the VI broke */
            credits += d->CS.ImmediateData;
            repost_recv(d);
        }
        while (completed < posted && VipSendDone(vi, &d) == VIP_SUCCESS) {
            completed++;
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
                if (errors++ == 0) failed_at = now_us();
                continue;
            }
            if (errors) DIE("send %u succeeded after an earlier one failed", completed - 1);
            ok++;
            uint64_t t = now_us();
            if (t - last_done > longest_stall) longest_stall = t - last_done;
            last_done = t;
        }
        int broken = errors > 0 || (reliable && vi_state() == VIP_STATE_ERROR);
        if (broken) {
            if (!reliable) DIE("an unreliable VI failed");
            if (completed == posted) break; /* every descriptor came back */
            continue;
        }
        if (elapsed_ms() >= opt.duration_ms) {
            if (completed == posted) break;
            continue;
        }
        if (now_us() < next_send || credits == 0 || posted - completed == RING) continue;
        int k = (int)(posted % RING);
        set_desc(desc[k], buf[k], make_message(buf[k], posted, now_us() - t0));
        VIP_RETURN r = VipPostSend(vi, desc[k], mh);
        if (r != VIP_SUCCESS) {
            if (reliable && vi_state() == VIP_STATE_ERROR) continue; /* broke just now */
            DIE("VipPostSend: %s", VipExtReturnString(r));
        }
        posted++;
        credits--;
        next_send += PACE_US;
        if (next_send < now_us()) next_send = now_us(); /* after a stall: no burst to catch up */
    }

    VIP_VI_STATE st = reliable ? vi_state() : VIP_STATE_CONNECTED;
    char res[96];
    snprintf(res, sizeof res, "%u %u %u", posted, ok, errors);
    sv_boot_put("sender-done", res, strlen(res));
    printf("sender: posted %u, %u completed successfully, %u with an error; VI %s; connection lost "
           "reported %d times; longest pause between send completions %llu ms",
           posted, ok, errors, state_name(st), conn_lost, (unsigned long long)longest_stall / 1000);
    if (errors) printf("; first error %llu ms into the stream", (unsigned long long)(failed_at - t0) / 1000);
    printf("\n");

    if (opt.expect == EXPECT_RECOVER) {
        if (errors || st != VIP_STATE_CONNECTED) DIE("the connection did not survive the outage");
        /* Our last frames are acknowledged; keep answering the peer's credits until it is done. */
        char v[96];
        uint64_t last = 0;
        while (!key_ready("receiver-done", v, sizeof v, &last)) {
            check_deadline("waiting for the receiver");
            VipExtProgress(nic);
            while (VipRecvDone(vi, &d) == VIP_SUCCESS) repost_recv(d);
        }
    } else if (opt.expect == EXPECT_FAIL) {
        if (st != VIP_STATE_ERROR) DIE("the VI is %s, not ERROR, after the outage", state_name(st));
        if (errors == 0) DIE("no send completed with an error");
        if ((long)((failed_at - t0) / 1000) < opt.down_ms) DIE("the VI failed before the outage");
        if (conn_lost != 1) DIE("VIP_ERROR_CONN_LOST reported %d times, not once", conn_lost);
    }
}

/* ---- rank 1 ------------------------------------------------------------------------- */

static void receiver(void) {
    const int reliable = opt.level != VIP_SERVICE_UNRELIABLE;
    uint32_t got = 0, consumed = 0, nsent = 0, ndone = 0, flushed = 0, after_gap = 0, in_outage = 0;
    int64_t last_seq = -1;
    /* The outage shows in the send times of consecutive arrivals, however late this
     * process got to them: a gap of its length (the sender blocked, or what it sent
     * was lost). */
    uint64_t last_sent = 0, longest_gap = 0, checked = 0, quiet_since = 0;
    uint32_t sender_posted = 0, sender_ok = 0, sender_errors = 0;
    int sender_done = 0;
    char v[96];
    VIP_DESCRIPTOR *d;

    while (!key_ready("stream-start", v, sizeof v, &checked)) {
        check_deadline("waiting for the stream");
        VipExtProgress(nic);
    }
    unsigned long long sender_t0;
    if (sscanf(v, "%llu", &sender_t0) != 1) DIE("bad stream-start '%s'", v);
    t0 = sender_t0; /* the same outage clock as the sender's */
    for (;;) {
        check_deadline("receiving");
        simulate_outage();
        VipExtProgress(nic);
        while (reliable && ndone < nsent && VipSendDone(vi, &d) == VIP_SUCCESS) ndone++; /* credits */
        VIP_RETURN r = VipRecvDone(vi, &d);
        if (r == VIP_SUCCESS) {
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) { /* the VI broke: flushed */
                flushed++;
                continue;
            }
            const uint8_t *b = (const uint8_t *)d->DS[0].Local.Data.Address;
            struct hdr h;
            memcpy(&h, b, sizeof h);
            if (d->CS.Length != h.len || h.len < sizeof h || h.len > MAXMSG)
                DIE("length %u, the message says %u", d->CS.Length, h.len);
            if (fnv(b + SUMMED_FROM, h.len - SUMMED_FROM) != h.sum) DIE("message %u corrupted", h.seq);
            if ((int64_t)h.seq <= last_seq) DIE("message %u after %lld: delivered twice or out of order", h.seq, (long long)last_seq);
            if (reliable && h.seq != got) DIE("message %u where %u was due: one was lost", h.seq, got);
            last_seq = h.seq;
            got++;
            if (h.sent_us - last_sent > longest_gap) {
                longest_gap = h.sent_us - last_sent;
                after_gap = 0;
            }
            after_gap++;
            last_sent = h.sent_us;
            /* Margins: the launcher pulls the cable up to ~100s of ms late on a loaded
             * machine; nothing sent well inside the outage can arrive. */
            if ((long)(h.sent_us / 1000) > opt.down_ms + 300 && (long)(h.sent_us / 1000) < opt.up_ms - 100)
                in_outage++;
            quiet_since = 0;
            repost_recv(d);
            consumed++;
        } else if (r != VIP_NOT_DONE) {
            DIE("VipRecvDone: %s", VipExtReturnString(r));
        }
        if (reliable && consumed >= CREDIT_EVERY && nsent - ndone < RING && vi_state() == VIP_STATE_CONNECTED) {
            VIP_DESCRIPTOR *c = desc[nsent % RING];
            set_desc(c, NULL, 0);
            c->CS.SegCount = 0;
            c->CS.Control = VIP_CONTROL_IMMEDIATE;
            c->CS.ImmediateData = consumed;
            if (VipPostSend(vi, c, mh) == VIP_SUCCESS) {
                nsent++;
                consumed = 0;
            }
        }
        if (!sender_done && key_ready("sender-done", v, sizeof v, &checked)) {
            if (sscanf(v, "%u %u %u", &sender_posted, &sender_ok, &sender_errors) != 3) DIE("bad sender-done '%s'", v);
            sender_done = 1;
        }
        if (!sender_done) continue;
        if (opt.expect == EXPECT_RECOVER) {
            if (got == sender_posted) break;
            continue;
        }
        /* Unreliable, or a broken connection: whatever was still on its way has had
         * 500 ms to arrive. */
        if (!quiet_since) quiet_since = now_us();
        if (now_us() - quiet_since > 500000) break;
    }

    VIP_VI_STATE st = reliable ? vi_state() : VIP_STATE_CONNECTED;
    if (opt.expect == EXPECT_RECOVER) { /* our credits must be acknowledged before we go */
        while (ndone < nsent) {
            check_deadline("waiting for the last credits");
            VipExtProgress(nic);
            if (VipSendDone(vi, &d) == VIP_SUCCESS) {
                if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("a credit send failed: 0x%x", d->CS.Status);
                ndone++;
            }
        }
    }
    sv_boot_put("receiver-done", "1", 1);
    printf("receiver: %u of %u messages arrived intact, in order, none twice (%.1f%%); longest gap between "
           "the send times of consecutive arrivals %llu ms, %u arrived after it, %u sent inside the outage; "
           "VI %s; %u receives flushed\n",
           got, sender_posted, sender_posted ? 100.0 * got / sender_posted : 0.0,
           (unsigned long long)longest_gap / 1000, after_gap, in_outage, state_name(st), flushed);

    long outage = opt.up_ms - opt.down_ms;
    /* Half: a reliable sender keeps posting into the outage until its window is full,
     * which takes a while when the machine is busy. Without an outage the gaps are
     * tens of ms. */
    if (opt.expect != EXPECT_FAIL && (long)(longest_gap / 1000) < outage / 2)
        DIE("the stream never paused for the outage (%ld ms): was the link taken down?", outage);
    if (opt.level == VIP_SERVICE_UNRELIABLE && in_outage > 0)
        DIE("%u messages sent while the link was down arrived", in_outage);
    if (opt.expect == EXPECT_FAIL) {
        if (sender_errors == 0) DIE("the sender saw no error");
        if (got < sender_ok) DIE("the sender saw %u sends succeed, only %u arrived", sender_ok, got);
        if (got > sender_posted) DIE("more arrived than was sent");
    } else if (opt.expect == EXPECT_NONE) {
        if (got == 0 || after_gap == 0) DIE("nothing arrived after the outage");
        if (got >= sender_posted) DIE("nothing was lost in the outage: was the link taken down?");
    }
}

static void usage(void) {
    fprintf(stderr, "usage: softvia-run -n 2 [--hosts 2 --at-from stream-start --at DOWN:1:down --at UP:1:up] "
                    "link_down U|RD|RR [recover|fail] [--duration MS] [--outage DOWN:UP] [--simulate]\n");
    exit(2);
}

static void parse(int argc, char **argv) {
    int i = 1;
    if (argc < 2) usage();
    if (!strcmp(argv[i], "RD")) opt.level = VIP_SERVICE_RELIABLE_DELIVERY;
    else if (!strcmp(argv[i], "RR")) opt.level = VIP_SERVICE_RELIABLE_RECEPTION;
    else if (strcmp(argv[i], "U")) usage();
    i++;
    if (opt.level != VIP_SERVICE_UNRELIABLE) {
        if (i >= argc) usage();
        if (!strcmp(argv[i], "recover")) opt.expect = EXPECT_RECOVER;
        else if (!strcmp(argv[i], "fail")) opt.expect = EXPECT_FAIL;
        else usage();
        i++;
    }
    for (; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
            opt.duration_ms = strtol(argv[++i], &end, 10);
            if (*end || opt.duration_ms <= 0) usage();
        } else if (!strcmp(argv[i], "--outage") && i + 1 < argc) {
            opt.down_ms = strtol(argv[++i], &end, 10);
            if (*end != ':') usage();
            opt.up_ms = strtol(end + 1, &end, 10);
            if (*end || opt.down_ms < 0 || opt.up_ms <= opt.down_ms) usage();
        } else if (!strcmp(argv[i], "--simulate")) {
            opt.simulate = 1;
        } else {
            usage();
        }
    }
    if (opt.up_ms >= opt.duration_ms) {
        fprintf(stderr, "link_down: the outage must end before the stream does\n");
        exit(2);
    }
}

int main(int argc, char **argv) {
    int size;
    parse(argc, argv);
    if (sv_boot_init(&rank, &size) != 0 || size != 2) {
        fprintf(stderr, "link_down: needs softvia-run -n 2\n");
        return 2;
    }
    const char *rt = getenv("SOFTVIA_RETRY_TIMEOUT_MS");
    long retry_ms = rt && *rt ? atol(rt) : 5000;
    deadline_us = now_us() + (uint64_t)(opt.duration_ms + retry_ms + 30000) * 1000;

    CK(VipOpenNic(NULL, &nic));
    if (opt.simulate) {
        VIP_EXT_FAULT_COUNTERS fc;
        opt.faults = getenv("SOFTVIA_FAULTS");
        if (opt.faults == NULL || VipExtQueryFaultCounters(nic, &fc) != VIP_SUCCESS) {
            fprintf(stderr, "link_down: --simulate needs the fault injector (set SOFTVIA_FAULTS)\n");
            return 2;
        }
    }
    CK(VipErrorCallback(nic, NULL, on_error));
    VIP_NIC_ATTRIBUTES na;
    CK(VipQueryNic(nic, &na));
    VIP_PROTECTION_HANDLE pt;
    CK(VipCreatePtag(nic, &pt));
    VIP_VI_ATTRIBUTES va = {0};
    va.ReliabilityLevel = opt.level;
    va.Ptag = pt;
    CK(VipCreateVi(nic, &va, NULL, NULL, &vi));

    size_t memsz = (size_t)2 * RING * (128 + MAXMSG) + 4096;
    memsz = (memsz + 4095) & ~(size_t)4095;
    uint8_t *mem = aligned_alloc(4096, memsz);
    if (mem == NULL) DIE("out of memory");
    memset(mem, 0, memsz);
    VIP_MEM_ATTRIBUTES ma = {pt, VIP_FALSE, VIP_FALSE};
    CK(VipRegisterMem(nic, mem, memsz, &ma, &mh));
    for (int i = 0; i < 2 * RING; i++) {
        desc[i] = (VIP_DESCRIPTOR *)(mem + (size_t)i * 128);
        buf[i] = mem + (size_t)2 * RING * 128 + (size_t)i * MAXMSG;
    }

    uint8_t all[2][64] = {{0}}, mine[64] = {0};
    memcpy(mine, na.LocalNicAddress, na.NicAddressLen);
    if (sv_boot_allgather(mine, sizeof mine, all, 30000)) DIE("address exchange");
    char lb[128], rb[128];
    VIP_NET_ADDRESS *la = (VIP_NET_ADDRESS *)lb, *ra = (VIP_NET_ADDRESS *)rb;
    la->HostAddressLen = ra->HostAddressLen = na.NicAddressLen;
    memcpy(la->HostAddress, mine, na.NicAddressLen);
    memcpy(ra->HostAddress, all[1 - rank], na.NicAddressLen);
    la->DiscriminatorLen = ra->DiscriminatorLen = 1;
    la->HostAddress[na.NicAddressLen] = (uint8_t)('0' + rank);
    ra->HostAddress[na.NicAddressLen] = (uint8_t)('0' + 1 - rank);
    /* Receives: slots [RING, 2 RING) on both sides (messages, or credits coming back). */
    if (rank == 1 || opt.level != VIP_SERVICE_UNRELIABLE)
        for (int i = RING; i < 2 * RING; i++) {
            set_desc(desc[i], buf[i], MAXMSG);
            CK(VipPostRecv(vi, desc[i], mh));
        }
    CK(VipConnectPeerRequest(vi, la, ra, 20000));
    CK(VipConnectPeerWait(vi, NULL));
    if (sv_boot_barrier(30000) != 0) DIE("barrier");

    srand(1234);
    if (rank == 0) sender();
    else receiver();
    fflush(stdout);
    /* Both verdicts are in; leave together so neither sees the other's NIC vanish. */
    if (sv_boot_barrier(30000) != 0) DIE("final barrier");
    VipCloseNic(nic);
    free(mem);
    return 0;
}
