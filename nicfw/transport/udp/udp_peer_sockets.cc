// udp transport: a connected send socket per peer (txsock=peer, the default).
//
// A sendmsg on an unconnected UDP socket looks up the route to its destination on every
// call; a connected socket keeps it. On a veth pair between namespaces that is 0.1-0.3 us
// of a 5 us one-way trip (tools/bench/udp_floor, mode peer against mmsg;
// docs/transports.md). But connecting the NIC's own socket is not an option: a socket
// connected to a peer takes that peer's datagrams from every unconnected socket on its
// port, and the NIC has one socket for all its peers. So frames to a peer leave by a
// socket of their own, bound to the NIC's address and an ephemeral port and connected to
// the peer; everything still arrives at the NIC's socket.
//
// The receiver knows its peers by address, port and nonce, and must not take a frame from
// another port as a peer's on the word of the frame alone: the nonce is part of the NIC's
// published address, and any process on the peer's host could send from a port of its
// own. So the port is announced from the NIC's socket, which only the NIC holds:
//   PORT (NIC socket -> peer's NIC socket, the send socket's port) -> PORT_ACK (the same
//   way back). Only then do frames leave by the send socket, flagged (preamble byte 5)
//   and carrying the NIC socket's port (bytes 6..7).
// A flagged frame from a port the receiver has not been told of (it has freed the peer
// since, or the frame is forged) is dropped, and PORT_NAK, naming that port, goes to the
// NIC port the frame names. A NIC that gets one for its send socket from that peer gives
// the socket up, and its frames go by the NIC socket again (a peer that has forgotten it
// learns it anew from them); a refusal of a forgery names another port and changes nothing.
// A NIC opens a send socket in its slow path (within about a millisecond) once a frame
// came from that peer (the peer has resolved this NIC by then), announces it again with
// each probe round until answered, and gives it up after kMaxAnnounces unanswered.
// Until the answer, frames go by the NIC's socket.
//
// Probes stay on the NIC's socket: its error queue (IP_RECVERR) is where a closed port's
// ICMP answers are counted (liveness, udp_transport.h). A send socket hears of a closed
// port as a failed send (ECONNREFUSED): it is given up, and that frame and the next go by
// the NIC's socket. At most kMaxPeerSockets per NIC.
//
// The receive socket (rxsock=peer, the default, with rx=syscall): the kernel finds a
// connected UDP socket by the datagram's four addresses before it routes the datagram
// ("early demux") and reuses the route it keeps; a datagram for an unconnected socket is
// routed on arrival. On a veth pair between namespaces that is 0.12-0.19 us of a 5 us
// one-way trip (tools/bench/udp_floor, mode conn against peer; docs/transports.md). So
// when a peer announces its send socket, a socket bound to the NIC's own address and port
// (SO_REUSEPORT) and connected to that send socket takes everything it sends; the kernel
// gives a connected member of a reuseport group all of its four-tuple's datagrams, and
// the NIC's socket the rest. The frames are checked as before (preamble, nonce, the
// announced port).
// - The group is made when the NIC is created (make_reuseport_group, udp_transport.cc):
//   the NIC's socket bound alone (its own port), then SO_REUSEPORT and a program that
//   gives it every datagram no connected member takes. A member joining later (ours
//   between its bind and its connect, or another process of the same user) gets none of
//   those. A second NIC asking for the port is still refused (it binds without the option).
//   Linux 5.4 or later; else, or rxsock=shared, no group and no receive socket.
// - One per NIC: each socket polled is a system call per step, so the first peer to
//   announce gets it (the two-party case: a ping-pong, a client and its server); when that
//   peer is freed it goes to another with a known send socket. The others' frames arrive
//   at the NIC's socket as before.
// - Polling: the receive socket every step; the NIC's socket before it, about every 8 us
//   (kNicSocketTicks: a firmware thread that sleeps between idle steps reads it on every
//   step) and on every step for kNicSocketCredit steps after a read of it brought
//   datagrams, into at most half the burst, so a flood at the NIC's port cannot starve
//   the receive socket's peer.
// - The switch keeps the peer's order (rx_drain_, from the open or a new send socket):
//   nothing is read from the receive socket until a read of the NIC socket comes back
//   short (under half a burst: it was empty), then one datagram, then the NIC socket
//   again, whose datagrams go to the engine first. The peer sent by its NIC socket before
//   it sent by its send socket, over one path, so those are queued at ours by the time
//   its first frame is at the receive socket. A flood that keeps the NIC socket full ends
//   the wait after kDrainReads reads (order given up, not the peer).
// - It closes only with its peer (free_peer): datagrams queued in it are lost with it. A
//   new send socket of the same peer (announced again) gets it connected anew.
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "udp_transport.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

