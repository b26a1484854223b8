// tests/unit/engine_test.cc -- the NIC engine through its C++ API over a real shm
// transport: connections, the data path, completion queues, progress in a thread.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "unit_util.h"

using namespace unit;

namespace {

const uint8_t* u8(const char* s) { return reinterpret_cast<const uint8_t*>(s); }

// A sender/receiver pair of connected VIs on one engine (self link) with buffers.
struct Pair {
    explicit Pair(Nic& n, uint16_t rel = NICFW_REL_UNRELIABLE, Cq* scq = nullptr, Cq* rcq = nullptr)
        : nic(n) {
        static int counter = 0;
        counter++;
        a = n.vi(rel, scq, rcq, &a_user);
        b = n.vi(rel, scq, rcq, &b_user);
        if (!a || !b) return;
        EXPECT_TRUE(connect_peers(n.e(), a, n.e(), b, "pa" + std::to_string(counter),
                                  "pb" + std::to_string(counter)));
    }
    Nic& nic;
    Vi* a = nullptr;
    Vi* b = nullptr;
    int a_user = 0, b_user = 0;
};

// Sends len bytes from a to b with one segment each side; returns the receive descriptor.
struct Msg {
    nicfw_desc* sd;
    nicfw_desc* rd;
    uint8_t* src;
    uint8_t* dst;
};
Msg prepare(Nic& n, uint32_t len, uint32_t rcap, uint32_t seed) {
    Msg m;
    m.sd = n.desc(1);
    m.rd = n.desc(1);
    m.src = n.alloc(len ? len : 1);
    m.dst = n.alloc(rcap ? rcap : 1);
    fill_pattern(m.src, len, seed);
    init_desc(m.sd, 1);
    set_seg(m.sd, 0, m.src, n.memh, len);
    init_desc(m.rd, 1);
    set_seg(m.rd, 0, m.dst, n.memh, rcap);
    return m;
}

// ---------------------------------------------------------------- creation, objects
TEST(Engine, CreateAndStatusPage) {
    Nic n;
    ASSERT_TRUE(n.eng);
    const nicfw_status_page* s = n.e().status();
    ASSERT_NE(nullptr, s);
    EXPECT_EQ(NICFW_STATUS_MAGIC, s->magic);
    EXPECT_EQ(NICFW_ABI_VERSION, s->abi_version);
    EXPECT_STREQ("shm", s->transport);
    EXPECT_STREQ("inline", s->progress);
    EXPECT_EQ(n.e().mtu(), s->mtu);
    EXPECT_GT(n.e().mtu(), 0u);
    EXPECT_LE(n.e().mtu() + sizeof(nicfw_frame_hdr), n.e().transport().max_frame());
    auto a = addr_of(n.e());
    ASSERT_EQ(a.size(), s->addr_len);
    EXPECT_EQ(0, memcmp(a.data(), s->addr, a.size()));
    EXPECT_EQ(Progress::kInline, n.e().progress_mode());
    EXPECT_FALSE(n.e().progress());  // nothing to do
}

TEST(Engine, PtagsAndMemory) {
    Nic n;
    uint32_t p2;
    ASSERT_EQ(0, n.e().create_ptag(&p2));
    EXPECT_NE(n.ptag, p2);
    EXPECT_TRUE(n.e().ptag_valid(p2));
    Buffer b(8192);
    uint32_t h;
    EXPECT_EQ(-EPERM, n.e().register_mem(b.va(), b.len, 9999, false, false, &h));
    ASSERT_EQ(0, n.e().register_mem(b.va(), b.len, p2, true, false, &h));
    uint32_t pt;
    bool w, r;
    ASSERT_EQ(0, n.e().query_mem(b.va(), h, &pt, &w, &r));
    EXPECT_EQ(p2, pt);
    EXPECT_TRUE(w);
    EXPECT_FALSE(r);
    EXPECT_EQ(-EINVAL, n.e().query_mem(b.va() + 1, h, &pt, &w, &r));
    EXPECT_EQ(-EBUSY, n.e().destroy_ptag(p2));  // memory still registered under it
    EXPECT_EQ(-EINVAL, n.e().deregister_mem(b.va() + 1, h));
    EXPECT_TRUE(n.e().desc_in_registered_memory(h, b.p, sizeof(nicfw_desc_ctrl)));
    EXPECT_FALSE(n.e().desc_in_registered_memory(h, b.p + b.len - 8, sizeof(nicfw_desc_ctrl)));
    ASSERT_EQ(0, n.e().deregister_mem(b.va(), h));
    EXPECT_FALSE(n.e().desc_in_registered_memory(h, b.p, sizeof(nicfw_desc_ctrl)));
    EXPECT_EQ(-EINVAL, n.e().deregister_mem(b.va(), h));
    EXPECT_EQ(0, n.e().destroy_ptag(p2));
    EXPECT_FALSE(n.e().ptag_valid(p2));
    EXPECT_EQ(-EINVAL, n.e().destroy_ptag(p2));
}

TEST(Engine, ViLifecycle) {
    Nic n;
    Vi* v = nullptr;
    EXPECT_EQ(-EPERM, n.e().create_vi(attrs(12345), nullptr, nullptr, nullptr, &v));
    v = n.vi();
    ASSERT_NE(nullptr, v);
    EXPECT_EQ(1u, n.e().vi_count());
    EXPECT_EQ(NICFW_VI_IDLE, state_of(v));
    EXPECT_EQ(v, n.e().vi_by_index(NICFW_VI_INDEX(v->id)));
    EXPECT_NE(0u, NICFW_VI_GEN(v->id));
    const uint32_t old_id = v->id;
    const nicfw_vi_status* st =
        reinterpret_cast<const nicfw_vi_status*>(n.e().status() + 1) + NICFW_VI_INDEX(v->id);
    EXPECT_EQ(static_cast<uint32_t>(NICFW_VI_IDLE), st->state);
    EXPECT_EQ(-EBUSY, n.e().destroy_ptag(n.ptag));  // a VI uses it
    EXPECT_EQ(0, n.e().destroy_vi(v));
    EXPECT_EQ(0xFFFFFFFFu, st->state);
    EXPECT_EQ(0u, n.e().vi_count());
    // The slot comes back with a new generation.
    Vi* w = n.vi();
    ASSERT_NE(nullptr, w);
    EXPECT_EQ(NICFW_VI_INDEX(old_id), NICFW_VI_INDEX(w->id));
    EXPECT_NE(old_id, w->id);
    EXPECT_EQ(0, n.e().destroy_vi(w));
}

// ---------------------------------------------------------------- peer-to-peer
TEST(Engine, PeerConnectSelfLinkCrossedDiscriminators) {
    Nic n;
    Vi* a = n.vi();
    Vi* b = n.vi();
    ASSERT_TRUE(connect_peers(n.e(), a, n.e(), b, "left", "right"));
    EXPECT_EQ(NICFW_MAX_TRANSFER, a->remote.max_transfer);
    EXPECT_EQ(NICFW_REL_UNRELIABLE, a->remote.reliability);
    const nicfw_vi_status* st = reinterpret_cast<const nicfw_vi_status*>(n.e().status() + 1);
    EXPECT_EQ(static_cast<uint32_t>(NICFW_VI_CONNECTED), st[NICFW_VI_INDEX(a->id)].state);
    EXPECT_EQ(b->id, st[NICFW_VI_INDEX(a->id)].remote_vi);
    // A connected VI refuses a second connect.
    auto ad = addr_of(n.e());
    EXPECT_EQ(-EBUSY, n.e().peer_request(a, ad.data(), ad.size(), u8("x"), 1, u8("y"), 1, 100));
    EXPECT_EQ(-EBUSY, n.e().connect_request(a, ad.data(), ad.size(), u8("x"), 1));
}

TEST(Engine, PeerConnectTwoEngines) {
    Nic n1, n2;
    Vi* a = n1.vi();
    Vi* b = n2.vi();
    ASSERT_TRUE(connect_peers(n1.e(), a, n2.e(), b, "one", "two"));
    // And a message across.
    Msg m = prepare(n1, 3000, 4096, 1);
    uint8_t* dst = n2.alloc(4096);
    nicfw_desc* rd = n2.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, dst, n2.memh, 4096);
    post_recv(n2.e(), b, rd, n2.memh);
    post_send(n1.e(), a, m.sd, n1.memh);
    ASSERT_TRUE(pump_until({&n1.e(), &n2.e()}, [&] { return is_done(rd) && is_done(m.sd); }));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(m.sd));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(rd));
    EXPECT_EQ(3000u, rd->cs.length);
    EXPECT_TRUE(check_pattern(dst, 3000, 1));
}

