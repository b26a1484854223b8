// backend_via_setup.cc -- the VIA back ends' start and end: settings, the NIC, each
// peer's registered region (descriptors and buffers of its two channels), the VIs and
// their connections, the end of the job, and what a broken connection says.
#include <softvia_boot.h>

#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "backend_via.h"

namespace splitc {
namespace via {
namespace {

constexpr uint64_t kDefaultPeerTimeoutMs = 5000;
constexpr uint64_t kRtoMinNs = 250000;    // 250 us
constexpr size_t kDefaultRdmaMin = 4096;  // docs/splitc.md, "Zero copy": where and why
constexpr int kRdmaOps = 32;              // RDMA descriptors per peer (via-rel)
constexpr int kConnectMs = 60000;
constexpr int kBootMs = 60000;

// A number setting: unset or empty takes def; anything else must be an integer in
// [lo, hi] (or one of the words given), else the job stops naming the setting.
uint64_t setting(const char* name, uint64_t def, uint64_t lo, uint64_t hi, const char* accepted) {
    const char* s = getenv(name);
    if (!s || !*s) return def;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || *s < '0' || *s > '9' || v < lo || v > hi)
        fatal("%s='%s': accepted values are %s", name, s, accepted);
    return v;
}

void read_settings() {
    V.peer_timeout_ns =
        setting("SPLITC_PEER_TIMEOUT_MS", kDefaultPeerTimeoutMs, 1, 3600000, "1 to 3600000 (milliseconds)") * 1000000ull;
    V.rto_min_ns = kRtoMinNs;
    // 0: never (every bulk transfer in medium messages)
    V.rdma_min = size_t(setting("SPLITC_RDMA_MIN", kDefaultRdmaMin, 0, 1ull << 30, "0 (no RDMA) to 1073741824 (bytes)"));
    if (V.rdma_min && V.rdma_min <= kMaxShortValue) V.rdma_min = kMaxShortValue + 1;
    V.store_batch = setting("SPLITC_STORE_BATCH", 1, 0, 1, "0 (a message per store) and 1 (stores gathered)") == 1;
    V.gather = setting("SPLITC_GATHER", 1, 0, 1, "0 (a message per put and get) and 1 (puts and gets gathered)") == 1;
}

void error_callback(VIP_PVOID, VIP_ERROR_DESCRIPTOR*) {
    // The descriptors of a broken connection are flushed too; the poll that takes them
    // says which process is gone. Nothing to do here but let the NIC go on.
}

size_t slots_of(int k) { return size_t(2 * k + (V.reliable ? 0 : kAckSlots)); }
int recvs_of(int k) { return V.reliable ? 2 * k + 1 : 3 * k + 2; }

// One region per peer: every descriptor first (64-byte aligned), then the buffers.
Peer* make_peer(int proc) {
    auto* p = new Peer();
    p->proc = proc;
    size_t total = V.reliable ? kRdmaOps * kDescBytes : 0;
    for (int i = 0; i < C_COUNT; i++) {
        const int k = kCredits[i];
        total += (size_t(recvs_of(k)) + slots_of(k)) * (kDescBytes + kBufBytes[i]);
    }
    p->region_bytes = (total + 4095) & ~size_t(4095);
    p->region = static_cast<char*>(aligned_alloc(4096, p->region_bytes));
    if (!p->region) fatal("via back end: out of memory (%zu bytes for process %d's buffers)", p->region_bytes, proc);
    memset(p->region, 0, p->region_bytes);
    VIP_MEM_ATTRIBUTES ma{V.ptag, VIP_FALSE, VIP_FALSE};
    VIP_RETURN r = VipRegisterMem(V.nic, p->region, p->region_bytes, &ma, &p->mh);
    if (r != VIP_SUCCESS) fatal("via back end: VipRegisterMem of %zu bytes: %s", p->region_bytes, VipExtReturnString(r));
    char* cur = p->region;
    for (int i = 0; i < C_COUNT; i++) {
        Chan* c = &p->ch[i];
        c->peer = p;
        c->idx = i;
        c->k = kCredits[i];
        c->buf_bytes = kBufBytes[i];
        c->credits = c->k;
        c->rto_ns = V.rto_min_ns;
        c->nrecv = recvs_of(c->k);
        c->rdesc = cur;
        cur += size_t(c->nrecv) * kDescBytes;
        c->sdesc_lo = cur;
        cur += slots_of(c->k) * kDescBytes;
        c->sdesc_hi = cur;
    }
    if (V.reliable) {
        p->rdesc_lo = cur;
        p->rdma.resize(kRdmaOps);
        for (int j = 0; j < kRdmaOps; j++) p->rdma[size_t(j)].d = reinterpret_cast<VIP_DESCRIPTOR*>(cur + j * kDescBytes);
        cur += kRdmaOps * kDescBytes;
    }
    for (int i = 0; i < C_COUNT; i++) {
        Chan* c = &p->ch[i];
        c->rbuf = cur;
        cur += size_t(c->nrecv) * c->buf_bytes;
        const size_t ns = slots_of(c->k);
        c->slots.resize(ns);
        for (size_t j = 0; j < ns; j++) {
            Slot& s = c->slots[j];
            s.d = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc_lo + j * kDescBytes);
            s.buf = cur + j * c->buf_bytes;
            s.d->CS.SegCount = 1;
            s.d->DS[0].Local.Data.Address = s.buf;
            s.d->DS[0].Local.Handle = p->mh;
        }
        cur += ns * c->buf_bytes;
        c->sq.assign(ns + (i == C_MED ? p->rdma.size() : 0) + 1, nullptr);
        c->pend = new Pend[kPendCap[i]];
        c->req.base = 0;
        c->rep.base = c->k;
        c->req.held.assign(size_t(c->k), -1);
        c->rep.held.assign(size_t(c->k), -1);
    }
    return p;
}

union NetAddr {
    VIP_NET_ADDRESS a;
    uint8_t raw[VIP_EXT_NET_ADDRESS_SIZE];
};

// Discriminator of a channel between two processes: both sides name the same pair,
// each with its own rank first.
void fill_addr(NetAddr* n, const uint8_t* nic, uint16_t nic_len, int chan, int from, int to) {
    memset(n, 0, sizeof *n);
    n->a.HostAddressLen = nic_len;
    memcpy(n->a.HostAddress, nic, nic_len);
    uint8_t* d = n->a.HostAddress + nic_len;
    d[0] = 'S';
    d[1] = 'C';
    d[2] = V.reliable ? 'R' : 'U';
    d[3] = static_cast<uint8_t>(chan);
    memcpy(d + 4, &from, 4);
    memcpy(d + 8, &to, 4);
    n->a.DiscriminatorLen = 12;
}

struct Card {  // what every process tells the others at start-up
    uint8_t nic[VIP_EXT_MAX_HOST_ADDRESS_LEN];
    uint16_t nic_len;
    uint16_t pad16;
    Remote r;
};

}  // namespace

