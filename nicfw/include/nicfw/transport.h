// nicfw/transport.h -- the small burst contract every wire implements.
//
// The engine drives a transport in bursts: reserve and commit frames for a peer,
// receive a burst of frames and release them once handled, and poll the slow path
// (link set-up, liveness) from its timer. One virtual call per burst, none per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace softvia::nicfw {

struct RxFrame {
    const uint8_t* data;  // starts with nicfw_frame_hdr; untrusted bytes from the wire
    uint32_t len;
    int peer;             // transport peer index the frame came from
};

enum class PeerEvent { kDead };

struct TransportEvent {
    PeerEvent kind;
    int peer;
};

class Transport {
public:
    virtual ~Transport() = default;

    virtual const char* name() const = 0;
    // This NIC's address bytes (what VipQueryNic's LocalNicAddress shows).
    virtual const uint8_t* local_addr(size_t* len) const = 0;
    // Largest frame (header included) that tx_reserve accepts.
    virtual uint32_t max_frame() const = 0;
    // Whether a committed frame can fail to arrive. Reliable VIs on such a wire run the
    // retransmission protocol (docs/reliability.md); on a lossless one a frame in the
    // link is in the peer NIC's queue.
    virtual bool lossy() const { return false; }

    // Peer index for an address, creating the link on first use. Negative errno on
    // failure (-EINVAL malformed address, -EHOSTUNREACH peer gone or not ours).
    virtual int resolve(const uint8_t* addr, size_t len) = 0;
    // Address bytes of a known peer.
    virtual const std::vector<uint8_t>& peer_addr(int peer) const = 0;
    virtual bool peer_alive(int peer) const = 0;
    virtual size_t peer_count() const = 0;

    // Room for one frame of len bytes to peer, or nullptr while the link is full (the
    // engine retries later; nothing is lost). Exactly one commit follows a reserve.
    virtual uint8_t* tx_reserve(int peer, uint32_t len) = 0;
    virtual void tx_commit(int peer, uint32_t len) = 0;
    // Hands committed frames to the wire. Called once at the end of every engine step;
    // a wire that batches (one system call for many frames) sends here, others need not.
    virtual void tx_flush() {}
    // Committed frames that tx_flush has not handed to the wire yet (0 for a wire whose
    // commit is the send, shm).
    virtual uint32_t tx_queued() const { return 0; }

    // Up to max received frames, valid until rx_release().
    virtual int rx_burst(RxFrame* out, int max) = 0;
    virtual void rx_release() = 0;

    // Slow path, called from the engine's timer: link set-up messages, liveness.
    // Appends what happened to events.
    virtual void poll_slow(std::vector<TransportEvent>& events) = 0;
};

}  // namespace softvia::nicfw