TEST(Engine, PeerRequestWrongDiscriminatorTimesOut) {
    Nic n;
    Vi* a = n.vi();
    Vi* b = n.vi();
    auto ad = addr_of(n.e());
    // Not crossed: both want "z".
    ASSERT_EQ(0, n.e().peer_request(a, ad.data(), ad.size(), u8("a"), 1, u8("z"), 1, 30));
    ASSERT_EQ(0, n.e().peer_request(b, ad.data(), ad.size(), u8("b"), 1, u8("z"), 1, 30));
    EXPECT_EQ(NICFW_VI_CONNECT_PENDING, state_of(a));
    ASSERT_TRUE(pump_until(n.e(), [&] { return a->conn_result.load() != -1 && b->conn_result.load() != -1; }));
    EXPECT_EQ(NICFW_R_TIMEOUT, a->conn_result.load());
    EXPECT_EQ(NICFW_R_TIMEOUT, b->conn_result.load());
    EXPECT_EQ(NICFW_VI_IDLE, state_of(a));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(b));
    EXPECT_EQ(0, n.e().destroy_vi(a));
    EXPECT_EQ(0, n.e().destroy_vi(b));
}

TEST(Engine, PeerRequestHugeTimeoutDoesNotExpireAtOnce) {
    // A long (but not infinite) timeout must not wrap around into an expired deadline.
    for (uint64_t timeout : {uint64_t{UINT32_MAX - 1}, uint64_t{1} << 63, uint64_t{1} << 60}) {
        Nic n;
        Vi* a = n.vi();
        Vi* b = n.vi();
        auto ad = addr_of(n.e());
        ASSERT_EQ(0, n.e().peer_request(a, ad.data(), ad.size(), u8("a"), 1, u8("b"), 1, timeout));
        pump_until(n.e(), [] { return false; }, 20);  // the partner is late
        if (state_of(a) != NICFW_VI_CONNECT_PENDING) {
            ADD_FAILURE() << "timeout " << timeout << " ms expired at once: state " << state_of(a)
                          << ", conn_result " << a->conn_result.load();
            continue;  // the partner could not connect to it any more
        }
        EXPECT_EQ(-1, a->conn_result.load());
        ASSERT_EQ(0, n.e().peer_request(b, ad.data(), ad.size(), u8("b"), 1, u8("a"), 1, 5000));
        EXPECT_TRUE(pump_until(n.e(), [&] {
            return state_of(a) == NICFW_VI_CONNECTED && state_of(b) == NICFW_VI_CONNECTED;
        })) << "timeout " << timeout;
    }
}

