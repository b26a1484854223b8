// local_shortcut.cc -- the same-host shortcut (see local_shortcut.h).
#include "local_shortcut.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

LocalShortcut::LocalShortcut(std::unique_ptr<Transport> wire, std::unique_ptr<Transport> shm, uint64_t host)
    : host_(host) {
    child_[kWire] = std::move(wire);
    child_[kShm] = std::move(shm);
    size_t wlen, slen;
    const uint8_t* w = child_[kWire]->local_addr(&wlen);
    const uint8_t* s = child_[kShm]->local_addr(&slen);
    addr_.assign(kHdrLen + wlen + slen, 0);
    addr_[0] = kAddrKind;
    addr_[1] = static_cast<uint8_t>(wlen);
    addr_[2] = static_cast<uint8_t>(slen);
    memcpy(addr_.data() + 4, &host_, 8);
    memcpy(addr_.data() + kHdrLen, w, wlen);
    memcpy(addr_.data() + kHdrLen + wlen, s, slen);
    name_ = std::string(child_[kWire]->name()) + "+shm";
    max_frame_ = std::min(child_[kWire]->max_frame(), child_[kShm]->max_frame());
}

std::vector<uint8_t> LocalShortcut::wrap(int via, const std::vector<uint8_t>& a) const {
    std::vector<uint8_t> out(kHdrLen + a.size(), 0);
    out[0] = kAddrKind;
    out[via == kWire ? 1 : 2] = static_cast<uint8_t>(a.size());
    // The host of a peer we only heard from is unknown; 0 never matches ours.
    if (!a.empty()) memcpy(out.data() + kHdrLen, a.data(), a.size());
    return out;
}

NICFW_HOT int LocalShortcut::adopt(int via, int idx) {
    auto& map = to_ours_[via];
    if (static_cast<size_t>(idx) >= map.size()) map.resize(idx + 1, -1);
    if (map[idx] < 0) {
        if (via == kShm && wire_only_) end_wire_only();
        Peer p{via, idx, wrap(via, child_[via]->peer_addr(idx))};
        if (wire_only_) {  // the wire's own index (a hole below it stays unused)
            if (static_cast<size_t>(idx) >= peers_.size()) peers_.resize(idx + 1, Peer{-1, -1, {}});
            map[idx] = idx;
            peers_[idx] = std::move(p);
            if (idx < 64) wire_known_ |= uint64_t{1} << idx;
        } else if (!free_ids_.empty()) {
            map[idx] = free_ids_.back();
            free_ids_.pop_back();
            peers_[map[idx]] = std::move(p);
        } else {
            map[idx] = static_cast<int>(peers_.size());
            peers_.push_back(std::move(p));
        }
    }
    return map[idx];
}

// The first shm peer: from now on indices are ours (the wire peers' stay as they are),
// and the freed and unused ones below the table's end can be handed out.
void LocalShortcut::end_wire_only() {
    wire_only_ = false;
    for (size_t i = 0; i < peers_.size(); i++)
        if (peers_[i].via < 0) free_ids_.push_back(static_cast<int>(i));
}

int LocalShortcut::resolve(const uint8_t* addr, size_t len) {
    if (addr == nullptr || len == 0) return -EINVAL;
    int via;
    const uint8_t* part;
    size_t plen;
    if (addr[0] == kAddrKind) {
        if (len < kHdrLen || len != kHdrLen + addr[1] + addr[2] || addr[3] != 0) return -EINVAL;
        uint64_t host;
        memcpy(&host, addr + 4, 8);
        bool local = host == host_ && addr[2] != 0;
        if (!local && addr[1] == 0) {
            // Only an shm part: reachable if it is on this host after all.
            local = true;
        }
        via = local ? kShm : kWire;
        part = local ? addr + kHdrLen + addr[1] : addr + kHdrLen;
        plen = local ? addr[2] : addr[1];
    } else {
        // A bare address of one child: whichever accepts it.
        size_t slen;
        const uint8_t* s = child_[kShm]->local_addr(&slen);
        via = (len == slen && addr[0] == s[0]) ? kShm : kWire;
        part = addr;
        plen = len;
    }
    int idx = child_[via]->resolve(part, plen);
    if (idx < 0) return idx;
    int ours = adopt(via, idx);
    // Keep the full address a caller gave us, so the peer can be named the same way back.
    if (addr[0] == kAddrKind && peers_[ours].addr.size() < len) peers_[ours].addr.assign(addr, addr + len);
    return ours;
}

