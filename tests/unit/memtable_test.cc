// tests/unit/memtable_test.cc -- MemTable (the NIC's registered memory table) and
// WorkQueue (the device's descriptor FIFO).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <set>

#include "nicfw/abi.h"
#include "nicfw/engine.h"
#include "nicfw/memtable.h"

using namespace softvia::nicfw;

namespace {

constexpr uint32_t kPtag = 7;

std::unique_ptr<MemTable> table() { return std::make_unique<MemTable>(); }

// ---------------------------------------------------------------- MemTable
TEST(MemTable, AddFindRemove) {
    auto t = table();
    uint32_t h = 0;
    ASSERT_EQ(0, t->add(0x10000, 4096, kPtag, true, false, &h));
    EXPECT_NE(0u, h);
    EXPECT_NE(0u, NICFW_MEMH_INDEX(h));
    EXPECT_NE(0u, NICFW_MEMH_GEN(h));
    EXPECT_EQ(1u, t->count());
    Region* r = t->find(h);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(0x10000u, r->base.load());
    EXPECT_EQ(4096u, r->len.load());
    EXPECT_EQ(kPtag, r->ptag);
    EXPECT_TRUE(r->rdma_write);
    EXPECT_FALSE(r->rdma_read);
    EXPECT_EQ(h, r->key.load());
    EXPECT_TRUE(t->ptag_in_use(kPtag));
    EXPECT_FALSE(t->ptag_in_use(kPtag + 1));

    t->remove(h);
    EXPECT_EQ(nullptr, t->find(h));
    EXPECT_EQ(0u, t->count());
    EXPECT_FALSE(t->ptag_in_use(kPtag));
    // Removing again (or an unknown handle) is harmless.
    t->remove(h);
    t->remove(0);
    t->remove(0xFFFFFFFFu);
    EXPECT_EQ(0u, t->count());
}

TEST(MemTable, DistinctHandlesForLiveRegions) {
    auto t = table();
    std::set<uint32_t> handles, indexes;
    for (int i = 0; i < 100; i++) {
        uint32_t h = 0;
        ASSERT_EQ(0, t->add(0x100000 + i * 0x1000, 0x1000, kPtag, false, false, &h));
        EXPECT_TRUE(handles.insert(h).second);
        EXPECT_TRUE(indexes.insert(NICFW_MEMH_INDEX(h)).second);
    }
    EXPECT_EQ(100u, t->count());
    for (uint32_t h : handles) {
        Region* r = t->find(h);
        ASSERT_NE(nullptr, r);
        EXPECT_EQ(h, r->key.load());
    }
}

TEST(MemTable, StaleHandleAfterRemoveAndReuseIsRefused) {
    auto t = table();
    uint32_t h1 = 0, h2 = 0;
    ASSERT_EQ(0, t->add(0x1000, 0x1000, kPtag, false, false, &h1));
    t->remove(h1);
    ASSERT_EQ(0, t->add(0x8000, 0x1000, kPtag, false, false, &h2));
    // The slot is reused with a new generation.
    EXPECT_EQ(NICFW_MEMH_INDEX(h1), NICFW_MEMH_INDEX(h2));
    EXPECT_NE(NICFW_MEMH_GEN(h1), NICFW_MEMH_GEN(h2));
    EXPECT_NE(0u, NICFW_MEMH_GEN(h2));

    EXPECT_EQ(nullptr, t->find(h1));
    EXPECT_NE(nullptr, t->find(h2));
    // The stale handle names nothing, even for an address inside the new region.
    EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_PROTECTION_ERROR), t->check(h1, 0x8000, 16, kPtag));
    EXPECT_EQ(0u, t->check(h2, 0x8000, 16, kPtag));
    EXPECT_FALSE(t->probe(h1, 0x8000, 16));
    EXPECT_TRUE(t->probe(h2, 0x8000, 16));
    // Removing through the stale handle must not remove the new registration.
    t->remove(h1);
    EXPECT_NE(nullptr, t->find(h2));
    EXPECT_EQ(1u, t->count());
}

TEST(MemTable, GenerationsNeverZeroAcrossManyReuses) {
    auto t = table();
    uint32_t first = 0, prev = 0;
    // More cycles than there are generations: the generation wraps but skips 0.
    for (uint32_t i = 0; i < 70000; i++) {
        uint32_t h = 0;
        ASSERT_EQ(0, t->add(0x1000, 0x1000, kPtag, false, false, &h));
        if (i == 0) first = h;
        ASSERT_EQ(NICFW_MEMH_INDEX(first), NICFW_MEMH_INDEX(h));
        ASSERT_NE(0u, NICFW_MEMH_GEN(h)) << "cycle " << i;
        ASSERT_NE(prev, h) << "cycle " << i;
        ASSERT_EQ(nullptr, t->find(prev));
        prev = h;
        t->remove(h);
    }
}

