/*
 * hp_owner_hostile.h -- the targets the owner offers the hostile peer (included by
 * hp_owner.c).
 *
 * - A standing listener (HP_DISC_LISTEN), and VipConnectWait (HP_DISC_WAIT, 1 ms every
 *   20 ms). The RemoteAddr buffer is exactly VIP_EXT_NET_ADDRESS_SIZE bytes (what vipl.h
 *   asks for) with guard bytes after it, and the address it reports must be the hostile
 *   peer's own: a request that names another NIC is refused (what a careful server does)
 *   and counted as a failure of the NIC, which let a peer claim an address not its own.
 *   A request from the hostile peer is accepted on a new VI of the level it asks for.
 * - HP_PEER_SLOTS VIs waiting in VipConnectPeerRequest for the hostile peer's NIC.
 * - A client: every 30 ms a VipConnectRequest (5 ms) to the hostile peer's NIC, which
 *   answers as it likes; a request it accepts must have been accepted by a VI of the
 *   same reliability level (VIA 1.0: the server's VI must match, or the request fails).
 * - Every hostile VI has RDMA write and read on, protection tag H (regions HW and HR),
 *   receives of HP_HOSTILE_RECV bytes with guards, and the owner sends it a small message
 *   every few milliseconds (so ACK/NAK forgeries have something to hit).
 * - A hostile VI that leaves CONNECTED is disconnected: every descriptor must come back
 *   and VipDestroyVi must succeed. Then the slot is offered again.
 */
#ifndef SOFTVIA_HP_OWNER_HOSTILE_H
#define SOFTVIA_HP_OWNER_HOSTILE_H

static int hp_spoof_budget = 3;

static void hvi_create(hp_hvi *h, VIP_RELIABILITY_LEVEL rel) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = rel;
    va.Ptag = O.ptag_h;
    va.EnableRdmaWrite = VIP_TRUE;
    va.EnableRdmaRead = rel != VIP_SERVICE_UNRELIABLE;
    CHECK(VipCreateVi(O.nic, &va, NULL, NULL, &h->vi));
    h->rel = rel;
    for (int k = 0; k < HP_H_RECVS; k++) {
        th_set1(h->r[k].d, O.hdesc.mh, h->r[k].buf, h->r[k].cap);
        CHECK(VipPostRecv(h->vi, h->r[k].d, O.hdesc.mh));
        h->r[k].posted = 1;
    }
}

static int hvi_outstanding(const hp_hvi *h) {
    int n = 0;
    for (int k = 0; k < HP_H_RECVS; k++) n += h->r[k].posted;
    for (int k = 0; k < HP_H_SENDS; k++) n += h->s[k].posted;
    return n;
}