TEST(Engine, PeerRequestReliabilityMismatch) {
    Nic n;
    Vi* a = n.vi(NICFW_REL_UNRELIABLE);
    Vi* b = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    auto ad = addr_of(n.e());
    ASSERT_EQ(0, n.e().peer_request(a, ad.data(), ad.size(), u8("a"), 1, u8("b"), 1, 2000));
    ASSERT_EQ(0, n.e().peer_request(b, ad.data(), ad.size(), u8("b"), 1, u8("a"), 1, 2000));
    ASSERT_TRUE(pump_until(n.e(), [&] { return a->conn_result.load() != -1 || b->conn_result.load() != -1; }));
    int ra = a->conn_result.load(), rb = b->conn_result.load();
    EXPECT_TRUE(ra == NICFW_R_RELIABILITY || rb == NICFW_R_RELIABILITY) << ra << " " << rb;
    EXPECT_NE(NICFW_VI_CONNECTED, state_of(a));
    EXPECT_NE(NICFW_VI_CONNECTED, state_of(b));
}

TEST(Engine, PeerRequestBadAddress) {
    Nic n;
    Vi* a = n.vi();
    auto ad = addr_of(n.e());
    EXPECT_EQ(-EINVAL, n.e().peer_request(a, ad.data(), ad.size() - 1, u8("a"), 1, u8("b"), 1, 100));
    auto bad = ad;
    bad[20] ^= 1;
    EXPECT_EQ(-EHOSTUNREACH, n.e().peer_request(a, bad.data(), bad.size(), u8("a"), 1, u8("b"), 1, 100));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(a));
}

// ---------------------------------------------------------------- data path
TEST(Engine, SendReceiveStatusAndLength) {
    Nic n;
    Pair p(n);
    for (uint32_t len : {0u, 1u, 63u, 64u, 1000u, 8191u, 8192u, 8193u, 100000u}) {
        Msg m = prepare(n, len, len + 10, len);
        memset(m.dst, 0xEE, len + 10);
        post_recv(n.e(), p.b, m.rd, n.memh);
        EXPECT_FALSE(is_done(m.rd));
        post_send(n.e(), p.a, m.sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), m.rd)) << len;
        ASSERT_TRUE(wait_done(n.e(), m.sd)) << len;
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(m.sd)) << len;
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(m.rd)) << len;
        EXPECT_EQ(len, m.sd->cs.length);
        EXPECT_EQ(len, m.rd->cs.length);
        EXPECT_TRUE(check_pattern(m.dst, len, len)) << len;
        for (uint32_t i = len; i < len + 10; i++) ASSERT_EQ(0xEE, m.dst[i]) << "overrun at " << i;
    }
    const nicfw_status_page* s = n.e().status();
    EXPECT_EQ(9u, s->nic.sends_done);
    EXPECT_EQ(9u, s->nic.recvs_done);
    EXPECT_EQ(0u, s->nic.errors);
    EXPECT_EQ(0u, s->nic.drops);
}

TEST(Engine, ImmediateData) {
    Nic n;
    Pair p(n);
    for (uint32_t len : {0u, 17u, 20000u}) {
        Msg m = prepare(n, len, len + 1, 3);
        init_desc(m.sd, 1, NICFW_DC_OP_SEND | NICFW_DC_IMMEDIATE, 0xC0FFEE00u + len);
        set_seg(m.sd, 0, m.src, n.memh, len);
        post_recv(n.e(), p.b, m.rd, n.memh);
        post_send(n.e(), p.a, m.sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), m.rd));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_IMMEDIATE),
                  status_of(m.rd));
        EXPECT_EQ(0xC0FFEE00u + len, m.rd->cs.imm);
        EXPECT_EQ(len, m.rd->cs.length);
    }
}

TEST(Engine, GatherScatterMultipleSegments) {
    Nic n;
    Pair p(n);
    // Send: 5 segments (one empty) of 3000, 0, 9000, 1, 20000 bytes.
    const uint32_t sl[] = {3000, 0, 9000, 1, 20000};
    const uint32_t total = 32001;
    std::vector<uint8_t> whole(total);
    fill_pattern(whole.data(), total, 77);
    nicfw_desc* sd = n.desc(5);
    init_desc(sd, 5);
    uint32_t off = 0;
    for (uint32_t i = 0; i < 5; i++) {
        uint8_t* s = n.alloc(sl[i] ? sl[i] : 1);
        memcpy(s, whole.data() + off, sl[i]);
        set_seg(sd, i, s, n.memh, sl[i]);
        off += sl[i];
    }
    // Receive: 4 segments of 7, 10000, 0, 30000 bytes.
    const uint32_t rl[] = {7, 10000, 0, 30000};
    uint8_t* r[4];
    nicfw_desc* rd = n.desc(4);
    init_desc(rd, 4);
    for (uint32_t i = 0; i < 4; i++) {
        r[i] = n.alloc(rl[i] ? rl[i] : 1);
        set_seg(rd, i, r[i], n.memh, rl[i]);
    }
    post_recv(n.e(), p.b, rd, n.memh);
    post_send(n.e(), p.a, sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), rd));
    ASSERT_TRUE(wait_done(n.e(), sd));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(sd));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(rd));
    EXPECT_EQ(total, rd->cs.length);
    std::vector<uint8_t> got;
    got.insert(got.end(), r[0], r[0] + 7);
    got.insert(got.end(), r[1], r[1] + 10000);
    got.insert(got.end(), r[3], r[3] + (total - 10007));
    EXPECT_EQ(whole, got);
}

