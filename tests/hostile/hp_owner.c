/*
 * hp_owner -- rank 0 of the hostile-peer test: the NIC under attack (docs/hostile-peer.md).
 *
 * Runs a checked stream with the good peer (rank 1) over three VIs (unreliable, reliable
 * delivery, reliable reception): every message's length, sequence number, pattern and
 * checksum, every RDMA write the good peer makes into a guarded region, and every RDMA
 * read it makes of the good peer's memory are checked byte for byte. At the same time it
 * offers the hostile peer (rank 2) targets (hp_owner_hostile.h): a standing listener
 * whose requests it accepts, VIs waiting in VipConnectPeerRequest for it, connect requests
 * to it, regions open to RDMA under their own protection tag, and a decoy peer request to
 * the good peer's NIC that only the good peer could complete. Everything outside the
 * buffers the NIC may write is guard bytes (hp_arena.h).
 *
 * At the end: the good VIs are still CONNECTED, had no error (and on a lossless wire no
 * drop), and carried every message and write the good peer reports having sent; the
 * regions the hostile peer could not write are as they were; no guard byte changed;
 * every hostile VI that broke gave back all its descriptors on VipDisconnect and could
 * be destroyed. The exit code is the verdict.
 *
 *   softvia-run -n 3 hp_run.sh BINDIR --progress inline|thread [--seconds S] [--seed N]
 */
#include "../multiproc/mp_common.h"
#include "hp_arena.h"
#include "hp_owner.h"
#include "hp_owner_hostile.h"
#include "hp_owner_stream.h"

static void usage_args(int argc, char **argv, const char **progress, unsigned *seconds) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--progress") && i + 1 < argc) *progress = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) *seconds = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") || !strcmp(argv[i], "--attacks")) i++; /* the hostile peer's */
        else FATAL("unknown argument '%s'", argv[i]);
    }
}

/* Asynchronous errors: expected on the hostile VIs, a failure on the good ones and the
 * decoy (reported by final_checks: in thread mode this runs on the firmware thread). */
static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    int ours = ed->ViHandle && ed->ViHandle == O.decoy;
    for (int v = 0; v < HP_NVI; v++) ours |= ed->ViHandle && ed->ViHandle == O.g[v].vi;
    if (ours && __atomic_fetch_add(&O.good_errors, 1, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&O.good_error_code, (int)ed->ErrorCode, __ATOMIC_RELAXED);
    if (!ours) __atomic_fetch_add(&O.h_errors, 1, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------- set-up */
static void setup_memory(void) {
    hp_arena_init(4u << 20);
    size_t gdesc = 3 * HP_GOOD_RECVS * (64 + HP_BUF_GUARD + HP_MAXMSG + sizeof(hp_msg_hdr) + 64 + HP_BUF_GUARD) +
                   3 * HP_SENDQ * (64 + HP_BUF_GUARD + HP_READ_MAX + 64 + HP_BUF_GUARD) + 4096;
    hp_region_carve(&O.gdesc, gdesc);
    hp_region_carve(&O.gw, 2 * HP_GW_SLOTS * HP_GW_SLOT);
    hp_region_carve(&O.gr, HP_GR_BYTES);
    size_t hdesc = HP_MAXH * (HP_H_RECVS + HP_H_SENDS) * (64 + HP_BUF_GUARD + HP_HOSTILE_RECV + HP_BUF_GUARD) + 4096;
    hp_region_carve(&O.hdesc, hdesc);
    hp_region_carve(&O.hw, HP_HW_BYTES);
    hp_region_carve(&O.hr, HP_HR_BYTES);
    /* gw, hw: zero (the shadow of gw follows every checked write); gr, hr: patterns */
    memset(O.gw.p, 0, O.gw.len);
    memset(O.hw.p, 0, O.hw.len);
    O.gr_seed = hp_mix(0x47520000u, (uint32_t)getpid());
    O.hr_seed = hp_mix(0x48520000u, (uint32_t)getpid());
    hp_fill(O.gr.p, O.gr.len, O.gr_seed, 0);
    hp_fill(O.hr.p, O.hr.len, O.hr_seed, 0);
    O.gw_shadow = calloc(1, O.gw.len);
    if (!O.gw_shadow) FATAL("out of memory");
    /* The descriptor regions allow no RDMA; the hostile peer's regions have a tag of their own. */
    hp_region_register(O.nic, &O.gdesc, O.ptag_g, 0, 0);
    hp_region_register(O.nic, &O.gw, O.ptag_g, 1, 0);
    hp_region_register(O.nic, &O.gr, O.ptag_g, 0, 1);
    hp_region_register(O.nic, &O.hdesc, O.ptag_h, 0, 0);
    hp_region_register(O.nic, &O.hw, O.ptag_h, 1, 0);
    hp_region_register(O.nic, &O.hr, O.ptag_h, 0, 1);
}

static void setup_good(const mp_addrs *ad) {
    static const VIP_RELIABILITY_LEVEL rel[HP_NVI] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                                      VIP_SERVICE_RELIABLE_RECEPTION};
    for (int v = 0; v < HP_NVI; v++) {
        hp_gvi *g = &O.g[v];
        VIP_VI_ATTRIBUTES va;
        memset(&va, 0, sizeof va);
        va.ReliabilityLevel = rel[v];
        va.Ptag = O.ptag_g;
        va.EnableRdmaWrite = VIP_TRUE;
        va.EnableRdmaRead = v != HP_VI_U;
        CHECK(VipCreateVi(O.nic, &va, NULL, NULL, &g->vi));
        for (int k = 0; k < (int)HP_GOOD_RECVS; k++) {
            g->r[k].d = hp_alloc(&O.gdesc, 64);
            g->r[k].cap = HP_MAXMSG + sizeof(hp_msg_hdr);
            g->r[k].buf = hp_alloc(&O.gdesc, g->r[k].cap);
            post_good_recv(g, k);
        }
        for (int k = 0; k < (int)HP_SENDQ; k++) {
            g->s[k].d = hp_alloc(&O.gdesc, 64);
            g->s[k].cap = HP_READ_MAX;
            g->s[k].buf = hp_alloc(&O.gdesc, HP_READ_MAX);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "%s%d", HP_DISC_GOOD, v);
        mp_peer_request(g->vi, ad, 1, tag);
    }
    for (int v = 0; v < HP_NVI; v++) mp_peer_finish(O.g[v].vi, 1);
}

/* The decoy: a peer request to the good peer's NIC that the good peer never answers.
 * Only the good peer's NIC can complete it, whatever the hostile peer sends. */
static void setup_decoy(const mp_addrs *ad) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    va.Ptag = O.ptag_g;
    va.EnableRdmaWrite = VIP_TRUE;
    va.EnableRdmaRead = VIP_TRUE;
    CHECK(VipCreateVi(O.nic, &va, NULL, NULL, &O.decoy));
    th_addr l, r;
    CHECK(VipConnectPeerRequest(O.decoy, mp_mkaddr(&l, ad->addr[0], ad->alen, HP_DISC_DECOY_O),
                                mp_mkaddr(&r, ad->addr[1], ad->alen, HP_DISC_DECOY_G), VIP_INFINITE));
}

