// udp transport: trains of datagrams (gso=auto; the rules are in udp_transport.h).
//
// Out: datagrams queued one after another for one peer, all of one length but the last
// (which may be shorter: a message's frames), go as one sendmsg with a UDP_SEGMENT control
// message naming that length. The kernel routes, filters and queues the train once and
// cuts it into datagrams on its way out (on the NIC, or in software just before it). A
// kernel or route that refuses such a send (-EIO: the device cannot checksum for us,
// -EINVAL) turns trains off for good and the datagrams go again one by one.
// In: with UDP_GRO the socket may hand us a train as one buffer, with its datagrams' length
// in a control message; each datagram in it keeps its own preamble. The option is set
// only once trains arrive (watch_trains): on a veth pair it costs every datagram, trains
// or not, about 0.15 us of the 8 B one-way latency (10 alternating pairs, 2026-11-29),
// and a 4 KiB stream reads 22% faster with it. Until then the kernel cuts an arriving
// train into datagrams, which come in as a run of equal ones. It stays set: the kernel
// decides whether to cut a train when it queues it, but adds the control message only if
// the option is set when we read it, so a train queued just before the option went off
// again would be read as one datagram of unknown segment size, and lost.
#include <netinet/udp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "udp_transport.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

namespace {
constexpr size_t kTrainBuf = 65536;  // a read buffer that holds a whole train
constexpr uint32_t kTrains = 64;     // sends in flight that carry trains
}  // namespace

void UdpTransport::setup_segments(const UdpOptions& opt) {
    // Two datagrams must fit in a train, or none ever forms (loopback's 65507).
    if (!opt.gso || 2 * static_cast<size_t>(mtu_) > kMaxTrainBytes) return;
    trains_.resize(kTrains);
    for (uint32_t i = 0; i < kTrains; i++) train_free_.push_back(static_cast<int>(kTrains - 1 - i));
    gso_ = true;

    // Trains in: only into recvmmsg's buffers (the multishot ring's hold one datagram),
    // and only where the kernel takes the option (tried on and off again here; trains
    // coming in switch it on: watch_trains).
    int on = 1, off = 0;
    if (!rx_syscall_ || setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &on, sizeof on) != 0 ||
        setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &off, sizeof off) != 0)
        return;
    gro_mem_len_ = static_cast<size_t>(kSyscallBurst) * kTrainBuf;
    void* m = mmap(nullptr, gro_mem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        gro_mem_ = nullptr;
        return;
    }
    gro_mem_ = static_cast<uint8_t*>(m);
    mm_ctl_.resize(kSyscallBurst);
    for (uint32_t i = 0; i < kSyscallBurst; i++) {
        mm_iov_[i] = {gro_mem_ + static_cast<size_t>(i) * kTrainBuf, kTrainBuf};
        mm_[i].msg_hdr.msg_control = mm_ctl_[i].b;
        mm_[i].msg_hdr.msg_controllen = sizeof mm_ctl_[i].b;
    }
    // A burst of trains, each of up to 128 datagrams (UDP_MAX_SEGMENTS of newer kernels;
    // a GRO'd one holds at most 64), all pending at once; take_datagram drops what a
    // hostile sender's tiny datagrams would add beyond that.
    pending_.resize(std::max<uint32_t>(pend_cap(), kSyscallBurst * 128));
    gro_ = true;
}

NICFW_HOT size_t UdpTransport::train_length(size_t first) const {
    if (!gso_ || first >= tx_queue_.size()) return 1;
    const TxSlot& a = tx_slots_[tx_queue_[first]];
    size_t seg = a.iov.iov_len, bytes = seg, n = 1;
    for (size_t j = first + 1; j < tx_queue_.size() && n < kMaxTrain; j++) {
        const TxSlot& b = tx_slots_[tx_queue_[j]];
        if (b.to.sin_addr.s_addr != a.to.sin_addr.s_addr || b.to.sin_port != a.to.sin_port || b.fd != a.fd) break;
        if (b.iov.iov_len > seg || bytes + b.iov.iov_len > kMaxTrainBytes) break;
        n++;
        bytes += b.iov.iov_len;
        if (b.iov.iov_len < seg) break;  // a shorter one ends the train
    }
    return n;
}

