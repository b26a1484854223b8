/*
 * not_implemented: the VIA calls softvia does not implement yet answer
 * VIP_EXT_NOT_IMPLEMENTED for valid handles (and VIP_INVALID_PARAMETER for bad ones):
 * VipSendNotify, VipRecvNotify, VipCQNotify, VipQuerySystemManagementInfo. The objects
 * stay usable.
 */
#include "helpers.h"

static void desc_fn(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_DESCRIPTOR *d) { (void)c, (void)n, (void)v, (void)d; }
static void cq_fn(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_BOOLEAN r) { (void)c, (void)n, (void)v, (void)r; }

int main(void) {
    th_init("not_implemented", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    VIP_CQ_HANDLE cq;
    CHECK(VipCreateCQ(e.nic, 8, &cq));
    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, cq, cq);
    EXPECT_RC(VipSendNotify(vi, NULL, desc_fn), VIP_EXT_NOT_IMPLEMENTED);
    EXPECT_RC(VipRecvNotify(vi, NULL, desc_fn), VIP_EXT_NOT_IMPLEMENTED);
    EXPECT_RC(VipCQNotify(cq, NULL, cq_fn), VIP_EXT_NOT_IMPLEMENTED);
    char info[256];
    EXPECT_RC(VipQuerySystemManagementInfo(e.nic, 0, info), VIP_EXT_NOT_IMPLEMENTED);
    EXPECT_RC(VipQuerySystemManagementInfo(e.nic, 1, NULL), VIP_EXT_NOT_IMPLEMENTED);
    EXPECT_RC(VipSendNotify(NULL, NULL, desc_fn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvNotify(NULL, NULL, desc_fn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQNotify(NULL, NULL, cq_fn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQuerySystemManagementInfo(NULL, 0, info), VIP_INVALID_PARAMETER);
    EXPECT(strcmp(VipExtReturnString(VIP_EXT_NOT_IMPLEMENTED), "VIP_EXT_NOT_IMPLEMENTED") == 0, "name");
    /* still usable */
    EXPECT(th_state(vi) == VIP_STATE_IDLE, "VI state %s", th_state_name(th_state(vi)));
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);
    th_close_env(&e);
    return th_result();
}
