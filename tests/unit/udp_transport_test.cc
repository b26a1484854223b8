// tests/unit/udp_transport_test.cc -- the udp transport over 127.0.0.1: frames both
// ways, batching and pacing, options, addresses, malformed, truncated and stranger
// datagrams from a raw socket, a receiver that does not read, dead and restarted peers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nicfw/device.h"
#include "transport/udp/udp_transport.h"
#include "unit_util.h"

using namespace softvia::nicfw;
using unit::now_ms;

namespace {

std::unique_ptr<UdpTransport> make(const std::string& opts = "", std::string* why_out = nullptr, int* rc_out = nullptr) {
    DeviceSpec spec;
    std::string why;
    EXPECT_EQ(0, parse_device_name("udp:addr=127.0.0.1" + opts, &spec, &why)) << why;
    UdpOptions o;
    int rc = UdpTransport::parse_options(spec, &o, &why);
    std::unique_ptr<UdpTransport> t;
    if (rc == 0) rc = UdpTransport::create(o, &t, &why);
    if (why_out) *why_out = why;
    if (rc_out) *rc_out = rc;
    else EXPECT_EQ(0, rc) << why;
    return t;
}

// A VI (of reliability rel) on each of two engines, connected; tag names the discriminators.
::testing::AssertionResult connected_vis(unit::Nic& a, unit::Nic& b, Vi** va, Vi** vb, const std::string& tag,
                                         uint16_t rel = NICFW_REL_UNRELIABLE) {
    if (!a.eng || !b.eng) return ::testing::AssertionFailure() << "an engine did not start";
    *va = a.vi(rel);
    *vb = b.vi(rel);
    return unit::connect_peers(a.e(), *va, b.e(), *vb, tag + "-a", tag + "-b");
}

std::vector<uint8_t> addr(const UdpTransport& t) {
    size_t n;
    const uint8_t* a = t.local_addr(&n);
    return std::vector<uint8_t>(a, a + n);
}

int resolve(UdpTransport& from, const UdpTransport& to) {
    auto a = addr(to);
    return from.resolve(a.data(), a.size());
}

void fill(uint8_t* p, uint32_t len, uint32_t seq) {
    for (uint32_t i = 0; i < len; i++) p[i] = static_cast<uint8_t>(seq * 31 + i * 7);
}
bool check(const uint8_t* p, uint32_t len, uint32_t seq) {
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != static_cast<uint8_t>(seq * 31 + i * 7)) return false;
    return true;
}

bool send(UdpTransport& t, int peer, uint32_t len, uint32_t seq) {
    uint8_t* p = t.tx_reserve(peer, len);
    if (!p) return false;
    fill(p, len, seq);
    t.tx_commit(peer, len);
    return true;
}

struct Got {
    int peer;
    std::vector<uint8_t> data;
};

// Polls t until want frames arrived or ms passed; copies them out.
std::vector<Got> receive(UdpTransport& t, size_t want, uint64_t ms = 2000) {
    std::vector<Got> got;
    uint64_t end = now_ms() + ms;
    while (got.size() < want && now_ms() < end) {
        RxFrame f[32];
        int n = t.rx_burst(f, 32);
        for (int i = 0; i < n; i++) got.push_back({f[i].peer, std::vector<uint8_t>(f[i].data, f[i].data + f[i].len)});
        if (n) t.rx_release();
        else usleep(100);
    }
    return got;
}

// A plain UDP socket on 127.0.0.1 that plays a stranger.
struct RawSocket {
    int fd = -1;
    RawSocket() {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    }
    ~RawSocket() { close(fd); }
    uint16_t port() const {
        sockaddr_in sa{};
        socklen_t l = sizeof sa;
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &l);
        return ntohs(sa.sin_port);
    }
    void send_to(const UdpTransport& t, const std::vector<uint8_t>& d) const {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sa.sin_port = htons(t.port());
        ASSERT_EQ(static_cast<ssize_t>(d.size()),
                  sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa));
    }
};

// The preamble of udp_transport.h, addressed to t's nonce.
std::vector<uint8_t> preamble(const UdpTransport& t, uint32_t src_nonce, uint8_t type = 1) {
    std::vector<uint8_t> d(UdpTransport::kPreamble, 0);
    memcpy(d.data(), "SVU1", 4);
    d[4] = type;
    uint64_t host = 0x1234;
    memcpy(d.data() + 8, &host, 8);
    memcpy(d.data() + 16, &src_nonce, 4);
    memcpy(d.data() + 20, addr(t).data() + 16, 4);
    return d;
}

}  // namespace

TEST(UdpTransport, AddressLayout) {
    auto a = make(), b = make();
    auto x = addr(*a);
    ASSERT_EQ(UdpTransport::kAddrLen, x.size());
    EXPECT_EQ(UdpTransport::kAddrKind, x[0]);
    EXPECT_EQ(1, x[1]);
    uint16_t port_be;
    memcpy(&port_be, x.data() + 2, 2);
    EXPECT_EQ(a->port(), ntohs(port_be));
    EXPECT_NE(0, a->port());
    in_addr_t ip;
    memcpy(&ip, x.data() + 4, 4);
    EXPECT_EQ(htonl(INADDR_LOOPBACK), ip);
    uint64_t host;
    memcpy(&host, x.data() + UdpTransport::kHostIdOffset, 8);
    EXPECT_EQ(host_identity(), host);
    EXPECT_NE(addr(*a), addr(*b));
    EXPECT_TRUE(a->lossy());
    EXPECT_EQ(UdpTransport::kMaxMtu - UdpTransport::kPreamble, a->max_frame());  // mtu=auto on loopback (65536)
}

// mtu=auto (the default) follows the bound interface: loopback's 65536 less 28; an explicit
// mtu wins.
TEST(UdpTransport, MtuFollowsTheInterface) {
    auto deflt = make();
    auto autom = make(",mtu=auto");
    auto fixed = make(",mtu=1472");
    ASSERT_TRUE(deflt && autom && fixed);
    EXPECT_EQ(UdpTransport::kMaxMtu - UdpTransport::kPreamble, deflt->max_frame());
    EXPECT_EQ(UdpTransport::kMaxMtu - UdpTransport::kPreamble, autom->max_frame());
    EXPECT_EQ(1472u - UdpTransport::kPreamble, fixed->max_frame());
    std::string why;
    int rc = 0;
    EXPECT_FALSE(make(",mtu=automatic", &why, &rc));
    EXPECT_NE(std::string::npos, why.find("mtu")) << why;
}

