// Same-host shortcut: a network wire with shm beside it (NIC-level loopback).
//
// A NIC opened on a network wire (udp, dpdk, verbs) reaches peers on its own host through
// shm instead: the firmware sees by the destination address that it is local. "Host"
// means kernel and network namespace (host_identity()), so the launcher's --hosts
// namespaces are separate hosts even on one machine.
//
// Address (kAddrKind): [0] kind, [1] wire address length W, [2] shm address length S,
// [3] 0, [4..11] host identity, then W bytes of wire address, then S bytes of shm
// address. A peer learned from an incoming frame is known by one part only; the other
// length is 0. resolve() also takes a bare wire or shm address.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nicfw/transport.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

class LocalShortcut final : public Transport {
public:
    static constexpr uint8_t kAddrKind = 0x20;
    static constexpr size_t kHdrLen = 12;

    LocalShortcut(std::unique_ptr<Transport> wire, std::unique_ptr<Transport> shm, uint64_t host);

    const char* name() const override { return name_.c_str(); }
    const uint8_t* local_addr(size_t* len) const override {
        *len = addr_.size();
        return addr_.data();
    }
    // One frame size for both paths: the engine has one MTU per NIC.
    NICFW_HOT uint32_t max_frame() const override { return max_frame_; }
    // The retransmission protocol is chosen per VI before it knows its peer, so the
    // NIC is as lossy as its wire (same-host VIs then pay for ACKs they do not need).
    bool lossy() const override { return child_[kWire]->lossy(); }
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    // The part of addr for the child the peer talks through must name the child's peer;
    // the other part cannot be checked here (it is the same host's same user, which shm
    // trusts anyway).
    bool names_peer(int peer, const uint8_t* addr, size_t len) const override;
    bool peer_alive(int peer) const override {
        const Peer& p = peers_[peer];
        return p.via >= 0 && child_[p.via]->peer_alive(p.idx);
    }
    uint32_t peer_pid(int peer) const override {
        if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return 0;
        const Peer& p = peers_[peer];
        return p.via == kShm ? child_[kShm]->peer_pid(p.idx) : 0;
    }
    size_t peer_count() const override { return peers_.size(); }
    size_t live_peers() const override { return child_[kWire]->live_peers() + child_[kShm]->live_peers(); }
    int open_link(int peer) override {
        const Peer& p = peers_[peer];
        return p.via < 0 ? -EHOSTUNREACH : child_[p.via]->open_link(p.idx);
    }
    // Our index lives as long as the child's: freed when the child frees its own.
    void release_peer(int peer) override {
        if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || peers_[peer].via < 0) return;
        child_[peers_[peer].via]->release_peer(peers_[peer].idx);
    }
    NICFW_HOT uint8_t* tx_reserve(int peer, uint32_t len) override {
        if (wire_only_) return child_[kWire]->tx_reserve(peer, len);
        const Peer& p = peers_[peer];
        return child_[p.via]->tx_reserve(p.idx, len);
    }
    NICFW_HOT void tx_commit(int peer, uint32_t len) override {
        if (wire_only_) return child_[kWire]->tx_commit(peer, len);
        const Peer& p = peers_[peer];
        child_[p.via]->tx_commit(p.idx, len);
    }
    NICFW_HOT void tx_flush() override {
        child_[kWire]->tx_flush();
        if (!wire_only_) child_[kShm]->tx_flush();
    }
    NICFW_HOT uint32_t tx_queued() const override {
        return child_[kWire]->tx_queued() + (wire_only_ ? 0 : child_[kShm]->tx_queued());
    }
    bool rx_poll_syscall() const override { return child_[kWire]->rx_poll_syscall() || child_[kShm]->rx_poll_syscall(); }
    int rx_burst(RxFrame* out, int max) override;
    int rx_burst_spin(RxFrame* out, int max, uint32_t again, SpinStop stop) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

    // Which child carries a peer's frames (for tests and softvia-nicinfo).
    bool peer_is_local(int peer) const { return peers_[peer].via == kShm; }

private:
    enum { kWire = 0, kShm = 1 };
    struct Peer {
        int via;  // kWire or kShm; -1: a freed index
        int idx;  // the child's peer index
        std::vector<uint8_t> addr;
    };
    // Our peer index for a child's peer, creating the entry on first contact.
    int adopt(int via, int idx);
    int took_from_wire(const RxFrame* out, int got);
    bool wire_turn();
    int rx_both(RxFrame* out, int max);  // shm first, then the wire
    void end_wire_only();
    std::vector<uint8_t> wrap(int via, const std::vector<uint8_t>& child_addr) const;

    std::unique_ptr<Transport> child_[2];
    std::vector<int> to_ours_[2];  // child peer index -> ours (-1: none yet)
    std::vector<Peer> peers_;
    std::vector<int> free_ids_;
    std::vector<uint8_t> addr_;
    std::string name_;
    uint64_t host_;
    uint32_t max_frame_;
    bool rx_taken_[2] = {false, false};
    // Until the shm child has a peer, the layer passes the wire through: our index of a
    // wire peer is the wire's own (held from then on too), the shm child is looked at in
    // every kShmLookEvery-th poll and in poll_slow (a same-host NIC's hello waits that
    // long), and a step reads none of the layer's tables, only this object. Each page a
    // step touches after a system call costs a page walk where the TLB does not survive
    // it (docs/transports.md: the layer's tables and idle shm half were ~130 of a udp
    // round trip's ~3,500 instructions). wire_known_: wire peers 0..63 with an entry.
    static constexpr uint32_t kShmLookEvery = 64;
    bool wire_only_ = true;
    uint32_t wire_steps_ = 0;
    uint64_t wire_known_ = 0;
    std::vector<TransportEvent> child_events_;
};

}  // namespace softvia::nicfw
