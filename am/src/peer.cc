// peer.cc -- MAP objects (Peer, internal.h): one per remote endpoint, with one registered
// region and three VIs (the short, medium and long channels). Creation and connection
// (peer-to-peer requests), the segment announcement, death (requests that will never be
// answered go back to handler 0), destruction, and one-sided mapping (the listener that
// takes knocks, and the knock). Set-up and failure paths: the messages themselves go
// through channel.cc and dispatch.cc.
#include "internal.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace softvia::am;

namespace softvia::am {

// ---------------------------------------------------------------- peers (MAP objects)
void peer_dead(Peer* p) {
    if (p->state == P_DEAD) return;
    bool was_up = p->state == P_UP;
    p->state = P_DEAD;
    Endpoint* ep = p->ep;
    for (size_t i = 0; i < ep->connecting.size(); i++)
        if (ep->connecting[i] == p) {
            ep->connecting.erase(ep->connecting.begin() + long(i));
            break;
        }
    if (!was_up || p->death_reported) return;
    p->death_reported = true;
    // Requests whose replies will never come go back to handler 0.
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        int lost = c->k - c->credits - int(c->internal_unanswered.size());
        c->credits = c->k;
        c->credits_back = c->requests_posted;
        c->internal_unanswered.clear();
        for (int n = 0; n < lost; n++) call_returned(ep, p, c, EUNREACHABLE, kRequestOp[i], 0);
    }
}

namespace {

// Discriminator of one channel's connection: "AM", channel, role, then the two endpoint
// ids (this side's first), so both sides of every pair compute crossed values.
size_t make_disc(uint8_t* out, int chan, int role, uint64_t first, uint64_t second) {
    out[0] = 'A';
    out[1] = 'M';
    out[2] = static_cast<uint8_t>(chan);
    out[3] = static_cast<uint8_t>(role);
    memcpy(out + 4, &first, 8);
    memcpy(out + 12, &second, 8);
    return 20;
}

union NetAddr {
    VIP_NET_ADDRESS a;
    uint8_t raw[sizeof(VIP_NET_ADDRESS) + 64 + 128];  // largest NIC address and discriminator
};

void fill_addr(NetAddr* n, const uint8_t* nic, uint16_t nic_len, const uint8_t* disc, size_t disc_len) {
    memset(n, 0, sizeof *n);
    n->a.HostAddressLen = nic_len;
    memcpy(n->a.HostAddress, nic, nic_len);
    n->a.DiscriminatorLen = static_cast<VIP_UINT16>(disc_len);
    memcpy(n->a.HostAddress + nic_len, disc, disc_len);
}

}  // namespace

// Disconnects and destroys a peer's VIs and frees its region. A VI whose descriptors do
// not come back in time is left to VipCloseNic, and so is its memory.
void destroy_peer(Peer* p) {
    Endpoint* ep = p->ep;
    bool all_gone = true;
    auto& rp = ep->reposts;  // nothing may point at p once it is gone
    for (size_t i = 0; i < rp.size();)
        if (rp[i].first->peer == p) {
            rp[i] = rp.back();
            rp.pop_back();
        } else {
            i++;
        }
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        if (!c->vi) continue;
        VipDisconnect(c->vi);
        uint64_t end = now_ms() + 2000;
        VIP_RETURN r;
        for (;;) {
            VIP_DESCRIPTOR* d;
            while (VipRecvDone(c->vi, &d) == VIP_SUCCESS) {
            }
            while (ep->steering && VipExtRecvReplyDone(c->vi, &d) == VIP_SUCCESS) {
            }
            while (VipSendDone(c->vi, &d) == VIP_SUCCESS) {
            }
            r = VipDestroyVi(c->vi);
            if (r == VIP_SUCCESS || now_ms() > end) break;
            // A withdrawn connection request leaves the VI idle with its receives
            // posted; a disconnect of an idle VI flushes them.
            VipDisconnect(c->vi);
            VipExtProgress(g.nic);
            sched_yield();
        }
        ep->vi_to_channel.erase(c->vi);
        if (r != VIP_SUCCESS) all_gone = false;
        c->vi = nullptr;
    }
    ep->last_vi = nullptr;
    ep->last_ch = nullptr;
    if (all_gone && p->region) {
        VipDeregisterMem(g.nic, p->region, p->mh);
        free(p->region);
    }
    ep->recv_descs -= size_t(p->ch[0].nrecv + p->ch[1].nrecv + p->ch[2].nrecv);
    delete p;
}