TEST(UdpTransport, Options) {
    struct Bad {
        const char* opts;
    } bad[] = {{",port=70000"}, {",port=-1"}, {",port=x"}, {",mtu=100"}, {",mtu=65508"}, {",mtu="},
               {",local=shm"},  {",rx=fast"}, {",tx=direct"}, {",tx="}, {",gso=on"}, {",colour=blue"},
               {",txsock=own"}, {",rxsock=own"}};
    for (const Bad& b : bad) {
        std::string why;
        int rc = 0;
        auto t = make(b.opts, &why, &rc);
        EXPECT_EQ(-EINVAL, rc) << b.opts;
        EXPECT_FALSE(why.empty()) << b.opts;
        EXPECT_EQ(nullptr, t);
    }
    for (const char* a : {"udp:addr=300.1.1.1", "udp:addr=0.0.0.0", "udp:addr=", "udp:addr=::1"}) {
        DeviceSpec spec;
        std::string why;
        ASSERT_EQ(0, parse_device_name(a, &spec, &why));
        std::unique_ptr<Transport> t;
        EXPECT_EQ(-EINVAL, create_transport(spec, &t, &why)) << a;
    }
    // Through the registry, with the options every kind takes.
    DeviceSpec spec;
    std::string why;
    ASSERT_EQ(0, parse_device_name("udp:addr=127.0.0.1,local=wire,progress=thread,txbatch=8,mtu=9000,tx=uring", &spec, &why));
    std::unique_ptr<Transport> t;
    ASSERT_EQ(0, create_transport(spec, &t, &why)) << why;
    EXPECT_STREQ("udp", t->name());
    EXPECT_EQ(9000u - UdpTransport::kPreamble, t->max_frame());
    // A port in use.
    auto a = make();
    int rc = 0;
    auto b = make(",port=" + std::to_string(a->port()), &why, &rc);
    EXPECT_EQ(-EADDRINUSE, rc);
    EXPECT_NE(std::string::npos, why.find("bind")) << why;
}

TEST(UdpTransport, BadAddresses) {
    auto a = make(), b = make();
    auto x = addr(*b);
    EXPECT_EQ(-EINVAL, a->resolve(nullptr, 24));
    EXPECT_EQ(-EINVAL, a->resolve(x.data(), 23));
    auto k = x;
    k[0] = 1;  // shm's kind
    EXPECT_EQ(-EINVAL, a->resolve(k.data(), k.size()));
    auto p = x;
    p[2] = p[3] = 0;  // port 0
    EXPECT_EQ(-EINVAL, a->resolve(p.data(), p.size()));
    auto n = x;
    memset(n.data() + 16, 0, 4);  // nonce 0
    EXPECT_EQ(-EINVAL, a->resolve(n.data(), n.size()));
    EXPECT_EQ(0u, a->peer_count());
    int id = a->resolve(x.data(), x.size());
    EXPECT_EQ(0, id);
    EXPECT_EQ(id, a->resolve(x.data(), x.size()));  // the same peer again
    EXPECT_EQ(x, a->peer_addr(id));
}

TEST(UdpTransport, FramesBothWays) {
    EXPECT_FALSE(make()->multishot());  // recvmmsg unless asked (udp_transport.h says why)
    for (const char* mode : {",rx=multishot", ",rx=syscall"}) {
        auto a = make(mode), b = make(mode);
        EXPECT_EQ(mode[4] == 'm', a->multishot());
        int pb = resolve(*a, *b);
        ASSERT_GE(pb, 0);
        const uint32_t lens[] = {1, 36, 100, 1000, a->max_frame()};
        for (uint32_t i = 0; i < 5; i++) ASSERT_TRUE(send(*a, pb, lens[i], i));
        a->tx_flush();
        auto got = receive(*b, 5);
        ASSERT_EQ(5u, got.size()) << mode;
        int pa = got[0].peer;
        EXPECT_EQ(addr(*a), b->peer_addr(pa));  // created on first contact, with a's address
        for (uint32_t i = 0; i < 5; i++) {
            EXPECT_EQ(pa, got[i].peer);
            ASSERT_EQ(lens[i], got[i].data.size());
            EXPECT_TRUE(check(got[i].data.data(), lens[i], i));
        }
        // And back, to the peer index the first frame came from.
        for (uint32_t i = 0; i < 3; i++) ASSERT_TRUE(send(*b, pa, 200, 50 + i));
        b->tx_flush();
        got = receive(*a, 3);
        ASSERT_EQ(3u, got.size());
        for (uint32_t i = 0; i < 3; i++) {
            EXPECT_EQ(pb, got[i].peer);
            EXPECT_TRUE(check(got[i].data.data(), 200, 50 + i));
        }
        EXPECT_EQ(nullptr, a->tx_reserve(pb, a->max_frame() + 1));
        EXPECT_EQ(nullptr, a->tx_reserve(pb, 0));
    }
}

