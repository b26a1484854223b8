/*
 * nic_open: VipOpenNic device names, VipExtOpenNic options, VipQueryNic consistency,
 * VipCloseNic, progress mode selection (name over environment, options over both).
 */
#include "helpers.h"

static void check_attrs(VIP_NIC_HANDLE nic, const char *what) {
    VIP_NIC_ATTRIBUTES na;
    memset(&na, 0xa5, sizeof na);
    EXPECT_RC(VipQueryNic(nic, &na), VIP_SUCCESS);
    EXPECT(na.NicAddressLen > 0, "%s: NicAddressLen %u", what, na.NicAddressLen);
    EXPECT(na.LocalNicAddress != NULL, "%s: LocalNicAddress NULL", what);
    EXPECT(na.Name[0] != 0 && memchr(na.Name, 0, sizeof na.Name) != NULL, "%s: Name not a string", what);
    EXPECT(na.MaxSegmentsPerDesc >= 1, "%s: MaxSegmentsPerDesc %llu", what, (unsigned long long)na.MaxSegmentsPerDesc);
    EXPECT(na.NativeMTU > 0, "%s: NativeMTU %llu", what, (unsigned long long)na.NativeMTU);
    EXPECT(na.MaxTransferSize >= na.NativeMTU, "%s: MaxTransferSize %llu < NativeMTU %llu", what,
           (unsigned long long)na.MaxTransferSize, (unsigned long long)na.NativeMTU);
    EXPECT(na.MaxDescriptorsPerQueue > 0, "%s: MaxDescriptorsPerQueue 0", what);
    EXPECT(na.MaxVI > 0 && na.MaxCQ > 0 && na.MaxCQEntries > 0 && na.MaxPtags > 0,
           "%s: a zero object limit", what);
    EXPECT(na.MaxRegisterBytes > 0 && na.MaxRegisterRegions > 0, "%s: zero registration limits", what);
    EXPECT(na.MaxRegisterBlockBytes <= na.MaxRegisterBytes, "%s: block bytes over register bytes", what);
    EXPECT(na.MaxDiscriminatorLen > 0, "%s: MaxDiscriminatorLen 0", what);
    EXPECT(na.ThreadSafe == VIP_TRUE, "%s: ThreadSafe %u", what, na.ThreadSafe);
    const VIP_RELIABILITY_LEVEL all =
        VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
    EXPECT((na.ReliabilityLevelSupport & VIP_SERVICE_UNRELIABLE) != 0, "%s: no unreliable service (0x%x)", what,
           na.ReliabilityLevelSupport);
    EXPECT((na.ReliabilityLevelSupport & ~all) == 0, "%s: unknown reliability bits 0x%x", what,
           na.ReliabilityLevelSupport);
    EXPECT((na.RDMAReadSupport & ~na.ReliabilityLevelSupport) == 0, "%s: RDMA read on an unsupported level", what);
    /* RDMA read runs on the reliable levels, never on an unreliable VI (docs/rdma.md). */
    EXPECT(na.RDMAReadSupport == (VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION),
           "%s: RDMAReadSupport 0x%x, want RELIABLE_DELIVERY|RELIABLE_RECEPTION", what, na.RDMAReadSupport);
    /* The address is stable and the same on a second query. */
    VIP_NIC_ATTRIBUTES nb;
    EXPECT_RC(VipQueryNic(nic, &nb), VIP_SUCCESS);
    EXPECT(nb.NicAddressLen == na.NicAddressLen &&
               memcmp(nb.LocalNicAddress, na.LocalNicAddress, na.NicAddressLen) == 0,
           "%s: address changed between queries", what);
}

static VIP_EXT_PROGRESS_MODE env_mode(void) {
    const char *p = getenv("SOFTVIA_PROGRESS");
    return p && strcmp(p, "thread") == 0 ? VIP_EXT_PROGRESS_THREAD : VIP_EXT_PROGRESS_INLINE;
}

