// fault transport: a seeded fault injector wrapped around any transport.
//
// It plays a lossy link with a frame check sequence: every frame leaves with a CRC-32C
// trailer, then may be dropped, duplicated, held back behind the next frame (reorder),
// delayed, or have a bit flipped (after the checksum, as on a wire). The receiving side
// checks the trailer and drops a corrupted frame before the firmware sees it. Both ends
// of a link must run it (the trailer is part of their frames); a job sets it for every
// process with SOFTVIA_FAULTS.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "nicfw/faults.h"
#include "nicfw/transport.h"

namespace softvia::nicfw {

uint32_t crc32c(const uint8_t* p, size_t n);

class FaultTransport final : public Transport {
public:
    FaultTransport(std::unique_ptr<Transport> inner, const FaultSpec& spec);

    const char* name() const override { return inner_->name(); }
    const uint8_t* local_addr(size_t* len) const override { return inner_->local_addr(len); }
    uint32_t max_frame() const override { return inner_->max_frame() - kTrailer; }
    bool lossy() const override { return true; }
    int resolve(const uint8_t* addr, size_t len) override { return inner_->resolve(addr, len); }
    const std::vector<uint8_t>& peer_addr(int peer) const override { return inner_->peer_addr(peer); }
    bool names_peer(int peer, const uint8_t* addr, size_t len) const override {
        return inner_->names_peer(peer, addr, len);
    }
    bool peer_alive(int peer) const override { return inner_->peer_alive(peer); }
    // A same-host shortcut bypasses the wire, and so the faults: it is not offered here,
    // so that what runs under the injector is the wire protocol.
    uint32_t peer_pid(int) const override { return 0; }
    size_t peer_count() const override { return inner_->peer_count(); }
    size_t live_peers() const override { return inner_->live_peers(); }
    int open_link(int peer) override { return inner_->open_link(peer); }
    void release_peer(int peer) override { inner_->release_peer(peer); }
    uint8_t* tx_reserve(int peer, uint32_t len) override;
    void tx_commit(int peer, uint32_t len) override;
    void tx_flush() override { inner_->tx_flush(); }  // a batching wire sends here
    uint32_t tx_queued() const override { return inner_->tx_queued(); }
    bool rx_poll_syscall() const override { return inner_->rx_poll_syscall(); }
    int rx_burst(RxFrame* out, int max) override;
    void rx_release() override { inner_->rx_release(); }
    void poll_slow(std::vector<TransportEvent>& events) override;

    void set_spec(const FaultSpec& spec);  // new rates (the PRNG is re-seeded)
    const FaultCounters& counters() const { return c_; }

private:
    static constexpr uint32_t kTrailer = 4;
    static constexpr size_t kMaxHeld = 256;  // frames held back before tx_reserve says full

    struct Held {
        int peer;
        std::vector<uint8_t> frame;
        uint64_t due_ns;   // delayed: when it may go; reordered: a deadline if nothing follows
        bool reorder;      // goes right after the next frame to the same peer
    };

    bool roll(double p);
    bool send_now(int peer, const uint8_t* frame, size_t len);
    void flush_held(int after_peer);

    std::unique_ptr<Transport> inner_;
    FaultSpec spec_;
    uint64_t rng_;
    std::vector<uint8_t> stage_;
    std::deque<Held> held_;
    FaultCounters c_;
};

}  // namespace softvia::nicfw
