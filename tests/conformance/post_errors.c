/*
 * post_errors: what VipPostSend / VipPostRecv refuse at post time (a return code, not a
 * descriptor status): NULL or misaligned descriptor, descriptor outside registered
 * memory or under the wrong memory handle (VIP_INVALID_PARAMETER), a send on a VI that
 * is not connected (VIP_INVALID_STATE), more than MaxDescriptorsPerQueue outstanding
 * (VIP_ERROR_RESOURCE). Wait on an empty queue is VIP_INVALID_STATE, Done on one is
 * VIP_NOT_DONE. A refused post leaves the queue untouched.
 */
#include "helpers.h"

int main(void) {
    th_init("post_errors", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 20);
    VIP_VI_HANDLE a, b;
    th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "pe");
    VIP_VI_HANDLE idle = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    char *buf = th_alloc(&e, 4096);
    VIP_DESCRIPTOR *good = th_desc(&e, 1);
    th_set1(good, e.mh, buf, 16);
    VIP_DESCRIPTOR *d;

    th_phase("NULL and misaligned descriptors");
    EXPECT_RC(VipPostSend(a, NULL, e.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipPostRecv(b, NULL, e.mh), VIP_INVALID_PARAMETER);
    char *raw = th_alloc(&e, 1024);
    for (int off = 1; off < 64; off *= 2) {
        /* Built aligned, then copied byte-wise: the test itself must not access a
         * misaligned struct (UB), only hand its address to the library. */
        VIP_DESCRIPTOR tmp;
        memset(&tmp, 0, sizeof tmp);
        th_set1(&tmp, e.mh, buf, 16);
        memcpy(raw + 64 + off, &tmp, sizeof tmp);
        VIP_DESCRIPTOR *mis = (VIP_DESCRIPTOR *)(raw + 64 + off);
        EXPECT_RC(VipPostSend(a, mis, e.mh), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipPostRecv(b, mis, e.mh), VIP_INVALID_PARAMETER);
    }

    th_phase("descriptor outside registered memory");
    {
        VIP_DESCRIPTOR *heap = aligned_alloc(64, 256);
        memset(heap, 0, 256);
        th_set1(heap, e.mh, buf, 16);
        EXPECT_RC(VipPostSend(a, heap, e.mh), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipPostRecv(b, heap, e.mh), VIP_INVALID_PARAMETER);
        _Alignas(64) VIP_DESCRIPTOR stackd;
        memset(&stackd, 0, sizeof stackd);
        EXPECT_RC(VipPostRecv(b, &stackd, e.mh), VIP_INVALID_PARAMETER);
        char *small = aligned_alloc(4096, 4096);
        memset(small, 0, 4096);
        VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
        VIP_MEM_HANDLE smh;
        /* a region of 16 bytes: a control segment (32 bytes) does not fit */
        CHECK(VipRegisterMem(e.nic, small, 16, &ma, &smh));
        EXPECT_RC(VipPostRecv(b, (VIP_DESCRIPTOR *)small, smh), VIP_INVALID_PARAMETER);
        CHECK(VipDeregisterMem(e.nic, small, smh));
        free(small);
        free(heap);
    }

    th_phase("wrong memory handle");
    {
        char *other = aligned_alloc(4096, 4096);
        VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
        VIP_MEM_HANDLE omh;
        CHECK(VipRegisterMem(e.nic, other, 4096, &ma, &omh));
        EXPECT_RC(VipPostSend(a, good, omh), VIP_INVALID_PARAMETER); /* handle of another region */
        EXPECT_RC(VipPostRecv(b, good, omh), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipPostSend(a, good, 0), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipPostRecv(b, good, 0xffffffffu), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipPostRecv(b, good, e.mh ^ 0x10000u), VIP_INVALID_PARAMETER); /* other generation */
        CHECK(VipDeregisterMem(e.nic, other, omh));
        /* a stale handle: the region that held the descriptor is gone */
        char *gone = aligned_alloc(4096, 4096);
        VIP_MEM_HANDLE gmh;
        CHECK(VipRegisterMem(e.nic, gone, 4096, &ma, &gmh));
        CHECK(VipDeregisterMem(e.nic, gone, gmh));
        memset(gone, 0, 64);
        EXPECT_RC(VipPostRecv(b, (VIP_DESCRIPTOR *)gone, gmh), VIP_INVALID_PARAMETER);
        free(other);
        free(gone);
    }

    th_phase("send on a VI that is not connected");
    EXPECT_RC(VipPostSend(idle, good, e.mh), VIP_INVALID_STATE);
    {
        VIP_VI_HANDLE p = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        th_addr l, r;
        CHECK(VipConnectPeerRequest(p, th_mkaddr(&l, &e.na, "pe.p"), th_mkaddr(&r, &e.na, "pe.q"), 60000));
        EXPECT_RC(VipPostSend(p, good, e.mh), VIP_INVALID_STATE); /* connect pending */
        CHECK(VipDisconnect(p));
        CHECK(VipDestroyVi(p));
    }
    /* but a receive may be posted before the connection exists */
    EXPECT_RC(VipPostRecv(idle, good, e.mh), VIP_SUCCESS);

    th_phase("Wait and Done on empty queues");
    EXPECT_RC(VipSendWait(a, 100, &d), VIP_INVALID_STATE);
    EXPECT_RC(VipRecvWait(a, 100, &d), VIP_INVALID_STATE);
    EXPECT_RC(VipSendWait(a, VIP_INFINITE, &d), VIP_INVALID_STATE);
    EXPECT_RC(VipRecvWait(a, VIP_INFINITE, &d), VIP_INVALID_STATE);
    EXPECT_RC(VipSendDone(a, &d), VIP_NOT_DONE);
    EXPECT_RC(VipRecvDone(a, &d), VIP_NOT_DONE);
    EXPECT_RC(VipSendWait(idle, 0, &d), VIP_INVALID_STATE);

    th_phase("refused posts left the queues alone");
    {
        VIP_BOOLEAN se, re;
        CHECK(VipQueryVi(a, NULL, NULL, &se, &re));
        EXPECT(se && re, "a's queues: send empty %u recv empty %u", se, re);
        CHECK(VipQueryVi(b, NULL, NULL, &se, &re));
        EXPECT(se && re, "b's queues: send empty %u recv empty %u", se, re);
        /* and the connection still carries data */
        VIP_DESCRIPTOR *rd = th_desc(&e, 1), *sd = th_desc(&e, 1);
        th_set1(rd, e.mh, buf + 1024, 64);
        CHECK(VipPostRecv(b, rd, e.mh));
        memcpy(buf, "still-fine", 10);
        th_set1(sd, e.mh, buf, 10);
        CHECK(VipPostSend(a, sd, e.mh));
        th_send_done_must(a, sd, "send");
        d = th_recv_done_must(b, rd, "recv");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.Length == 10 && !memcmp(buf + 1024, "still-fine", 10),
               "status 0x%x len %u", d->CS.Status, d->CS.Length);
    }

    th_phase("queue limit");
    {
        VIP_ULONG max = e.na.MaxDescriptorsPerQueue;
        if (max > 65536) {
            printf("post_errors: MaxDescriptorsPerQueue %llu too large to fill here\n", (unsigned long long)max);
        } else {
            VIP_VI_HANDLE q = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            size_t bytes = (size_t)(max + 1) * 64;
            char *m = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
            memset(m, 0, bytes);
            VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
            VIP_MEM_HANDLE mh;
            CHECK(VipRegisterMem(e.nic, m, bytes, &ma, &mh));
            VIP_ULONG i;
            for (i = 0; i < max; i++) {
                VIP_DESCRIPTOR *x = (VIP_DESCRIPTOR *)(m + i * 64);
                x->CS.SegCount = 0;
                VIP_RETURN r = VipPostRecv(q, x, mh);
                if (r != VIP_SUCCESS) {
                    TH_FAILMSG("receive %llu of %llu refused: %s", (unsigned long long)i, (unsigned long long)max, th_rs(r));
                    th_failures++;
                    break;
                }
            }
            if (i == max) EXPECT_RC(VipPostRecv(q, (VIP_DESCRIPTOR *)(m + max * 64), mh), VIP_ERROR_RESOURCE);
            /* let them go: connect and flush by disconnecting */
            VIP_VI_HANDLE p = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            th_connect_peer(&e, q, p, "limit");
            CHECK(VipDisconnect(q));
            VIP_ULONG n = 0;
            while (n < i && th_recv_wait(q, NULL)) n++;
            EXPECT(n == i, "flushed %llu of %llu", (unsigned long long)n, (unsigned long long)i);
            th_wait_state(p, VIP_STATE_ERROR, TH_WAIT_MS);
            CHECK(VipDisconnect(p));
            CHECK(VipDestroyVi(q));
            CHECK(VipDeregisterMem(e.nic, m, mh));
            free(m);
        }
    }

    th_close_env(&e);
    return th_result();
}
