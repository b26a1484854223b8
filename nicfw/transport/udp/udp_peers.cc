// udp transport: the peer table and liveness (layout and rules in udp_transport.h).
// A peer is an endpoint and a nonce, learnt from an address the engine resolves or from a
// frame that came from it; the engine holds its index until it releases it, and a
// released one is freed after kLingerNs without a frame for the engine. UDP cannot tell
// that a peer went away: each live peer gets a probe every kProbeGapNs, and the ICMP
// port-unreachable reports the kernel queues (IP_RECVERR) mark it dead after
// kRefusalsForDead of them with nothing heard from it in between.
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "udp_transport.h"

namespace softvia::nicfw {

namespace {
constexpr size_t kMaxPeers = 4096;
constexpr uint64_t kProbeGapNs = 100000000;  // liveness probe to each peer
constexpr uint64_t kLingerNs = 1000000000;   // a released peer sent no frame this long: freed
}  // namespace

int UdpTransport::peer_for(const sockaddr_in& sa, uint64_t host_id, uint32_t nonce) {
    uint64_t key = endpoint_key(sa.sin_addr.s_addr, sa.sin_port);
    auto it = by_endpoint_.find(key);
    if (it != by_endpoint_.end())
        for (int id : it->second)
            if (peers_[id].nonce == nonce) return id;
    if (live_peers() >= kMaxPeers) return -ENOSPC;
    Peer p;
    p.addr.assign(kAddrLen, 0);
    p.addr[0] = kAddrKind;
    p.addr[1] = 1;
    memcpy(p.addr.data() + 2, &sa.sin_port, 2);
    memcpy(p.addr.data() + 4, &sa.sin_addr.s_addr, 4);
    put64(p.addr.data() + kHostIdOffset, host_id);
    put32(p.addr.data() + 16, nonce);
    p.sa.sin_family = AF_INET;
    p.sa.sin_addr = sa.sin_addr;
    p.sa.sin_port = sa.sin_port;
    p.host_id = host_id;
    p.nonce = nonce;
    p.next_probe_ns = now_ns() + kProbeGapNs;
    int id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
        peers_[static_cast<size_t>(id)] = std::move(p);
    } else {
        peers_.push_back(std::move(p));
        id = static_cast<int>(peers_.size() - 1);
    }
    by_endpoint_[key].push_back(id);
    return id;
}

void UdpTransport::release_peer(int peer) {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.released) p.released_ns = now_ns();
    p.released = true;
}

// The index no longer names the peer: out of the endpoint map, frames from it not yet
// handed to the engine dropped (the index may name another peer before they would be).
void UdpTransport::free_peer(int id, std::vector<TransportEvent>& events) {
    Peer& p = peers_[static_cast<size_t>(id)];
    auto it = by_endpoint_.find(endpoint_key(p.sa.sin_addr.s_addr, p.sa.sin_port));
    if (it != by_endpoint_.end()) {
        auto& v = it->second;
        v.erase(std::remove(v.begin(), v.end(), id), v.end());
        if (v.empty()) by_endpoint_.erase(it);
    }
    for (uint32_t k = 0; k < pend_count_; k++) {
        Pending& e = pending_[(pend_head_ + k) % pend_cap()];
        if (e.peer == id) e.peer = -1;
    }
    drop_peer_socket(p);
    forget_send_socket(id);
    if (rx_peer_ == id) hand_over_rx_socket(id);
    p = Peer{};
    p.dead = p.dead_reported = p.freed = true;
    free_ids_.push_back(id);
    events.push_back({PeerEvent::kFreed, id});
}

int UdpTransport::resolve(const uint8_t* addr, size_t len) {
    if (addr == nullptr || len != kAddrLen || addr[0] != kAddrKind || addr[1] != 1) return -EINVAL;
    sockaddr_in sa{};
    memcpy(&sa.sin_port, addr + 2, 2);
    memcpy(&sa.sin_addr.s_addr, addr + 4, 4);
    uint32_t nonce = get32(addr + 16);
    if (sa.sin_port == 0 || sa.sin_addr.s_addr == htonl(INADDR_ANY) || nonce == 0 || get32(addr + 20) != 0)
        return -EINVAL;
    int id = peer_for(sa, get64(addr + kHostIdOffset), nonce);
    if (id < 0) return id;
    if (peers_[id].dead) return -EHOSTUNREACH;
    peers_[id].released = false;
    return id;
}

bool UdpTransport::send_probe(Peer& p) {
    if (tx_free_.empty()) return false;
    int slot = tx_free_.back();
    tx_free_.pop_back();
    queue_datagram(slot, p, -1, kTypeProbe, 0);
    return true;
}

// ICMP errors the kernel queued (IP_RECVERR): port unreachable counts against the
// peers at the destination it names.
void UdpTransport::drain_errors() {
    errors_pending_ = false;
    for (;;) {
        sockaddr_in dst{};
        uint8_t data[64];
        alignas(cmsghdr) uint8_t ctl[256];
        iovec iov{data, sizeof data};
        msghdr m{};
        m.msg_name = &dst;
        m.msg_namelen = sizeof dst;
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        if (recvmsg(fd_, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
            sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(c), sizeof ee);
            if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_errno != ECONNREFUSED) continue;
            stats_.rx_refusals++;
            auto it = by_endpoint_.find(endpoint_key(dst.sin_addr.s_addr, dst.sin_port));
            if (it == by_endpoint_.end()) continue;
            for (int id : it->second)
                if (++peers_[id].refusals >= kRefusalsForDead) peers_[id].dead = true;
        }
    }
}

void UdpTransport::poll_slow(std::vector<TransportEvent>& events) {
    uint64_t now = now_ns();
    bool probe_round = false;
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (p.dead || p.released || now < p.next_probe_ns) continue;  // released: only the linger matters
        send_probe(p);
        p.next_probe_ns = now + kProbeGapNs;
        probe_round = true;
    }
    if (sockets_to_open_ || probe_round) announce_peer_sockets(probe_round);
    submit();
    if (errors_pending_ || probe_round) drain_errors();
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (p.freed) continue;
        if (p.dead && !p.dead_reported) {
            p.dead_reported = true;
            events.push_back({PeerEvent::kDead, static_cast<int>(i)});
        }
        // Released by the engine, and no frame for it since (or dead): the index goes back.
        if (p.released && (p.dead || now - p.released_ns > kLingerNs)) free_peer(static_cast<int>(i), events);
    }
}

}  // namespace softvia::nicfw
