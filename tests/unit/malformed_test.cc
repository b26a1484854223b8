// tests/unit/malformed_test.cc -- hostile frames from a raw shm transport never crash
// the firmware, never write outside receive buffers, and are counted as drops; the NIC
// keeps working afterwards.
//
// The raw transport can also pose as a peer VI (it answers the engine's PEER_REQ with
// crossed discriminators), so forged DATA frames reach the deeper receive checks.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "transport/shm/shm_transport.h"
#include "unit_util.h"

using namespace unit;

namespace {

constexpr uint32_t kHdr = sizeof(nicfw_frame_hdr);
constexpr uint32_t kFixed = offsetof(nicfw_conn_payload, disc);
constexpr uint32_t kFakeVi = NICFW_VI_MAKE(5, 3);  // the raw side's pretend VI id

nicfw_frame_hdr hdr(uint8_t type, uint32_t dst, uint32_t src = kFakeVi) {
    nicfw_frame_hdr h{};
    h.type = type;
    h.version = NICFW_ABI_VERSION;
    h.dst_vi = dst;
    h.src_vi = src;
    return h;
}

struct Malformed : ::testing::Test {
    Nic n{Progress::kInline, 4 << 20};
    std::unique_ptr<ShmTransport> raw;
    int to_eng = -1;  // raw's peer index for the engine

    void SetUp() override {
        ASSERT_TRUE(n.eng);
        ASSERT_EQ(0, ShmTransport::create(&raw));
        size_t alen;
        const uint8_t* ea = n.e().transport().local_addr(&alen);
        to_eng = raw->resolve(ea, alen);
        ASSERT_GE(to_eng, 0);
    }

    // Frames the engine sends back to the raw side; they are read and dropped.
    void drain_raw() {
        RxFrame f[32];
        while (raw->rx_burst(f, 32) > 0) raw->rx_release();
    }
    void step(int times = 4) {
        for (int i = 0; i < times; i++) n.e().progress();
        drain_raw();
    }
    // Puts one frame on the wire (waits for room, stepping the engine).
    void send_bytes(const void* data, uint32_t len) {
        uint8_t* p;
        uint64_t end = now_ms() + 5000;
        while (!(p = raw->tx_reserve(to_eng, len))) {
            ASSERT_LT(now_ms(), end) << "engine stopped reading";
            step(1);
        }
        if (len) memcpy(p, data, len);
        raw->tx_commit(to_eng, len);
    }
    void send_frame(const nicfw_frame_hdr& h, const void* payload = nullptr, uint32_t plen = 0) {
        std::vector<uint8_t> f(kHdr + plen);
        memcpy(f.data(), &h, kHdr);
        if (plen) memcpy(f.data() + kHdr, payload, plen);
        send_bytes(f.data(), static_cast<uint32_t>(f.size()));
    }
    // Steps until the engine has taken every frame sent so far.
    void settle() {
        for (int i = 0; i < 200; i++) step(1);
    }
    uint64_t drops() const { return n.eng->status()->nic.drops; }
    uint64_t rx_frames() const { return n.eng->status()->nic.rx_frames; }

    // Connects engine VI v to the raw side's pretend VI kFakeVi.
    void connect_fake(Vi* v, uint32_t max_transfer = NICFW_MAX_TRANSFER) {
        size_t alen;
        const uint8_t* ra = raw->local_addr(&alen);
        ASSERT_EQ(0, n.e().peer_request(v, ra, alen, reinterpret_cast<const uint8_t*>("E"), 1,
                                        reinterpret_cast<const uint8_t*>("R"), 1, 5000));
        nicfw_conn_payload pl{};
        pl.reliability = v->attrs.reliability;
        pl.max_transfer = max_transfer;
        pl.src_disc_len = 1;
        pl.dst_disc_len = 1;
        pl.disc[0] = 'R';
        pl.disc[1] = 'E';
        nicfw_frame_hdr h = hdr(NICFW_F_PEER_REQ, 0xFFFFFFFFu);
        h.msg_len = kFixed + 2;
        h.seq = 1;
        uint64_t end = now_ms() + 5000;
        while (state_of(v) != NICFW_VI_CONNECTED && now_ms() < end) {
            send_frame(h, &pl, h.msg_len);
            step(8);
        }
        ASSERT_EQ(NICFW_VI_CONNECTED, state_of(v));
        ASSERT_EQ(kFakeVi, v->remote_vi);
    }