TEST(Engine, ManyMessagesInOrderWithBackPressure) {
    // More data in flight than the lane holds (64 frames): transmit blocks and resumes,
    // messages stay in order.
    Nic n(Progress::kInline, 16 << 20);
    Pair p(n);
    const int kMsgs = 40;
    const uint32_t kLen = 100000;  // 13 frames each
    std::vector<Msg> ms;
    for (int i = 0; i < kMsgs; i++) ms.push_back(prepare(n, kLen, kLen, 1000 + i));
    for (auto& m : ms) post_recv(n.e(), p.b, m.rd, n.memh);
    for (auto& m : ms) {
        m.sd->cs.status = 0;
        nicfw_doorbell db{reinterpret_cast<uint64_t>(m.sd), n.memh,
                          static_cast<uint16_t>(NICFW_VI_INDEX(p.a->id)), NICFW_SENDQ};
        n.e().ring(db);  // all rung before any step
    }
    ASSERT_TRUE(wait_done(n.e(), ms.back().rd, 10000));
    for (int i = 0; i < kMsgs; i++) {
        ASSERT_TRUE(is_done(ms[i].sd)) << i;
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(ms[i].rd)) << i;
        EXPECT_TRUE(check_pattern(ms[i].dst, kLen, 1000 + i)) << i;
    }
}

TEST(Engine, SixteenMegabyteMessage) {
    Nic n(Progress::kInline, 40 << 20);
    Pair p(n);
    Msg m = prepare(n, NICFW_MAX_TRANSFER, NICFW_MAX_TRANSFER, 99);
    post_recv(n.e(), p.b, m.rd, n.memh);
    post_send(n.e(), p.a, m.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m.rd, 20000));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(m.rd));
    EXPECT_EQ(NICFW_MAX_TRANSFER, m.rd->cs.length);
    EXPECT_EQ(0, memcmp(m.src, m.dst, NICFW_MAX_TRANSFER));
}

TEST(Engine, CompletionQueueEntries) {
    Nic n;
    Cq* scq = n.e().create_cq(8, reinterpret_cast<void*>(0x5C));
    Cq* rcq = n.e().create_cq(8, reinterpret_cast<void*>(0x5D));
    ASSERT_NE(nullptr, scq);
    ASSERT_NE(nullptr, rcq);
    Pair p(n, NICFW_REL_UNRELIABLE, scq, rcq);
    EXPECT_EQ(-EBUSY, n.e().destroy_cq(scq));
    for (int i = 0; i < 3; i++) {
        Msg m = prepare(n, 100, 100, i);
        post_recv(n.e(), p.b, m.rd, n.memh);
        post_send(n.e(), p.a, m.sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), m.rd));
    }
    ASSERT_EQ(3u, scq->prod.load());
    ASSERT_EQ(3u, rcq->prod.load());
    for (uint64_t i = scq->cons.load(); i < scq->prod.load(); i++) {
        const nicfw_cqe& e = scq->entries[i % scq->entries.size()];
        EXPECT_EQ(reinterpret_cast<uint64_t>(&p.a_user), e.vi_context);
        EXPECT_EQ(NICFW_VI_INDEX(p.a->id), e.vi_index);
        EXPECT_EQ(0u, e.recv);
    }
    for (uint64_t i = rcq->cons.load(); i < rcq->prod.load(); i++) {
        const nicfw_cqe& e = rcq->entries[i % rcq->entries.size()];
        EXPECT_EQ(reinterpret_cast<uint64_t>(&p.b_user), e.vi_context);
        EXPECT_EQ(NICFW_VI_INDEX(p.b->id), e.vi_index);
        EXPECT_EQ(1u, e.recv);
    }
    scq->cons.store(scq->prod.load());
    rcq->cons.store(rcq->prod.load());

    // Overflow: the descriptor still completes, the entry is lost and counted.
    for (int i = 0; i < 10; i++) {
        Msg m = prepare(n, 10, 10, i);
        post_recv(n.e(), p.b, m.rd, n.memh);
        post_send(n.e(), p.a, m.sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), m.rd));
        ASSERT_TRUE(wait_done(n.e(), m.sd));
    }
    EXPECT_EQ(8u, rcq->prod.load() - rcq->cons.load());
    EXPECT_EQ(2u, rcq->overflows);
    EXPECT_EQ(2u, scq->overflows);

    // Resize keeps the pending entries in order.
    std::vector<nicfw_cqe> before;
    for (uint64_t i = rcq->cons.load(); i < rcq->prod.load(); i++) before.push_back(rcq->entries[i % 8]);
    EXPECT_EQ(-ENOSPC, n.e().resize_cq(rcq, 4));
    ASSERT_EQ(0, n.e().resize_cq(rcq, 13));
    std::vector<nicfw_cqe> after;
    for (uint64_t i = rcq->cons.load(); i < rcq->prod.load(); i++) after.push_back(rcq->entries[i % 13]);
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); i++) EXPECT_EQ(0, memcmp(&before[i], &after[i], sizeof(nicfw_cqe)));
}

