// udp transport implementation (layout and rules in udp_transport.h).
#include "udp_transport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace softvia::nicfw {

namespace {
constexpr uint16_t kBufGroup = 0;
// user_data: a tx slot index, or kRecvTag | generation for the multishot recvmsg (a new
// generation each time it is armed), or kCancelTag for the cancel of an older one.
constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint64_t kCancelTag = 1ull << 62;
constexpr uint64_t kTrainTag = 1ull << 61;  // | a TxTrain index

// Which thread is stepping: the address of a thread-local (no system call).
const void* this_thread_tag() {
    static thread_local char tag;
    return &tag;
}
constexpr uint32_t kMaxTxSlots = 256;
constexpr uint32_t kMaxRxBufs = 1024;
constexpr size_t kPoolBytes = 4u << 20;      // per direction
constexpr int kSocketBuf = 4 << 20;          // SO_RCVBUF / SO_SNDBUF
constexpr uint32_t kTxPerStep = 32;           // frames one engine step may send (pacing)
constexpr size_t kMaxPeers = 4096;
constexpr uint64_t kProbeGapNs = 100000000;  // liveness probe to each peer
constexpr uint64_t kLingerNs = 1000000000;   // a released peer sent no frame this long: freed


// Errors a pending ICMP report (sk_err) gives the next send, whatever its destination.
bool refused_by_pending_icmp(int res) {
    return res == -ECONNREFUSED || res == -EHOSTUNREACH || res == -ENETUNREACH || res == -EHOSTDOWN;
}

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t get32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }
void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

bool parse_uint(const char* s, uint64_t max, uint64_t* out) {
    if (!*s || *s == '-' || *s == '+') return false;
    char* end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return false;
    *out = v;
    return true;
}

in_addr_t default_addr() {
    in_addr_t found = htonl(INADDR_LOOPBACK);
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return found;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
        found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
        break;
    }
    freeifaddrs(list);
    return found;
}

// mtu=auto: the MTU of the interface that holds addr (network order) less the IPv4 and
// UDP headers, as a NIC takes its link's MTU: 65507 on loopback, 1472 on a 1500-byte
// Ethernet link. Both ends of a link see the same MTU; links of different MTUs need the
// same explicit mtu= on both ends (a datagram larger than the receiver's mtu is dropped).
// fd: any IPv4 socket (the transport's own) for the SIOCGIFMTU query.
uint32_t interface_mtu(int fd, in_addr_t addr) {
    uint32_t mtu = UdpTransport::kFallbackMtu;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return mtu;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != addr) continue;
        ifreq ifr{};
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", i->ifa_name);
        if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 28)
            mtu = std::clamp<uint32_t>(static_cast<uint32_t>(ifr.ifr_mtu) - 28, UdpTransport::kMinMtu,
                                       UdpTransport::kMaxMtu);
        break;
    }
    freeifaddrs(list);
    return mtu;
}

// Multishot recvmsg came with Linux 6.0.
bool kernel_has_multishot_recvmsg() {
    utsname u;
    if (uname(&u) != 0) return false;
    int major = 0, minor = 0;
    if (sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major >= 6;
}

}  // namespace

void UdpTransport::set_buffer(int fd, int force_opt, int opt) {
    int v = kSocketBuf;
    // FORCE goes past net.core.[rw]mem_max when we may (root); otherwise the plain option,
    // which the kernel caps at the maximum.
    if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) != 0)
        setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

