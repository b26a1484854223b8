// udp transport: frames in UDP datagrams to one socket per NIC, driven by io_uring.
//
// Busy-polled. Receives: rx=syscall (the default) reads up to 32 datagrams per recvmmsg;
// rx=multishot has them land in a provided-buffer ring filled by one io_uring multishot
// recvmsg (kernel >= 6.0) and reads its completion queue. The ring's receive costs about
// a microsecond more per datagram on a veth pair (task work per datagram; measured in
// docs/transports.md), so the default receives with the system call.
// Sends are batched: tx_commit queues a frame; rx_burst (the step's send phase is over)
// and tx_flush hand everything committed to the kernel: two or more datagrams as
// sendmsg requests in one io_uring_enter, a single one (the ping-pong case) with a
// plain sendmsg, which costs 0.2-0.8 us less per datagram here (tx=auto, the default;
// tx=uring sends every datagram through the ring; docs/transports.md). Buffers are
// allocated once, at creation.
// Segmentation (gso=auto, the default; udp_segments.cc): consecutive datagrams of one
// size to one peer (a message's frames) go as one send with UDP_SEGMENT, which the
// kernel carries as one packet through its stack and the veth or NIC and cuts into
// datagrams of the wire's size at the last moment; the receiving socket asks for UDP_GRO
// and reads such a train as one buffer, once trains come in: UDP_GRO on a socket costs
// every datagram about 0.15 us (8 B one-way), so it is set when a read first brings two
// long datagrams of one length (a train the kernel cut for us), and then stays set
// (udp_segments.cc says why). gso=off sends and reads every datagram alone.
//
// Send sockets (txsock=peer, the default; udp_peer_sockets.cc): frames to a peer that
// has acknowledged it leave by a socket connected to that peer, which keeps its route
// (0.1-0.3 us a datagram here); everything is received on the NIC's socket, but for the
// receive socket (rxsock=peer, the default, rx=syscall; same file): the first peer that
// announces its send socket gets a socket on the NIC's port (SO_REUSEPORT) connected to
// that send socket, which the kernel finds before routing (0.12-0.19 us a datagram).
//
// The wire can lose datagrams, so lossy() is true and reliable VIs retransmit.
//
// NIC address (kAddrLen = 24 bytes):
//   [0]      kAddrKind (2)
//   [1]      address version (1)
//   [2..3]   UDP port, network byte order
//   [4..7]   IPv4 address, network byte order
//   [8..15]  host_identity() of the process (nicfw/device.h), native byte order: the
//            same-host shortcut compares these 8 bytes (kHostIdOffset) with its own
//   [16..19] nonce: random per NIC, so a restarted process on the same port is a new peer
//   [20..23] zero
//
// Datagram: a kPreamble-byte preamble, then the frame (none in a probe or PORT*):
//   [0..3]   magic "SVU1"
//   [4]      type: 1 frame, 2 probe, 3 PORT, 4 PORT_ACK, 5 PORT_NAK (a send socket's
//            announcement, its acknowledgement, its refusal: udp_peer_sockets.cc)
//   [5]      flags: 1 on a frame from the sender's send socket for this peer; else 0
//   [6..7]   port, network byte order: such a frame's NIC socket; PORT*'s send socket;
//            else zero
//   [8..15]  the sender's host id
//   [16..19] the sender's nonce
//   [20..23] the receiver's nonce
// The sender's IPv4 address and port are the datagram's source (its NIC socket's, or
// an announced send socket's). A datagram that is not for this NIC's nonce, or is
// malformed or truncated, is dropped and counted. A well-formed unflagged frame from an
// unknown sender creates its peer (a server learns its clients from their CONN_REQ).
//
// Liveness: UDP cannot tell that a peer is gone. Every peer gets a probe datagram each
// 100 ms; with IP_RECVERR the kernel reports the ICMP port-unreachable answers, and a
// peer that gets kRefusalsForDead of them without a datagram from it in between is
// dead. Where ICMP does not come back a peer is never declared dead: reliable VIs end
// by their retry timeout.
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nicfw/device.h"
#include "nicfw/clock.h"
#include "nicfw/transport.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

