/*
 * cs_addr_limits: the address limits are one set (vipl.h, VipQueryNic), and a server's
 * RemoteAddr of exactly VIP_EXT_NET_ADDRESS_SIZE bytes takes the largest request: a
 * client that sends the maximum discriminator fills it, and the guard bytes after it
 * stay untouched (VipConnectWait and VipExtListenDone). One byte over a limit is
 * VIP_INVALID_PARAMETER everywhere an address goes in.
 */
#include "helpers.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

/* A VIP_NET_ADDRESS buffer of exactly the documented size, then GUARD guard bytes. */
typedef struct {
    uint8_t *mem;
    VIP_NET_ADDRESS *a;
} sized_addr;

static void sized_new(sized_addr *s) {
    s->mem = malloc(VIP_EXT_NET_ADDRESS_SIZE + GUARD);
    if (!s->mem) FATAL("out of memory");
    memset(s->mem, 0, VIP_EXT_NET_ADDRESS_SIZE);
    memset(s->mem + VIP_EXT_NET_ADDRESS_SIZE, GUARD_BYTE, GUARD);
    s->a = (VIP_NET_ADDRESS *)s->mem;
}

/* The first guard byte that changed, or -1. */
static long sized_guard_hit(const sized_addr *s) {
    for (long i = 0; i < GUARD; i++)
        if (s->mem[VIP_EXT_NET_ADDRESS_SIZE + i] != GUARD_BYTE) return i;
    return -1;
}

/* An address of the NIC's own host bytes and dlen discriminator bytes (i & 0xff), in
 * storage big enough for one byte over each limit. */
typedef union {
    VIP_NET_ADDRESS a;
    uint8_t raw[sizeof(VIP_NET_ADDRESS) + 512]; /* room for any address the test makes */
} big_addr;

static VIP_NET_ADDRESS *mk(big_addr *b, const VIP_NIC_ATTRIBUTES *na, unsigned dlen, uint8_t salt) {
    memset(b, 0, sizeof *b);
    b->a.HostAddressLen = na->NicAddressLen;
    memcpy(b->a.HostAddress, na->LocalNicAddress, na->NicAddressLen);
    b->a.DiscriminatorLen = (VIP_UINT16)dlen;
    for (unsigned i = 0; i < dlen; i++) b->a.HostAddress[na->NicAddressLen + i] = (uint8_t)(i * 7 + salt);
    return &b->a;
}

typedef struct {
    VIP_NIC_HANDLE nic;
    VIP_NET_ADDRESS *local;
    VIP_NET_ADDRESS *remote; /* exactly VIP_EXT_NET_ADDRESS_SIZE bytes */
    VIP_VI_HANDLE vi;
    VIP_RETURN wait_rc, accept_rc;
    pthread_t tid;
} server;

static void *server_main(void *arg) {
    server *s = arg;
    VIP_CONN_HANDLE conn;
    s->accept_rc = VIP_NOT_DONE;
    s->wait_rc = VipConnectWait(s->nic, s->local, TH_WAIT_MS, s->remote, NULL, &conn);
    if (s->wait_rc == VIP_SUCCESS) s->accept_rc = VipConnectAccept(conn, s->vi);
    return NULL;
}

/* What the server learnt must be the client's NIC address and its whole discriminator. */
static void check_remote(const sized_addr *r, const VIP_NIC_ATTRIBUTES *na, const VIP_NET_ADDRESS *client,
                         const char *what) {
    long hit = sized_guard_hit(r);
    EXPECT(hit < 0, "%s: guard byte %ld after the %zu-byte RemoteAddr was overwritten", what, hit,
           (size_t)VIP_EXT_NET_ADDRESS_SIZE);
    EXPECT(r->a->HostAddressLen == na->NicAddressLen &&
               memcmp(r->a->HostAddress, na->LocalNicAddress, na->NicAddressLen) == 0,
           "%s: host address of %u bytes is not the client's", what, r->a->HostAddressLen);
    EXPECT(r->a->DiscriminatorLen == client->DiscriminatorLen &&
               memcmp(r->a->HostAddress + r->a->HostAddressLen, client->HostAddress + client->HostAddressLen,
                      client->DiscriminatorLen) == 0,
           "%s: discriminator of %u bytes, want the client's %u", what, r->a->DiscriminatorLen,
           client->DiscriminatorLen);
}