int UdpTransport::parse_options(const DeviceSpec& spec, UdpOptions* out, std::string* why) {
    UdpOptions o;
    for (const auto& [k, v] : spec.opts) {
        uint64_t n;
        if (k != "local" && common_device_option(k)) continue;  // vipl's
        if (k == "local") {
            // The same-host shortcut (local=shm) is a wrapper around this wire, built
            // elsewhere; here every peer is reached through the socket.
            if (v != "wire") {
                *why = "udp: local must be wire (got '" + v + "')";
                return -EINVAL;
            }
        } else if (k == "addr") {
            in_addr a;
            if (inet_pton(AF_INET, v.c_str(), &a) != 1 || a.s_addr == htonl(INADDR_ANY) ||
                a.s_addr == htonl(INADDR_BROADCAST)) {
                *why = "udp: addr '" + v + "' is not a unicast IPv4 address";
                return -EINVAL;
            }
            o.addr = a.s_addr;
        } else if (k == "port") {
            if (!parse_uint(v.c_str(), 65535, &n)) {
                *why = "udp: port '" + v + "' is not 0..65535";
                return -EINVAL;
            }
            o.port = static_cast<uint16_t>(n);
        } else if (k == "mtu") {
            if (v == "auto") {
                o.mtu = 0;
                continue;
            }
            if (!parse_uint(v.c_str(), kMaxMtu, &n) || n < kMinMtu) {
                *why = "udp: mtu '" + v + "' is not auto or " + std::to_string(kMinMtu) + ".." + std::to_string(kMaxMtu);
                return -EINVAL;
            }
            o.mtu = static_cast<uint32_t>(n);
        } else if (k == "rx") {
            if (v != "multishot" && v != "syscall") {
                *why = "udp: rx must be multishot or syscall (got '" + v + "')";
                return -EINVAL;
            }
            o.rx_syscall = v == "syscall";
        } else if (k == "tx") {
            if (v != "auto" && v != "uring") {
                *why = "udp: tx must be auto or uring (got '" + v + "')";
                return -EINVAL;
            }
            o.tx_direct = v == "auto";
        } else if (k == "gso") {
            if (v != "auto" && v != "off") {
                *why = "udp: gso must be auto or off (got '" + v + "')";
                return -EINVAL;
            }
            o.gso = v == "auto";
        } else if (k == "txsock") {
            if (v != "peer" && v != "shared") {
                *why = "udp: txsock must be peer or shared (got '" + v + "')";
                return -EINVAL;
            }
            o.peer_sockets = v == "peer";
        } else {
            *why = "udp takes no option '" + k + "'";
            return -EINVAL;
        }
    }
    *out = o;
    return 0;
}

int UdpTransport::create(const UdpOptions& opt, std::unique_ptr<UdpTransport>* out, std::string* why) {
    std::unique_ptr<UdpTransport> t(new UdpTransport());
    t->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->fd_ < 0) {
        int e = errno;
        *why = std::string("udp: socket: ") + strerror(e);
        return -e;
    }
    set_buffer(t->fd_, SO_RCVBUFFORCE, SO_RCVBUF);
    set_buffer(t->fd_, SO_SNDBUFFORCE, SO_SNDBUF);
    int on = 1;
    // ICMP errors (port unreachable: the peer's socket is gone) reach the error queue.
    setsockopt(t->fd_, IPPROTO_IP, IP_RECVERR, &on, sizeof on);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = opt.addr ? opt.addr : default_addr();
    sa.sin_port = htons(opt.port);
    if (bind(t->fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        int e = errno;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
        *why = std::string("udp: bind ") + ip + ":" + std::to_string(opt.port) + ": " + strerror(e);
        return -e;
    }
    socklen_t sl = sizeof sa;
    getsockname(t->fd_, reinterpret_cast<sockaddr*>(&sa), &sl);
    t->mtu_ = opt.mtu ? opt.mtu : interface_mtu(t->fd_, sa.sin_addr.s_addr);

    t->host_id_ = host_identity();
    if (getrandom(&t->nonce_, sizeof t->nonce_, 0) != sizeof t->nonce_)
        t->nonce_ = static_cast<uint32_t>(mono_ns()) ^ static_cast<uint32_t>(getpid());
    if (t->nonce_ == 0) t->nonce_ = 1;
    uint8_t* a = t->addr_;
    a[0] = kAddrKind;
    a[1] = 1;
    memcpy(a + 2, &sa.sin_port, 2);
    memcpy(a + 4, &sa.sin_addr.s_addr, 4);
    put64(a + kHostIdOffset, t->host_id_);
    put32(a + 16, t->nonce_);

    int rc = t->setup_ring(why);
    if (rc < 0) return rc;
    t->rx_syscall_ = opt.rx_syscall || t->br_ == nullptr;
    t->tx_direct_ = opt.tx_direct;
    t->peer_sockets_ = opt.peer_sockets;
    t->setup_segments(opt);
    *out = std::move(t);
    return 0;
}

