// tests/unit/unit_util.h -- helpers shared by the nicfw unit tests: registered buffers,
// descriptor building, doorbells exactly as vipl rings them, bounded waits.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nicfw/abi.h"
#include "nicfw/engine.h"

namespace unit {

using namespace softvia::nicfw;

inline uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// Page-aligned, zeroed heap buffer.
struct Buffer {
    explicit Buffer(size_t n) : len(n) {
        p = static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) & ~size_t{4095}));
        std::memset(p, 0, n);
    }
    ~Buffer() { std::free(p); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    uint8_t* p;
    size_t len;
    uint64_t va() const { return reinterpret_cast<uint64_t>(p); }
};

// Data segments live right after the control segment, whatever their count (the
// nicfw_desc type only declares two).
inline nicfw_desc_seg* segs(nicfw_desc* d) {
    return reinterpret_cast<nicfw_desc_seg*>(reinterpret_cast<uint8_t*>(d) +
                                                     sizeof(nicfw_desc_ctrl));
}
inline size_t desc_bytes(uint32_t nsegs) {
    return sizeof(nicfw_desc_ctrl) + nsegs * sizeof(nicfw_desc_seg);
}

inline void set_seg(nicfw_desc* d, uint32_t i, const void* addr, uint32_t memh, uint32_t len) {
    nicfw_desc_seg* s = segs(d) + i;
    std::memset(s, 0, sizeof *s);
    s->addr = reinterpret_cast<uint64_t>(addr);
    s->memh = memh;
    s->len = len;
}

// Control segment for a send/receive with nsegs segments.
inline void init_desc(nicfw_desc* d, uint16_t nsegs, uint16_t control = NICFW_DC_OP_SEND,
                      uint32_t imm = 0) {
    std::memset(&d->cs, 0, sizeof d->cs);
    d->cs.seg_count = nsegs;
    d->cs.control = control;
    d->cs.imm = imm;
}

inline uint32_t status_of(const nicfw_desc* d) {
    return __atomic_load_n(&d->cs.status, __ATOMIC_ACQUIRE);
}
inline bool is_done(const nicfw_desc* d) { return status_of(d) & NICFW_DS_DONE; }

// What vipl's post() does after its own checks: status cleared, doorbell rung, and
// (inline) for a send the post's step, so it leaves now (or joins a txbatch batch).
inline void ring(Engine& e, Vi* vi, nicfw_desc* d, uint32_t memh, uint16_t queue) {
    d->cs.status = 0;
    nicfw_doorbell db{reinterpret_cast<uint64_t>(d), memh,
                      static_cast<uint16_t>(NICFW_VI_INDEX(vi->id)), queue};
    e.ring(db);
    if (e.progress_mode() == Progress::kInline && queue == NICFW_SENDQ) e.post_progress();
    else if (e.progress_mode() == Progress::kInline) e.progress();
}
inline void post_send(Engine& e, Vi* vi, nicfw_desc* d, uint32_t memh) {
    ring(e, vi, d, memh, NICFW_SENDQ);
}
inline void post_recv(Engine& e, Vi* vi, nicfw_desc* d, uint32_t memh) {
    ring(e, vi, d, memh, NICFW_RECVQ);
}

// Steps every inline engine (or, in thread mode, just waits) until pred holds or the
// timeout passes. Returns pred().
inline bool pump_until(const std::vector<Engine*>& engines, const std::function<bool()>& pred,
                       uint64_t timeout_ms = 5000) {
    uint64_t end = now_ms() + timeout_ms;
    for (;;) {
        if (pred()) return true;
        if (now_ms() > end) return pred();
        // Inline engines are stepped here; thread-mode engines are never stepped by the
        // application: it only watches the status words and sleeps in between, so the
        // firmware thread is the one busy thread.
        bool any_inline = false, stepped = false;
        for (Engine* e : engines) {
            if (e->progress_mode() != Progress::kInline) continue;
            any_inline = true;
            stepped |= e->progress();
        }
        if (!any_inline)
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        else if (!stepped)
            sched_yield();
    }
}
inline bool pump_until(Engine& e, const std::function<bool()>& pred, uint64_t timeout_ms = 5000) {
    return pump_until(std::vector<Engine*>{&e}, pred, timeout_ms);
}
inline bool wait_done(Engine& e, const nicfw_desc* d, uint64_t timeout_ms = 5000) {
    return pump_until(e, [d] { return is_done(d); }, timeout_ms);
}

inline uint32_t state_of(const Vi* vi) { return vi->state.load(std::memory_order_acquire); }

