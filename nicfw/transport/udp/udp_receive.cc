// udp transport: the receive side (layout and rules in udp_transport.h). rx=syscall reads
// up to kSyscallBurst datagrams per recvmmsg (udp_segments.cc cuts a UDP_GRO train);
// rx=multishot keeps one io_uring multishot recvmsg armed into the provided-buffer ring
// and takes its completions (reap, in udp_transport.cc, hands them here). Either way a
// datagram is checked (preamble, nonces, the sender: a known peer, an announced send
// socket, or a new peer from a frame) and its frame queued for the engine's rx_burst.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "udp_transport.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

namespace {
// Which thread is stepping: the address of a thread-local (no system call).
const void* this_thread_tag() {
    static thread_local char tag;
    return &tag;
}
}  // namespace

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
NICFW_HOT bool UdpTransport::take_datagram(const uint8_t* d, uint32_t len, const sockaddr_in& from, int bid) {
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

NICFW_HOT int UdpTransport::read_socket(int fd, uint32_t first, uint32_t n) {
    stats_.rx_polls++;
    int got = wire_recvmmsg(fd, mm_.data() + first, n, MSG_DONTWAIT);
    if (got >= 0) return got;
    // The NIC socket's error queue (IP_RECVERR): ICMP reports, read in poll_slow.
    if (errno != EAGAIN && errno != EINTR && fd == fd_) errors_pending_ = true;
    return 0;
}

// With a receive socket: whether the NIC socket is due for a read by time (rdtsc: no
// system call; about every 8 us, so a sleeping firmware thread reads it on every step).
NICFW_HOT bool UdpTransport::nic_read_due() {
#ifdef NICFW_HAVE_TSC
    return tsc_passed(&nic_read_tsc_, kNicSocketTicks);
#else
    return (++nic_read_tsc_ & 15) == 0;
#endif
}

// rx=syscall: a recvmmsg per burst into the kSyscallBurst buffers (the engine releases a
// burst before it asks for the next); with a receive socket, that one's and the NIC
// socket's before it when due (udp_peer_sockets.cc says when).
NICFW_HOT void UdpTransport::recv_syscall() {
    if (pend_count_ || !taken_.empty()) return;
    uint32_t n = 0;
    if (rx_fd_ < 0) {
        n = read_again(fd_, static_cast<uint32_t>(read_socket(fd_, 0, kSyscallBurst)));
    } else if (rx_drain_) {
        // The peer's frames move to the receive socket: none is taken from it until a read
        // of the NIC socket comes back short (it was empty then), and its first one is
        // taken after what came there meanwhile. One path, in order: what the peer sent by
        // its NIC socket before is queued at ours by then. A NIC socket that never reads
        // short (a flood) ends the wait after kDrainReads reads: order is given up then.
        n = static_cast<uint32_t>(read_socket(fd_, 0, kSyscallBurst));
        if (n < kSyscallBurst / 2 && read_socket(rx_fd_, n, 1) == 1) {
            stats_.rx_socket_reads++;
            rx_drain_ = false;
            const uint32_t before = static_cast<uint32_t>(read_socket(fd_, n + 1, kSyscallBurst - n - 1));
            for (uint32_t i = 0; i < n; i++) take_read(i, mm_[i].msg_len);
            for (uint32_t i = n + 1; i <= n + before; i++) take_read(i, mm_[i].msg_len);
            take_read(n, mm_[n].msg_len);
            if (gro_) watch_trains(static_cast<int>(n + 1 + before));
            return;
        }
        if (--drain_reads_ == 0) rx_drain_ = false;
    } else {
        if (nic_credit_ || nic_read_due()) {
            n = static_cast<uint32_t>(read_socket(fd_, 0, kSyscallBurst / 2));
            nic_credit_ = n ? kNicSocketCredit : nic_credit_ ? nic_credit_ - 1 : 0;
        }
        uint32_t own = static_cast<uint32_t>(read_socket(rx_fd_, n, kSyscallBurst - n));
        if (n == 0) own = read_again(rx_fd_, own);
        stats_.rx_socket_reads += own;
        n += own;
    }
    for (uint32_t i = 0; i < n; i++) take_read(i, mm_[i].msg_len);
    if (gro_) watch_trains(static_cast<int>(n));
}

// A program that only waits for us (Engine::spin_stop): an empty read is taken again at
// once, up to spin_again_ times, until stop says otherwise. Back to back in this loop the
// reads leave only the system call between them: the same reads through the engine's
// step, or through a lean re-read called from the engine, timed 0.06-0.11 us slower a
// one-way trip (docs/transports.md, receive spin).
NICFW_HOT uint32_t UdpTransport::read_again(int fd, uint32_t got) {
    for (uint32_t k = 0; got == 0 && k < spin_again_ && !spin_stop_(); k++)
        got = static_cast<uint32_t>(read_socket(fd, 0, kSyscallBurst));
    return got;
}

NICFW_HOT int UdpTransport::rx_burst_spin(RxFrame* out, int max, uint32_t again, SpinStop stop) {
    spin_again_ = rx_syscall_ ? again : 0;
    spin_stop_ = stop;
    const int n = rx_burst(out, max);
    spin_again_ = 0;
    return n;
}

NICFW_HOT int UdpTransport::rx_burst(RxFrame* out, int max) {
    // What this step committed so far leaves before we spend time on receiving (a reply
    // must not wait behind a recvmmsg); the step's pacing count runs on to tx_flush.
    submit();
    if (rx_syscall_) {
        // Sends' completions (free slots; a send an ICMP report failed goes again), when the
        // ring has any: most sends are direct, and an idle poll need not read the ring.
        if (ring_sends_) reap();
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

NICFW_HOT void UdpTransport::rx_release() {
    for (int bid : taken_)
        if (bid >= 0) recycle(bid);
    taken_.clear();
}

}  // namespace softvia::nicfw
