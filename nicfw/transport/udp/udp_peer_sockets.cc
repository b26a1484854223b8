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
}

NICFW_HOT int UdpTransport::peer_by_send_socket(const uint8_t* d, const sockaddr_in& from) {
    const uint32_t src_nonce = get32(d + kPSrcNonce);
    auto it = by_send_socket_.find(endpoint_key(from.sin_addr.s_addr, from.sin_port));
    if (it != by_send_socket_.end()) {
        const Peer& p = peers_[static_cast<size_t>(it->second)];
        if (!p.freed && p.nonce == src_nonce) {
            stats_.rx_peer_socket++;
            return it->second;
        }
    }
    // Not announced to us: the NIC whose port the frame names goes back to its NIC socket.
    stats_.rx_strangers++;
    sockaddr_in nic = from;
    memcpy(&nic.sin_port, d + kPPort, 2);
    if (nic.sin_port != 0) queue_control(nic, src_nonce, kTypePortNak, from.sin_port);
    return -1;
}

}  // namespace softvia::nicfw
