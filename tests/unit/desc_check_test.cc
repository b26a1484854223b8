// tests/unit/desc_check_test.cc -- the requester's and responder's descriptor checks:
// every violation becomes a descriptor status, never a crash or a stray write.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "unit_util.h"

using namespace unit;

namespace {

constexpr uint32_t kSendDone = NICFW_DS_DONE | NICFW_DS_OP_SEND;
constexpr uint32_t kRecvDone = NICFW_DS_DONE | NICFW_DS_OP_RECEIVE;

struct DescCheck : ::testing::Test {
    Nic n{Progress::kInline, 4 << 20};
    Vi* a = nullptr;  // sender
    Vi* b = nullptr;  // receiver
    uint32_t ptag2 = 0, memh2 = 0;
    Buffer other{64 * 1024};  // registered under ptag2
    static inline int counter = 0;

    void SetUp() override { SetUpRel(NICFW_REL_UNRELIABLE); }
    void SetUpRel(uint16_t rel, uint32_t max_a = NICFW_MAX_TRANSFER, uint32_t max_b = NICFW_MAX_TRANSFER) {
        a = n.vi(rel, nullptr, nullptr, nullptr, max_a);
        b = n.vi(rel, nullptr, nullptr, nullptr, max_b);
        counter++;
        ASSERT_TRUE(connect_peers(n.e(), a, n.e(), b, "s" + std::to_string(counter),
                                  "r" + std::to_string(counter)));
        ASSERT_EQ(0, n.e().create_ptag(&ptag2));
        ASSERT_EQ(0, n.e().register_mem(other.va(), other.len, ptag2, false, false, &memh2));
    }

    // Posts a send and returns its final status.
    uint32_t send_status(nicfw_desc* d, uint32_t memh) {
        post_send(n.e(), a, d, memh);
        EXPECT_TRUE(wait_done(n.e(), d));
        return status_of(d);
    }

    // A good message still goes through afterwards (the VI is unharmed).
    void expect_still_works() {
        ASSERT_EQ(NICFW_VI_CONNECTED, state_of(a));
        ASSERT_EQ(NICFW_VI_CONNECTED, state_of(b));
        uint8_t* src = n.alloc(300);
        uint8_t* dst = n.alloc(300);
        fill_pattern(src, 300, 42);
        nicfw_desc* sd = n.desc(1);
        nicfw_desc* rd = n.desc(1);
        init_desc(sd, 1);
        set_seg(sd, 0, src, n.memh, 300);
        init_desc(rd, 1);
        set_seg(rd, 0, dst, n.memh, 300);
        post_recv(n.e(), b, rd, n.memh);
        post_send(n.e(), a, sd, n.memh);
        ASSERT_TRUE(wait_done(n.e(), rd));
        EXPECT_EQ(kRecvDone, status_of(rd));
        EXPECT_EQ(kSendDone, status_of(sd));
        EXPECT_TRUE(check_pattern(dst, 300, 42));
    }

