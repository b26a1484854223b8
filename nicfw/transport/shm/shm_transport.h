// shm transport: frames between NIC instances on one host through shared memory.
//
// Each NIC owns a small memfd segment: a header, a hello mailbox and a notice board.
// Frames to a peer go through a lane: a single-producer/single-consumer ring of
// fixed-size slots in a memfd of its own, created by the sender when it first sends to
// that peer and announced with a hello (its fd number); the receiver maps it through
// /proc/<pid>/fd/<fd> and polls it. The producer publishes a slot by storing its
// sequence number last, so the consumer touches one cache line per small frame and
// never reads the producer index. A receiver that cannot take a link (out of fds, at
// its peer limit, not allowed to open the sender's memfd) posts a notice on its board
// and the sender fails the peer at once instead of waiting for answers that never come.
//
// Peers come and go: a dead peer's mappings and fds are released when its death is
// seen, and a peer the engine released (release_peer) has its lane closed after a short
// linger and its index freed once the other side closed its lane too. Memfds are sealed
// against resizing (a peer cannot make our reads fault) and mode 0600.
// docs/transports.md has the design and its costs.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "nicfw/transport.h"

namespace softvia::nicfw {

struct ShmSegment;  // layouts in shm_transport.cc
struct ShmLane;

class ShmTransport final : public Transport {
public:
    // Address bytes of an shm NIC (24): kind, version, pid, memfd number, nonce, host id.
    static constexpr size_t kAddrLen = 24;
    static constexpr uint8_t kAddrKind = 1;
    // Peers a NIC links to at once, by default and at most (the status page names a
    // peer in 16 bits). Device option shm:peers=N lowers it.
    static constexpr uint32_t kMaxPeers = 65535;
    // A released live peer keeps its link this long, so a quick reconnect reuses it.
    static constexpr uint64_t kLingerNs = 200000000;

    // Returns 0 or a negative errno.
    static int create(std::unique_ptr<ShmTransport>* out, uint32_t max_peers = kMaxPeers);
    ~ShmTransport() override;

    const char* name() const override { return "shm"; }
    const uint8_t* local_addr(size_t* len) const override {
        *len = kAddrLen;
        return addr_;
    }
    uint32_t max_frame() const override;
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    bool peer_alive(int peer) const override { return peers_[peer].state == Peer::kLive; }
    uint32_t peer_pid(int peer) const override {
        return peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer].state == Peer::kLive
                   ? peers_[peer].pid
                   : 0;
    }
    size_t peer_count() const override { return peers_.size(); }
    size_t live_peers() const override { return live_; }
    int open_link(int peer) override;
    void release_peer(int peer) override;
    uint8_t* tx_reserve(int peer, uint32_t len) override;  // reserve_slot
    void tx_commit(int peer, uint32_t len) override;       // commit_slot
    // The same, inline (shm_tx.h): the engine calls them without a virtual call when its
    // transport is this wire (nicfw/src/frames.h).
    inline uint8_t* reserve_slot(int peer, uint32_t len);
    inline void commit_slot(int peer, uint32_t len);
    int rx_burst(RxFrame* out, int max) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

    // For tests: this NIC's segment memfd, and the fd of its unattached lane to peer (-1
    // once the peer has mapped it).
    int segment_fd() const { return memfd_; }
    int lane_fd(int peer) const { return peers_[peer].tx_fd; }

private:
    struct Peer {
        enum State : uint8_t { kFree, kLive, kDead };
        // Hot fields first: tx_reserve/tx_commit and rx_burst read only these.
        ShmLane* tx = nullptr;  // our lane to this peer; null until the first send
        uint64_t prod = 0, cached_cons = 0;
        ShmLane* rx = nullptr;  // the peer's lane to us, mapped here
        uint64_t head = 0;
        uint32_t taken = 0;  // frames handed out by rx_burst, not yet released
        State state = kFree;
        bool self = false;       // our own NIC (its segment is ours)
        bool released = false;   // the engine holds no reference (release_peer)
        bool hello_pending = false;
        uint64_t released_ns = 0;
        int tx_fd = -1;          // our lane's memfd, open until the peer has mapped it
        uint32_t tx_serial = 0;
        std::vector<ShmLane*> rx_next;  // announced lanes waiting for rx to drain
        std::vector<std::pair<ShmLane*, int>> closing;  // our closed lanes not yet mapped by the peer
        std::vector<uint8_t> addr;
        uint32_t pid = 0, nonce = 0;
        ShmSegment* seg = nullptr;  // the peer's segment mapped here (ours for self)
        uint64_t notices_seen = 0;
        int pidfd = -1;             // readable once the peer process has exited
        uint32_t gen = 0;           // bumped when the entry is freed (epoll data)
    };

    ShmTransport() = default;
    int map_segment(uint32_t pid, uint32_t fd, uint32_t nonce, ShmSegment** seg);
    int map_lane(const Peer& p, uint32_t fd, uint32_t serial, ShmLane** lane);
    int peer_for(const uint8_t* addr, size_t len, bool* created);
    int new_peer_index();
    int open_lane(Peer& p);
    bool post_hello(Peer& p);
    void process_mailbox();
    void attach(int id, uint32_t lane_fd, uint32_t serial);
    void post_notice(uint32_t pid, uint32_t nonce, int err);
    bool refused_by(Peer& p, int* err);
    void cut(int id, int err, bool tell, const char* what);
    void drop_links(Peer& p);
    void close_tx(Peer& p);
    void unmap_lane(ShmLane* l);
    bool lane_drained(const Peer& p) const;
    void free_peer(int id);
    void check_remote(int id);
    void report(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    int memfd_ = -1;
    int epfd_ = -1;  // every peer's pidfd, so one epoll_wait per slow-path turn sees deaths
    ShmSegment* seg_ = nullptr;
    uint8_t addr_[kAddrLen] = {};
    uint32_t pid_ = 0, nonce_ = 0;
    uint64_t host_id_ = 0;
    uint64_t mbox_seen_ = 0;
    uint32_t serial_ = 0;  // lanes this NIC has opened
    uint32_t max_peers_ = kMaxPeers;
    uint32_t live_ = 0;
    uint64_t now_ns_ = 0;  // clock at the last poll_slow
    uint32_t remote_rotor_ = 0;  // next peer whose segment/lane the slow path looks at
    uint64_t report_ns_ = 0;
    uint32_t reports_ = 0, muted_ = 0;
    std::vector<Peer> peers_;
    std::vector<int> free_ids_;
    std::unordered_map<uint64_t, int> by_key_;  // (pid << 32 | nonce) -> peer
    std::vector<int> rx_active_;                // peers with an rx lane, polled each burst
    uint32_t rx_rotor_ = 0;
    std::vector<TransportEvent> pending_;       // deaths found outside poll_slow (cut)
};

}  // namespace softvia::nicfw
