/*
 * mp_alltoall: 4 processes, every pair connected peer-to-peer (3 VIs per rank, all
 * requests issued before any is finished), then every rank sends M messages to every
 * other rank, round-robin over its peers, while receiving theirs. Each message has a
 * random size up to a few frames, a pattern derived from (source, destination, index)
 * and the payload's checksum in its immediate data; order and content are checked on
 * arrival. Every receive is posted before the connections come up, so no credits are
 * needed on the reliable VIs.
 *
 *   softvia-run -n 4 mp_alltoall --progress inline|thread [--msgs M]
 */
#include "mp_common.h"

enum { MAXR = 8, MAXSZ = 20000, W = 16 };

static uint32_t size_of(int src, int dst, uint32_t i) {
    uint32_t s = (uint32_t)(src * 131 + dst * 7) ^ (i * 2654435761u);
    uint32_t r = mp_rand(&s);
    return r % 8 == 0 ? 0 : r % (MAXSZ + 1);
}

static uint32_t seed_of(int src, int dst, uint32_t i) { return (uint32_t)(src << 24 | dst << 16) ^ i; }

int main(int argc, char **argv) {
    const char *progress = "inline";
    int M = 300;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--progress")) progress = argv[i + 1];
        else if (!strcmp(argv[i], "--msgs")) M = atoi(argv[i + 1]);
    }
    mp_init("mp_alltoall", 0, 110);
    if (mp_size < 2 || mp_size > MAXR) FATAL("2..%d ranks", MAXR);
    th_env e;
    size_t per_peer = (size_t)M * (MAXSZ + 64) + (size_t)W * (MAXSZ + 64) + (size_t)(M + W) * 128;
    mp_open(&e, progress, per_peer * (size_t)(mp_size - 1) + 65536);
    mp_addrs ad;
    mp_exchange(&e, &ad);

    VIP_VI_HANDLE vi[MAXR] = {0};
    VIP_DESCRIPTOR **rd[MAXR], *sd[MAXR][W];
    char **rb[MAXR], *sb[MAXR][W];
    th_phase("post receives, connect");
    for (int p = 0; p < mp_size; p++) {
        if (p == mp_rank) continue;
        vi[p] = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        rd[p] = calloc((size_t)M, sizeof *rd[p]);
        rb[p] = calloc((size_t)M, sizeof *rb[p]);
        for (int i = 0; i < M; i++) {
            rd[p][i] = th_desc(&e, 1);
            rb[p][i] = th_alloc(&e, MAXSZ);
            th_set1(rd[p][i], e.mh, rb[p][i], MAXSZ);
            CHECK(VipPostRecv(vi[p], rd[p][i], e.mh));
        }
        for (int k = 0; k < W; k++) {
            sd[p][k] = th_desc(&e, 1);
            sb[p][k] = th_alloc(&e, MAXSZ);
        }
        mp_peer_request(vi[p], &ad, p, "a2a");
    }
    for (int p = 0; p < mp_size; p++)
        if (p != mp_rank) mp_peer_finish(vi[p], p);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");

    th_phase("all-to-all");
    uint32_t sent[MAXR] = {0}, sdone[MAXR] = {0}, recvd[MAXR] = {0};
    uint64_t t0 = th_now_ms();
    int busy = 1;
    static char tmp[MAXSZ];
    while (busy) {
        busy = 0;
        if (th_now_ms() - t0 > 90000) FATAL("stalled");
        for (int p = 0; p < mp_size; p++) {
            if (p == mp_rank) continue;
            if (sent[p] < (uint32_t)M && sent[p] - sdone[p] < W) {
                int k = (int)(sent[p] % W);
                uint32_t len = size_of(mp_rank, p, sent[p]);
                th_fill(sb[p][k], len, seed_of(mp_rank, p, sent[p]));
                th_set1(sd[p][k], e.mh, sb[p][k], len);
                if (len == 0) sd[p][k]->CS.SegCount = 0;
                sd[p][k]->CS.Control = VIP_CONTROL_IMMEDIATE;
                sd[p][k]->CS.ImmediateData = mp_fnv(sb[p][k], len);
                CHECK(VipPostSend(vi[p], sd[p][k], e.mh));
                sent[p]++;
            }
            VIP_DESCRIPTOR *d;
            while (VipSendDone(vi[p], &d) == VIP_SUCCESS) {
                if (d != sd[p][sdone[p] % W] || (d->CS.Status & VIP_STATUS_ERROR_MASK))
                    FATAL("send %u to rank %d: status 0x%x", sdone[p], p, d->CS.Status);
                sdone[p]++;
            }
            while (VipRecvDone(vi[p], &d) == VIP_SUCCESS) {
                uint32_t i = recvd[p];
                uint32_t len = size_of(p, mp_rank, i);
                if (d != rd[p][i] || (d->CS.Status & VIP_STATUS_ERROR_MASK) || d->CS.Length != len)
                    FATAL("message %u from rank %d: descriptor %p (want %p), status 0x%x, %u bytes (want %u)", i, p,
                          (void *)d, (void *)rd[p][i], d->CS.Status, d->CS.Length, len);
                if (d->CS.ImmediateData != mp_fnv(rb[p][i], len)) FATAL("message %u from rank %d: checksum", i, p);
                th_fill(tmp, len, seed_of(p, mp_rank, i));
                if (memcmp(tmp, rb[p][i], len)) FATAL("message %u from rank %d: payload differs", i, p);
                recvd[p]++;
            }
            if (sdone[p] < (uint32_t)M || recvd[p] < (uint32_t)M) busy = 1;
        }
        if (busy) sched_yield(); /* 4 ranks on 2 cores */
    }
    uint64_t dt = th_now_ms() - t0;
    printf("%s: sent and received %d messages with each of %d peers in %llu ms\n", th_prog, M, mp_size - 1,
           (unsigned long long)dt);

    th_phase("teardown");
    for (int p = 0; p < mp_size; p++) {
        if (p == mp_rank) continue;
        VIP_EXT_COUNTERS c = th_vi_counters_at_least(vi[p], offsetof(VIP_EXT_COUNTERS, RecvsDone), (uint64_t)M);
        /* a lossy wire's spurious resends arrive twice: the second copy counts as a drop */
        EXPECT((c.Drops == 0 || th_wire_lossy()) && c.Errors == 0 && c.RecvsDone == (uint64_t)M, "VI to rank %d: %llu drops %llu errors %llu receives",
               p, (unsigned long long)c.Drops, (unsigned long long)c.Errors, (unsigned long long)c.RecvsDone);
        EXPECT(th_state(vi[p]) == VIP_STATE_CONNECTED, "VI to rank %d: %s", p, th_state_name(th_state(vi[p])));
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    for (int p = 0; p < mp_size; p++)
        if (p != mp_rank) CHECK(VipDisconnect(vi[p]));
    CHECK(VipCloseNic(e.nic));
    for (int p = 0; p < mp_size; p++)
        if (p != mp_rank) {
            free(rd[p]);
            free(rb[p]);
        }
    free(e.mem);
    return th_result();
}
