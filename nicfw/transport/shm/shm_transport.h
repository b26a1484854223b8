// shm transport: frames between NIC instances on one host through shared memory.
//
// Each NIC owns one memfd segment: a header with a hello mailbox, then lanes. A lane is
// a single-producer/single-consumer ring of fixed-size slots that carries frames from
// this NIC to one peer; the peer maps this segment through /proc/<pid>/fd/<fd> and polls
// the lane. The producer publishes a slot by storing its sequence number last, so the
// consumer touches one cache line per small frame and never reads the producer index.
// Segments are memfds, so nothing is left behind when a process dies.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "nicfw/transport.h"

namespace softvia::nicfw {

struct ShmSegment;  // layout in shm_transport.cc
struct ShmLane;

class ShmTransport final : public Transport {
public:
    // Address bytes of an shm NIC (24): kind, version, pid, memfd number, nonce, host id.
    static constexpr size_t kAddrLen = 24;
    static constexpr uint8_t kAddrKind = 1;

    // Returns 0 or a negative errno.
    static int create(std::unique_ptr<ShmTransport>* out);
    ~ShmTransport() override;

    const char* name() const override { return "shm"; }
    const uint8_t* local_addr(size_t* len) const override {
        *len = kAddrLen;
        return addr_;
    }
    uint32_t max_frame() const override;
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    bool peer_alive(int peer) const override { return !peers_[peer].dead; }
    size_t peer_count() const override { return peers_.size(); }
    uint8_t* tx_reserve(int peer, uint32_t len) override;
    void tx_commit(int peer, uint32_t len) override;
    int rx_burst(RxFrame* out, int max) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

private:
    struct Peer {
        std::vector<uint8_t> addr;
        uint32_t pid = 0, nonce = 0;
        ShmSegment* seg = nullptr;  // peer's segment mapped here (or ours, for self)
        size_t seg_len = 0;
        bool mapped_here = false;   // we own the mapping (not self)
        bool dead = false;
        int pidfd = -1;             // readable once the peer process has exited
        // tx: our lane to this peer
        int tx_lane = -1;
        uint64_t prod = 0, cached_cons = 0;
        bool hello_pending = false;
        // rx: the peer's lane to us
        ShmLane* rx = nullptr;
        uint64_t head = 0;
        uint32_t taken = 0;  // frames handed out by rx_burst, not yet released
    };

    ShmTransport() = default;
    int map_peer(uint32_t pid, uint32_t fd, uint32_t nonce, ShmSegment** seg, size_t* len);
    int peer_for(const uint8_t* addr, size_t len, bool* created);
    bool post_hello(Peer& p);
    bool open_lane(Peer& p);
    void process_mailbox();
    ShmLane* lane(ShmSegment* seg, uint32_t i) const;

    int memfd_ = -1;
    ShmSegment* seg_ = nullptr;
    size_t seg_len_ = 0;
    uint8_t addr_[kAddrLen] = {};
    uint32_t pid_ = 0, nonce_ = 0;
    uint64_t host_id_ = 0;
    uint64_t mbox_seen_ = 0;
    uint32_t next_lane_ = 0;
    std::vector<uint32_t> free_lanes_;
    std::vector<Peer> peers_;
    std::unordered_map<uint64_t, int> by_key_;  // (pid << 32 | nonce) -> peer
    std::vector<int> rx_active_;                // peers with an rx lane, polled each burst
    uint32_t rx_rotor_ = 0;
};

}  // namespace softvia::nicfw