// Inline progress may step a NIC from several threads. The receive's task work runs in
// the thread that armed it, so another thread that polls cancels that receive and arms
// its own: nothing the old one took, nor anything sent after, may be lost on the way.
TEST(UdpTransport, ReceiverPolledFromAnotherThread) {
    auto a = make(), b = make(",rx=multishot");
    ASSERT_TRUE(b->multishot());
    int pb = resolve(*a, *b);
    ASSERT_GE(pb, 0);
    std::mutex m;  // one stepper at a time, as the engine's lock makes it
    std::mutex park;
    std::condition_variable cv;
    bool stop = false;
    // Thread 1 arms b's receive, takes one frame, then blocks (as a program thread that
    // waits outside VIPL would) until the end of the test.
    std::thread first([&] {
        {
            std::lock_guard<std::mutex> g(m);
            ASSERT_TRUE(send(*a, pb, 64, 0));
            a->tx_flush();
            auto got = receive(*b, 1);
            ASSERT_EQ(1u, got.size());
            EXPECT_TRUE(check(got[0].data.data(), 64, 0));
        }
        std::unique_lock<std::mutex> l(park);
        cv.wait(l, [&] { return stop; });  // asleep in the kernel, no wake-ups
    });
    // Wait until thread 1 holds nothing, then receive from this thread.
    for (int i = 0; i < 200 && b->stats().rx_datagrams == 0; i++) usleep(1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    {
        std::lock_guard<std::mutex> g(m);
        for (uint32_t i = 1; i <= 20; i++) ASSERT_TRUE(send(*a, pb, 100, i));
        a->tx_flush();
        auto got = receive(*b, 20, 1000);
        ASSERT_EQ(20u, got.size()) << "frames lost or stuck in the blocked thread's receive";
        std::vector<bool> seen(21, false);
        for (auto& g : got) {
            ASSERT_EQ(100u, g.data.size());
            for (uint32_t i = 1; i <= 20; i++)
                if (check(g.data.data(), 100, i)) seen[i] = true;
        }
        for (uint32_t i = 1; i <= 20; i++) EXPECT_TRUE(seen[i]) << "frame " << i;
    }
    {
        std::lock_guard<std::mutex> l(park);
        stop = true;
    }
    cv.notify_one();
    first.join();
}

TEST(UdpTransport, BatchedUntilFlushAndPacedPerStep) {
    for (const char* mode : {"", ",tx=uring"}) {
        auto a = make(mode), b = make(mode);
        int pb = resolve(*a, *b);
        receive(*b, 1, 10);  // arms b's receive
        int n = 0;
        while (n < 1000 && send(*a, pb, 64, static_cast<uint32_t>(n))) n++;
        EXPECT_EQ(32, n);  // one engine step sends at most what a receiver takes in one burst
        EXPECT_TRUE(receive(*b, 1, 50).empty());  // committed, not submitted
        a->tx_flush();
        auto got = receive(*b, 32);
        ASSERT_EQ(32u, got.size());
        for (int i = 0; i < 32; i++) EXPECT_TRUE(check(got[i].data.data(), 64, static_cast<uint32_t>(i)));
        EXPECT_EQ(0u, a->tx_queued());
        EXPECT_TRUE(send(*a, pb, 64, 99));  // a new step may send again
        EXPECT_EQ(1u, a->tx_queued());
        a->tx_flush();  // one datagram: sendmsg with tx=auto, the ring with tx=uring
        EXPECT_EQ(0u, a->tx_queued());
        EXPECT_EQ(1u, receive(*b, 1).size()) << mode;
    }
}

// gso=auto: runs of one length to one peer go as UDP_SEGMENT trains (a shorter datagram
// ends one); every frame arrives whole, in order, at its own peer. The receiver's UDP_GRO
// is off until a read brings two long datagrams of one length (a train the kernel cut, as
// the first trains arrive), then it reads trains as UDP_GRO buffers. One train alone goes
// by sendmsg (tx=auto), several through the ring.
TEST(UdpTransport, TrainsOutAndIn) {
    for (const char* mode : {"", ",tx=uring"}) {
        SCOPED_TRACE(mode);
        std::string o = std::string(",mtu=1472") + mode;
        auto a = make(o), b = make(o), c = make(o);
        ASSERT_TRUE(a->segmenting());
        ASSERT_TRUE(b->coalescing());
        EXPECT_FALSE(b->coalescing_now());  // small datagrams do not pay for it
        int pb = resolve(*a, *b), pc = resolve(*a, *c);
        receive(*b, 1, 10);
        receive(*c, 1, 10);
        const uint32_t full = a->max_frame();
        struct Sent {
            int peer;
            uint32_t len;
        } plan[] = {{pb, full}, {pb, full}, {pb, full}, {pb, full}, {pb, full}, {pb, full}, {pb, 700},
                    {pb, full}, {pc, 200}, {pc, 200}, {pb, 100}, {pb, 100}, {pb, 100}, {pb, 64}};
        uint32_t seq = 0;
        for (const Sent& p : plan) ASSERT_TRUE(send(*a, p.peer, p.len, seq++));
        a->tx_flush();
        auto gb = receive(*b, 12);
        auto gc = receive(*c, 2);
        ASSERT_EQ(12u, gb.size());
        ASSERT_EQ(2u, gc.size());
        size_t ib = 0, ic = 0;
        for (uint32_t k = 0; k < seq; k++) {
            const Got& g = plan[k].peer == pb ? gb[ib++] : gc[ic++];
            ASSERT_EQ(plan[k].len, g.data.size()) << "frame " << k;
            EXPECT_TRUE(check(g.data.data(), plan[k].len, k)) << "frame " << k;
        }
        // Trains: 6 full + 700, then 200 + 200 to c, then 100 x 3 + 64 (the lone full one goes
        // alone). Sends through the ring count when the sender reaps them (its next poll).
        receive(*a, 1, 20);
        EXPECT_EQ(3u, a->stats().tx_trains);
        EXPECT_EQ(seq, a->stats().tx_datagrams);
        EXPECT_EQ(12u, b->stats().rx_datagrams);
        // The full-size ones came cut: UDP_GRO is on now; c got short ones only.
        EXPECT_TRUE(b->coalescing_now());
        EXPECT_FALSE(c->coalescing_now());
        // One train alone: sendmsg with tx=auto.
        for (uint32_t k = 0; k < 3; k++) ASSERT_TRUE(send(*a, pb, full, 100 + k));
        a->tx_flush();
        auto g3 = receive(*b, 3);
        ASSERT_EQ(3u, g3.size());
        for (uint32_t k = 0; k < 3; k++) EXPECT_TRUE(check(g3[k].data.data(), full, 100 + k));
        receive(*a, 1, 20);
        EXPECT_EQ(4u, a->stats().tx_trains);
        EXPECT_EQ(1u, b->stats().rx_trains);  // read whole this time
        // It stays on: quiet slow polls do not take it off (a train queued whole could
        // then be read without its segment size).
        std::vector<TransportEvent> ev;
        for (int k = 0; k < 3; k++) b->poll_slow(ev);
        EXPECT_TRUE(b->coalescing_now());
    }
    // gso=off: every datagram alone, both ways.
    auto a = make(",mtu=1472,gso=off"), b = make(",mtu=1472,gso=off");
    EXPECT_FALSE(a->segmenting());
    EXPECT_FALSE(b->coalescing());
    int pb = resolve(*a, *b);
    receive(*b, 1, 10);
    for (uint32_t k = 0; k < 10; k++) ASSERT_TRUE(send(*a, pb, a->max_frame(), k));
    a->tx_flush();
    auto got = receive(*b, 10);
    ASSERT_EQ(10u, got.size());
    for (uint32_t k = 0; k < 10; k++) EXPECT_TRUE(check(got[k].data.data(), a->max_frame(), k));
    EXPECT_EQ(0u, a->stats().tx_trains);
    EXPECT_EQ(0u, b->stats().rx_trains);
    // Loopback's own mtu (65507): no two datagrams fit a train, so none is made.
    EXPECT_FALSE(make()->segmenting());
}

TEST(UdpTransport, MalformedTruncatedAndStrangers) {
    auto b = make(",mtu=1000");
    receive(*b, 1, 10);
    RawSocket raw;
    raw.send_to(*b, {1, 2, 3});                                    // shorter than a preamble
    auto bad_magic = preamble(*b, 7);
    bad_magic[0] = 'X';
    bad_magic.resize(100);
    raw.send_to(*b, bad_magic);
    auto bad_type = preamble(*b, 7, 9);
    bad_type.resize(100);
    raw.send_to(*b, bad_type);
    auto other_nonce = preamble(*b, 7);
    other_nonce[20] ^= 0xff;  // for an earlier NIC on this port
    other_nonce.resize(100);
    raw.send_to(*b, other_nonce);
    auto zero_src = preamble(*b, 0);
    zero_src.resize(100);
    raw.send_to(*b, zero_src);
    auto big = preamble(*b, 7);
    big.resize(1001);  // larger than the mtu: truncated
    raw.send_to(*b, big);
    auto probe = preamble(*b, 7, 2);  // a probe from an unknown sender makes no peer
    raw.send_to(*b, probe);
    EXPECT_TRUE(receive(*b, 1, 200).empty());
    EXPECT_EQ(0u, b->peer_count());
    const UdpStats& s = b->stats();
    EXPECT_EQ(3u, s.rx_malformed);
    EXPECT_EQ(2u, s.rx_strangers);
    EXPECT_EQ(1u, s.rx_truncated);
    // A well-formed frame from an unknown sender: its peer is created on first contact,
    // and frames of the largest size still arrive.
    auto good = preamble(*b, 7);
    good.resize(1000, 0xab);
    raw.send_to(*b, good);
    auto got = receive(*b, 1);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(1000u - UdpTransport::kPreamble, got[0].data.size());
    ASSERT_EQ(1u, b->peer_count());
    const auto& pa = b->peer_addr(got[0].peer);
    uint16_t port_be;
    memcpy(&port_be, pa.data() + 2, 2);
    EXPECT_EQ(raw.port(), ntohs(port_be));
    uint32_t nonce;
    memcpy(&nonce, pa.data() + 16, 4);
    EXPECT_EQ(7u, nonce);
}

TEST(UdpTransport, ReceiverThatDoesNotRead) {
    for (const char* mode : {",rx=multishot", ""}) {
        auto a = make(mode), b = make(mode);
        int pb = resolve(*a, *b);
        receive(*b, 1, 10);
        // Far more than the receive buffers and the socket hold: the surplus is lost,
        // the sender is never blocked.
        const uint32_t total = 8000;
        for (uint32_t i = 0; i < total; i++) {
            uint8_t* p = a->tx_reserve(pb, 1400);
            if (!p) {
                a->tx_flush();
                p = a->tx_reserve(pb, 1400);
                ASSERT_NE(nullptr, p);
            }
            memset(p, 0, 1400);
            memcpy(p, &i, 4);
            a->tx_commit(pb, 1400);
        }
        a->tx_flush();
        usleep(20000);
        auto got = receive(*b, total, 500);
        EXPECT_GT(got.size(), 0u) << mode;
        EXPECT_LT(got.size(), total) << mode;
        uint32_t prev = 0;
        for (size_t i = 0; i < got.size(); i++) {
            ASSERT_EQ(1400u, got[i].data.size());
            uint32_t seq;
            memcpy(&seq, got[i].data.data(), 4);
            ASSERT_LT(seq, total);
            if (i) {
                EXPECT_GT(seq, prev);  // what arrives is in order, at most once
            }
            prev = seq;
        }
        // The wire works again once the receiver reads.
        ASSERT_TRUE(send(*a, pb, 100, 5));
        a->tx_flush();
        got = receive(*b, 1);
        ASSERT_EQ(1u, got.size()) << mode;
        EXPECT_TRUE(check(got[0].data.data(), 100, 5));
    }
}

TEST(UdpTransport, DeadPeerByIcmp) {
    auto a = make();
    auto b = make();
    int pb = resolve(*a, *b);
    EXPECT_TRUE(a->peer_alive(pb));
    b.reset();  // its port is closed: probes come back as port unreachable
    std::vector<TransportEvent> ev;
    uint64_t end = now_ms() + 3000;
    while (ev.empty() && now_ms() < end) {
        RxFrame f[8];
        if (a->rx_burst(f, 8)) a->rx_release();
        a->poll_slow(ev);
        usleep(1000);
    }
    ASSERT_EQ(1u, ev.size());
    EXPECT_EQ(PeerEvent::kDead, ev[0].kind);
    EXPECT_EQ(pb, ev[0].peer);
    EXPECT_FALSE(a->peer_alive(pb));
    EXPECT_GE(a->stats().rx_refusals, UdpTransport::kRefusalsForDead);
    EXPECT_EQ(nullptr, a->tx_reserve(pb, 10));
    auto x = a->peer_addr(pb);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(x.data(), x.size()));
}

