// tests/unit/shm_transport_test.cc -- the shm transport: address resolution, lanes,
// back-pressure, malformed addresses, dead peers, and a forked peer process.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/shm/shm_transport.h"
#include "unit_util.h"

using namespace softvia::nicfw;
using unit::now_ms;

namespace {

std::unique_ptr<ShmTransport> make() {
    std::unique_ptr<ShmTransport> t;
    int rc = ShmTransport::create(&t);
    EXPECT_EQ(0, rc);
    return t;
}

std::vector<uint8_t> addr(const ShmTransport& t) {
    size_t n;
    const uint8_t* a = t.local_addr(&n);
    return std::vector<uint8_t>(a, a + n);
}

// Frame of len bytes whose content identifies (seq, len).
void fill(uint8_t* p, uint32_t len, uint32_t seq) {
    for (uint32_t i = 0; i < len; i++) p[i] = static_cast<uint8_t>(seq * 31 + i * 7 + (i >> 8));
}
bool check(const uint8_t* p, uint32_t len, uint32_t seq) {
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != static_cast<uint8_t>(seq * 31 + i * 7 + (i >> 8))) return false;
    return true;
}

bool send(ShmTransport& t, int peer, uint32_t len, uint32_t seq) {
    uint8_t* p = t.tx_reserve(peer, len);
    if (!p) return false;
    fill(p, len, seq);
    t.tx_commit(peer, len);
    return true;
}

// Receives frames into *got (checked against the expected content) until none are left.
struct Receiver {
    explicit Receiver(ShmTransport& tr) : t(tr) {}
    ShmTransport& t;
    uint32_t next_seq = 0;
    int expect_peer = -1;
    std::vector<uint32_t> lens;  // expected length per seq
    int drain() {
        RxFrame f[32];
        int total = 0;
        for (;;) {
            int n = t.rx_burst(f, 32);
            if (n == 0) break;
            for (int i = 0; i < n; i++) {
                if (expect_peer >= 0) {
                    EXPECT_EQ(expect_peer, f[i].peer);
                }
                if (next_seq >= lens.size()) {
                    ADD_FAILURE() << "more frames than sent";
                    continue;
                }
                EXPECT_EQ(lens[next_seq], f[i].len) << "seq " << next_seq;
                EXPECT_TRUE(check(f[i].data, f[i].len, next_seq)) << "seq " << next_seq;
                next_seq++;
            }
            t.rx_release();
            total += n;
        }
        return total;
    }
};

// Sends every size 1..max_frame from tx to rx (both may be the same instance).
void all_sizes(ShmTransport& tx, int peer, ShmTransport& rx) {
    Receiver r{rx};
    const uint32_t max = tx.max_frame();
    for (uint32_t len = 1; len <= max; len++) r.lens.push_back(len);
    uint32_t seq = 0;
    uint64_t end = now_ms() + 20000;
    while (seq < r.lens.size() && now_ms() < end) {
        while (seq < r.lens.size() && send(tx, peer, r.lens[seq], seq)) seq++;
        r.drain();
    }
    r.drain();
    EXPECT_EQ(r.lens.size(), seq);
    EXPECT_EQ(r.lens.size(), r.next_seq);
}

TEST(ShmTransport, Basics) {
    auto t = make();
    ASSERT_TRUE(t);
    EXPECT_STREQ("shm", t->name());
    size_t n = 0;
    const uint8_t* a = t->local_addr(&n);
    EXPECT_EQ(ShmTransport::kAddrLen, n);
    EXPECT_LE(n, NICFW_MAX_ADDR);
    EXPECT_EQ(ShmTransport::kAddrKind, a[0]);
    uint32_t pid;
    memcpy(&pid, a + 4, 4);
    EXPECT_EQ(static_cast<uint32_t>(getpid()), pid);
    EXPECT_GT(t->max_frame(), sizeof(nicfw_frame_hdr));
    // Nothing arrives on a fresh instance.
    RxFrame f[4];
    EXPECT_EQ(0, t->rx_burst(f, 4));
    std::vector<TransportEvent> ev;
    t->poll_slow(ev);
    EXPECT_TRUE(ev.empty());
    // Two instances have distinct addresses.
    auto u = make();
    EXPECT_NE(addr(*t), addr(*u));
}