/* Takes the completions of h; receives are checked against their buffers. */
static void hvi_reap(hp_hvi *h) {
    VIP_DESCRIPTOR *d;
    while (VipRecvDone(h->vi, &d) == VIP_SUCCESS) {
        int k = 0;
        while (k < HP_H_RECVS && h->r[k].d != d) k++;
        if (k == HP_H_RECVS) FATAL("hostile VI: a receive completion for descriptor %p, not ours", (void *)d);
        h->r[k].posted = 0;
        /* (an RDMA write with immediate data reports the write's length, not the buffer's) */
        if (!(d->CS.Status & VIP_STATUS_ERROR_MASK) && (d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RECEIVE &&
            d->CS.Length > h->r[k].cap)
            HP_FAIL("hostile VI: a receive reports %u bytes in a %u-byte buffer", d->CS.Length, h->r[k].cap);
        if (!hp_buf_guard_ok(h->r[k].buf, h->r[k].cap)) HP_FAIL("hostile VI: a receive wrote past its buffer");
    }
    while (VipSendDone(h->vi, &d) == VIP_SUCCESS) {
        int k = 0;
        while (k < HP_H_SENDS && h->s[k].d != d) k++;
        if (k == HP_H_SENDS) FATAL("hostile VI: a send completion for descriptor %p, not ours", (void *)d);
        h->s[k].posted = 0;
    }
}

static void hvi_teardown(hp_hvi *h, uint64_t now) {
    VIP_RETURN r = VipDisconnect(h->vi);
    if (r != VIP_SUCCESS) HP_FAIL("VipDisconnect of a hostile VI -> %s", th_rs(r));
    uint64_t end = th_now_ms() + 3000;
    while (hvi_outstanding(h) && th_now_ms() < end) {
        hvi_reap(h);
        if (O.thread_mode) sched_yield();
    }
    int left = hvi_outstanding(h);
    if (left) HP_FAIL("hostile VI: %d descriptors never completed after VipDisconnect (3 s)", left);
    r = VipDestroyVi(h->vi);
    if (r != VIP_SUCCESS || left) {
        HP_FAIL("VipDestroyVi of a disconnected hostile VI -> %s", th_rs(r));
        h->state = -1; /* its descriptors may still be the NIC's: the slot is never reused */
        return;
    }
    h->vi = NULL;
    h->state = HV_FREE;
    h->t_next = now + (h == &O.h[HP_CLIENT_SLOT] ? 30 : 20);
    O.h_torn++;
}

static void hvi_arm_peer(int k, uint64_t now) {
    static const VIP_RELIABILITY_LEVEL lv[3] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                                VIP_SERVICE_RELIABLE_RECEPTION};
    hp_hvi *h = &O.h[k];
    hvi_create(h, lv[h->rounds++ % 3]);
    char ld[32], rd[32];
    snprintf(ld, sizeof ld, "%s%d", HP_DISC_PEER_O, k);
    snprintf(rd, sizeof rd, "%s%d", HP_DISC_PEER_H, k);
    th_addr l, r;
    VIP_RETURN rc = VipConnectPeerRequest(h->vi, mp_mkaddr(&l, O.own_addr, O.addr_len, ld),
                                          mp_mkaddr(&r, O.hostile_addr, O.addr_len, rd), 3000);
    h->state = HV_PENDING;
    if (rc != VIP_SUCCESS) hvi_teardown(h, now + 200); /* the hostile NIC is gone: try later */
}

/* The client slot: a connect request to the hostile peer's NIC, answered as it likes. */
static void hvi_client(uint64_t now) {
    static const VIP_RELIABILITY_LEVEL lv[3] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                                VIP_SERVICE_RELIABLE_RECEPTION};
    static int mismatch_reported;
    hp_hvi *h = &O.h[HP_CLIENT_SLOT];
    if (now < h->t_next) return;
    hvi_create(h, lv[h->rounds++ % 3]);
    h->state = HV_PENDING;
    th_addr l, r;
    VIP_VI_ATTRIBUTES ra;
    memset(&ra, 0, sizeof ra);
    VIP_RETURN rc = VipConnectRequest(h->vi, mp_mkaddr(&l, O.own_addr, O.addr_len, "hp.client.o"),
                                      mp_mkaddr(&r, O.hostile_addr, O.addr_len, HP_DISC_CLIENT), 5, &ra);
    if (rc != VIP_SUCCESS) {
        hvi_teardown(h, now + 10);
        return;
    }
    h->state = HV_LIVE;
    O.h_client_connected++;
    if (ra.ReliabilityLevel != h->rel) {
        th_failures++;
        if (!mismatch_reported++)
            TH_FAILMSG("VipConnectRequest of a %s VI succeeded, and the server's VI is %s: a server can accept "
                       "with a VI of another reliability level", th_rel_name(h->rel), th_rel_name(ra.ReliabilityLevel));
    }
}

/* A request at the listener: check what VipExtListenDone reported, then accept it on a
 * fresh VI or refuse it. */