// An ICMP port-unreachable report (IP_RECVERR) fails the socket's next send, whatever
// that send's destination: the transport must send that datagram again, not lose it.
TEST(UdpTransport, SendAfterAnIcmpReportIsNotLost) {
    // One datagram per flush: sendmsg (tx=auto) or the ring (tx=uring) fails it alike.
    for (const char* mode : {",rx=multishot", ",rx=syscall", ",tx=uring"}) {
        auto a = make(mode), b = make(mode), gone = make(mode);
        int pb = resolve(*a, *b), pg = resolve(*a, *gone);
        gone.reset();
        for (uint32_t round = 0; round < 5; round++) {
            ASSERT_TRUE(send(*a, pg, 10, 100 + round)) << mode;  // comes back as port unreachable
            a->tx_flush();
            usleep(2000);  // the report is in before the next send
            ASSERT_TRUE(send(*a, pb, 10, round)) << mode;
            a->tx_flush();
            for (int step = 0; step < 20; step++) {  // a's engine steps: they reap the sends
                RxFrame f[8];
                if (a->rx_burst(f, 8)) a->rx_release();
                a->tx_flush();
                usleep(100);
            }
            auto got = receive(*b, 1);
            ASSERT_EQ(1u, got.size()) << mode << " round " << round;
            EXPECT_TRUE(check(got[0].data.data(), 10, round));
        }
        EXPECT_GE(a->stats().tx_datagrams, 5u) << mode;
    }
}

TEST(UdpTransport, RestartedPeerOnTheSamePortIsANewPeer) {
    auto a = make(), b = make();
    uint16_t port = b->port();
    int pb = resolve(*a, *b);
    ASSERT_TRUE(send(*b, resolve(*b, *a), 10, 1));
    b->tx_flush();
    ASSERT_EQ(1u, receive(*a, 1).size());
    b.reset();
    auto b2 = make(",port=" + std::to_string(port));
    ASSERT_NE(nullptr, b2);
    ASSERT_TRUE(send(*b2, resolve(*b2, *a), 10, 2));
    b2->tx_flush();
    auto got = receive(*a, 1);
    ASSERT_EQ(1u, got.size());
    EXPECT_NE(pb, got[0].peer);
    EXPECT_EQ(addr(*b2), a->peer_addr(got[0].peer));
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);
    ASSERT_EQ(1u, ev.size());  // the NIC that had the port before is gone
    EXPECT_EQ(pb, ev[0].peer);
}