TEST(ShmTransport, TwoInstancesResolveEachOther) {
    auto a = make(), b = make();
    auto aa = addr(*a), ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    int pa = b->resolve(aa.data(), aa.size());
    ASSERT_GE(pa, 0);
    EXPECT_EQ(ba, a->peer_addr(pb));
    EXPECT_EQ(aa, b->peer_addr(pa));
    EXPECT_TRUE(a->peer_alive(pb));
    EXPECT_TRUE(b->peer_alive(pa));
    // Resolving again gives the same peer.
    EXPECT_EQ(pb, a->resolve(ba.data(), ba.size()));
    EXPECT_EQ(pa, b->resolve(aa.data(), aa.size()));

    // Both directions carry frames.
    ASSERT_TRUE(send(*a, pb, 100, 0));
    ASSERT_TRUE(send(*b, pa, 200, 0));
    RxFrame f[4];
    int n = b->rx_burst(f, 4);
    ASSERT_EQ(1, n);
    EXPECT_EQ(pa, f[0].peer);  // the receiver's index for the sender
    EXPECT_EQ(100u, f[0].len);
    EXPECT_TRUE(check(f[0].data, 100, 0));
    b->rx_release();
    n = a->rx_burst(f, 4);
    ASSERT_EQ(1, n);
    EXPECT_EQ(pb, f[0].peer);
    EXPECT_EQ(200u, f[0].len);
    EXPECT_TRUE(check(f[0].data, 200, 0));
    a->rx_release();
}

TEST(ShmTransport, ReceiverLearnsSenderFromHello) {
    // b never resolves a; the hello tells b who a is.
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    ASSERT_TRUE(send(*a, pb, 64, 0));
    RxFrame f[2];
    ASSERT_EQ(1, b->rx_burst(f, 2));
    EXPECT_EQ(addr(*a), b->peer_addr(f[0].peer));
    EXPECT_TRUE(b->peer_alive(f[0].peer));
    b->rx_release();
    // The same peer index when b later resolves a explicitly.
    auto aa = addr(*a);
    EXPECT_EQ(f[0].peer, b->resolve(aa.data(), aa.size()));
}

TEST(ShmTransport, AllSizesInOrderBetweenInstances) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    all_sizes(*a, pb, *b);
}

TEST(ShmTransport, AllSizesInOrderSelfLink) {
    auto a = make();
    auto aa = addr(*a);
    int self = a->resolve(aa.data(), aa.size());
    ASSERT_GE(self, 0);
    EXPECT_TRUE(a->peer_alive(self));
    all_sizes(*a, self, *a);
    // A self link never reports itself dead.
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);
    EXPECT_TRUE(ev.empty());
    EXPECT_TRUE(a->peer_alive(self));
}

TEST(ShmTransport, OversizedReserveRefused) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    EXPECT_EQ(nullptr, a->tx_reserve(pb, a->max_frame() + 1));
    EXPECT_EQ(nullptr, a->tx_reserve(pb, UINT32_MAX));
    EXPECT_NE(nullptr, a->tx_reserve(pb, a->max_frame()));
    a->tx_commit(pb, a->max_frame());
    RxFrame f[2];
    ASSERT_EQ(1, b->rx_burst(f, 2));
    EXPECT_EQ(a->max_frame(), f[0].len);
    b->rx_release();
}

TEST(ShmTransport, ZeroLengthFrame) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_NE(nullptr, a->tx_reserve(pb, 0));
    a->tx_commit(pb, 0);
    ASSERT_TRUE(send(*a, pb, 5, 1));
    RxFrame f[4];
    ASSERT_EQ(2, b->rx_burst(f, 4));
    EXPECT_EQ(0u, f[0].len);
    EXPECT_EQ(5u, f[1].len);
    b->rx_release();
}

