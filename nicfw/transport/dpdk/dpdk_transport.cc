// dpdk transport implementation. Wire format and address layout: dpdk_transport.h.
#include "dpdk_transport.h"

#include <pthread.h>
#include <sched.h>
#include <sys/random.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>

#include "nicfw/abi.h"
#include "nicfw/clock.h"

namespace softvia::nicfw {

// ---------------------------------------------------------------- options
namespace {
bool parse_uint(const std::string& s, unsigned long lo, unsigned long hi, unsigned long* out) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    unsigned long v = std::stoul(s);
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

// ';' in an option value stands for ',' (',' separates our own options).
std::string semicolons_to_commas(std::string s) {
    std::replace(s.begin(), s.end(), ';', ',');
    return s;
}
}  // namespace

std::string substitute_nic_index(const std::string& s, unsigned n) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '%' && i + 1 < s.size() && s[i + 1] == 'n') {
            out += std::to_string(n);
            i++;
        } else {
            out += s[i];
        }
    }
    return out;
}

int parse_dpdk_options(const DeviceSpec& spec, DpdkOptions* out, std::string* why) {
    DpdkOptions o;
    for (const auto& [k, v] : spec.opts) {
        unsigned long n;
        if (common_device_option(k)) continue;  // the engine's and the same-host wrapper's
        if (k == "vdev") {
            std::string s = semicolons_to_commas(v);
            size_t comma = s.find(',');
            o.vdev_name = s.substr(0, comma);
            o.vdev_args = comma == std::string::npos ? "" : s.substr(comma + 1);
            std::string plain_name = substitute_nic_index(o.vdev_name, 0);
            if (plain_name.empty() ||
                plain_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                    std::string::npos) {
                *why = "dpdk: vdev= needs a driver instance name such as net_af_packet0, not '" + o.vdev_name + "'";
                return -EINVAL;
            }
            if (o.vdev_args.find("%n") != std::string::npos && o.vdev_name.find("%n") == std::string::npos) {
                *why = "dpdk: %n in the vdev arguments needs %n in the vdev name too (e.g. "
                       "vdev=net_af_packet%n;iface=veth%n), or the second NIC would find the name taken";
                return -EINVAL;
            }
        } else if (k == "port") {
            if (!parse_uint(v, 0, 65535, &n)) {
                *why = "dpdk: port= must be a port number, not '" + v + "'";
                return -EINVAL;
            }
            o.port = static_cast<int>(n);
        } else if (k == "eal") {
            std::string s = semicolons_to_commas(v);
            std::replace(s.begin(), s.end(), '+', ' ');
            size_t pos = 0;
            while ((pos = s.find_first_not_of(' ', pos)) != std::string::npos) {
                size_t end = s.find(' ', pos);
                o.eal_extra.push_back(s.substr(pos, end - pos));
                pos = end;
            }
        } else if (k == "mtu") {
            if (!parse_uint(v, 128, 9600, &n)) {
                *why = "dpdk: mtu= must be 128..9600, not '" + v + "'";
                return -EINVAL;
            }
            o.mtu = static_cast<uint32_t>(n);
        } else if (k == "rxd" || k == "txd") {
            if (!parse_uint(v, 32, 16384, &n)) {
                *why = "dpdk: " + k + "= must be 32..16384 descriptors, not '" + v + "'";
                return -EINVAL;
            }
            (k == "rxd" ? o.rxd : o.txd) = static_cast<uint16_t>(n);
        } else if (k == "huge") {
            if (v != "0" && v != "1") {
                *why = "dpdk: huge= must be 0 or 1, not '" + v + "'";
                return -EINVAL;
            }
            o.huge = v == "1";
        } else {
            *why = "dpdk takes no option '" + k +
                   "' (a vdev's own arguments go inside vdev= with ';' between them, "
                   "e.g. vdev=net_af_packet0;iface=veth0)";
            return -EINVAL;
        }
    }
    if (o.vdev_name.empty() == (o.port < 0)) {
        *why = "dpdk: give exactly one of vdev=<driver instance;args> or port=<n>";
        return -EINVAL;
    }
    *out = std::move(o);
    return 0;
}