VIP_RETURN post_recv(Chan* c, int i) {
    VIP_DESCRIPTOR* d = recv_desc(c, i);
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = recv_buf(c, i);
    d->DS[0].Local.Handle = c->peer->mh;
    d->DS[0].Local.Length = static_cast<VIP_UINT32>(c->buf_bytes);
    return VipPostRecv(c->vi, d, c->peer->mh);
}

bool setup() {
    read_settings();
    V.peers.assign(size_t(PROCS), nullptr);
    if (PROCS == 1) return true;  // a lone process uses local memory only
    VIP_RETURN r = VipOpenNic(nullptr, &V.nic);
    if (r != VIP_SUCCESS) {
        // VIP_INVALID_PARAMETER: a SOFTVIA_* setting is wrong, and vipl said which.
        fprintf(stderr, "splitc: %s back end: cannot open the NIC: VipOpenNic: %s\n", V.reliable ? "via-rel" : "via-unrel",
                VipExtReturnString(r));
        return false;
    }
    if ((r = VipQueryNic(V.nic, &V.na)) != VIP_SUCCESS || (r = VipCreatePtag(V.nic, &V.ptag)) != VIP_SUCCESS) {
        fprintf(stderr, "splitc: via back end: NIC set-up: %s\n", VipExtReturnString(r));
        return false;
    }
    if (V.na.MaxTransferSize < kBufBytes[C_MED] || V.na.NicAddressLen > VIP_EXT_MAX_HOST_ADDRESS_LEN) {
        fprintf(stderr, "splitc: via back end: the NIC cannot carry a medium message\n");
        return false;
    }
    VipErrorCallback(V.nic, nullptr, error_callback);
    Card mine{};
    memcpy(mine.nic, V.na.LocalNicAddress, V.na.NicAddressLen);
    mine.nic_len = V.na.NicAddressLen;
    if (V.reliable && !rdma_setup()) V.rdma_min = 0;
    mine.r = Remote{V.data_mh, V.heap_mh, V.pad_mh, 0, reinterpret_cast<uint64_t>(V.pad)};

    size_t recvs = 0;
    for (int q = 0; q < PROCS; q++)
        if (q != MYPROC) recvs += size_t(recvs_of(kCredits[0]) + recvs_of(kCredits[1]));
    if ((r = VipCreateCQ(V.nic, recvs + 64, &V.cq)) != VIP_SUCCESS) {
        fprintf(stderr, "splitc: via back end: VipCreateCQ(%zu): %s\n", recvs + 64, VipExtReturnString(r));
        return false;
    }
    for (int q = 0; q < PROCS; q++) {
        if (q == MYPROC) continue;
        Peer* p = V.peers[size_t(q)] = make_peer(q);
        for (Chan& c : p->ch) {
            VIP_VI_ATTRIBUTES va{};
            va.ReliabilityLevel = V.reliable ? VIP_SERVICE_RELIABLE_DELIVERY : VIP_SERVICE_UNRELIABLE;
            va.Ptag = V.ptag;
            va.EnableRdmaWrite = V.reliable ? VIP_TRUE : VIP_FALSE;
            va.EnableRdmaRead = V.reliable ? VIP_TRUE : VIP_FALSE;
            if ((r = VipCreateVi(V.nic, &va, nullptr, V.cq, &c.vi)) != VIP_SUCCESS) {
                fprintf(stderr, "splitc: via back end: VipCreateVi: %s\n", VipExtReturnString(r));
                return false;
            }
            V.vis.emplace_back(c.vi, &c);
            for (int i = 0; i < c.nrecv; i++)
                if ((r = post_recv(&c, i)) != VIP_SUCCESS) {
                    fprintf(stderr, "splitc: via back end: VipPostRecv: %s\n", VipExtReturnString(r));
                    return false;
                }
        }
    }
    // Every process's NIC address and RDMA handles, through the launcher.
    std::vector<Card> all(size_t(PROCS));
    int rc = sv_boot_allgather(&mine, sizeof mine, all.data(), kBootMs);
    if (rc != 0) {
        fprintf(stderr, "splitc: via back end: exchanging NIC addresses through the launcher: %s\n", strerror(-rc));
        return false;
    }
    V.remote.resize(size_t(PROCS));
    for (int q = 0; q < PROCS; q++) V.remote[size_t(q)] = all[size_t(q)].r;
    for (int q = 0; q < PROCS; q++) {
        if (q == MYPROC) continue;
        for (Chan& c : V.peers[size_t(q)]->ch) {
            NetAddr la, ra;
            fill_addr(&la, mine.nic, mine.nic_len, c.idx, MYPROC, q);
            fill_addr(&ra, all[size_t(q)].nic, all[size_t(q)].nic_len, c.idx, q, MYPROC);
            if ((r = VipConnectPeerRequest(c.vi, &la.a, &ra.a, VIP_INFINITE)) != VIP_SUCCESS) {
                fprintf(stderr, "splitc: via back end: connecting to process %d: %s\n", q, VipExtReturnString(r));
                return false;
            }
        }
    }
    const uint64_t end = now_ns() + uint64_t(kConnectMs) * 1000000ull;
    for (int q = 0; q < PROCS; q++) {
        if (q == MYPROC) continue;
        for (Chan& c : V.peers[size_t(q)]->ch) {
            for (unsigned turn = 0;; turn++) {
                r = VipConnectPeerDone(c.vi, nullptr);
                if (r == VIP_SUCCESS) break;
                if (r != VIP_NOT_DONE) {
                    fprintf(stderr, "splitc: via back end: connection to process %d: %s\n", q, VipExtReturnString(r));
                    return false;
                }
                if ((turn & 63) == 63) {
                    if (now_ns() > end) {
                        fprintf(stderr, "splitc: via back end: process %d did not connect within %d s\n", q,
                                kConnectMs / 1000);
                        return false;
                    }
                    sched_yield();
                }
            }
        }
    }
    return true;
}