// The ring, the tx pool and the rx buffers (registered as a provided-buffer ring when
// the kernel can, else used by recvmmsg).
int UdpTransport::setup_ring(std::string* why) {
    uint32_t tx_slots = std::clamp<uint32_t>(static_cast<uint32_t>(kPoolBytes / mtu_), 64, kMaxTxSlots);
    // Cooperative task running (Linux 5.19) when the kernel has it (see rx_burst); before
    // it, -EINVAL, and completions come by an interrupt per datagram.
    int rc = -EINVAL;
    for (unsigned coop : {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG, 0u}) {
        io_uring_params p{};
        p.flags = IORING_SETUP_CQSIZE | coop;
        p.cq_entries = 4 * kMaxRxBufs;
        rc = io_uring_queue_init_params(2 * tx_slots, &ring_, &p);
        if (rc != -EINVAL) break;
    }
    if (rc < 0) {
        *why = std::string("udp: io_uring_queue_init: ") + strerror(-rc);
        return rc;
    }
    ring_ok_ = true;

    tx_mem_.resize(static_cast<size_t>(tx_slots) * mtu_);
    tx_slots_.resize(tx_slots);
    tx_queue_.reserve(tx_slots);
    for (uint32_t i = 0; i < tx_slots; i++) {
        TxSlot& s = tx_slots_[i];
        s.buf = tx_mem_.data() + static_cast<size_t>(i) * mtu_;
        s.iov = {s.buf, 0};
        s.msg = {};
        s.msg.msg_name = &s.to;
        s.msg.msg_namelen = sizeof s.to;
        s.msg.msg_iov = &s.iov;
        s.msg.msg_iovlen = 1;
        s.fd = fd_;
        s.peer = -1;
        tx_free_.push_back(static_cast<int>(tx_slots - 1 - i));
    }

    // An rx buffer holds the recvmsg header the kernel writes, the sender's address and
    // one datagram of up to mtu bytes; a bigger one is truncated and dropped.
    rx_buf_len_ = static_cast<uint32_t>(sizeof(io_uring_recvmsg_out) + sizeof(sockaddr_in)) + mtu_;
    rx_buf_size_ = (rx_buf_len_ + 63) & ~63u;  // stride: buffers start on cache lines
    uint32_t n = 32;
    while (n * 2 <= kMaxRxBufs && static_cast<size_t>(n) * 2 * rx_buf_size_ <= kPoolBytes) n *= 2;
    rx_bufs_ = n;
    rx_mem_len_ = static_cast<size_t>(n) * rx_buf_size_;
    void* m = mmap(nullptr, rx_mem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        *why = "udp: no memory for receive buffers";
        return -ENOMEM;
    }
    rx_mem_ = static_cast<uint8_t*>(m);
    pending_.resize(n);
    taken_.reserve(n);
    rx_msg_.msg_namelen = sizeof(sockaddr_in);

    // rx=syscall's recvmmsg headers, set once: the kernel writes back only msg_len,
    // msg_namelen, msg_controllen and msg_flags (take_read resets what it read).
    mm_.assign(kSyscallBurst, mmsghdr{});
    mm_iov_.resize(kSyscallBurst);
    mm_from_.resize(kSyscallBurst);
    for (uint32_t i = 0; i < kSyscallBurst; i++) {
        mm_iov_[i] = {rx_mem_ + static_cast<size_t>(i) * rx_buf_size_, mtu_};
        msghdr& h = mm_[i].msg_hdr;
        h.msg_name = &mm_from_[i];
        h.msg_namelen = sizeof(sockaddr_in);
        h.msg_iov = &mm_iov_[i];
        h.msg_iovlen = 1;
    }

    if (!kernel_has_multishot_recvmsg()) return 0;  // rx=syscall
    br_len_ = static_cast<size_t>(n) * sizeof(io_uring_buf);
    void* r = mmap(nullptr, br_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return 0;
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(r);
    reg.ring_entries = n;
    reg.bgid = kBufGroup;
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) {  // before 5.19
        munmap(r, br_len_);
        return 0;
    }
    br_ = static_cast<io_uring_buf_ring*>(r);
    io_uring_buf_ring_init(br_);
    for (uint32_t i = 0; i < n; i++)
        io_uring_buf_ring_add(br_, rx_mem_ + static_cast<size_t>(i) * rx_buf_size_, rx_buf_len_,
                              static_cast<unsigned short>(i), io_uring_buf_ring_mask(n), static_cast<int>(i));
    io_uring_buf_ring_advance(br_, static_cast<int>(n));
    return 0;
}