void UdpTransport::open_peer_socket(Peer& p) {
    p.tx_tried = true;
    if (peer_sockets_open_ >= kMaxPeerSockets) return;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_in me{};
    me.sin_family = AF_INET;
    memcpy(&me.sin_addr.s_addr, addr_ + 4, 4);  // the NIC's address: the peer checks it
    socklen_t sl = sizeof me;
    if (bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0 ||
        connect(fd, reinterpret_cast<const sockaddr*>(&p.sa), sizeof p.sa) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&me), &sl) != 0) {
        close(fd);
        return;
    }
    set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
    p.tx_fd = fd;
    p.tx_port = me.sin_port;
    p.announces = 1;
    peer_sockets_open_++;
    queue_control(p.sa, p.nonce, kTypePort, p.tx_port);
}

// The slow path (about every millisecond, never a post's step).
void UdpTransport::announce_peer_sockets(bool again) {
    sockets_to_open_ = false;
    for (Peer& p : peers_) {
        if (p.dead || p.freed || p.released || p.tx_ready) continue;
        if (!p.tx_tried && p.heard && peer_sockets_) {
            open_peer_socket(p);
            continue;
        }
        if (p.tx_fd < 0 || !again) continue;
        if (p.announces++ >= kMaxAnnounces) {
            drop_peer_socket(p);  // never answered: not worth a socket
            continue;
        }
        queue_control(p.sa, p.nonce, kTypePort, p.tx_port);
    }
}

void UdpTransport::queue_control(const sockaddr_in& to, uint32_t dst_nonce, uint8_t type, uint16_t port_be) {
    if (tx_free_.empty()) return;  // lost, as a datagram may be: announcements repeat
    int slot = tx_free_.back();
    tx_free_.pop_back();
    TxSlot& s = tx_slots_[slot];
    write_preamble(s, to, dst_nonce, type, 0);
    memcpy(s.buf + kPPort, &port_be, 2);
    s.peer = -1;
    send_by_nic_socket(s);
    queue_send(slot);
}

// A control datagram from peer id's NIC socket.
void UdpTransport::on_port_control(int id, uint8_t type, uint16_t port_be, const sockaddr_in& from) {
    Peer& p = peers_[static_cast<size_t>(id)];
    if (type == kTypePort) {
        if (port_be == 0) return;
        // The peer's frames may come from that port now (one send socket per peer).
        forget_send_socket(id);
        by_send_socket_[endpoint_key(from.sin_addr.s_addr, port_be)] = id;
        last_send_socket_ = kNoEndpoint;
        if (rx_sockets_ && rx_syscall_) open_rx_socket(id, from.sin_addr.s_addr, port_be);
        queue_control(p.sa, p.nonce, kTypePortAck, port_be);
    } else if (p.tx_fd >= 0 && port_be == p.tx_port) {
        if (type == kTypePortAck) {
            p.tx_ready = true;
        } else {  // PORT_NAK: the peer does not know it (any more)
            drop_peer_socket(p);
            stats_.peer_socket_failures++;
        }
    }
}

void UdpTransport::send_by_nic_socket(TxSlot& s) {
    if (s.buf[kPFlags] == kFlagPeerSocket) {  // a frame that was to leave by a send socket
        s.buf[kPFlags] = 0;
        s.buf[kPPort] = s.buf[kPPort + 1] = 0;
    }
    s.fd = fd_;
    s.msg.msg_name = &s.to;
    s.msg.msg_namelen = sizeof s.to;
}