TEST(Engine, UnreliableNoReceiveDescriptorDrops) {
    Nic n;
    Pair p(n);
    Msg m = prepare(n, 500, 500, 1);
    uint64_t drops = n.e().status()->nic.drops;
    post_send(n.e(), p.a, m.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m.sd));
    pump_until(n.e(), [] { return false; }, 5);
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(m.sd));
    EXPECT_EQ(drops + 1, n.e().status()->nic.drops);
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(p.a));
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(p.b));
    // The next message with a descriptor arrives normally.
    Msg m2 = prepare(n, 600, 600, 2);
    post_recv(n.e(), p.b, m2.rd, n.memh);
    post_send(n.e(), p.a, m2.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m2.rd));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(m2.rd));
    EXPECT_TRUE(check_pattern(m2.dst, 600, 2));
}

TEST(Engine, ReliableNoReceiveDescriptorBreaksConnection) {
    Nic n;
    Pair p(n, NICFW_REL_RELIABLE_DELIVERY);
    Msg m = prepare(n, 500, 500, 1);
    post_send(n.e(), p.a, m.sd, n.memh);
    ASSERT_TRUE(pump_until(n.e(), [&] {
        return state_of(p.a) == NICFW_VI_ERROR && state_of(p.b) == NICFW_VI_ERROR;
    })) << state_of(p.a) << " " << state_of(p.b);
}

TEST(Engine, ReliableReceptionCompletesSendAfterPlacement) {
    Nic n;
    Pair p(n, NICFW_REL_RELIABLE_RECEPTION);
    std::vector<Msg> ms;
    for (int i = 0; i < 5; i++) ms.push_back(prepare(n, 1000 * (i + 1), 5000, i));
    for (auto& m : ms) post_recv(n.e(), p.b, m.rd, n.memh);
    for (auto& m : ms) post_send(n.e(), p.a, m.sd, n.memh);
    ASSERT_TRUE(pump_until(n.e(), [&] {
        for (auto& m : ms)
            if (!is_done(m.sd)) return false;
        return true;
    }));
    for (int i = 0; i < 5; i++) {
        EXPECT_TRUE(is_done(ms[i].rd));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(ms[i].sd));
        EXPECT_EQ(1000u * (i + 1), ms[i].sd->cs.length);
        EXPECT_TRUE(check_pattern(ms[i].dst, 1000 * (i + 1), i));
    }
    EXPECT_TRUE(p.a->pending.empty());
}

TEST(Engine, SendOnIdleViIsFlushed) {
    Nic n;
    Vi* v = n.vi();
    Msg m = prepare(n, 10, 10, 0);
    post_send(n.e(), v, m.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m.sd));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_FLUSHED), status_of(m.sd));
}

TEST(Engine, DoorbellQueueOverflowInline) {
    // More doorbells than the queue holds, without stepping in between: ring() makes
    // room itself and every descriptor completes.
    Nic n(Progress::kInline, 2 << 20);
    Vi* v = n.vi();
    const uint32_t kN = NICFW_DOORBELL_ENTRIES + 500;
    nicfw_desc* ds = n.alloc<nicfw_desc>(kN * 64);
    for (uint32_t i = 0; i < kN; i++) {
        nicfw_desc* d = reinterpret_cast<nicfw_desc*>(reinterpret_cast<uint8_t*>(ds) + i * 64);
        init_desc(d, 0);
        nicfw_doorbell db{reinterpret_cast<uint64_t>(d), n.memh, static_cast<uint16_t>(NICFW_VI_INDEX(v->id)),
                          NICFW_SENDQ};
        n.e().ring(db);
    }
    n.e().progress();
    for (uint32_t i = 0; i < kN; i++) {
        nicfw_desc* d = reinterpret_cast<nicfw_desc*>(reinterpret_cast<uint8_t*>(ds) + i * 64);
        ASSERT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_FLUSHED), status_of(d)) << i;
    }
}

// ---------------------------------------------------------------- client / server
struct ClientServer : ::testing::Test {
    Nic n;
    Vi* client = nullptr;
    Vi* server = nullptr;
    std::vector<uint8_t> ad;
    void SetUp() override {
        client = n.vi();
        server = n.vi();
        ad = addr_of(n.e());
    }
    bool result(Vi* v) {
        return pump_until(n.e(), [v] { return v->conn_result.load() != -1; });
    }
};

TEST_F(ClientServer, ListenAcceptConnects) {
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_NE(nullptr, l);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3, u8("me"), 2));
    EXPECT_EQ(NICFW_VI_CONNECT_PENDING, state_of(client));
    ASSERT_TRUE(pump_until(n.e(), [&] { return l->matched.load(); }));
    ConnRequest req;
    ASSERT_TRUE(n.e().unlisten(l, &req));
    EXPECT_EQ(client->id, req.client_vi);
    // The server learns the client's own discriminator (its VipConnectWait RemoteAddr).
    EXPECT_EQ(std::vector<uint8_t>(u8("me"), u8("me") + 2), req.disc);
    EXPECT_EQ(ad, req.addr);
    EXPECT_EQ(NICFW_REL_UNRELIABLE, req.reliability);
    EXPECT_EQ(NICFW_MAX_TRANSFER, req.max_transfer);
    ASSERT_EQ(0, n.e().accept(req, server));
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(server));
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_OK, client->conn_result.load());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(client));
    EXPECT_EQ(server->id, client->remote_vi);
    EXPECT_EQ(client->id, server->remote_vi);
    // Data both ways.
    Msg m = prepare(n, 1234, 2000, 5);
    post_recv(n.e(), server, m.rd, n.memh);
    post_send(n.e(), client, m.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m.rd));
    EXPECT_TRUE(check_pattern(m.dst, 1234, 5));
    Msg m2 = prepare(n, 4321, 5000, 6);
    post_recv(n.e(), client, m2.rd, n.memh);
    post_send(n.e(), server, m2.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), m2.rd));
    EXPECT_TRUE(check_pattern(m2.dst, 4321, 6));
}