    // Sends with one segment (addr, memh, len) and checks the status; nothing must arrive.
    void expect_send_error(const void* addr, uint32_t memh, uint32_t len, uint32_t want) {
        nicfw_desc* d = n.desc(1);
        init_desc(d, 1);
        set_seg(d, 0, addr, memh, len);
        uint64_t errors = n.e().status()->nic.errors;
        EXPECT_EQ(kSendDone | want, send_status(d, n.memh));
        EXPECT_EQ(0u, d->cs.length);
        EXPECT_EQ(errors + 1, n.e().status()->nic.errors);
    }
};

TEST_F(DescCheck, SegmentOutsideRegion) {
    uint8_t* end = n.buf.p + n.buf.len;
    expect_send_error(end - 10, n.memh, 20, NICFW_DS_PROTECTION_ERROR);      // runs off the end
    expect_send_error(end, n.memh, 1, NICFW_DS_PROTECTION_ERROR);            // just past
    expect_send_error(n.buf.p - 1, n.memh, 2, NICFW_DS_PROTECTION_ERROR);    // starts before
    expect_send_error(n.buf.p, n.memh, 0xFFFFFFFFu, NICFW_DS_PROTECTION_ERROR);
    expect_send_error(reinterpret_cast<void*>(~uintptr_t{0} - 3), n.memh, 8, NICFW_DS_PROTECTION_ERROR);
    expect_send_error(other.p, n.memh, 8, NICFW_DS_PROTECTION_ERROR);        // another region's memory
    expect_still_works();
}

TEST_F(DescCheck, SegmentAtRegionEdgeIsFine) {
    uint8_t* last = n.buf.p + n.buf.len - 64;
    fill_pattern(last, 64, 9);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, last, n.memh, 64);
    uint8_t* dst = n.alloc(64);
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, dst, n.memh, 64);
    post_recv(n.e(), b, rd, n.memh);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
    EXPECT_TRUE(check_pattern(dst, 64, 9));
}

TEST_F(DescCheck, DeregisteredHandle) {
    Buffer x(4096);
    uint32_t h;
    ASSERT_EQ(0, n.e().register_mem(x.va(), x.len, n.ptag, false, false, &h));
    ASSERT_EQ(0, n.e().deregister_mem(x.va(), h));
    expect_send_error(x.p, h, 100, NICFW_DS_PROTECTION_ERROR);
    // Re-registered memory gets a new handle; the old one stays dead.
    uint32_t h2;
    ASSERT_EQ(0, n.e().register_mem(x.va(), x.len, n.ptag, false, false, &h2));
    EXPECT_NE(h, h2);
    expect_send_error(x.p, h, 100, NICFW_DS_PROTECTION_ERROR);
    expect_send_error(x.p, 0, 100, NICFW_DS_PROTECTION_ERROR);  // handle 0
    expect_still_works();
}

TEST_F(DescCheck, RegionOfAnotherPtag) {
    expect_send_error(other.p, memh2, 100, NICFW_DS_PROTECTION_ERROR);
    expect_still_works();
}

TEST_F(DescCheck, SecondSegmentBadFirstGood) {
    uint8_t* good = n.alloc(100);
    nicfw_desc* d = n.desc(3);
    init_desc(d, 3);
    set_seg(d, 0, good, n.memh, 100);
    set_seg(d, 1, good, n.memh, 0);          // empty: not checked
    set_seg(d, 2, other.p, memh2, 10);       // other ptag
    EXPECT_EQ(kSendDone | NICFW_DS_PROTECTION_ERROR, send_status(d, n.memh));
    expect_still_works();
}

TEST_F(DescCheck, TooManySegments) {
    nicfw_desc* d = n.desc(NICFW_MAX_SEGMENTS + 1);
    init_desc(d, NICFW_MAX_SEGMENTS + 1);
    uint8_t* data = n.alloc(NICFW_MAX_SEGMENTS + 1);
    for (uint32_t i = 0; i <= NICFW_MAX_SEGMENTS; i++) set_seg(d, i, data + i, n.memh, 1);
    EXPECT_EQ(kSendDone | NICFW_DS_FORMAT_ERROR, send_status(d, n.memh));
    // 0xFFFF segments: refused before the NIC reads past the descriptor.
    nicfw_desc* d2 = n.desc(1);
    init_desc(d2, 0xFFFF);
    EXPECT_EQ(kSendDone | NICFW_DS_FORMAT_ERROR, send_status(d2, n.memh));
    expect_still_works();
}

