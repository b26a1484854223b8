/*
 * null_handles: every call refuses a NULL handle (and NULL out-pointers) with
 * VIP_INVALID_PARAMETER, and a handle of the wrong kind is never used as another kind.
 */
#include "helpers.h"

int main(void) {
    th_init("null_handles", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_CQ_HANDLE cq;
    CHECK(VipCreateCQ(e.nic, 16, &cq));
    VIP_DESCRIPTOR *d = th_desc(&e, 1);
    VIP_DESCRIPTOR *dp;
    VIP_NIC_ATTRIBUTES na;
    VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
    VIP_MEM_HANDLE mh;
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = e.ptag;
    VIP_VI_STATE st;
    VIP_BOOLEAN b1, b2;
    VIP_CONN_HANDLE conn;
    VIP_PROTECTION_HANDLE pt;
    th_addr la, ra;
    th_mkaddr(&la, &e.na, "x");
    th_mkaddr(&ra, &e.na, "y");
    VIP_VI_HANDLE vout;
    VIP_CQ_HANDLE cqout;
    VIP_EXT_COUNTERS c;
    VIP_UINT32 id;
    VIP_EXT_PROGRESS_MODE pm;
    char name[64];
    VIP_ULONG nlen = sizeof name;

    th_phase("NULL NIC handle");
    EXPECT_RC(VipQueryNic(NULL, &na), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCloseNic(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreatePtag(NULL, &pt), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDestroyPtag(NULL, e.ptag), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRegisterMem(NULL, e.mem, 4096, &ma, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(NULL, e.mem, e.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(NULL, e.mem, e.mh, &ma), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetMemAttributes(NULL, e.mem, e.mh, &ma), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateCQ(NULL, 16, &cqout), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateVi(NULL, &va, NULL, NULL, &vout), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectWait(NULL, &la.a, 0, &ra.a, &va, &conn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipErrorCallback(NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSInit(NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByName(NULL, "x", &ra.a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByAddr(NULL, &ra.a, name, &nlen), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSShutdown(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQuerySystemManagementInfo(NULL, 0, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtGetProgressMode(NULL, &pm), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtProgress(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryNicCounters(NULL, &c), VIP_INVALID_PARAMETER);

    th_phase("NULL VI handle");
    EXPECT_RC(VipDestroyVi(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryVi(NULL, &st, &va, &b1, &b2), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetViAttributes(NULL, &va), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectRequest(NULL, &la.a, &ra.a, 0, &va), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDisconnect(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectPeerRequest(NULL, &la.a, &ra.a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectPeerDone(NULL, &va), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectPeerWait(NULL, &va), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipPostSend(NULL, d, e.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipPostRecv(NULL, d, e.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSendDone(NULL, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvDone(NULL, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSendWait(NULL, 0, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvWait(NULL, 0, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSendNotify(NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvNotify(NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryViCounters(NULL, &c), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryViId(NULL, &id), VIP_INVALID_PARAMETER);

    th_phase("NULL CQ / connection handle");
    EXPECT_RC(VipDestroyCQ(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipResizeCQ(NULL, 8), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQDone(NULL, &vout, &b1), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQWait(NULL, 0, &vout, &b1), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQNotify(NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectAccept(NULL, vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectReject(NULL), VIP_INVALID_PARAMETER);

    th_phase("NULL out-pointers and argument blocks");
    EXPECT_RC(VipCreatePtag(e.nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRegisterMem(e.nic, e.mem, 4096, NULL, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRegisterMem(e.nic, e.mem, 4096, &ma, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(e.nic, e.mem, e.mh, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetMemAttributes(e.nic, e.mem, e.mh, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateCQ(e.nic, 16, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateVi(e.nic, NULL, NULL, NULL, &vout), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCreateVi(e.nic, &va, NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetViAttributes(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSendDone(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvDone(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSendWait(vi, 0, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRecvWait(vi, 0, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQDone(cq, NULL, &b1), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQDone(cq, &vout, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQWait(cq, 0, NULL, &b1), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCQWait(cq, 0, &vout, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectWait(e.nic, NULL, 0, &ra.a, &va, &conn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectWait(e.nic, &la.a, 0, &ra.a, &va, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectRequest(vi, &la.a, NULL, 0, &va), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectPeerRequest(vi, NULL, &ra.a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectPeerRequest(vi, &la.a, NULL, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryNicCounters(e.nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryViCounters(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryViId(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtGetProgressMode(e.nic, NULL), VIP_INVALID_PARAMETER);
    /* VipQueryVi's outputs are each optional. */
    EXPECT_RC(VipQueryVi(vi, NULL, NULL, NULL, NULL), VIP_SUCCESS);

    th_phase("handles of the wrong kind");
    /* A CQ handle passed as a VI, a VI as a CQ, a VI as a NIC: refused, never used. */
    EXPECT_RC(VipDestroyVi((VIP_VI_HANDLE)(void *)cq), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryVi((VIP_VI_HANDLE)(void *)e.nic, &st, NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDestroyCQ((VIP_CQ_HANDLE)(void *)vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryNic((VIP_NIC_HANDLE)(void *)vi, &na), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectAccept((VIP_CONN_HANDLE)(void *)vi, vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipConnectReject((VIP_CONN_HANDLE)(void *)cq), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDestroyPtag(e.nic, (VIP_PROTECTION_HANDLE)(void *)cq), VIP_INVALID_PTAG);
    EXPECT_RC(VipCreateVi(e.nic, &va, (VIP_CQ_HANDLE)(void *)vi, NULL, &vout), VIP_INVALID_PARAMETER);

    /* Everything above left the objects intact. */
    th_phase("objects still work");
    EXPECT(th_state(vi) == VIP_STATE_IDLE, "VI state changed");
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    th_close_env(&e);
    return th_result();
}