TEST(ShmTransport, FullLaneBlocksAndRecovers) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    uint32_t seq = 0;
    while (seq < 10000 && send(*a, pb, 48, seq)) seq++;
    const uint32_t cap = seq;
    ASSERT_GT(cap, 0u);
    ASSERT_LT(cap, 10000u) << "the lane never filled";
    EXPECT_EQ(nullptr, a->tx_reserve(pb, 48));
    EXPECT_EQ(nullptr, a->tx_reserve(pb, 1));

    // Frames taken by rx_burst but not released keep their slots.
    RxFrame f[8];
    int n = b->rx_burst(f, 8);
    ASSERT_EQ(8, n);
    for (int i = 0; i < n; i++) EXPECT_TRUE(check(f[i].data, 48, static_cast<uint32_t>(i)));
    EXPECT_EQ(nullptr, a->tx_reserve(pb, 48));
    // Still valid: the producer cannot have overwritten them.
    for (int i = 0; i < n; i++) EXPECT_TRUE(check(f[i].data, 48, static_cast<uint32_t>(i)));
    b->rx_release();

    // Exactly the released slots come back.
    uint32_t more = 0;
    while (send(*a, pb, 48, seq + more)) more++;
    EXPECT_EQ(8u, more);
    seq += more;

    // Drain everything, in order.
    Receiver r{*b};
    r.next_seq = 8;
    for (uint32_t i = 0; i < seq; i++) r.lens.push_back(48);
    r.drain();
    EXPECT_EQ(seq, r.next_seq);
    // Empty lane takes a full load again.
    uint32_t again = 0;
    while (send(*a, pb, 48, again)) again++;
    EXPECT_EQ(cap, again);
}

TEST(ShmTransport, RxBurstRespectsMax) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    for (uint32_t i = 0; i < 20; i++) ASSERT_TRUE(send(*a, pb, 16 + i, i));
    RxFrame f[32];
    uint32_t seq = 0;
    for (int max : {1, 3, 7, 32}) {
        int n = b->rx_burst(f, max);
        EXPECT_LE(n, max);
        for (int i = 0; i < n; i++, seq++) {
            EXPECT_EQ(16 + seq, f[i].len);
            EXPECT_TRUE(check(f[i].data, f[i].len, seq));
        }
        b->rx_release();
    }
    EXPECT_EQ(20u, seq);
    EXPECT_EQ(0, b->rx_burst(f, 32));
}

TEST(ShmTransport, ManyPeersInterleaved) {
    auto rx = make();
    auto ra = addr(*rx);
    std::vector<std::unique_ptr<ShmTransport>> tx;
    std::vector<int> peer;
    for (int i = 0; i < 5; i++) {
        tx.push_back(make());
        peer.push_back(tx.back()->resolve(ra.data(), ra.size()));
        ASSERT_GE(peer.back(), 0);
    }
    // Each sender's frames arrive in its own order; senders interleave freely.
    std::vector<uint32_t> sent(5, 0), got(5, 0);
    std::vector<std::vector<uint8_t>> who(5);
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 5; i++)
            if (send(*tx[i], peer[i], 100 + i, sent[i])) sent[i]++;
        RxFrame f[32];
        int n = rx->rx_burst(f, 32);
        for (int k = 0; k < n; k++) {
            int s = -1;
            for (int i = 0; i < 5; i++)
                if (rx->peer_addr(f[k].peer) == addr(*tx[i])) s = i;
            ASSERT_GE(s, 0);
            ASSERT_EQ(100u + s, f[k].len);
            EXPECT_TRUE(check(f[k].data, f[k].len, got[s]));
            got[s]++;
        }
        rx->rx_release();
    }
    RxFrame f[32];
    for (int n; (n = rx->rx_burst(f, 32)) > 0;) {
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < 5; i++)
                if (rx->peer_addr(f[k].peer) == addr(*tx[i])) got[i]++;
        }
        rx->rx_release();
    }
    EXPECT_EQ(sent, got);
}