// txbatch=N: a post's frames stay queued until N are, or a step that is not a post's
// comes (a poll), or the guard thread's next turn (about 1 ms) when no call comes at all.
TEST(UdpTransport, TxBatchHoldsPostsUntilABatchOrAPoll) {
    EngineConfig cfg;
    cfg.device = "udp:addr=127.0.0.1,local=wire";
    cfg.tx_batch = 4;
    unit::Nic a(cfg);
    cfg.tx_batch = 0;
    unit::Nic b(cfg);
    Vi *va, *vb;
    ASSERT_TRUE(connected_vis(a, b, &va, &vb, "tb"));
    Transport& wire = a.e().transport();
    ASSERT_EQ(0u, wire.tx_queued());
    std::vector<nicfw_desc*> rds, sds;
    for (int i = 0; i < 7; i++) {
        nicfw_desc* rd = b.one_seg(64);
        unit::post_recv(b.e(), vb, rd, b.memh);
        rds.push_back(rd);
        nicfw_desc* sd = a.one_seg(8);
        sds.push_back(sd);
    }
    auto arrived = [&](int n) {
        return unit::pump_until(b.e(), [&] { return unit::is_done(rds[size_t(n) - 1]); }, 2000);
    };
    // Three posts: built, held.
    for (int i = 0; i < 3; i++) unit::post_send(a.e(), va, sds[size_t(i)], a.memh);
    EXPECT_EQ(3u, wire.tx_queued());
    // The fourth fills the batch: all four leave.
    unit::post_send(a.e(), va, sds[3], a.memh);
    EXPECT_EQ(0u, wire.tx_queued());
    EXPECT_TRUE(arrived(4));
    // One more is held until a step that is not a post's.
    unit::post_send(a.e(), va, sds[4], a.memh);
    EXPECT_EQ(1u, wire.tx_queued());
    a.e().progress();
    EXPECT_EQ(0u, wire.tx_queued());
    EXPECT_TRUE(arrived(5));
    // Posts that no call follows: the guard thread sends them.
    unit::post_send(a.e(), va, sds[5], a.memh);
    unit::post_send(a.e(), va, sds[6], a.memh);
    uint64_t end = now_ms() + 1000;
    while (wire.tx_queued() != 0 && now_ms() < end) std::this_thread::sleep_for(std::chrono::microseconds(200));
    EXPECT_EQ(0u, wire.tx_queued()) << "held frames not sent without a call";
    EXPECT_TRUE(arrived(7));
    for (int i = 0; i < 7; i++) EXPECT_EQ(8u, rds[size_t(i)]->cs.length) << i;
}

// rxspin=N (Engine::spin_stop): an idle step of a program that only polls (it comes back
// at once) reads the wire up to N more times; one that comes back after other work, and
// a NIC with rxspin=0, read it once a step (and the NIC socket when that is due). A
// message that comes during the spin is taken by it. Both with a receive socket (after
// the switch to it, which reads both sockets until the first datagram comes there) and
// without one (rxsock=shared).
TEST(UdpTransport, IdleStepOfAProgramThatOnlyPollsReadsTheWireAgain) {
    for (const std::string opt : {"", ",rxsock=shared"}) {
        SCOPED_TRACE("udp:addr=127.0.0.1,local=wire" + opt);
        EngineConfig cfg;
        cfg.device = "udp:addr=127.0.0.1,local=wire" + opt;
        unit::Nic a(cfg);
        cfg.rx_spin = 0;
        unit::Nic b(cfg);
        Vi *va, *vb;
        ASSERT_TRUE(connected_vis(a, b, &va, &vb, "spin"));
        auto* wa = dynamic_cast<UdpTransport*>(&a.e().transport());
        auto* wb = dynamic_cast<UdpTransport*>(&b.e().transport());
        ASSERT_TRUE(wa && wb);
        // A message b -> a; with spin, sent while a spins (a 5 ms pause, then the post).
        auto b_to_a = [&](bool spin) {
            nicfw_desc* rd = a.one_seg(64);
            unit::post_recv(a.e(), va, rd, a.memh);
            nicfw_desc* sd = b.one_seg(8);
            std::thread sender([&] {
                if (spin) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                unit::post_send(b.e(), vb, sd, b.memh);
            });
            const uint64_t end = now_ms() + 2000;
            while (!unit::is_done(rd) && now_ms() < end) a.e().progress();
            sender.join();
            return unit::is_done(rd) && rd->cs.length == 8 && unit::wait_done(b.e(), sd, 2000);
        };
        if (opt.empty()) {  // until b's send socket is announced and a reads b's frames from its own
            for (int i = 0; i < 200 && wa->stats().rx_socket_reads == 0; i++) {
                ASSERT_TRUE(b_to_a(false));
                unit::pump_until({&a.e(), &b.e()}, [] { return false; }, 2);  // slow paths: the announcements
            }
            ASSERT_GT(wa->stats().rx_socket_reads, 0u) << "b's frames never came by a's receive socket";
        }
        // Reads per step, over 50 steps taken back to back (the first may not spin: the
        // step before it need not have been idle) or each after 200 us of other work.
        auto reads_per_step = [](unit::Nic& n, UdpTransport* w, bool pause) {
            n.e().progress();
            const uint64_t before = w->stats().rx_polls;
            for (int i = 0; i < 50; i++) {
                if (pause) std::this_thread::sleep_for(std::chrono::microseconds(200));
                EXPECT_FALSE(n.e().progress()) << "step " << i << " did work on an idle NIC";
            }
            return static_cast<double>(w->stats().rx_polls - before) / 50;
        };
        // At least 5 on average: a step that spins reads 9 times; one that does not, once or
        // twice. (Under ASan a step now and then comes back too late to spin: 8.84.)
        EXPECT_GE(reads_per_step(a, wa, false), 5.0) << "a polling program's idle step read the wire once";
        EXPECT_LE(reads_per_step(a, wa, true), 2.0) << "a step after other work spun";
        EXPECT_LE(reads_per_step(b, wb, false), 2.0) << "rxspin=0 spun";
        EXPECT_TRUE(b_to_a(true)) << "the message that came during the spin was not taken";
    }
}

