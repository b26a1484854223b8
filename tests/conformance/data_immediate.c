/*
 * data_immediate: VIP_CONTROL_IMMEDIATE delivers the send's ImmediateData into the
 * receive descriptor and sets VIP_STATUS_IMMEDIATE there, with and without payload
 * (also a multi-frame payload); a send without the flag never sets it, whatever its
 * ImmediateData field holds.
 */
#include "helpers.h"

int main(void) {
    th_init("data_immediate", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 20);
    uint32_t mtu = (uint32_t)e.na.NativeMTU;
    char *sbuf = th_alloc(&e, 3 * mtu), *rbuf = th_alloc(&e, 3 * mtu);
    VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1);
    const uint32_t lens[] = {0, 4, 1000, 2 * mtu + 3};
    const uint32_t vals[] = {0, 1, 0x12345678u, 0xffffffffu};

    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a, b;
        th_pair(&e, th_levels[li], &a, &b, "imm");
        for (int k = 0; k < 4; k++) {
            for (int flag = 0; flag < 2; flag++) {
                char ph[96];
                snprintf(ph, sizeof ph, "%s: %u bytes, %s", th_rel_name(th_levels[li]), lens[k],
                         flag ? "immediate" : "no immediate");
                th_phase(ph);
                uint32_t len = lens[k], val = vals[k];
                th_fill(sbuf, len, (uint32_t)k);
                th_set1(rd, e.mh, rbuf, 3 * mtu);
                rd->CS.ImmediateData = 0xdeadbeefu; /* the NIC overwrites it only with immediate data */
                CHECK(VipPostRecv(b, rd, e.mh));
                th_set1(sd, e.mh, sbuf, len);
                if (len == 0) sd->CS.SegCount = 0;
                sd->CS.Control = flag ? VIP_CONTROL_IMMEDIATE : 0;
                sd->CS.ImmediateData = val;
                CHECK(VipPostSend(a, sd, e.mh));
                VIP_DESCRIPTOR *s = th_send_done_must(a, sd, ph);
                VIP_DESCRIPTOR *r = th_recv_done_must(b, rd, ph);
                EXPECT((s->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: send status 0x%x", ph, s->CS.Status);
                EXPECT((r->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && r->CS.Length == len,
                       "%s: receive status 0x%x len %u", ph, r->CS.Status, r->CS.Length);
                if (flag) {
                    EXPECT(r->CS.Status & VIP_STATUS_IMMEDIATE, "%s: VIP_STATUS_IMMEDIATE missing (0x%x)", ph,
                           r->CS.Status);
                    EXPECT(r->CS.ImmediateData == val, "%s: ImmediateData 0x%x want 0x%x", ph, r->CS.ImmediateData, val);
                } else {
                    EXPECT(!(r->CS.Status & VIP_STATUS_IMMEDIATE), "%s: VIP_STATUS_IMMEDIATE set (0x%x)", ph,
                           r->CS.Status);
                }
                EXPECT(th_verify(rbuf, len, (uint32_t)k) < 0, "%s: payload differs", ph);
            }
        }
        /* a run of immediate-only messages keeps the values in order */
        th_phase("immediate values in order");
        enum { M = 32 };
        VIP_DESCRIPTOR *r[M], *s[M];
        for (int i = 0; i < M; i++) {
            r[i] = th_desc(&e, 1);
            s[i] = th_desc(&e, 1);
            th_set1(r[i], e.mh, rbuf, 16);
            CHECK(VipPostRecv(b, r[i], e.mh));
        }
        for (int i = 0; i < M; i++) {
            memset(&s[i]->CS, 0, sizeof s[i]->CS);
            s[i]->CS.Control = VIP_CONTROL_IMMEDIATE;
            s[i]->CS.ImmediateData = 1000u + (uint32_t)i;
            CHECK(VipPostSend(a, s[i], e.mh));
        }
        for (int i = 0; i < M; i++) {
            VIP_DESCRIPTOR *d = th_recv_done_must(b, r[i], "run");
            EXPECT(d->CS.ImmediateData == 1000u + (uint32_t)i && (d->CS.Status & VIP_STATUS_IMMEDIATE),
                   "message %d: imm %u", i, d->CS.ImmediateData);
            th_send_done_must(a, s[i], "run send");
        }
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        th_drain(b, 100);
    }
    th_close_env(&e);
    return th_result();
}