std::vector<std::string> dpdk_eal_args(const DpdkOptions& o, int cpu, const std::string& tag) {
    // Does eal= already set one of these options (--opt, --opt=x, or -x / -xVALUE)?
    auto given = [&o](std::initializer_list<const char*> names) {
        for (const std::string& a : o.eal_extra)
            for (const char* n : names) {
                size_t l = strlen(n);
                if (a.compare(0, l, n) != 0) continue;
                if (a.size() == l || a[l] == '=' || (l == 2 && n[1] != '-')) return true;
            }
        return false;
    };
    std::vector<std::string> args{"softvia"};
    auto add = [&args](std::initializer_list<std::string> a) { args.insert(args.end(), a); };
    if (!given({"-l", "-c", "--lcores"})) add({"-l", std::to_string(cpu)});
    if (!o.huge) {
        add({"--no-huge"});
        if (!given({"-m", "--socket-mem"})) add({"-m", "64"});
        // --in-memory implies --legacy-mem with --no-huge, which DPDK refuses; no shared
        // config and a per-process prefix keep two processes apart just the same.
        if (!given({"--no-shconf", "--in-memory"})) add({"--no-shconf"});
    } else if (!given({"--no-shconf", "--in-memory"})) {
        add({"--in-memory"});
    }
    if (!given({"--file-prefix"})) add({"--file-prefix=" + tag});
    if (!o.vdev_name.empty() && !given({"-a", "--allow", "--no-pci"})) add({"--no-pci"});
    if (!given({"--telemetry", "--no-telemetry"})) add({"--no-telemetry"});
    add({"--log-level=error"});  // first, so a --log-level in eal= wins
    args.insert(args.end(), o.eal_extra.begin(), o.eal_extra.end());
    return args;
}

// ---------------------------------------------------------------- EAL, once per process
namespace {
struct Eal {
    std::mutex m;
    bool started = false;
    int err = 0;                   // the first failure, returned to every later NIC
    std::string why;
    std::set<uint16_t> ports;      // ports owned by a NIC of this process
    std::set<uint16_t> spent;      // bound ports closed once: not reopened in this process
    unsigned pools = 0;            // mempool names must be unique
};
Eal& eal() {
    static Eal e;
    return e;
}

std::string rte_reason(int err) { return rte_strerror(err > 0 ? err : -err); }

// Starts the EAL with the first NIC's options; the caller holds eal().m.
int start_eal(const DpdkOptions& o, std::string* why) {
    Eal& e = eal();
    int cpu = sched_getcpu();
    if (cpu < 0) cpu = 0;
    char tag[48];
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(getpid()) * 2654435761u;
    snprintf(tag, sizeof tag, "softvia-%d-%08x", static_cast<int>(getpid()), r);
    // EAL keeps pointers into argv; these strings live as long as the process.
    static std::vector<std::string> args;
    static std::vector<char*> argv;
    args = dpdk_eal_args(o, cpu, tag);
    argv.clear();
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // EAL pins the calling thread to its lcore; give the application its own mask back.
    cpu_set_t mask;
    bool have_mask = pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0;
    rte_openlog_stream(stderr);  // DPDK logs to stdout by default; programs print results there
    int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
    int err = rte_errno;
    if (have_mask) pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
    if (rc < 0) {
        e.err = -(err ? err : EIO);
        std::string cmd;
        for (auto& a : args) cmd += " " + a;
        e.why = "dpdk: EAL could not start (" + rte_reason(err) + "), EAL arguments:" + cmd;
        if (geteuid() != 0) e.why += " (not root: DPDK needs root or CAP_NET_RAW/CAP_SYS_ADMIN)";
        *why = e.why;
        return e.err;
    }
    // --no-shconf leaves an empty runtime directory behind; nothing will use it.
    if (!o.huge) rmdir(rte_eal_get_runtime_dir());
    e.started = true;
    return 0;
}

// A memif is the whole wire: wait for its peer. A client whose handshake met a server
// that was not started yet stays down, so it reconnects (stop, start) each second.
bool memif_link_up(uint16_t port, bool client) {
    for (int ms = 0; ms < 10000; ms += 10) {
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) return true;
        if (client && ms % 1000 == 990 && rte_eth_dev_stop(port) == 0) rte_eth_dev_start(port);
        usleep(10000);
    }
    return false;
}

