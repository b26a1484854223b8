/*
 * cq_basic: VipCreateCQ / VipResizeCQ / VipDestroyCQ and their refusals: entry counts
 * of 0 or over the NIC's maximum (VIP_INVALID_PARAMETER), destroy while a VI queue is
 * bound (VIP_INVALID_STATE), CQDone on an empty CQ (VIP_NOT_DONE), CQWait timeout.
 */
#include "helpers.h"

int main(void) {
    th_init("cq_basic", 0);
    th_env e;
    th_open_env(&e, NULL, 0);
    VIP_CQ_HANDLE cq = NULL, cq2;
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN rq;

    th_phase("create/resize/destroy");
    EXPECT_RC(VipCreateCQ(e.nic, 1, &cq), VIP_SUCCESS);
    EXPECT_RC(VipResizeCQ(cq, 100), VIP_SUCCESS);
    EXPECT_RC(VipResizeCQ(cq, 1), VIP_SUCCESS);
    EXPECT_RC(VipResizeCQ(cq, e.na.MaxCQEntries), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);
    EXPECT_RC(VipCreateCQ(e.nic, e.na.MaxCQEntries, &cq), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);

    th_phase("bad entry counts");
    EXPECT_RC(VipCreateCQ(e.nic, 0, &cq2), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateCQ(e.nic, e.na.MaxCQEntries + 1, &cq2), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateCQ(e.nic, (VIP_ULONG)1 << 40, &cq2), VIP_INVALID_PARAMETER);
    CHECK(VipCreateCQ(e.nic, 16, &cq));
    EXPECT_RC(VipResizeCQ(cq, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipResizeCQ(cq, e.na.MaxCQEntries + 1), VIP_INVALID_PARAMETER);

    th_phase("empty CQ");
    VIP_VI_HANDLE got = (VIP_VI_HANDLE)(uintptr_t)1;
    EXPECT_RC(VipCQDone(cq, &got, &rq), VIP_NOT_DONE);
    uint64_t t0 = th_now_ms();
    EXPECT_RC(VipCQWait(cq, 100, &got, &rq), VIP_TIMEOUT);
    uint64_t dt = th_now_ms() - t0;
    EXPECT(dt >= 90 && dt < 3000, "CQWait(100 ms) took %llu ms", (unsigned long long)dt);
    EXPECT_RC(VipCQWait(cq, 0, &got, &rq), VIP_TIMEOUT);

    th_phase("destroy while bound");
    vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, cq, NULL);
    EXPECT_RC(VipDestroyCQ(cq), VIP_INVALID_STATE);
    CHECK(VipDestroyVi(vi));
    vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq);
    EXPECT_RC(VipDestroyCQ(cq), VIP_INVALID_STATE);
    VIP_VI_HANDLE vi2 = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, cq, cq);
    CHECK(VipDestroyVi(vi));
    EXPECT_RC(VipDestroyCQ(cq), VIP_INVALID_STATE); /* vi2 holds both of its queues on it */
    CHECK(VipDestroyVi(vi2));
    EXPECT_RC(VipResizeCQ(cq, 4), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);

    th_phase("many CQs");
    {
        enum { N = 200 };
        static VIP_CQ_HANDLE c[N];
        for (int i = 0; i < N; i++) CHECK(VipCreateCQ(e.nic, 8, &c[i]));
        for (int i = 0; i < N; i++) EXPECT_RC(VipDestroyCQ(c[i]), VIP_SUCCESS);
    }

    th_phase("close NIC with CQs and bound VIs");
    CHECK(VipCreateCQ(e.nic, 8, &cq));
    vi = th_vi(&e, VIP_SERVICE_UNRELIABLE, cq, cq);
    th_close_env(&e);
    return th_result();
}