    // Like a real sender, the raw peer numbers its messages: a fragment at offset 0 starts
    // the next message number, later fragments carry the current one (unless seq is given).
    static constexpr uint32_t kAutoSeq = 0xFFFFFFFFu;
    uint32_t next_seq_ = 0, cur_seq_ = 0;
    void data(Vi* v, uint32_t msg_len, uint32_t offset, uint32_t frag_len, uint8_t flags,
              uint32_t frame_payload, uint8_t fill = 0x11, uint32_t seq = kAutoSeq) {
        nicfw_frame_hdr h = hdr(NICFW_F_DATA, v->id);
        h.flags = flags;
        h.msg_len = msg_len;
        h.offset = offset;
        h.frag_len = frag_len;
        if (seq == kAutoSeq) {
            if (offset == 0) cur_seq_ = next_seq_++;
            seq = cur_seq_;
        }
        h.seq = seq;
        std::vector<uint8_t> pl(frame_payload, fill);
        send_frame(h, pl.data(), frame_payload);
    }

    // Both own VIs of the engine still connect to each other and exchange a message.
    void expect_engine_works() {
        Vi* x = n.vi();
        Vi* y = n.vi();
        ASSERT_TRUE(connect_peers(n.e(), x, n.e(), y, "after-x", "after-y"));
        uint8_t* src = n.alloc(20000);
        uint8_t* dst = n.alloc(20000);
        fill_pattern(src, 20000, 1234);
        nicfw_desc* sd = n.desc(1);
        nicfw_desc* rd = n.desc(1);
        init_desc(sd, 1, NICFW_DC_OP_SEND | NICFW_DC_IMMEDIATE, 77);
        set_seg(sd, 0, src, n.memh, 20000);
        init_desc(rd, 1);
        set_seg(rd, 0, dst, n.memh, 20000);
        post_recv(n.e(), y, rd, n.memh);
        post_send(n.e(), x, sd, n.memh);
        ASSERT_TRUE(pump_until(n.e(), [&] { return is_done(rd) && is_done(sd); }));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_IMMEDIATE),
                  status_of(rd));
        EXPECT_EQ(20000u, rd->cs.length);
        EXPECT_EQ(77u, rd->cs.imm);
        EXPECT_TRUE(check_pattern(dst, 20000, 1234));
    }
};

// A receive buffer with guard zones on both sides.
struct Guarded {
    static constexpr uint32_t kGuard = 256;
    Guarded(Nic& n, uint32_t cap) : cap(cap) {
        base = n.alloc(cap + 2 * kGuard);
        memset(base, 0xC3, cap + 2 * kGuard);
        d = n.desc(1);
        init_desc(d, 1);
        set_seg(d, 0, buf(), n.memh, cap);
    }
    uint8_t* buf() const { return base + kGuard; }
    bool guards_intact() const {
        for (uint32_t i = 0; i < kGuard; i++)
            if (base[i] != 0xC3 || base[kGuard + cap + i] != 0xC3) return false;
        return true;
    }
    uint32_t cap;
    uint8_t* base;
    nicfw_desc* d;
};

TEST_F(Malformed, TruncatedFrames) {
    uint64_t d0 = drops(), r0 = rx_frames();
    std::vector<uint8_t> junk(kHdr, 0);
    nicfw_frame_hdr h = hdr(NICFW_F_DATA, 0);
    memcpy(junk.data(), &h, kHdr);
    for (uint32_t len = 0; len < kHdr; len++) send_bytes(junk.data(), len);
    settle();
    EXPECT_EQ(r0 + kHdr, rx_frames());
    EXPECT_EQ(d0 + kHdr, drops());
    expect_engine_works();
}

TEST_F(Malformed, WrongVersion) {
    uint64_t d0 = drops();
    int count = 0;
    for (int v : {0, int{NICFW_ABI_VERSION} - 1, int{NICFW_ABI_VERSION} + 1, 0x7F, 0xFF}) {
        for (uint8_t type = NICFW_F_DATA; type <= NICFW_F_TYPE_MAX; type++) {
            nicfw_frame_hdr h = hdr(type, 0xFFFFFFFFu);
            h.version = static_cast<uint8_t>(v);
            send_frame(h);
            count++;
        }
    }
    settle();
    EXPECT_EQ(d0 + count, drops());
    expect_engine_works();
}