TEST(ShmTransport, ResolveRefusesMalformedAddresses) {
    auto a = make(), b = make();
    const auto good = addr(*b);
    EXPECT_EQ(-EINVAL, a->resolve(nullptr, good.size()));
    EXPECT_EQ(-EINVAL, a->resolve(good.data(), 0));
    EXPECT_EQ(-EINVAL, a->resolve(good.data(), good.size() - 1));
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    EXPECT_EQ(-EINVAL, a->resolve(longer.data(), longer.size()));
    std::vector<uint8_t> big(NICFW_MAX_ADDR, 0);
    memcpy(big.data(), good.data(), good.size());
    EXPECT_EQ(-EINVAL, a->resolve(big.data(), big.size()));

    auto bad = good;
    bad[0] = ShmTransport::kAddrKind + 1;  // wrong kind
    EXPECT_EQ(-EINVAL, a->resolve(bad.data(), bad.size()));
    bad = good;
    bad[0] = 0;
    EXPECT_EQ(-EINVAL, a->resolve(bad.data(), bad.size()));
    bad = good;
    bad[1] = 2;  // wrong address version
    EXPECT_EQ(-EINVAL, a->resolve(bad.data(), bad.size()));

    // Another host: every byte of the host id matters.
    for (size_t i = 16; i < 24; i++) {
        bad = good;
        bad[i] ^= 0x5A;
        EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size())) << "host id byte " << i;
    }
    // Right host, but no such process / fd / nonce.
    bad = good;
    uint32_t v = 0x7FFFFFF0u;  // beyond pid_max
    memcpy(bad.data() + 4, &v, 4);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size()));
    bad = good;
    v = 0;  // stdin: not a segment
    memcpy(bad.data() + 8, &v, 4);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size()));
    bad = good;
    v = 100000;  // no such fd
    memcpy(bad.data() + 8, &v, 4);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size()));
    bad = good;
    bad[12] ^= 1;  // nonce of a different incarnation
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size()));
    // Another transport's segment under b's nonce.
    bad = good;
    auto aa = addr(*a);
    memcpy(bad.data() + 8, aa.data() + 8, 4);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(bad.data(), bad.size()));

    // None of that disturbed a good resolve.
    int pb = a->resolve(good.data(), good.size());
    ASSERT_GE(pb, 0);
    ASSERT_TRUE(send(*a, pb, 10, 0));
    RxFrame f[2];
    EXPECT_EQ(1, b->rx_burst(f, 2));
    b->rx_release();
}

TEST(ShmTransport, DestroyedPeerIsDeadAndRefused) {
    auto a = make();
    auto b = make();
    auto ba = addr(*b), aa = addr(*a);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    ASSERT_GE(b->resolve(aa.data(), aa.size()), 0);
    ASSERT_TRUE(send(*a, pb, 10, 0));
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);
    EXPECT_TRUE(ev.empty());

    b.reset();
    ev.clear();
    a->poll_slow(ev);
    ASSERT_EQ(1u, ev.size());
    EXPECT_EQ(PeerEvent::kDead, ev[0].kind);
    EXPECT_EQ(pb, ev[0].peer);
    EXPECT_FALSE(a->peer_alive(pb));
    EXPECT_EQ(nullptr, a->tx_reserve(pb, 10));
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(ba.data(), ba.size()));
    // Reported once.
    ev.clear();
    a->poll_slow(ev);
    EXPECT_TRUE(ev.empty());
    // A fresh instance (which may reuse b's fd number) cannot resolve b's old address.
    auto c = make();
    auto d = make();
    EXPECT_EQ(-EHOSTUNREACH, d->resolve(ba.data(), ba.size()));
    auto ca = addr(*c);
    EXPECT_GE(a->resolve(ca.data(), ca.size()), 0);
}

TEST(ShmTransport, DestroyedSenderKnownOnlyByHelloIsDead) {
    auto a = make();
    auto b = make();
    auto aa = addr(*a);
    int pa = b->resolve(aa.data(), aa.size());
    ASSERT_TRUE(send(*b, pa, 33, 0));
    RxFrame f[2];
    ASSERT_EQ(1, a->rx_burst(f, 2));
    int pb = f[0].peer;
    a->rx_release();
    b.reset();
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);
    ASSERT_EQ(1u, ev.size());
    EXPECT_EQ(pb, ev[0].peer);
    EXPECT_FALSE(a->peer_alive(pb));
    EXPECT_EQ(0, a->rx_burst(f, 2));
}

// ---------------------------------------------------------------- across processes
constexpr uint32_t kChildFrames = 500;

uint32_t child_len(uint32_t i, uint32_t max) { return 1 + (i * 2654435761u) % max; }