namespace {

int grow_cq(Endpoint* ep, size_t more) {
    size_t need = ep->recv_descs + more + 64;
    if (need <= ep->cq_entries) return AM_OK;
    size_t n = ep->cq_entries * 2;
    while (n < need) n *= 2;
    if (n > 65536) n = 65536;
    if (n < need) return AM_ERR_RESOURCE;
    if (VipResizeCQ(ep->cq, n) != VIP_SUCCESS) return AM_ERR_RESOURCE;
    ep->cq_entries = n;
    return AM_OK;
}

}  // namespace

// Creates the MAP object for a remote endpoint: one registered region with every
// channel's descriptors and buffers, three VIs with their receives posted, and the
// three peer-to-peer connection requests under way (they complete in the background;
// the remote side completes them when it maps this endpoint).
int create_peer(Endpoint* ep, const en_t& name, int role, Peer** out) {
    auto* p = new (std::nothrow) Peer();
    if (!p) return AM_ERR_RESOURCE;
    p->ep = ep;
    p->name = name;
    p->role = role;
    size_t total = 0, nrecv_all = 0;
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        c->peer = p;
        c->idx = i;
        c->k = kCredits[i];
        c->credits = c->k;
        c->nrecv = 2 * c->k + 1;
        c->nslots = 2 * c->k;
        c->sbuf_bytes = kBufBytes[i] + (i == C_LONG ? kLongBounce : 0);
        c->slot_pending.assign(size_t(c->nslots), 0);
        total += size_t(c->nrecv) * (kRecvDescBytes + kBufBytes[i]) +
                 size_t(c->nslots) * (kSendSlotDescBytes + c->sbuf_bytes);
        nrecv_all += size_t(c->nrecv);
    }
    p->region_bytes = (total + 4095) & ~size_t(4095);
    p->region = static_cast<char*>(aligned_alloc(4096, p->region_bytes));
    if (!p->region) {
        delete p;
        return AM_ERR_RESOURCE;
    }
    memset(p->region, 0, p->region_bytes);
    VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_FALSE, VIP_FALSE};
    if (VipRegisterMem(g.nic, p->region, p->region_bytes, &ma, &p->mh) != VIP_SUCCESS) {
        free(p->region);
        delete p;
        return AM_ERR_RESOURCE;
    }
    char* cur = p->region;
    for (int i = 0; i < C_COUNT; i++) {  // descriptors first: they need 64-byte alignment
        Channel* c = &p->ch[i];
        c->rdesc = cur;
        cur += size_t(c->nrecv) * kRecvDescBytes;
        c->sdesc = cur;
        cur += size_t(c->nslots) * kSendSlotDescBytes;
    }
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        c->rbuf = cur;
        cur += size_t(c->nrecv) * kBufBytes[i];
        c->sbuf = cur;
        cur += size_t(c->nslots) * c->sbuf_bytes;
    }
    ep->recv_descs += 0;  // counted below, once the VIs exist
    if (grow_cq(ep, nrecv_all) != AM_OK) {
        VipDeregisterMem(g.nic, p->region, p->mh);
        free(p->region);
        delete p;
        return AM_ERR_RESOURCE;
    }
    ep->recv_descs += nrecv_all;
    int peer_role = role == 1 ? 2 : role == 2 ? 1 : 0;
    int rc = AM_OK;
    for (int i = 0; i < C_COUNT && rc == AM_OK; i++) {
        Channel* c = &p->ch[i];
        VIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
        va.MaxTransferSize = 0;
        va.Ptag = g.ptag;
        va.EnableRdmaWrite = VIP_TRUE;  // long messages land by RDMA write
        va.EnableRdmaRead = VIP_FALSE;
        if (VipCreateVi(g.nic, &va, nullptr, ep->cq, &c->vi) != VIP_SUCCESS) {
            c->vi = nullptr;
            rc = AM_ERR_RESOURCE;
            break;
        }
        ep->vi_to_channel[c->vi] = c;
        if (ep->steering && VipExtEnableSteering(c->vi, ep->cq) != VIP_SUCCESS) rc = AM_ERR_RESOURCE;
        for (int r = 0; r < c->nrecv && rc == AM_OK; r++)
            if (post_recv(c, r) != VIP_SUCCESS) rc = AM_ERR_RESOURCE;
        if (rc != AM_OK) break;
        uint8_t ld[32], rd[32];
        size_t ll = make_disc(ld, i, role, ep->name.ep_id, name.ep_id);
        size_t rl = make_disc(rd, i, peer_role, name.ep_id, ep->name.ep_id);
        NetAddr la, ra;
        fill_addr(&la, ep->name.nic_addr, ep->name.nic_addr_len, ld, ll);
        fill_addr(&ra, name.nic_addr, name.nic_addr_len, rd, rl);
        VIP_RETURN r = VipConnectPeerRequest(c->vi, &la.a, &ra.a, VIP_INFINITE);
        if (r != VIP_SUCCESS) rc = r == VIP_ERROR_RESOURCE ? AM_ERR_NOT_SENT : AM_ERR_RESOURCE;
    }
    if (rc != AM_OK) {
        destroy_peer(p);
        return rc;
    }
    ep->peers.push_back(p);
    ep->connecting.push_back(p);
    *out = p;
    return AM_OK;
}

