// dpdk transport: raw Ethernet frames through one DPDK rte_ethdev port per NIC.
//
// Frame on the wire (docs/transports.md, "## dpdk"):
//   0..5   destination MAC          6..11  source MAC
//   12..13 EtherType 0x88B5 (IEEE 802 local experimental 1)
//   14     shim version (1)         15     kind: 0 a nicfw frame; 1 BYE, 2 BYE-ACK (memif close)
//   16..19 source NIC nonce         20..23 destination NIC nonce
//   24..31 source host_identity()   32..   the nicfw frame (nicfw_frame_hdr first)
// Multi-byte shim fields are little-endian. The source nonce and host identity let a
// receiver build the full address of a peer it has never heard of (a connection request
// from a stranger); the destination nonce lets several NICs share one MAC (two processes
// on one af_packet interface) and drops frames meant for an earlier NIC with that MAC.
//
// NIC address (20 bytes): [0] kind 3, [1] version 1, [2..7] MAC, [8..15] host_identity()
// (the same offset as the udp address, for the same-host shortcut), [16..19] nonce.
//
// The EAL is started once per process, by the first dpdk NIC; each NIC then takes its
// own port (a vdev it creates, or a bound port it names). Busy-polled: rx_burst calls
// rte_eth_rx_burst, committed frames go out in one rte_eth_tx_burst in tx_flush(). Mbufs
// come from one mempool per NIC; nothing is allocated per frame.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nicfw/device.h"
#include "nicfw/transport.h"

struct rte_mempool;
struct rte_mbuf;

namespace softvia::nicfw {

// Options of a dpdk device name, checked without touching DPDK.
struct DpdkOptions {
    std::string vdev_name;              // vdev=: the device name (net_af_packet0), or empty; may hold %n
    std::string vdev_args;              // its arguments with ';' turned into ','; may hold %n
    int port = -1;                      // port=: an already probed port, or -1
    std::vector<std::string> eal_extra; // eal=: extra EAL arguments
    uint32_t mtu = 0;                   // mtu=: 0 keeps the port's own
    uint16_t rxd = 512, txd = 512;      // rxd=, txd=: descriptor ring sizes
    bool huge = false;                  // huge=1: use hugepages (a real server)
};

// "%n" in vdev= stands for the NIC's index in its process: the lowest n (0..kMaxNicIndex)
// whose vdev name is free there, so two NICs of one process each take their own
// interface (vdev=net_af_packet%n;iface=veth%n). substitute_nic_index writes n in.
constexpr unsigned kMaxNicIndex = 63;
std::string substitute_nic_index(const std::string& s, unsigned n);

// Reads the transport's options from a parsed device name. Options owned by others
// (progress, local) are skipped. -EINVAL with *why for anything malformed.
int parse_dpdk_options(const DeviceSpec& spec, DpdkOptions* out, std::string* why);

// The EAL command line the first NIC starts DPDK with: our defaults (each left out when
// eal= gives the same option), then eal=. cpu is the lcore for the calling thread,
// tag makes the runtime-file prefix unique to this process.
std::vector<std::string> dpdk_eal_args(const DpdkOptions& o, int cpu, const std::string& tag);

class DpdkTransport final : public Transport {
public:
    static constexpr uint16_t kEtherType = 0x88B5;
    static constexpr uint8_t kAddrKind = 3;
    static constexpr size_t kAddrLen = 20;
    static constexpr uint32_t kShimLen = 18;  // after the 14-byte Ethernet header
    static constexpr uint32_t kHdrLen = 14 + kShimLen;

    // Starts the EAL if this is the first dpdk NIC of the process, then opens the port.
    // A negative errno with *why when DPDK cannot start; never exits the process.
    static int create(const DpdkOptions& o, std::unique_ptr<DpdkTransport>* out, std::string* why);
    ~DpdkTransport() override;

    const char* name() const override { return "dpdk"; }
    const uint8_t* local_addr(size_t* len) const override {
        *len = kAddrLen;
        return addr_;
    }
    uint32_t max_frame() const override { return max_frame_; }
    bool lossy() const override { return true; }
    int resolve(const uint8_t* addr, size_t len) override;
    const std::vector<uint8_t>& peer_addr(int peer) const override { return peers_[peer].addr; }
    bool peer_alive(int) const override { return true; }  // a lossy wire: retransmission decides
    size_t peer_count() const override { return peers_.size(); }
    uint8_t* tx_reserve(int peer, uint32_t len) override;
    void tx_commit(int peer, uint32_t len) override;
    void tx_flush() override;
    uint32_t tx_queued() const override { return static_cast<uint32_t>(txq_n_); }
    int rx_burst(RxFrame* out, int max) override;
    void rx_release() override;
    void poll_slow(std::vector<TransportEvent>& events) override;