TEST_F(Malformed, UnknownTypes) {
    uint64_t d0 = drops();
    int count = 0;
    for (int t = 0; t < 256; t++) {
        if (t >= NICFW_F_DATA && t <= NICFW_F_TYPE_MAX) continue;
        nicfw_frame_hdr h = hdr(static_cast<uint8_t>(t), 0);
        send_frame(h);
        count++;
    }
    settle();
    EXPECT_EQ(d0 + count, drops());
    expect_engine_works();
}

TEST_F(Malformed, DataToMissingStaleOrUnconnectedVis) {
    Vi* gone = n.vi();
    const uint32_t stale = gone->id;
    ASSERT_EQ(0, n.e().destroy_vi(gone));
    Vi* v = n.vi();  // reuses the slot, new generation
    ASSERT_EQ(NICFW_VI_INDEX(stale), NICFW_VI_INDEX(v->id));
    Vi* idle = n.vi();
    Guarded g(n, 4096);
    post_recv(n.e(), v, g.d, n.memh);
    connect_fake(v);
    Guarded gi(n, 4096);
    post_recv(n.e(), idle, gi.d, n.memh);
    settle();
    uint64_t d0 = drops();
    int count = 0;
    for (uint32_t dst : {stale, NICFW_VI_MAKE(NICFW_VI_INDEX(v->id), NICFW_VI_GEN(v->id) + 1),
                         NICFW_VI_MAKE(4000, 1), NICFW_VI_MAKE(0xFFFF, 0xFFFF), 0u, 0xFFFFFFFFu, idle->id}) {
        nicfw_frame_hdr h = hdr(NICFW_F_DATA, dst);
        h.flags = NICFW_FF_LAST;
        h.msg_len = h.frag_len = 100;
        std::vector<uint8_t> pl(100, 0x77);
        send_frame(h, pl.data(), 100);
        count++;
        nicfw_frame_hdr a = hdr(NICFW_F_ACK, dst);
        a.imm = 1000;
        send_frame(a);
        count++;
    }
    // Right VI, wrong sender VI.
    nicfw_frame_hdr h = hdr(NICFW_F_DATA, v->id, kFakeVi + 1);
    h.flags = NICFW_FF_LAST;
    h.msg_len = h.frag_len = 10;
    std::vector<uint8_t> pl(10, 0x77);
    send_frame(h, pl.data(), 10);
    count++;
    settle();
    EXPECT_EQ(d0 + count, drops());
    EXPECT_FALSE(is_done(g.d));
    EXPECT_FALSE(is_done(gi.d));
    EXPECT_TRUE(g.guards_intact());
    // The connected VI still takes a proper message from its peer.
    data(v, 100, 0, 100, NICFW_FF_LAST, 100, 0x42);
    settle();
    ASSERT_TRUE(is_done(g.d));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(g.d));
    EXPECT_EQ(100u, g.d->cs.length);
    for (int i = 0; i < 100; i++) ASSERT_EQ(0x42, g.buf()[i]);
    EXPECT_TRUE(g.guards_intact());
    expect_engine_works();
}

TEST_F(Malformed, DataFieldRanges) {
    Vi* v = n.vi();
    Guarded g(n, 8192);
    post_recv(n.e(), v, g.d, n.memh);
    connect_fake(v);
    settle();
    uint64_t d0 = drops();
    int count = 0;
    auto bad = [&](uint32_t msg_len, uint32_t offset, uint32_t frag_len, uint32_t payload) {
        data(v, msg_len, offset, frag_len, NICFW_FF_LAST, payload, 0xEE);
        count++;
    };
    bad(100, 0, 101, 100);                      // fragment longer than the frame carries
    bad(100, 0, 50, 10);                        // payload shorter than frag_len
    bad(100, 0, 1, 0);
    bad(0xFFFFFFFFu, 0, 10, 10);                // message over 16 MiB
    bad(NICFW_MAX_TRANSFER + 1, 0, 10, 10);
    bad(100, 101, 0, 0);                        // offset past the message
    bad(100, 0xFFFFFFFFu, 10, 10);
    bad(100, 90, 11, 11);                       // fragment past the message end
    bad(100, 0xFFFFFFF6u, 20, 20);              // offset + frag_len wraps 32 bits
    bad(NICFW_MAX_TRANSFER, NICFW_MAX_TRANSFER - 1, 2, 2);
    bad(10, 0, 0xFFFFFFFFu, 100);
    settle();
    EXPECT_EQ(d0 + count, drops());
    EXPECT_FALSE(is_done(g.d));
    EXPECT_TRUE(g.guards_intact());
    for (uint32_t i = 0; i < 8192; i++) ASSERT_EQ(0xC3, g.buf()[i]) << i;
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(v));
}

