/*
 * vipl_selfcost -- what the software path of one VIPL message costs, measured in one
 * thread with nothing between the sides: one NIC (SOFTVIA_DEVICE, shm by default), two
 * VIs connected to each other, and a loop that posts an 8-byte send on one, polls the
 * other's receive until it is done, posts the receive again and takes the send's
 * completion; then the same the other way.
 *
 *   vipl_selfcost [--iters N] [--rounds R] [--bytes B]
 *
 * Prints nanoseconds per message (median of R rounds of N messages, and the fastest
 * round). No cache line travels between cores here, so the figure moves with the code
 * and not with where the VM put the two vCPUs this minute (which moves the two-process
 * figures of vipl_bench by 2x): the instrument for a change to the data path, run before
 * and after. It is not a latency: a real one-way adds the transfer and the polling.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vipl.h"

#define DIE(...) (fprintf(stderr, "vipl_selfcost: " __VA_ARGS__), fputc('\n', stderr), exit(1))
#define CK(x)                                                                      \
    do {                                                                           \
        VIP_RETURN r_ = (x);                                                       \
        if (r_ != VIP_SUCCESS) DIE("%s failed: %d (line %d)", #x, (int)r_, __LINE__); \
    } while (0)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct addr {
    VIP_NET_ADDRESS a;
    char room[128];
};

static VIP_NET_ADDRESS *mkaddr(struct addr *buf, const VIP_NIC_ATTRIBUTES *na, const char *disc) {
    memset(buf, 0, sizeof *buf);
    buf->a.HostAddressLen = na->NicAddressLen;
    memcpy(buf->a.HostAddress, na->LocalNicAddress, na->NicAddressLen);
    buf->a.DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy(buf->a.HostAddress + na->NicAddressLen, disc, strlen(disc));
    return &buf->a;
}

struct side {
    VIP_VI_HANDLE vi;
    VIP_DESCRIPTOR *sd, *rd;
    char *sbuf, *rbuf;
};

static void set_desc(VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, void *buf, uint32_t len) {
    memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

/* One message from s to r: post, poll r's receive, repost it, take s's send. */
static void one(struct side *s, struct side *r, VIP_MEM_HANDLE mh, uint32_t bytes) {
    VIP_DESCRIPTOR *x = NULL; /* (a failed Done call leaves it unset) */
    set_desc(s->sd, mh, s->sbuf, bytes);
    CK(VipPostSend(s->vi, s->sd, mh));
    VIP_RETURN rc;
    while ((rc = VipRecvDone(r->vi, &x)) == VIP_NOT_DONE) {}
    if (rc != VIP_SUCCESS || x != r->rd || x->CS.Length != bytes) DIE("receive: %d, length %u", (int)rc, x ? x->CS.Length : 0);
    set_desc(r->rd, mh, r->rbuf, 4096);
    CK(VipPostRecv(r->vi, r->rd, mh));
    while ((rc = VipSendDone(s->vi, &x)) == VIP_NOT_DONE) {}
    if (rc != VIP_SUCCESS || x != s->sd) DIE("send: %d", (int)rc);
}

int main(int argc, char **argv) {
    int iters = 100000, rounds = 15;
    uint32_t bytes = 8;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--bytes")) bytes = (uint32_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: vipl_selfcost [--iters N] [--rounds R] [--bytes B (at most 4096)]\n");
            return 2;
        }
    }
    if (iters < 1 || rounds < 1 || bytes > 4096) DIE("--iters and --rounds must be positive, --bytes at most 4096");

    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE ptag;
    CK(VipOpenNic(NULL, &nic));
    CK(VipQueryNic(nic, &na));
    CK(VipCreatePtag(nic, &ptag));
    size_t memsz = 4 * 4096 + 4 * 128;
    char *mem = aligned_alloc(4096, memsz);
    memset(mem, 0, memsz);
    VIP_MEM_ATTRIBUTES ma = {ptag, VIP_FALSE, VIP_FALSE};
    VIP_MEM_HANDLE mh;
    CK(VipRegisterMem(nic, mem, memsz, &ma, &mh));

    struct side s[2];
    for (int k = 0; k < 2; k++) {
        VIP_VI_ATTRIBUTES va;
        memset(&va, 0, sizeof va);
        va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
        va.Ptag = ptag;
        CK(VipCreateVi(nic, &va, NULL, NULL, &s[k].vi));
        s[k].sd = (VIP_DESCRIPTOR *)(mem + 4 * 4096 + k * 256);
        s[k].rd = (VIP_DESCRIPTOR *)(mem + 4 * 4096 + k * 256 + 128);
        s[k].sbuf = mem + k * 2 * 4096;
        s[k].rbuf = mem + k * 2 * 4096 + 4096;
        set_desc(s[k].rd, mh, s[k].rbuf, 4096);
        CK(VipPostRecv(s[k].vi, s[k].rd, mh));
    }
    struct addr la, ra, lb, rb;
    CK(VipConnectPeerRequest(s[0].vi, mkaddr(&la, &na, "selfcost.a"), mkaddr(&ra, &na, "selfcost.b"), 5000));
    CK(VipConnectPeerRequest(s[1].vi, mkaddr(&lb, &na, "selfcost.b"), mkaddr(&rb, &na, "selfcost.a"), 5000));
    VIP_RETURN a = VIP_NOT_DONE, b = VIP_NOT_DONE;
    for (uint64_t end = now_ns() + 10000000000ull; (a == VIP_NOT_DONE || b == VIP_NOT_DONE) && now_ns() < end;) {
        if (a == VIP_NOT_DONE) a = VipConnectPeerDone(s[0].vi, NULL);
        if (b == VIP_NOT_DONE) b = VipConnectPeerDone(s[1].vi, NULL);
    }
    if (a != VIP_SUCCESS || b != VIP_SUCCESS) DIE("connecting the two VIs: %d, %d", (int)a, (int)b);

    for (int i = 0; i < iters / 10 + 100; i++) one(&s[i & 1], &s[1 - (i & 1)], mh, bytes);  // warm-up
    double *ns = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < iters; i++) one(&s[i & 1], &s[1 - (i & 1)], mh, bytes);
        ns[r] = (double)(now_ns() - t0) / iters;
    }
    qsort(ns, (size_t)rounds, sizeof *ns, cmp_d);
    printf("vipl_selfcost: %u-byte message, post to completion on both sides, one thread: %.1f ns median of %d "
           "rounds of %d (fastest %.1f)\n",
           bytes, ns[rounds / 2], rounds, iters, ns[0]);
    free(ns);
    CK(VipDisconnect(s[0].vi));
    CK(VipDisconnect(s[1].vi));
    CK(VipCloseNic(nic));
    return 0;
}