// The NIC's mbuf pool. A software port (a vdev: af_packet, af_xdp, memif) does no DMA,
// so its mbufs need not be IOVA-contiguous and are packed one after another. Without
// that, under --no-huge (4 KiB pages) DPDK starts each 2,368-byte mbuf on a page of its
// own, and the pool spans 1.7 times what net_af_xdp registers as its UMEM (populated
// size x object size from the first object): 42% of the mbufs lay beyond the UMEM, the
// kernel refused them as invalid transmit descriptors and useless fill entries, and
// once a stream cycled through the whole pool (a firmware thread has no mempool cache)
// frames stopped both ways.
rte_mempool* create_pool(const char* name, unsigned n, uint16_t room, bool dense) {
    if (!dense) return rte_pktmbuf_pool_create(name, n, 64, 0, room, SOCKET_ID_ANY);
    rte_mempool* mp = rte_mempool_create_empty(name, n, sizeof(rte_mbuf) + room, 64, sizeof(rte_pktmbuf_pool_private),
                                               SOCKET_ID_ANY, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (!mp) return nullptr;
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = room;
    int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr);
    if (rc == 0) {
        rte_pktmbuf_pool_init(mp, &priv);
        rc = rte_mempool_populate_default(mp);
    }
    if (rc < 0) {
        rte_mempool_free(mp);
        rte_errno = -rc;
        return nullptr;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    return mp;
}

void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
uint32_t get32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }
}  // namespace

// ---------------------------------------------------------------- open and close
int DpdkTransport::create(const DpdkOptions& o, std::unique_ptr<DpdkTransport>* out, std::string* why) {
    // Declared before the lock: a half-opened transport is destroyed after it is released.
    std::unique_ptr<DpdkTransport> t(new DpdkTransport());
    Eal& e = eal();
    std::lock_guard<std::mutex> g(e.m);
    if (e.err) {
        *why = e.why + " (EAL can be started only once per process)";
        return e.err;
    }
    if (!e.started) {
        int rc = start_eal(o, why);
        if (rc < 0) return rc;
    }
    int rc = t->open_port(o, why);
    if (rc < 0) return rc;  // the destructor undoes what open_port did
    *out = std::move(t);
    return 0;
}