static void open_ok(const char *name, int expect_mode) {
    VIP_NIC_HANDLE nic = NULL;
    char what[64];
    snprintf(what, sizeof what, "open(%s)", name ? name : "NULL");
    th_phase(what);
    VIP_RETURN r = VipOpenNic(name, &nic);
    EXPECT(r == VIP_SUCCESS && nic != NULL, "%s -> %s", what, th_rs(r));
    if (r != VIP_SUCCESS) return;
    check_attrs(nic, what);
    VIP_EXT_PROGRESS_MODE m = (VIP_EXT_PROGRESS_MODE)-1;
    EXPECT_RC(VipExtGetProgressMode(nic, &m), VIP_SUCCESS);
    if (expect_mode >= 0) EXPECT((int)m == expect_mode, "%s: progress mode %d, want %d", what, m, expect_mode);
    EXPECT_RC(VipCloseNic(nic), VIP_SUCCESS);
}

static void open_bad(const char *name) {
    char what[96];
    snprintf(what, sizeof what, "open(%s)", name);
    th_phase(what);
    VIP_NIC_HANDLE nic = (VIP_NIC_HANDLE)0;
    VIP_RETURN r = VipOpenNic(name, &nic);
    EXPECT(r == VIP_INVALID_PARAMETER, "%s -> %s, want VIP_INVALID_PARAMETER", what, th_rs(r));
    if (r == VIP_SUCCESS) VipCloseNic(nic);
}