int UdpTransport::make_train(size_t first, size_t n) {
    if (train_free_.empty()) return -1;
    int t = train_free_.back();
    train_free_.pop_back();
    TxTrain& tr = trains_[static_cast<size_t>(t)];
    tr.n = static_cast<uint32_t>(n);
    for (size_t k = 0; k < n; k++) {
        int slot = tx_queue_[first + k];
        tr.slots[k] = slot;
        tr.iov[k] = tx_slots_[slot].iov;
    }
    TxSlot& head = tx_slots_[tx_queue_[first]];
    tr.msg = {};
    tr.msg.msg_name = head.msg.msg_name;  // null on a peer's connected socket
    tr.msg.msg_namelen = head.msg.msg_namelen;
    tr.msg.msg_iov = tr.iov;
    tr.msg.msg_iovlen = n;
    tr.msg.msg_control = tr.ctl;
    tr.msg.msg_controllen = sizeof tr.ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&tr.msg);
    c->cmsg_level = IPPROTO_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = static_cast<uint16_t>(head.iov.iov_len);
    memcpy(CMSG_DATA(c), &seg, sizeof seg);
    return t;
}

void UdpTransport::train_done(int t, int res) {
    TxTrain& tr = trains_[static_cast<size_t>(t)];
    if (res == -EIO || res == -EINVAL || res == -EOPNOTSUPP) {
        // No trains on this socket's route: the datagrams go one by one, now and from now on.
        gso_ = false;
        for (uint32_t k = 0; k < tr.n; k++) queue_send(tr.slots[k]);
    } else {
        if (res >= 0) stats_.tx_trains++;
        for (uint32_t k = 0; k < tr.n; k++) {
            int slot = tr.slots[k];
            send_done(slot, res >= 0 ? static_cast<int>(tx_slots_[slot].iov.iov_len) : res);
        }
    }
    train_free_.push_back(t);
}

// Two datagrams of one length, kGroMinSegment bytes or more and the longest of the read,
// are trains the kernel cut (each train's datagrams but its last have that length; small
// frames, ACKs and short messages, are never that long): from now on they come in whole.
NICFW_HOT void UdpTransport::watch_trains(int n) {
    if (gro_on_ || n < 2) return;
    uint32_t top = 0;
    for (int i = 0; i < n; i++) {
        const uint32_t len = mm_[i].msg_len;
        if (len < kGroMinSegment) continue;
        if (len == top) {
            // Refused, though setup_segments saw it taken: no trains in from now on, rather
            // than a system call per read that brings them. The receive socket gets it too
            // (a socket without it still reads a train, as single datagrams).
            if (set_gro(fd_)) {
                gro_on_ = true;
                if (rx_fd_ >= 0) set_gro(rx_fd_);
            } else {
                gro_ = false;
            }
            return;
        }
        if (len > top) top = len;
    }
}

bool UdpTransport::set_gro(int fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on) == 0;
}

// What recvmmsg put in entry i: a datagram, or (gro_) a train of datagrams of the length
// its UDP_GRO control message gives, the last one possibly shorter.
NICFW_HOT void UdpTransport::take_read(uint32_t i, uint32_t len) {
    msghdr& h = mm_[i].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_in);  // the kernel wrote it; mm_from_[i] holds the name
    uint32_t seg = len;
    if (gro_) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
            if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int v;
                memcpy(&v, CMSG_DATA(c), sizeof v);
                if (v > 0 && static_cast<uint32_t>(v) < len) seg = static_cast<uint32_t>(v);
            }
        h.msg_controllen = sizeof mm_ctl_[i].b;
    }
    const auto* d = static_cast<const uint8_t*>(mm_iov_[i].iov_base);
    // Larger than mtu (possible with gro_'s bigger buffers): dropped, as without them.
    if ((h.msg_flags & MSG_TRUNC) || seg > mtu_) {
        stats_.rx_datagrams++;
        stats_.rx_truncated++;
        return;
    }
    if (seg == 0 || seg == len) {  // one datagram (an empty one is malformed)
        stats_.rx_datagrams++;
        take_datagram(d, len, mm_from_[i], -1);
        return;
    }
    stats_.rx_trains++;
    for (uint32_t off = 0; off < len; off += seg) {
        stats_.rx_datagrams++;
        take_datagram(d + off, std::min(seg, len - off), mm_from_[i], -1);
    }
}

}  // namespace softvia::nicfw
