/*
 * garbage_handles: every call that takes a handle refuses one that is not a live handle
 * of the right kind with VIP_INVALID_PARAMETER (a protection tag: VIP_INVALID_PTAG, as
 * VIA says), without touching the memory the value points to: NULL, random values,
 * pointers to stack garbage (also garbage that looks like the objects a handle used to
 * point to), pointers to unmapped and PROT_NONE pages, live handles with their
 * generation changed, handles of another kind, handles of destroyed objects and of a
 * closed NIC. A slot that is used again never makes an old handle valid. Afterwards the
 * real objects still work. Run it under ASan too.
 */
#include "helpers.h"

typedef enum { K_NIC, K_PTAG, K_VI, K_CQ, K_CONN, K_LISTEN, K_COUNT } kind;
static const char *const kind_name[K_COUNT] = {"NIC", "ptag", "VI", "CQ", "connection", "listener"};

/* The live objects the calls get besides the bad handle. */
static th_env E;
static VIP_VI_HANDLE V;
static VIP_CQ_HANDLE Q;
static VIP_CONN_HANDLE C;
static VIP_EXT_LISTEN_HANDLE L;
static VIP_DESCRIPTOR *D;

static char what[200]; /* the bad value being tried, for messages */

#define BAD(call, want)                                                                                          \
    do {                                                                                                         \
        VIP_RETURN r_ = (call);                                                                                  \
        if (r_ != (want)) {                                                                                      \
            TH_FAILMSG("%s: %s -> %s (want %s)", what, #call, th_rs(r_), th_rs(want));                           \
            th_failures++;                                                                                       \
        }                                                                                                        \
    } while (0)

static void try_nic(VIP_NIC_HANDLE g) {
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE pt;
    VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_FALSE, VIP_FALSE};
    VIP_MEM_HANDLE mh;
    VIP_CQ_HANDLE cq;
    VIP_VI_HANDLE vi;
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = E.ptag;
    th_addr la, ra;
    th_mkaddr(&la, &E.na, "g");
    th_mkaddr(&ra, &E.na, NULL);
    VIP_CONN_HANDLE conn;
    VIP_EXT_LISTEN_HANDLE ls;
    VIP_EXT_COUNTERS c;
    VIP_EXT_FAULT_COUNTERS fc;
    VIP_EXT_PROGRESS_MODE pm;
    char name[64];
    VIP_ULONG nlen = sizeof name;
    BAD(VipQueryNic(g, &na), VIP_INVALID_PARAMETER);
    BAD(VipCreatePtag(g, &pt), VIP_INVALID_PARAMETER);
    BAD(VipDestroyPtag(g, E.ptag), VIP_INVALID_PARAMETER);
    BAD(VipRegisterMem(g, E.mem, 4096, &ma, &mh), VIP_INVALID_PARAMETER);
    BAD(VipDeregisterMem(g, E.mem, E.mh), VIP_INVALID_PARAMETER);
    BAD(VipQueryMem(g, E.mem, E.mh, &ma), VIP_INVALID_PARAMETER);
    BAD(VipSetMemAttributes(g, E.mem, E.mh, &ma), VIP_INVALID_PARAMETER);
    BAD(VipCreateCQ(g, 8, &cq), VIP_INVALID_PARAMETER);
    BAD(VipCreateVi(g, &va, NULL, NULL, &vi), VIP_INVALID_PARAMETER);
    BAD(VipConnectWait(g, &la.a, 0, &ra.a, NULL, &conn), VIP_INVALID_PARAMETER);
    BAD(VipErrorCallback(g, NULL, NULL), VIP_INVALID_PARAMETER);
    BAD(VipNSInit(g, NULL), VIP_INVALID_PARAMETER);
    BAD(VipNSGetHostByName(g, "x", &ra.a, 0), VIP_INVALID_PARAMETER);
    BAD(VipNSGetHostByAddr(g, &ra.a, name, &nlen), VIP_INVALID_PARAMETER);
    BAD(VipNSShutdown(g), VIP_INVALID_PARAMETER);
    BAD(VipQuerySystemManagementInfo(g, 0, NULL), VIP_INVALID_PARAMETER);
    BAD(VipExtGetProgressMode(g, &pm), VIP_INVALID_PARAMETER);
    {
        VIP_BOOLEAN lossy;
        BAD(VipExtQueryWireLossy(g, &lossy), VIP_INVALID_PARAMETER);
    }
    BAD(VipExtProgress(g), VIP_INVALID_PARAMETER);
    BAD(VipExtQueryNicCounters(g, &c), VIP_INVALID_PARAMETER);
    BAD(VipExtListen(g, &la.a, &ls), VIP_INVALID_PARAMETER);
    BAD(VipExtSetFaults(g, "drop=0"), VIP_INVALID_PARAMETER);
    BAD(VipExtQueryFaultCounters(g, &fc), VIP_INVALID_PARAMETER);
    BAD(VipCloseNic(g), VIP_INVALID_PARAMETER); /* last: were it taken, nothing else would run */
}

