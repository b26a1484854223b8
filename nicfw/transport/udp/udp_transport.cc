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
#include <linux/filter.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

namespace {
constexpr uint32_t kMaxTxSlots = 256;
constexpr uint32_t kMaxRxBufs = 1024;
constexpr size_t kPoolBytes = 4u << 20;      // per direction
constexpr int kSocketBuf = 4 << 20;          // SO_RCVBUF / SO_SNDBUF
constexpr uint32_t kTxPerStep = 32;           // frames one engine step may send (pacing)


// Errors a pending ICMP report (sk_err) gives the next send, whatever its destination.
bool refused_by_pending_icmp(int res) {
    return res == -ECONNREFUSED || res == -EHOSTUNREACH || res == -ENETUNREACH || res == -EHOSTDOWN;
}



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

bool kernel_at_least(int want_major, int want_minor) {
    utsname u;
    if (uname(&u) != 0) return false;
    int major = 0, minor = 0;
    if (sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major > want_major || (major == want_major && minor >= want_minor);
}

// Multishot recvmsg came with Linux 6.0.
bool kernel_has_multishot_recvmsg() { return kernel_at_least(6, 0); }

// The receive socket's group (udp_peer_sockets.cc), made at creation, before anyone
// knows the NIC's address. The NIC's socket is bound without SO_REUSEPORT (a port of its
// own: a port-0 bind with it may share a port with another such socket of the user),
// then gets it; a second socket bound to the port makes the group, with the NIC's socket
// first, and goes; a program then picks that first member for every datagram no
// connected member takes. Linux 5.4 first let a connected member take its four-tuple's
// datagrams (before, the group shared them by hash). False: no group, no receive socket.
bool make_reuseport_group(int fd, const sockaddr_in& bound) {
    if (!kernel_at_least(5, 4)) return false;
    int on = 1, off = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) return false;
    int second = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sock_filter first[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
    sock_fprog prog{1, first};
    bool ok = second >= 0 && setsockopt(second, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0 &&
              bind(second, reinterpret_cast<const sockaddr*>(&bound), sizeof bound) == 0 &&
              setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) == 0;
    if (second >= 0) close(second);
    if (!ok) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &off, sizeof off);
    return ok;
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
        } else if (k == "rxsock") {
            if (v != "peer" && v != "shared") {
                *why = "udp: rxsock must be peer or shared (got '" + v + "')";
                return -EINVAL;
            }
            o.rx_socket = v == "peer";
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
    t->rx_sockets_ = opt.rx_socket && make_reuseport_group(t->fd_, sa);
    t->mtu_ = opt.mtu ? opt.mtu : interface_mtu(t->fd_, sa.sin_addr.s_addr);

    t->host_id_ = host_identity();
    if (getrandom(&t->nonce_, sizeof t->nonce_, 0) != sizeof t->nonce_)
        t->nonce_ = static_cast<uint32_t>(now_ns()) ^ static_cast<uint32_t>(getpid());
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
    if (rx_fd_ >= 0) close(rx_fd_);
    for (Peer& p : peers_)
        if (p.tx_fd >= 0) close(p.tx_fd);
    for (int fd : dropped_fds_) close(fd);
}

uint16_t UdpTransport::port() const {
    uint16_t be;
    memcpy(&be, addr_ + 2, 2);
    return ntohs(be);
}

io_uring_sqe* UdpTransport::next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // the submission queue is full: hand it to the kernel now
        if (io_uring_submit(&ring_) >= 0) unsubmitted_ = 0;
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

NICFW_HOT uint8_t* UdpTransport::tx_reserve(int peer, uint32_t len) {
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

NICFW_HOT void UdpTransport::queue_datagram(int slot, Peer& p, int peer, uint8_t type, uint32_t len) {
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

NICFW_HOT void UdpTransport::tx_commit(int peer, uint32_t len) {
    int slot = tx_cur_;
    tx_cur_ = -1;
    queue_datagram(slot, peers_[peer], peer, kTypeFrame, len);
    step_frames_++;
}

void UdpTransport::queue_send(int slot) { tx_queue_.push_back(slot); }

// Hands the queued datagrams to the kernel: one alone, or one train (udp_segments.cc), by
// sendmsg (tx=auto); more as sendmsg requests in one io_uring_enter, with whatever else
// waits in the ring, runs of datagrams for one peer as trains.
NICFW_HOT void UdpTransport::submit() {
    if (tx_queue_.empty() && unsubmitted_ == 0) return;
    if (tx_direct_ && unsubmitted_ == 0 && train_length(0) == tx_queue_.size()) {
        // MSG_DONTWAIT: a full socket fails the send (a lost frame) instead of parking it.
        if (tx_queue_.size() == 1) {
            int slot = tx_queue_[0];
            tx_queue_.clear();
            ssize_t r = wire_sendmsg(tx_slots_[slot].fd, &tx_slots_[slot].msg, MSG_DONTWAIT);
            send_done(slot, r >= 0 ? static_cast<int>(r) : -errno);
            return;
        }
        int t = make_train(0, tx_queue_.size());
        if (t >= 0) {
            tx_queue_.clear();
            ssize_t r = wire_sendmsg(tx_slots_[trains_[t].slots[0]].fd, &trains_[t].msg, MSG_DONTWAIT);
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
        ring_sends_++;
    }
    tx_queue_.erase(tx_queue_.begin(), tx_queue_.begin() + static_cast<std::ptrdiff_t>(queued));
    if (io_uring_submit(&ring_) >= 0) unsubmitted_ = 0;  // else they go with the next flush
    if (!dropped_fds_.empty()) close_dropped_sockets();
}

NICFW_HOT void UdpTransport::send_done(int slot, int res) {
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

NICFW_HOT void UdpTransport::tx_flush() {
    submit();
    step_frames_ = 0;
}

// Completions, read from the shared ring without a system call (liburing only enters
// the kernel to flush an overflowed completion queue).
NICFW_HOT void UdpTransport::reap() {
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
                ring_sends_--;
                train_done(static_cast<int>(c.user_data & ~kTrainTag), c.res);
            } else {
                ring_sends_--;
                send_done(static_cast<int>(c.user_data), c.res);
            }
        }
        io_uring_cq_advance(&ring_, n);
        if (n < 64) return;
    }
}

}  // namespace softvia::nicfw