// An error completion on a send: the connection broke, or (via-rel) an RDMA transfer was
// refused by the target NIC.
void check_send_status(Chan* c, VIP_DESCRIPTOR* d) {
    const uint32_t s = d->CS.Status;
    if (V.ending || c->peer->gone) {
        c->peer->gone = true;
        return;
    }
    char what[128];
    if (s & VIP_STATUS_RDMA_PROT_ERROR)
        snprintf(what, sizeof what, "its NIC refused an RDMA transfer (status %#x)", s);
    else
        snprintf(what, sizeof what, "the connection broke (send status %#x)", s);
    peer_failed(c->peer, what);
}

void peer_failed(Peer* p, const char* what) {
    if (getenv("SPLITC_VIA_STATS")) print_stats();
    fatal("%s back end: lost process %d: %s. It exited, crashed or stopped answering; the job stops",
          V.reliable ? "via-rel" : "via-unrel", p->proc, what);
}

// The end of the job (after the last barrier): every process keeps its NIC running
// until every process has nothing of its own outstanding (via-rel: every send complete,
// i.e. acknowledged on a lossy wire; via-unrel: every numbered message acknowledged), so
// that nobody waits on a NIC that has stopped. Each says so through the launcher.
void teardown_wait() {
    if (PROCS == 1) return;
    V.ending = true;
    bool said = false;
    int seen = 0;
    uint64_t next_look = 0;
    const uint64_t give_up = now_ns() + 60000000000ull;
    std::vector<bool> done(size_t(PROCS), false);
    done[size_t(MYPROC)] = true;
    char key[64];
    while (!said || seen < PROCS - 1) {
        poll_once();
        if (!said) {
            bool mine = V.reliable || unrel_all_acked();
            for (Peer* p : V.peers)
                if (p)
                    for (Chan& c : p->ch) {
                        reap(&c, false);
                        mine = mine && (c.sq_n == 0 || p->gone);
                    }
            if (mine) {
                snprintf(key, sizeof key, "splitc-via-drained.%d", MYPROC);
                sv_boot_put(key, "1", 1);
                said = true;
            }
        }
        const uint64_t now = now_ns();
        if (now < next_look) continue;
        next_look = now + 1000000;  // the launcher's directory: once a millisecond
        if (now > give_up) {
            fprintf(stderr, "splitc: process %d: via back end: the others did not finish within 60 s\n", MYPROC);
            break;
        }
        for (int q = 0; q < PROCS; q++) {
            if (done[size_t(q)]) continue;
            snprintf(key, sizeof key, "splitc-via-drained.%d", q);
            char v;
            size_t vl;
            if (V.peers[size_t(q)]->gone || sv_boot_get(key, &v, 1, &vl, 0) == 0) {
                done[size_t(q)] = true;
                seen++;
            }
        }
    }
    if (getenv("SPLITC_VIA_STATS")) print_stats();
    // Nothing is outstanding anywhere: the NIC goes (its VIs, queue and registrations
    // with it), then our memory.
    g_global_range_hook = nullptr;
    VipCloseNic(V.nic);
    V.nic = nullptr;
    for (Peer*& p : V.peers) {
        if (!p) continue;
        free(p->region);
        for (Chan& c : p->ch) delete[] c.pend;
        delete p;
        p = nullptr;
    }
    free(V.pad);
    V.pad = nullptr;
}