static void try_ptag(VIP_PROTECTION_HANDLE g) {
    VIP_MEM_ATTRIBUTES ma = {g, VIP_FALSE, VIP_FALSE};
    VIP_MEM_HANDLE mh;
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = g;
    VIP_VI_HANDLE vi;
    BAD(VipDestroyPtag(E.nic, g), VIP_INVALID_PTAG);
    BAD(VipRegisterMem(E.nic, E.mem, 4096, &ma, &mh), VIP_INVALID_PTAG);
    BAD(VipSetMemAttributes(E.nic, E.mem, E.mh, &ma), VIP_INVALID_PTAG);
    BAD(VipCreateVi(E.nic, &va, NULL, NULL, &vi), VIP_INVALID_PTAG);
    BAD(VipSetViAttributes(V, &va), VIP_INVALID_PTAG);
}

static void try_vi(VIP_VI_HANDLE g) {
    VIP_VI_STATE st;
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = E.ptag;
    VIP_BOOLEAN b1, b2;
    th_addr la, ra;
    th_mkaddr(&la, &E.na, "g1");
    th_mkaddr(&ra, &E.na, "g2");
    VIP_DESCRIPTOR *dp;
    VIP_EXT_COUNTERS c;
    VIP_UINT32 id;
    BAD(VipDestroyVi(g), VIP_INVALID_PARAMETER);
    BAD(VipQueryVi(g, &st, &va, &b1, &b2), VIP_INVALID_PARAMETER);
    BAD(VipSetViAttributes(g, &va), VIP_INVALID_PARAMETER);
    BAD(VipConnectAccept(C, g), VIP_INVALID_PARAMETER);
    BAD(VipConnectRequest(g, &la.a, &ra.a, 0, NULL), VIP_INVALID_PARAMETER);
    BAD(VipDisconnect(g), VIP_INVALID_PARAMETER);
    BAD(VipConnectPeerRequest(g, &la.a, &ra.a, 0), VIP_INVALID_PARAMETER);
    BAD(VipConnectPeerDone(g, NULL), VIP_INVALID_PARAMETER);
    BAD(VipConnectPeerWait(g, NULL), VIP_INVALID_PARAMETER);
    BAD(VipPostSend(g, D, E.mh), VIP_INVALID_PARAMETER);
    BAD(VipPostRecv(g, D, E.mh), VIP_INVALID_PARAMETER);
    BAD(VipSendDone(g, &dp), VIP_INVALID_PARAMETER);
    BAD(VipRecvDone(g, &dp), VIP_INVALID_PARAMETER);
    BAD(VipSendWait(g, 0, &dp), VIP_INVALID_PARAMETER);
    BAD(VipRecvWait(g, 0, &dp), VIP_INVALID_PARAMETER);
    BAD(VipSendNotify(g, NULL, NULL), VIP_INVALID_PARAMETER);
    BAD(VipRecvNotify(g, NULL, NULL), VIP_INVALID_PARAMETER);
    BAD(VipExtQueryViCounters(g, &c), VIP_INVALID_PARAMETER);
    BAD(VipExtQueryViId(g, &id), VIP_INVALID_PARAMETER);
    BAD(VipExtSetRetryTimeout(g, 100), VIP_INVALID_PARAMETER);
    BAD(VipExtEnableSteering(g, NULL), VIP_INVALID_PARAMETER);
    BAD(VipExtPostRecvReply(g, D, E.mh), VIP_INVALID_PARAMETER);
    BAD(VipExtRecvReplyDone(g, &dp), VIP_INVALID_PARAMETER);
    BAD(VipExtRecvReplyWait(g, 0, &dp), VIP_INVALID_PARAMETER);
}