UdpTransport::~UdpTransport() {
    if (ring_ok_) io_uring_queue_exit(&ring_);  // cancels the receive, unregisters buffers
    if (br_) munmap(br_, br_len_);
    if (rx_mem_) munmap(rx_mem_, rx_mem_len_);
    if (gro_mem_) munmap(gro_mem_, gro_mem_len_);
    if (fd_ >= 0) close(fd_);
    for (Peer& p : peers_)
        if (p.tx_fd >= 0) close(p.tx_fd);
    for (int fd : dropped_fds_) close(fd);
}

uint16_t UdpTransport::port() const {
    uint16_t be;
    memcpy(&be, addr_ + 2, 2);
    return ntohs(be);
}

int UdpTransport::peer_for(const sockaddr_in& sa, uint64_t host_id, uint32_t nonce) {
    uint64_t key = endpoint_key(sa.sin_addr.s_addr, sa.sin_port);
    auto it = by_endpoint_.find(key);
    if (it != by_endpoint_.end())
        for (int id : it->second)
            if (peers_[id].nonce == nonce) return id;
    if (live_peers() >= kMaxPeers) return -ENOSPC;
    Peer p;
    p.addr.assign(kAddrLen, 0);
    p.addr[0] = kAddrKind;
    p.addr[1] = 1;
    memcpy(p.addr.data() + 2, &sa.sin_port, 2);
    memcpy(p.addr.data() + 4, &sa.sin_addr.s_addr, 4);
    put64(p.addr.data() + kHostIdOffset, host_id);
    put32(p.addr.data() + 16, nonce);
    p.sa.sin_family = AF_INET;
    p.sa.sin_addr = sa.sin_addr;
    p.sa.sin_port = sa.sin_port;
    p.host_id = host_id;
    p.nonce = nonce;
    p.next_probe_ns = mono_ns() + kProbeGapNs;
    int id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
        peers_[static_cast<size_t>(id)] = std::move(p);
    } else {
        peers_.push_back(std::move(p));
        id = static_cast<int>(peers_.size() - 1);
    }
    by_endpoint_[key].push_back(id);
    return id;
}

void UdpTransport::release_peer(int peer) {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.released) p.released_ns = mono_ns();
    p.released = true;
}

// The index no longer names the peer: out of the endpoint map, frames from it not yet
// handed to the engine dropped (the index may name another peer before they would be).
void UdpTransport::free_peer(int id, std::vector<TransportEvent>& events) {
    Peer& p = peers_[static_cast<size_t>(id)];
    auto it = by_endpoint_.find(endpoint_key(p.sa.sin_addr.s_addr, p.sa.sin_port));
    if (it != by_endpoint_.end()) {
        auto& v = it->second;
        v.erase(std::remove(v.begin(), v.end(), id), v.end());
        if (v.empty()) by_endpoint_.erase(it);
    }
    for (uint32_t k = 0; k < pend_count_; k++) {
        Pending& e = pending_[(pend_head_ + k) % pend_cap()];
        if (e.peer == id) e.peer = -1;
    }
    drop_peer_socket(p);
    forget_send_socket(id);
    p = Peer{};
    p.dead = p.dead_reported = p.freed = true;
    free_ids_.push_back(id);
    events.push_back({PeerEvent::kFreed, id});
}

int UdpTransport::resolve(const uint8_t* addr, size_t len) {
    if (addr == nullptr || len != kAddrLen || addr[0] != kAddrKind || addr[1] != 1) return -EINVAL;
    sockaddr_in sa{};
    memcpy(&sa.sin_port, addr + 2, 2);
    memcpy(&sa.sin_addr.s_addr, addr + 4, 4);
    uint32_t nonce = get32(addr + 16);
    if (sa.sin_port == 0 || sa.sin_addr.s_addr == htonl(INADDR_ANY) || nonce == 0 || get32(addr + 20) != 0)
        return -EINVAL;
    int id = peer_for(sa, get64(addr + kHostIdOffset), nonce);
    if (id < 0) return id;
    if (peers_[id].dead) return -EHOSTUNREACH;
    peers_[id].released = false;
    return id;
}

io_uring_sqe* UdpTransport::next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // the submission queue is full: hand it to the kernel now
        if (io_uring_submit(&ring_) >= 0) unsubmitted_ = 0;
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

uint8_t* UdpTransport::tx_reserve(int peer, uint32_t len) {
    if (peers_[peer].dead || len > max_frame() || len == 0) return nullptr;
    // No more than a receiver takes in one step (the engine's burst): a faster sender
    // would overflow the peer's socket buffer, and UDP drops what does not fit.
    if (step_frames_ >= kTxPerStep) return nullptr;
    if (tx_free_.empty()) {
        // Every slot is queued or in the kernel: submit what waits, collect what finished.
        submit();
        reap();
        if (tx_free_.empty()) return nullptr;
    }
    tx_cur_ = tx_free_.back();
    tx_free_.pop_back();
    return tx_slots_[tx_cur_].buf + kPreamble;
}

