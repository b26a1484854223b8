/*
 * fault_stream -- two processes, one VI, a lossy link (SOFTVIA_FAULTS).
 *
 *   softvia-run -n 2 fault_stream MESSAGES [U|RD|RR]
 *
 * Rank 0 sends MESSAGES messages of random sizes (mostly up to 2 KiB, one in eight up
 * to 20 KiB, so some span several frames), each carrying its sequence number, its
 * length and a checksum of its bytes. Rank 1 checks every message it receives.
 *
 * U (unreliable, the default): intact content, sequence numbers strictly increasing (at
 * most once, never a duplicate); losses are allowed. The sender paces itself in bursts
 * so a receiver with descriptors posted can keep up; the end is signalled out of band
 * (launcher key), since an unreliable VI may lose it.
 *
 * RD / RR (reliable delivery / reception): every message arrives exactly once, in order,
 * intact (sequence number == count received), and every send completes successfully.
 * The receiver returns credits (one small message per 16 receives) so the sender never
 * finds it without a receive descriptor, as VIA requires on reliable VIs.
 */
#include <softvia_boot.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vipl.h>

#define DIE(...) do { fprintf(stderr, "fault_stream[%d]: ", rank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CK(x) do { VIP_RETURN r_ = (x); if (r_ != VIP_SUCCESS) DIE("%s: %s", #x, VipExtReturnString(r_)); } while (0)

enum { RING = 64, MAXMSG = 20480, BURST = 16 };
static int rank;

