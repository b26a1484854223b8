/*
 * ptag: protection tags. Create/destroy, destroy while memory or a VI carries the tag
 * (VIP_INVALID_STATE, and the tag stays usable), another NIC's tag (VIP_INVALID_PTAG).
 */
#include "helpers.h"

int main(void) {
    th_init("ptag", 0);
    VIP_NIC_HANDLE nic, nic2;
    CHECK(VipOpenNic(NULL, &nic));
    CHECK(VipOpenNic(NULL, &nic2));

    th_phase("create/destroy");
    VIP_PROTECTION_HANDLE p1 = NULL, p2 = NULL;
    EXPECT_RC(VipCreatePtag(nic, &p1), VIP_SUCCESS);
    EXPECT_RC(VipCreatePtag(nic, &p2), VIP_SUCCESS);
    EXPECT(p1 != NULL && p2 != NULL && p1 != p2, "two ptags %p %p", (void *)p1, (void *)p2);
    EXPECT_RC(VipDestroyPtag(nic, p2), VIP_SUCCESS);
    for (int i = 0; i < 100; i++) {
        VIP_PROTECTION_HANDLE p;
        CHECK(VipCreatePtag(nic, &p));
        CHECK(VipDestroyPtag(nic, p));
    }

    th_phase("wrong NIC's ptag");
    VIP_PROTECTION_HANDLE q;
    CHECK(VipCreatePtag(nic2, &q));
    EXPECT_RC(VipDestroyPtag(nic, q), VIP_INVALID_PTAG);
    EXPECT_RC(VipDestroyPtag(nic, NULL), VIP_INVALID_PTAG);
    char *buf = aligned_alloc(4096, 8192);
    VIP_MEM_ATTRIBUTES ma = {q, 0, 0};
    VIP_MEM_HANDLE mh;
    EXPECT_RC(VipRegisterMem(nic, buf, 8192, &ma, &mh), VIP_INVALID_PTAG);
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = q;
    VIP_VI_HANDLE vi;
    EXPECT_RC(VipCreateVi(nic, &va, NULL, NULL, &vi), VIP_INVALID_PTAG);
    /* q still works on its own NIC */
    EXPECT_RC(VipDestroyPtag(nic2, q), VIP_SUCCESS);

    th_phase("destroy while memory uses it");
    ma.Ptag = p1;
    CHECK(VipRegisterMem(nic, buf, 8192, &ma, &mh));
    EXPECT_RC(VipDestroyPtag(nic, p1), VIP_INVALID_STATE);
    /* the refused destroy left the tag and the registration alive */
    VIP_MEM_ATTRIBUTES got;
    EXPECT_RC(VipQueryMem(nic, buf, mh, &got), VIP_SUCCESS);
    EXPECT(got.Ptag == p1, "QueryMem ptag %p, want %p", (void *)got.Ptag, (void *)p1);
    CHECK(VipDeregisterMem(nic, buf, mh));

    th_phase("destroy while a VI uses it");
    va.Ptag = p1;
    CHECK(VipCreateVi(nic, &va, NULL, NULL, &vi));
    EXPECT_RC(VipDestroyPtag(nic, p1), VIP_INVALID_STATE);
    /* the tag is still usable for memory */
    EXPECT_RC(VipRegisterMem(nic, buf, 8192, &ma, &mh), VIP_SUCCESS);
    EXPECT_RC(VipDeregisterMem(nic, buf, mh), VIP_SUCCESS);
    CHECK(VipDestroyVi(vi));

    th_phase("VI moved to another tag frees the first");
    {
        VIP_PROTECTION_HANDLE p3;
        CHECK(VipCreatePtag(nic, &p3));
        va.Ptag = p1;
        CHECK(VipCreateVi(nic, &va, NULL, NULL, &vi));
        va.Ptag = p3;
        EXPECT_RC(VipSetViAttributes(vi, &va), VIP_SUCCESS);
        EXPECT_RC(VipDestroyPtag(nic, p1), VIP_SUCCESS);
        EXPECT_RC(VipDestroyPtag(nic, p3), VIP_INVALID_STATE);
        CHECK(VipDestroyVi(vi));
        EXPECT_RC(VipDestroyPtag(nic, p3), VIP_SUCCESS);
    }

    th_phase("destroy after the users are gone");
    CHECK(VipCreatePtag(nic, &p1));
    ma.Ptag = p1;
    CHECK(VipRegisterMem(nic, buf, 8192, &ma, &mh));
    CHECK(VipDeregisterMem(nic, buf, mh));
    EXPECT_RC(VipDestroyPtag(nic, p1), VIP_SUCCESS);

    th_phase("close NIC with live ptags");
    CHECK(VipCreatePtag(nic, &p1));
    EXPECT_RC(VipCloseNic(nic), VIP_SUCCESS);
    EXPECT_RC(VipCloseNic(nic2), VIP_SUCCESS);
    free(buf);
    return th_result();
}