TEST_F(ClientServer, Reject) {
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3));
    ASSERT_TRUE(pump_until(n.e(), [&] { return l->matched.load(); }));
    ConnRequest req;
    ASSERT_TRUE(n.e().unlisten(l, &req));
    EXPECT_EQ(0, n.e().reject(req));
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_REJECTED, client->conn_result.load());
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(server));
}

TEST_F(ClientServer, NoMatchWhenNobodyListens) {
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("none"), 4));
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_NO_MATCH, client->conn_result.load());
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
}

TEST_F(ClientServer, NoMatchOnOtherDiscriminator) {
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("sv"), 2));
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_NO_MATCH, client->conn_result.load());
    ConnRequest req;
    EXPECT_FALSE(n.e().unlisten(l, &req));
    // After unlisten nobody waits on "svc" either.
    client->conn_result.store(-1);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3));
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_NO_MATCH, client->conn_result.load());
}

TEST_F(ClientServer, ListenerMatchesOnlyOnce) {
    Vi* client2 = n.vi();
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3));
    ASSERT_TRUE(pump_until(n.e(), [&] { return l->matched.load(); }));
    ASSERT_EQ(0, n.e().connect_request(client2, ad.data(), ad.size(), u8("svc"), 3));
    ASSERT_TRUE(result(client2));
    EXPECT_EQ(NICFW_R_NO_MATCH, client2->conn_result.load());
    ConnRequest req;
    ASSERT_TRUE(n.e().unlisten(l, &req));
    EXPECT_EQ(client->id, req.client_vi);
}

TEST_F(ClientServer, AcceptChecks) {
    Vi* rel = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3));
    ASSERT_TRUE(pump_until(n.e(), [&] { return l->matched.load(); }));
    ConnRequest req;
    ASSERT_TRUE(n.e().unlisten(l, &req));
    EXPECT_EQ(-EPROTO, n.e().accept(req, rel));  // reliability differs
    EXPECT_EQ(NICFW_VI_IDLE, state_of(rel));
    ASSERT_EQ(0, n.e().accept(req, server));
    EXPECT_EQ(-EBUSY, n.e().accept(req, server));  // already connected
    ASSERT_TRUE(result(client));
    EXPECT_EQ(NICFW_R_OK, client->conn_result.load());
}

TEST_F(ClientServer, CancelThenLateAcceptDisconnectsServer) {
    Listener* l = n.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("svc"), 3));
    n.e().connect_cancel(client);
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
    EXPECT_EQ(NICFW_R_TIMEOUT, client->conn_result.load());
    ASSERT_TRUE(pump_until(n.e(), [&] { return l->matched.load(); }));
    ConnRequest req;
    ASSERT_TRUE(n.e().unlisten(l, &req));
    ASSERT_EQ(0, n.e().accept(req, server));
    // The client no longer wants it: the server's VI must not stay half-connected.
    ASSERT_TRUE(pump_until(n.e(), [&] { return state_of(server) == NICFW_VI_ERROR; }))
        << state_of(server);
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
    EXPECT_EQ(NICFW_R_TIMEOUT, client->conn_result.load());
    // Cancel on an idle VI does nothing.
    n.e().connect_cancel(client);
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
}

TEST_F(ClientServer, DisconnectWhilePendingCancels) {
    ASSERT_EQ(0, n.e().connect_request(client, ad.data(), ad.size(), u8("zzz"), 3));
    EXPECT_EQ(0, n.e().disconnect(client));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
    EXPECT_NE(-1, client->conn_result.load());
    pump_until(n.e(), [] { return false; }, 5);  // the NOMATCH that follows is ignored
    EXPECT_EQ(NICFW_VI_IDLE, state_of(client));
}

TEST(EngineClientServer, AcrossTwoEngines) {
    // The server NIC only learns the client from its CONN_REQ; it must still answer.
    Nic cn, sn;
    Vi* client = cn.vi();
    Vi* server = sn.vi();
    auto sad = addr_of(sn.e());
    Listener* l = sn.e().listen(u8("svc"), 3);
    ASSERT_EQ(0, cn.e().connect_request(client, sad.data(), sad.size(), u8("svc"), 3));
    ASSERT_TRUE(pump_until({&cn.e(), &sn.e()}, [&] { return l->matched.load(); }));
    ConnRequest req;
    ASSERT_TRUE(sn.e().unlisten(l, &req));
    EXPECT_EQ(addr_of(cn.e()), req.addr);
    EXPECT_EQ(0, sn.e().accept(req, server));
    ASSERT_TRUE(pump_until({&cn.e(), &sn.e()}, [&] { return client->conn_result.load() != -1; }, 2000))
        << "client never got an answer";
    EXPECT_EQ(NICFW_R_OK, client->conn_result.load());
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(client));
    EXPECT_EQ(NICFW_VI_CONNECTED, state_of(server));
}

