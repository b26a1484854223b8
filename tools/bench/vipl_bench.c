/*
 * vipl_bench -- VIPL ping-pong latency and streaming bandwidth between two processes.
 *
 *   softvia-run -n 2 --pin vipl_bench [--sizes 4,8,...] [--iters N] [--idle-vis K]
 *                                      [--progress inline|thread] [--reliability U|RD|RR]
 *                                      [--csv FILE] [--only lat|bw|rdma|atomic]
 *
 * It runs over the NIC VipOpenNic(NULL) opens: whatever SOFTVIA_DEVICE names (shm by
 * default; udp, dpdk, verbs, docs/transports.md). The first line of the output names
 * it (the NIC's Name), and so does the default --label of the CSV rows ("vipl-" and the
 * name without its "softvia-" prefix).
 *
 * Rank 0 and rank 1 connect one VI peer-to-peer. Latency: rank 0 sends, rank 1 echoes;
 * one-way time is half of each round trip (a whole iteration of rank 0, TSC-timed, as
 * ucx_perftest times tag_lat); median and p99 over all iterations.
 * Streaming: rank 0 keeps a window of sends in flight, rank 1 reposts receives; the
 * figures are bandwidth (MB/s, 10^6 bytes) and messages per second. --idle-vis K opens
 * and connects K more VI pairs that carry no traffic, to show that doorbell service
 * does not grow with the number of VIs.
 * With inline progress both sides busy-poll (VipRecvDone / VipSendDone); with thread
 * progress they use VipRecvWait / VipSendWait. --only atomic: NIC fetch-add round trips
 * (one at a time, as ucx_perftest -t ucp_atomic_fadd) and their rate with WINDOW in flight,
 * on ordinary registered memory (fadd) and on memory of VipExtAllocMem (fadd_nicmem: on
 * one host the initiator's NIC applies them itself under the target's grant), then the
 * same through VipExtAtomicNow, which needs no descriptor (fadd_now). Run with --pin to
 * place the ranks on cores 0 and 1, as tools/bench/compare.sh and the peer figures do.
 */
#define _GNU_SOURCE
#include <softvia_boot.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vipl.h>
#include <x86intrin.h>

#define DIE(...) do { fprintf(stderr, "vipl_bench: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CK(x) do { VIP_RETURN r_ = (x); if (r_ != VIP_SUCCESS) DIE("%s failed: %s (line %d)", #x, VipExtReturnString(r_), __LINE__); } while (0)