// The data path's sendmsg and recvmmsg as plain system calls: libc's wrappers are
// cancellation points, which switch the thread's cancellation state with two atomic
// updates around every call (the engine never asks for cancellation, and one acted on
// inside a step would leave its lock held). -1 with errno set, as the wrappers return.
inline ssize_t wire_sendmsg(int fd, const msghdr* m, int flags) { return syscall(SYS_sendmsg, fd, m, flags); }
inline int wire_recvmmsg(int fd, mmsghdr* v, unsigned n, int flags) {
    return static_cast<int>(syscall(SYS_recvmmsg, fd, v, n, flags, nullptr));
}

struct UdpOptions {
    in_addr_t addr = 0;      // network byte order; 0: the first up non-loopback IPv4, else 127.0.0.1
    uint16_t port = 0;       // host byte order; 0: ephemeral
    uint32_t mtu = 0;        // bytes of UDP payload per datagram (preamble + frame); 0: auto,
                             // the bound interface's MTU less the IPv4 and UDP headers
    bool rx_syscall = true;  // rx=syscall (default): recvmmsg; rx=multishot: io_uring's multishot ring
    bool tx_direct = true;   // tx=auto (default): a flush of one datagram is a sendmsg; tx=uring: never
    bool gso = true;         // gso=auto (default): UDP_SEGMENT sends, UDP_GRO receives; gso=off
    bool peer_sockets = true;  // txsock=peer (default): frames leave by a connected socket per peer
                               // (udp_peer_sockets.cc); txsock=shared: all by the NIC's socket
    bool rx_socket = true;     // rxsock=peer (default): the first peer that announces a send socket
                               // gets a receive socket connected to it (rx=syscall only;
                               // udp_peer_sockets.cc); rxsock=shared: all arrive at the NIC's socket
};

struct UdpStats {
    uint64_t rx_datagrams = 0;  // datagrams read from the socket
    uint64_t rx_malformed = 0;  // too short, bad magic or type, or our nonce is not in it
    uint64_t rx_truncated = 0;  // larger than mtu
    uint64_t rx_strangers = 0;  // from an unknown sender we could not take as a peer
    uint64_t rx_refusals = 0;   // ICMP port unreachable reports
    uint64_t tx_datagrams = 0;
    uint64_t tx_errors = 0;     // sends the kernel failed (the frame is lost)
    uint64_t tx_trains = 0;     // sends that carried two or more datagrams (UDP_SEGMENT)
    uint64_t rx_trains = 0;     // reads that returned two or more datagrams (UDP_GRO)
    uint64_t rx_overflows = 0;  // datagrams dropped: more in one read than the queue to the engine holds
    uint64_t tx_peer_socket = 0;  // datagrams sent by a peer's connected send socket
    uint64_t rx_peer_socket = 0;  // datagrams taken from a known peer's send socket
    uint64_t peer_socket_failures = 0;  // peer send sockets given up (their frames go by the NIC's socket)
    uint64_t rx_socket_reads = 0;  // recvmmsg entries read from the receive socket (rxsock=peer)
    uint64_t rx_polls = 0;         // recvmmsg calls, either socket (rx=syscall)
    uint64_t rx_sockets_opened = 0;  // receive sockets opened (rxsock=peer)
};

