// verbs transport: nicfw frames as RC SEND messages over rdma-core (libibverbs and
// librdmacm), on soft-RoCE (rxe), RoCE or InfiniBand. Not run on a device where it was
// written (that kernel had no RDMA); docs/transports.md says how to run it.
//
// One RC queue pair per peer NIC carries every frame between the two NICs, whatever VI
// it belongs to. The firmware keeps VI semantics (descriptors, protection tags, the
// three reliability levels, RDMA checks) and multiplexes its VIs over that QP, exactly
// as it does over shm: the wire only moves frames. A QP per VI would let a real HCA run
// the data path itself (true offload, no firmware copy), but the HCA would then own what
// VIA defines per VI: unreliable VIs would be RC anyway, memory handles would be rkeys,
// and a VI error would be a QP error; it also costs a connection handshake per VI and a
// QP per VI per side. That is a different NIC, not a different wire; it fits behind the
// same VIPL, but not behind this frame contract, and is not built here.
//
// Data path, all busy-polled (no completion channel):
//   - receives: one registered region per NIC cut into max_frame() buffers, posted to
//     one shared receive queue (SRQ) that every QP of the NIC takes from; one receive
//     CQ, polled in rx_burst; a frame is valid until rx_release reposts its buffer.
//   - sends: per connection a registered ring of max_frame() slots; tx_commit writes a
//     work request, tx_flush posts each connection's new requests as one chain. Frames
//     that fit the QP's inline limit go inline; every kSignalEvery-th send is signaled and
//     its completion frees every slot before it (a QP completes in order).
//   - RC is reliable and ordered: a frame is acknowledged by the peer's HCA, retried on
//     loss, and a full SRQ makes the sender retry (RNR, unlimited) instead of dropping.
//     A frame is either delivered in order or the QP fails and the peer is reported dead.
//     So lossy() is false and reliable VIs need no firmware retransmission.
//
// Connections (librdmacm, one non-blocking event channel, handled in poll_slow): each
// NIC listens on an rdma_cm id bound to its IPv4 address and port. resolve() starts
// rdma_resolve_addr -> rdma_resolve_route -> rdma_connect, carrying our address and the
// target's nonce as private data; the listener accepts what is meant for it. We create the QP ourselves and move it
// RESET -> INIT -> RTR -> RTS with rdma_init_qp_attr + ibv_modify_qp, so that the RNR
// timer is short (librdmacm's own QPs wait 655 ms after an RNR NAK). Two NICs that
// resolve each other at once: the connection started by the lower address wins; the
// other side is told so in the reject's private data and waits for it. A connection
// that drops (DISCONNECTED, errors, a failed work request) makes its peer dead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nicfw/device.h"
#include "nicfw/transport.h"

struct rdma_event_channel;
struct rdma_cm_id;
struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_srq;
struct ibv_mr;

namespace softvia::nicfw {

// The device name's options: verbs[:addr=IPv4,port=N,dev=NAME].
struct VerbsOptions {
    uint32_t ip = 0;    // network byte order; 0: the first IPv4 address in the device's GID table
    uint16_t port = 0;  // 0: any free port
    std::string dev;    // ibv device name (ibv_devices); empty: the device that owns ip
};

// Reads the verbs options of a spec (progress and local, which every kind takes, are
// skipped: vipl and the same-host wrapper read them). -EINVAL with
// *why for an unknown key or a bad value.
int parse_verbs_options(const DeviceSpec& spec, VerbsOptions* out, std::string* why);

// A verbs NIC address (kVerbsAddrLen bytes): [0] kind, [1] version, [2..3] port (big
// endian), [4..7] IPv4 (network order), [8..15] host_identity() (the offset the udp and
// dpdk addresses use too), [16..19] nonce (tells NIC instances on one port apart).
constexpr size_t kVerbsAddrLen = 20;
constexpr uint8_t kVerbsAddrKind = 4;

struct VerbsAddr {
    uint32_t ip = 0;  // network byte order
    uint16_t port = 0;
    uint64_t host = 0;
    uint32_t nonce = 0;
};

void encode_verbs_addr(const VerbsAddr& a, uint8_t out[kVerbsAddrLen]);
// False for a wrong length, kind or version, or a zero address or port.
bool decode_verbs_addr(const uint8_t* p, size_t len, VerbsAddr* out);
// The order that settles crossed connects: both sides compute the same answer.
bool verbs_addr_before(const VerbsAddr& a, const VerbsAddr& b);

struct VerbsConn;  // one RC connection (verbs_transport.cc)

class VerbsTransport final : public Transport {
public:
    // Frames are RC messages, which the HCA cuts into path-MTU packets itself, so the
    // frame size is not bound by the MTU. It is bound by pinned memory: every receive
    // buffer and send slot is registered (locked), and Debian's default RLIMIT_MEMLOCK is
    // 8 MiB for a process that may open several NICs. 4096 is also the largest RoCE MTU,
    // so on such a fabric a full frame is one packet.
    static constexpr uint32_t kMaxFrame = 4096;
    static constexpr uint32_t kRecvBufs = 256;   // SRQ depth: 1 MiB per NIC
    static constexpr uint32_t kSendSlots = 64;   // send ring per connection: 256 KiB
    static constexpr uint32_t kSignalEvery = 16;

