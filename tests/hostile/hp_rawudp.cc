// hp_rawudp.cc -- udp only: datagrams that are not what a udp NIC sends, from a plain
// socket of the hostile process (another port, so the owner sees another endpoint).
//
// The udp wire's preamble (nicfw/transport/udp/udp_transport.h): magic "SVU1", type
// (1 frame, 2 probe), three zero bytes, the sender's host id, its nonce, the receiver's
// nonce. Broken preambles, wrong nonces, probes carrying data, datagrams over the MTU,
// and well-formed ones carrying fuzzed frames from a handful of made-up NICs (a fixed
// set: each one becomes a peer of the owner, and a peer table is not what this tests).
// Also the send-socket datagrams (udp_peer_sockets.cc): frames flagged as from a send
// socket the owner was never told of, naming the good peer's port; PORT, PORT_ACK and
// PORT_NAK with any port, some in the good peer's name.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "hp_hostile.h"

namespace hp {

namespace {
constexpr uint32_t kMagic = 0x31555653u;  // "SVU1" little-endian
constexpr uint32_t kPre = 24;
constexpr uint32_t kFakeNics = 16;
}  // namespace

int raw_udp_open(Hostile& H) {
    H.owner_sa.sin_family = AF_INET;
    memcpy(&H.owner_sa.sin_port, H.owner_addr + 2, 2);
    memcpy(&H.owner_sa.sin_addr.s_addr, H.owner_addr + 4, 4);
    memcpy(&H.owner_nonce, H.owner_addr + 16, 4);
    H.raw_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (H.raw_fd < 0) return -1;
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr = H.owner_sa.sin_addr;  // the owner's interface: the same host
    return bind(H.raw_fd, reinterpret_cast<sockaddr*>(&me), sizeof me);
}

void raw_udp(Hostile& H) {
    uint8_t d[2048];
    uint32_t my_nonce, good_nonce;
    memcpy(&my_nonce, H.my_addr + 16, 4);
    memcpy(&good_nonce, H.good_addr + 16, 4);
    memcpy(d, &kMagic, 4);
    d[4] = 1;
    d[5] = d[6] = d[7] = 0;
    memcpy(d + 8, H.my_addr + 8, 8);  // our host id
    uint32_t src = 0xFACE0000u + H.below(kFakeNics), dst = H.owner_nonce;
    uint32_t len = kPre + kHdr + H.below(256);
    switch (H.below(13)) {
        case 0: len = H.below(kPre); break;
        case 1: d[H.below(4)] ^= static_cast<uint8_t>(1 + H.below(255)); break;
        case 2: d[4 + H.below(4)] = H.chance(50) ? static_cast<uint8_t>(H.r32()) : 3; break;
        case 3: dst ^= 1 + H.below(0xFFFF); break;
        case 4: src = 0; break;
        case 5: d[4] = 2; break;  // a probe with a frame after it
        case 6: len = 1500 + H.below(500); break;
        case 7: src = my_nonce; break;    // our NIC's nonce from another endpoint
        case 8: src = good_nonce; break;  // the good peer's nonce, from our endpoint
        case 9:                           // "from my send socket", the good peer's NIC port
            d[5] = 1;
            memcpy(d + 6, H.good_addr + 2, 2);
            if (H.chance(50)) src = good_nonce;
            break;
        case 10:  // a send socket's announcement, answer or refusal, maybe in the good peer's name
            d[4] = static_cast<uint8_t>(3 + H.below(3));
            d[6] = static_cast<uint8_t>(H.r32());
            d[7] = static_cast<uint8_t>(H.r32());
            if (H.chance(50)) src = good_nonce;
            if (H.chance(70)) len = kPre;
            break;
        default: break;
    }
    memcpy(d + 16, &src, 4);
    memcpy(d + 20, &dst, 4);
    for (uint32_t i = kPre; i < len; i++) d[i] = static_cast<uint8_t>(H.r32());
    if (len >= kPre + kHdr && H.chance(70)) {
        // a plausible header: a type, the version, VIs it may name
        nicfw_frame_hdr h = header(static_cast<uint8_t>(1 + H.below(NICFW_F_TYPE_MAX)), vi_guess(H),
                                   NICFW_VI_MAKE(H.good.vi[H.below(HP_NVI)], 1));
        h.msg_len = pool32(H);
        h.frag_len = H.chance(50) ? len - kPre - kHdr : pool32(H);
        h.seq = H.below(64);
        memcpy(d + kPre, &h, kHdr);
    }
    if (sendto(H.raw_fd, d, len, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&H.owner_sa), sizeof H.owner_sa) >= 0)
        H.frames++;
    // whatever the owner answers the made-up NICs goes unread
    while (recv(H.raw_fd, d, sizeof d, MSG_DONTWAIT) > 0) {
    }
}

// Made-up NICs, each a new sender nonce from our plain socket (so each one replaces the
// one before it on that endpoint), each asking for a connection nobody listens for (the
// owner answers NO_MATCH): kMaxFakeNics of them in all, 64 a turn. The owner must still
// answer a NIC that comes after them (the late joiner, hp_hostile.cc).
void peer_flood(Hostile& H) {
    constexpr uint32_t kMaxFakeNics = 8192;
    if (H.fake_nics >= kMaxFakeNics) return raw_udp(H);
    uint8_t d[kPre + kHdr + kFixed + 16];
    memcpy(d, &kMagic, 4);
    d[4] = 1;
    d[5] = d[6] = d[7] = 0;
    memcpy(d + 8, H.my_addr + 8, 8);
    memcpy(d + 20, &H.owner_nonce, 4);
    nicfw_conn_payload pl{};
    pl.reliability = NICFW_REL_RELIABLE_DELIVERY;
    put_disc(pl, "", HP_DISC_NOBODY);
    nicfw_frame_hdr h = header(NICFW_F_CONN_REQ, 0xFFFFFFFFu, 0x00010001u);
    h.msg_len = kFixed + pl.dst_disc_len;
    memcpy(d + kPre + kHdr, &pl, h.msg_len);
    const uint32_t len = kPre + kHdr + h.msg_len;
    for (int i = 0; i < 64; i++) {
        uint32_t nonce = 0xB0000000u + H.fake_nics++;
        memcpy(d + 16, &nonce, 4);
        h.seq = nonce;
        memcpy(d + kPre, &h, kHdr);
        if (sendto(H.raw_fd, d, len, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&H.owner_sa), sizeof H.owner_sa) >= 0)
            H.frames++;
    }
    uint8_t junk[2048];
    while (recv(H.raw_fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
    }
}

}  // namespace hp