// A control call is not kept out by a thread of its own program that polls in a tight
// loop (Engine::progress lets a waiting control call go first), on a loaded host: two
// more threads spin on the machine's cores meanwhile. Before, the poller took the lock
// again within nanoseconds of each step, and a VipConnectWait beside a VipConnectRequest
// in two such programs at once failed one run in ten.
TEST(UdpTransport, ControlCallsAreNotStarvedByATightPollingLoop) {
    EngineConfig cfg;
    cfg.device = "udp:addr=127.0.0.1,local=wire";
    unit::Nic a(cfg);
    ASSERT_TRUE(a.eng);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    // Each core (of the first two) shares a spinner; the poller on one, this thread on the other.
    auto pin = [](int core) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core % std::max(1, static_cast<int>(std::thread::hardware_concurrency())), &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    };
    for (int i = 0; i < 2; i++)
        threads.emplace_back([&, i] {
            pin(i);
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
    threads.emplace_back([&] {
        pin(0);
        while (!stop.load(std::memory_order_relaxed)) a.e().progress();
    });
    cpu_set_t was;
    pthread_getaffinity_np(pthread_self(), sizeof was, &was);
    pin(1);
    uint64_t worst = 0, total = 0;
    for (int i = 0; i < 3000; i++) {
        const uint64_t t0 = now_ms();
        a.e().vi_count();  // takes the lock as every control call does
        const uint64_t t = now_ms() - t0;
        worst = std::max(worst, t);
        total += t;
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    pthread_setaffinity_np(pthread_self(), sizeof was, &was);
    // With the poller giving way: 10-35 ms in all here; without, 1.7-12 s, one call 0.3-3.8 s.
    EXPECT_LT(total, 1000u) << "3000 control calls took " << total << " ms (the slowest " << worst << " ms)";
}

// Reliable VIs on a lossy wire share an ACK across a dense one-way stream (messages
// within kAckDenseNs of each other), but a message that comes alone is acknowledged in
// the very step that places it: holding its ACK would only delay the sender's completion.
TEST(UdpTransport, LoneReliableMessageIsAcknowledgedInTheStepThatPlacesIt) {
    EngineConfig cfg;
    cfg.device = "udp:addr=127.0.0.1,local=wire";
    unit::Nic a(cfg), b(cfg);
    Vi *va, *vb;
    ASSERT_TRUE(connected_vis(a, b, &va, &vb, "lone", NICFW_REL_RELIABLE_DELIVERY));
    ASSERT_TRUE(vb->rel_proto) << "udp is a lossy wire: reliable VIs retransmit";
    const nicfw_status_page* st = b.e().status();  // ACK frames count in the NIC's counters only
    for (int i = 0; i < 3; i++) {
        nicfw_desc* rd = b.one_seg(64);
        unit::post_recv(b.e(), vb, rd, b.memh);
        nicfw_desc* sd = a.one_seg(8);
        const uint64_t acks_before = st->nic.tx_frames;
        unit::post_send(a.e(), va, sd, a.memh);
        ASSERT_TRUE(unit::wait_done(b.e(), rd, 2000)) << "message " << i;
        EXPECT_EQ(acks_before + 1, st->nic.tx_frames) << "message " << i << ": its ACK was held";
        EXPECT_TRUE(unit::wait_done(a.e(), sd, 2000)) << "message " << i << ": send not completed by the ACK";
        EXPECT_EQ(NICFW_DS_DONE, unit::status_of(sd) & ~NICFW_DS_OP_MASK) << i;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // alone: far apart
    }
}

// Two live NICs that talked and then let go of each other (both engines released the
// peer) free each other's entry after the linger, although both keep running: probes
// from a live peer that no longer uses us must not keep it (a server whose clients stay
// up after they disconnect would fill its table for good).
TEST(UdpTransport, ReleasedLivePeersAreFreedBothWays) {
    auto a = make(), b = make();
    int pb = resolve(*a, *b);
    ASSERT_GE(pb, 0);
    ASSERT_TRUE(send(*a, pb, 64, 1));
    a->tx_flush();
    auto got = receive(*b, 1);
    ASSERT_EQ(1u, got.size());
    const int pa = got[0].peer;
    ASSERT_TRUE(send(*b, pa, 64, 2));
    b->tx_flush();
    ASSERT_EQ(1u, receive(*a, 1).size());
    a->release_peer(pb);
    b->release_peer(pa);
    bool a_freed = false, b_freed = false;
    std::vector<TransportEvent> ev;
    for (uint64_t end = now_ms() + 4000; !(a_freed && b_freed) && now_ms() < end; usleep(1000)) {
        RxFrame f[8];
        if (a->rx_burst(f, 8)) a->rx_release();
        if (b->rx_burst(f, 8)) b->rx_release();
        ev.clear();
        a->poll_slow(ev);
        for (auto& e : ev) a_freed |= e.kind == PeerEvent::kFreed && e.peer == pb;
        ev.clear();
        b->poll_slow(ev);
        for (auto& e : ev) b_freed |= e.kind == PeerEvent::kFreed && e.peer == pa;
    }
    EXPECT_TRUE(a_freed) << "a kept b, which only probes it";
    EXPECT_TRUE(b_freed) << "b kept a, which only probes it";
    EXPECT_EQ(0u, a->live_peers());
    EXPECT_EQ(0u, b->live_peers());
}

namespace {
// a and b know each other (a frame each way), then step both (receives and probe rounds)
// for up to ms, sending a frame a -> b each turn, until b has taken one from a's send
// socket. The frames that arrived at b, in order.
std::vector<Got> exchange_until_send_socket(UdpTransport& a, int pb, UdpTransport& b, uint64_t ms) {
    std::vector<Got> got;
    std::vector<TransportEvent> ev;
    uint32_t seq = 0;
    for (uint64_t end = now_ms() + ms; b.stats().rx_peer_socket == 0 && now_ms() < end; usleep(1000)) {
        EXPECT_TRUE(send(a, pb, 64, seq++));
        a.tx_flush();
        RxFrame f[32];
        int n = b.rx_burst(f, 32);
        for (int i = 0; i < n; i++) got.push_back({f[i].peer, std::vector<uint8_t>(f[i].data, f[i].data + f[i].len)});
        if (n) b.rx_release();
        if (a.rx_burst(f, 32)) a.rx_release();
        a.poll_slow(ev);
        b.poll_slow(ev);
        b.tx_flush();
    }
    auto rest = receive(b, seq - got.size(), 500);
    got.insert(got.end(), rest.begin(), rest.end());
    return got;
}

// A frame each way: both NICs have heard the other.
int meet(UdpTransport& a, int pb, UdpTransport& b) {
    EXPECT_TRUE(send(a, pb, 64, 1000));
    a.tx_flush();
    auto got = receive(b, 1);
    if (got.size() != 1) return -1;
    EXPECT_TRUE(send(b, got[0].peer, 64, 1001));
    b.tx_flush();
    EXPECT_EQ(1u, receive(a, 1).size());
    return got[0].peer;
}

// Two NICs that have met, once b has taken a frame from a's send socket (or 2 s passed:
// the caller checks b's rx_peer_socket).
struct SendSocketPair {
    std::unique_ptr<UdpTransport> a, b;
    int pb, pa;
    explicit SendSocketPair(const std::string& b_opts = "") : a(make()), b(make(b_opts)) {
        pb = resolve(*a, *b);
        pa = meet(*a, pb, *b);
        if (pa >= 0) exchange_until_send_socket(*a, pb, *b, 2000);
    }
};
}  // namespace

// txsock=peer: after a frame came from a peer, a probe round opens a connected socket for
// it and announces it; once the peer answers, frames leave by it, and the peer takes
// them as the same peer's (udp_peer_sockets.cc). Nothing is lost or reordered on the way.
TEST(UdpTransport, FramesMoveToAPeerSendSocketOnceAnnounced) {
    auto a = make(), b = make();
    int pb = resolve(*a, *b);
    const int pa = meet(*a, pb, *b);
    ASSERT_GE(pa, 0);
    auto got = exchange_until_send_socket(*a, pb, *b, 2000);
    ASSERT_GT(b->stats().rx_peer_socket, 0u) << "no frame came by a's send socket";
    EXPECT_GT(a->stats().tx_peer_socket, 0u);
    for (uint32_t i = 0; i < got.size(); i++) {
        EXPECT_EQ(pa, got[i].peer) << i;
        ASSERT_EQ(64u, got[i].data.size());
        EXPECT_TRUE(check(got[i].data.data(), 64, i)) << "frame " << i << " out of order or damaged";
    }
    EXPECT_EQ(1u, b->live_peers());  // the send socket's port made no peer of its own
    EXPECT_EQ(0u, a->stats().peer_socket_failures);
}

TEST(UdpTransport, SharedSocketSendsEverythingByTheNicSocket) {
    auto a = make(",txsock=shared"), b = make();
    int pb = resolve(*a, *b);
    ASSERT_GE(meet(*a, pb, *b), 0);
    auto got = exchange_until_send_socket(*a, pb, *b, 400);
    EXPECT_GT(got.size(), 100u);
    EXPECT_EQ(0u, a->stats().tx_peer_socket);
    EXPECT_EQ(0u, b->stats().rx_peer_socket);
}

// A frame flagged as from a's send socket but from a port a never announced (forged by
// another process on the host, with a's published nonce) is not a's: dropped, and no peer
// made of it. The refusal (PORT_NAK to a's NIC socket) names the port the forgery came
// from, not a's send socket: a keeps it, and its frames keep arriving by it.
TEST(UdpTransport, ForgedSendSocketFramesAreRefused) {
    SendSocketPair s;
    auto &a = s.a, &b = s.b;
    const int pb = s.pb, pa = s.pa;
    ASSERT_GE(pa, 0);
    ASSERT_GT(b->stats().rx_peer_socket, 0u);
    const uint64_t taken = b->stats().rx_peer_socket, strangers = b->stats().rx_strangers;
    RawSocket raw;
    uint32_t a_nonce;
    memcpy(&a_nonce, addr(*a).data() + 16, 4);
    auto d = preamble(*b, a_nonce);
    memcpy(d.data() + 8, addr(*a).data() + 8, 8);  // a's host id
    d[5] = 1;                                      // "from my send socket"
    memcpy(d.data() + 6, addr(*a).data() + 2, 2);  // a's NIC port
    d.resize(d.size() + 64, 0x5A);
    raw.send_to(*b, d);
    EXPECT_TRUE(receive(*b, 1, 200).empty()) << "a forged frame was taken";
    EXPECT_EQ(taken, b->stats().rx_peer_socket);
    EXPECT_EQ(strangers + 1, b->stats().rx_strangers);
    EXPECT_EQ(1u, b->live_peers());
    for (int i = 0; i < 50; i++, usleep(500)) {  // the refusal reaches a
        RxFrame f[8];
        b->tx_flush();
        if (a->rx_burst(f, 8)) a->rx_release();
    }
    EXPECT_EQ(0u, a->stats().peer_socket_failures);
    const uint64_t sent_by_socket = a->stats().tx_peer_socket;
    for (uint32_t i = 0; i < 5; i++) ASSERT_TRUE(send(*a, pb, 32, i));
    a->tx_flush();
    auto got = receive(*b, 5);
    ASSERT_EQ(5u, got.size());
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(pa, got[i].peer);
        EXPECT_TRUE(check(got[i].data.data(), 32, i));
    }
    for (uint64_t end = now_ms() + 500; a->stats().tx_peer_socket < sent_by_socket + 5 && now_ms() < end;) {
        RxFrame f[8];  // a's step reaps the sends' completions (several go by the ring)
        if (a->rx_burst(f, 8)) a->rx_release();
    }
    EXPECT_EQ(sent_by_socket + 5, a->stats().tx_peer_socket);
    EXPECT_EQ(taken + 5, b->stats().rx_peer_socket);
}

// b forgets a (released and lingered out) while a still sends by its send socket: b
// refuses those frames, a falls back to its NIC socket, and b learns a anew from them.
TEST(UdpTransport, PeerThatForgotTheSendSocketGetsTheSenderBack) {
    SendSocketPair s;
    auto &a = s.a, &b = s.b;
    const int pb = s.pb, pa = s.pa;
    ASSERT_GE(pa, 0);
    ASSERT_GT(b->stats().rx_peer_socket, 0u);
    b->release_peer(pa);
    bool freed = false;
    std::vector<TransportEvent> ev;
    for (uint64_t end = now_ms() + 3000; !freed && now_ms() < end; usleep(2000)) {
        RxFrame f[8];
        if (a->rx_burst(f, 8)) a->rx_release();
        if (b->rx_burst(f, 8)) b->rx_release();
        ev.clear();
        b->poll_slow(ev);
        for (auto& e : ev) freed |= e.kind == PeerEvent::kFreed && e.peer == pa;
    }
    ASSERT_TRUE(freed);
    // a's next frames: the first by its send socket is refused; a falls back and resends.
    std::vector<Got> got;
    uint32_t seq = 0;
    for (uint64_t end = now_ms() + 1000; got.empty() && now_ms() < end; usleep(1000)) {
        ASSERT_TRUE(send(*a, pb, 16, seq++));
        a->tx_flush();
        RxFrame f[8];
        int n = b->rx_burst(f, 8);
        for (int i = 0; i < n; i++) got.push_back({f[i].peer, std::vector<uint8_t>(f[i].data, f[i].data + f[i].len)});
        if (n) b->rx_release();
        b->tx_flush();
        if (a->rx_burst(f, 8)) a->rx_release();
    }
    ASSERT_FALSE(got.empty()) << "a never reached b again";
    EXPECT_EQ(1u, a->stats().peer_socket_failures);
    EXPECT_EQ(addr(*a), b->peer_addr(got[0].peer));  // a, by its NIC address
    EXPECT_EQ(1u, b->stats().rx_sockets_opened);
    EXPECT_EQ(-1, b->rx_socket_peer()) << "the receive socket outlived its peer";
}

// rxsock=peer: once a announced its send socket, b receives what a sends on a socket
// connected to it (udp_peer_sockets.cc): all of it, in order; the frames that came before
// it by the NIC's socket were checked in order by FramesMoveToAPeerSendSocketOnceAnnounced.
TEST(UdpTransport, ReceiveSocketTakesItsPeersFrames) {
    SendSocketPair s;
    auto &a = s.a, &b = s.b;
    ASSERT_GE(s.pa, 0);
    ASSERT_GT(b->stats().rx_peer_socket, 0u);
    ASSERT_EQ(1u, b->stats().rx_sockets_opened);
    ASSERT_EQ(s.pa, b->rx_socket_peer());
    const uint64_t reads = b->stats().rx_socket_reads;
    for (uint32_t i = 0; i < 200; i++) {
        ASSERT_TRUE(send(*a, s.pb, 48, i));
        if (i % 8 == 7) a->tx_flush();
    }
    a->tx_flush();
    auto got = receive(*b, 200);
    ASSERT_EQ(200u, got.size());
    for (uint32_t i = 0; i < 200; i++) {
        EXPECT_EQ(s.pa, got[i].peer);
        EXPECT_TRUE(check(got[i].data.data(), 48, i)) << "frame " << i << " out of order or damaged";
    }
    EXPECT_EQ(reads + 200, b->stats().rx_socket_reads) << "frames came by the NIC's socket";
    // The NIC's port is still its own: a NIC that asks for it is refused.
    std::string why;
    int rc = 0;
    EXPECT_EQ(nullptr, make(",port=" + std::to_string(b->port()), &why, &rc));
    EXPECT_EQ(-EADDRINUSE, rc) << why;
}

// The switch to the receive socket keeps a's order: 100 frames by a's NIC socket queued
// behind its PORT at b, then (a has b's PORT_ACK) 10 by its send socket, which land in
// b's receive socket while older ones still wait at the NIC socket; b takes them all in
// the order a sent them.
TEST(UdpTransport, SwitchToTheReceiveSocketKeepsOrder) {
    auto a = make(), b = make();
    const int pb = resolve(*a, *b);
    const int pa = meet(*a, pb, *b);
    ASSERT_GE(pa, 0);
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);  // a opens its send socket and announces it (PORT by its NIC socket)
    usleep(2000);
    uint32_t seq = 0;
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 25; i++) ASSERT_TRUE(send(*a, pb, 8, seq++));
        a->tx_flush();
    }
    usleep(5000);
    std::vector<Got> got;
    auto take = [&](int bursts) {
        for (int k = 0; k < bursts; k++, usleep(50)) {
            RxFrame f[32];
            int n = b->rx_burst(f, 32);
            for (int i = 0; i < n; i++) got.push_back({f[i].peer, std::vector<uint8_t>(f[i].data, f[i].data + f[i].len)});
            if (n) b->rx_release();
        }
    };
    take(1);  // PORT and 31 frames: the receive socket opens, PORT_ACK goes
    b->tx_flush();
    ASSERT_EQ(pa, b->rx_socket_peer());
    take(1);
    usleep(2000);
    RxFrame f[8];
    if (a->rx_burst(f, 8)) a->rx_release();  // the ACK: a's frames leave by its send socket now
    for (int i = 0; i < 10; i++) ASSERT_TRUE(send(*a, pb, 8, seq++));
    a->tx_flush();
    usleep(5000);
    take(20);
    ASSERT_EQ(110u, got.size());
    EXPECT_GE(b->stats().rx_socket_reads, 1u) << "no frame came by the receive socket";
    for (uint32_t i = 0; i < got.size(); i++) EXPECT_TRUE(check(got[i].data.data(), 8, i)) << "frame " << i << " out of order";
}