// Writes slot's preamble for p and queues the datagram (len bytes after the preamble).
void UdpTransport::write_preamble(TxSlot& s, const sockaddr_in& to, uint32_t dst_nonce, uint8_t type, uint32_t len) {
    put32(s.buf + kPMagic, kMagic);
    memset(s.buf + kPType, 0, 4);  // flags and port: zero unless the caller sets them
    s.buf[kPType] = type;
    put64(s.buf + kPHost, host_id_);
    put32(s.buf + kPSrcNonce, nonce_);
    put32(s.buf + kPDstNonce, dst_nonce);
    s.iov.iov_len = kPreamble + len;
    s.to = to;  // a copy: peers_ may grow before the kernel reads it
    s.resent = false;
}

void UdpTransport::queue_datagram(int slot, Peer& p, int peer, uint8_t type, uint32_t len) {
    TxSlot& s = tx_slots_[slot];
    write_preamble(s, p.sa, p.nonce, type, len);
    s.peer = peer;
    // Frames to a peer that acknowledged our send socket for it leave by that connected
    // socket (no route lookup per send; udp_peer_sockets.cc); probes by the NIC's socket,
    // whose error queue reports the peer gone.
    if (type == kTypeFrame && p.tx_ready) {
        s.buf[kPFlags] = kFlagPeerSocket;
        memcpy(s.buf + kPPort, addr_ + 2, 2);  // the NIC's port: where a refusal goes
        s.fd = p.tx_fd;
        s.msg.msg_name = nullptr;
        s.msg.msg_namelen = 0;
    } else {
        send_by_nic_socket(s);
    }
    queue_send(slot);
}

void UdpTransport::tx_commit(int peer, uint32_t len) {
    int slot = tx_cur_;
    tx_cur_ = -1;
    queue_datagram(slot, peers_[peer], peer, kTypeFrame, len);
    step_frames_++;
}

void UdpTransport::queue_send(int slot) { tx_queue_.push_back(slot); }

// Hands the queued datagrams to the kernel: one alone, or one train (udp_segments.cc), by
// sendmsg (tx=auto); more as sendmsg requests in one io_uring_enter, with whatever else
// waits in the ring, runs of datagrams for one peer as trains.
void UdpTransport::submit() {
    if (tx_queue_.empty() && unsubmitted_ == 0) return;
    if (tx_direct_ && unsubmitted_ == 0 && train_length(0) == tx_queue_.size()) {
        // MSG_DONTWAIT: a full socket fails the send (a lost frame) instead of parking it.
        if (tx_queue_.size() == 1) {
            int slot = tx_queue_[0];
            tx_queue_.clear();
            ssize_t r = sendmsg(tx_slots_[slot].fd, &tx_slots_[slot].msg, MSG_DONTWAIT);
            send_done(slot, r >= 0 ? static_cast<int>(r) : -errno);
            return;
        }
        int t = make_train(0, tx_queue_.size());
        if (t >= 0) {
            tx_queue_.clear();
            ssize_t r = sendmsg(tx_slots_[trains_[t].slots[0]].fd, &trains_[t].msg, MSG_DONTWAIT);
            train_done(t, r >= 0 ? static_cast<int>(r) : -errno);  // may queue them again
            if (!tx_queue_.empty()) submit();
            return;
        }
    }
    size_t queued = 0;
    while (queued < tx_queue_.size()) {
        io_uring_sqe* sqe = next_sqe();
        if (!sqe) break;  // the kernel would not take submissions: the rest wait
        size_t run = train_length(queued);
        int t = run > 1 ? make_train(queued, run) : -1;
        if (t >= 0) {
            io_uring_prep_sendmsg(sqe, tx_slots_[trains_[t].slots[0]].fd, &trains_[t].msg, MSG_DONTWAIT);
            io_uring_sqe_set_data64(sqe, kTrainTag | static_cast<uint64_t>(t));
            queued += run;
        } else {
            int slot = tx_queue_[queued++];
            io_uring_prep_sendmsg(sqe, tx_slots_[slot].fd, &tx_slots_[slot].msg, MSG_DONTWAIT);
            io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(slot));
        }
        unsubmitted_++;
    }
    tx_queue_.erase(tx_queue_.begin(), tx_queue_.begin() + static_cast<std::ptrdiff_t>(queued));
    if (io_uring_submit(&ring_) >= 0) unsubmitted_ = 0;  // else they go with the next flush
    if (!dropped_fds_.empty()) close_dropped_sockets();
}

