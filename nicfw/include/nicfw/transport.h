// nicfw/transport.h -- the small burst contract every wire implements.
//
// The engine drives a transport in bursts: reserve and commit frames for a peer,
// receive a burst of frames and release them once handled, and poll the slow path
// (link set-up, liveness) from its timer. One virtual call per burst, none per byte; on
// the shm wire (when it is the NIC's transport itself, not wrapped) none per frame
// either: the engine calls its send path inline (transport/shm/shm_tx.h).
#pragma once

#include <cerrno>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

struct RxFrame {
    const uint8_t* data;  // starts with nicfw_frame_hdr; untrusted bytes from the wire
    uint32_t len;
    int peer;             // transport peer index the frame came from
};

// kDead: the peer is gone (its process exited, its NIC closed, or the link was refused
// or cut; the transport says why on stderr). Nothing more goes to it or comes from it;
// the index stays reserved until the engine releases it (release_peer).
// kFreed: a released index no longer names its peer; a later peer may get it.
enum class PeerEvent { kDead, kFreed };

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
    // failure: -EINVAL malformed address, -EHOSTUNREACH peer gone or on another host,
    // -EACCES not ours to reach, -EMFILE/-ENFILE out of fds, -ENOMEM, -ENOSPC at the
    // peer limit (never -EPERM or -EPROTO, which VIPL reads as other errors).
    virtual int resolve(const uint8_t* addr, size_t len) = 0;
    // Address bytes of a known peer (empty once its index is freed).
    virtual const std::vector<uint8_t>& peer_addr(int peer) const = 0;
    // Whether addr, an address a frame from peer claims for its NIC (a CONN_REQ's
    // src_addr), names that peer as far as this wire can tell: a peer cannot pass itself
    // off as another NIC. Default: it is the address this wire knows the peer by.
    virtual bool names_peer(int peer, const uint8_t* addr, size_t len) const {
        const std::vector<uint8_t>& a = peer_addr(peer);
        return len == a.size() && std::equal(a.begin(), a.end(), addr);
    }
    virtual bool peer_alive(int peer) const = 0;
    // The process id of a live peer whose memory this host shares (same kernel, same
    // user: /proc/<pid>/fd opens its memfds), 0 for a peer reached over a network. Offloads
    // with a same-host shortcut (NIC atomics) use it; off the per-frame path.
    virtual uint32_t peer_pid(int peer) const {
        (void)peer;
        return 0;
    }
    // Peer indices are below this (freed ones included).
    virtual size_t peer_count() const = 0;
    // Peers linked now (the status page's count).
    virtual size_t live_peers() const { return peer_count(); }
    // Makes sure frames can go to peer now (the first send to a peer that reached us
    // first opens our side of the link). 0, or a negative errno as for resolve; then the
    // link is cut: the peer learns at once that we refused it, and kDead follows.
    virtual int open_link(int peer) { return peer_alive(peer) ? 0 : -EHOSTUNREACH; }

    // Peer lifetimes. An index is the engine's to use from resolve() or a received frame
    // until the engine calls release_peer: it holds no reference to it any more (no VI
    // connected or connecting to it, no control frame queued for it, no connection
    // request from it held). The transport then releases the link when it likes (shm:
    // after a short linger, once the peer has closed its side too; at once for a dead
    // peer) and reports kFreed; until then a frame from the peer or a resolve() takes the
    // index back into use, and the engine releases it again when it is done. A dead
    // peer's fds and mappings are released when its death is seen, whatever the engine
    // holds. Wires with a fixed set of peers need not free anything.
    virtual void release_peer(int peer) { (void)peer; }

    // Room for one frame of len bytes to peer, or nullptr while the link is full (the
    // engine retries later; nothing is lost). Exactly one commit follows a reserve.
    virtual uint8_t* tx_reserve(int peer, uint32_t len) = 0;
    virtual void tx_commit(int peer, uint32_t len) = 0;
    // Hands committed frames to the wire. Called once at the end of every engine step;
    // a wire that batches (one system call for many frames) sends here, others need not.
    NICFW_HOT virtual void tx_flush() {}
    // Committed frames that tx_flush has not handed to the wire yet (0 for a wire whose
    // commit is the send, shm).
    NICFW_HOT virtual uint32_t tx_queued() const { return 0; }
    // Whether looking for received frames is a system call (udp's recvmmsg), not a read
    // of shared memory (shm's lanes, dpdk's rings). Inline progress then does not look in
    // the step of a post (Engine::post_progress): a stream would pay an idle poll per
    // message for what the next Done reads anyway.
    virtual bool rx_poll_syscall() const { return false; }

    // Up to max received frames, valid until rx_release().
    virtual int rx_burst(RxFrame* out, int max) = 0;
    // rx_burst for a program that does nothing but wait for us (Engine::spin_stop): a wire
    // whose look is a system call looks again at once, up to `again` more times, while
    // it finds nothing and stop() is false; other wires burst once.
    struct SpinStop {
        bool (*fn)(const void* ctx);
        const void* ctx;
        bool operator()() const { return fn(ctx); }
    };
    NICFW_HOT virtual int rx_burst_spin(RxFrame* out, int max, uint32_t again, SpinStop stop) {
        (void)again;
        (void)stop;
        return rx_burst(out, max);
    }
    virtual void rx_release() = 0;

    // Slow path, called from the engine's timer: link set-up messages, liveness, peers
    // freed. Appends what happened to events.
    virtual void poll_slow(std::vector<TransportEvent>& events) = 0;
};

}  // namespace softvia::nicfw