// A flood at b's NIC port through the switch: the NIC socket reads full every step, so
// the wait for it to read short never ends by itself; after kDrainReads reads b takes a's
// frames from the receive socket anyway (order given up, not the peer).
TEST(UdpTransport, FloodDuringTheSwitchDoesNotHoldThePeerBack) {
    auto a = make(), b = make();
    const int pb = resolve(*a, *b);
    const int pa = meet(*a, pb, *b);
    ASSERT_GE(pa, 0);
    std::vector<TransportEvent> ev;
    a->poll_slow(ev);  // a's PORT
    usleep(2000);
    RxFrame f[32];
    for (int i = 0; i < 5 && b->rx_socket_peer() < 0; i++, usleep(500))
        if (b->rx_burst(f, 32)) b->rx_release();
    ASSERT_EQ(pa, b->rx_socket_peer());
    b->tx_flush();  // PORT_ACK
    usleep(2000);
    if (a->rx_burst(f, 8)) a->rx_release();
    RawSocket raw;
    auto junk = preamble(*b, 0x5A5A);
    junk.resize(junk.size() + 16, 0);
    for (int i = 0; i < 64; i++) raw.send_to(*b, junk);
    for (uint32_t i = 0; i < 10; i++) ASSERT_TRUE(send(*a, pb, 8, i));
    a->tx_flush();
    usleep(2000);
    size_t got = 0;
    int bursts = 0;
    for (; bursts < 600 && got < 10; bursts++) {
        for (int i = 0; i < 40; i++) raw.send_to(*b, junk);  // more than a read takes
        int n = b->rx_burst(f, 32);
        for (int i = 0; i < n; i++) got += f[i].peer == pa;
        if (n) b->rx_release();
    }
    EXPECT_EQ(10u, got) << "a's frames waited behind the flood for good";
    EXPECT_LE(bursts, static_cast<int>(UdpTransport::kDrainReads) + 20);
}