// Default attributes for a VI under ptag.
inline ViAttrs attrs(uint32_t ptag, uint16_t rel = NICFW_REL_UNRELIABLE,
                     uint32_t max_transfer = NICFW_MAX_TRANSFER) {
    ViAttrs a;
    a.reliability = rel;
    a.ptag = ptag;
    a.max_transfer = max_transfer;
    return a;
}

inline std::vector<uint8_t> addr_of(Engine& e) {
    size_t n;
    const uint8_t* a = e.transport().local_addr(&n);
    return std::vector<uint8_t>(a, a + n);
}

// Peer-to-peer connects a (on ea) and b (on eb) with crossed discriminators; ea may be eb.
inline ::testing::AssertionResult connect_peers(Engine& ea, Vi* a, Engine& eb, Vi* b,
                                                const std::string& da, const std::string& db) {
    auto addr_a = addr_of(ea), addr_b = addr_of(eb);
    const auto* pa = reinterpret_cast<const uint8_t*>(da.data());
    const auto* pb = reinterpret_cast<const uint8_t*>(db.data());
    int rc = ea.peer_request(a, addr_b.data(), addr_b.size(), pa, da.size(), pb, db.size(), 5000);
    if (rc != 0) return ::testing::AssertionFailure() << "peer_request a: " << rc;
    rc = eb.peer_request(b, addr_a.data(), addr_a.size(), pb, db.size(), pa, da.size(), 5000);
    if (rc != 0) return ::testing::AssertionFailure() << "peer_request b: " << rc;
    std::vector<Engine*> engines{&ea};
    if (&ea != &eb) engines.push_back(&eb);
    bool ok = pump_until(engines, [&] {
        return state_of(a) == NICFW_VI_CONNECTED && state_of(b) == NICFW_VI_CONNECTED;
    });
    if (!ok)
        return ::testing::AssertionFailure() << "states " << state_of(a) << "/" << state_of(b);
    if (a->conn_result.load() != NICFW_R_OK || b->conn_result.load() != NICFW_R_OK)
        return ::testing::AssertionFailure() << "conn_result " << a->conn_result.load() << "/"
                                             << b->conn_result.load();
    if (a->remote_vi != b->id || b->remote_vi != a->id)
        return ::testing::AssertionFailure() << "remote VI ids do not cross";
    return ::testing::AssertionSuccess();
}

// One NIC: engine, a ptag, one registered buffer.
struct Nic {
    explicit Nic(Progress p = Progress::kInline, size_t bytes = 4 << 20) : Nic(config(p), bytes) {}
    explicit Nic(const EngineConfig& cfg, size_t bytes = 4 << 20) : buf(bytes) {
        int rc = Engine::create(cfg, &eng);
        if (rc != 0 || !eng) {
            ADD_FAILURE() << "Engine::create: " << rc;
            return;
        }
        EXPECT_EQ(0, eng->create_ptag(&ptag));
        EXPECT_EQ(0, eng->register_mem(buf.va(), buf.len, ptag, false, false, &memh));
    }
    static EngineConfig config(Progress p) {
        EngineConfig cfg;
        cfg.progress = p;
        return cfg;
    }
    Engine& e() { return *eng; }
    Vi* vi(uint16_t rel = NICFW_REL_UNRELIABLE, Cq* scq = nullptr, Cq* rcq = nullptr,
           void* user = nullptr, uint32_t max_transfer = NICFW_MAX_TRANSFER) {
        Vi* v = nullptr;
        EXPECT_EQ(0, eng->create_vi(attrs(ptag, rel, max_transfer), scq, rcq, user, &v));
        return v;
    }
    // Carves 64-byte aligned chunks out of the registered buffer.
    template <class T = uint8_t>
    T* alloc(size_t n) {
        size_t off = (used + 63) & ~size_t{63};
        if (off + n > buf.len) {
            ADD_FAILURE() << "test buffer exhausted";
            return nullptr;
        }
        used = off + n;
        return reinterpret_cast<T*>(buf.p + off);
    }
    nicfw_desc* desc(uint32_t nsegs = 2) { return alloc<nicfw_desc>(desc_bytes(nsegs)); }
    // A descriptor of one segment: len bytes of a fresh 64-byte-aligned buffer of cap.
    nicfw_desc* one_seg(uint32_t len, uint32_t cap = 64) {
        nicfw_desc* d = desc(1);
        init_desc(d, 1);
        set_seg(d, 0, alloc(cap), memh, len);
        return d;
    }

    std::unique_ptr<Engine> eng;
    uint32_t ptag = 0;
    Buffer buf;
    uint32_t memh = 0;
    size_t used = 0;
};

inline void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = static_cast<uint8_t>(x >> 24);
    }
}
inline bool check_pattern(const uint8_t* p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        if (p[i] != static_cast<uint8_t>(x >> 24)) return false;
    }
    return true;
}

}  // namespace unit