// SPLITC_VIA_STATS: what the back end did, and the NIC's drops (messages that found no
// receive posted: none on a loss-free run, or the credits are wrong).
void print_stats() {
    const auto& k = V.ctr;
    VIP_EXT_COUNTERS nc{};
    VipExtQueryNicCounters(V.nic, &nc);
    fprintf(stderr,
            "splitc: process %d: %s: sent %llu received %llu retransmits %llu duplicates %llu held %llu nacks "
            "%llu acks %llu credit-msgs %llu rdma %llu probes %llu no-reply-slot %llu gather-msgs %llu gathered %llu "
            "nic-drops %llu\n",
            MYPROC, V.reliable ? "via-rel" : "via-unrel", (unsigned long long)k.sent, (unsigned long long)k.received,
            (unsigned long long)k.retransmits, (unsigned long long)k.duplicates, (unsigned long long)k.held,
            (unsigned long long)k.nacks, (unsigned long long)k.acks_sent, (unsigned long long)k.credit_msgs,
            (unsigned long long)k.rdma_ops, (unsigned long long)k.probes, (unsigned long long)k.no_reply_slot,
            (unsigned long long)k.gather_msgs, (unsigned long long)k.gathered, (unsigned long long)nc.Drops);
}

}  // namespace via
}  // namespace splitc