TEST_F(DescCheck, MaxSegmentsAccepted) {
    const uint32_t k = NICFW_MAX_SEGMENTS;
    nicfw_desc* sd = n.desc(k);
    init_desc(sd, static_cast<uint16_t>(k));
    uint8_t* data = n.alloc(k * 3);
    fill_pattern(data, k * 3, 5);
    for (uint32_t i = 0; i < k; i++) set_seg(sd, i, data + i * 3, n.memh, 3);
    nicfw_desc* rd = n.desc(k);
    init_desc(rd, static_cast<uint16_t>(k));
    uint8_t* out = n.alloc(k * 3);
    for (uint32_t i = 0; i < k; i++) set_seg(rd, i, out + i * 3, n.memh, 3);
    post_recv(n.e(), b, rd, n.memh);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
    EXPECT_EQ(k * 3, rd->cs.length);
    EXPECT_EQ(0, memcmp(data, out, k * 3));
}

TEST_F(DescCheck, DescriptorSegmentsRunOffRegion) {
    // The control segment is inside the region, its data segment array is not.
    uint8_t* tail = n.buf.p + n.buf.len - sizeof(nicfw_desc_ctrl);
    auto* d = reinterpret_cast<nicfw_desc*>(tail);
    init_desc(d, 4);
    EXPECT_EQ(kSendDone | NICFW_DS_PROTECTION_ERROR, send_status(d, n.memh));
    expect_still_works();
}

TEST_F(DescCheck, ReservedControlBits) {
    // 0x8000 is NICFW_DC_REPLY (steering); the other reserved bits are refused.
    uint8_t* data = n.alloc(16);
    for (uint16_t control : {uint16_t{0x10}, uint16_t{0x0100}, uint16_t{0x4000}, uint16_t{NICFW_DC_OP_RESERVED}}) {
        nicfw_desc* d = n.desc(1);
        init_desc(d, 1, control);
        set_seg(d, 0, data, n.memh, 16);
        EXPECT_EQ(kSendDone | NICFW_DS_FORMAT_ERROR, send_status(d, n.memh)) << control;
    }
    expect_still_works();
}

TEST_F(DescCheck, RdmaWithoutAddressSegment) {
    // RDMA descriptors need DS[0] as the address segment: SegCount 0 is a format error.
    for (uint16_t control : {uint16_t{NICFW_DC_OP_RDMA_WRITE}, uint16_t{NICFW_DC_OP_RDMA_READ}}) {
        nicfw_desc* d = n.desc(1);
        init_desc(d, 0, control);
        EXPECT_EQ(kSendDone | NICFW_DS_FORMAT_ERROR | (control == NICFW_DC_OP_RDMA_READ
                                                            ? NICFW_DS_OP_RDMA_READ
                                                            : NICFW_DS_OP_RDMA_WRITE),
                  send_status(d, n.memh))
            << control;
    }
    expect_still_works();
}

TEST_F(DescCheck, ReceiveWithReservedControlBits) {
    uint8_t* dst = n.alloc(100);
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1, 0x0100);
    set_seg(rd, 0, dst, n.memh, 100);
    post_recv(n.e(), b, rd, n.memh);
    uint8_t* src = n.alloc(10);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, src, n.memh, 10);
    send_status(sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_FORMAT_ERROR, status_of(rd));
}

TEST_F(DescCheck, DescriptorInRegionOfAnotherPtag) {
    auto* d = reinterpret_cast<nicfw_desc*>(other.p + 256);
    uint8_t* data = n.alloc(32);
    init_desc(d, 1);
    set_seg(d, 0, data, n.memh, 32);
    // The driver's probe passes (the region is live and holds it); the NIC refuses it.
    EXPECT_TRUE(n.e().desc_in_registered_memory(memh2, d, sizeof(nicfw_desc_ctrl)));
    EXPECT_EQ(kSendDone | NICFW_DS_PROTECTION_ERROR, send_status(d, memh2));
    // Same for a receive descriptor there: it completes with the error when a message comes.
    auto* rd = reinterpret_cast<nicfw_desc*>(other.p + 1024);
    init_desc(rd, 1);
    set_seg(rd, 0, n.alloc(64), n.memh, 64);
    post_recv(n.e(), b, rd, memh2);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, data, n.memh, 32);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_PROTECTION_ERROR, status_of(rd));
    EXPECT_EQ(0u, rd->cs.length);
}