static void try_cq(VIP_CQ_HANDLE g) {
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN b;
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    va.Ptag = E.ptag;
    BAD(VipDestroyCQ(g), VIP_INVALID_PARAMETER);
    BAD(VipResizeCQ(g, 16), VIP_INVALID_PARAMETER);
    BAD(VipCQDone(g, &vi, &b), VIP_INVALID_PARAMETER);
    BAD(VipCQWait(g, 0, &vi, &b), VIP_INVALID_PARAMETER);
    BAD(VipCQNotify(g, NULL, NULL), VIP_INVALID_PARAMETER);
    BAD(VipExtCQTake(g, &vi, &b), VIP_INVALID_PARAMETER);
    if (g) { /* NULL CQs are valid here: that queue has no CQ */
        BAD(VipCreateVi(E.nic, &va, g, NULL, &vi), VIP_INVALID_PARAMETER);
        BAD(VipCreateVi(E.nic, &va, NULL, g, &vi), VIP_INVALID_PARAMETER);
        BAD(VipExtEnableSteering(V, g), VIP_INVALID_PARAMETER);
    }
}

static void try_conn(VIP_CONN_HANDLE g) {
    BAD(VipConnectAccept(g, V), VIP_INVALID_PARAMETER);
    BAD(VipConnectReject(g), VIP_INVALID_PARAMETER);
}

static void try_listen(VIP_EXT_LISTEN_HANDLE g) {
    VIP_CONN_HANDLE conn;
    th_addr ra;
    BAD(VipExtListenDone(g, &ra.a, NULL, &conn), VIP_INVALID_PARAMETER);
    BAD(VipExtUnlisten(g), VIP_INVALID_PARAMETER);
}

/* Tries value v as a handle of every kind. */
static void try_all(void *v, const char *desc) {
    for (int k = 0; k < K_COUNT; k++) {
        snprintf(what, sizeof what, "%s (%p) as a %s handle", desc, v, kind_name[k]);
        th_phase(what);
        switch (k) {
            case K_NIC: try_nic((VIP_NIC_HANDLE)v); break;
            case K_PTAG: try_ptag((VIP_PROTECTION_HANDLE)v); break;
            case K_VI: try_vi((VIP_VI_HANDLE)v); break;
            case K_CQ: try_cq((VIP_CQ_HANDLE)v); break;
            case K_CONN: try_conn((VIP_CONN_HANDLE)v); break;
            case K_LISTEN: try_listen((VIP_EXT_LISTEN_HANDLE)v); break;
        }
    }
}

/* Tries value v as a handle of every kind but its own (k). */
static void try_other_kinds(void *v, kind own, const char *desc) {
    for (int k = 0; k < K_COUNT; k++) {
        if (k == (int)own) continue;
        snprintf(what, sizeof what, "a %s handle (%s) as a %s handle", kind_name[own], desc, kind_name[k]);
        th_phase(what);
        switch (k) {
            case K_NIC: try_nic((VIP_NIC_HANDLE)v); break;
            case K_PTAG: try_ptag((VIP_PROTECTION_HANDLE)v); break;
            case K_VI: try_vi((VIP_VI_HANDLE)v); break;
            case K_CQ: try_cq((VIP_CQ_HANDLE)v); break;
            case K_CONN: try_conn((VIP_CONN_HANDLE)v); break;
            case K_LISTEN: try_listen((VIP_EXT_LISTEN_HANDLE)v); break;
        }
    }
}