TEST(MemTable, IndexZeroNeverValid) {
    auto t = table();
    uint32_t h = 0;
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(0, t->add(0, 0x1000, kPtag, false, false, &h));
        EXPECT_NE(0u, NICFW_MEMH_INDEX(h));
    }
    for (uint32_t gen = 0; gen < 4; gen++) {
        uint32_t h0 = NICFW_MEMH_MAKE(0, gen);
        EXPECT_EQ(nullptr, t->find(h0));
        EXPECT_EQ(static_cast<uint32_t>(NICFW_DS_PROTECTION_ERROR), t->check(h0, 0, 1, kPtag));
        EXPECT_FALSE(t->probe(h0, 0, 1));
    }
    EXPECT_EQ(nullptr, t->find(0));
    // Handles never issued (index beyond what was handed out, or bad generation).
    EXPECT_EQ(nullptr, t->find(NICFW_MEMH_MAKE(11, 1)));
    EXPECT_EQ(nullptr, t->find(NICFW_MEMH_MAKE(0xFFFF, 1)));
    EXPECT_FALSE(t->probe(NICFW_MEMH_MAKE(0xFFFF, 1), 0, 1));
    EXPECT_EQ(nullptr, t->find(NICFW_MEMH_MAKE(1, 2)));
}

TEST(MemTable, CheckRanges) {
    auto t = table();
    const uint64_t base = 0x40000, len = 0x1000;
    uint32_t h = 0;
    ASSERT_EQ(0, t->add(base, len, kPtag, false, false, &h));
    const uint32_t kProt = NICFW_DS_PROTECTION_ERROR;
    // Inside.
    EXPECT_EQ(0u, t->check(h, base + 100, 200, kPtag));
    EXPECT_EQ(0u, t->check(h, base, 1, kPtag));
    // Edges: the whole region, the last byte, empty ranges at both ends.
    EXPECT_EQ(0u, t->check(h, base, len, kPtag));
    EXPECT_EQ(0u, t->check(h, base + len - 1, 1, kPtag));
    EXPECT_EQ(0u, t->check(h, base, 0, kPtag));
    EXPECT_EQ(0u, t->check(h, base + len, 0, kPtag));
    // One byte over on either side.
    EXPECT_EQ(kProt, t->check(h, base, len + 1, kPtag));
    EXPECT_EQ(kProt, t->check(h, base + 1, len, kPtag));
    EXPECT_EQ(kProt, t->check(h, base + len, 1, kPtag));
    EXPECT_EQ(kProt, t->check(h, base - 1, 1, kPtag));
    EXPECT_EQ(kProt, t->check(h, base - 1, 2, kPtag));
    EXPECT_EQ(kProt, t->check(h, base + len + 1, 0, kPtag));
    // addr + len overflowing 64 bits must not wrap into the region.
    EXPECT_EQ(kProt, t->check(h, base + 16, UINT64_MAX, kPtag));
    EXPECT_EQ(kProt, t->check(h, base + 16, UINT64_MAX - 15, kPtag));
    EXPECT_EQ(kProt, t->check(h, UINT64_MAX, 2, kPtag));
    EXPECT_EQ(kProt, t->check(h, UINT64_MAX - 0x10, 0x20, kPtag));
    EXPECT_EQ(kProt, t->check(h, 0, base + 16, kPtag));
    // Wrong protection tag.
    EXPECT_EQ(kProt, t->check(h, base, 16, kPtag + 1));
    EXPECT_EQ(kProt, t->check(h, base, 16, 0));
    // Stale / foreign handles.
    EXPECT_EQ(kProt, t->check(h + 1, base, 16, kPtag));
    EXPECT_EQ(kProt, t->check(NICFW_MEMH_MAKE(NICFW_MEMH_INDEX(h), NICFW_MEMH_GEN(h) + 1), base, 16, kPtag));
}