static uint32_t fnv(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct hdr { uint32_t seq, len, sum; };

/* Fills buf with message s of random length; returns the length. */
static uint32_t make_message(uint8_t *buf, uint32_t s) {
    /* Mostly small; one in eight up to 20 KiB, so messages span several frames too. */
    uint32_t len = 16 + (uint32_t)(rand() % 8 ? rand() % 2048 : rand() % (MAXMSG - 16));
    uint64_t x = 0x9E3779B97F4A7C15ull * (s + 1); /* cheap content, different per message */
    for (uint32_t i = sizeof(struct hdr); i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    struct hdr h = {s, len, fnv(buf + sizeof h, len - sizeof h)};
    memcpy(buf, &h, sizeof h);
    return len;
}

/* Checks a received message; returns its header. */
static struct hdr check_message(const VIP_DESCRIPTOR *d, uint32_t total) {
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("receive status 0x%x", d->CS.Status);
    const uint8_t *b = (const uint8_t *)d->DS[0].Local.Data.Address;
    struct hdr h;
    memcpy(&h, b, sizeof h);
    if (d->CS.Length != h.len || h.len < sizeof h || h.len > MAXMSG) DIE("length %u vs %u", d->CS.Length, h.len);
    if (fnv(b + sizeof h, h.len - sizeof h) != h.sum) DIE("message %u corrupted", h.seq);
    if (h.seq >= total) DIE("message %u was never sent", h.seq);
    return h;
}

static void set_desc(VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, void *buf, uint32_t len) {
    memset(d, 0, 64);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

enum { CREDIT_EVERY = 16, DONE_MARK = 0xFFFFFFFFu, WAIT_MS = 10000 };

/* The next send completion, which must be successful. */
static void send_ok(VIP_VI_HANDLE vi, uint32_t what) {
    VIP_DESCRIPTOR *d;
    VIP_RETURN r = VipSendWait(vi, WAIT_MS, &d);
    if (r != VIP_SUCCESS) DIE("send %u: VipSendWait: %s", what, VipExtReturnString(r));
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("send %u: status 0x%x", what, d->CS.Status);
}

/* Inline progress: our NIC runs only inside our calls. The peer's last sends complete
 * when we acknowledge them, and our ACK may be lost and need sending again, so keep
 * stepping until the peer has put key (its sends are done). */
static void step_until_key(VIP_NIC_HANDLE nic, const char *key) {
    for (;;) {
        char v;
        size_t vl;
        if (sv_boot_get(key, &v, 1, &vl, 0) == 0) return;
        uint64_t t = now_us();
        while (now_us() - t < 10000) VipExtProgress(nic);
    }
}

/* Reliable levels: slots [0, RING) send and [RING, 2 RING) receive on both sides. */
static void reliable_stream(VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_MEM_HANDLE mh, VIP_DESCRIPTOR **desc,
                            uint8_t **buf, uint32_t total) {
    VIP_DESCRIPTOR *d;
    VIP_EXT_FAULT_COUNTERS fc;
    if (rank == 0) {
        uint32_t credits = RING, acked = 0;
        for (uint32_t s = 0; s < total; s++) {
            while (credits == 0 || VipRecvDone(vi, &d) == VIP_SUCCESS) {
                if (credits == 0) {
                    VIP_RETURN r = VipRecvWait(vi, WAIT_MS, &d);
                    if (r != VIP_SUCCESS) DIE("waiting for credits at message %u: %s", s, VipExtReturnString(r));
                }
                if (d->CS.Status & VIP_STATUS_ERROR_MASK) DIE("credit receive status 0x%x", d->CS.Status);
                credits += d->CS.ImmediateData;
                set_desc(d, mh, d->DS[0].Local.Data.Address, MAXMSG);
                CK(VipPostRecv(vi, d, mh));
            }
            int k = (int)(s % RING);
            if (s >= RING) send_ok(vi, acked++); /* slot k is free once its send completed */
            uint32_t len = make_message(buf[k], s);
            set_desc(desc[k], mh, buf[k], len);
            CK(VipPostSend(vi, desc[k], mh));
            credits--;
        }
        while (acked < total) send_ok(vi, acked++);
        sv_boot_put("sender-sends-done", "1", 1);
        for (;;) { /* credits still on their way, then the receiver's "all arrived" */
            VIP_RETURN r = VipRecvWait(vi, WAIT_MS, &d);
            if (r != VIP_SUCCESS) DIE("waiting for the end mark: %s", VipExtReturnString(r));
            if (d->CS.ImmediateData == DONE_MARK) break;
            set_desc(d, mh, d->DS[0].Local.Data.Address, MAXMSG);
            CK(VipPostRecv(vi, d, mh));
        }
        step_until_key(nic, "receiver-sends-done");
        CK(VipExtQueryFaultCounters(nic, &fc));
        VIP_EXT_COUNTERS vc;
        CK(VipExtQueryViCounters(vi, &vc));
        printf("sent %u, all completed successfully: dropped %llu duplicated %llu reordered %llu corrupted %llu "
               "delayed %llu; resent %llu\n", total, (unsigned long long)fc.Dropped,
               (unsigned long long)fc.Duplicated, (unsigned long long)fc.Reordered,
               (unsigned long long)fc.Corrupted, (unsigned long long)fc.Delayed,
               (unsigned long long)vc.Retransmits);
    } else {
        uint32_t consumed = 0, nsent = 0, ndone = 0;
        for (uint32_t got = 0; got < total; got++) {
            VIP_RETURN r = VipRecvWait(vi, WAIT_MS, &d);
            if (r != VIP_SUCCESS) DIE("waiting for message %u: %s", got, VipExtReturnString(r));
            struct hdr h = check_message(d, total);
            if (h.seq != got) DIE("message %u where %u was due: lost, duplicated or out of order", h.seq, got);
            set_desc(d, mh, d->DS[0].Local.Data.Address, MAXMSG);
            CK(VipPostRecv(vi, d, mh));
            if (++consumed == CREDIT_EVERY || got + 1 == total) {
                if (nsent - ndone == RING) send_ok(vi, ndone++);
                VIP_DESCRIPTOR *c = desc[nsent++ % RING];
                set_desc(c, mh, NULL, 0);
                c->CS.SegCount = 0;
                c->CS.Control = VIP_CONTROL_IMMEDIATE;
                c->CS.ImmediateData = got + 1 == total ? DONE_MARK : consumed;
                CK(VipPostSend(vi, c, mh));
                consumed = 0;
            }
        }
        while (ndone < nsent) send_ok(vi, ndone++);
        sv_boot_put("receiver-sends-done", "1", 1);
        step_until_key(nic, "sender-sends-done");
        CK(VipExtQueryFaultCounters(nic, &fc));
        printf("received all %u exactly once, in order, intact; bad checksums dropped: %llu\n", total,
               (unsigned long long)fc.BadChecksum);
    }
}

int main(int argc, char **argv) {
    int size;
    VIP_RELIABILITY_LEVEL level = VIP_SERVICE_UNRELIABLE;
    if (argc == 3 && !strcmp(argv[2], "RD")) level = VIP_SERVICE_RELIABLE_DELIVERY;
    else if (argc == 3 && !strcmp(argv[2], "RR")) level = VIP_SERVICE_RELIABLE_RECEPTION;
    else if (argc == 3 && strcmp(argv[2], "U")) argc = 0;
    if (sv_boot_init(&rank, &size) != 0 || size != 2 || argc < 2 || argc > 3) {
        fprintf(stderr, "usage: softvia-run -n 2 fault_stream MESSAGES [U|RD|RR] (with SOFTVIA_FAULTS set)\n");
        return 2;
    }
    const uint32_t total = (uint32_t)strtoul(argv[1], NULL, 10);
    VIP_NIC_HANDLE nic;
    CK(VipOpenNic(NULL, &nic));
    VIP_EXT_FAULT_COUNTERS fc;
    if (VipExtQueryFaultCounters(nic, &fc) != VIP_SUCCESS) {
        fprintf(stderr, "fault_stream: SOFTVIA_FAULTS is not set; nothing to test\n");
        return 77;
    }
    VIP_NIC_ATTRIBUTES na;
    CK(VipQueryNic(nic, &na));
    VIP_PROTECTION_HANDLE pt;
    CK(VipCreatePtag(nic, &pt));
    VIP_VI_ATTRIBUTES va = {0};
    va.ReliabilityLevel = level;
    va.Ptag = pt;
    VIP_VI_HANDLE vi;
    CK(VipCreateVi(nic, &va, NULL, NULL, &vi));

    size_t memsz = (size_t)2 * RING * (128 + MAXMSG) + 4096;
    uint8_t *mem = aligned_alloc(4096, (memsz + 4095) & ~(size_t)4095);
    memset(mem, 0, memsz);
    VIP_MEM_ATTRIBUTES ma = {pt, VIP_FALSE, VIP_FALSE};
    VIP_MEM_HANDLE mh;
    CK(VipRegisterMem(nic, mem, memsz, &ma, &mh));
    VIP_DESCRIPTOR *desc[2 * RING];
    uint8_t *buf[2 * RING];
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
    /* Unreliable: the receiver's slots [0, RING) receive. Reliable: slots [RING, 2 RING)
     * receive on both sides (messages, and credits coming back). */
    int first_recv = level == VIP_SERVICE_UNRELIABLE ? 0 : RING;
    if (rank == 1 || level != VIP_SERVICE_UNRELIABLE)
        for (int i = first_recv; i < first_recv + RING; i++) {
            set_desc(desc[i], mh, buf[i], MAXMSG);
            CK(VipPostRecv(vi, desc[i], mh));
        }
    /* Peer requests are resent until answered, so connection set-up survives the losses. */
    CK(VipConnectPeerRequest(vi, la, ra, 20000));
    CK(VipConnectPeerWait(vi, NULL));
    sv_boot_barrier(30000);

    srand(1234);
    if (level != VIP_SERVICE_UNRELIABLE) {
        reliable_stream(nic, vi, mh, desc, buf, total);
        sv_boot_barrier(60000);
    } else if (rank == 0) {
        for (uint32_t s = 0; s < total; s++) {
            int k = (int)(s % RING);
            if (s >= RING) { /* reuse only what the NIC is done with */
                VIP_DESCRIPTOR *d;
                CK(VipSendWait(vi, 5000, &d));
            }
            set_desc(desc[k], mh, buf[k], make_message(buf[k], s));
            CK(VipPostSend(vi, desc[k], mh));
            if (s % BURST == BURST - 1) { /* let the receiver drain: its descriptors are few */
                uint64_t t = now_us();
                while (now_us() - t < 100) VipExtProgress(nic);
            }
        }
        for (;;) {
            VIP_DESCRIPTOR *d;
            VIP_RETURN r = VipSendWait(vi, 2000, &d);
            if (r != VIP_SUCCESS) break; /* VIP_INVALID_STATE: nothing left */
        }
        sv_boot_put("sender-done", "1", 1);
        CK(VipExtQueryFaultCounters(nic, &fc));
        printf("sent %u: dropped %llu duplicated %llu reordered %llu corrupted %llu delayed %llu\n", total,
               (unsigned long long)fc.Dropped, (unsigned long long)fc.Duplicated,
               (unsigned long long)fc.Reordered, (unsigned long long)fc.Corrupted, (unsigned long long)fc.Delayed);
        sv_boot_barrier(60000);
    } else {
        uint32_t got = 0;
        int64_t last = -1;
        uint64_t quiet_since = 0, last_check = 0;
        for (;;) {
            VIP_DESCRIPTOR *d;
            VIP_RETURN r = VipRecvDone(vi, &d);
            if (r == VIP_SUCCESS) {
                quiet_since = 0;
                struct hdr h = check_message(d, total);
                if ((int64_t)h.seq <= last) DIE("message %u after %lld: duplicate or out of order", h.seq, (long long)last);
                last = h.seq;
                got++;
                set_desc(d, mh, d->DS[0].Local.Data.Address, MAXMSG);
                CK(VipPostRecv(vi, d, mh));
                continue;
            }
            if (r != VIP_NOT_DONE) DIE("VipRecvDone: %s", VipExtReturnString(r));
            char v;
            size_t vl;
            uint64_t now = now_us();
            if (now - last_check < 10000) continue;  /* the key is a file: look every 10 ms */
            last_check = now;
            if (sv_boot_get("sender-done", &v, 1, &vl, 0) == 0) {
                if (!quiet_since) quiet_since = now_us();
                if (now_us() - quiet_since > 300000) break; /* sender done and 300 ms of quiet */
            }
        }
        CK(VipExtQueryFaultCounters(nic, &fc));
        printf("received %u of %u in order, intact, no duplicates (%.1f%%); bad checksums dropped: %llu\n", got,
               total, 100.0 * got / total, (unsigned long long)fc.BadChecksum);
        if (got == 0) DIE("nothing arrived");
        sv_boot_barrier(60000);
    }
    VipCloseNic(nic);
    free(mem);
    return 0;
}