void UdpTransport::send_done(int slot, int res) {
    TxSlot& s = tx_slots_[slot];
    if (res < 0 && s.fd != fd_ && res != -EAGAIN && res != -ENOBUFS) {
        // The peer's send socket failed (its port closed: ECONNREFUSED): that peer's frames
        // go by the NIC's socket from now on, this one again, and the NIC's error queue and
        // probes tell whether the peer is gone.
        if (s.peer >= 0 && peers_[s.peer].tx_fd == s.fd) {
            drop_peer_socket(peers_[s.peer]);
            stats_.peer_socket_failures++;
        }
        send_by_nic_socket(s);
        queue_send(slot);
        return;
    }
    if (res >= 0) {
        if (s.fd != fd_) stats_.tx_peer_socket++;
        stats_.tx_datagrams++;
    } else if (refused_by_pending_icmp(res) && !tx_slots_[slot].resent) {
        // With IP_RECVERR an ICMP error for any destination fails the socket's next send
        // (sk_err) and is then cleared: this datagram never left. Send it again (once).
        errors_pending_ = true;
        tx_slots_[slot].resent = true;
        queue_send(slot);
        return;
    } else {
        stats_.tx_errors++;
    }
    tx_free_.push_back(slot);
}

void UdpTransport::tx_flush() {
    submit();
    step_frames_ = 0;
}

bool UdpTransport::send_probe(Peer& p) {
    if (tx_free_.empty()) return false;
    int slot = tx_free_.back();
    tx_free_.pop_back();
    queue_datagram(slot, p, -1, kTypeProbe, 0);
    return true;
}