TEST(MemTable, RegionAtTopOfAddressSpace) {
    auto t = table();
    const uint64_t base = UINT64_MAX - 0xFFF, len = 0x1000;  // ends exactly at 2^64
    uint32_t h = 0;
    ASSERT_EQ(0, t->add(base, len, kPtag, false, false, &h));
    EXPECT_EQ(0u, t->check(h, base, len, kPtag));
    EXPECT_EQ(0u, t->check(h, UINT64_MAX, 1, kPtag));
    EXPECT_NE(0u, t->check(h, UINT64_MAX, 2, kPtag));
    EXPECT_NE(0u, t->check(h, base - 1, 2, kPtag));
    EXPECT_NE(0u, t->check(h, 0, 1, kPtag));  // a wrapped range
    EXPECT_TRUE(t->probe(h, UINT64_MAX, 1));
    EXPECT_FALSE(t->probe(h, UINT64_MAX, 2));
}

TEST(MemTable, Probe) {
    auto t = table();
    const uint64_t base = 0x90000, len = 256;
    uint32_t h = 0;
    ASSERT_EQ(0, t->add(base, len, kPtag, false, false, &h));
    EXPECT_TRUE(t->probe(h, base, 32));
    EXPECT_TRUE(t->probe(h, base + len - 32, 32));
    EXPECT_FALSE(t->probe(h, base + len - 31, 32));
    EXPECT_FALSE(t->probe(h, base - 1, 32));
    EXPECT_FALSE(t->probe(h, base + 8, UINT64_MAX));
    EXPECT_FALSE(t->probe(0, base, 32));
    EXPECT_FALSE(t->probe(h ^ 0x10000u, base, 32));  // other generation
    // probe() does not look at the ptag (the driver has none to offer); check() does.
    EXPECT_TRUE(t->probe(h, base, 32));
    t->remove(h);
    EXPECT_FALSE(t->probe(h, base, 32));
}

TEST(MemTable, FullTableIsENOSPCAndRecovers) {
    auto t = table();
    std::vector<uint32_t> hs;
    hs.reserve(NICFW_MAX_REGIONS);
    for (uint32_t i = 0; i < NICFW_MAX_REGIONS; i++) {
        uint32_t h = 0;
        ASSERT_EQ(0, t->add(0x1000 + uint64_t{i} * 16, 16, kPtag, false, false, &h)) << i;
        ASSERT_NE(0u, NICFW_MEMH_INDEX(h));
        hs.push_back(h);
    }
    EXPECT_EQ(NICFW_MAX_REGIONS, t->count());
    uint32_t extra = 0xABCD;
    EXPECT_EQ(-ENOSPC, t->add(0x1, 1, kPtag, false, false, &extra));
    EXPECT_EQ(-ENOSPC, t->add(0x1, 1, kPtag, false, false, &extra));
    EXPECT_EQ(NICFW_MAX_REGIONS, t->count());
    // Every handle still valid, including the one at the highest index.
    for (uint32_t i = 0; i < NICFW_MAX_REGIONS; i += 997)
        EXPECT_EQ(0u, t->check(hs[i], 0x1000 + uint64_t{i} * 16, 16, kPtag));
    EXPECT_EQ(0u, t->check(hs.back(), 0x1000 + uint64_t{NICFW_MAX_REGIONS - 1} * 16, 16, kPtag));
    EXPECT_TRUE(t->probe(hs.back(), 0x1000 + uint64_t{NICFW_MAX_REGIONS - 1} * 16, 16));
    // Freeing one makes room for exactly one.
    t->remove(hs[12345]);
    uint32_t h = 0;
    ASSERT_EQ(0, t->add(0x77000, 16, kPtag, false, false, &h));
    EXPECT_EQ(NICFW_MEMH_INDEX(hs[12345]), NICFW_MEMH_INDEX(h));
    EXPECT_EQ(nullptr, t->find(hs[12345]));
    EXPECT_EQ(-ENOSPC, t->add(0x1, 1, kPtag, false, false, &extra));
}

// ---------------------------------------------------------------- WorkQueue
nicfw_desc* fake_desc(uintptr_t i) { return reinterpret_cast<nicfw_desc*>(i * 64 + 64); }

TEST(WorkQueue, FifoOrder) {
    WorkQueue q(16);
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(0u, q.size());
    for (uint32_t i = 0; i < 10; i++) ASSERT_TRUE(q.push({fake_desc(i), i + 100}));
    EXPECT_EQ(10u, q.size());
    EXPECT_FALSE(q.empty());
    for (uint32_t i = 0; i < 10; i++) {
        ASSERT_FALSE(q.empty());
        EXPECT_EQ(fake_desc(i), q.front().desc);
        EXPECT_EQ(i + 100, q.front().memh);
        q.pop();
    }
    EXPECT_TRUE(q.empty());
}

