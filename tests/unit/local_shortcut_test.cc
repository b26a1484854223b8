// tests/unit/local_shortcut_test.cc -- the same-host shortcut: which path a peer takes,
// frames both ways on each path, peers that reach us first, and malformed addresses.
// Both children are real shm transports: the "wire" is a second set of shm rings, so a
// frame's path shows in which child carried it.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "nicfw/device.h"
#include "transport/local/local_shortcut.h"
#include "transport/shm/shm_transport.h"

using namespace softvia::nicfw;

namespace {

std::unique_ptr<LocalShortcut> make(uint64_t host) {
    std::unique_ptr<ShmTransport> wire, shm;
    EXPECT_EQ(0, ShmTransport::create(&wire));
    EXPECT_EQ(0, ShmTransport::create(&shm));
    return std::make_unique<LocalShortcut>(std::move(wire), std::move(shm), host);
}

std::vector<uint8_t> addr(const Transport& t) {
    size_t n;
    const uint8_t* a = t.local_addr(&n);
    return std::vector<uint8_t>(a, a + n);
}

void send(Transport& t, int peer, uint8_t tag) {
    uint8_t* p = t.tx_reserve(peer, 64);
    ASSERT_NE(nullptr, p);
    memset(p, tag, 64);
    t.tx_commit(peer, 64);
    t.tx_flush();
}

// The one frame waiting at t, within a bound; returns its peer index.
int receive(Transport& t, uint8_t tag) {
    RxFrame f[4];
    for (int spins = 0; spins < 1000000; spins++) {
        int n = t.rx_burst(f, 4);
        if (n == 0) continue;
        EXPECT_EQ(1, n);
        EXPECT_EQ(64u, f[0].len);
        EXPECT_EQ(tag, f[0].data[0]);
        EXPECT_EQ(tag, f[0].data[63]);
        int peer = f[0].peer;
        t.rx_release();
        return peer;
    }
    ADD_FAILURE() << "no frame arrived";
    return -1;
}

TEST(LocalShortcut, SameHostGoesThroughShm) {
    auto a = make(42), b = make(42);
    int pb = a->resolve(addr(*b).data(), addr(*b).size());
    ASSERT_GE(pb, 0);
    EXPECT_TRUE(a->peer_is_local(pb));
    send(*a, pb, 0x11);
    int pa = receive(*b, 0x11);
    ASSERT_GE(pa, 0);
    EXPECT_TRUE(b->peer_is_local(pa));
    send(*b, pa, 0x22);  // the answer goes back the way the request came
    EXPECT_EQ(pb, receive(*a, 0x22));
    EXPECT_STREQ("shm+shm", a->name());
}

TEST(LocalShortcut, OtherHostGoesThroughTheWire) {
    auto a = make(1), b = make(2);
    int pb = a->resolve(addr(*b).data(), addr(*b).size());
    ASSERT_GE(pb, 0);
    EXPECT_FALSE(a->peer_is_local(pb));
    send(*a, pb, 0x33);
    int pa = receive(*b, 0x33);
    ASSERT_GE(pa, 0);
    EXPECT_FALSE(b->peer_is_local(pa));
    // b learned a's wire part only; naming a by that address finds the same peer.
    const std::vector<uint8_t>& learned = b->peer_addr(pa);
    EXPECT_EQ(pa, b->resolve(learned.data(), learned.size()));
    send(*b, pa, 0x44);
    EXPECT_EQ(pb, receive(*a, 0x44));
}

// Wire peers first, then a same-host NIC. Until the shm child has a peer the layer passes
// the wire through (a wire peer's index is the wire's own, and a peer first met in a
// frame gets its entry there); after it, every peer keeps its index, the new one gets
// another, and each is reached on its own path both ways.
TEST(LocalShortcut, WirePeersKeepTheirIndexWhenASameHostPeerComes) {
    auto b = make(42), a1 = make(1), a2 = make(2), c = make(42);
    const int b1 = a1->resolve(addr(*b).data(), addr(*b).size());
    const int b2 = a2->resolve(addr(*b).data(), addr(*b).size());
    ASSERT_GE(b1, 0);
    ASSERT_GE(b2, 0);
    send(*a1, b1, 0x51);
    const int p1 = receive(*b, 0x51);
    send(*a2, b2, 0x52);
    const int p2 = receive(*b, 0x52);
    ASSERT_GE(p1, 0);
    ASSERT_GE(p2, 0);
    EXPECT_NE(p1, p2);
    ASSERT_EQ(2u, b->peer_count());
    EXPECT_FALSE(b->peer_is_local(p1));
    EXPECT_FALSE(b->peer_is_local(p2));
    EXPECT_TRUE(b->names_peer(p2, addr(*a2).data(), addr(*a2).size()));
    // A third wire peer, met while b reads in a tight loop (the wire passed through).
    auto a3 = make(3);
    const int b3 = a3->resolve(addr(*b).data(), addr(*b).size());
    ASSERT_GE(b3, 0);
    for (int i = 0; i < 20; i++) send(*a1, b1, 0x71);
    send(*a3, b3, 0x71);
    std::vector<int> from;
    RxFrame f[8];
    for (int spins = 0; spins < 1000000 && from.size() < 21; spins++) {
        const int n = b->rx_burst(f, 8);
        for (int i = 0; i < n; i++) from.push_back(f[i].peer);
        if (n) b->rx_release();
    }
    ASSERT_EQ(21u, from.size());
    int p3 = -1, of_p1 = 0;  // (the wire may read its peers' rings in either order)
    for (int peer : from) {
        if (peer == p1)
            of_p1++;
        else
            p3 = peer;
    }
    EXPECT_EQ(20, of_p1);
    EXPECT_TRUE(p3 != p1 && p3 != p2) << p3;
    EXPECT_EQ(3u, b->peer_count());
    EXPECT_TRUE(b->names_peer(p3, addr(*a3).data(), addr(*a3).size()));
    // The same-host NIC.
    const int bc = c->resolve(addr(*b).data(), addr(*b).size());
    ASSERT_GE(bc, 0);
    EXPECT_TRUE(c->peer_is_local(bc));
    send(*c, bc, 0x53);
    const int pc = receive(*b, 0x53);  // b looks at its shm child in every 64th poll until then
    ASSERT_GE(pc, 0);
    EXPECT_TRUE(b->peer_is_local(pc));
    EXPECT_TRUE(pc != p1 && pc != p2 && pc != p3) << pc;
    EXPECT_EQ(4u, b->peer_count());
    send(*b, p1, 0x61);
    EXPECT_EQ(b1, receive(*a1, 0x61));
    send(*b, p2, 0x62);
    EXPECT_EQ(b2, receive(*a2, 0x62));
    send(*b, p3, 0x63);
    EXPECT_EQ(b3, receive(*a3, 0x63));
    send(*b, pc, 0x64);
    EXPECT_EQ(bc, receive(*c, 0x64));
    send(*a1, b1, 0x71);
    EXPECT_EQ(p1, receive(*b, 0x71));
    send(*c, bc, 0x73);
    EXPECT_EQ(pc, receive(*b, 0x73));
}

TEST(LocalShortcut, ResolvingTwiceGivesOnePeer) {
    auto a = make(7), b = make(7);
    std::vector<uint8_t> ab = addr(*b);
    int p1 = a->resolve(ab.data(), ab.size());
    int p2 = a->resolve(ab.data(), ab.size());
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(1u, a->peer_count());
}

TEST(LocalShortcut, MalformedAddresses) {
    auto a = make(9), b = make(9);
    std::vector<uint8_t> ab = addr(*b);
    EXPECT_EQ(-EINVAL, a->resolve(nullptr, 0));
    EXPECT_EQ(-EINVAL, a->resolve(ab.data(), 0));
    EXPECT_EQ(-EINVAL, a->resolve(ab.data(), LocalShortcut::kHdrLen - 1));
    EXPECT_EQ(-EINVAL, a->resolve(ab.data(), ab.size() - 1));  // lengths disagree
    std::vector<uint8_t> bad = ab;
    bad[3] = 1;  // reserved byte
    EXPECT_EQ(-EINVAL, a->resolve(bad.data(), bad.size()));
    bad = ab;
    bad[1] = 200;  // wire part longer than the address
    EXPECT_EQ(-EINVAL, a->resolve(bad.data(), bad.size()));
    std::vector<uint8_t> junk(ab.size(), 0xEE);
    EXPECT_LT(a->resolve(junk.data(), junk.size()), 0);
    EXPECT_EQ(0u, a->peer_count());
    EXPECT_LE(ab.size(), 64u);  // fits NICFW_MAX_ADDR
}

TEST(LocalShortcut, HostIdentityIsStableAndNamespaced) {
    EXPECT_EQ(host_identity(), host_identity());
    EXPECT_NE(0u, host_identity());
}

TEST(DeviceName, ParseAndCreate) {
    DeviceSpec s;
    std::string why;
    ASSERT_EQ(0, parse_device_name("shm:progress=thread", &s, &why));
    EXPECT_EQ("shm", s.kind);
    ASSERT_NE(nullptr, s.get("progress"));
    EXPECT_STREQ("thread", s.get("progress"));
    EXPECT_EQ(nullptr, s.get("local"));
    EXPECT_EQ(-EINVAL, parse_device_name("", &s, &why));
    EXPECT_EQ(-EINVAL, parse_device_name(":x=1", &s, &why));
    EXPECT_EQ(-EINVAL, parse_device_name("shm:progress", &s, &why));
    EXPECT_EQ(-EINVAL, parse_device_name("shm:=1", &s, &why));
    EXPECT_EQ(-EINVAL, parse_device_name("shm:a=1,a=2", &s, &why));
    EXPECT_FALSE(why.empty());

    std::unique_ptr<Transport> t;
    ASSERT_EQ(0, parse_device_name("nosuch", &s, &why));
    EXPECT_EQ(-ENODEV, create_transport(s, &t, &why));
    ASSERT_EQ(0, parse_device_name("shm:color=red", &s, &why));
    EXPECT_EQ(-EINVAL, create_transport(s, &t, &why));
    EXPECT_NE(std::string::npos, why.find("color"));
    ASSERT_EQ(0, parse_device_name("shm:local=sideways", &s, &why));
    EXPECT_EQ(-EINVAL, create_transport(s, &t, &why));
    ASSERT_EQ(0, parse_device_name("shm:progress=inline", &s, &why));
    ASSERT_EQ(0, create_transport(s, &t, &why));
    EXPECT_STREQ("shm", t->name());
}

}  // namespace
