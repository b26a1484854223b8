/*
 * vi_create: VipCreateVi with each reliability level and its refusals (bad reliability,
 * MaxTransferSize over the NIC's, RDMA read on an unreliable VI, bad ptag, CQ of another
 * NIC), VipQueryVi (state, attributes, queue-empty flags), VipSetViAttributes only while
 * idle. RDMA read is accepted (and reported back) on the levels RDMAReadSupport names.
 */
#include "helpers.h"

static VIP_VI_ATTRIBUTES attrs(VIP_PROTECTION_HANDLE pt, VIP_RELIABILITY_LEVEL r) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = r;
    va.Ptag = pt;
    va.MaxTransferSize = 4096;
    return va;
}

int main(void) {
    th_init("vi_create", 0);
    th_env e, e2;
    th_open_env(&e, NULL, 1 << 16);
    th_open_env(&e2, NULL, 0);
    VIP_VI_HANDLE vi;
    VIP_VI_ATTRIBUTES va, got;
    VIP_VI_STATE st;
    VIP_BOOLEAN se, re;

    th_phase("each reliability level");
    for (int i = 0; i < 3; i++) {
        if (!(e.na.ReliabilityLevelSupport & th_levels[i])) continue;
        va = attrs(e.ptag, th_levels[i]);
        va.EnableRdmaWrite = i == 1 ? VIP_TRUE : VIP_FALSE;
        EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
        memset(&got, 0, sizeof got);
        st = (VIP_VI_STATE)-1;
        se = re = VIP_FALSE;
        EXPECT_RC(VipQueryVi(vi, &st, &got, &se, &re), VIP_SUCCESS);
        EXPECT(st == VIP_STATE_IDLE, "%s: new VI state %s", th_rel_name(th_levels[i]), th_state_name(st));
        EXPECT(got.ReliabilityLevel == th_levels[i], "level %u", got.ReliabilityLevel);
        EXPECT(got.MaxTransferSize == 4096, "MaxTransferSize %llu", (unsigned long long)got.MaxTransferSize);
        EXPECT(got.Ptag == e.ptag, "Ptag");
        EXPECT(got.EnableRdmaWrite == va.EnableRdmaWrite && got.EnableRdmaRead == VIP_FALSE, "RDMA flags");
        EXPECT(se == VIP_TRUE && re == VIP_TRUE, "queues of a new VI not empty (%u %u)", se, re);
        EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    }

    th_phase("EnableRdmaRead on each level");
    for (int i = 0; i < 3; i++) {
        if (!(e.na.ReliabilityLevelSupport & th_levels[i])) continue;
        int supported = (e.na.RDMAReadSupport & th_levels[i]) != 0;
        EXPECT(supported == (th_levels[i] != VIP_SERVICE_UNRELIABLE), "%s: RDMAReadSupport 0x%x",
               th_rel_name(th_levels[i]), e.na.RDMAReadSupport);
        for (int w = 0; w < 2; w++) {
            va = attrs(e.ptag, th_levels[i]);
            va.EnableRdmaRead = VIP_TRUE;
            va.EnableRdmaWrite = w ? VIP_TRUE : VIP_FALSE;
            vi = NULL;
            VIP_RETURN r = VipCreateVi(e.nic, &va, NULL, NULL, &vi);
            if (th_levels[i] == VIP_SERVICE_UNRELIABLE) {
                EXPECT(r == VIP_INVALID_RDMAREAD, "%s: EnableRdmaRead -> %s, want VIP_INVALID_RDMAREAD",
                       th_rel_name(th_levels[i]), th_rs(r));
                if (r == VIP_SUCCESS) VipDestroyVi(vi);
                continue;
            }
            EXPECT(r == VIP_SUCCESS, "%s: EnableRdmaRead -> %s", th_rel_name(th_levels[i]), th_rs(r));
            if (r != VIP_SUCCESS) continue;
            memset(&got, 0, sizeof got);
            EXPECT_RC(VipQueryVi(vi, NULL, &got, NULL, NULL), VIP_SUCCESS);
            EXPECT(got.EnableRdmaRead == VIP_TRUE && got.EnableRdmaWrite == va.EnableRdmaWrite,
                   "%s: RDMA flags read %u write %u", th_rel_name(th_levels[i]), got.EnableRdmaRead,
                   got.EnableRdmaWrite);
            EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
        }
    }

    th_phase("MaxTransferSize 0 and the NIC maximum");
    va = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    va.MaxTransferSize = 0;
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
    EXPECT_RC(VipQueryVi(vi, NULL, &got, NULL, NULL), VIP_SUCCESS);
    EXPECT(got.MaxTransferSize > 0 && got.MaxTransferSize <= e.na.MaxTransferSize,
           "MaxTransferSize 0 became %llu", (unsigned long long)got.MaxTransferSize);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    va.MaxTransferSize = e.na.MaxTransferSize;
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);

    th_phase("bad reliability");
    const VIP_RELIABILITY_LEVEL bad_levels[] = {0, 3, 8, 5, 6, 7, 0x10, 0xffff};
    for (size_t i = 0; i < sizeof bad_levels / sizeof *bad_levels; i++) {
        va = attrs(e.ptag, bad_levels[i]);
        VIP_RETURN r = VipCreateVi(e.nic, &va, NULL, NULL, &vi);
        EXPECT(r == VIP_INVALID_RELIABILITY_LEVEL, "reliability 0x%x -> %s", bad_levels[i], th_rs(r));
    }

    th_phase("MTU, RDMA read, ptag, CQs");
    va = attrs(e.ptag, VIP_SERVICE_RELIABLE_DELIVERY);
    va.MaxTransferSize = e.na.MaxTransferSize + 1;
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_INVALID_MTU);
    va.MaxTransferSize = (VIP_ULONG)1 << 40;
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_INVALID_MTU);
    va = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    va.EnableRdmaRead = VIP_TRUE;
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_INVALID_RDMAREAD);
    va = attrs(e2.ptag, VIP_SERVICE_UNRELIABLE);
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_INVALID_PTAG);
    va = attrs(NULL, VIP_SERVICE_UNRELIABLE);
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, &vi), VIP_INVALID_PTAG);
    VIP_CQ_HANDLE cq_other, cq;
    CHECK(VipCreateCQ(e2.nic, 8, &cq_other));
    CHECK(VipCreateCQ(e.nic, 8, &cq));
    va = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    EXPECT_RC(VipCreateVi(e.nic, &va, cq_other, NULL, &vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, cq_other, &vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateVi(e.nic, &va, cq, cq_other, &vi), VIP_INVALID_PARAMETER);
    /* nothing above bound the CQs */
    EXPECT_RC(VipDestroyCQ(cq_other), VIP_SUCCESS);
    /* the same CQ for both queues is fine */
    EXPECT_RC(VipCreateVi(e.nic, &va, cq, cq, &vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);

    th_phase("set attributes while idle");
    va = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &vi));
    VIP_VI_ATTRIBUTES nv = attrs(e.ptag, VIP_SERVICE_RELIABLE_RECEPTION);
    nv.MaxTransferSize = 12345;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_SUCCESS);
    EXPECT_RC(VipQueryVi(vi, NULL, &got, NULL, NULL), VIP_SUCCESS);
    EXPECT(got.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION && got.MaxTransferSize == 12345,
           "after Set: level %u mts %llu", got.ReliabilityLevel, (unsigned long long)got.MaxTransferSize);
    /* refusals leave the attributes as they were */
    nv.ReliabilityLevel = 3;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_INVALID_RELIABILITY_LEVEL);
    nv = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    nv.MaxTransferSize = e.na.MaxTransferSize + 1;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_INVALID_MTU);
    nv = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
    nv.EnableRdmaRead = VIP_TRUE;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_INVALID_RDMAREAD);
    nv = attrs(e2.ptag, VIP_SERVICE_UNRELIABLE);
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_INVALID_PTAG);
    EXPECT_RC(VipQueryVi(vi, NULL, &got, NULL, NULL), VIP_SUCCESS);
    EXPECT(got.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION && got.MaxTransferSize == 12345 &&
               got.Ptag == e.ptag,
           "a refused Set changed the attributes: level %u mts %llu", got.ReliabilityLevel,
           (unsigned long long)got.MaxTransferSize);
    /* RDMA read on a reliable level is accepted by Set as well, and reported */
    nv = attrs(e.ptag, VIP_SERVICE_RELIABLE_DELIVERY);
    nv.EnableRdmaRead = VIP_TRUE;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_SUCCESS);
    EXPECT_RC(VipQueryVi(vi, NULL, &got, NULL, NULL), VIP_SUCCESS);
    EXPECT(got.ReliabilityLevel == VIP_SERVICE_RELIABLE_DELIVERY && got.EnableRdmaRead == VIP_TRUE,
           "after Set with RDMA read: level %u read %u", got.ReliabilityLevel, got.EnableRdmaRead);
    /* and going back to unreliable with it still set is refused */
    nv.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    EXPECT_RC(VipSetViAttributes(vi, &nv), VIP_INVALID_RDMAREAD);

    th_phase("set attributes refused while connected / pending");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "setattr");
        nv = attrs(e.ptag, VIP_SERVICE_RELIABLE_DELIVERY);
        EXPECT_RC(VipSetViAttributes(a, &nv), VIP_INVALID_STATE);
        CHECK(VipDisconnect(a));
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "peer of a disconnected VI: %s",
               th_state_name(th_state(b)));
        /* a is idle again, b is in the error state */
        EXPECT_RC(VipSetViAttributes(a, &nv), VIP_SUCCESS);
        EXPECT_RC(VipSetViAttributes(b, &nv), VIP_INVALID_STATE);
        CHECK(VipDisconnect(b));
        EXPECT_RC(VipSetViAttributes(b, &nv), VIP_SUCCESS);

        /* a peer request pending */
        th_addr l, r;
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&l, &e.na, "pend.a"), th_mkaddr(&r, &e.na, "pend.b"), 60000));
        EXPECT(th_state(a) == VIP_STATE_CONNECT_PENDING, "state %s", th_state_name(th_state(a)));
        EXPECT_RC(VipSetViAttributes(a, &nv), VIP_INVALID_STATE);
        CHECK(VipDisconnect(a)); /* withdraws the request */
        EXPECT(th_state(a) == VIP_STATE_IDLE, "after withdrawing: %s", th_state_name(th_state(a)));
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    }

    th_phase("VI ids");
    {
        VIP_VI_HANDLE x, y;
        VIP_UINT32 ix = 0, iy = 0;
        va = attrs(e.ptag, VIP_SERVICE_UNRELIABLE);
        CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &x));
        CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &y));
        EXPECT_RC(VipExtQueryViId(x, &ix), VIP_SUCCESS);
        EXPECT_RC(VipExtQueryViId(y, &iy), VIP_SUCCESS);
        EXPECT(ix != iy, "two VIs with id %u", ix);
        VIP_EXT_COUNTERS c;
        memset(&c, 0xff, sizeof c);
        EXPECT_RC(VipExtQueryViCounters(x, &c), VIP_SUCCESS);
        EXPECT(c.TxFrames == 0 && c.RxFrames == 0 && c.Drops == 0 && c.Errors == 0, "new VI counters not zero");
        CHECK(VipDestroyVi(x));
        CHECK(VipDestroyVi(y));
    }

    th_phase("many VIs");
    {
        enum { N = 300 };
        static VIP_VI_HANDLE v[N];
        va = attrs(e.ptag, VIP_SERVICE_RELIABLE_DELIVERY);
        for (int i = 0; i < N; i++) CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &v[i]));
        for (int i = 0; i < N; i++) EXPECT_RC(VipDestroyVi(v[i]), VIP_SUCCESS);
    }

    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    th_close_env(&e);
    th_close_env(&e2);
    return th_result();
}