TEST_F(Malformed, InconsistentFragments) {
    Vi* v = n.vi();
    Guarded g1(n, 1000), g2(n, 1000), g3(n, 1000), g4(n, 1000);
    for (Guarded* g : {&g1, &g2, &g3, &g4}) post_recv(n.e(), v, g->d, n.memh);
    connect_fake(v);
    settle();
    uint64_t d0 = drops();
    // A middle fragment with no message started.
    data(v, 500, 100, 100, 0, 100);
    data(v, 500, 400, 100, NICFW_FF_LAST, 100);
    settle();
    EXPECT_EQ(d0 + 2, drops());
    EXPECT_FALSE(is_done(g1.d));

    // A message starts (500 bytes); a fragment claiming another length is dropped.
    data(v, 500, 0, 200, 0, 200, 0x01);
    data(v, 600, 200, 100, 0, 100, 0x02);
    settle();
    EXPECT_EQ(d0 + 3, drops());
    EXPECT_FALSE(is_done(g1.d));
    // A new message starts before the old one ended: on an unreliable VI the old one is
    // lost (counted) and its receive descriptor takes the new message.
    data(v, 300, 0, 300, NICFW_FF_LAST, 300, 0x03);
    settle();
    ASSERT_TRUE(is_done(g1.d));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(g1.d));
    EXPECT_EQ(300u, g1.d->cs.length);
    for (int i = 0; i < 300; i++) ASSERT_EQ(0x03, g1.buf()[i]);
    EXPECT_EQ(d0 + 4, drops());

    // LAST arrives while bytes are still missing: the message is lost, g2 keeps waiting.
    data(v, 800, 0, 100, 0, 100, 0x04);
    data(v, 800, 700, 50, NICFW_FF_LAST, 50, 0x05);
    settle();
    EXPECT_FALSE(is_done(g2.d));
    // A duplicate of an earlier message (an old sequence number) is never delivered.
    data(v, 300, 0, 300, NICFW_FF_LAST, 300, 0x09, 0);
    settle();
    EXPECT_FALSE(is_done(g2.d));
    // The next whole message takes g2, then g3.
    data(v, 100, 0, 100, NICFW_FF_LAST, 100, 0x0A);
    data(v, 100, 0, 100, NICFW_FF_LAST, 100, 0x0B);
    settle();
    ASSERT_TRUE(is_done(g2.d));
    ASSERT_TRUE(is_done(g3.d));
    EXPECT_EQ(0x0A, g2.buf()[0]);
    EXPECT_EQ(0x0B, g3.buf()[0]);

    // A message bigger than the receive buffer: length error, no stray bytes.
    data(v, 2000, 0, 1000, 0, 1000, 0x06);
    data(v, 2000, 1000, 1000, NICFW_FF_LAST, 1000, 0x07);
    settle();
    ASSERT_TRUE(is_done(g4.d));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_LENGTH_ERROR),
              status_of(g4.d));
    for (Guarded* g : {&g1, &g2, &g3, &g4}) EXPECT_TRUE(g->guards_intact());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(v));
    // No receive descriptor left: an unreliable VI drops the message.
    uint64_t d1 = drops();
    data(v, 10, 0, 10, NICFW_FF_LAST, 10);
    settle();
    EXPECT_EQ(d1 + 1, drops());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(v));
    expect_engine_works();
}

TEST_F(Malformed, OverlappingAndRepeatedFragmentsStayInBuffer) {
    Vi* v = n.vi();
    Guarded g(n, 1000);
    post_recv(n.e(), v, g.d, n.memh);
    connect_fake(v);
    settle();
    data(v, 1000, 0, 600, 0, 600, 0x10);
    data(v, 1000, 500, 500, 0, 500, 0x20);   // overlaps
    data(v, 1000, 0, 1000, 0, 1000, 0x30);   // "restart" at offset 0 of the same length
    data(v, 1000, 999, 1, 0, 1, 0x40);
    data(v, 1000, 1000, 0, NICFW_FF_LAST, 0, 0x50);
    settle();
    EXPECT_TRUE(g.guards_intact());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(v));
}

