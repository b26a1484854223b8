// Device tests of the verbs transport: two NICs in one process exchanging frames over
// real RC queue pairs (soft-RoCE is enough). Each test skips, saying why, on a host
// without an RDMA device; on a host with one, everything here runs and is checked.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nicfw/device.h"
#include "nicfw/transport.h"

using namespace softvia::nicfw;

namespace {
bool host_has_rdma_device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    return list && n > 0;
}

#define REQUIRE_RDMA()                                                                          \
    do {                                                                                        \
        if (!host_has_rdma_device()) GTEST_SKIP() << "no RDMA device (kernel without rxe/siw)"; \
    } while (0)

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// A NIC's wire and what the test saw on it.
struct Nic {
    std::unique_ptr<Transport> t;
    std::vector<TransportEvent> events;
    std::vector<std::pair<int, std::vector<uint8_t>>> got;  // (peer, frame)

    // local=wire: over RC even on one host (not through a same-host shortcut).
    explicit Nic(const char* name = "verbs:local=wire") {
        DeviceSpec spec;
        std::string why;
        EXPECT_EQ(parse_device_name(name, &spec, &why), 0) << why;
        int rc = create_transport(spec, &t, &why);
        EXPECT_EQ(rc, 0) << name << ": " << why;
    }
    // One engine step's worth: slow path, a receive burst, flush.
    void pump() {
        t->poll_slow(events);
        RxFrame f[32];
        int n = t->rx_burst(f, 32);
        for (int i = 0; i < n; i++) got.emplace_back(f[i].peer, std::vector<uint8_t>(f[i].data, f[i].data + f[i].len));
        if (n) t->rx_release();
        t->tx_flush();
    }
    std::vector<uint8_t> addr() const {
        size_t len;
        const uint8_t* a = t->local_addr(&len);
        return {a, a + len};
    }
    bool dead_event(int peer) const {
        for (auto& e : events)
            if (e.kind == PeerEvent::kDead && e.peer == peer) return true;
        return false;
    }
};

bool pump_until(std::vector<Nic*> nics, const std::function<bool()>& done, uint64_t ms = 10000) {
    uint64_t end = now_ms() + ms;
    while (now_ms() < end) {
        for (Nic* n : nics) n->pump();
        if (done()) return true;
    }
    return false;
}

// Frame seq: its length (4..4096, every size class), the sequence number, a pattern.
uint32_t frame_len(uint32_t seq) {
    uint32_t r = seq * 2654435761u;
    return seq % 7 == 0 ? 4096 : 4 + (r >> 8) % 4093;
}
void fill(uint8_t* p, uint32_t len, uint32_t seq) {
    memcpy(p, &seq, 4);
    for (uint32_t i = 4; i < len; i++) p[i] = static_cast<uint8_t>(seq * 31 + i);
}
::testing::AssertionResult frame_ok(const std::vector<uint8_t>& f, uint32_t seq) {
    if (f.size() != frame_len(seq)) return ::testing::AssertionFailure() << "frame " << seq << ": " << f.size() << " bytes, want " << frame_len(seq);
    uint32_t got;
    memcpy(&got, f.data(), 4);
    if (got != seq) return ::testing::AssertionFailure() << "frame " << got << " where " << seq << " was due";
    for (uint32_t i = 4; i < f.size(); i++)
        if (f[i] != static_cast<uint8_t>(seq * 31 + i)) return ::testing::AssertionFailure() << "frame " << seq << " byte " << i;
    return ::testing::AssertionSuccess();
}

// Sends frames [*next, last) as the ring allows; returns whether all went.
bool send_some(Nic& n, int peer, uint32_t* next, uint32_t last) {
    while (*next < last) {
        uint32_t len = frame_len(*next);
        uint8_t* p = n.t->tx_reserve(peer, len);
        if (!p) return false;
        fill(p, len, *next);
        n.t->tx_commit(peer, len);
        ++*next;
    }
    return true;
}

// Streams count frames from -> to and checks them all, in order, from one peer.
void stream(Nic& from, int peer, Nic& to, uint32_t count, uint64_t ms = 30000) {
    to.got.clear();
    uint32_t next = 0;
    ASSERT_TRUE(pump_until({&from, &to}, [&] {
        send_some(from, peer, &next, count);
        return to.got.size() >= count;
    }, ms)) << "sent " << next << ", received " << to.got.size() << " of " << count;
    ASSERT_EQ(to.got.size(), count);
    for (uint32_t i = 0; i < count; i++) {
        ASSERT_TRUE(frame_ok(to.got[i].second, i));
        ASSERT_EQ(to.got[i].first, to.got[0].first);
    }
}
}  // namespace