static void publish(void) {
    hp_owner_info info;
    memset(&info, 0, sizeof info);
    for (int v = 0; v < HP_NVI; v++) CHECK(VipExtQueryViId(O.g[v].vi, &info.good_vi[v]));
    CHECK(VipExtQueryViId(O.decoy, &info.decoy_vi));
    info.thread_mode = O.thread_mode;
    info.gw = hp_pub(&O.gw);
    info.gr = hp_pub(&O.gr);
    info.gdesc = hp_pub(&O.gdesc);
    info.hw = hp_pub(&O.hw);
    info.hr = hp_pub(&O.hr);
    info.hdesc = hp_pub(&O.hdesc);
    info.guard_lo = (uint64_t)(uintptr_t)hp_A;
    info.guard_hi = (uint64_t)(uintptr_t)(hp_A + hp_A_len);
    info.gr_seed = O.gr_seed;
    info.hr_seed = O.hr_seed;
    if (sv_boot_put(HP_KEY_OWNER, &info, sizeof info) != 0) FATAL("publishing the owner's layout");
}

/* ---------------------------------------------------------------- final checks */
static void final_checks(void) {
    th_phase("final checks");
    for (int v = 0; v < HP_NVI; v++) {
        hp_gvi *g = &O.g[v];
        VIP_VI_STATE st = th_state(g->vi);
        EXPECT(st == VIP_STATE_CONNECTED, "good VI %d is %s at the end, not CONNECTED", v, th_state_name(st));
        /* frames that are not the good peer's never reach a good VI's receive path; drops
         * there are the wire's (a repeat after a retransmission) */
        VIP_EXT_COUNTERS vc;
        CHECK(VipExtQueryViCounters(g->vi, &vc));
        EXPECT(vc.Errors == 0 && (vc.Drops == 0 || th_wire_lossy()), "good VI %d: %llu errors, %llu drops", v,
               (unsigned long long)vc.Errors, (unsigned long long)vc.Drops);
    }
    for (int v = HP_VI_RD; v <= HP_VI_RR; v++) {
        hp_gvi *g = &O.g[v];
        EXPECT(g->ended, "good VI %d: its end message never came", v);
        EXPECT(g->msgs == g->end_msgs, "good VI %d: %u messages received, the good peer sent %u", v, g->msgs,
               g->end_msgs);
        EXPECT(g->writes == g->end_writes, "good VI %d: %u RDMA writes received, the good peer made %u", v,
               g->writes, g->end_writes);
    }
    hp_gvi *u = &O.g[HP_VI_U];
    if (th_wire_lossy()) {
        EXPECT(u->msgs > 0 && u->msgs <= O.u_sent, "unreliable VI: %u messages arrived of %u sent", u->msgs, O.u_sent);
    } else {
        /* shm is lossless and the good peer never overruns the posted receives */
        EXPECT(u->msgs == O.u_sent, "unreliable VI on a lossless wire: %u messages arrived of %u sent", u->msgs,
               O.u_sent);
    }
    EXPECT(O.good_errors == 0, "%u asynchronous errors on the good VIs or the decoy (the first: VIP_ERROR_%s)",
           O.good_errors, mp_error_name((VIP_ERROR_CODE)O.good_error_code));
    EXPECT(O.msgs_after > 0, "no good message arrived after the hostile peer stopped");
    EXPECT(O.reads_ok > 0, "no RDMA read of the good peer's memory completed");
    long at = hp_diff(O.gr.p, O.gr.len, O.gr_seed, 0);
    EXPECT(at < 0, "region GR (read by the good peer, no RDMA write) changed at +%ld", at);
    at = hp_diff(O.hr.p, O.hr.len, O.hr_seed, 0);
    EXPECT(at < 0, "region HR (read by the hostile peer, no RDMA write) changed at +%ld", at);
    for (size_t i = 0; i < O.gw.len; i++)
        if (O.gw.p[i] != O.gw_shadow[i]) {
            TH_FAILMSG("region GW (RDMA writes of the good peer only) differs from the writes received at +%zu "
                       "(slot %zu): 0x%02x, want 0x%02x", i, i / HP_GW_SLOT, O.gw.p[i], O.gw_shadow[i]);
            th_failures++;
            break;
        }
    hp_guards_check("end");
    VipConnectPeerDone(O.decoy, NULL);
    EXPECT(th_state(O.decoy) == VIP_STATE_CONNECT_PENDING, "the decoy peer request is %s, not CONNECT_PENDING",
           th_state_name(th_state(O.decoy)));
    VIP_EXT_COUNTERS c;
    CHECK(VipExtQueryNicCounters(O.nic, &c));
    printf("%s: good: U %u msgs, RD %u msgs + %u writes, RR %u msgs + %u writes, %u reads checked; "
           "%u after the attack\n", th_prog, O.g[0].msgs, O.g[1].msgs, O.g[1].writes, O.g[2].msgs,
           O.g[2].writes, O.reads_ok, O.msgs_after);
    printf("%s: hostile: %u connections accepted, %u by peer request, %u as a client, %u refused, %u torn down, "
           "%u asynchronous errors; NIC rx %llu frames, %llu dropped\n", th_prog, O.h_accepted, O.h_peer_connected, O.h_client_connected, O.h_refused,
           O.h_torn, O.h_errors, (unsigned long long)c.RxFrames, (unsigned long long)c.Drops);
}