    // Frames dropped on receive, by reason (for tests and diagnostics).
    struct Drops {
        uint64_t foreign = 0;    // another EtherType or shim version
        uint64_t short_ = 0;     // shorter than our headers, or chained mbufs
        uint64_t not_ours = 0;   // another destination nonce, or our own frame echoed
        uint64_t strangers = 0;  // a new sender while the peer table is full
        uint64_t tx_stuck = 0;   // committed frames the port would not take for ~2 ms
        uint64_t quiesced = 0;   // frames not sent: a memif peer said BYE (below)
    };
    const Drops& drops() const { return drops_; }
    uint16_t port_id() const { return port_; }

private:
    static constexpr int kBurst = 32;
    static constexpr int kTxQueue = 256;      // committed frames not yet taken by the port
    static constexpr uint32_t kAfXdpFillRing = 4096;        // DPDK 22.11 net_af_xdp: 2 x its 2048 default
    static constexpr uint32_t kAfXdpCompletionRing = 2048;
    static constexpr uint16_t kAfXdpMinRing = 2048;
    static constexpr size_t kMaxPeers = 4096; // a flood of strangers cannot grow us further

    struct Peer {
        std::vector<uint8_t> addr;
        uint8_t mac[6];
        uint32_t nonce;
        bool self;
    };

    struct PeerKey {
        uint64_t mac;
        uint32_t nonce;
        bool operator==(const PeerKey& o) const { return mac == o.mac && nonce == o.nonce; }
    };
    struct PeerKeyHash {
        size_t operator()(const PeerKey& k) const;
    };

    // net_memif close handshake. DPDK 22.11's memif tears a connection down in its
    // interrupt thread (memif_disconnect: link down, then the shared rings unmapped) with
    // nothing to stop a burst running in another thread at that moment: a process whose
    // memif peer closes while it polls can crash in rte_eth_tx_burst/rx_burst (seen:
    // SIGSEGV in 2 of 30 runs of dpdk_stream with thread progress). So a closing NIC says
    // BYE and waits (bounded) for BYE-ACK; a NIC that receives BYE answers, stops touching
    // the port (quiesced) and, when it closes itself, first waits for the link to go down.
    enum ShimKind : uint8_t { kShimFrame = 0, kShimBye = 1, kShimByeAck = 2 };
    static constexpr int kByeWaitMs = 200;
    void send_shim(ShimKind kind);
    bool link_up() const;
    void memif_goodbye();
    void on_shim(uint8_t kind, uint32_t src_nonce);

    DpdkTransport() = default;
    int open_port(const DpdkOptions& o, std::string* why);
    int peer_for(const uint8_t mac[6], uint32_t nonce, uint64_t host);
    rte_mbuf* alloc_mbuf();
    static PeerKey key(const uint8_t mac[6], uint32_t nonce);

    uint16_t port_ = 0;
    bool port_open_ = false, port_started_ = false;
    std::string vdev_name_;        // the vdev we created, removed again at close
    rte_mempool* pool_ = nullptr;
    uint32_t max_frame_ = 0;
    uint8_t mac_[6] = {};
    uint32_t nonce_ = 0;
    uint64_t host_ = 0;
    uint8_t addr_[kAddrLen] = {};

    std::vector<Peer> peers_;
    std::unordered_map<PeerKey, int, PeerKeyHash> by_key_;
    int last_rx_peer_ = -1;  // one-entry cache for the rx lookup
    int self_ = -1;          // our own address as a peer (frames looped back in software)

    rte_mbuf* stash_[kBurst] = {};  // mbufs taken from the pool in bulk
    int stash_n_ = 0;
    rte_mbuf* reserved_ = nullptr;  // between tx_reserve and tx_commit
    rte_mbuf* txq_[kTxQueue] = {};
    int txq_n_ = 0;
    bool tx_progress_ = false, tx_stalled_ = false;  // since the last slow tick
    bool memif_ = false;        // net_memif: the close handshake above
    bool quiesced_ = false;     // the memif peer said BYE: no bursts until a new connection
    bool seen_down_ = false;    // quiesced and the link has gone down since
    bool closing_ = false;      // in memif_goodbye: BYE sent
    bool bye_done_ = false;     // closing: answered (BYE-ACK), or the peer closes first
    bool needs_kicks_ = false;  // net_af_xdp: empty bursts after sending (tx_flush)
    int kick_ticks_ = 0;        // slow ticks of empty bursts left
    static constexpr int kKickTicks = 3;
    rte_mbuf* loop_[kBurst] = {};   // frames to ourselves, received on the next burst
    int loop_n_ = 0;
    rte_mbuf* held_[kBurst] = {};   // handed out by rx_burst until rx_release
    int held_n_ = 0;
    Drops drops_;
};

}  // namespace softvia::nicfw