TEST(VerbsPair, StreamBothWaysOverOneConnection) {
    REQUIRE_RDMA();
    Nic a, b;
    ASSERT_TRUE(a.t && b.t);
    EXPECT_FALSE(a.t->lossy());
    EXPECT_EQ(a.t->max_frame(), 4096u);
    auto baddr = b.addr();
    int pb = a.t->resolve(baddr.data(), baddr.size());
    ASSERT_GE(pb, 0);
    EXPECT_EQ(a.t->resolve(baddr.data(), baddr.size()), pb);  // one peer per NIC
    EXPECT_TRUE(a.t->peer_alive(pb));
    EXPECT_EQ(a.t->peer_addr(pb), baddr);
    EXPECT_EQ(a.t->tx_reserve(pb, 4097), nullptr);  // over max_frame

    stream(a, pb, b, 3000);
    int pa = b.got[0].first;
    EXPECT_EQ(b.t->peer_addr(pa), a.addr());  // the listener learned who connected
    auto aaddr = a.addr();
    EXPECT_EQ(b.t->resolve(aaddr.data(), aaddr.size()), pa);  // and answers over the same QP

    stream(b, pa, a, 3000);
    EXPECT_EQ(a.got[0].first, pb);
    EXPECT_EQ(a.t->peer_count(), 1u);
    EXPECT_EQ(b.t->peer_count(), 1u);
    EXPECT_TRUE(a.events.empty());
    EXPECT_TRUE(b.events.empty());
}

// A receiver that stops reading makes the sender wait (RNR retries, a full send ring),
// and loses nothing.
TEST(VerbsPair, StalledReceiverLosesNothing) {
    REQUIRE_RDMA();
    Nic a, b;
    ASSERT_TRUE(a.t && b.t);
    auto baddr = b.addr();
    int pb = a.t->resolve(baddr.data(), baddr.size());
    ASSERT_GE(pb, 0);
    stream(a, pb, b, 1);  // connected
    b.got.clear();
    const uint32_t kCount = 2000;  // several times the receive queue and the send ring
    uint32_t next = 0;
    uint64_t end = now_ms() + 1500;
    while (now_ms() < end) {  // only a runs
        send_some(a, pb, &next, kCount);
        a.pump();
    }
    EXPECT_GT(next, 0u);
    EXPECT_LT(next, kCount) << "the sender never had to wait";
    ASSERT_TRUE(pump_until({&a, &b}, [&] {
        send_some(a, pb, &next, kCount);
        return b.got.size() >= kCount;
    }, 30000)) << "received " << b.got.size();
    for (uint32_t i = 0; i < kCount; i++) ASSERT_TRUE(frame_ok(b.got[i].second, i));
    EXPECT_TRUE(a.events.empty());
}

// Both resolve each other before either has seen an event: one connection survives,
// each side has one peer, frames flow both ways.
TEST(VerbsPair, CrossedConnectsSettleOnOne) {
    REQUIRE_RDMA();
    Nic a, b;
    ASSERT_TRUE(a.t && b.t);
    auto aaddr = a.addr(), baddr = b.addr();
    int pb = a.t->resolve(baddr.data(), baddr.size());
    int pa = b.t->resolve(aaddr.data(), aaddr.size());
    ASSERT_GE(pb, 0);
    ASSERT_GE(pa, 0);
    stream(a, pb, b, 500);
    EXPECT_EQ(b.got[0].first, pa);
    stream(b, pa, a, 500);
    EXPECT_EQ(a.got[0].first, pb);
    EXPECT_EQ(a.t->peer_count(), 1u);
    EXPECT_EQ(b.t->peer_count(), 1u);
    EXPECT_TRUE(a.events.empty());
    EXPECT_TRUE(b.events.empty());
}

TEST(VerbsPair, NicToItself) {
    REQUIRE_RDMA();
    Nic a;
    ASSERT_TRUE(a.t);
    auto aaddr = a.addr();
    int self = a.t->resolve(aaddr.data(), aaddr.size());
    ASSERT_GE(self, 0);
    stream(a, self, a, 500);
    EXPECT_EQ(a.got[0].first, self);
    EXPECT_EQ(a.t->peer_count(), 1u);
    EXPECT_TRUE(a.events.empty());
}

TEST(VerbsPair, PeerThatLeavesIsDead) {
    REQUIRE_RDMA();
    Nic a;
    auto b = std::make_unique<Nic>();
    ASSERT_TRUE(a.t && b->t);
    auto baddr = b->addr();
    int pb = a.t->resolve(baddr.data(), baddr.size());
    ASSERT_GE(pb, 0);
    stream(a, pb, *b, 10);
    b.reset();  // closes its NIC: rdma_disconnect
    ASSERT_TRUE(pump_until({&a}, [&] { return a.dead_event(pb); })) << "no kDead for a NIC that closed";
    EXPECT_FALSE(a.t->peer_alive(pb));
    EXPECT_EQ(a.t->tx_reserve(pb, 64), nullptr);
    EXPECT_EQ(a.t->resolve(baddr.data(), baddr.size()), -EHOSTUNREACH);
}

TEST(VerbsPair, NobodyListeningIsDead) {
    REQUIRE_RDMA();
    Nic a;
    std::vector<uint8_t> gone;
    {
        Nic b;
        ASSERT_TRUE(b.t);
        gone = b.addr();
    }  // its port has no listener now
    ASSERT_TRUE(a.t);
    int p = a.t->resolve(gone.data(), gone.size());
    if (p == -EHOSTUNREACH) return;  // refused at once: fine too
    ASSERT_GE(p, 0);
    ASSERT_TRUE(pump_until({&a}, [&] { return a.dead_event(p); }, 20000));
    EXPECT_FALSE(a.t->peer_alive(p));
}