TEST_F(Malformed, ControlPayloadChecks) {
    Vi* v = n.vi();
    connect_fake(v);
    settle();
    uint64_t d0 = drops();
    int count = 0;
    for (uint8_t type : {uint8_t{NICFW_F_CONN_REQ}, uint8_t{NICFW_F_CONN_ACCEPT}, uint8_t{NICFW_F_PEER_REQ},
                         uint8_t{NICFW_F_PEER_ACK}}) {
        nicfw_conn_payload pl{};
        pl.reliability = NICFW_REL_UNRELIABLE;
        // Discriminator lengths over the maximum.
        constexpr uint16_t kMax = NICFW_MAX_DISCRIMINATOR;
        for (auto lens : {std::pair<uint16_t, uint16_t>{kMax + 1, 0}, {0, kMax + 1}, {kMax, kMax + 1},
                          {0xFFFF, 0xFFFF}, {300, 1}}) {
            pl.src_disc_len = lens.first;
            pl.dst_disc_len = lens.second;
            nicfw_frame_hdr h = hdr(type, v->id);
            h.msg_len = sizeof pl;
            send_frame(h, &pl, sizeof pl);
            count++;
        }
        // A source address longer than any NIC's.
        pl.src_disc_len = pl.dst_disc_len = 0;
        pl.src_addr_len = NICFW_MAX_ADDR + 1;
        {
            nicfw_frame_hdr h = hdr(type, v->id);
            h.msg_len = sizeof pl;
            send_frame(h, &pl, sizeof pl);
            count++;
        }
        pl.src_addr_len = 0;
        pl.src_disc_len = 10;
        pl.dst_disc_len = 10;
        // Payload shorter than the fixed part / than the header claims / than the
        // discriminators need / longer than any payload.
        struct {
            uint32_t claim, carried;
        } cases[] = {{0, 0}, {kFixed - 1, kFixed - 1}, {kFixed + 20, kFixed + 19}, {kFixed + 20, 0},
                     {kFixed + 19, kFixed + 19}, {kFixed, kFixed}, {sizeof pl + 1, sizeof pl + 1},
                     {0xFFFFFFFFu, 64}};
        for (auto c : cases) {
            nicfw_frame_hdr h = hdr(type, v->id);
            h.msg_len = c.claim;
            std::vector<uint8_t> p(c.carried + 1, 0);
            memcpy(p.data(), &pl, std::min<size_t>(c.carried, sizeof pl));
            send_frame(h, p.data(), c.carried);
            count++;
        }
    }
    settle();
    EXPECT_EQ(d0 + count, drops());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(v));
    expect_engine_works();
}

TEST_F(Malformed, ForgedControlFramesDoNotDisturbOthers) {
    // Control frames from a stranger that name the engine's own connected VIs.
    Vi* x = n.vi();
    Vi* y = n.vi();
    ASSERT_TRUE(connect_peers(n.e(), x, n.e(), y, "fx", "fy"));
    for (uint8_t type = NICFW_F_CONN_REQ; type <= NICFW_F_TYPE_MAX; type++) {
        nicfw_conn_payload pl{};
        pl.reliability = NICFW_REL_UNRELIABLE;
        pl.src_disc_len = 2;
        pl.dst_disc_len = 2;
        memcpy(pl.disc, "fyfx", 4);
        for (Vi* t : {x, y}) {
            nicfw_frame_hdr h = hdr(type, t->id, t == x ? y->id : x->id);
            h.msg_len = kFixed + 4;
            h.seq = 1;
            send_frame(h, &pl, kFixed + 4);
        }
    }
    settle();
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(x));
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(y));
    EXPECT_EQ(y->id, x->remote_vi);
    EXPECT_EQ(x->id, y->remote_vi);
}

TEST_F(Malformed, GarbageSlotLengthFromPeer) {
    // A peer that commits a slot with a length over max_frame loses that frame only.
    uint64_t r0 = rx_frames();
    uint8_t* p = raw->tx_reserve(to_eng, 100);
    ASSERT_NE(nullptr, p);
    memset(p, 0, 100);
    raw->tx_commit(to_eng, 0xFFFFFFF0u);
    nicfw_frame_hdr h = hdr(0x55, 0);  // then one ordinary (dropped) frame
    send_frame(h);
    settle();
    EXPECT_EQ(r0 + 1, rx_frames());
    expect_engine_works();
}