// Child body: its own transport, frames to the parent, then wait for the parent's go.
[[noreturn]] void child_main(const std::vector<uint8_t>& parent, int go_fd) {
    std::unique_ptr<ShmTransport> t;
    if (ShmTransport::create(&t) != 0) _exit(10);
    int p = t->resolve(parent.data(), parent.size());
    if (p < 0) _exit(11);
    uint64_t end = now_ms() + 10000;
    for (uint32_t i = 0; i < kChildFrames;) {
        uint32_t len = child_len(i, t->max_frame());
        if (send(*t, p, len, i)) {
            i++;
        } else if (now_ms() > end) {
            _exit(12);
        } else {
            usleep(50);
        }
    }
    // Stay alive (segment mapped) until the parent has everything.
    struct pollfd pfd = {go_fd, POLLIN, 0};
    if (poll(&pfd, 1, 10000) != 1) _exit(13);
    _exit(0);  // no destructors: like a process that simply ends
}

struct ChildRun {
    pid_t pid = -1;
    int child_peer = -1;
};

// Forks a child that sends kChildFrames to parent; receives and checks them all.
ChildRun run_child(ShmTransport& parent) {
    ChildRun r;
    auto pa = addr(parent);
    int go[2];
    if (pipe(go) != 0) {
        ADD_FAILURE() << "pipe";
        return r;
    }
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        child_main(pa, go[0]);
    }
    close(go[0]);
    if (pid < 0) {
        ADD_FAILURE() << "fork";
        close(go[1]);
        return r;
    }
    r.pid = pid;
    uint32_t got = 0;
    uint64_t end = now_ms() + 10000;
    const uint32_t max = parent.max_frame();
    while (got < kChildFrames && now_ms() < end) {
        RxFrame f[32];
        int n = parent.rx_burst(f, 32);
        for (int i = 0; i < n; i++) {
            if (r.child_peer < 0) r.child_peer = f[i].peer;
            EXPECT_EQ(r.child_peer, f[i].peer);
            EXPECT_EQ(child_len(got, max), f[i].len) << got;
            EXPECT_TRUE(check(f[i].data, f[i].len, got)) << got;
            got++;
        }
        if (n) parent.rx_release();
        else usleep(20);
    }
    EXPECT_EQ(kChildFrames, got);
    if (r.child_peer >= 0) {
        const auto& ca = parent.peer_addr(r.child_peer);
        uint32_t cpid;
        memcpy(&cpid, ca.data() + 4, 4);
        EXPECT_EQ(static_cast<uint32_t>(pid), cpid);
        EXPECT_TRUE(parent.peer_alive(r.child_peer));
    }
    EXPECT_EQ(1, write(go[1], "g", 1));
    close(go[1]);
    return r;
}

int reap(pid_t pid, uint64_t timeout_ms = 10000) {
    uint64_t end = now_ms() + timeout_ms;
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(200);
    }
}

// poll_slow in a loop until peer is reported dead; ms it took, or -1.
int64_t wait_dead(ShmTransport& t, int peer, uint64_t timeout_ms) {
    uint64_t start = now_ms(), end = start + timeout_ms;
    std::vector<TransportEvent> ev;
    while (now_ms() < end) {
        ev.clear();
        t.poll_slow(ev);
        for (auto& e : ev)
            if (e.kind == PeerEvent::kDead && e.peer == peer) return static_cast<int64_t>(now_ms() - start);
        usleep(1000);
    }
    return -1;
}

TEST(ShmTransportFork, ChildFramesReachParent) {
    auto parent = make();
    ChildRun r = run_child(*parent);
    ASSERT_GT(r.pid, 0);
    EXPECT_EQ(0, reap(r.pid));
    ASSERT_GE(r.child_peer, 0);
    // After the child exited (and was reaped), the parent reports it dead in bounded time.
    int64_t ms = wait_dead(*parent, r.child_peer, 3000);
    EXPECT_GE(ms, 0) << "child death not reported";
    EXPECT_FALSE(parent->peer_alive(r.child_peer));
    auto ca = parent->peer_addr(r.child_peer);
    EXPECT_EQ(-EHOSTUNREACH, parent->resolve(ca.data(), ca.size()));
}