TEST(EngineClientServer, NoMatchAcrossTwoEngines) {
    Nic cn, sn;
    Vi* client = cn.vi();
    auto sad = addr_of(sn.e());
    ASSERT_EQ(0, cn.e().connect_request(client, sad.data(), sad.size(), u8("nobody"), 6));
    ASSERT_TRUE(pump_until({&cn.e(), &sn.e()}, [&] { return client->conn_result.load() != -1; }, 2000))
        << "client never got an answer";
    EXPECT_EQ(NICFW_R_NO_MATCH, client->conn_result.load());
}

// ---------------------------------------------------------------- disconnect, destroy
TEST(Engine, DisconnectMovesPeerToErrorAndFlushes) {
    Nic n;
    Pair p(n);
    std::vector<Msg> ms;
    for (int i = 0; i < 3; i++) ms.push_back(prepare(n, 10, 10, i));
    for (auto& m : ms) post_recv(n.e(), p.b, m.rd, n.memh);
    Msg ma = prepare(n, 10, 10, 9);
    post_recv(n.e(), p.a, ma.rd, n.memh);
    ASSERT_EQ(0, n.e().disconnect(p.a));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(p.a));
    // The disconnecting side's own receives are flushed at once.
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_FLUSHED),
              status_of(ma.rd));
    ASSERT_TRUE(pump_until(n.e(), [&] { return state_of(p.b) == NICFW_VI_ERROR; }));
    for (auto& m : ms)
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_FLUSHED),
                  status_of(m.rd));
    // Receives posted in the error state are flushed too.
    Msg late = prepare(n, 10, 10, 4);
    post_recv(n.e(), p.b, late.rd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), late.rd));
    EXPECT_TRUE(status_of(late.rd) & NICFW_DS_FLUSHED);
    // Sends on either side are flushed.
    Msg s = prepare(n, 10, 10, 5);
    post_send(n.e(), p.b, s.sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), s.sd));
    EXPECT_TRUE(status_of(s.sd) & NICFW_DS_FLUSHED);
    // Both can be destroyed now; the error VI goes back to idle with disconnect.
    EXPECT_EQ(0, n.e().disconnect(p.b));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(p.b));
    EXPECT_EQ(0, n.e().destroy_vi(p.a));
    EXPECT_EQ(0, n.e().destroy_vi(p.b));
}

TEST(Engine, DisconnectFlushesQueuedSends) {
    Nic n;
    Pair p(n);
    // Queue sends the link cannot take at once, then disconnect before stepping.
    std::vector<Msg> ms;
    for (int i = 0; i < 8; i++) ms.push_back(prepare(n, 200000, 1, i));
    for (auto& m : ms) {
        m.sd->cs.status = 0;
        nicfw_doorbell db{reinterpret_cast<uint64_t>(m.sd), n.memh,
                          static_cast<uint16_t>(NICFW_VI_INDEX(p.a->id)), NICFW_SENDQ};
        n.e().ring(db);
    }
    n.e().progress();  // starts transmitting; the lane fills
    ASSERT_EQ(0, n.e().disconnect(p.a));
    pump_until(n.e(), [] { return false; }, 5);
    int flushed = 0;
    for (auto& m : ms) {
        ASSERT_TRUE(is_done(m.sd));
        if (status_of(m.sd) & NICFW_DS_FLUSHED) flushed++;
    }
    EXPECT_GT(flushed, 0);
    EXPECT_TRUE(p.a->sq.empty());
    EXPECT_EQ(0, n.e().destroy_vi(p.a));
}

TEST(Engine, DestroyViRefusals) {
    Nic n;
    Pair p(n);
    EXPECT_EQ(-EBUSY, n.e().destroy_vi(p.a));  // connected
    EXPECT_EQ(-EBUSY, n.e().destroy_vi(p.b));
    // Pending connect.
    Vi* c = n.vi();
    auto ad = addr_of(n.e());
    ASSERT_EQ(0, n.e().peer_request(c, ad.data(), ad.size(), u8("q"), 1, u8("r"), 1, 10000));
    EXPECT_EQ(-EBUSY, n.e().destroy_vi(c));
    ASSERT_EQ(0, n.e().disconnect(c));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(c));
    // Queued receive on an idle VI.
    Msg m = prepare(n, 10, 10, 0);
    post_recv(n.e(), c, m.rd, n.memh);
    EXPECT_FALSE(is_done(m.rd));
    EXPECT_EQ(-EBUSY, n.e().destroy_vi(c));
    EXPECT_EQ(1u, c->rq.size());
    // Disconnecting an idle VI flushes its queues; then it can go.
    ASSERT_EQ(0, n.e().disconnect(c));
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_FLUSHED),
              status_of(m.rd));
    EXPECT_EQ(0, n.e().destroy_vi(c));
}

TEST(Engine, DestroyViWithQueuedReceiveAfterDisconnectRefused) {
    Nic n;
    Pair p(n);
    ASSERT_EQ(0, n.e().disconnect(p.a));
    EXPECT_EQ(NICFW_VI_IDLE, state_of(p.a));
    Msg m = prepare(n, 10, 10, 0);
    post_recv(n.e(), p.a, m.rd, n.memh);  // idle (not error): the receive is queued
    EXPECT_FALSE(is_done(m.rd));
    EXPECT_EQ(-EBUSY, n.e().destroy_vi(p.a));
}