void UdpTransport::arm_recv() {
    io_uring_sqe* sqe = next_sqe();
    if (!sqe) return;
    io_uring_prep_recvmsg_multishot(sqe, fd_, &rx_msg_, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufGroup;
    io_uring_sqe_set_data64(sqe, kRecvTag | ++recv_gen_);
    // The task that submits it runs its completions' task work (COOP_TASKRUN: when it
    // next enters the kernel, which rx_burst does when the ring says work waits). In
    // thread mode that is the firmware thread, which arms it on its first burst.
    if (io_uring_submit(&ring_) >= 0) {
        unsubmitted_ = 0;
        recv_armed_ = true;
        armer_ = this_thread_tag();
    }
}

// Inline progress from another thread than the one that armed the receive: the receive's
// task work runs only when that thread enters the kernel (one computing in user space
// does at its next tick, milliseconds away; a sleeping one is woken for it), so cancel
// its request and arm one of our own. What the old one took still arrives as CQEs.
void UdpTransport::rearm_here() {
    io_uring_sqe* sqe = next_sqe();
    if (!sqe) return;
    io_uring_prep_cancel64(sqe, kRecvTag | recv_gen_, 0);
    io_uring_sqe_set_data64(sqe, kCancelTag);
    unsubmitted_++;
    recv_armed_ = false;
    arm_recv();  // submits both
}

void UdpTransport::recycle(int bid) {
    io_uring_buf_ring_add(br_, rx_mem_ + static_cast<size_t>(bid) * rx_buf_size_, rx_buf_len_,
                          static_cast<unsigned short>(bid), io_uring_buf_ring_mask(rx_bufs_), 0);
    io_uring_buf_ring_advance(br_, 1);
}

// Completions, read from the shared ring without a system call (liburing only enters
// the kernel to flush an overflowed completion queue).
void UdpTransport::reap() {
    io_uring_cqe* cqes[64];
    for (;;) {
        unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
        for (unsigned i = 0; i < n; i++) {
            const io_uring_cqe& c = *cqes[i];
            if (c.user_data & kRecvTag) {
                on_recv_cqe(c);
            } else if (c.user_data == kCancelTag) {
                continue;  // the cancelled receive reports itself
            } else if (c.user_data & kTrainTag) {
                train_done(static_cast<int>(c.user_data & ~kTrainTag), c.res);
            } else {
                send_done(static_cast<int>(c.user_data), c.res);
            }
        }
        io_uring_cq_advance(&ring_, n);
        if (n < 64) return;
    }
}

void UdpTransport::on_recv_cqe(const io_uring_cqe& c) {
    // Only the current request's end matters (re-armed by the next burst); a cancelled
    // older one may still deliver datagrams it took.
    if (!(c.flags & IORING_CQE_F_MORE) && c.user_data == (kRecvTag | recv_gen_)) recv_armed_ = false;
    if (c.res < 0) {
        if (c.res == -EINVAL && stats_.rx_datagrams == 0) rx_syscall_ = true;  // no multishot here
        else if (c.res != -ENOBUFS && c.res != -ECANCELED) errors_pending_ = true;  // ICMP: see poll_slow
        return;
    }
    if (!(c.flags & IORING_CQE_F_BUFFER)) return;
    int bid = static_cast<int>(c.flags >> IORING_CQE_BUFFER_SHIFT);
    if (bid >= static_cast<int>(rx_bufs_)) return;  // never: the kernel picks from our ring
    uint8_t* buf = rx_mem_ + static_cast<size_t>(bid) * rx_buf_size_;
    msghdr m = rx_msg_;
    io_uring_recvmsg_out* o = io_uring_recvmsg_validate(buf, c.res, &m);
    stats_.rx_datagrams++;
    if (!o || o->namelen < sizeof(sockaddr_in)) {
        stats_.rx_malformed++;
        recycle(bid);
        return;
    }
    if (o->flags & MSG_TRUNC) {
        stats_.rx_truncated++;
        recycle(bid);
        return;
    }
    sockaddr_in from;
    memcpy(&from, io_uring_recvmsg_name(o), sizeof from);
    auto* payload = static_cast<uint8_t*>(io_uring_recvmsg_payload(o, &m));
    uint32_t plen = io_uring_recvmsg_payload_length(o, c.res, &m);
    if (!take_datagram(payload, plen, from, bid)) recycle(bid);
}

// Checks a datagram and queues its frame; false if it carries none (the buffer is free).
bool UdpTransport::take_datagram(const uint8_t* d, uint32_t len, const sockaddr_in& from, int bid) {
    // [5..7]: zero, but for the flag and port of a frame from a peer's send socket and the
    // port of a send socket's control datagrams.
    const uint8_t type = len >= kPreamble ? d[kPType] : 0;
    const bool flagged = type == kTypeFrame && d[kPFlags] == kFlagPeerSocket;
    const bool ported = flagged || type == kTypePort || type == kTypePortAck || type == kTypePortNak;
    if (len < kPreamble || get32(d + kPMagic) != kMagic || (d[kPFlags] && !flagged) ||
        (!ported && (d[kPPort] || d[kPPort + 1])) || type < kTypeFrame || type > kTypePortNak ||
        from.sin_family != AF_INET) {
        stats_.rx_malformed++;
        return false;
    }
    uint32_t src_nonce = get32(d + kPSrcNonce);
    if (get32(d + kPDstNonce) != nonce_ || src_nonce == 0) {
        stats_.rx_strangers++;  // for an earlier NIC on this port, or not ours at all
        return false;
    }
    bool probe = d[kPType] == kTypeProbe;
    int id = -1;
    if (flagged) {  // from a send socket: known only if its NIC announced it
        id = peer_by_send_socket(d, from);
        if (id < 0) return false;
    } else {
        auto it = by_endpoint_.find(endpoint_key(from.sin_addr.s_addr, from.sin_port));
        if (it != by_endpoint_.end())
            for (int k : it->second)
                if (peers_[k].nonce == src_nonce) id = k;
    }
    if (id < 0) {
        if (type != kTypeFrame) return false;  // a probe or a control datagram needs a peer
        id = peer_for(from, get64(d + kPHost), src_nonce);
        if (id < 0) {
            stats_.rx_strangers++;
            return false;
        }
        // A new NIC on an endpoint: the older ones there are gone (one socket per port).
        for (int k : by_endpoint_[endpoint_key(from.sin_addr.s_addr, from.sin_port)])
            if (k != id) peers_[k].dead = true;
    }
    Peer& p = peers_[id];
    if (p.dead) return false;
    p.refusals = 0;
    if (type >= kTypePort) {
        uint16_t port_be;
        memcpy(&port_be, d + kPPort, 2);
        on_port_control(id, type, port_be, from);
        return false;
    }
    if (probe || len == kPreamble) return false;  // a probe says the NIC is up, not that it uses us
    if (!p.heard) {  // it sent to our address and nonce: it can learn our send socket
        p.heard = true;
        sockets_to_open_ |= peer_sockets_;
    }
    if (pend_count_ == pend_cap()) {  // a train of more datagrams than a sender may make
        stats_.rx_overflows++;
        return false;
    }
    p.released = false;  // a frame for the engine: it holds the index again
    uint32_t slot = (pend_head_ + pend_count_) % pend_cap();
    pending_[slot] = Pending{d + kPreamble, len - kPreamble, id, bid};
    pend_count_++;
    return true;
}

// rx=syscall: one recvmmsg per burst, into the first kSyscallBurst buffers (the engine
// releases a burst before it asks for the next).
void UdpTransport::recv_syscall() {
    if (pend_count_ || !taken_.empty()) return;
    int n = recvmmsg(fd_, mm_.data(), kSyscallBurst, MSG_DONTWAIT, nullptr);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) errors_pending_ = true;
        return;
    }
    for (int i = 0; i < n; i++) take_read(static_cast<uint32_t>(i), mm_[i].msg_len);
}