static void take_request(uint64_t now, int wait) {
    VIP_NET_ADDRESS *ra = (VIP_NET_ADDRESS *)O.raddr_buf;
    VIP_VI_ATTRIBUTES rattrs;
    VIP_CONN_HANDLE conn;
    memset(O.raddr_buf, 0, O.raddr_len);
    th_addr la;
    VIP_RETURN got = wait ? VipConnectWait(O.nic, mp_mkaddr(&la, O.own_addr, O.addr_len, HP_DISC_WAIT), 1, ra, &rattrs,
                                           &conn)
                          : VipExtListenDone(O.listen, ra, &rattrs, &conn);
    if (got != VIP_SUCCESS) return;
    if (!hp_buf_guard_ok(O.raddr_buf, O.raddr_len)) {
        HP_FAIL("VipExtListenDone/VipConnectWait wrote past its RemoteAddr of VIP_EXT_NET_ADDRESS_SIZE = %zu bytes "
                "(HostAddressLen %u, DiscriminatorLen %u)", O.raddr_len, ra->HostAddressLen, ra->DiscriminatorLen);
        hp_fill(O.raddr_buf + O.raddr_len, HP_BUF_GUARD, HP_GUARD_SEED, (size_t)(O.raddr_buf - hp_A) + O.raddr_len);
    }
    int genuine = ra->HostAddressLen == O.addr_len && !memcmp(ra->HostAddress, O.hostile_addr, O.addr_len);
    if (!genuine) {
        O.h_spoofed++;
        th_failures++;
        if (hp_spoof_budget-- > 0)
            TH_FAILMSG("%s reports a request from a %u-byte address that is not the NIC it came from "
                       "(the hostile peer's %u-byte address): a peer can claim any address",
                       wait ? "VipConnectWait" : "VipExtListenDone", ra->HostAddressLen, O.addr_len);
    }
    int slot = -1;
    for (int k = HP_CLIENT_SLOT + 1; k < HP_MAXH && slot < 0; k++)
        if (O.h[k].state == HV_FREE && now >= O.h[k].t_next) slot = k;
    VIP_RELIABILITY_LEVEL rel = rattrs.ReliabilityLevel;
    int level_ok = rel == VIP_SERVICE_UNRELIABLE || rel == VIP_SERVICE_RELIABLE_DELIVERY ||
                   rel == VIP_SERVICE_RELIABLE_RECEPTION;
    if (!genuine || slot < 0 || !level_ok) {
        CHECK(VipConnectReject(conn));
        O.h_refused++;
        return;
    }
    hp_hvi *h = &O.h[slot];
    hvi_create(h, rel);
    h->state = HV_LIVE;
    VIP_RETURN r = VipConnectAccept(conn, h->vi);
    if (r != VIP_SUCCESS) {
        if (r != VIP_ERROR_RESOURCE) CHECK(VipConnectReject(conn)); /* ERROR_RESOURCE: the handle is gone */
        hvi_teardown(h, now);
        return;
    }
    O.h_accepted++;
}

static void hvi_live(hp_hvi *h, uint64_t now) {
    hvi_reap(h);
    if (th_state(h->vi) != VIP_STATE_CONNECTED) {
        hvi_teardown(h, now);
        return;
    }
    for (int k = 0; k < HP_H_RECVS; k++)
        if (!h->r[k].posted) {
            th_set1(h->r[k].d, O.hdesc.mh, h->r[k].buf, h->r[k].cap);
            CHECK(VipPostRecv(h->vi, h->r[k].d, O.hdesc.mh));
            h->r[k].posted = 1;
        }
    if (now < h->t_next) return;
    h->t_next = now + 3;
    for (int k = 0; k < HP_H_SENDS; k++)
        if (!h->s[k].posted) {
            hp_fill(h->s[k].buf, 64, O.hr_seed, 0);
            th_set1(h->s[k].d, O.hdesc.mh, h->s[k].buf, 64);
            VIP_RETURN r = VipPostSend(h->vi, h->s[k].d, O.hdesc.mh);
            /* With the firmware thread (progress=thread) the hostile peer's disconnect or a
             * broken connection can move the VI out of Connected after the check above:
             * VIP_INVALID_STATE is then the right answer. Any other reason is a failure. */
            if (r == VIP_INVALID_STATE && th_state(h->vi) != VIP_STATE_CONNECTED) {
                hvi_teardown(h, now);
                return;
            }
            CHECK(r);
            h->s[k].posted = 1;
            return;
        }
}