void announce_segment(Peer* p) {
    Endpoint* ep = p->ep;
    uint64_t addr = reinterpret_cast<uintptr_t>(ep->seg), len = ep->seg_len;
    uint64_t pad = reinterpret_cast<uintptr_t>(g.probe_pad);
    int32_t a[8] = {int32_t(uint32_t(addr)), int32_t(uint32_t(addr >> 32)), int32_t(ep->seg_mh),
                    int32_t(uint32_t(len)),  int32_t(uint32_t(len >> 32)),  int32_t(uint32_t(pad)),
                    int32_t(uint32_t(pad >> 32)), int32_t(g.probe_mh)};
    if (send_internal(p, K_SEGINFO, 8, a) == AM_OK) p->seg_sent = true;
}

// Moves a connecting peer along; true once it is up (or dead).
bool check_connect(Peer* p) {
    if (p->state != P_CONNECTING) return true;
    bool all = true;
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        if (c->connected) continue;
        VIP_RETURN r = VipConnectPeerDone(c->vi, nullptr);
        if (r == VIP_SUCCESS) c->connected = true;
        else if (r == VIP_NOT_DONE) all = false;
        else {
            peer_dead(p);
            return true;
        }
    }
    if (!all) return false;
    p->state = P_UP;
    Endpoint* ep = p->ep;
    for (size_t i = 0; i < ep->connecting.size(); i++)
        if (ep->connecting[i] == p) {
            ep->connecting.erase(ep->connecting.begin() + long(i));
            break;
        }
    announce_segment(p);
    return true;
}

// ---------------------------------------------------------------- one-sided mapping
// A connection forms when both endpoints run the peer-to-peer requests of AM_Map. An
// endpoint B that was mapped by A but never maps A back learns of A by a knock: A sends
// a client/server connect request to the listening discriminator of B's process,
// carrying A's name and B's endpoint id in its own discriminator. B's NIC holds it in a
// standing listener; B's poll takes it, rejects the request (a knock never becomes a
// connection, so no connect can hang half-accepted) and creates an implicit MAP object
// for A (no translation entry), whose peer-to-peer requests meet A's, still pending.
// Replies travel on the request's channel, so B answers A through it.
namespace {

constexpr char kListenDisc[] = "AMVIA-listen";
constexpr size_t kListenDiscLen = sizeof kListenDisc - 1;
constexpr size_t kKnockDiscLen = 2 + 8 + 8 + 1 + sizeof(en_t{}.nic_addr);

bool parse_knock(const VIP_NET_ADDRESS& ra, en_t* from, uint64_t* to) {
    const uint8_t* d = ra.HostAddress + ra.HostAddressLen;
    if (ra.DiscriminatorLen < 19 || d[0] != 'A' || d[1] != 'K') return false;
    unsigned alen = d[18];
    if (alen == 0 || alen > sizeof from->nic_addr || ra.DiscriminatorLen != 19 + alen) return false;
    *from = en_t{};
    from->magic = AMX_EN_MAGIC;
    memcpy(&from->ep_id, d + 2, 8);
    memcpy(to, d + 10, 8);
    from->nic_addr_len = static_cast<uint16_t>(alen);
    memcpy(from->nic_addr, d + 19, alen);
    return from->ep_id != 0;
}

}  // namespace

// Knocks land in a standing listener (VipExtListen) that the NIC keeps on the listening
// discriminator, so a knock is taken whenever this process's NIC runs (inline progress:
// whenever the program calls AM; a firmware thread: always); the polls pick it up. No
// thread of ours: a listener thread on a core the program polls on cost the program most
// of its time (it spun on the NIC lock while the preempted poller held it).
void start_listener() {
    const char* on = getenv("AMVIA_LISTEN");
    if (on && on[0] == '0') return;
    NetAddr la;
    fill_addr(&la, g.na.LocalNicAddress, g.na.NicAddressLen, reinterpret_cast<const uint8_t*>(kListenDisc),
              kListenDiscLen);
    if (VipExtListen(g.nic, &la.a, &g.listen) != VIP_SUCCESS) {
        g.listen = nullptr;
        fprintf(stderr, "amvia: AM_Init: cannot listen for one-sided mappings; others reach an endpoint here "
                        "only once it maps them\n");
    }
}