class UdpTransport final : public Transport {
public:
    static constexpr size_t kAddrLen = 24;
    static constexpr uint8_t kAddrKind = 2;
    static constexpr size_t kHostIdOffset = 8;
    static constexpr uint32_t kPreamble = 24;
    static constexpr uint32_t kMinMtu = 256;
    static constexpr uint32_t kMaxMtu = 65507;  // largest UDP payload over IPv4
    static constexpr uint32_t kFallbackMtu = 1472;  // auto, when the interface is not found: 1500 less 28
    static constexpr uint32_t kRefusalsForDead = 3;
    static constexpr uint32_t kSyscallBurst = 32;     // reads per recvmmsg (rx=syscall)
    static constexpr uint32_t kMaxTrain = 64;         // datagrams per UDP_SEGMENT send (the kernel's limit)
    static constexpr uint32_t kMaxTrainBytes = 65000;  // and their bytes: one IPv4 packet before it is cut
    static constexpr uint32_t kMaxPeerSockets = 64;   // connected send sockets per NIC (txsock=peer)
    static constexpr uint32_t kMaxAnnounces = 10;     // a send socket's announcements without an answer
    static constexpr uint32_t kGroMinSegment = 512;   // two equal datagrams this long in a read set UDP_GRO
    static constexpr uint32_t kNicSocketTicks = 1u << 14;  // with a receive socket: the NIC socket read at least
                                                          // this often (TSC ticks, ~8 us; elsewhere every 16th read)
    static constexpr uint32_t kNicSocketCredit = 64;  // and in that many reads in a row after one brought datagrams
    static constexpr uint32_t kDrainReads = 256;      // the switch to it keeps order for at most that many reads

    // Reads the udp options of a device spec (addr, port, mtu, rx, tx, gso, txsock, rxsock, local=wire); -EINVAL
    // with *why for anything else.
    static int parse_options(const DeviceSpec& spec, UdpOptions* out, std::string* why);
    static int create(const UdpOptions& opt, std::unique_ptr<UdpTransport>* out, std::string* why);
    ~UdpTransport() override;

    const char* name() const override { return "udp"; }
    const uint8_t* local_addr(size_t* len) const override {
        *len = kAddrLen;
        return addr_;
    }
    NICFW_HOT uint32_t max_frame() const override { return mtu_ - kPreamble; }
    bool lossy() const override { return true; }
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    bool peer_alive(int peer) const override { return !peers_[peer].dead; }
    size_t peer_count() const override { return peers_.size(); }
    size_t live_peers() const override { return peers_.size() - free_ids_.size(); }
    // A released peer is freed (kFreed) once no frame for the engine has come from it for
    // kLingerNs after the release (its probes do not count: a live NIC that no longer uses
    // us still probes): a NIC that serves many clients that come and go, or is sent made-up
    // senders, does not fill its table (kMaxPeers) for good.
    void release_peer(int peer) override;
    uint8_t* tx_reserve(int peer, uint32_t len) override;
    void tx_commit(int peer, uint32_t len) override;
    void tx_flush() override;
    NICFW_HOT uint32_t tx_queued() const override { return static_cast<uint32_t>(tx_queue_.size()); }
    bool rx_poll_syscall() const override { return rx_syscall_; }  // rx=multishot reads the ring
    int rx_burst(RxFrame* out, int max) override;
    int rx_burst_spin(RxFrame* out, int max, uint32_t again, SpinStop stop) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