// With the receive socket held by a, a frame from a third NIC c waits at the NIC socket
// at most one step once about 8 us have passed since it was last read (a firmware thread
// that sleeps between idle steps reads it on every step).
TEST(UdpTransport, ThirdPeerIsReadWithinAStepAfterAQuietSpell) {
    SendSocketPair s;
    auto &a = s.a, &b = s.b;
    ASSERT_GE(s.pa, 0);
    ASSERT_EQ(s.pa, b->rx_socket_peer());
    auto c = make();
    const int bc = resolve(*c, *b);
    auto step = [&] {
        RxFrame f[32];
        int n = b->rx_burst(f, 32);
        if (n) b->rx_release();
        return n;
    };
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 200; i++) step();  // idle steps: no credit left for the NIC socket
        ASSERT_TRUE(send(*c, bc, 16, round));
        c->tx_flush();
        usleep(2000);  // queued at b's NIC socket
        EXPECT_EQ(1, step()) << "round " << round << ": c's frame waited behind the receive socket";
    }
    (void)a;
}

// A flood at b's NIC port (a stranger's datagrams) does not hold back the frames of the
// peer with the receive socket: b reads at most half a burst from the NIC socket while it
// has one. With rxsock=shared they wait behind the whole flood.
TEST(UdpTransport, FloodAtTheNicPortDoesNotStarveTheReceiveSocket) {
    for (const char* opts : {"", ",rxsock=shared"}) {
        SendSocketPair s(opts);
        auto &a = s.a, &b = s.b;
        ASSERT_GE(s.pa, 0) << opts;
        ASSERT_GT(b->stats().rx_peer_socket, 0u) << opts;
        RawSocket raw;
        auto junk = preamble(*b, 0x5A5A);  // our nonce, an unknown sender: a stranger
        junk.resize(junk.size() + 16, 0);
        for (int i = 0; i < 500; i++) raw.send_to(*b, junk);
        for (uint32_t i = 0; i < 20; i++) ASSERT_TRUE(send(*a, s.pb, 32, i));
        a->tx_flush();
        size_t got = 0;
        for (int burst = 0; burst < 2; burst++) {
            RxFrame f[32];
            int n = b->rx_burst(f, 32);
            for (int i = 0; i < n; i++) got += f[i].peer == s.pa;
            if (n) b->rx_release();
        }
        if (*opts == 0) {
            EXPECT_EQ(20u, got) << "the receive socket's peer waited behind the flood";
            EXPECT_LT(b->stats().rx_strangers, 100u);  // most of the flood is still queued
        } else {
            EXPECT_EQ(0u, got) << "with one shared socket the flood comes first";
            EXPECT_EQ(0u, b->stats().rx_sockets_opened);
        }
    }
}