static void hp_hostile_setup(void) {
    for (int i = 0; i < HP_MAXH; i++) {
        hp_hvi *h = &O.h[i];
        for (int k = 0; k < HP_H_RECVS; k++) {
            h->r[k].d = hp_alloc(&O.hdesc, 64);
            h->r[k].cap = HP_HOSTILE_RECV;
            h->r[k].buf = hp_alloc(&O.hdesc, HP_HOSTILE_RECV);
        }
        for (int k = 0; k < HP_H_SENDS; k++) {
            h->s[k].d = hp_alloc(&O.hdesc, 64);
            h->s[k].cap = 64;
            h->s[k].buf = hp_alloc(&O.hdesc, 64);
        }
    }
    /* RemoteAddr: the storage vipl.h asks for, guard bytes after it */
    static hp_reg misc;
    O.raddr_len = VIP_EXT_NET_ADDRESS_SIZE;
    hp_region_carve(&misc, O.raddr_len + 256);
    O.raddr_buf = hp_alloc(&misc, O.raddr_len);
    th_addr la;
    CHECK(VipExtListen(O.nic, mp_mkaddr(&la, O.own_addr, O.addr_len, HP_DISC_LISTEN), &O.listen));
    for (int k = 0; k < HP_PEER_SLOTS; k++) hvi_arm_peer(k, th_now_ms());
}

/* Every 200 us: the listener, the peer requests, the live VIs, the decoy. */
static void hp_hostile_poll(uint64_t now) {
    static uint64_t last_us;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    if (us - last_us < 200) return;
    last_us = us;
    take_request(now, 0);
    static uint64_t last_wait;
    if (now - last_wait >= 20) {  /* VipConnectWait listens only while it runs: 1 ms in 20 */
        take_request(now, 1);
        last_wait = now;
    }
    for (int k = 0; k < HP_MAXH; k++) {
        hp_hvi *h = &O.h[k];
        if (h->state == HV_FREE) {
            if (k < HP_PEER_SLOTS && now >= h->t_next) hvi_arm_peer(k, now);
            if (k == HP_CLIENT_SLOT) hvi_client(now);
        } else if (h->state == HV_PENDING) {
            VIP_RETURN r = th_peer_done_poll(h->vi);
            if (r == VIP_SUCCESS) {
                h->state = HV_LIVE;
                O.h_peer_connected++;
            } else if (r != VIP_NOT_DONE) {
                hvi_teardown(h, now);
            }
        } else if (h->state == HV_LIVE) {
            hvi_live(h, now);
        }
    }
    static int decoy_ended;
    VIP_RETURN r = decoy_ended ? VIP_NOT_DONE : VipConnectPeerDone(O.decoy, NULL);
    if (r != VIP_NOT_DONE) {
        decoy_ended = 1;
        HP_FAIL("the decoy peer request to the good peer's NIC ended with %s (state %s): only that NIC may "
                "answer it", th_rs(r), th_state_name(th_state(O.decoy)));
    }
}

static void hp_hostile_teardown_all(void) {
    uint64_t now = th_now_ms();
    for (int k = 0; k < HP_MAXH; k++)
        if (O.h[k].state == HV_PENDING || O.h[k].state == HV_LIVE) hvi_teardown(&O.h[k], now);
    CHECK(VipExtUnlisten(O.listen));
}

#endif /* SOFTVIA_HP_OWNER_HOSTILE_H */