int UdpTransport::rx_burst(RxFrame* out, int max) {
    // What this step committed so far leaves before we spend time on receiving (a reply
    // must not wait behind a recvmmsg); the step's pacing count runs on to tx_flush.
    submit();
    if (rx_syscall_) {
        reap();  // sends' completions: free slots, and a send an ICMP report failed goes again
        recv_syscall();
    } else {
        if (recv_armed_ && armer_ != this_thread_tag()) rearm_here();
        // COOP_TASKRUN: no interrupt tells a busy-polling task that a datagram came (in a
        // VM such an IPI cost ~20 us a message); the ring's flag does, and entering the
        // kernel runs the receive.
        if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&ring_);
        reap();
        if (!recv_armed_ && !rx_syscall_ && pend_count_ + taken_.size() < rx_bufs_) arm_recv();
    }
    int n = 0;
    while (n < max && pend_count_) {
        const Pending& e = pending_[pend_head_];
        if (e.peer >= 0) out[n++] = RxFrame{e.data, e.len, e.peer};  // (-1: from a peer freed since)
        taken_.push_back(e.bid);
        pend_head_ = (pend_head_ + 1) % pend_cap();
        pend_count_--;
    }
    return n;
}

void UdpTransport::rx_release() {
    for (int bid : taken_)
        if (bid >= 0) recycle(bid);
    taken_.clear();
}

// ICMP errors the kernel queued (IP_RECVERR): port unreachable counts against the
// peers at the destination it names.
void UdpTransport::drain_errors() {
    errors_pending_ = false;
    for (;;) {
        sockaddr_in dst{};
        uint8_t data[64];
        alignas(cmsghdr) uint8_t ctl[256];
        iovec iov{data, sizeof data};
        msghdr m{};
        m.msg_name = &dst;
        m.msg_namelen = sizeof dst;
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        if (recvmsg(fd_, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
            sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(c), sizeof ee);
            if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_errno != ECONNREFUSED) continue;
            stats_.rx_refusals++;
            auto it = by_endpoint_.find(endpoint_key(dst.sin_addr.s_addr, dst.sin_port));
            if (it == by_endpoint_.end()) continue;
            for (int id : it->second)
                if (++peers_[id].refusals >= kRefusalsForDead) peers_[id].dead = true;
        }
    }
}

void UdpTransport::poll_slow(std::vector<TransportEvent>& events) {
    uint64_t now = mono_ns();
    bool probe_round = false;
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (p.dead || p.released || now < p.next_probe_ns) continue;  // released: only the linger matters
        send_probe(p);
        p.next_probe_ns = now + kProbeGapNs;
        probe_round = true;
    }
    if (sockets_to_open_ || probe_round) announce_peer_sockets(probe_round);
    submit();
    if (errors_pending_ || probe_round) drain_errors();
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (p.freed) continue;
        if (p.dead && !p.dead_reported) {
            p.dead_reported = true;
            events.push_back({PeerEvent::kDead, static_cast<int>(i)});
        }
        // Released by the engine, and no frame for it since (or dead): the index goes back.
        if (p.released && (p.dead || now - p.released_ns > kLingerNs)) free_peer(static_cast<int>(i), events);
    }
}

}  // namespace softvia::nicfw
