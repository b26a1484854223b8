/*
 * data_gather_scatter: a send gathered from several data segments (of different sizes,
 * including empty ones, in different registered regions) arrives as one message, and a
 * receive scatters it over several segments in order; the message crosses frame (MTU)
 * boundaries inside segments; MaxSegmentsPerDesc segments on both sides.
 */
#include "helpers.h"

/* Sends the concatenation of n send segments of lens ls[] into m receive segments of
 * lens lr[], and checks the bytes land where they should. */
static void run(th_env *e, VIP_VI_HANDLE a, VIP_VI_HANDLE b, const uint32_t *ls, unsigned n, const uint32_t *lr,
                unsigned m, VIP_MEM_HANDLE alt_mh, char *alt, uint32_t seed, const char *what) {
    th_phase(what);
    uint32_t total = 0, cap = 0;
    for (unsigned i = 0; i < n; i++) total += ls[i];
    for (unsigned i = 0; i < m; i++) cap += lr[i];
    char *src = malloc(total + 1);
    th_fill(src, total, seed);
    VIP_DESCRIPTOR *sd = th_desc(e, n), *rd = th_desc(e, m);
    char *rseg[64];
    sd->CS.SegCount = (VIP_UINT16)n;
    uint32_t off = 0, alt_off = 0;
    for (unsigned i = 0; i < n; i++) {
        char *p;
        VIP_MEM_HANDLE mh;
        if (alt && (i & 1)) { /* odd segments from the second region */
            p = alt + alt_off;
            alt_off += (ls[i] + 63) & ~63u;
            mh = alt_mh;
        } else {
            p = th_alloc(e, ls[i] ? ls[i] : 1);
            mh = e->mh;
        }
        memcpy(p, src + off, ls[i]);
        off += ls[i];
        th_seg(sd, i)->Data.Address = p;
        th_seg(sd, i)->Handle = mh;
        th_seg(sd, i)->Length = ls[i];
    }
    rd->CS.SegCount = (VIP_UINT16)m;
    for (unsigned i = 0; i < m; i++) {
        rseg[i] = th_alloc(e, lr[i] + 1);
        memset(rseg[i], 0xcc, lr[i] + 1);
        th_seg(rd, i)->Data.Address = rseg[i];
        th_seg(rd, i)->Handle = e->mh;
        th_seg(rd, i)->Length = lr[i];
    }
    CHECK(VipPostRecv(b, rd, e->mh));
    CHECK(VipPostSend(a, sd, e->mh));
    VIP_DESCRIPTOR *s = NULL, *r = NULL, *d;
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while ((!s || !r) && th_now_ms() < end) {
        if (!s && VipSendDone(a, &d) == VIP_SUCCESS) s = d;
        if (!r && VipRecvDone(b, &d) == VIP_SUCCESS) r = d;
    }
    if (!s || !r) FATAL("%s: send %s, receive %s", what, s ? "done" : "missing", r ? "done" : "missing");
    EXPECT((s->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: send status 0x%x", what, s->CS.Status);
    EXPECT((r->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: receive status 0x%x", what, r->CS.Status);
    EXPECT(r->CS.Length == total, "%s: length %u want %u", what, r->CS.Length, total);
    /* walk the receive segments */
    off = 0;
    for (unsigned i = 0; i < m && off < total; i++) {
        uint32_t take = lr[i] < total - off ? lr[i] : total - off;
        EXPECT(memcmp(rseg[i], src + off, take) == 0, "%s: receive segment %u (%u bytes at message offset %u) differs",
               what, i, take, off);
        if (take < lr[i] || i == m - 1)
            EXPECT((uint8_t)rseg[i][take] == 0xcc, "%s: segment %u written past the message", what, i);
        off += take;
    }
    free(src);
    (void)cap;
}

int main(void) {
    th_init("data_gather_scatter", 0);
    th_env e;
    th_open_env(&e, NULL, 8 << 20);
    uint32_t mtu = (uint32_t)e.na.NativeMTU;
    unsigned maxseg = (unsigned)e.na.MaxSegmentsPerDesc;
    if (maxseg > 64) maxseg = 64;
    char *alt = aligned_alloc(4096, 1 << 20);
    VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
    VIP_MEM_HANDLE amh;
    CHECK(VipRegisterMem(e.nic, alt, 1 << 20, &ma, &amh));

    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a, b;
        th_pair(&e, th_levels[li], &a, &b, "gs");
        char what[128];
        {
            const uint32_t ls[] = {10, 0, 1000, 1, mtu + 17, 0, 5};
            const uint32_t lr[] = {7, mtu, 3000};
            snprintf(what, sizeof what, "%s: 7 send segments into 3", th_rel_name(th_levels[li]));
            run(&e, a, b, ls, 7, lr, 3, 0, NULL, 1 + li, what);
        }
        {
            const uint32_t ls[] = {mtu * 3 + 5};
            const uint32_t lr[] = {1, 0, mtu - 1, 2, mtu, 100000};
            snprintf(what, sizeof what, "%s: 1 send segment into 6", th_rel_name(th_levels[li]));
            run(&e, a, b, ls, 1, lr, 6, 0, NULL, 10 + li, what);
        }
        {
            const uint32_t ls[] = {100, 200, 300, 400};
            const uint32_t lr[] = {1000};
            snprintf(what, sizeof what, "%s: segments from two regions", th_rel_name(th_levels[li]));
            run(&e, a, b, ls, 4, lr, 1, amh, alt, 20 + li, what);
        }
        {
            /* exactly filling every receive segment */
            const uint32_t ls[] = {4096, 4096};
            const uint32_t lr[] = {2048, 2048, 2048, 2048};
            snprintf(what, sizeof what, "%s: exact fit", th_rel_name(th_levels[li]));
            run(&e, a, b, ls, 2, lr, 4, 0, NULL, 30 + li, what);
        }
        {
            uint32_t ls[64], lr[64];
            for (unsigned i = 0; i < maxseg; i++) {
                ls[i] = 1 + 37 * i;
                lr[i] = 50 + 41 * (maxseg - i);
            }
            snprintf(what, sizeof what, "%s: %u segments on both sides", th_rel_name(th_levels[li]), maxseg);
            run(&e, a, b, ls, maxseg, lr, maxseg, amh, alt, 40 + li, what);
        }
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
    }
    th_close_env(&e);
    free(alt);
    return th_result();
}