// ---------------------------------------------------------------- reliable reception
// The raw side poses as a reliable-reception peer that stops reading, so the engine's
// acknowledgements have to wait.
using RawPeer = Malformed;

// Sends from v until its link to the raw side is full (the raw side is not reading).
static void fill_link_to_raw(Malformed& t, Vi* v) {
    for (int i = 0; i < 80; i++) {
        nicfw_desc* d = t.n.desc(1);
        init_desc(d, 1);
        set_seg(d, 0, t.n.alloc(16), t.n.memh, 16);
        post_send(t.n.e(), v, d, t.n.memh);
    }
    for (int i = 0; i < 10; i++) t.n.e().progress();
    ASSERT_FALSE(v->sq.empty()) << "the link never filled";
}

// Reads what the engine sent to the raw side; returns the imm of the last ACK from vi_id
// (or -1).
static int64_t last_ack(Malformed& t, uint32_t vi_id) {
    int64_t imm = -1;
    RxFrame f[32];
    for (int round = 0; round < 100; round++) {
        t.n.e().progress();
        int k = t.raw->rx_burst(f, 32);
        for (int i = 0; i < k; i++) {
            nicfw_frame_hdr h;
            if (f[i].len < kHdr) continue;
            memcpy(&h, f[i].data, kHdr);
            if (h.type == NICFW_F_ACK && h.src_vi == vi_id && h.dst_vi == kFakeVi) imm = h.imm;
        }
        if (k) t.raw->rx_release();
    }
    return imm;
}

TEST_F(RawPeer, AckCountsPlacedMessages) {
    Vi* v = n.vi(NICFW_REL_RELIABLE_RECEPTION);
    connect_fake(v);
    settle();
    std::vector<Guarded> gs;
    gs.reserve(3);
    for (int i = 0; i < 3; i++) {
        gs.emplace_back(n, 64);
        post_recv(n.e(), v, gs.back().d, n.memh);
    }
    for (int i = 0; i < 3; i++) data(v, 10, 0, 10, NICFW_FF_LAST, 10, 0x21, static_cast<uint32_t>(i));
    int64_t total = 0;
    for (int round = 0; round < 20; round++) {
        int64_t a = last_ack(*this, v->id);
        if (a > 0) total += a;
    }
    EXPECT_EQ(3, total);
}

TEST_F(RawPeer, StaleAcksNotCarriedIntoNewConnection) {
    // Messages placed on an old connection must not be acknowledged on a new one: the
    // new peer would complete sends whose data was never placed.
    Vi* v = n.vi(NICFW_REL_RELIABLE_RECEPTION);
    connect_fake(v);
    settle();
    std::vector<Guarded> gs;
    gs.reserve(4);
    for (int i = 0; i < 3; i++) {
        gs.emplace_back(n, 64);
        post_recv(n.e(), v, gs.back().d, n.memh);
    }
    fill_link_to_raw(*this, v);
    for (int i = 0; i < 3; i++) data(v, 10, 0, 10, NICFW_FF_LAST, 10, 0x21, static_cast<uint32_t>(i));
    for (int i = 0; i < 10; i++) n.e().progress();  // placed; the ACK cannot leave
    for (auto& g : gs) ASSERT_TRUE(is_done(g.d));
    ASSERT_EQ(0, n.e().disconnect(v));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(v));
    settle();  // the raw side reads everything again
    // A new connection (same pretend peer, new connection), one message.
    connect_fake(v);
    settle();
    gs.emplace_back(n, 64);
    post_recv(n.e(), v, gs.back().d, n.memh);
    data(v, 10, 0, 10, NICFW_FF_LAST, 10, 0x22, 0);
    int64_t imm = last_ack(*this, v->id);
    ASSERT_TRUE(is_done(gs.back().d));
    EXPECT_EQ(1, imm) << "ACK on the new connection acknowledges " << imm << " messages, 1 was placed";
}

TEST_F(RawPeer, DestroyViWithAckPending) {
    // A VI that owes an ACK (link full) is disconnected and destroyed; the engine must
    // not touch it afterwards (run under AddressSanitizer to see a use after free).
    Vi* v = n.vi(NICFW_REL_RELIABLE_RECEPTION);
    connect_fake(v);
    settle();
    Guarded g(n, 64);
    post_recv(n.e(), v, g.d, n.memh);
    fill_link_to_raw(*this, v);
    data(v, 10, 0, 10, NICFW_FF_LAST, 10, 0x21, 0);
    for (int i = 0; i < 10; i++) n.e().progress();
    ASSERT_TRUE(is_done(g.d));
    ASSERT_EQ(0, n.e().disconnect(v));
    ASSERT_EQ(0, n.e().destroy_vi(v));
    // Reuse the freed memory with fresh VIs, then keep stepping.
    std::vector<Vi*> fresh;
    for (int i = 0; i < 4; i++) fresh.push_back(n.vi());
    for (int i = 0; i < 10; i++) n.e().progress();
    settle();
    expect_engine_works();
}