TEST_F(DescCheck, DescriptorHandleMismatch) {
    // Descriptor in our region, but the doorbell names the other ptag's handle, whose
    // region does not hold it (the driver's probe refuses that; a device never trusts
    // it): the NIC writes nothing there, not even the status.
    nicfw_desc* d = n.desc(1);
    init_desc(d, 1);
    set_seg(d, 0, n.alloc(8), n.memh, 8);
    d->cs.length = 0x5a5a;
    post_send(n.e(), a, d, memh2);  // clears Status, as the driver does
    for (int i = 0; i < 1000; i++) n.e().progress();
    EXPECT_EQ(0u, status_of(d));
    EXPECT_EQ(0x5a5au, d->cs.length);
    expect_still_works();
}

TEST_F(DescCheck, ReceiveSegmentOutsideRegion) {
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, n.buf.p + n.buf.len - 8, n.memh, 64);
    post_recv(n.e(), b, rd, n.memh);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, n.alloc(8), n.memh, 8);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_PROTECTION_ERROR, status_of(rd));
    expect_still_works();
}

TEST_F(DescCheck, ReceiveDescriptorTooSmall) {
    uint8_t* src = n.alloc(200);
    fill_pattern(src, 200, 1);
    // Receive: 60 + 40 bytes, with guard bytes right after each segment.
    uint8_t* r1 = n.alloc(64 + 16);
    uint8_t* r2 = n.alloc(64 + 16);
    memset(r1, 0xAB, 80);
    memset(r2, 0xAB, 80);
    nicfw_desc* rd = n.desc(2);
    init_desc(rd, 2);
    set_seg(rd, 0, r1, n.memh, 60);
    set_seg(rd, 1, r2, n.memh, 40);
    post_recv(n.e(), b, rd, n.memh);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, src, n.memh, 200);
    uint64_t errors = n.e().status()->nic.errors;
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));  // the sender's part went fine
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_LENGTH_ERROR, status_of(rd));
    EXPECT_EQ(0u, rd->cs.length);
    EXPECT_EQ(errors + 1, n.e().status()->nic.errors);
    for (int i = 60; i < 80; i++) EXPECT_EQ(0xAB, r1[i]) << i;
    for (int i = 40; i < 80; i++) EXPECT_EQ(0xAB, r2[i]) << i;
    // The erroneous message consumed exactly that descriptor; the next one is fine.
    expect_still_works();
}

TEST_F(DescCheck, ReceiveTooSmallMultiFrame) {
    // A 50000-byte message (several frames) into a 20000-byte receive: later fragments
    // must not be scattered anywhere.
    uint8_t* src = n.alloc(50000);
    fill_pattern(src, 50000, 3);
    uint8_t* dst = n.alloc(20000 + 4096);
    memset(dst, 0x5A, 20000 + 4096);
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, dst, n.memh, 20000);
    post_recv(n.e(), b, rd, n.memh);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, src, n.memh, 50000);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_LENGTH_ERROR, status_of(rd));
    for (int i = 20000; i < 20000 + 4096; i++) ASSERT_EQ(0x5A, dst[i]) << i;
    expect_still_works();
}

