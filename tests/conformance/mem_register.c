/*
 * mem_register: VipRegisterMem / VipQueryMem / VipSetMemAttributes / VipDeregisterMem,
 * and their argument checks (NULL va, length 0, unmapped memory, bad ptag, wrong va,
 * stale handle).
 */
#include "helpers.h"

int main(void) {
    th_init("mem_register", 0);
    VIP_NIC_HANDLE nic, nic2;
    CHECK(VipOpenNic(NULL, &nic));
    CHECK(VipOpenNic(NULL, &nic2));
    VIP_PROTECTION_HANDLE pt, pt2, other;
    CHECK(VipCreatePtag(nic, &pt));
    CHECK(VipCreatePtag(nic, &pt2));
    CHECK(VipCreatePtag(nic2, &other));
    long page = sysconf(_SC_PAGESIZE);
    char *buf = aligned_alloc(4096, 1 << 20);
    memset(buf, 1, 1 << 20);

    th_phase("register/query/set/deregister");
    VIP_MEM_ATTRIBUTES ma = {pt, VIP_FALSE, VIP_FALSE}, got;
    VIP_MEM_HANDLE mh = 0;
    EXPECT_RC(VipRegisterMem(nic, buf, 1 << 20, &ma, &mh), VIP_SUCCESS);
    EXPECT(mh != 0, "memory handle 0");
    memset(&got, 0xff, sizeof got);
    EXPECT_RC(VipQueryMem(nic, buf, mh, &got), VIP_SUCCESS);
    EXPECT(got.Ptag == pt && got.EnableRdmaWrite == VIP_FALSE && got.EnableRdmaRead == VIP_FALSE,
           "QueryMem: ptag %p w %u r %u", (void *)got.Ptag, got.EnableRdmaWrite, got.EnableRdmaRead);
    VIP_MEM_ATTRIBUTES set = {pt2, VIP_TRUE, VIP_FALSE};
    EXPECT_RC(VipSetMemAttributes(nic, buf, mh, &set), VIP_SUCCESS);
    EXPECT_RC(VipQueryMem(nic, buf, mh, &got), VIP_SUCCESS);
    EXPECT(got.Ptag == pt2 && got.EnableRdmaWrite == VIP_TRUE, "after Set: ptag %p w %u", (void *)got.Ptag,
           got.EnableRdmaWrite);
    /* the ptag moved: pt is free now, pt2 is held */
    EXPECT_RC(VipDestroyPtag(nic, pt2), VIP_INVALID_STATE);
    set.Ptag = other;
    EXPECT_RC(VipSetMemAttributes(nic, buf, mh, &set), VIP_INVALID_PTAG);
    set.Ptag = NULL;
    EXPECT_RC(VipSetMemAttributes(nic, buf, mh, &set), VIP_INVALID_PTAG);
    set.Ptag = pt;
    EXPECT_RC(VipSetMemAttributes(nic, buf + 64, mh, &set), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetMemAttributes(nic, buf, mh ^ 0x10000, &set), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(nic, buf + 64, mh, &got), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(nic2, buf, mh, &got), VIP_INVALID_PARAMETER);

    th_phase("deregister with wrong va / handle / NIC");
    EXPECT_RC(VipDeregisterMem(nic, buf + 4096, mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(nic, NULL, mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(nic, buf, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(nic, buf, mh + 1), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(nic2, buf, mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipDeregisterMem(nic, buf, mh), VIP_SUCCESS);

    th_phase("stale handle");
    EXPECT_RC(VipDeregisterMem(nic, buf, mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(nic, buf, mh, &got), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipSetMemAttributes(nic, buf, mh, &ma), VIP_INVALID_PARAMETER);
    /* the slot is reused by the next registration: the old handle still does not work */
    VIP_MEM_HANDLE mh2;
    CHECK(VipRegisterMem(nic, buf, 4096, &ma, &mh2));
    EXPECT(mh2 != mh, "re-registration handed out the stale handle 0x%x again", mh);
    EXPECT_RC(VipDeregisterMem(nic, buf, mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipQueryMem(nic, buf, mh2, &got), VIP_SUCCESS);
    EXPECT_RC(VipDeregisterMem(nic, buf, mh2), VIP_SUCCESS);

    th_phase("bad arguments");
    EXPECT_RC(VipRegisterMem(nic, NULL, 4096, &ma, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRegisterMem(nic, buf, 0, &ma, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipRegisterMem(nic, (void *)(uintptr_t)-4096, 8192, &ma, &mh), VIP_INVALID_PARAMETER);
    ma.Ptag = other;
    EXPECT_RC(VipRegisterMem(nic, buf, 4096, &ma, &mh), VIP_INVALID_PTAG);
    ma.Ptag = NULL;
    EXPECT_RC(VipRegisterMem(nic, buf, 4096, &ma, &mh), VIP_INVALID_PTAG);
    ma.Ptag = pt;

    th_phase("unmapped memory");
    {
        char *m = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
        /* a hole in the middle */
        munmap(m + page, (size_t)page);
        EXPECT_RC(VipRegisterMem(nic, m, (VIP_ULONG)page * 3, &ma, &mh), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipRegisterMem(nic, m + page, (VIP_ULONG)page, &ma, &mh), VIP_INVALID_PARAMETER);
        /* the mapped pages on either side are fine */
        EXPECT_RC(VipRegisterMem(nic, m, (VIP_ULONG)page, &ma, &mh), VIP_SUCCESS);
        EXPECT_RC(VipDeregisterMem(nic, m, mh), VIP_SUCCESS);
        EXPECT_RC(VipRegisterMem(nic, m + 2 * page + 100, 50, &ma, &mh), VIP_SUCCESS);
        EXPECT_RC(VipDeregisterMem(nic, m + 2 * page + 100, mh), VIP_SUCCESS);
        /* running off the end into the hole */
        EXPECT_RC(VipRegisterMem(nic, m + page - 10, 20, &ma, &mh), VIP_INVALID_PARAMETER);
        munmap(m, (size_t)page);
        munmap(m + 2 * page, (size_t)page);
        /* a large registration that ends in unmapped memory (more than 256 pages) */
        size_t big = (size_t)page * 1024;
        char *b = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
        munmap(b + big - page, (size_t)page);
        EXPECT_RC(VipRegisterMem(nic, b, big, &ma, &mh), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipRegisterMem(nic, b, big - page, &ma, &mh), VIP_SUCCESS);
        EXPECT_RC(VipDeregisterMem(nic, b, mh), VIP_SUCCESS);
        munmap(b, big - page);
    }

    th_phase("unaligned and overlapping registrations");
    {
        VIP_MEM_HANDLE a, b;
        EXPECT_RC(VipRegisterMem(nic, buf + 3, 1000, &ma, &a), VIP_SUCCESS);
        EXPECT_RC(VipRegisterMem(nic, buf, 8192, &ma, &b), VIP_SUCCESS);
        EXPECT(a != b, "two registrations share handle 0x%x", a);
        EXPECT_RC(VipQueryMem(nic, buf + 3, a, &got), VIP_SUCCESS);
        EXPECT_RC(VipDeregisterMem(nic, buf + 3, a), VIP_SUCCESS);
        EXPECT_RC(VipQueryMem(nic, buf, b, &got), VIP_SUCCESS);
        EXPECT_RC(VipDeregisterMem(nic, buf, b), VIP_SUCCESS);
    }

    th_phase("many registrations");
    {
        enum { N = 2000 };
        static VIP_MEM_HANDLE hs[N];
        for (int i = 0; i < N; i++) CHECK(VipRegisterMem(nic, buf + 64 * (i % 1000), 64, &ma, &hs[i]));
        for (int i = 0; i < N; i++) EXPECT_RC(VipDeregisterMem(nic, buf + 64 * (i % 1000), hs[i]), VIP_SUCCESS);
    }

    EXPECT_RC(VipCloseNic(nic), VIP_SUCCESS);
    EXPECT_RC(VipCloseNic(nic2), VIP_SUCCESS);
    free(buf);
    return th_result();
}