void UdpTransport::drop_peer_socket(Peer& p) {
    if (p.tx_fd < 0) return;
    for (int slot : tx_queue_)
        if (tx_slots_[slot].fd == p.tx_fd) send_by_nic_socket(tx_slots_[slot]);
    // Requests already in the ring hold the file; one prepared but not yet submitted
    // names only the number, so the close waits until the ring has taken them all.
    dropped_fds_.push_back(p.tx_fd);
    p.tx_fd = -1;
    p.tx_ready = false;
    peer_sockets_open_--;
    close_dropped_sockets();
}

void UdpTransport::close_dropped_sockets() {
    if (unsubmitted_ != 0) return;  // the next submit closes them
    for (int fd : dropped_fds_) close(fd);
    dropped_fds_.clear();
}

void UdpTransport::forget_send_socket(int id) {
    for (auto a = by_send_socket_.begin(); a != by_send_socket_.end();)
        a = a->second == id ? by_send_socket_.erase(a) : std::next(a);
    last_send_socket_ = kNoEndpoint;
}

NICFW_HOT int UdpTransport::peer_by_send_socket(const uint8_t* d, const sockaddr_in& from) {
    const uint32_t src_nonce = get32(d + kPSrcNonce);
    const uint64_t key = endpoint_key(from.sin_addr.s_addr, from.sin_port);
    int id = -1;
    if (key == last_send_socket_) {  // the last one looked up: no hash (a division) and no chain
        id = last_send_socket_id_;
    } else if (auto it = by_send_socket_.find(key); it != by_send_socket_.end()) {
        id = it->second;
        last_send_socket_ = key;
        last_send_socket_id_ = id;
    }
    if (id >= 0) {
        const Peer& p = peers_[static_cast<size_t>(id)];
        if (!p.freed && p.nonce == src_nonce) {
            stats_.rx_peer_socket++;
            return id;
        }
    }
    // Not announced to us: the NIC whose port the frame names goes back to its NIC socket.
    stats_.rx_strangers++;
    sockaddr_in nic = from;
    memcpy(&nic.sin_port, d + kPPort, 2);
    if (nic.sin_port != 0) queue_control(nic, src_nonce, kTypePortNak, from.sin_port);
    return -1;
}

void UdpTransport::open_rx_socket(int id, in_addr_t ip, uint16_t port_be) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = ip;
    to.sin_port = port_be;
    if (rx_fd_ >= 0) {
        if (rx_peer_ != id || (rx_ip_ == ip && rx_port_ == port_be)) return;  // another's, or announced again
        // The peer's new send socket: connected to it instead (what the old one sent and
        // is still queued stays readable). A socket that cannot be is given up.
        if (connect(rx_fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
            close_rx_socket();
            return;
        }
        rx_ip_ = ip;
        rx_port_ = port_be;
        start_drain();  // its frames came by its NIC socket since it dropped the old one
        return;
    }
    int on = 1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_in me{};
    me.sin_family = AF_INET;
    memcpy(&me.sin_port, addr_ + 2, 2);
    memcpy(&me.sin_addr.s_addr, addr_ + 4, 4);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0 ||
        bind(fd, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0 ||
        connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
        close(fd);
        return;
    }
    set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
    if (gro_on_) set_gro(fd);  // trains came in already: they come here too
    rx_fd_ = fd;
    rx_peer_ = id;
    rx_ip_ = ip;
    rx_port_ = port_be;
    start_drain();  // older frames of the peer may wait at the NIC's socket
    stats_.rx_sockets_opened++;
}

void UdpTransport::close_rx_socket() {
    if (rx_fd_ >= 0) close(rx_fd_);
    rx_fd_ = -1;
    rx_peer_ = -1;
}

// Its peer is gone: the socket goes to another peer whose send socket is known, if any.
void UdpTransport::hand_over_rx_socket(int gone) {
    close_rx_socket();
    for (const auto& [key, id] : by_send_socket_) {
        const Peer& p = peers_[static_cast<size_t>(id)];
        if (id == gone || p.dead || p.freed) continue;
        open_rx_socket(id, static_cast<in_addr_t>(key >> 16), static_cast<uint16_t>(key & 0xffff));
        if (rx_fd_ >= 0) return;
    }
}

}  // namespace softvia::nicfw