TEST_F(DescCheck, ZeroLengthSegmentsAreSkipped) {
    uint8_t* s1 = n.alloc(100);
    uint8_t* s2 = n.alloc(100);
    fill_pattern(s1, 100, 1);
    fill_pattern(s2, 100, 2);
    nicfw_desc* sd = n.desc(4);
    init_desc(sd, 4);
    set_seg(sd, 0, nullptr, 0, 0);  // empty segments with no memory at all
    set_seg(sd, 1, s1, n.memh, 100);
    set_seg(sd, 2, nullptr, 0, 0);
    set_seg(sd, 3, s2, n.memh, 100);
    uint8_t* r1 = n.alloc(150);
    uint8_t* r2 = n.alloc(50);
    nicfw_desc* rd = n.desc(4);
    init_desc(rd, 4);
    set_seg(rd, 0, nullptr, 0, 0);
    set_seg(rd, 1, r1, n.memh, 150);
    set_seg(rd, 2, nullptr, 0, 0);
    set_seg(rd, 3, r2, n.memh, 50);
    post_recv(n.e(), b, rd, n.memh);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
    EXPECT_EQ(200u, rd->cs.length);
    EXPECT_TRUE(check_pattern(r1, 100, 1));
    std::vector<uint8_t> want(100);
    fill_pattern(want.data(), 100, 2);
    EXPECT_EQ(0, memcmp(r1 + 100, want.data(), 50));
    EXPECT_EQ(0, memcmp(r2, want.data() + 50, 50));
}

TEST_F(DescCheck, ZeroLengthReceiveSegmentsOnly) {
    // Only the receive side has empty segments (scatter path).
    uint8_t* src = n.alloc(200);
    fill_pattern(src, 200, 8);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, src, n.memh, 200);
    uint8_t* r1 = n.alloc(100);
    uint8_t* r2 = n.alloc(100);
    nicfw_desc* rd = n.desc(3);
    init_desc(rd, 3);
    set_seg(rd, 0, r1, n.memh, 100);
    set_seg(rd, 1, nullptr, 0, 0);
    set_seg(rd, 2, r2, n.memh, 100);
    post_recv(n.e(), b, rd, n.memh);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
    EXPECT_EQ(0, memcmp(src, r1, 100));
    EXPECT_EQ(0, memcmp(src + 100, r2, 100));
}

TEST_F(DescCheck, ZeroLengthSendSegmentsOnly) {
    // Only the send side has an empty segment (gather path).
    uint8_t* s1 = n.alloc(100);
    uint8_t* s2 = n.alloc(100);
    fill_pattern(s1, 100, 1);
    fill_pattern(s2, 100, 2);
    nicfw_desc* sd = n.desc(3);
    init_desc(sd, 3);
    set_seg(sd, 0, s1, n.memh, 100);
    set_seg(sd, 1, nullptr, 0, 0);
    set_seg(sd, 2, s2, n.memh, 100);
    uint8_t* dst = n.alloc(200);
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, dst, n.memh, 200);
    post_recv(n.e(), b, rd, n.memh);
    EXPECT_EQ(kSendDone, send_status(sd, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
    EXPECT_EQ(0, memcmp(s1, dst, 100));
    EXPECT_EQ(0, memcmp(s2, dst + 100, 100));
}

TEST_F(DescCheck, ReceiveTooSmallOnReliableViBreaksConnection) {
    // VIA: a message the receive descriptor cannot take breaks a reliable connection.
    Vi* ra = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    Vi* rb = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    ASSERT_TRUE(connect_peers(n.e(), ra, n.e(), rb, "rs-a", "rs-b"));
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, n.alloc(10), n.memh, 10);
    nicfw_desc* rd2 = n.desc(1);
    init_desc(rd2, 1);
    set_seg(rd2, 0, n.alloc(100), n.memh, 100);
    post_recv(n.e(), rb, rd, n.memh);
    post_recv(n.e(), rb, rd2, n.memh);
    nicfw_desc* sd = n.desc(1);
    init_desc(sd, 1);
    set_seg(sd, 0, n.alloc(50), n.memh, 50);
    post_send(n.e(), ra, sd, n.memh);
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_LENGTH_ERROR, status_of(rd));
    ASSERT_TRUE(pump_until(n.e(), [&] { return state_of(ra) == NICFW_VI_ERROR && state_of(rb) == NICFW_VI_ERROR; }))
        << state_of(ra) << " " << state_of(rb);
    ASSERT_TRUE(wait_done(n.e(), rd2));
    EXPECT_EQ(kRecvDone | NICFW_DS_FLUSHED, status_of(rd2));
}