    // 0, -ENXIO with "no RDMA device: ..." when there is none to use, or another
    // negative errno; *why says what went wrong.
    static int create(const VerbsOptions& opts, std::unique_ptr<VerbsTransport>* out, std::string* why);
    ~VerbsTransport() override;

    const char* name() const override { return "verbs"; }
    const uint8_t* local_addr(size_t* len) const override {
        *len = kVerbsAddrLen;
        return addr_;
    }
    uint32_t max_frame() const override { return kMaxFrame; }
    bool lossy() const override { return false; }  // RC: delivered in order, or the peer is dead
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    bool peer_alive(int peer) const override { return !peers_[peer].dead; }
    size_t peer_count() const override { return peers_.size(); }
    uint8_t* tx_reserve(int peer, uint32_t len) override;
    void tx_commit(int peer, uint32_t len) override;
    void tx_flush() override;
    int rx_burst(RxFrame* out, int max) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

private:
    struct Peer {
        std::vector<uint8_t> addr;
        VerbsAddr a;
        VerbsConn* tx = nullptr;       // the connection frames to this peer go on
        VerbsConn* rx_only = nullptr;  // ourselves only: the accepted end of our loopback
        uint64_t wait_until_ns = 0;    // lost a crossed connect: the peer's arrives by then
        bool dead = false, dead_reported = false;
    };

    VerbsTransport() = default;
    int open(const VerbsOptions& opts, std::string* why);
    int find_peer(const VerbsAddr& a) const;
    int add_peer(const VerbsAddr& a);
    void kill_peer(int peer);
    int start_connect(const VerbsAddr& a, VerbsConn** out);
    int setup_qp(VerbsConn& c);
    int move_qp(VerbsConn& c, int state);
    void close_conn(VerbsConn* c);
    void handle_cm_events();
    void on_connect_request(rdma_cm_id* id, const uint8_t* pdata, size_t plen);
    void on_conn_event(VerbsConn& c, int type, const uint8_t* pdata, size_t plen);
    void reap_sends(VerbsConn& c);
    void post_sends(VerbsConn& c);
    void post_recvs();

    VerbsAddr local_;
    uint8_t addr_[kVerbsAddrLen] = {};
    rdma_event_channel* channel_ = nullptr;
    rdma_cm_id* listen_id_ = nullptr;
    ibv_context* ctx_ = nullptr;  // librdmacm's context for the device (not ours to close)
    ibv_pd* pd_ = nullptr;
    ibv_cq* recv_cq_ = nullptr;
    ibv_srq* srq_ = nullptr;
    ibv_mr* recv_mr_ = nullptr;
    uint8_t* recv_buf_ = nullptr;
    uint32_t recv_count_ = 0;
    std::vector<uint32_t> held_;    // receive buffers handed out by rx_burst
    std::vector<uint32_t> repost_;  // receive buffers to post again
    std::vector<Peer> peers_;
    std::vector<std::unique_ptr<VerbsConn>> conns_;
    std::unordered_map<uint32_t, VerbsConn*> by_qpn_;  // local QP number -> connection
    std::vector<VerbsConn*> unposted_;                 // connections with frames to post
};

}  // namespace softvia::nicfw