TEST(WorkQueue, CapacityIsTheLimit) {
    // The queue starts small and grows on demand, but never beyond its limit.
    for (uint32_t cap : {64u, 128u, 1024u, NICFW_MAX_DESC_PER_QUEUE}) {
        WorkQueue q(cap);
        for (uint32_t i = 0; i < cap; i++) ASSERT_TRUE(q.push({fake_desc(i), i})) << cap << " " << i;
        EXPECT_EQ(cap, q.size());
        EXPECT_FALSE(q.push({fake_desc(999999), 999999})) << cap;
        EXPECT_EQ(cap, q.size());
        EXPECT_EQ(fake_desc(0), q.front().desc);  // the refused push changed nothing
        q.pop();
        EXPECT_TRUE(q.push({fake_desc(cap), cap}));
        EXPECT_FALSE(q.push({fake_desc(999999), 999999}));
        for (uint32_t i = 1; i <= cap; i++) {
            ASSERT_EQ(fake_desc(i), q.front().desc) << cap << " " << i;
            ASSERT_EQ(i, q.front().memh);
            q.pop();
        }
        EXPECT_TRUE(q.empty());
    }
}

TEST(WorkQueue, LimitBelowInitialSizeIsHonoured) {
    // A limit smaller than the initial ring must still bound the queue.
    for (uint32_t cap : {1u, 2u, 8u, 32u}) {
        WorkQueue q(cap);
        uint32_t pushed = 0;
        while (pushed < 1000 && q.push({fake_desc(pushed), pushed})) pushed++;
        EXPECT_EQ(cap, pushed) << "WorkQueue(" << cap << ") took " << pushed << " items";
    }
}

TEST(WorkQueue, GrowsWhileWrapped) {
    // Growth happens while head is in the middle of the ring: order must survive.
    WorkQueue q(NICFW_MAX_DESC_PER_QUEUE);
    uint32_t next = 0, expect = 0;
    for (int i = 0; i < 50; i++, next++) ASSERT_TRUE(q.push({fake_desc(next), next}));
    for (int i = 0; i < 40; i++) {
        ASSERT_EQ(expect, q.front().memh);
        q.pop();
        expect++;
    }
    // Now 10 queued with head at 40; push past 64, 128, ... up to the limit.
    for (; q.size() < NICFW_MAX_DESC_PER_QUEUE; next++) ASSERT_TRUE(q.push({fake_desc(next), next}));
    EXPECT_FALSE(q.push({nullptr, 0}));
    while (!q.empty()) {
        ASSERT_EQ(expect, q.front().memh);
        ASSERT_EQ(fake_desc(expect), q.front().desc);
        q.pop();
        expect++;
    }
    EXPECT_EQ(next, expect);
}

TEST(WorkQueue, WraparoundManyCycles) {
    for (uint32_t cap : {64u, 256u}) {
        WorkQueue q(cap);
        std::deque<uint32_t> model;
        std::mt19937 rng(12345 + cap);
        uint32_t next = 0;
        for (int step = 0; step < 1000000; step++) {
            // Biased towards pushing in phases, so the queue runs full and empty.
            bool push = ((step >> 12) & 1) ? rng() % 4 != 0 : rng() % 4 == 0;
            if (push) {
                bool ok = q.push({fake_desc(next), next});
                ASSERT_EQ(model.size() < cap, ok) << step;
                if (ok) model.push_back(next);
                next++;
            } else if (!model.empty()) {
                ASSERT_FALSE(q.empty());
                ASSERT_EQ(model.front(), q.front().memh) << step;
                ASSERT_EQ(fake_desc(model.front()), q.front().desc);
                q.pop();
                model.pop_front();
            } else {
                ASSERT_TRUE(q.empty());
            }
            ASSERT_EQ(model.size(), q.size());
        }
    }
}

TEST(WorkQueue, FullDrainCycles) {
    WorkQueue q(64);
    for (uint32_t cycle = 0; cycle < 20000; cycle++) {
        for (uint32_t i = 0; i < 64; i++) ASSERT_TRUE(q.push({nullptr, cycle * 64 + i}));
        ASSERT_FALSE(q.push({nullptr, 0}));
        for (uint32_t i = 0; i < 64; i++) {
            ASSERT_EQ(cycle * 64 + i, q.front().memh);
            q.pop();
        }
        ASSERT_TRUE(q.empty());
    }
}

}  // namespace