int main(void) {
    th_init("nic_open", 0);

    open_ok(NULL, env_mode());
    open_ok("", env_mode());
    open_ok("shm", env_mode());
    /* A name's option wins over SOFTVIA_PROGRESS. */
    open_ok("shm:progress=thread", VIP_EXT_PROGRESS_THREAD);
    open_ok("shm:progress=inline", VIP_EXT_PROGRESS_INLINE);
    open_ok("shm:txbatch=0", env_mode());
    open_ok("shm:txbatch=32,progress=inline", VIP_EXT_PROGRESS_INLINE);
    open_ok("shm:txbatch=256", env_mode());
    open_ok("shm:rxspin=0", env_mode());
    open_ok("shm:rxspin=64,txbatch=8", env_mode());

    open_bad("nosuch");
    open_bad("shm:progress=bogus");
    open_bad("shm:");
    open_bad("shm:bogus=1");
    open_bad("shm:progress");
    open_bad("shm:txbatch=257");
    open_bad("shm:txbatch=-1");
    open_bad("shm:txbatch=");
    open_bad("shm:txbatch=4k");
    open_bad("shm:txbatch=99999999999999999999");
    open_bad("shm:rxspin=65");
    open_bad("shm:rxspin=-1");
    open_bad("shm:rxspin=");
    open_bad("shm:rxspin=8x");
    open_bad("shmx");
    open_bad("SHM");

    th_phase("NULL handle pointer");
    EXPECT_RC(VipOpenNic(NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipOpenNic("shm", NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtOpenNic(NULL, NULL, NULL), VIP_INVALID_PARAMETER);

    th_phase("VipExtOpenNic options");
    for (int m = 0; m < 2; m++) {
        VIP_EXT_NIC_OPTIONS o = {m ? VIP_EXT_PROGRESS_THREAD : VIP_EXT_PROGRESS_INLINE};
        /* Options win over the name and the environment. */
        const char *name = m ? "shm:progress=inline" : "shm:progress=thread";
        VIP_NIC_HANDLE nic;
        EXPECT_RC(VipExtOpenNic(name, &o, &nic), VIP_SUCCESS);
        VIP_EXT_PROGRESS_MODE got = (VIP_EXT_PROGRESS_MODE)-1;
        EXPECT_RC(VipExtGetProgressMode(nic, &got), VIP_SUCCESS);
        EXPECT(got == o.Progress, "options progress %d, got %d", o.Progress, got);
        /* VipExtProgress: thread mode never steps from the caller. */
        VIP_RETURN pr = VipExtProgress(nic);
        if (o.Progress == VIP_EXT_PROGRESS_THREAD)
            EXPECT(pr == VIP_NOT_DONE, "VipExtProgress in thread mode -> %s", th_rs(pr));
        else
            EXPECT(pr == VIP_SUCCESS || pr == VIP_NOT_DONE, "VipExtProgress inline -> %s", th_rs(pr));
        EXPECT_RC(VipCloseNic(nic), VIP_SUCCESS);
    }
    VIP_EXT_NIC_OPTIONS bad = {(VIP_EXT_PROGRESS_MODE)7};
    VIP_NIC_HANDLE nic;
    EXPECT_RC(VipExtOpenNic(NULL, &bad, &nic), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtOpenNic("nosuch", NULL, &nic), VIP_INVALID_PARAMETER);

    th_phase("VipExtQueryWireLossy");
    {
        /* shm is lossless unless the environment injects faults; udp is lossy (skipped
         * where it is not built: the open fails). */
        const char *faults = getenv("SOFTVIA_FAULTS");
        const VIP_BOOLEAN shm_lossy = faults && *faults ? VIP_TRUE : VIP_FALSE;
        struct { const char *name; VIP_BOOLEAN want; } wires[] = {{"shm", shm_lossy}, {"udp:addr=127.0.0.1", VIP_TRUE},
                                                                   {"udp:addr=127.0.0.1,local=wire", VIP_TRUE}};
        for (size_t i = 0; i < sizeof wires / sizeof *wires; i++) {
            VIP_NIC_HANDLE n;
            if (VipOpenNic(wires[i].name, &n) != VIP_SUCCESS) {
                EXPECT(i > 0, "VipOpenNic(shm) failed");
                continue;
            }
            VIP_BOOLEAN lossy = (VIP_BOOLEAN)7;
            EXPECT_RC(VipExtQueryWireLossy(n, &lossy), VIP_SUCCESS);
            EXPECT(lossy == wires[i].want, "%s: lossy %d, want %d", wires[i].name, (int)lossy, (int)wires[i].want);
            EXPECT_RC(VipExtQueryWireLossy(n, NULL), VIP_INVALID_PARAMETER);
            EXPECT_RC(VipCloseNic(n), VIP_SUCCESS);
        }
        VIP_BOOLEAN lossy;
        EXPECT_RC(VipExtQueryWireLossy(NULL, &lossy), VIP_INVALID_PARAMETER);
    }

    th_phase("two NICs at once have different addresses");
    {
        VIP_NIC_HANDLE a, b;
        VIP_NIC_ATTRIBUTES na, nb;
        CHECK(VipOpenNic(NULL, &a));
        CHECK(VipOpenNic(NULL, &b));
        CHECK(VipQueryNic(a, &na));
        CHECK(VipQueryNic(b, &nb));
        EXPECT(na.NicAddressLen != nb.NicAddressLen ||
                   memcmp(na.LocalNicAddress, nb.LocalNicAddress, na.NicAddressLen) != 0,
               "two open NICs share an address");
        EXPECT_RC(VipCloseNic(a), VIP_SUCCESS);
        EXPECT_RC(VipCloseNic(b), VIP_SUCCESS);
    }

    th_phase("query/close NULL");
    VIP_NIC_ATTRIBUTES na;
    EXPECT_RC(VipQueryNic(NULL, &na), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCloseNic(NULL), VIP_INVALID_PARAMETER);
    {
        VIP_NIC_HANDLE n;
        CHECK(VipOpenNic(NULL, &n));
        EXPECT_RC(VipQueryNic(n, NULL), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipCloseNic(n), VIP_SUCCESS);
    }

    th_phase("open/close many times");
    for (int i = 0; i < 50; i++) {
        VIP_NIC_HANDLE n;
        CHECK(VipOpenNic(NULL, &n));
        CHECK(VipCloseNic(n));
    }

    th_phase("VipExtReturnString");
    EXPECT(strcmp(VipExtReturnString(VIP_SUCCESS), "VIP_SUCCESS") == 0, "SUCCESS name");
    EXPECT(strcmp(VipExtReturnString(VIP_NO_MATCH), "VIP_NO_MATCH") == 0, "NO_MATCH name");
    EXPECT(strcmp(VipExtReturnString(VIP_EXT_NOT_IMPLEMENTED), "VIP_EXT_NOT_IMPLEMENTED") == 0, "NOT_IMPL name");
    EXPECT(VipExtReturnString((VIP_RETURN)1000) != NULL, "unknown code gives NULL");
    EXPECT(VipExtReturnString((VIP_RETURN)-1) != NULL, "negative code gives NULL");
    return th_result();
}