TEST_F(RawPeer, NewMessageOverUnfinishedOneOnReliableVi) {
    // Reliable delivery: a message that starts while the previous one is unfinished ends
    // the old one with a partial error, which breaks the connection (one CONN_LOST). The
    // receive queue was not empty, so no RECVQ_EMPTY error may be reported.
    struct Seen {
        std::vector<nicfw_async_code> codes;
    } seen;
    n.e().set_error_handler(&seen, [](void* ctx, const nicfw_async_event* e) {
        static_cast<Seen*>(ctx)->codes.push_back(static_cast<nicfw_async_code>(e->code));
    });
    Vi* v = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    connect_fake(v);
    settle();
    Guarded g1(n, 1000), g2(n, 1000);
    post_recv(n.e(), v, g1.d, n.memh);
    post_recv(n.e(), v, g2.d, n.memh);
    data(v, 500, 0, 100, 0, 100, 0x01);                // message 1, first fragment only
    data(v, 50, 0, 50, NICFW_FF_LAST, 50, 0x02, 1);   // message 2 starts
    settle();
    ASSERT_TRUE(is_done(g1.d));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_PARTIAL_ERROR),
              status_of(g1.d));
    EXPECT_EQ(NICFW_VI_ERROR, state_of(v));
    ASSERT_TRUE(is_done(g2.d));
    EXPECT_TRUE(status_of(g2.d) & NICFW_DS_FLUSHED);
    int conn_lost = 0, recvq_empty = 0;
    for (auto c : seen.codes) {
        conn_lost += c == NICFW_AE_CONN_LOST;
        recvq_empty += c == NICFW_AE_RECVQ_EMPTY;
    }
    EXPECT_EQ(1, conn_lost);
    EXPECT_EQ(0, recvq_empty) << "spurious RECVQ_EMPTY after the connection broke";
}