enum { WINDOW = 64, MAXSZ = 1 << 20 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Latency and the fetch-add round trips are timed as ucx_perftest times its: the TSC read once
 * per iteration (clock_gettime costs 60 ns in this VM, rdtsc 23, and a pair of
 * clock_gettime calls around each operation counted about one call's cost into it),
 * converted with a rate measured against CLOCK_MONOTONIC. */
static double tsc_per_ns;
static void tsc_calibrate(void) {
    uint64_t n0 = now_ns(), c0 = __rdtsc(), n1, c1;
    while ((n1 = now_ns()) - n0 < 20000000) {}
    c1 = __rdtsc();
    tsc_per_ns = (double)(c1 - c0) / (double)(n1 - n0);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct ctx {
    VIP_NIC_HANDLE nic;
    VIP_PROTECTION_HANDLE ptag;
    VIP_VI_HANDLE vi;
    VIP_MEM_HANDLE mh;
    char *mem;
    VIP_DESCRIPTOR *sd[WINDOW], *rd[WINDOW];
    char *sbuf[WINDOW], *rbuf[WINDOW];
    uint32_t bufsz;
};

static void set_desc(VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, void *buf, uint32_t len) {
    memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

static void post_recv(struct ctx *c, int i) {
    set_desc(c->rd[i], c->mh, c->rbuf[i], c->bufsz);
    CK(VipPostRecv(c->vi, c->rd[i], c->mh));
}

/* Reposts a completed receive descriptor as it is: the NIC wrote only its status, length
 * and immediate data, and the post clears the status (a program that rewrote it with
 * memset on every message paid a libc call here: 0.1 us a message over udp, where each
 * system call empties the TLB). */
static void repost(struct ctx *c, VIP_DESCRIPTOR *d) {
    CK(VipPostRecv(c->vi, d, c->mh));
}

/* Inline progress: busy-poll Done. Thread progress: the Wait calls, which sleep after a
 * short spin so that only the firmware threads poll. */
static int use_wait;

static VIP_DESCRIPTOR *spin_recv(struct ctx *c) {
    VIP_DESCRIPTOR *d;
    VIP_RETURN r;
    if (use_wait)
        r = VipRecvWait(c->vi, VIP_INFINITE, &d);
    else
        while ((r = VipRecvDone(c->vi, &d)) == VIP_NOT_DONE) {
        }
    if (r != VIP_SUCCESS) DIE("VipRecvDone: %s", VipExtReturnString(r));
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("receive completed with status 0x%x", d->CS.Status);
    return d;
}

static void spin_send(struct ctx *c) {
    VIP_DESCRIPTOR *d;
    VIP_RETURN r;
    if (use_wait)
        r = VipSendWait(c->vi, VIP_INFINITE, &d);
    else
        while ((r = VipSendDone(c->vi, &d)) == VIP_NOT_DONE) {
        }
    if (r != VIP_SUCCESS) DIE("VipSendDone: %s", VipExtReturnString(r));
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("send completed with status 0x%x", d->CS.Status);
}

static void make_addr(VIP_NET_ADDRESS *a, const uint8_t *nic, uint16_t nlen, const char *disc) {
    a->HostAddressLen = nlen;
    memcpy(a->HostAddress, nic, nlen);
    a->DiscriminatorLen = (uint16_t)strlen(disc);
    memcpy(a->HostAddress + nlen, disc, strlen(disc));
}

/* Connects vi to the other rank's NIC with discriminators "<tag>.<rank>". */
static void connect_peer(VIP_VI_HANDLE vi, const uint8_t *mine, const uint8_t *theirs, uint16_t nlen,
                         int rank, const char *tag) {
    char lb[128], rb[128], ld[48], rdsc[48];
    snprintf(ld, sizeof ld, "%s.%d", tag, rank);
    snprintf(rdsc, sizeof rdsc, "%s.%d", tag, 1 - rank);
    make_addr((VIP_NET_ADDRESS *)lb, mine, nlen, ld);
    make_addr((VIP_NET_ADDRESS *)rb, theirs, nlen, rdsc);
    CK(VipConnectPeerRequest(vi, (VIP_NET_ADDRESS *)lb, (VIP_NET_ADDRESS *)rb, 20000));
}

/* Room for one sample per iteration, its pages touched now: a first write to each page
 * inside the timed loop is a page fault there (several us in this VM, one in every 512
 * samples), which a median hides and a mean does not. */
static uint64_t *sample_array(int iters) {
    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters);
    if (!t) DIE("out of memory for %d samples", iters);
    memset(t, 0xff, sizeof(uint64_t) * (size_t)iters);  /* not 0: malloc+memset(0) compiles to calloc */
    return t;
}

/* Ping-pong: one-way = half of each round trip. Timed as ucx_perftest times tag_lat:
 * the TSC read once per iteration, each sample a whole iteration (post, the echo, the
 * send's completion and the receive posted again). */
static void latency(struct ctx *c, int rank, uint32_t sz, int iters, FILE *csv, const char *label) {
    int warm = iters / 10 + 10;
    uint64_t *t = sample_array(iters);
    if (rank == 0 && tsc_per_ns == 0) tsc_calibrate();
    set_desc(c->sd[0], c->mh, c->sbuf[0], sz);  /* posted again as it is, like a receive */
    uint64_t prev = __rdtsc();
    for (int i = -warm; i < iters; i++) {
        if (rank == 0) {
            CK(VipPostSend(c->vi, c->sd[0], c->mh));
            VIP_DESCRIPTOR *d = spin_recv(c);
            if (d->CS.Length != sz) DIE("echo of %u bytes came back as %u", sz, d->CS.Length);
            spin_send(c);
            repost(c, d);
            const uint64_t now = __rdtsc();
            if (i >= 0) t[i] = now - prev;
            prev = now;
        } else {
            VIP_DESCRIPTOR *d = spin_recv(c);
            if (d->CS.Length != sz) DIE("expected %u bytes, got %u", sz, d->CS.Length);
            repost(c, d);
            CK(VipPostSend(c->vi, c->sd[0], c->mh));
            spin_send(c);
        }
    }
    if (rank == 0) {
        qsort(t, (size_t)iters, sizeof *t, cmp_u64);
        double med = t[iters / 2] / tsc_per_ns / 2000.0, p99 = t[(size_t)iters * 99 / 100] / tsc_per_ns / 2000.0;
        printf("%-10s %8u %10.3f %10.3f\n", "latency", sz, med, p99);
        if (csv) fprintf(csv, "latency,%s,%u,%.4f,%.4f,,\n", label, sz, med, p99);
    }
    free(t);
}

/* Streaming with credits, as VIA requires of anyone on a reliable VI: a send that finds
 * no receive descriptor breaks the connection. The receiver returns credits in the
 * immediate data of a small message every WINDOW/2 receives; the sender never has more
 * messages outstanding than the receiver has descriptors posted. */
enum { DONE_MARK = 0xFFFFFFFFu };

static void send_imm(struct ctx *c, uint32_t imm) {
    set_desc(c->sd[0], c->mh, c->sbuf[0], 0);
    c->sd[0]->CS.SegCount = 0;
    c->sd[0]->CS.Control = VIP_CONTROL_IMMEDIATE;
    c->sd[0]->CS.ImmediateData = imm;
    CK(VipPostSend(c->vi, c->sd[0], c->mh));
    spin_send(c);
}

static void stream(struct ctx *c, int rank, uint32_t sz, int msgs, FILE *csv, const char *label) {
    sv_boot_barrier(30000);
    uint64_t t0 = now_ns();
    if (rank == 0) {
        int credits = WINDOW, inflight = 0, slot = 0;
        for (int i = 0; i < msgs; i++) {
            while (credits == 0) {
                VIP_DESCRIPTOR *d = spin_recv(c);
                credits += (int)d->CS.ImmediateData;
                repost(c, d);
            }
            if (inflight == WINDOW) {
                spin_send(c);
                inflight--;
            }
            set_desc(c->sd[slot], c->mh, c->sbuf[slot], sz);
            CK(VipPostSend(c->vi, c->sd[slot], c->mh));
            slot = (slot + 1) % WINDOW;
            inflight++;
            credits--;
        }
        while (inflight--) spin_send(c);
        for (;;) { /* credits still on their way, then the receiver's "all arrived" */
            VIP_DESCRIPTOR *d = spin_recv(c);
            uint32_t imm = d->CS.ImmediateData;
            repost(c, d);
            if (imm == DONE_MARK) break;
        }
        /* On a lossy wire the receiver's last send completes only when our NIC's ACK for
         * it arrives, and that ACK may need sending again: keep the NIC stepping until
         * the receiver says it is done (the time is not counted). */
        uint64_t t_end = now_ns();
        char key[32], v;
        size_t vl;
        snprintf(key, sizeof key, "stream-done-%u", sz);
        while (sv_boot_get(key, &v, 1, &vl, 0) != 0) {
            uint64_t t = now_ns();
            while (now_ns() - t < 1000000) VipExtProgress(c->nic);
        }
        t0 += now_ns() - t_end;
    } else {
        int consumed = 0;
        for (int i = 0; i < msgs; i++) {
            VIP_DESCRIPTOR *d = spin_recv(c);
            if (d->CS.Length != sz) DIE("stream: expected %u bytes, got %u", sz, d->CS.Length);
            repost(c, d);
            if (++consumed == WINDOW / 2) {
                send_imm(c, (uint32_t)consumed);
                consumed = 0;
            }
        }
        send_imm(c, DONE_MARK);
        char key[32];
        snprintf(key, sizeof key, "stream-done-%u", sz);
        sv_boot_put(key, "1", 1);
    }
    uint64_t dt = now_ns() - t0;
    if (rank == 0) {
        double secs = dt / 1e9;
        double mbs = (double)sz * msgs / secs / 1e6, rate = msgs / secs;
        printf("%-10s %8u %10.1f %12.0f\n", "stream", sz, mbs, rate);
        if (csv) fprintf(csv, "stream,%s,%u,,,%.2f,%.0f\n", label, sz, mbs, rate);
    }
}

/* RDMA latency. Write: rank 0 writes a counter into rank 1's window with one RDMA
 * write, rank 1 polls its window (no descriptor), then writes it back; one-way = half
 * the round trip (as ucp_put_lat measures). Read: rank 0 reads sz bytes of rank 1's
 * window and waits for the descriptor; the figure is the whole round trip (as ucp_get).
 * The side that only serves steps its NIC (inline progress) until told to stop. */
struct remote { uint64_t addr; uint32_t memh, pad; };

static void wait_counter(struct ctx *c, volatile uint64_t *w, uint64_t v) {
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) VipExtProgress(c->nic);
}

static void rdma_write(struct ctx *c, uint64_t *sb, const struct remote *r, uint32_t sz) {
    VIP_DESCRIPTOR *d = c->sd[1];
    memset(d, 0, 96);
    d->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
    d->CS.SegCount = 2;
    d->DS[0].Remote.Data.AddressBits = r->addr;
    d->DS[0].Remote.Handle = r->memh;
    d->DS[1].Local.Data.Address = sb;
    d->DS[1].Local.Handle = c->mh;
    d->DS[1].Local.Length = sz;
    CK(VipPostSend(c->vi, d, c->mh));
}

static void rdma_latency(struct ctx *c, int rank, uint32_t sz, int iters, uint64_t *window, const struct remote *r,
                         FILE *csv, const char *label) {
    int warm = iters / 10 + 10;
    uint64_t *t = sample_array(iters);
    uint64_t *sb = (uint64_t *)c->sbuf[1];
    volatile uint64_t *flag = (volatile uint64_t *)((char *)window + sz - 8); /* last 8 bytes land last */
    memset(window, 0, sz);
    sv_boot_barrier(30000);
    for (int i = -warm; i < iters; i++) { /* write ping-pong */
        uint64_t v = (uint64_t)(i + warm + 1) + ((uint64_t)sz << 40);
        memset(sb, 0, sz);
        sb[sz / 8 - 1] = v;
        if (rank == 0) {
            uint64_t t0 = now_ns();
            rdma_write(c, sb, r, sz);
            wait_counter(c, flag, v);
            if (i >= 0) t[i] = now_ns() - t0;
            spin_send(c); /* the target's ACK of our write: off the measured path */
        } else {
            wait_counter(c, flag, v);
            rdma_write(c, sb, r, sz);
            spin_send(c);
        }
    }
    if (rank == 0) {
        qsort(t, (size_t)iters, sizeof *t, cmp_u64);
        double med = t[iters / 2] / 2000.0, p99 = t[(size_t)iters * 99 / 100] / 2000.0;
        printf("%-10s %8u %10.3f %10.3f\n", "rdma_write", sz, med, p99);
        if (csv) fprintf(csv, "rdma_write,%s,%u,%.4f,%.4f,,\n", label, sz, med, p99);
    }
    sv_boot_barrier(30000);
    if (rank == 0) { /* read round trips, then a send tells rank 1 to stop serving */
        VIP_DESCRIPTOR *d = c->sd[1];
        for (int i = -warm; i < iters; i++) {
            memset(d, 0, 96);
            d->CS.Control = VIP_CONTROL_OP_RDMAREAD;
            d->CS.SegCount = 2;
            d->DS[0].Remote.Data.AddressBits = r->addr;
            d->DS[0].Remote.Handle = r->memh;
            d->DS[1].Local.Data.Address = c->rbuf[WINDOW - 1];
            d->DS[1].Local.Handle = c->mh;
            d->DS[1].Local.Length = sz;
            uint64_t t0 = now_ns();
            CK(VipPostSend(c->vi, d, c->mh));
            spin_send(c);
            if (i >= 0) t[i] = now_ns() - t0;
        }
        send_imm(c, DONE_MARK);
        qsort(t, (size_t)iters, sizeof *t, cmp_u64);
        double med = t[iters / 2] / 1000.0, p99 = t[(size_t)iters * 99 / 100] / 1000.0;
        printf("%-10s %8u %10.3f %10.3f   (round trip)\n", "rdma_read", sz, med, p99);
        if (csv) fprintf(csv, "rdma_read,%s,%u,%.4f,%.4f,,\n", label, sz, med, p99);
    } else {
        VIP_DESCRIPTOR *d;
        while (VipRecvDone(c->vi, &d) == VIP_NOT_DONE) VipExtProgress(c->nic);
        if (d->CS.ImmediateData != DONE_MARK) DIE("rdma: unexpected message");
        repost(c, d);
    }
    free(t);
}

/* NIC atomics: rank 0 fetch-adds a word of rank 1's window, one at a time (the round
 * trip, as ucp_atomic_fadd's latency) and then WINDOW in flight (the rate); rank 1
 * only steps its NIC. The old values must rise by one each time. */
static void set_fadd(VIP_EXT_ATOMIC_DESCRIPTOR *d, const struct remote *r, uint64_t *res, VIP_MEM_HANDLE mh) {
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | VIP_EXT_CONTROL_ATOMIC_FETCH_ADD;
    d->CS.SegCount = 3;
    d->Remote.Data.AddressBits = r->addr;
    d->Remote.Handle = r->memh;
    d->Args.Operand = 1;
    d->Result.Data.Address = res;
    d->Result.Handle = mh;
    d->Result.Length = 8;
}

/* One fetch-add the descriptor way (post, then Done): the old value into *res. */
static void fadd_posted(struct ctx *c, const struct remote *r, uint64_t *res, int i) {
    VIP_EXT_ATOMIC_DESCRIPTOR *d = (VIP_EXT_ATOMIC_DESCRIPTOR *)c->sd[0];
    set_fadd(d, r, res, c->mh);
    CK(VipPostSend(c->vi, (VIP_DESCRIPTOR *)d, c->mh));
    VIP_DESCRIPTOR *x;
    while (VipSendDone(c->vi, &x) == VIP_NOT_DONE) {}
    if ((x->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) != VIP_EXT_STATUS_OP_ATOMIC)
        DIE("fetch-add %d: status 0x%x", i, x->CS.Status);
}

/* One fetch-add: with now, VipExtAtomicNow first and a descriptor only when it says
 * VIP_NOT_DONE (as a program would use it; the first one always posts), counted in
 * *posted_instead. */
static void fadd_one(struct ctx *c, const struct remote *r, uint64_t *res, int i, int now, long *posted_instead) {
    VIP_RETURN rc = VIP_NOT_DONE;
    if (now) rc = VipExtAtomicNow(c->vi, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, r->memh, r->addr, 1, 0, res);
    if (rc == VIP_NOT_DONE) {
        fadd_posted(c, r, res, i);
        *posted_instead += now;
    } else if (rc != VIP_SUCCESS) {
        DIE("VipExtAtomicNow %d: %s", i, VipExtReturnString(rc));
    }
}

/* now: every fetch-add through fadd_one's VipExtAtomicNow first. */
static void atomic_bench(struct ctx *c, int rank, int iters, const struct remote *r, FILE *csv, const char *label,
                         const char *test, int now) {
    sv_boot_barrier(30000);
    if (rank != 0) {
        VIP_DESCRIPTOR *d;
        while (VipRecvDone(c->vi, &d) == VIP_NOT_DONE) VipExtProgress(c->nic);
        if (d->CS.ImmediateData != DONE_MARK) DIE("atomic: unexpected message");
        repost(c, d);
        return;
    }
    int warm = iters / 10 + 10;
    uint64_t *t = sample_array(iters), expect = 0;
    uint64_t *res = (uint64_t *)c->sbuf[0];
    if (tsc_per_ns == 0) tsc_calibrate();
    uint64_t prev = __rdtsc();
    long posted_instead = 0;
    for (int i = -warm; i < iters; i++) {
        fadd_one(c, r, res, i, now, &posted_instead);
        if (i == -warm) expect = *res;  /* the word may have been used before */
        if (*res != expect) DIE("fetch-add %d: old %llu, want %llu", i, (unsigned long long)*res, (unsigned long long)expect);
        expect++;
        const uint64_t now = __rdtsc();
        if (i >= 0) t[i] = now - prev;  /* one whole iteration, as ucx_perftest's samples */
        prev = now;
    }
    /* The mean too: this VM's TSC moves in steps of about 10 ns, so a median of round trips
     * of a few tens of ns is a step, not a figure (ucx_perftest's 50%ile alike; its
     * "average" column is the peer of this mean). */
    uint64_t sum = 0;
    for (int i = 0; i < iters; i++) sum += t[i];
    double mean = (double)sum / iters / tsc_per_ns / 1000.0;
    qsort(t, (size_t)iters, sizeof *t, cmp_u64);
    double med = t[iters / 2] / tsc_per_ns / 1000.0, p99 = t[(size_t)iters * 99 / 100] / tsc_per_ns / 1000.0;
    /* rate: WINDOW fetch-adds in flight, each result in its own slot; applied at once
     * (now), one after the other */
    uint64_t t0 = now_ns();
    int posted = 0, done = 0;
    for (; now && done < iters; done++) {
        fadd_one(c, r, res, done, now, &posted_instead);
        if (*res != expect++) DIE("fetch-add %d: old %llu, want %llu", done, (unsigned long long)*res,
                                  (unsigned long long)expect - 1);
    }
    while (done < iters) {
        while (posted < iters && posted - done < WINDOW) {
            int s = posted % WINDOW;
            set_fadd((VIP_EXT_ATOMIC_DESCRIPTOR *)c->sd[s], r, (uint64_t *)c->sbuf[s], c->mh);
            CK(VipPostSend(c->vi, c->sd[s], c->mh));
            posted++;
        }
        VIP_DESCRIPTOR *x;
        if (VipSendDone(c->vi, &x) != VIP_SUCCESS) continue;
        if ((x->CS.Status & VIP_STATUS_ERROR_MASK) || x != c->sd[done % WINDOW]) DIE("fetch-add burst: status 0x%x", x->CS.Status);
        done++;
    }
    double secs = (double)(now_ns() - t0) / 1e9, rate = iters / secs;
    send_imm(c, DONE_MARK);
    printf("%-10s %8u %10.4f %10.4f   (round trip, mean %.4f); %.0f fetch-adds/s with %d in flight", test, 8, med,
           p99, mean, rate, now ? 1 : WINDOW);
    if (now) printf("; %ld of %d posted as descriptors", posted_instead, 2 * iters + warm);
    printf("\n");
    if (csv) fprintf(csv, "atomic_%s,%s,8,%.4f,%.4f,,%.0f,%.4f\n", test, label, med, p99, rate, mean);
    free(t);
}

static void usage(void) {
    fprintf(stderr,
            "usage: softvia-run -n 2 --pin vipl_bench [--sizes LIST] [--iters N] [--msgs N]\n"
            "       [--idle-vis K] [--progress inline|thread] [--reliability U|RD|RR]\n"
            "       [--csv FILE] [--only lat|bw|rdma|atomic] [--label TEXT]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *sizes = "4,8,64,256,1024,4096,16384,65536", *csvpath = NULL, *only = NULL;
    const char *progress = "inline", *rel = "RD", *label = NULL;
    int iters = 20000, msgs = 0, idle = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--sizes")) sizes = v;
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--msgs")) msgs = atoi(v);
        else if (!strcmp(a, "--idle-vis")) idle = atoi(v);
        else if (!strcmp(a, "--progress")) progress = v;
        else if (!strcmp(a, "--reliability")) rel = v;
        else if (!strcmp(a, "--csv")) csvpath = v;
        else if (!strcmp(a, "--only")) only = v;
        else if (!strcmp(a, "--label")) label = v;
        else usage();
        i++;
    }
    if (iters < 10 || idle < 0 || idle > 4000) usage();
    int rank, size;
    if (sv_boot_init(&rank, &size) != 0 || size != 2) DIE("run with: softvia-run -n 2 vipl_bench ...");

    VIP_EXT_NIC_OPTIONS opt = {!strcmp(progress, "thread") ? VIP_EXT_PROGRESS_THREAD : VIP_EXT_PROGRESS_INLINE};
    if (strcmp(progress, "thread") && strcmp(progress, "inline")) usage();
    use_wait = !strcmp(progress, "thread");
    struct ctx c = {0};
    CK(VipExtOpenNic(NULL, &opt, &c.nic));
    VIP_NIC_ATTRIBUTES na;
    CK(VipQueryNic(c.nic, &na));
    char nicname[sizeof na.Name + 1], deflabel[sizeof na.Name + 8];
    snprintf(nicname, sizeof nicname, "%.*s", (int)sizeof na.Name, (const char *)na.Name);
    if (!label) {
        const char *wire = strncmp(nicname, "softvia-", 8) ? nicname : nicname + 8;
        snprintf(deflabel, sizeof deflabel, "vipl-%s", wire);
        label = deflabel;
    }
    CK(VipCreatePtag(c.nic, &c.ptag));
    VIP_VI_ATTRIBUTES va = {0};
    va.ReliabilityLevel = !strcmp(rel, "U") ? VIP_SERVICE_UNRELIABLE
                          : !strcmp(rel, "RR") ? VIP_SERVICE_RELIABLE_RECEPTION
                                               : VIP_SERVICE_RELIABLE_DELIVERY;
    va.Ptag = c.ptag;
    va.MaxTransferSize = MAXSZ;
    va.EnableRdmaWrite = VIP_TRUE;
    va.EnableRdmaRead = va.ReliabilityLevel != VIP_SERVICE_UNRELIABLE;
    CK(VipCreateVi(c.nic, &va, NULL, NULL, &c.vi));

    /* Exchange NIC addresses through the launcher. */
    uint8_t all[2][64] = {{0}};
    uint8_t mine[64] = {0};
    memcpy(mine, na.LocalNicAddress, na.NicAddressLen);
    if (sv_boot_allgather(mine, sizeof mine, all, 30000) != 0) DIE("address exchange failed");
    const uint8_t *peer = all[1 - rank];

    /* Idle VIs first, so the measured VI is not the only (or the first) one. */
    VIP_VI_HANDLE *idle_vis = calloc((size_t)idle + 1, sizeof *idle_vis);
    for (int i = 0; i < idle; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "idle%d", i);
        CK(VipCreateVi(c.nic, &va, NULL, NULL, &idle_vis[i]));
        connect_peer(idle_vis[i], mine, peer, na.NicAddressLen, rank, tag);
    }
    for (int i = 0; i < idle; i++) CK(VipConnectPeerWait(idle_vis[i], NULL));
    connect_peer(c.vi, mine, peer, na.NicAddressLen, rank, "bench");
    CK(VipConnectPeerWait(c.vi, NULL));

    uint32_t maxsz = 0;
    for (const char *p = sizes; *p;) {
        uint32_t s = (uint32_t)strtoul(p, (char **)&p, 10);
        if (s > maxsz) maxsz = s;
        if (*p == ',') p++;
        else if (*p) usage();
    }
    if (maxsz > MAXSZ) DIE("sizes above %d are not supported", MAXSZ);
    c.bufsz = maxsz ? maxsz : 4;
    size_t per = ((size_t)c.bufsz + 63) & ~(size_t)63;
    size_t memsz = 2 * WINDOW * 128 + 2 * WINDOW * per + per; /* + the RDMA window */
    c.mem = aligned_alloc(4096, (memsz + 4095) & ~(size_t)4095);
    memset(c.mem, 0x5a, memsz);
    VIP_MEM_ATTRIBUTES ma = {c.ptag, VIP_TRUE, VIP_TRUE}; /* the RDMA test writes and reads it */
    CK(VipRegisterMem(c.nic, c.mem, memsz, &ma, &c.mh));
    for (int i = 0; i < WINDOW; i++) {
        c.rd[i] = (VIP_DESCRIPTOR *)(c.mem + (size_t)i * 256);
        c.sd[i] = (VIP_DESCRIPTOR *)(c.mem + (size_t)i * 256 + 128);
        c.sbuf[i] = c.mem + 2 * WINDOW * 128 + (size_t)i * per;
        c.rbuf[i] = c.mem + 2 * WINDOW * 128 + (size_t)(WINDOW + i) * per;
    }
    for (int i = 0; i < WINDOW; i++) post_recv(&c, i); /* rd[] 256 bytes apart: see repost() */

    FILE *csv = NULL;
    if (rank == 0 && csvpath) {
        csv = fopen(csvpath, "a");
        if (!csv) DIE("cannot open %s", csvpath);
    }
    if (rank == 0)
        printf("# vipl_bench: %s, progress=%s, reliability=%s, idle VIs=%d, one-way latency in us\n",
               nicname, progress, rel, idle);
    sv_boot_barrier(30000);
    if (!only || !strcmp(only, "lat")) {
        if (rank == 0) printf("%-10s %8s %10s %10s\n", "test", "bytes", "median_us", "p99_us");
        for (const char *p = sizes; *p;) {
            uint32_t s = (uint32_t)strtoul(p, (char **)&p, 10);
            if (*p == ',') p++;
            sv_boot_barrier(30000);
            latency(&c, rank, s, s >= 16384 ? iters / 4 : iters, csv, label);
        }
    }
    if (only && !strcmp(only, "rdma")) {
        if (va.ReliabilityLevel == VIP_SERVICE_UNRELIABLE || use_wait) DIE("--only rdma needs a reliable VI and inline progress");
        uint64_t *window = (uint64_t *)(c.mem + 2 * WINDOW * 128 + 2 * WINDOW * per);
        struct remote me = {(uint64_t)(uintptr_t)window, c.mh, 0}, both[2];
        if (sv_boot_allgather(&me, sizeof me, both, 30000) != 0) DIE("window exchange failed");
        if (rank == 0) printf("%-10s %8s %10s %10s\n", "test", "bytes", "median_us", "p99_us");
        for (const char *p = sizes; *p;) {
            uint32_t s = (uint32_t)strtoul(p, (char **)&p, 10);
            if (*p == ',') p++;
            if (s < 8 || s % 8) DIE("--only rdma sizes must be multiples of 8");
            rdma_latency(&c, rank, s, iters, window, &both[1 - rank], csv, label);
        }
    }
    if (only && !strcmp(only, "atomic")) {
        if (va.ReliabilityLevel == VIP_SERVICE_UNRELIABLE || use_wait) DIE("--only atomic needs a reliable VI and inline progress");
        uint64_t *window = (uint64_t *)(c.mem + 2 * WINDOW * 128 + 2 * WINDOW * per);
        CK(VipExtSetMemAtomics(c.nic, c.mem, c.mh, VIP_TRUE));
        struct remote me = {(uint64_t)(uintptr_t)window, c.mh, 0}, both[2];
        if (sv_boot_allgather(&me, sizeof me, both, 30000) != 0) DIE("window exchange failed");
        *window = 0;
        if (rank == 0) printf("%-10s %8s %10s %10s\n", "test", "bytes", "median_us", "p99_us");
        atomic_bench(&c, rank, iters, &both[1 - rank], csv, label, "fadd", 0);
        /* The target word in memory the NIC allocated (VipExtAllocMem): a same-host peer's
         * NIC applies the atomics itself once the target granted it (docs/offloads.md);
         * elsewhere the same round trip as above. */
        uint64_t *nicmem;
        VIP_MEM_HANDLE nmh;
        CK(VipExtAllocMem(c.nic, 4096, (VIP_PVOID *)&nicmem));
        CK(VipRegisterMem(c.nic, nicmem, 4096, &ma, &nmh));
        CK(VipExtSetMemAtomics(c.nic, nicmem, nmh, VIP_TRUE));
        me = (struct remote){(uint64_t)(uintptr_t)nicmem, nmh, 0};
        if (sv_boot_allgather(&me, sizeof me, both, 30000) != 0) DIE("window exchange failed");
        atomic_bench(&c, rank, iters, &both[1 - rank], csv, label, "fadd_nicmem", 0);
        /* The same, applied at once where the NIC can (VipExtAtomicNow), else posted. */
        atomic_bench(&c, rank, iters, &both[1 - rank], csv, label, "fadd_now", 1);
        sv_boot_barrier(30000);
        CK(VipDeregisterMem(c.nic, nicmem, nmh));
        CK(VipExtFreeMem(c.nic, nicmem));
    }
    if (!only || !strcmp(only, "bw")) {
        if (rank == 0) printf("%-10s %8s %10s %12s\n", "test", "bytes", "MB/s", "msgs/s");
        for (const char *p = sizes; *p;) {
            uint32_t s = (uint32_t)strtoul(p, (char **)&p, 10);
            if (*p == ',') p++;
            int n = msgs ? msgs : (s <= 4096 ? 200000 : 20000);
            stream(&c, rank, s, n, csv, label);
        }
    }
    if (csv) fclose(csv);
    sv_boot_barrier(30000);
    CK(VipDisconnect(c.vi));
    CK(VipCloseNic(c.nic));
    free(idle_vis);
    return 0;
}