bool LocalShortcut::names_peer(int peer, const uint8_t* addr, size_t len) const {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || addr == nullptr || len == 0) return false;
    const Peer& p = peers_[peer];
    if (p.via < 0) return false;
    if (addr[0] != kAddrKind) return child_[p.via]->names_peer(p.idx, addr, len);
    if (len < kHdrLen || len != kHdrLen + addr[1] + addr[2] || addr[3] != 0) return false;
    const uint8_t* part = p.via == kShm ? addr + kHdrLen + addr[1] : addr + kHdrLen;
    const size_t plen = p.via == kShm ? addr[2] : addr[1];
    return plen != 0 && child_[p.via]->names_peer(p.idx, part, plen);
}

// Passing the wire through: its frames keep their indices (only a first one needs the table).
NICFW_HOT int LocalShortcut::took_from_wire(const RxFrame* out, int got) {
    rx_taken_[kWire] = got > 0;
    for (int i = 0; i < got; i++) {
        const int idx = out[i].peer;
        if (idx >= 64 || !(wire_known_ >> idx & 1)) adopt(kWire, idx);
    }
    return got;
}

// While the wire is the only one, every step but each kShmLookEvery-th reads it alone.
NICFW_HOT bool LocalShortcut::wire_turn() {
    return wire_only_ && (++wire_steps_ & (kShmLookEvery - 1)) != 0;
}

NICFW_HOT int LocalShortcut::rx_burst(RxFrame* out, int max) {
    if (wire_turn()) return took_from_wire(out, child_[kWire]->rx_burst(out, max));
    return rx_both(out, max);
}

// The wire's spin on its own turns only: with a same-host peer (or on the turn that looks
// for one) the shm half's frames must not wait behind the wire's system calls.
NICFW_HOT int LocalShortcut::rx_burst_spin(RxFrame* out, int max, uint32_t again, SpinStop stop) {
    if (wire_turn()) return took_from_wire(out, child_[kWire]->rx_burst_spin(out, max, again, stop));
    return rx_both(out, max);
}

NICFW_HOT int LocalShortcut::rx_both(RxFrame* out, int max) {
    // shm first: it is the cheaper poll and its frames are waiting in memory.
    int n = 0;
    for (int via : {kShm, kWire}) {
        if (n >= max) break;
        int got = child_[via]->rx_burst(out + n, max - n);
        rx_taken_[via] = got > 0;
        for (int i = n; i < n + got; i++) out[i].peer = adopt(via, out[i].peer);
        n += got;
    }
    // A same-host NIC's hello came (the shm child took it): its frames are ours to poll.
    if (wire_only_ && child_[kShm]->peer_count() > 0) end_wire_only();
    return n;
}

NICFW_HOT void LocalShortcut::rx_release() {
    for (int via : {kShm, kWire})
        if (rx_taken_[via]) {
            child_[via]->rx_release();
            rx_taken_[via] = false;
        }
}

void LocalShortcut::poll_slow(std::vector<TransportEvent>& events) {
    for (int via : {kShm, kWire}) {
        child_events_.clear();
        child_[via]->poll_slow(child_events_);
        for (TransportEvent ev : child_events_) {
            if (ev.kind == PeerEvent::kFreed) {
                // The child's index may name a new peer from now on: so may ours.
                auto& map = to_ours_[via];
                if (static_cast<size_t>(ev.peer) >= map.size() || map[ev.peer] < 0) continue;
                int ours = map[ev.peer];
                map[ev.peer] = -1;
                peers_[ours] = Peer{-1, -1, {}};
                if (!wire_only_)
                    free_ids_.push_back(ours);
                else if (ours < 64)
                    wire_known_ &= ~(uint64_t{1} << ours);
                ev.peer = ours;
            } else {
                ev.peer = adopt(via, ev.peer);
            }
            events.push_back(ev);
        }
    }
    // A same-host NIC that sent its hello: the shm child knows it now.
    if (wire_only_ && child_[kShm]->peer_count() > 0) end_wire_only();
}

}  // namespace softvia::nicfw