TEST(Engine, PeerEngineDestroyedFailsConnection) {
    Nic n1;
    auto n2 = std::make_unique<Nic>();
    Vi* a = n1.vi();
    Vi* b = n2->vi();
    ASSERT_TRUE(connect_peers(n1.e(), a, n2->e(), b, "x", "y"));
    Msg m = prepare(n1, 10, 10, 0);
    post_recv(n1.e(), a, m.rd, n1.memh);
    n2.reset();
    ASSERT_TRUE(pump_until(n1.e(), [&] { return state_of(a) == NICFW_VI_ERROR; }));
    ASSERT_TRUE(wait_done(n1.e(), m.rd));
    EXPECT_TRUE(status_of(m.rd) & NICFW_DS_FLUSHED);
}

TEST(Engine, ErrorHandlerToldOfConnectionLoss) {
    Nic n;
    struct Seen {
        int count = 0;
        nicfw_async_code code{};
        nicfw_async_resource res{};
        void* vi = nullptr;
    } seen;
    n.e().set_error_handler(&seen, [](void* ctx, const nicfw_async_event* e) {
        auto* s = static_cast<Seen*>(ctx);
        s->count++;
        s->code = static_cast<nicfw_async_code>(e->code);
        s->res = static_cast<nicfw_async_resource>(e->resource);
        s->vi = e->vi_context;
    });
    Pair p(n);
    ASSERT_EQ(0, n.e().disconnect(p.a));
    ASSERT_TRUE(pump_until(n.e(), [&] { return seen.count > 0; }));
    EXPECT_EQ(NICFW_AE_CONN_LOST, seen.code);
    EXPECT_EQ(NICFW_RES_VI, seen.res);
    EXPECT_EQ(&p.b_user, seen.vi);
}

// ---------------------------------------------------------------- progress in a thread
TEST(EngineThread, SendReceive) {
    Nic n(Progress::kThread);
    ASSERT_TRUE(n.eng);
    EXPECT_STREQ("thread", n.e().status()->progress);
    // (progress() is never called in thread mode: the firmware thread does all the work.)
    Vi* a = n.vi();
    Vi* b = n.vi();
    ASSERT_TRUE(connect_peers(n.e(), a, n.e(), b, "ta", "tb"));
    for (uint32_t len : {0u, 100u, 70000u}) {
        Msg m = prepare(n, len, len, len + 1);
        post_recv(n.e(), b, m.rd, n.memh);
        post_send(n.e(), a, m.sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), m.rd)) << len;
        ASSERT_TRUE(wait_done(n.e(), m.sd)) << len;
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(m.rd));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_SEND), status_of(m.sd));
        EXPECT_EQ(len, m.rd->cs.length);
        EXPECT_TRUE(check_pattern(m.dst, len, len + 1));
    }
}

TEST(EngineThread, ManyMessagesWithControlCallsInterleaved) {
    Nic n(Progress::kThread, 8 << 20);
    Cq* rcq = n.e().create_cq(1024, nullptr);
    Vi* a = n.vi();
    Vi* b = n.vi(NICFW_REL_UNRELIABLE, nullptr, rcq);
    ASSERT_TRUE(connect_peers(n.e(), a, n.e(), b, "ma", "mb"));
    const int kMsgs = 200;
    std::vector<Msg> ms;
    for (int i = 0; i < kMsgs; i++) ms.push_back(prepare(n, 3000, 3000, i));
    for (auto& m : ms) post_recv(n.e(), b, m.rd, n.memh);
    for (int i = 0; i < kMsgs; i++) {
        post_send(n.e(), a, ms[i].sd, n.memh);
        if (i % 20 == 0) {  // control calls contend for the lock with the firmware thread
            uint32_t pt;
            ASSERT_EQ(0, n.e().create_ptag(&pt));
            ASSERT_EQ(0, n.e().destroy_ptag(pt));
        }
    }
    ASSERT_TRUE(wait_done(n.e(), ms.back().rd, 10000));
    for (int i = 0; i < kMsgs; i++) {
        ASSERT_TRUE(is_done(ms[i].rd));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_DONE | NICFW_DS_OP_RECEIVE), status_of(ms[i].rd));
        EXPECT_TRUE(check_pattern(ms[i].dst, 3000, i)) << i;
    }
    // The firmware thread stores a descriptor's DONE before it pushes the CQ entry (a
    // driver that takes the entry must find the descriptor done), so the last entry may
    // still be on its way when the last descriptor reads done.
    EXPECT_TRUE(pump_until(n.e(), [&] { return rcq->prod.load(std::memory_order_acquire) >= static_cast<uint64_t>(kMsgs); }, 5000));
    EXPECT_EQ(static_cast<uint64_t>(kMsgs), rcq->prod.load(std::memory_order_acquire));
}

TEST(EngineThread, DisconnectFlushesPeer) {
    Nic n(Progress::kThread);
    Vi* a = n.vi();
    Vi* b = n.vi();
    ASSERT_TRUE(connect_peers(n.e(), a, n.e(), b, "da", "db"));
    Msg m = prepare(n, 10, 10, 0);
    post_recv(n.e(), b, m.rd, n.memh);
    ASSERT_EQ(0, n.e().disconnect(a));
    ASSERT_TRUE(wait_done(n.e(), m.rd));
    EXPECT_TRUE(status_of(m.rd) & NICFW_DS_FLUSHED);
    EXPECT_EQ(NICFW_VI_ERROR, state_of(b));
}

}  // namespace