TEST(ShmTransportFork, ParentRepliesToChild) {
    // The parent resolves the child's address learnt from its hello and sends back.
    auto parent = make();
    auto pa = addr(*parent);
    int up[2], go[2];
    ASSERT_EQ(0, pipe(up));
    ASSERT_EQ(0, pipe(go));
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(go[1]);
        std::unique_ptr<ShmTransport> t;
        if (ShmTransport::create(&t) != 0) _exit(10);
        int p = t->resolve(pa.data(), pa.size());
        if (p < 0 || !send(*t, p, 77, 5)) _exit(11);
        // Echo what the parent sends back, then report.
        uint64_t end = now_ms() + 10000;
        for (;;) {
            RxFrame f[4];
            int n = t->rx_burst(f, 4);
            if (n > 0) {
                bool ok = n == 1 && f[0].peer == p && f[0].len == 99 && check(f[0].data, 99, 6);
                t->rx_release();
                char c = ok ? 'y' : 'n';
                if (write(up[1], &c, 1) != 1) _exit(12);
                break;
            }
            if (now_ms() > end) _exit(13);
            usleep(50);
        }
        struct pollfd pfd = {go[0], POLLIN, 0};
        poll(&pfd, 1, 10000);
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    close(up[1]);
    close(go[0]);
    int cp = -1;
    uint64_t end = now_ms() + 10000;
    while (cp < 0 && now_ms() < end) {
        RxFrame f[4];
        int n = parent->rx_burst(f, 4);
        if (n == 1) {
            EXPECT_EQ(77u, f[0].len);
            EXPECT_TRUE(check(f[0].data, 77, 5));
            cp = f[0].peer;
        }
        if (n) parent->rx_release();
        else usleep(50);
    }
    ASSERT_GE(cp, 0);
    auto ca = parent->peer_addr(cp);
    EXPECT_EQ(cp, parent->resolve(ca.data(), ca.size()));
    EXPECT_TRUE(send(*parent, cp, 99, 6));
    char c = 0;
    struct pollfd pfd = {up[0], POLLIN, 0};
    ASSERT_EQ(1, poll(&pfd, 1, 10000));
    ASSERT_EQ(1, read(up[0], &c, 1));
    EXPECT_EQ('y', c);
    EXPECT_EQ(1, write(go[1], "g", 1));
    close(go[1]);
    close(up[0]);
    EXPECT_EQ(0, reap(pid));
}

TEST(ShmTransportFork, KilledChildDetectedBeforeReap) {
    // A peer process that is killed (no destructor clears its alive flag) must be seen
    // dead even while it is still an unreaped zombie of this process.
    auto parent = make();
    auto pa = addr(*parent);
    int up[2];
    ASSERT_EQ(0, pipe(up));
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        std::unique_ptr<ShmTransport> t;
        if (ShmTransport::create(&t) != 0) _exit(10);
        int p = t->resolve(pa.data(), pa.size());
        if (p < 0 || !send(*t, p, 10, 0)) _exit(11);
        if (write(up[1], "r", 1) != 1) _exit(12);
        for (;;) pause();
    }
    ASSERT_GT(pid, 0);
    close(up[1]);
    char c;
    struct pollfd pfd = {up[0], POLLIN, 0};
    ASSERT_EQ(1, poll(&pfd, 1, 10000));
    ASSERT_EQ(1, read(up[0], &c, 1));
    close(up[0]);
    int cp = -1;
    uint64_t end = now_ms() + 5000;
    while (cp < 0 && now_ms() < end) {
        RxFrame f[4];
        int n = parent->rx_burst(f, 4);
        if (n) {
            cp = f[0].peer;
            parent->rx_release();
        } else {
            usleep(50);
        }
    }
    ASSERT_GE(cp, 0);
    ASSERT_EQ(0, kill(pid, SIGKILL));
    // Wait until the child is really gone (a zombie), without reaping it.
    siginfo_t si{};
    ASSERT_EQ(0, waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT));
    int64_t ms = wait_dead(*parent, cp, 2000);
    EXPECT_GE(ms, 0) << "a dead (zombie) peer process is not reported dead";
    EXPECT_EQ(128 + SIGKILL, reap(pid));
    // Once reaped it must be reported in any case.
    if (ms < 0) {
        EXPECT_GE(wait_dead(*parent, cp, 2000), 0);
    }
}

}  // namespace