void stop_listener() {
    if (g.listen) VipExtUnlisten(g.listen);
    g.listen = nullptr;
}

namespace {

// The endpoint of this process with the given id, if any.
Endpoint* local_endpoint(uint64_t ep_id) {
    for (Bundle* b : g.bundles)
        for (Endpoint* ep : b->eps)
            if (ep->name.ep_id == ep_id) return ep;
    return nullptr;
}

// Endpoint ep was knocked at by from: an implicit MAP object for it, unless there is one.
void map_back(Endpoint* ep, const en_t& from) {
    for (Peer* p : ep->peers)
        if (same_name(p->name, from) && p->role != 2 && p->state != P_DEAD) return;
    Peer* p = nullptr;
    if (create_peer(ep, from, 0, &p) == AM_OK) p->implicit = true;
}

}  // namespace

// Takes the knocks the listener holds: each is rejected (a knock never becomes a
// connection) and its endpoint gets an implicit MAP object for the knocker.
void take_knocks() {
    VIP_CONN_HANDLE conn;
    NetAddr ra;
    while (g.listen && VipExtListenDone(g.listen, &ra.a, nullptr, &conn) == VIP_SUCCESS) {
        en_t from;
        uint64_t to = 0;
        bool parsed = parse_knock(ra.a, &from, &to);
        VipConnectReject(conn);
        if (!parsed) continue;
        if (Endpoint* ep = local_endpoint(to)) map_back(ep, from);
    }
}

// Asks p's endpoint to map this one back. Knocks again at once if the knock was not
// taken (the listener held another knock: VIP_NO_MATCH; or the remote program did not
// poll within the knock's 20 ms), after a while if it was (the remote side may have
// dropped it: an endpoint id it does not have).
void knock(Peer* p) {
    Endpoint* ep = p->ep;
    if (p->name.nic_addr_len == ep->name.nic_addr_len &&
        memcmp(p->name.nic_addr, ep->name.nic_addr, ep->name.nic_addr_len) == 0) {
        // Our own NIC: the endpoint is in this process (or nowhere), no need to knock.
        if (Endpoint* there = local_endpoint(p->name.ep_id)) map_back(there, ep->name);
        p->next_knock_ms = now_ms() + 200;
        return;
    }
    if (!ep->knock_vi) {
        VIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
        va.Ptag = g.ptag;
        if (VipCreateVi(g.nic, &va, nullptr, nullptr, &ep->knock_vi) != VIP_SUCCESS) {
            ep->knock_vi = nullptr;
            p->next_knock_ms = now_ms() + 100;
            return;
        }
    }
    uint8_t d[kKnockDiscLen] = {'A', 'K'};
    memcpy(d + 2, &ep->name.ep_id, 8);
    memcpy(d + 10, &p->name.ep_id, 8);
    d[18] = static_cast<uint8_t>(ep->name.nic_addr_len);
    memcpy(d + 19, ep->name.nic_addr, ep->name.nic_addr_len);
    NetAddr la, ra;
    fill_addr(&la, ep->name.nic_addr, ep->name.nic_addr_len, d, 19 + ep->name.nic_addr_len);
    fill_addr(&ra, p->name.nic_addr, p->name.nic_addr_len, reinterpret_cast<const uint8_t*>(kListenDisc),
              kListenDiscLen);
    VIP_RETURN r = VipConnectRequest(ep->knock_vi, &la.a, &ra.a, 20, nullptr);
    p->next_knock_ms = r == VIP_REJECT ? now_ms() + 200 : 0;
}

// ---------------------------------------------------------------- for spmd.cc
bool all_peers_ready(ep_t ep) {
    for (size_t i = 0; i < ep->peers.size(); i++) {  // by index: see AM_SetSeg
        Peer* p = ep->peers[i];
        if (p->state == P_CONNECTING) check_connect(p);
        if (p->state != P_UP || !p->rseg_known) return false;
    }
    return true;
}
bool any_peer_dead(ep_t ep) {
    for (Peer* p : ep->peers)
        if (p->state == P_DEAD) return true;
    return false;
}
bool peer_dead_at(ep_t ep, int index) {
    if (index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used) return true;
    return ep->trans[size_t(index)].peer->state == P_DEAD;
}

}  // namespace softvia::am