int main(int argc, char **argv) {
    const char *progress = "inline";
    unsigned seconds = 8;
    usage_args(argc, argv, &progress, &seconds);
    mp_init("hp_owner", 3, seconds + 100);
    th_phase("set-up");
    VIP_EXT_NIC_OPTIONS o = mp_progress_opt(progress);
    O.thread_mode = o.Progress == VIP_EXT_PROGRESS_THREAD;
    CHECK(VipExtOpenNic(NULL, &o, &O.nic));
    CHECK(VipQueryNic(O.nic, &O.na));
    CHECK(VipErrorCallback(O.nic, NULL, on_error));
    CHECK(VipCreatePtag(O.nic, &O.ptag_g));
    CHECK(VipCreatePtag(O.nic, &O.ptag_h));
    setup_memory();
    mp_addrs ad;
    th_env e = {.nic = O.nic, .na = O.na};
    mp_exchange(&e, &ad);
    memcpy(O.hostile_addr, ad.addr[2], sizeof O.hostile_addr);
    O.addr_len = ad.alen;
    memcpy(O.own_addr, ad.addr[0], sizeof O.own_addr);
    setup_good(&ad);
    setup_decoy(&ad);
    hp_hostile_setup();
    publish();
    if (sv_boot_get(HP_KEY_GOOD, &O.good, sizeof O.good, NULL, HP_BOOT_MS) != 0) FATAL("no layout from the good peer");
    if (sv_boot_barrier(HP_BOOT_MS) != 0) FATAL("start barrier");

    th_phase("stream under attack");
    hp_run(seconds);
    final_checks();
    th_phase("hostile VI teardown");
    hp_hostile_teardown_all();
    int verdict = th_failures;
    sv_boot_put(HP_KEY_VERDICT, &verdict, sizeof verdict);
    th_phase("waiting for the good peer");
    int good_fails = -1;
    uint64_t until = th_now_ms() + 30000;
    while (sv_boot_get(HP_KEY_GOOD_DONE, &good_fails, sizeof good_fails, NULL, 0) != 0 && th_now_ms() < until)
        VipExtProgress(O.nic), sched_yield();
    th_phase("close");
    for (int v = 0; v < HP_NVI; v++) VipDisconnect(O.g[v].vi);
    VipDisconnect(O.decoy);
    CHECK(VipCloseNic(O.nic));
    return th_result();
}