    const UdpStats& stats() const { return stats_; }
    bool multishot() const { return !rx_syscall_; }
    bool segmenting() const { return gso_; }  // UDP_SEGMENT sends in use (gso=auto, and the kernel takes them)
    bool coalescing() const { return gro_; }  // UDP_GRO receives possible (set when trains come)
    bool coalescing_now() const { return gro_on_; }  // UDP_GRO set on the socket at this moment
    int rx_socket_peer() const { return rx_peer_; }  // the peer with a receive socket (rxsock=peer), or -1
    uint16_t port() const;  // host byte order

private:
    struct Peer {
        std::vector<uint8_t> addr;
        sockaddr_in sa{};
        uint64_t host_id = 0;
        uint32_t nonce = 0;
        bool dead = false;
        bool dead_reported = false;
        bool released = false;   // the engine holds no reference (release_peer)
        bool freed = false;      // the index names no peer; on free_ids_
        uint64_t released_ns = 0;  // when the engine released it (a frame takes it back)
        uint32_t refusals = 0;   // ICMP port unreachable since we last heard from it
        uint64_t next_probe_ns = 0;
        bool heard = false;       // a frame came from it: it knows this NIC's address
        bool tx_tried = false;    // a send socket was opened for it (or could not be)
        bool tx_ready = false;    // the peer acknowledged the send socket: frames use it
        int tx_fd = -1;           // its connected send socket (udp_peer_sockets.cc), or -1
        uint16_t tx_port = 0;     // that socket's port, network byte order
        uint32_t announces = 0;   // announcements of it not yet answered
    };
    struct TxSlot {
        msghdr msg;    // msg_name: &to, or null on a peer's connected socket
        iovec iov;
        sockaddr_in to;
        uint8_t* buf;  // kPreamble + frame
        bool resent;   // sent again after a send failed on another destination's ICMP
        int fd;        // the socket it leaves by: fd_, or its peer's send socket
        int peer;      // the peer index a frame is for (-1: a probe)
    };
    struct TxTrain {  // one UDP_SEGMENT send: the queued slots it carries, in order
        msghdr msg;
        iovec iov[kMaxTrain];
        alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(uint16_t))];
        int slots[kMaxTrain];
        uint32_t n;
    };
    struct alignas(cmsghdr) RxCtl {  // a recvmmsg entry's control buffer (the UDP_GRO size)
        uint8_t b[CMSG_SPACE(sizeof(int))];
    };
    struct Pending {  // a received frame not yet handed to the engine
        const uint8_t* data;
        uint32_t len;
        int peer;
        int bid;  // provided buffer to give back, -1 in rx=syscall mode
    };

    // The preamble (above): offsets, types, the frame flag of a peer's send socket.
    static constexpr uint32_t kMagic = 0x31555653u;  // "SVU1" little-endian
    static constexpr size_t kPMagic = 0, kPType = 4, kPFlags = 5, kPPort = 6, kPHost = 8, kPSrcNonce = 16,
                            kPDstNonce = 20;
    static constexpr uint8_t kTypeFrame = 1, kTypeProbe = 2, kTypePort = 3, kTypePortAck = 4, kTypePortNak = 5;
    static constexpr uint8_t kFlagPeerSocket = 1;

    // io_uring user_data: a tx slot index, or kRecvTag | generation for the multishot
    // recvmsg (a new generation each time it is armed), or kCancelTag for the cancel of an
    // older one, or kTrainTag | a TxTrain index.
    static constexpr uint64_t kRecvTag = 1ull << 63, kCancelTag = 1ull << 62, kTrainTag = 1ull << 61;
    static constexpr uint16_t kBufGroup = 0;  // the provided-buffer ring's group

    static uint32_t get32(const uint8_t* p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    static uint64_t get64(const uint8_t* p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    static void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
    static void put64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

    UdpTransport() = default;
    static uint64_t endpoint_key(in_addr_t ip, uint16_t port_be) { return (static_cast<uint64_t>(ip) << 16) | port_be; }
    static void set_buffer(int fd, int force_opt, int opt);  // kSocketBuf, past the system's cap when allowed
    int setup_ring(std::string* why);
    void submit();
    void reap();  // the ring's completions: sends' here, the receive's to on_recv_cqe
    // udp_receive.cc: reading datagrams and taking their frames.
    void arm_recv();
    void rearm_here();
    void on_recv_cqe(const io_uring_cqe& cqe);
    void recv_syscall();
    uint32_t read_again(int fd, uint32_t got);  // rx_burst_spin's reads of fd while got is 0
    int read_socket(int fd, uint32_t first, uint32_t n);  // recvmmsg into mm_[first, first + n); 0 on none
    bool take_datagram(const uint8_t* d, uint32_t len, const sockaddr_in& from, int bid);
    void recycle(int bid);
    void queue_send(int slot);  // slot's datagram goes with the next submit()
    // Slot's preamble (flags and port zero), length and destination.
    void write_preamble(TxSlot& s, const sockaddr_in& to, uint32_t dst_nonce, uint8_t type, uint32_t len);
    void queue_datagram(int slot, Peer& p, int peer, uint8_t type, uint32_t len);
    void send_done(int slot, int res);  // a send's result (a completion, or sendmsg's)
    // udp_segments.cc: trains out (UDP_SEGMENT), trains in (UDP_GRO).
    void setup_segments(const UdpOptions& opt);
    size_t train_length(size_t first) const;  // queued datagrams from tx_queue_[first] one send can carry
    int make_train(size_t first, size_t n);   // a train of them; -1 when none is free
    void train_done(int train, int res);
    void take_read(uint32_t i, uint32_t len);  // recvmmsg entry i: one datagram, or a train of them
    void watch_trains(int n);  // after a read of n entries: UDP_GRO set when trains come in
    bool set_gro(int fd);
    io_uring_sqe* next_sqe();
    // udp_peers.cc: the peer table and liveness.
    int peer_for(const sockaddr_in& sa, uint64_t host_id, uint32_t nonce);
    void free_peer(int id, std::vector<TransportEvent>& events);
    bool send_probe(Peer& p);
    void drain_errors();
    // udp_peer_sockets.cc: a connected send socket per peer (txsock=peer).
    void open_peer_socket(Peer& p);
    void drop_peer_socket(Peer& p);  // its queued frames go by fd_; the fd closes once no request names it
    void close_dropped_sockets();
    void send_by_nic_socket(TxSlot& s);
    // A control datagram (kTypePort, kTypePortAck, kTypePortNak) by the NIC's socket.
    void queue_control(const sockaddr_in& to, uint32_t dst_nonce, uint8_t type, uint16_t port_be);
    // The slow path: opens the send sockets of peers heard from since (and announces them),
    // and in a probe round announces again those not yet acknowledged.
    void announce_peer_sockets(bool again);
    // A datagram from an endpoint that names no peer: a known peer's announced send socket,
    // or -1 (a frame flagged as one that is not known is refused, so its NIC falls back).
    int peer_by_send_socket(const uint8_t* d, const sockaddr_in& from);
    void forget_send_socket(int id);  // the endpoint peer id's frames came from, if any
    void on_port_control(int id, uint8_t type, uint16_t port_be, const sockaddr_in& from);
    // rxsock=peer: a receive socket for peer id's send socket at (ip, port_be), or the one it
    // has connected there anew; none when another peer holds it. close_rx_socket: the
    // peer is gone (what is queued in the socket is lost with it).
    void open_rx_socket(int id, in_addr_t ip, uint16_t port_be);
    void close_rx_socket();
    void hand_over_rx_socket(int gone);

    int fd_ = -1;
    io_uring ring_{};
    bool ring_ok_ = false;
    uint32_t mtu_ = 1472;
    uint8_t addr_[kAddrLen] = {};
    uint64_t host_id_ = 0;
    uint32_t nonce_ = 0;

    std::vector<Peer> peers_;
    std::vector<int> free_ids_;  // freed indices, for the next new peer
    std::unordered_map<uint64_t, std::vector<int>> by_endpoint_;  // (ip << 16 | port) -> peers
    std::unordered_map<uint64_t, int> by_send_socket_;  // a peer's send socket's endpoint -> the peer
    // The entry of by_send_socket_ found last (a frame from a peer's send socket looks it
    // up; a stream from one peer finds the same one each time); kNoEndpoint after any change.
    static constexpr uint64_t kNoEndpoint = ~uint64_t{0};  // endpoint_key is 48 bits
    uint64_t last_send_socket_ = kNoEndpoint;
    int last_send_socket_id_ = -1;
    bool peer_sockets_ = false;
    bool sockets_to_open_ = false;  // a peer was heard from for the first time
    uint32_t peer_sockets_open_ = 0;
    bool rx_sockets_ = false;       // rxsock=peer, and the NIC socket's reuseport group was made
    int rx_fd_ = -1;                // the receive socket, or -1
    int rx_peer_ = -1;              // its peer
    in_addr_t rx_ip_ = 0;           // and the send socket it is connected to
    uint16_t rx_port_ = 0;          // (network byte order)
    uint32_t nic_credit_ = 0;       // reads of the NIC socket still due every burst
    uint64_t nic_read_tsc_ = 0;     // when the NIC socket was last read (TSC; a step count elsewhere)
    uint32_t spin_again_ = 0;  // rx_burst_spin: reads left to take at once when one finds nothing
    Transport::SpinStop spin_stop_{};
    bool rx_drain_ = false;         // the receive socket's peer may still have frames at the NIC socket
    uint32_t drain_reads_ = 0;      // NIC socket reads left before rx_drain_ gives up
    void start_drain() {
        rx_drain_ = true;
        drain_reads_ = kDrainReads;
    }
    bool nic_read_due();
    std::vector<int> dropped_fds_;  // peer send sockets to close once no unsubmitted request names them

    // tx: a fixed pool of frame buffers; a slot is free again when its send completes.
    std::vector<TxSlot> tx_slots_;
    std::vector<uint8_t> tx_mem_;
    std::vector<int> tx_free_;
    int tx_cur_ = -1;        // slot handed out by tx_reserve
    std::vector<int> tx_queue_;  // slots committed, not yet handed to the kernel
    bool tx_direct_ = true;
    uint32_t unsubmitted_ = 0;   // requests in the submission queue not yet submitted
    uint32_t ring_sends_ = 0;    // sends handed to the ring whose completions are not reaped yet
    uint32_t step_frames_ = 0;  // committed since the last tx_flush
    bool gso_ = false;           // trains out
    bool gro_ = false;           // trains in (rx=syscall only: ring buffers are one datagram long)
    bool gro_on_ = false;        // with gro_: UDP_GRO set on the socket (watch_trains)
    std::vector<TxTrain> trains_;
    std::vector<int> train_free_;

    // rx: provided buffers (multishot) or recvmmsg buffers (rx=syscall).
    bool rx_syscall_ = false;
    bool recv_armed_ = false;
    uint64_t recv_gen_ = 0;          // generation of the armed multishot receive
    const void* armer_ = nullptr;    // the thread that armed it (this_thread_tag)
    io_uring_buf_ring* br_ = nullptr;
    size_t br_len_ = 0;
    uint8_t* rx_mem_ = nullptr;
    size_t rx_mem_len_ = 0;
    uint32_t rx_bufs_ = 0, rx_buf_size_ = 0, rx_buf_len_ = 0;  // count, stride, length
    msghdr rx_msg_{};  // the multishot recvmsg's template: name length only
    std::vector<Pending> pending_;  // a ring (pend_cap() entries)
    uint32_t pend_cap() const { return static_cast<uint32_t>(pending_.size()); }
    uint32_t pend_head_ = 0, pend_count_ = 0;
    std::vector<int> taken_;        // buffers handed out by rx_burst
    std::vector<mmsghdr> mm_;
    std::vector<iovec> mm_iov_;
    std::vector<sockaddr_in> mm_from_;
    std::vector<RxCtl> mm_ctl_;     // with gro_
    uint8_t* gro_mem_ = nullptr;    // with gro_: kSyscallBurst buffers of a whole train each
    size_t gro_mem_len_ = 0;

    bool errors_pending_ = false;
    UdpStats stats_;
};

}  // namespace softvia::nicfw