/* Tries v as a handle of kind k only. */
static void try_kind(void *v, kind k, const char *desc) {
    snprintf(what, sizeof what, "%s (%p) as a %s handle", desc, v, kind_name[k]);
    th_phase(what);
    switch (k) {
        case K_NIC: try_nic((VIP_NIC_HANDLE)v); break;
        case K_PTAG: try_ptag((VIP_PROTECTION_HANDLE)v); break;
        case K_VI: try_vi((VIP_VI_HANDLE)v); break;
        case K_CQ: try_cq((VIP_CQ_HANDLE)v); break;
        case K_CONN: try_conn((VIP_CONN_HANDLE)v); break;
        case K_LISTEN: try_listen((VIP_EXT_LISTEN_HANDLE)v); break;
        default: break;
    }
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* A held connection request on L, so that C is a live connection handle. */
static VIP_CONN_HANDLE held_request(VIP_VI_HANDLE client, const char *disc) {
    th_addr cl, sa;
    th_mkaddr(&cl, &E.na, "client");
    th_mkaddr(&sa, &E.na, disc);
    VIP_RETURN r = VipConnectRequest(client, &cl.a, &sa.a, 100, NULL); /* nobody answers: times out */
    if (r != VIP_TIMEOUT) FATAL("VipConnectRequest to a listener -> %s", th_rs(r));
    VIP_CONN_HANDLE conn = NULL;
    r = VIP_NOT_DONE;
    for (uint64_t end = th_now_ms() + TH_WAIT_MS; r == VIP_NOT_DONE && th_now_ms() < end;) r = VipExtListenDone(L, NULL, NULL, &conn);
    if (r != VIP_SUCCESS) FATAL("VipExtListenDone -> %s", th_rs(r));
    return conn;
}

int main(void) {
    th_init("garbage_handles", 0);
    th_open_env(&E, NULL, 1 << 16);
    CHECK(VipCreateCQ(E.nic, 16, &Q));
    V = th_vi(&E, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_VI_HANDLE client = th_vi(&E, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    D = th_desc(&E, 1);
    th_addr la;
    CHECK(VipExtListen(E.nic, th_mkaddr(&la, &E.na, "svc"), &L));
    C = held_request(client, "svc");
    void *live[K_COUNT] = {E.nic, E.ptag, V, Q, C, L};

    try_all(NULL, "NULL");

    for (int i = 0; i < 32; i++) {
        uint64_t v = rnd();
        if (i >= 16) v |= 1ull << 63; /* the top bit every real handle has */
        try_all((void *)(uintptr_t)v, "a random value");
    }

    /* Live handles with one part changed: generation, index, kind bits, a low bit. */
    for (int k = 0; k < K_COUNT; k++) {
        uintptr_t h = (uintptr_t)live[k];
        uintptr_t forged[] = {h + (1ull << 32), h - (1ull << 32), h ^ 1, h ^ (1ull << 19), h ^ (1ull << 20),
                              h ^ (1ull << 63), h & 0xFFFFFFFFull, h >> 32};
        for (size_t i = 0; i < sizeof forged / sizeof *forged; i++)
            if (forged[i] != h) try_kind((void *)forged[i], (kind)k, "a live handle with bits changed");
    }

    /* Stack garbage: random bytes, and bytes laid out like the objects old handles
     * pointed to (a magic word first, then pointers to more garbage). */
    {
        uint64_t junk[64];
        for (int i = 0; i < 64; i++) junk[i] = rnd();
        try_all(junk, "a pointer to random stack bytes");
        static const uint32_t magics[] = {0x4e494331, 0x50544731, 0x56494931, 0x43515131, 0x434f4e31, 0x4c534e31};
        for (size_t m = 0; m < sizeof magics / sizeof *magics; m++) {
            uint64_t forged[64];
            for (int i = 0; i < 64; i++) forged[i] = (uintptr_t)&junk[i % 64] ^ (rnd() & 0xff0);
            memcpy(forged, &magics[m], sizeof magics[m]);
            try_all(forged, "a pointer to stack bytes that start with an old magic word");
        }
    }

    /* Unmapped and inaccessible pages. */
    {
        long pg = sysconf(_SC_PAGESIZE);
        char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) FATAL("mmap");
        munmap(m, pg);
        mprotect(m + pg, pg, PROT_NONE);
        try_all(m, "a pointer to an unmapped page");
        try_all(m + 64, "a pointer into an unmapped page");
        try_all(m + pg, "a pointer to a PROT_NONE page");
        munmap(m + pg, pg);
        try_all((void *)(uintptr_t)0x1000, "a pointer to page 1");
        try_all((void *)(uintptr_t)~(uintptr_t)0, "all ones");
    }

    /* Every live handle as every other kind. */
    for (int k = 0; k < K_COUNT; k++) try_other_kinds(live[k], (kind)k, "live");

    /* Destroyed objects; a slot used again does not revive an old handle. */
    th_phase("destroyed objects");
    {
        VIP_VI_HANDLE v2 = th_vi(&E, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        VIP_CQ_HANDLE q2;
        CHECK(VipCreateCQ(E.nic, 4, &q2));
        VIP_PROTECTION_HANDLE p2;
        CHECK(VipCreatePtag(E.nic, &p2));
        VIP_EXT_LISTEN_HANDLE l2;
        th_addr la2;
        CHECK(VipExtListen(E.nic, th_mkaddr(&la2, &E.na, "svc2"), &l2));
        VIP_EXT_LISTEN_HANDLE keep = L;
        L = l2;
        VIP_CONN_HANDLE c2 = held_request(client, "svc2");
        L = keep;
        CHECK(VipConnectReject(c2));
        CHECK(VipExtUnlisten(l2));
        CHECK(VipDestroyVi(v2));
        CHECK(VipDestroyCQ(q2));
        CHECK(VipDestroyPtag(E.nic, p2));
        try_kind(v2, K_VI, "a destroyed VI");
        try_kind(q2, K_CQ, "a destroyed CQ");
        try_kind(p2, K_PTAG, "a destroyed ptag");
        try_kind(c2, K_CONN, "a rejected connection");
        try_kind(l2, K_LISTEN, "a removed listener");

        /* New objects of each kind (their slots may be the old ones). */
        VIP_VI_HANDLE v3 = th_vi(&E, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        VIP_CQ_HANDLE q3;
        CHECK(VipCreateCQ(E.nic, 4, &q3));
        VIP_PROTECTION_HANDLE p3;
        CHECK(VipCreatePtag(E.nic, &p3));
        EXPECT(v3 != v2 && q3 != q2 && p3 != p2, "a new object got its predecessor's handle");
        try_kind(v2, K_VI, "a destroyed VI, after a new VI");
        try_kind(q2, K_CQ, "a destroyed CQ, after a new CQ");
        try_kind(p2, K_PTAG, "a destroyed ptag, after a new ptag");
        th_phase("the new objects work");
        EXPECT_RC(VipQueryVi(v3, NULL, NULL, NULL, NULL), VIP_SUCCESS);
        EXPECT_RC(VipResizeCQ(q3, 8), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(v3), VIP_SUCCESS);
        EXPECT_RC(VipDestroyCQ(q3), VIP_SUCCESS);
        EXPECT_RC(VipDestroyPtag(E.nic, p3), VIP_SUCCESS);
        /* Many create/destroy rounds on one slot: never an old handle back. */
        VIP_CQ_HANDLE first;
        CHECK(VipCreateCQ(E.nic, 4, &first));
        CHECK(VipDestroyCQ(first));
        for (int i = 0; i < 2000; i++) {
            VIP_CQ_HANDLE q;
            CHECK(VipCreateCQ(E.nic, 4, &q));
            if (q == first) {
                EXPECT(q != first, "round %d: a CQ got the handle of a destroyed one", i);
                break;
            }
            CHECK(VipDestroyCQ(q));
        }
        th_phase("the first of many destroyed CQs");
        try_kind(first, K_CQ, "the first of many destroyed CQs");
    }

    /* A closed NIC: its handle and every handle of its objects. */
    th_phase("a closed NIC");
    {
        th_env e2;
        th_open_env(&e2, NULL, 1 << 16);
        VIP_VI_HANDLE v = th_vi(&e2, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        VIP_CQ_HANDLE q;
        CHECK(VipCreateCQ(e2.nic, 4, &q));
        VIP_EXT_LISTEN_HANDLE l;
        th_addr a2;
        CHECK(VipExtListen(e2.nic, th_mkaddr(&a2, &e2.na, "x"), &l));
        VIP_NIC_HANDLE n = e2.nic;
        VIP_PROTECTION_HANDLE p = e2.ptag;
        th_close_env(&e2);
        try_kind(n, K_NIC, "a closed NIC");
        try_kind(p, K_PTAG, "a ptag of a closed NIC");
        try_kind(v, K_VI, "a VI of a closed NIC");
        try_kind(q, K_CQ, "a CQ of a closed NIC");
        try_kind(l, K_LISTEN, "a listener of a closed NIC");
        th_env e3;
        th_open_env(&e3, NULL, 0);
        EXPECT(e3.nic != n, "a new NIC got the handle of a closed one");
        try_kind(n, K_NIC, "a closed NIC, after a new NIC");
        th_close_env(&e3);
    }

    th_phase("the real objects still work");
    {
        VIP_VI_STATE st = (VIP_VI_STATE)-1;
        EXPECT_RC(VipQueryVi(V, &st, NULL, NULL, NULL), VIP_SUCCESS);
        EXPECT(st == VIP_STATE_IDLE, "VI state %s", th_state_name(st));
        EXPECT_RC(VipConnectReject(C), VIP_SUCCESS);
        EXPECT_RC(VipExtUnlisten(L), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(client), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(V), VIP_SUCCESS);
        EXPECT_RC(VipDestroyCQ(Q), VIP_SUCCESS);
        th_nic_healthy(&E);
    }
    th_close_env(&E);
    return th_result();
}