TEST_F(DescCheck, ErrorOnReliableViBreaksConnection) {
    // VIA: a descriptor error on a reliable VI moves it to the error state.
    Vi* ra = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    Vi* rb = n.vi(NICFW_REL_RELIABLE_DELIVERY);
    ASSERT_TRUE(connect_peers(n.e(), ra, n.e(), rb, "rel-a", "rel-b"));
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, n.alloc(64), n.memh, 64);
    post_recv(n.e(), rb, rd, n.memh);
    nicfw_desc* bad = n.desc(1);
    init_desc(bad, 1);
    set_seg(bad, 0, other.p, memh2, 8);
    nicfw_desc* next = n.desc(1);
    init_desc(next, 1);
    set_seg(next, 0, n.alloc(8), n.memh, 8);
    bad->cs.status = next->cs.status = 0;
    for (nicfw_desc* d : {bad, next}) {
        nicfw_doorbell db{reinterpret_cast<uint64_t>(d), n.memh, static_cast<uint16_t>(NICFW_VI_INDEX(ra->id)),
                          NICFW_SENDQ};
        n.e().ring(db);
    }
    ASSERT_TRUE(pump_until(n.e(), [&] { return is_done(bad) && is_done(next); }));
    EXPECT_EQ(kSendDone | NICFW_DS_PROTECTION_ERROR, status_of(bad));
    EXPECT_EQ(kSendDone | NICFW_DS_FLUSHED, status_of(next));
    EXPECT_EQ(NICFW_VI_ERROR, state_of(ra));
    ASSERT_TRUE(pump_until(n.e(), [&] { return state_of(rb) == NICFW_VI_ERROR; }));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone | NICFW_DS_FLUSHED, status_of(rd));
}

struct DescCheckMaxTransfer : DescCheck {
    void SetUp() override { SetUpRel(NICFW_REL_UNRELIABLE, 1024, 4096); }
};

TEST_F(DescCheckMaxTransfer, OverLocalMaxTransfer) {
    uint8_t* data = n.alloc(2048);
    expect_send_error(data, n.memh, 1025, NICFW_DS_LENGTH_ERROR);
    // The total over several segments counts, not each segment.
    nicfw_desc* d = n.desc(2);
    init_desc(d, 2);
    set_seg(d, 0, data, n.memh, 600);
    set_seg(d, 1, data + 600, n.memh, 600);
    EXPECT_EQ(kSendDone | NICFW_DS_LENGTH_ERROR, send_status(d, n.memh));
    // Exactly max_transfer is fine.
    uint8_t* dst = n.alloc(1024);
    nicfw_desc* rd = n.desc(1);
    init_desc(rd, 1);
    set_seg(rd, 0, dst, n.memh, 1024);
    post_recv(n.e(), b, rd, n.memh);
    nicfw_desc* ok = n.desc(1);
    init_desc(ok, 1);
    set_seg(ok, 0, data, n.memh, 1024);
    EXPECT_EQ(kSendDone, send_status(ok, n.memh));
    ASSERT_TRUE(wait_done(n.e(), rd));
    EXPECT_EQ(kRecvDone, status_of(rd));
}

TEST_F(DescCheckMaxTransfer, OverRemoteMaxTransfer) {
    // b (max 4096) sending 2048 to a (max 1024): over the remote's limit.
    uint8_t* data = n.alloc(4096);
    nicfw_desc* d = n.desc(1);
    init_desc(d, 1);
    set_seg(d, 0, data, n.memh, 2048);
    post_send(n.e(), b, d, n.memh);
    ASSERT_TRUE(wait_done(n.e(), d));
    EXPECT_EQ(kSendDone | NICFW_DS_LENGTH_ERROR, status_of(d));
}

}  // namespace
