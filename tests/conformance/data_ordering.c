/*
 * data_ordering: 10,000 messages of varying size on each reliability level arrive in
 * the order they were sent, each intact, while the receiver keeps a window of receives
 * posted and reposts as it goes; send completions come back in posting order.
 */
#include "helpers.h"

enum { MSGS = 10000, WIN = 64, SLOT = 2048 };

static uint32_t msg_len(uint32_t i) { return 8 + (i * 2654435761u >> 7) % (SLOT - 8); }

int main(void) {
    th_init("data_ordering", 0);
    th_env e;
    th_open_env(&e, NULL, 2 * WIN * (SLOT + 256) + 65536);
    VIP_DESCRIPTOR *sd[WIN], *rd[WIN];
    char *sb[WIN], *rb[WIN];
    for (int i = 0; i < WIN; i++) {
        sd[i] = th_desc(&e, 1);
        rd[i] = th_desc(&e, 1);
        sb[i] = th_alloc(&e, SLOT);
        rb[i] = th_alloc(&e, SLOT);
    }
    for (int li = 0; li < 3; li++) {
        th_phase(th_rel_name(th_levels[li]));
        VIP_VI_HANDLE a, b;
        th_pair(&e, th_levels[li], &a, &b, "order");
        for (int i = 0; i < WIN; i++) {
            th_set1(rd[i], e.mh, rb[i], SLOT);
            CHECK(VipPostRecv(b, rd[i], e.mh));
        }
        uint32_t sent = 0, sdone = 0, recvd = 0;
        int bad = 0;
        uint64_t end = th_now_ms() + 40000;
        while (recvd < MSGS && !bad) {
            if (th_now_ms() > end) FATAL("stalled: sent %u, send-completed %u, received %u", sent, sdone, recvd);
            /* keep at most WIN messages beyond what the receiver has taken: there is
             * always a receive posted for every message in flight */
            while (sent < MSGS && sent - recvd < WIN && sent - sdone < WIN) {
                int k = (int)(sent % WIN);
                uint32_t len = msg_len(sent);
                th_fill(sb[k], len, sent);
                memcpy(sb[k], &sent, 4);
                th_set1(sd[k], e.mh, sb[k], len);
                CHECK(VipPostSend(a, sd[k], e.mh));
                sent++;
            }
            VIP_DESCRIPTOR *d;
            while (VipSendDone(a, &d) == VIP_SUCCESS) {
                if (d != sd[sdone % WIN] || (d->CS.Status & VIP_STATUS_ERROR_MASK)) {
                    TH_FAILMSG("send %u: descriptor %p status 0x%x (want %p)", sdone, (void *)d, d->CS.Status,
                               (void *)sd[sdone % WIN]);
                    bad = 1;
                    break;
                }
                sdone++;
            }
            while (!bad && VipRecvDone(b, &d) == VIP_SUCCESS) {
                int k = (int)(recvd % WIN);
                uint32_t seq;
                memcpy(&seq, rb[k], 4);
                uint32_t want_len = msg_len(recvd);
                if (d != rd[k] || (d->CS.Status & VIP_STATUS_ERROR_MASK) || seq != recvd || d->CS.Length != want_len) {
                    TH_FAILMSG("message %u: desc %p (want %p) status 0x%x seq %u len %u (want %u)", recvd, (void *)d,
                               (void *)rd[k], d->CS.Status, seq, d->CS.Length, want_len);
                    bad = 1;
                    break;
                }
                char tmp[SLOT];
                th_fill(tmp, want_len, recvd);
                if (memcmp(rb[k] + 4, tmp + 4, want_len - 4) != 0) {
                    TH_FAILMSG("message %u: payload differs", recvd);
                    bad = 1;
                    break;
                }
                recvd++;
                th_set1(rd[k], e.mh, rb[k], SLOT);
                CHECK(VipPostRecv(b, rd[k], e.mh));
            }
        }
        if (bad) th_failures++;
        while (!bad && sdone < sent) {
            VIP_DESCRIPTOR *d = th_send_done_must(a, sd[sdone % WIN], "final sends");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "send %u status 0x%x", sdone, d->CS.Status);
            sdone++;
        }
        printf("data_ordering: %s: %u messages in order\n", th_rel_name(th_levels[li]), recvd);
        VIP_EXT_COUNTERS c = th_vi_counters_at_least(b, offsetof(VIP_EXT_COUNTERS, RecvsDone), MSGS);
        /* a lossy wire's spurious resends arrive twice: the second copy counts as a drop */
        EXPECT(c.RecvsDone == MSGS && (c.Drops == 0 || th_wire_lossy()) && c.Errors == 0, "receiver counters: recvs %llu drops %llu errors %llu",
               (unsigned long long)c.RecvsDone, (unsigned long long)c.Drops, (unsigned long long)c.Errors);
        c = th_vi_counters_at_least(a, offsetof(VIP_EXT_COUNTERS, SendsDone), MSGS);
        EXPECT(c.SendsDone == MSGS && c.Errors == 0, "sender counters: sends %llu errors %llu",
               (unsigned long long)c.SendsDone, (unsigned long long)c.Errors);
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        th_drain(a, 1000);
        th_drain(b, 1000);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
        if (bad) break;
    }
    th_close_env(&e);
    return th_result();
}