// Called under eal().m.
int DpdkTransport::open_port(const DpdkOptions& o, std::string* why) {
    Eal& e = eal();
    uint16_t port;
    if (!o.vdev_name.empty()) {
        // %n: the lowest index whose vdev is not open in this process (a NIC closed
        // earlier frees its index), so the NICs of one process each get their own.
        bool indexed = o.vdev_name.find("%n") != std::string::npos;
        unsigned n = 0;
        std::string name = substitute_nic_index(o.vdev_name, n);
        while (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0) {
            if (!indexed || ++n > kMaxNicIndex) {
                *why = "dpdk: vdev " + name + " is already open in this process; give each NIC its own name" +
                       (indexed ? "" : " (or write %n in vdev= for one per NIC)");
                return -EBUSY;
            }
            name = substitute_nic_index(o.vdev_name, n);
        }
        std::string args = substitute_nic_index(o.vdev_args, n);
        int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str());
        if (rc < 0) {
            *why = "dpdk: cannot create vdev " + name + " (" + args + "): " + rte_reason(rc) +
                   " (is its driver installed, the interface or socket there, and are we root?)";
            return rc;
        }
        vdev_name_ = name;
        if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0) {
            *why = "dpdk: vdev " + name + " was created but is not an Ethernet port";
            return -ENODEV;
        }
    } else {
        port = static_cast<uint16_t>(o.port);
        if (!rte_eth_dev_is_valid_port(port) || e.spent.count(port)) {
            *why = "dpdk: no port " + std::to_string(o.port) + " (" + std::to_string(rte_eth_dev_count_avail()) +
                   " probed; a bound port is opened once per process, and a first NIC with vdev= started "
                   "DPDK with --no-pci)";
            return -ENODEV;
        }
    }
    if (e.ports.count(port)) {
        *why = "dpdk: port " + std::to_string(port) + " is already used by another NIC of this process";
        return -EBUSY;
    }
    port_ = port;
    port_open_ = true;
    e.ports.insert(port);

    auto fail = [why](const char* what, int rc) {
        *why = std::string("dpdk: ") + what + ": " + rte_reason(rc);
        return rc < 0 ? rc : -EIO;
    };
    rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(port, &info);
    if (rc < 0) return fail("cannot query the port", rc);
    rte_eth_conf conf{};
    rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc < 0) return fail("cannot configure the port", rc);
    uint16_t mtu = 0;
    if (o.mtu) {
        rc = rte_eth_dev_set_mtu(port, static_cast<uint16_t>(o.mtu));
        if (rc < 0) return fail("cannot set the MTU", rc);
    }
    if (rte_eth_dev_get_mtu(port, &mtu) < 0 || mtu == 0) mtu = RTE_ETHER_MTU;
    uint16_t rxd = o.rxd, txd = o.txd;
    // net_af_xdp overruns its receive ring, and stalls sending with a transmit ring
    // below its 2048-entry completion ring (measured on veth): at least 2048 each.
    const bool af_xdp = o.vdev_name.rfind("net_af_xdp", 0) == 0;
    if (af_xdp) {
        rxd = std::max<uint16_t>(rxd, kAfXdpMinRing);
        txd = std::max<uint16_t>(txd, kAfXdpMinRing);
    }
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
    if (rc < 0) return fail("cannot size the descriptor rings", rc);

    // Room for a whole frame in one mbuf: we never chain.
    uint32_t room = std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + mtu + 14 + 8);
    uint32_t n = rxd + txd + kTxQueue + 3 * kBurst + 2 * 64;
    // net_af_xdp makes our pool its UMEM and keeps mbufs of it in rings of its own size,
    // whatever rxd/txd say: its fill ring (2 x 2048) and completion ring (2048). Without
    // room for those its queue set-up fails (EINVAL) or, barely above, the fill ring
    // runs dry under a stream and the kernel drops what arrives.
    needs_kicks_ = af_xdp;
    memif_ = o.vdev_name.rfind("net_memif", 0) == 0;
    if (af_xdp) n += kAfXdpFillRing + kAfXdpCompletionRing;
    char pname[RTE_MEMPOOL_NAMESIZE];
    snprintf(pname, sizeof pname, "softvia%u", e.pools++);
    pool_ = create_pool(pname, n, static_cast<uint16_t>(room), !o.vdev_name.empty());
    if (!pool_)
        return fail("cannot create the mbuf pool (more memory: eal=-m+256)", rte_errno ? -rte_errno : -ENOMEM);
    rc = rte_eth_rx_queue_setup(port, 0, rxd, SOCKET_ID_ANY, nullptr, pool_);
    if (rc < 0) return fail("cannot set up the receive queue", rc);
    rc = rte_eth_tx_queue_setup(port, 0, txd, SOCKET_ID_ANY, nullptr);
    if (rc < 0) return fail("cannot set up the transmit queue", rc);
    rc = rte_eth_dev_start(port);
    // A memif client cannot start before its server listens; the two processes of a
    // job start together, so give the server a few seconds.
    for (int tries = 0; rc < 0 && o.vdev_name.rfind("net_memif", 0) == 0 && tries < 500; tries++) {
        usleep(10000);
        rc = rte_eth_dev_start(port);
    }
    if (rc < 0) return fail("cannot start the port", rc);
    port_started_ = true;
    if (o.vdev_name.rfind("net_memif", 0) == 0 && !memif_link_up(port, o.vdev_args.find("role=client") != std::string::npos)) {
        *why = "dpdk: memif " + vdev_name_ + ": no peer connected within 10 s";
        return -ETIMEDOUT;
    }
    rte_ether_addr mac;
    rc = rte_eth_macaddr_get(port, &mac);
    if (rc < 0) return fail("cannot read the MAC address", rc);
    memcpy(mac_, mac.addr_bytes, 6);

    uint32_t frame = std::min<uint32_t>(mtu, room - RTE_PKTMBUF_HEADROOM - 14);
    if (frame < kShimLen + sizeof(nicfw_frame_hdr) + 64) {
        *why = "dpdk: MTU " + std::to_string(mtu) + " leaves no room for a frame";
        return -EINVAL;
    }
    max_frame_ = frame - kShimLen;
    if (getrandom(&nonce_, sizeof nonce_, 0) != sizeof nonce_) nonce_ = static_cast<uint32_t>(getpid()) ^ 0x9e3779b9u;
    if (nonce_ == 0) nonce_ = 1;
    host_ = host_identity();
    addr_[0] = kAddrKind;
    addr_[1] = 1;
    memcpy(addr_ + 2, mac_, 6);
    memcpy(addr_ + 8, &host_, 8);
    put32(addr_ + 16, nonce_);
    return 0;
}