int main(void) {
    th_init("cs_addr_limits", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);

    th_phase("one set of limits");
    EXPECT(e.na.MaxDiscriminatorLen == VIP_EXT_MAX_DISCRIMINATOR_LEN, "VipQueryNic MaxDiscriminatorLen %u, vipl.h %u",
           e.na.MaxDiscriminatorLen, (unsigned)VIP_EXT_MAX_DISCRIMINATOR_LEN);
    EXPECT(e.na.NicAddressLen > 0 && e.na.NicAddressLen <= VIP_EXT_MAX_HOST_ADDRESS_LEN,
           "NicAddressLen %u over VIP_EXT_MAX_HOST_ADDRESS_LEN %u", e.na.NicAddressLen,
           (unsigned)VIP_EXT_MAX_HOST_ADDRESS_LEN);
    EXPECT(VIP_EXT_NET_ADDRESS_SIZE ==
               offsetof(VIP_NET_ADDRESS, HostAddress) + VIP_EXT_MAX_HOST_ADDRESS_LEN + VIP_EXT_MAX_DISCRIMINATOR_LEN,
           "VIP_EXT_NET_ADDRESS_SIZE %zu", (size_t)VIP_EXT_NET_ADDRESS_SIZE);
    const unsigned maxd = e.na.MaxDiscriminatorLen;

    th_phase("VipConnectWait: the maximum discriminator fills the documented buffer, no more");
    {
        VIP_VI_HANDLE sv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE cv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        big_addr sl, cl, target;
        sized_addr r;
        sized_new(&r);
        server s = {e.nic, mk(&sl, &e.na, maxd, 1), r.a, sv, VIP_NOT_DONE, VIP_NOT_DONE, 0};
        if (pthread_create(&s.tid, NULL, server_main, &s) != 0) FATAL("pthread_create");
        VIP_RETURN rc = th_connect_request(cv, mk(&cl, &e.na, maxd, 99), mk(&target, &e.na, maxd, 1), TH_WAIT_MS,
                                           NULL, TH_WAIT_MS);
        pthread_join(s.tid, NULL);
        EXPECT(rc == VIP_SUCCESS, "VipConnectRequest with a %u-byte discriminator -> %s", maxd, th_rs(rc));
        EXPECT(s.wait_rc == VIP_SUCCESS && s.accept_rc == VIP_SUCCESS, "server: wait %s, accept %s",
               th_rs(s.wait_rc), th_rs(s.accept_rc));
        if (s.wait_rc == VIP_SUCCESS) check_remote(&r, &e.na, &cl.a, "VipConnectWait");
        free(r.mem);
        th_unpair(cv, sv, 1000);
    }

    th_phase("VipExtListenDone: the same");
    {
        VIP_VI_HANDLE cv = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        big_addr sl, cl, target;
        sized_addr r;
        sized_new(&r);
        VIP_EXT_LISTEN_HANDLE ls;
        CHECK(VipExtListen(e.nic, mk(&sl, &e.na, maxd, 3), &ls));
        /* The listener holds the request while the client waits (one NIC: in inline
         * mode the client's own wait steps it). Nobody answers within 200 ms, so the
         * client gives up; the request stays held and VipExtListenDone takes it. */
        VIP_RETURN crc = VipConnectRequest(cv, mk(&cl, &e.na, maxd, 77), mk(&target, &e.na, maxd, 3), 200, NULL);
        VIP_CONN_HANDLE conn;
        VIP_RETURN lr = VIP_NOT_DONE;
        for (uint64_t end = th_now_ms() + TH_WAIT_MS; lr == VIP_NOT_DONE && th_now_ms() < end;) {
            lr = VipExtListenDone(ls, r.a, NULL, &conn);
            if (lr == VIP_NOT_DONE) th_sleep_ms(1);
        }
        EXPECT(crc == VIP_TIMEOUT, "VipConnectRequest to a listener nobody answers -> %s", th_rs(crc));
        EXPECT(lr == VIP_SUCCESS, "VipExtListenDone -> %s", th_rs(lr));
        if (lr == VIP_SUCCESS) {
            check_remote(&r, &e.na, &cl.a, "VipExtListenDone");
            EXPECT_RC(VipConnectReject(conn), VIP_SUCCESS);
        }
        EXPECT_RC(VipExtUnlisten(ls), VIP_SUCCESS);
        free(r.mem);
        EXPECT_RC(VipDestroyVi(cv), VIP_SUCCESS);
    }

    th_phase("one byte over a limit is refused");
    {
        VIP_VI_HANDLE v = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        big_addr ok, over_d, over_h;
        sized_addr r;
        sized_new(&r);
        mk(&ok, &e.na, 4, 5);
        mk(&over_d, &e.na, maxd + 1, 5);
        mk(&over_h, &e.na, 0, 5);
        over_h.a.HostAddressLen = VIP_EXT_MAX_HOST_ADDRESS_LEN + 1;
        VIP_CONN_HANDLE conn;
        VIP_EXT_LISTEN_HANDLE ls;
        EXPECT_RC(VipConnectWait(e.nic, &over_d.a, 0, r.a, NULL, &conn), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectWait(e.nic, &over_h.a, 0, r.a, NULL, &conn), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipExtListen(e.nic, &over_d.a, &ls), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipExtListen(e.nic, &over_h.a, &ls), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectRequest(v, &over_d.a, &ok.a, 0, NULL), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectRequest(v, &ok.a, &over_d.a, 0, NULL), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectRequest(v, &ok.a, &over_h.a, 0, NULL), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectPeerRequest(v, &over_d.a, &ok.a, 0), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectPeerRequest(v, &ok.a, &over_d.a, 0), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipConnectPeerRequest(v, &ok.a, &over_h.a, 0), VIP_INVALID_PARAMETER);
        CHECK(VipNSInit(e.nic, NULL));
        char name[64];
        VIP_ULONG nlen = sizeof name;
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &over_h.a, name, &nlen), VIP_INVALID_PARAMETER);
        CHECK(VipNSShutdown(e.nic));
        EXPECT(sized_guard_hit(&r) < 0, "a refused call wrote past RemoteAddr");
        EXPECT(th_state(v) == VIP_STATE_IDLE, "VI state %s after refused requests", th_state_name(th_state(v)));
        free(r.mem);
        EXPECT_RC(VipDestroyVi(v), VIP_SUCCESS);
    }

    th_close_env(&e);
    return th_result();
}