// ---------------------------------------------------------------- random frames
TEST_F(Malformed, RandomFrames) {
    Vi* v = n.vi();
    const int kBufs = 4;
    std::vector<Guarded> gs;
    gs.reserve(kBufs);
    for (int i = 0; i < kBufs; i++) gs.emplace_back(n, 4096);
    for (auto& g : gs) post_recv(n.e(), v, g.d, n.memh);
    connect_fake(v);
    Vi* x = n.vi();
    Vi* y = n.vi();
    ASSERT_TRUE(connect_peers(n.e(), x, n.e(), y, "rx", "ry"));
    settle();
    const uint64_t d0 = drops(), r0 = rx_frames();

    std::mt19937_64 rng(0x5EED5EEDull);
    auto r = [&](uint64_t n_) { return static_cast<uint32_t>(rng() % n_); };
    const uint32_t max = raw->max_frame();
    std::vector<uint8_t> pool(1 << 16);
    for (auto& b : pool) b = static_cast<uint8_t>(rng());
    const uint32_t ids[] = {v->id, x->id, y->id, 0xFFFFFFFFu, 0, NICFW_VI_MAKE(NICFW_VI_INDEX(v->id), 9)};
    std::vector<uint8_t> f(max);
    int completed = 0;
    const int kFrames = 100000;
    for (int i = 0; i < kFrames; i++) {
        uint32_t len;
        switch (r(4)) {
            case 0: len = r(kHdr + 1); break;
            case 1: len = kHdr + r(128); break;
            case 2: len = kHdr + r(2048); break;
            default: len = r(max + 1); break;
        }
        uint32_t off = r(static_cast<uint32_t>(pool.size() - max));
        memcpy(f.data(), pool.data() + off, len);
        if (len >= kHdr) {
            nicfw_frame_hdr h;
            memcpy(&h, f.data(), kHdr);
            if (r(4)) h.version = NICFW_ABI_VERSION;
            if (r(4)) h.type = static_cast<uint8_t>(1 + r(NICFW_F_TYPE_MAX));
            if (r(2)) h.dst_vi = ids[r(sizeof ids / sizeof ids[0])];
            if (r(2)) h.src_vi = r(4) ? kFakeVi : ids[r(sizeof ids / sizeof ids[0])];
            uint32_t room = len - kHdr;
            if (h.type == NICFW_F_DATA && r(2)) {
                // Plausible fragment fields, sometimes just off.
                h.msg_len = r(3) ? r(6000) : r(NICFW_MAX_TRANSFER + 2);
                h.offset = r(3) ? 0 : r(h.msg_len + 2);
                h.frag_len = r(2) ? std::min(room, h.msg_len - std::min(h.offset, h.msg_len)) : r(room + 2);
                h.flags = static_cast<uint8_t>(r(4));
                // Rising message numbers, as a sender's, with some old ones mixed in. They
                // continue from the VI's own count: a random number far ahead (a loss, to
                // an unreliable VI) must not make every later one stale, or whether any
                // message completes would depend on the seed.
                h.seq = v->rx_seq + static_cast<uint32_t>(i % 48) - (r(8) ? 0 : r(100));  // some stale or repeated
                // Half of them on the pretend connection itself, so that some whole messages
                // land (about 1 in 1,300 frames did, and a seed could give none).
                if (r(2)) {
                    h.dst_vi = v->id;
                    h.src_vi = kFakeVi;
                }
            } else if (h.type >= NICFW_F_CONN_REQ && r(2)) {
                h.msg_len = r(2) ? std::min<uint32_t>(room, sizeof(nicfw_conn_payload)) : r(room + 8);
                if (room >= kFixed) {
                    nicfw_conn_payload pl;
                    memcpy(&pl, f.data() + kHdr, kFixed);
                    pl.src_disc_len = static_cast<uint16_t>(r(3) ? r(8) : r(80));
                    pl.dst_disc_len = static_cast<uint16_t>(r(3) ? r(8) : r(80));
                    pl.reliability = static_cast<uint16_t>(r(2) ? NICFW_REL_UNRELIABLE : r(8));
                    memcpy(f.data() + kHdr, &pl, kFixed);
                }
            }
            // Keep the pretend connection up: no DISCONNECT for it from its own peer.
            if (h.type == NICFW_F_DISCONNECT && h.dst_vi == v->id && h.src_vi == kFakeVi) h.src_vi++;
            memcpy(f.data(), &h, kHdr);
        }
        send_bytes(f.data(), len);
        if (i % 48 == 47) {
            step(2);
            for (auto& g : gs) {
                if (!is_done(g.d)) continue;
                ASSERT_TRUE(g.guards_intact()) << "frame " << i;
                completed++;
                init_desc(g.d, 1);
                set_seg(g.d, 0, g.buf(), n.memh, g.cap);
                post_recv(n.e(), v, g.d, n.memh);
            }
        }
    }
    settle();
    EXPECT_GE(rx_frames() - r0, static_cast<uint64_t>(kFrames)) << "not every frame reached the engine";
    for (auto& g : gs) EXPECT_TRUE(g.guards_intact());
    EXPECT_GT(drops(), d0);
    EXPECT_GT(completed, 0) << "no random frame ever reached the receive path";
    // The engine's own connected pair was never disturbed by the stranger's frames.
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(x));
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(y));
    expect_engine_works();
    // Nothing the stranger sent may break the pretend connection (no DISCONNECT from its
    // peer VI was sent, and errors on an unreliable VI do not break it) ...
    ASSERT_EQ(NICFW_VI_CONNECTED, state_of(v));
    // ... and it still receives a well-formed message.
    {
        settle();
        Guarded g(n, 4096);
        // A message in progress from the random frames may still own the head descriptor;
        // a fresh offset-0 message ends it (partial) and lands in a posted descriptor.
        post_recv(n.e(), v, g.d, n.memh);
        data(v, 64, 0, 64, NICFW_FF_LAST, 64, 0x99, v->rx_seq + 1);  // newer than any random one
        settle();
        bool landed = false;
        for (auto& old : gs)
            if (is_done(old.d) && (status_of(old.d) & NICFW_DS_ERROR_MASK) == 0 && old.d->cs.length == 64 &&
                old.buf()[0] == 0x99)
                landed = true;
        if (is_done(g.d) && g.d->cs.length == 64 && g.buf()[0] == 0x99) landed = true;
        EXPECT_TRUE(landed);
    }
}

}  // namespace