DpdkTransport::~DpdkTransport() {
    std::lock_guard<std::mutex> g(eal().m);
    if (port_started_) tx_flush();  // best effort: the engine's last words (disconnects)
    if (port_started_ && memif_) memif_goodbye();
    rte_pktmbuf_free_bulk(stash_, stash_n_);
    rte_pktmbuf_free_bulk(txq_, txq_n_);
    rte_pktmbuf_free_bulk(loop_, loop_n_);
    rte_pktmbuf_free_bulk(held_, held_n_);
    if (reserved_) rte_pktmbuf_free(reserved_);
    if (port_started_) rte_eth_dev_stop(port_);
    if (port_open_) {
        rte_eth_dev_close(port_);  // gives the receive ring's mbufs back before the pool goes
        eal().ports.erase(port_);
        if (vdev_name_.empty()) eal().spent.insert(port_);
    }
    if (!vdev_name_.empty()) rte_eal_hotplug_remove("vdev", vdev_name_.c_str());
    if (pool_) rte_mempool_free(pool_);
}

// ---------------------------------------------------------------- memif close handshake
bool DpdkTransport::link_up() const {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

// A shim-only frame to whoever is at the other end of the port (a memif has one peer).
void DpdkTransport::send_shim(ShimKind kind) {
    rte_mbuf* m = alloc_mbuf();
    if (!m) return;
    uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
    memset(d, 0xff, 6);  // broadcast: the peer's MAC may not be known yet
    memcpy(d + 6, mac_, 6);
    d[12] = kEtherType >> 8;
    d[13] = kEtherType & 0xff;
    d[14] = 1;
    d[15] = kind;
    put32(d + 16, nonce_);
    put32(d + 20, 0);
    memcpy(d + 24, &host_, 8);
    m->data_len = static_cast<uint16_t>(kHdrLen);
    m->pkt_len = kHdrLen;
    if (rte_eth_tx_burst(port_, 0, &m, 1) != 1) rte_pktmbuf_free(m);
}

void DpdkTransport::on_shim(uint8_t kind, uint32_t src_nonce) {
    if (kind == kShimByeAck) {
        if (closing_) bye_done_ = true;
        return;
    }
    if (kind != kShimBye || quiesced_) return;
    // Both ends closing at once: the lower nonce closes first, the other answers it and
    // waits for the link to go down (two memif_disconnects in one process at once, ours
    // and the interrupt thread's, would race the same way).
    if (closing_ && nonce_ < src_nonce) return;
    quiesced_ = true;
    seen_down_ = false;
    bye_done_ = closing_;
    send_shim(kShimByeAck);  // our last burst on this connection
}

// At close: BYE, then up to kByeWaitMs for the answer; or, if the peer closes first,
// for the link to go down. A peer that does not poll meanwhile (inline progress, not in
// a VIPL call) is not waited for longer than that.
void DpdkTransport::memif_goodbye() {
    auto ms_from_now = [](int ms) { return now_ns() / 1000000 + (uint64_t)ms; };
    uint64_t end = ms_from_now(kByeWaitMs);
    if (!quiesced_ && link_up()) {
        closing_ = true;
        send_shim(kShimBye);
        while (!bye_done_ && link_up() && ms_from_now(0) < end) {
            rte_mbuf* rx[kBurst];
            uint16_t got = rte_eth_rx_burst(port_, 0, rx, kBurst);
            for (uint16_t i = 0; i < got; i++) {
                const uint8_t* d = rte_pktmbuf_mtod(rx[i], const uint8_t*);
                if (rx[i]->data_len >= kHdrLen && d[12] == (kEtherType >> 8) && d[13] == (kEtherType & 0xff) &&
                    d[14] == 1 && d[15] != kShimFrame)
                    on_shim(d[15], get32(d + 16));
            }
            rte_pktmbuf_free_bulk(rx, got);
            if (!got) usleep(50);
        }
    }
    if (quiesced_)
        while (link_up() && ms_from_now(0) < end) usleep(1000);
}

// ---------------------------------------------------------------- peers
size_t DpdkTransport::PeerKeyHash::operator()(const PeerKey& k) const {
    return static_cast<size_t>((k.mac * 0x9E3779B97F4A7C15ull) ^ k.nonce);
}

DpdkTransport::PeerKey DpdkTransport::key(const uint8_t mac[6], uint32_t nonce) {
    PeerKey k{0, nonce};
    memcpy(&k.mac, mac, 6);
    return k;
}

int DpdkTransport::peer_for(const uint8_t mac[6], uint32_t nonce, uint64_t host) {
    auto it = by_key_.find(key(mac, nonce));
    if (it != by_key_.end()) return it->second;
    if (peers_.size() >= kMaxPeers) return -ENOSPC;
    Peer p;
    p.addr.resize(kAddrLen);
    p.addr[0] = kAddrKind;
    p.addr[1] = 1;
    memcpy(p.addr.data() + 2, mac, 6);
    memcpy(p.addr.data() + 8, &host, 8);
    put32(p.addr.data() + 16, nonce);
    memcpy(p.mac, mac, 6);
    p.nonce = nonce;
    p.self = nonce == nonce_ && memcmp(mac, mac_, 6) == 0;
    peers_.push_back(std::move(p));
    int id = static_cast<int>(peers_.size() - 1);
    by_key_[key(mac, nonce)] = id;
    if (peers_[id].self) self_ = id;
    return id;
}

int DpdkTransport::resolve(const uint8_t* addr, size_t len) {
    if (addr == nullptr || len != kAddrLen || addr[0] != kAddrKind || addr[1] != 1) return -EINVAL;
    uint32_t nonce = get32(addr + 16);
    if (nonce == 0 || (addr[2] & 1)) return -EINVAL;  // no NIC has nonce 0 or a group MAC
    int id = peer_for(addr + 2, nonce, get64(addr + 8));
    return id == -ENOSPC ? -EHOSTUNREACH : id;
}

// ---------------------------------------------------------------- transmit
rte_mbuf* DpdkTransport::alloc_mbuf() {
    if (stash_n_ == 0) {
        if (rte_pktmbuf_alloc_bulk(pool_, stash_, kBurst) == 0) {
            stash_n_ = kBurst;
        } else {
            return rte_pktmbuf_alloc(pool_);  // nearly empty pool: one at a time
        }
    }
    return stash_[--stash_n_];
}

uint8_t* DpdkTransport::tx_reserve(int peer, uint32_t len) {
    if (len > max_frame_ || reserved_) return nullptr;
    const Peer& p = peers_[peer];
    if (p.self) {
        if (loop_n_ == kBurst) return nullptr;
    } else if (txq_n_ == kTxQueue) {
        // A step hands the port at most a queue's worth: a large send leaves over
        // several steps, as through a NIC's descriptor ring, and the engine gets back
        // to receiving (ACKs, other VIs) in between. The engine retries next step.
        return nullptr;
    }
    rte_mbuf* m = alloc_mbuf();
    if (!m) return nullptr;
    uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
    memcpy(d, p.mac, 6);
    memcpy(d + 6, mac_, 6);
    d[12] = kEtherType >> 8;
    d[13] = kEtherType & 0xff;
    d[14] = 1;
    d[15] = 0;
    put32(d + 16, nonce_);
    put32(d + 20, p.nonce);
    memcpy(d + 24, &host_, 8);
    reserved_ = m;
    return d + kHdrLen;
}

void DpdkTransport::tx_commit(int peer, uint32_t len) {
    rte_mbuf* m = reserved_;
    reserved_ = nullptr;
    m->data_len = static_cast<uint16_t>(kHdrLen + len);
    m->pkt_len = kHdrLen + len;
    if (peers_[peer].self)
        loop_[loop_n_++] = m;
    else
        txq_[txq_n_++] = m;
}

void DpdkTransport::tx_flush() {
    if (quiesced_) {  // the memif peer is closing: its rings may go at any moment
        drops_.quiesced += static_cast<uint64_t>(txq_n_);
        rte_pktmbuf_free_bulk(txq_, static_cast<unsigned>(txq_n_));
        txq_n_ = 0;
        return;
    }
    if (txq_n_ == 0) {
        // net_af_xdp on a copy-mode interface (veth) sends at most a small batch per
        // kick (sendto) and kicks only inside a transmit burst: what it holds would
        // wait for our next frame. Empty bursts keep kicking for a few ticks.
        if (kick_ticks_ > 0) rte_eth_tx_burst(port_, 0, txq_, 0);
        return;
    }
    uint16_t sent = rte_eth_tx_burst(port_, 0, txq_, static_cast<uint16_t>(txq_n_));
    if (sent == 0) return;
    if (needs_kicks_) kick_ticks_ = kKickTicks;
    tx_progress_ = true;
    txq_n_ -= sent;
    memmove(txq_, txq_ + sent, sizeof(rte_mbuf*) * txq_n_);
}

// ---------------------------------------------------------------- receive
int DpdkTransport::rx_burst(RxFrame* out, int max) {
    // What this step committed so far leaves before we spend time on receiving.
    tx_flush();
    int cap = std::min(max, kBurst - held_n_);
    int n = 0;
    int nloop = std::min(loop_n_, cap);
    for (int i = 0; i < nloop; i++) {
        rte_mbuf* m = loop_[i];
        held_[held_n_++] = m;
        out[n++] = RxFrame{rte_pktmbuf_mtod(m, uint8_t*) + kHdrLen, m->data_len - kHdrLen, self_};
    }
    loop_n_ -= nloop;
    memmove(loop_, loop_ + nloop, sizeof(rte_mbuf*) * loop_n_);
    if (n == cap || quiesced_) return n;

    rte_mbuf* rx[kBurst];
    uint16_t got = rte_eth_rx_burst(port_, 0, rx, static_cast<uint16_t>(cap - n));
    rte_mbuf* bad[kBurst];
    int nbad = 0;
    for (uint16_t i = 0; i < got; i++) {
        rte_mbuf* m = rx[i];
        const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
        int id = -1;
        if (m->nb_segs != 1 || m->data_len < kHdrLen) {
            drops_.short_++;
        } else if (d[12] != (kEtherType >> 8) || d[13] != (kEtherType & 0xff) || d[14] != 1) {
            drops_.foreign++;
        } else if (d[15] != kShimFrame) {
            if (memif_) on_shim(d[15], get32(d + 16));
            else drops_.foreign++;
        } else if (get32(d + 20) != nonce_ || memcmp(d, mac_, 6) != 0 ||
                   (get32(d + 16) == nonce_ && memcmp(d + 6, mac_, 6) == 0)) {
            drops_.not_ours++;
        } else {
            uint32_t src_nonce = get32(d + 16);
            const Peer* last = last_rx_peer_ >= 0 ? &peers_[last_rx_peer_] : nullptr;
            if (last && last->nonce == src_nonce && memcmp(last->mac, d + 6, 6) == 0) {
                id = last_rx_peer_;
            } else {
                // A sender we have not heard of: learn its address from the shim, so a
                // connection request from a new peer can be answered.
                id = (d[6] & 1) || src_nonce == 0 ? -EINVAL : peer_for(d + 6, src_nonce, get64(d + 24));
                if (id < 0)
                    drops_.strangers++;
                else
                    last_rx_peer_ = id;
            }
        }
        if (id < 0) {
            bad[nbad++] = m;
            continue;
        }
        held_[held_n_++] = m;
        out[n++] = RxFrame{d + kHdrLen, m->data_len - kHdrLen, id};
    }
    if (nbad) rte_pktmbuf_free_bulk(bad, static_cast<unsigned>(nbad));
    return n;
}

void DpdkTransport::rx_release() {
    rte_pktmbuf_free_bulk(held_, static_cast<unsigned>(held_n_));
    held_n_ = 0;
}

void DpdkTransport::poll_slow(std::vector<TransportEvent>&) {
    if (quiesced_) {  // after BYE: usable again once a new peer has connected
        bool up = link_up();
        if (!up) seen_down_ = true;
        else if (seen_down_) quiesced_ = false;
    }
    tx_flush();
    // A port that took nothing for two slow ticks (a memif without its peer, a link
    // down) must not wedge the NIC: drop what waits, as a full NIC ring would.
    if (txq_n_ && !tx_progress_ && tx_stalled_) {
        drops_.tx_stuck += static_cast<uint64_t>(txq_n_);
        rte_pktmbuf_free_bulk(txq_, static_cast<unsigned>(txq_n_));
        txq_n_ = 0;
    }
    tx_stalled_ = txq_n_ && !tx_progress_;
    tx_progress_ = false;
    if (kick_ticks_ > 0) kick_ticks_--;
}

}  // namespace softvia::nicfw
