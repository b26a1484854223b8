// tests/fuzz/frame_fuzzer.cc -- libFuzzer target for the firmware's receive path
// (nicfw/src/responder.cc, connection.cc): frame checks, dispatch, scatter, RDMA write
// and read targets, ACK/NAK/read-response handling, the connection manager.
//
// One engine (progress inline) lives for the whole run. Its VIs are connected
// peer-to-peer to other VIs of the same engine, so transport peer 0 is the engine itself
// (the self link) and a frame handed to inject_frame(0, ...) looks like it came from the
// target VI's real partner. The input format is in fuzz_format.h.
//
// Invariants (abort on violation, so libFuzzer reports the input):
//  - Registered memory is written only where the NIC may write: the data segments of
//    posted receive descriptors, the buffers of RDMA reads we posted, the status words
//    of descriptors (Length, ImmediateData, Status) and the RDMA window. Everything else
//    in the arena (descriptors, gaps between segments, guard zones, a region with RDMA
//    enabled under another protection tag, the unregistered pages around the window) is
//    compared with a shadow copy after every input.
//  - Nothing is read out of memory an RDMA read may not touch: guard zones and the
//    other-ptag region hold a random secret word, and every completed receive buffer and
//    read buffer is searched for it. Queued RDMA read answers and RDMA writes in progress
//    must name the window (checked after every frame).
//  - Completions are sane: a receive never reports more bytes than its descriptor holds;
//    a malformed receive descriptor (bad control, segment count, handles, ranges) never
//    completes as a successful receive.
//  - The engine keeps working: a disconnected VI flushes every descriptor and can be
//    destroyed; broken pairs reconnect; every kLiveEvery inputs a fresh pair connects and
//    moves a message, an RDMA write and an RDMA read correctly.
// VIs that legitimately break on bad input (reliable levels), and pairs that carried a
// message (their sequence numbers moved), are re-created after the input, so every input
// finds the same targets connected and idle: a crash reproduces from its input alone.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fuzz_format.h"
#include "nicfw/abi.h"
#include "nicfw/engine.h"

#if defined(__clang__)
// The secret search must not feed libFuzzer's comparison tables, or the fuzzer would
// learn the secret and put it in frames itself.
#define FZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FZ_NO_COVERAGE
#endif

namespace {

using namespace softvia::nicfw;
using namespace fuzzfmt;

[[noreturn]] void fail(const char* file, int line, const char* cond, const char* fmt, ...) {
    fprintf(stderr, "\n==frame_fuzzer== INVARIANT VIOLATED at %s:%d: %s\n==frame_fuzzer== ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}
#define FZ_CHECK(cond, ...)                                         \
    do {                                                            \
        if (!(cond)) fail(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
    } while (0)

bool g_trace = false;  // FRAME_FUZZER_TRACE: one line per frame, action, completion, reset
#define FZ_TRACE(...)                       \
    do {                                    \
        if (g_trace) fprintf(stderr, __VA_ARGS__); \
    } while (0)

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

constexpr uint32_t kHdr = sizeof(nicfw_frame_hdr);
constexpr uint32_t kExt = sizeof(nicfw_rdma_ext);
constexpr uint32_t kFixed = offsetof(nicfw_conn_payload, disc);
constexpr uint32_t kPage = 4096;
constexpr uint32_t kPlainSlots = 4;              // receive queue
constexpr uint32_t kRecvSlots = kPlainSlots + 2;  // + reply receive queue (steering VIs only)
constexpr uint32_t kSendSlots = 4;
constexpr uint32_t kBuf = 4096;         // receive buffer / RDMA read buffer
constexpr uint32_t kGap = 128;          // secret-filled gap after every buffer
constexpr uint32_t kDescBytes = 128;    // control segment + up to 6 segments
constexpr uint32_t kSrcBytes = 8192;    // send source, one per descriptor region
constexpr uint32_t kForeignBytes = 16384;
constexpr uint32_t kBadBuf = 64;        // buffer of the malformed receive descriptor
constexpr uint32_t kLiveBytes = 12000;  // liveness message: two frames
constexpr uint64_t kLiveEvery = 256;    // inputs between liveness checks
constexpr uint32_t kMaxRecords = 256;   // per input
constexpr uint32_t kStatusOff = offsetof(nicfw_desc_ctrl, imm);
constexpr uint32_t kStatusLen = sizeof(nicfw_desc_ctrl) - kStatusOff;  // imm, length, status
static_assert(offsetof(nicfw_desc_ctrl, status) + sizeof(uint32_t) == sizeof(nicfw_desc_ctrl));

// Data segments of receive descriptor slot i, as offsets into its 4 KiB buffer: one big
// segment, two with a gap between them, a zero-length segment first, a tiny one; the
// reply queue's two slots (steering) like the first two.
struct SegSpec {
    uint32_t off, len;
};
struct RecvLayout {
    uint16_t n;
    SegSpec s[3];
};
constexpr RecvLayout kRecvLayout[kRecvSlots] = {
    {1, {{0, 4096}, {0, 0}, {0, 0}}},
    {2, {{0, 1000}, {2048, 2048}, {0, 0}}},
    {3, {{0, 0}, {0, 64}, {128, 64}}},
    {1, {{0, 16}, {0, 0}, {0, 0}}},
    {2, {{0, 1000}, {2048, 2048}, {0, 0}}},
    {1, {{0, 4096}, {0, 0}, {0, 0}}},
};

nicfw_desc_seg* seg_of(nicfw_desc* d, uint32_t i) {
    return reinterpret_cast<nicfw_desc_seg*>(reinterpret_cast<uint8_t*>(d) + sizeof(nicfw_desc_ctrl)) + i;
}
void set_local(nicfw_desc* d, uint32_t i, const void* p, uint32_t memh, uint32_t len) {
    nicfw_desc_seg* g = seg_of(d, i);
    memset(g, 0, sizeof *g);
    g->addr = reinterpret_cast<uint64_t>(p);
    g->memh = memh;
    g->len = len;
}
void set_remote(nicfw_desc* d, uint32_t i, uint64_t addr, uint32_t memh) {
    nicfw_desc_seg* g = seg_of(d, i);
    memset(g, 0, sizeof *g);
    g->addr = addr;
    g->memh = memh;
}
uint32_t status_of(const nicfw_desc* d) { return __atomic_load_n(&d->cs.status, __ATOMIC_ACQUIRE); }
bool is_done(const nicfw_desc* d) { return status_of(d) & NICFW_DS_DONE; }

struct RecvSlot {
    nicfw_desc* d = nullptr;
    uint8_t* buf = nullptr;
    bool posted = false;
};
struct SendSlot {
    nicfw_desc* d = nullptr;
    bool posted = false;
    bool read = false;  // an RDMA read into the endpoint's read buffer
};

struct Endpoint;
bool slot_used(const Endpoint& e, uint32_t k);

struct Endpoint {
    const char* name = "";
    Vi* vi = nullptr;
    int region = 0;  // descriptor region (0: ptag A, 1: ptag B)
    ViAttrs attrs;
    bool steering = false;  // request/reply steering: slots kPlainSlots.. feed the reply queue
    int partner = -1;  // index of the peer endpoint (pairs)
    RecvSlot recv[kRecvSlots];
    SendSlot send[kSendSlots];
    uint8_t* rbuf = nullptr;  // RDMA read buffer
    RecvSlot bad;             // a malformed receive descriptor (kOpProgress with arg & 0x80)
    uint8_t bad_variant = 0;
    uint64_t resets = 0;
};

bool slot_used(const Endpoint& e, uint32_t k) { return k < kPlainSlots || e.steering; }

struct Stats {
    uint64_t inputs = 0, frames = 0, actions = 0, by_type[16] = {};
    uint64_t resets = 0, live_checks = 0, recv_done = 0, recv_ok = 0, send_done = 0, send_ok = 0;
    uint64_t async_errors = 0;
};

class Harness {
public:
    Harness() { init(); }
    void run(const uint8_t* data, size_t size);
    void print_stats(FILE* out) const;

private:
    // ---- set-up
    void init();
    void layout();
    void fill_secret(uint8_t* p, size_t n);
    void sync(const void* p, size_t n);  // harness wrote [p, p+n): take it into the shadow
    void allow(const void* p, size_t n, const char* what);
    void zone(const void* p, size_t n, const char* what);
    void finish_layout();

    // ---- driver side
    void ring(Endpoint& e, nicfw_desc* d, uint16_t queue);
    void post_recv(Endpoint& e, uint32_t i);
    void post_bad_recv(Endpoint& e, uint8_t variant);
    SendSlot* free_send_slot(Endpoint& e);
    bool post_atomic(Endpoint& e, uint32_t op, uint64_t raddr, uint32_t rmemh);
    bool post_send(Endpoint& e, uint16_t control, uint32_t imm, uint64_t raddr, uint32_t rmemh,
                   uint32_t len, bool read);
    Vi* new_vi(const ViAttrs& a);
    void settle();
    bool pump(const std::function<bool()>& pred, uint64_t timeout_ms);
    void collect();
    void repost();
    void teardown(Endpoint& e);  // disconnect, flush, destroy
    void teardown_vi(Vi* v, const char* what);
    void reset_pair(int a);
    void reset_client();
    void reset_peer_wait();
    void reset_listener();
    bool pair_ok(const Endpoint& e) const;
    void normalize();
    void live_check();

    // ---- input
    void do_frame(uint8_t ctl, const uint8_t* p, uint32_t len);
    void do_action(uint8_t ctl, uint8_t arg);
    void fixup(uint8_t* f, uint32_t len, nicfw_frame_hdr& h, Endpoint* t);
    void fix_ext(uint8_t* p, Endpoint* t);
    void fix_conn(uint8_t* f, uint32_t len, nicfw_frame_hdr& h);

    // ---- invariants
    void check_memory();
    void check_rdma_targets();
    void scan_secret(const uint8_t* p, size_t n, const char* what);
    const char* zone_name(size_t off) const;
    bool in_window(const uint8_t* p, uint64_t n) const {
        return p >= window_ && n <= kWindowBytes && static_cast<uint64_t>(p - window_) <= kWindowBytes - n;
    }

    std::unique_ptr<Engine> eng_;
    uint32_t steering_index_ = [] {
        uint32_t i = 0;
        offload_index("steering", &i);
        return i;
    }();
    Cq* cq_ = nullptr;
    uint32_t ptag_[2] = {}, memh_desc_[2] = {}, memh_window_ = 0, memh_foreign_ = 0;
    std::vector<uint8_t> self_addr_;

    uint8_t* arena_ = nullptr;
    size_t arena_len_ = 0;
    std::vector<uint8_t> shadow_;
    uint8_t* window_ = nullptr;
    uint8_t* foreign_ = nullptr;
    uint8_t* desc_[2] = {};
    size_t desc_len_[2] = {};
    size_t desc_used_[2] = {};
    uint8_t* src_[2] = {};
    std::vector<std::pair<size_t, size_t>> allowed_;  // arena offsets the NIC may write
    std::vector<std::pair<size_t, size_t>> checked_;  // the complement
    struct Zone {
        size_t off, len;
        const char* name;
    };
    std::vector<Zone> zones_;
    uint64_t secret_ = 0;
    uint64_t rot_[8] = {};

    Endpoint ep_[kNumTargets];
    Listener* listen_ = nullptr;  // open listener for the fuzzer's CONN_REQs
    Listener* server_ = nullptr;  // the listener kClient's request waits at

    // liveness kit
    nicfw_desc* live_sd_ = nullptr;
    nicfw_desc* live_rd_ = nullptr;
    uint8_t* live_src_ = nullptr;
    uint8_t* live_dst_ = nullptr;

    Stats st_;
};

// ================================================================ set-up

FZ_NO_COVERAGE bool contains_word(const uint8_t* p, size_t n, const uint64_t rot[8]) {
    // A copy of at least 15 secret bytes puts one whole rotation of the word at an
    // 8-aligned address of the destination.
    uintptr_t a = (reinterpret_cast<uintptr_t>(p) + 7) & ~uintptr_t{7};
    const uint8_t* end = p + n;
    for (const uint8_t* q = reinterpret_cast<const uint8_t*>(a); q + 8 <= end; q += 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        for (int k = 0; k < 8; k++)
            if (w == rot[k]) return true;
    }
    return false;
}

uint8_t* take(uint8_t* base, size_t len, size_t* used, size_t n) {
    size_t off = (*used + 63) & ~size_t{63};
    FZ_CHECK(off + n <= len, "descriptor region too small (%zu + %zu > %zu)", off, n, len);
    *used = off + n;
    return base + off;
}

void Harness::fill_secret(uint8_t* p, size_t n) {
    // Whole 8-byte words at 8-aligned addresses (the arena is page aligned).
    for (size_t i = 0; i + 8 <= n; i += 8) memcpy(p + i, &secret_, 8);
}

void Harness::sync(const void* p, size_t n) {
    size_t off = static_cast<const uint8_t*>(p) - arena_;
    FZ_CHECK(off + n <= arena_len_, "sync outside arena");
    memcpy(shadow_.data() + off, p, n);
}

void Harness::allow(const void* p, size_t n, const char* what) {
    if (n == 0) return;
    allowed_.push_back({static_cast<size_t>(static_cast<const uint8_t*>(p) - arena_), n});
    zone(p, n, what);
}

void Harness::zone(const void* p, size_t n, const char* what) {
    zones_.push_back({static_cast<size_t>(static_cast<const uint8_t*>(p) - arena_), n, what});
}

const char* Harness::zone_name(size_t off) const {
    const char* best = "unassigned (secret filler)";
    size_t best_len = SIZE_MAX;
    for (const Zone& z : zones_)
        if (off >= z.off && off < z.off + z.len && z.len < best_len) {
            best = z.name;
            best_len = z.len;
        }
    return best;
}

void Harness::layout() {
    // Bytes per endpoint in its descriptor region.
    const size_t per_ep = (kRecvSlots + kSendSlots + 1) * (kDescBytes + 64) + (kRecvSlots + 1) * (kBuf + kGap + 64) +
                          kBadBuf + kGap + 64;
    const size_t src = kSrcBytes + kGap + 64;
    const size_t live = 2 * (kDescBytes + 64) + 2 * (kLiveBytes + kGap + 64);
    size_t n0 = 0, n1 = 0;
    for (int i = 0; i < kNumTargets; i++) (i == kNoRdmaA || i == kNoRdmaB ? n1 : n0) += per_ep;
    n0 += src + live;
    n1 += src;
    desc_len_[0] = (n0 + kPage - 1) & ~size_t{kPage - 1};
    desc_len_[1] = (n1 + kPage - 1) & ~size_t{kPage - 1};

    // [guard][window][guard][foreign][guard][desc 0][guard][desc 1][guard]
    arena_len_ = 5 * kPage + kWindowBytes + kForeignBytes + desc_len_[0] + desc_len_[1];
    arena_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, arena_len_));
    FZ_CHECK(arena_ != nullptr, "arena allocation");
    fill_secret(arena_, arena_len_);
    size_t off = kPage;
    zone(arena_, kPage, "guard page before the RDMA window");
    window_ = arena_ + off;
    memset(window_, 0, kWindowBytes);
    off += kWindowBytes;
    zone(arena_ + off, kPage, "guard page after the RDMA window");
    off += kPage;
    foreign_ = arena_ + off;
    zone(foreign_, kForeignBytes, "other-ptag region (RDMA on, ptag B)");
    off += kForeignBytes;
    zone(arena_ + off, kPage, "guard page after the other-ptag region");
    off += kPage;
    desc_[0] = arena_ + off;
    off += desc_len_[0];
    zone(arena_ + off, kPage, "guard page after descriptor region A");
    off += kPage;
    desc_[1] = arena_ + off;
    off += desc_len_[1];
    zone(arena_ + off, kPage, "guard page after descriptor region B");
    allow(window_, kWindowBytes, "RDMA window");

    for (int r = 0; r < 2; r++) {
        src_[r] = take(desc_[r], desc_len_[r], &desc_used_[r], kSrcBytes);
        for (uint32_t i = 0; i < kSrcBytes; i++) src_[r][i] = static_cast<uint8_t>(i * 7 + r);
        zone(src_[r], kSrcBytes, "send source");
        desc_used_[r] += kGap;
    }
    static const char* kRecvNames[kRecvSlots] = {"receive segment (slot 0)", "receive segment (slot 1)",
                                                 "receive segment (slot 2)", "receive segment (slot 3)",
                                                 "reply receive segment (slot 4)", "reply receive segment (slot 5)"};
    for (int i = 0; i < kNumTargets; i++) {
        Endpoint& e = ep_[i];
        int r = e.region;
        for (uint32_t k = 0; k < kRecvSlots; k++) {
            e.recv[k].d = reinterpret_cast<nicfw_desc*>(take(desc_[r], desc_len_[r], &desc_used_[r], kDescBytes));
            memset(e.recv[k].d, 0, kDescBytes);
            zone(e.recv[k].d, kDescBytes, "receive descriptor");
            allow(reinterpret_cast<uint8_t*>(e.recv[k].d) + kStatusOff, kStatusLen, "receive descriptor status words");
            e.recv[k].buf = take(desc_[r], desc_len_[r], &desc_used_[r], kBuf);
            memset(e.recv[k].buf, 0, kBuf);
            zone(e.recv[k].buf, kBuf, "receive buffer outside its segments");
            for (uint32_t s = 0; s < kRecvLayout[k].n; s++)
                allow(e.recv[k].buf + kRecvLayout[k].s[s].off, kRecvLayout[k].s[s].len, kRecvNames[k]);
            desc_used_[r] += kGap;
        }
        for (uint32_t k = 0; k < kSendSlots; k++) {
            e.send[k].d = reinterpret_cast<nicfw_desc*>(take(desc_[r], desc_len_[r], &desc_used_[r], kDescBytes));
            memset(e.send[k].d, 0, kDescBytes);
            zone(e.send[k].d, kDescBytes, "send descriptor");
            allow(reinterpret_cast<uint8_t*>(e.send[k].d) + kStatusOff, kStatusLen, "send descriptor status words");
        }
        e.rbuf = take(desc_[r], desc_len_[r], &desc_used_[r], kBuf);
        memset(e.rbuf, 0, kBuf);
        allow(e.rbuf, kBuf, "RDMA read buffer");
        desc_used_[r] += kGap;
        e.bad.d = reinterpret_cast<nicfw_desc*>(take(desc_[r], desc_len_[r], &desc_used_[r], kDescBytes));
        memset(e.bad.d, 0, kDescBytes);
        zone(e.bad.d, kDescBytes, "malformed receive descriptor");
        allow(reinterpret_cast<uint8_t*>(e.bad.d) + kStatusOff, kStatusLen, "malformed receive descriptor status words");
        e.bad.buf = take(desc_[r], desc_len_[r], &desc_used_[r], kBadBuf);
        memset(e.bad.buf, 0, kBadBuf);
        allow(e.bad.buf, kBadBuf, "malformed receive descriptor's buffer");
        desc_used_[r] += kGap;
    }
    live_sd_ = reinterpret_cast<nicfw_desc*>(take(desc_[0], desc_len_[0], &desc_used_[0], kDescBytes));
    live_rd_ = reinterpret_cast<nicfw_desc*>(take(desc_[0], desc_len_[0], &desc_used_[0], kDescBytes));
    memset(live_sd_, 0, kDescBytes);
    memset(live_rd_, 0, kDescBytes);
    allow(reinterpret_cast<uint8_t*>(live_sd_) + kStatusOff, kStatusLen, "liveness send descriptor status");
    allow(reinterpret_cast<uint8_t*>(live_rd_) + kStatusOff, kStatusLen, "liveness receive descriptor status");
    live_src_ = take(desc_[0], desc_len_[0], &desc_used_[0], kLiveBytes);
    desc_used_[0] += kGap;
    live_dst_ = take(desc_[0], desc_len_[0], &desc_used_[0], kLiveBytes);
    desc_used_[0] += kGap;
    for (uint32_t i = 0; i < kLiveBytes; i++) live_src_[i] = static_cast<uint8_t>((i * 131) ^ (i >> 8));
    memset(live_dst_, 0, kLiveBytes);
    zone(live_src_, kLiveBytes, "liveness source");
    allow(live_dst_, kLiveBytes, "liveness destination");
}

void Harness::finish_layout() {
    shadow_.assign(arena_, arena_ + arena_len_);
    std::sort(allowed_.begin(), allowed_.end());
    size_t pos = 0;
    for (auto [off, len] : allowed_) {
        if (off > pos) checked_.push_back({pos, off - pos});
        pos = std::max(pos, off + len);
    }
    if (pos < arena_len_) checked_.push_back({pos, arena_len_ - pos});
}

Vi* Harness::new_vi(const ViAttrs& a) {
    Vi* v = nullptr;
    int rc = eng_->create_vi(a, cq_, cq_, nullptr, &v);
    FZ_CHECK(rc == 0 && v, "create_vi: %d", rc);
    return v;
}

void Harness::init() {
    std::random_device rd;
    secret_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x8000000000000001ull;
    for (int k = 0; k < 8; k++) rot_[k] = k ? (secret_ >> (8 * k)) | (secret_ << (64 - 8 * k)) : secret_;

    EngineConfig cfg;
    cfg.progress = Progress::kInline;
    cfg.device = "shm";
    // FRAME_FUZZER_LOSSY=1: the engine's wire is the fault injector (every rate 0), so
    // reliable VIs run the retransmission protocol and its receive rules get fuzzed.
    const char* lossy = getenv("FRAME_FUZZER_LOSSY");
    if (lossy && *lossy == '1') cfg.faults = "drop=0";
    int rc = Engine::create(cfg, &eng_);
    FZ_CHECK(rc == 0 && eng_, "Engine::create: %d", rc);
    eng_->set_error_handler(&st_, [](void* ctx, const nicfw_async_event*) { static_cast<Stats*>(ctx)->async_errors++; });
    for (auto& p : ptag_) FZ_CHECK(eng_->create_ptag(&p) == 0, "create_ptag");
    size_t alen;
    const uint8_t* a = eng_->transport().local_addr(&alen);
    self_addr_.assign(a, a + alen);
    cq_ = eng_->create_cq(64, nullptr);

    static const char* kNames[kNumTargets] = {"unrel-a", "unrel-b", "rd-a", "rd-b", "rr-a",
                                              "rr-b", "nordma-a", "nordma-b", "client", "peer-wait"};
    for (int i = 0; i < kNumTargets; i++) {
        Endpoint& e = ep_[i];
        e.name = kNames[i];
        e.region = (i == kNoRdmaA || i == kNoRdmaB) ? 1 : 0;
        e.attrs.ptag = ptag_[e.region];
        e.attrs.max_transfer = NICFW_MAX_TRANSFER;
        e.attrs.rdma_write = e.attrs.rdma_read = e.region == 0;
        switch (i) {
            case kUnrelA: case kUnrelB: e.attrs.reliability = NICFW_REL_UNRELIABLE; break;
            case kRdA: case kRdB: case kNoRdmaA: case kNoRdmaB: case kClient:
                e.attrs.reliability = NICFW_REL_RELIABLE_DELIVERY;
                break;
            default: e.attrs.reliability = NICFW_REL_RELIABLE_RECEPTION; break;
        }
        if (i < kClient) e.partner = i ^ 1;
        e.steering = i == kRdA || i == kRdB;
    }
    layout();
    {
        // The leak detector finds 15 secret bytes copied to any offset, and nothing in a
        // buffer of ordinary data.
        alignas(8) uint8_t src[32], dst[48];
        fill_secret(src, sizeof src);
        for (int s = 0; s < 8; s++)
            for (int d = 0; d < 8; d++) {
                memset(dst, 0x5A, sizeof dst);
                memcpy(dst + d, src + s, 15);
                FZ_CHECK(contains_word(dst, sizeof dst, rot_), "leak detector self-test (%d, %d)", s, d);
            }
        FZ_CHECK(!contains_word(src_[0], kSrcBytes, rot_), "leak detector self-test (false positive)");
    }
    rc = eng_->register_mem(reinterpret_cast<uint64_t>(window_), kWindowBytes, ptag_[0], true, true, &memh_window_);
    FZ_CHECK(rc == 0, "register window: %d", rc);
    rc = eng_->set_mem_atomics(reinterpret_cast<uint64_t>(window_), memh_window_, true);
    FZ_CHECK(rc == 0, "open the window to atomics: %d", rc);
    rc = eng_->register_mem(reinterpret_cast<uint64_t>(foreign_), kForeignBytes, ptag_[1], true, true, &memh_foreign_);
    FZ_CHECK(rc == 0, "register foreign: %d", rc);
    for (int r = 0; r < 2; r++) {
        rc = eng_->register_mem(reinterpret_cast<uint64_t>(desc_[r]), desc_len_[r], ptag_[r], false, false,
                                &memh_desc_[r]);
        FZ_CHECK(rc == 0, "register descriptor region: %d", rc);
    }
    finish_layout();

    for (int i = kUnrelA; i < kClient; i += 2) reset_pair(i);
    FZ_CHECK(ep_[kUnrelA].vi->peer == 0, "the self link is not transport peer 0 (peer %d)", ep_[kUnrelA].vi->peer);
    reset_listener();
    reset_client();
    reset_peer_wait();
    normalize();
    live_check();
    check_memory();
}

// ================================================================ driver side

void Harness::ring(Endpoint& e, nicfw_desc* d, uint16_t queue) {
    sync(d, kDescBytes);
    nicfw_doorbell db{reinterpret_cast<uint64_t>(d), memh_desc_[e.region],
                      static_cast<uint16_t>(NICFW_VI_INDEX(e.vi->id)), queue};
    eng_->ring(db);
}

void Harness::post_recv(Endpoint& e, uint32_t i) {
    RecvSlot& s = e.recv[i];
    memset(s.d, 0, kDescBytes);
    s.d->cs.seg_count = kRecvLayout[i].n;
    s.d->cs.control = NICFW_DC_OP_SEND;
    for (uint32_t k = 0; k < kRecvLayout[i].n; k++)
        set_local(s.d, k, s.buf + kRecvLayout[i].s[k].off, memh_desc_[e.region], kRecvLayout[i].s[k].len);
    s.posted = true;
    ring(e, s.d, i < kPlainSlots ? NICFW_RECVQ : NICFW_REPLYQ);
}

// A receive descriptor the NIC must refuse (complete with an error, place nothing):
// 0 reserved control bit, 1 SegCount over the limit, 2 segment in the other protection
// tag's memory, 3 segment past its region's end, 4 descriptor posted with a handle that
// does not hold it, 5 no segments at all (valid: capacity 0), 6 stale segment handle,
// 7 segment length near 4 GiB.
void Harness::post_bad_recv(Endpoint& e, uint8_t variant) {
    RecvSlot& s = e.bad;
    if (s.posted) return;
    nicfw_desc* d = s.d;
    memset(d, 0, kDescBytes);
    d->cs.seg_count = 1;
    d->cs.control = NICFW_DC_OP_SEND;
    uint32_t memh = memh_desc_[e.region], desc_memh = memh;
    const uint8_t* addr = s.buf;
    uint32_t len = kBadBuf;
    switch (variant & 7) {
        case 0: d->cs.control = 0x0010; break;
        case 1: d->cs.seg_count = NICFW_MAX_SEGMENTS + 1; break;
        case 2:
            // The other tag's memory: the other-ptag region for tag A VIs, descriptor region
            // A (its send source) for tag B VIs.
            addr = e.region == 0 ? foreign_ : src_[0];
            memh = e.region == 0 ? memh_foreign_ : memh_desc_[0];
            break;
        case 3: addr = desc_[e.region] + desc_len_[e.region] - 32; break;
        case 4: desc_memh = memh_window_; break;
        case 5: d->cs.seg_count = 0; break;
        case 6: memh ^= 0x00010000u; break;
        default: len = 0xFFFFFFF0u; break;
    }
    if (d->cs.seg_count == 1) set_local(d, 0, addr, memh, len);
    e.bad_variant = variant & 7;
    s.posted = true;
    sync(d, kDescBytes);
    eng_->ring(nicfw_doorbell{reinterpret_cast<uint64_t>(d), desc_memh, static_cast<uint16_t>(NICFW_VI_INDEX(e.vi->id)),
                              NICFW_RECVQ});
    eng_->progress();  // the doorbell is serviced before the next frame (as vipl's inline post does)
}

// A send slot of e not posted now, or null when all are.
SendSlot* Harness::free_send_slot(Endpoint& e) {
    for (auto& c : e.send)
        if (!c.posted) return &c;
    return nullptr;
}

bool Harness::post_send(Endpoint& e, uint16_t control, uint32_t imm, uint64_t raddr, uint32_t rmemh,
                        uint32_t len, bool read) {
    SendSlot* s = free_send_slot(e);
    if (!s) return false;
    nicfw_desc* d = s->d;
    memset(d, 0, kDescBytes);
    uint16_t n = 0;
    uint16_t op = control & NICFW_DC_OP_MASK;
    if (op != NICFW_DC_OP_SEND) set_remote(d, n++, raddr, rmemh);
    if (len) set_local(d, n++, read ? e.rbuf : src_[e.region], memh_desc_[e.region], len);
    d->cs.seg_count = n;
    d->cs.control = control;
    d->cs.imm = imm;
    s->posted = true;
    s->read = read;
    ring(e, d, NICFW_SENDQ);
    return true;
}

// A NIC atomic (nicfw/offload/atomics): remote word, operands, 8-byte result in rbuf.
bool Harness::post_atomic(Endpoint& e, uint32_t op, uint64_t raddr, uint32_t rmemh) {
    SendSlot* s = free_send_slot(e);
    if (!s) return false;
    nicfw_desc* d = s->d;
    memset(d, 0, kDescBytes);
    set_remote(d, 0, raddr, rmemh);
    const nicfw_atomic_args args{{1, 2}};
    memcpy(desc_segment(d, 1), &args, sizeof args);
    set_local(d, 2, e.rbuf, memh_desc_[e.region], 8);
    d->cs.seg_count = 3;
    d->cs.control = static_cast<uint16_t>(NICFW_DC_OP_OFFLOAD | (op << NICFW_DC_OFFLOAD_SHIFT));
    s->posted = true;
    s->read = true;  // the answer lands in rbuf, as a read's does
    ring(e, d, NICFW_SENDQ);
    return true;
}

// Steps the engine until it has nothing left to do (bounded: a fuzzed read request can
// ask for a megabyte of answers).
void Harness::settle() {
    int idle = 0;
    for (int i = 0; i < 4096 && idle < 3; i++) idle = eng_->progress() ? 0 : idle + 1;
    cq_->cons.store(cq_->prod.load(std::memory_order_acquire), std::memory_order_release);
}

bool Harness::pump(const std::function<bool()>& pred, uint64_t timeout_ms) {
    uint64_t end = now_ms() + timeout_ms;
    for (;;) {
        if (pred()) return true;
        if (now_ms() > end) return pred();
        if (!eng_->progress()) sched_yield();
    }
}


void Harness::scan_secret(const uint8_t* p, size_t n, const char* what) {
    FZ_CHECK(!contains_word(p, n, rot_),
             "%s holds bytes of memory the NIC must not read (guard zone or other-ptag region)", what);
}

// Takes every descriptor the NIC completed back into the harness.
void Harness::collect() {
    for (Endpoint& e : ep_) {
        for (uint32_t k = 0; k < kRecvSlots; k++) {
            RecvSlot& s = e.recv[k];
            if (!s.posted || !is_done(s.d)) continue;
            uint32_t status = status_of(s.d);
            st_.recv_done++;
            // (An RDMA write with immediate data reports the write's length, not the buffer's.)
            if (!(status & NICFW_DS_ERROR_MASK) && (status & NICFW_DS_OP_MASK) == NICFW_DS_OP_RECEIVE) {
                st_.recv_ok++;
                uint32_t cap = 0;
                for (uint32_t g = 0; g < kRecvLayout[k].n; g++) cap += kRecvLayout[k].s[g].len;
                FZ_CHECK(s.d->cs.length <= cap, "%s: receive completed with Length %u > capacity %u (status %#x)",
                         e.name, s.d->cs.length, cap, status);
            }
            FZ_TRACE("    %s: receive slot %u done, status %#x length %u\n", e.name, k, status, s.d->cs.length);
            for (uint32_t g = 0; g < kRecvLayout[k].n; g++)
                scan_secret(s.buf + kRecvLayout[k].s[g].off, kRecvLayout[k].s[g].len, "a receive buffer");
            s.posted = false;
        }
        // Variant 4 names a region that does not hold the descriptor: the NIC never writes
        // it, not even its status (docs/memory-safety.md); its completion is lost.
        if (e.bad.posted && e.bad_variant == 4)
            FZ_CHECK(status_of(e.bad.d) == 0, "%s: the NIC wrote status %#x into a descriptor outside the region "
                     "its doorbell named", e.name, status_of(e.bad.d));
        if (e.bad.posted && e.bad_variant != 4 && is_done(e.bad.d)) {
            uint32_t status = status_of(e.bad.d);
            FZ_TRACE("    %s: malformed receive (variant %u) done, status %#x length %u\n", e.name, e.bad_variant,
                     status, e.bad.d->cs.length);
            // An RDMA write with immediate data consumes the descriptor without its segments,
            // so only a descriptor the NIC cannot even read (1, 4) must fail there.
            bool rdma_imm = (status & NICFW_DS_OP_MASK) == NICFW_DS_OP_REMOTE_RDMA_WRITE;
            FZ_CHECK((status & NICFW_DS_ERROR_MASK) || (rdma_imm && e.bad_variant != 1 && e.bad_variant != 4) ||
                         (e.bad_variant == 5 && e.bad.d->cs.length == 0),
                     "%s: malformed receive descriptor (variant %u) completed without error: status %#x length %u",
                     e.name, e.bad_variant, status, e.bad.d->cs.length);
            e.bad.posted = false;
        }
        for (SendSlot& s : e.send) {
            if (!s.posted || !is_done(s.d)) continue;
            st_.send_done++;
            if (!(status_of(s.d) & NICFW_DS_ERROR_MASK)) st_.send_ok++;
            FZ_TRACE("    %s: send done, status %#x length %u\n", e.name, status_of(s.d), s.d->cs.length);
            if (s.read) scan_secret(e.rbuf, kBuf, "an RDMA read buffer");
            s.posted = false;
        }
    }
}

void Harness::repost() {
    bool any = false;
    for (Endpoint& e : ep_) {
        if (!e.vi || e.vi->state.load(std::memory_order_acquire) == NICFW_VI_ERROR) continue;
        for (uint32_t k = 0; k < kRecvSlots; k++)
            if (slot_used(e, k) && !e.recv[k].posted) {
                post_recv(e, k);
                any = true;
            }
    }
    if (any) eng_->progress();  // doorbells serviced
}

void Harness::teardown_vi(Vi* v, const char* what) {
    // Twice: a pending connect goes back to IDLE first, then the queues are flushed.
    eng_->disconnect(v);
    eng_->disconnect(v);
    (void)what;
}

// Disconnects e, lets the flush complete everything, destroys the VI.
void Harness::teardown(Endpoint& e) {
    if (!e.vi) return;
    teardown_vi(e.vi, e.name);
    settle();
    collect();
    if (e.bad.posted && e.bad_variant == 4) e.bad.posted = false;  // flushed, its completion lost (collect)
    for (auto& s : e.recv) FZ_CHECK(!s.posted, "%s: receive descriptor not completed after disconnect", e.name);
    for (auto& s : e.send) FZ_CHECK(!s.posted, "%s: send descriptor not completed after disconnect", e.name);
    FZ_CHECK(!e.bad.posted, "%s: malformed receive descriptor not completed after disconnect", e.name);
    int rc = eng_->destroy_vi(e.vi);
    FZ_CHECK(rc == 0, "%s: destroy_vi after disconnect and flush: %d (sq %u rq %u pending %zu state %u)", e.name, rc,
             e.vi->sq.size(), e.vi->rq.size(), e.vi->pending.size(), e.vi->state.load());
    FZ_TRACE("    %s: re-created\n", e.name);
    e.vi = nullptr;
    e.resets++;
    st_.resets++;
}

void Harness::reset_pair(int ai) {
    Endpoint& a = ep_[ai];
    Endpoint& b = ep_[a.partner];
    if (a.vi) teardown_vi(a.vi, a.name);
    if (b.vi) teardown_vi(b.vi, b.name);
    teardown(a);
    teardown(b);
    a.vi = new_vi(a.attrs);
    b.vi = new_vi(b.attrs);
    for (Endpoint* e : {&a, &b})
        if (e->steering) FZ_CHECK(eng_->enable_offload(e->vi, steering_index_, cq_) == 0, "enable steering %s", e->name);
    // (The engine is idle here: no stale request with these discriminators is in flight.)
    std::string da = "fz-pair-" + std::to_string(ai) + "a";
    std::string db = "fz-pair-" + std::to_string(ai) + "b";
    auto u = [](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
    int rc = eng_->peer_request(a.vi, self_addr_.data(), self_addr_.size(), u(da), da.size(), u(db), db.size(), 5000);
    FZ_CHECK(rc == 0, "peer_request %s: %d", a.name, rc);
    rc = eng_->peer_request(b.vi, self_addr_.data(), self_addr_.size(), u(db), db.size(), u(da), da.size(), 5000);
    FZ_CHECK(rc == 0, "peer_request %s: %d", b.name, rc);
    bool ok = pump([&] {
        return a.vi->state.load() == NICFW_VI_CONNECTED && b.vi->state.load() == NICFW_VI_CONNECTED;
    }, 5000);
    FZ_CHECK(ok, "pair %s/%s does not reconnect (states %u/%u)", a.name, b.name, a.vi->state.load(),
             b.vi->state.load());
    FZ_CHECK(a.vi->remote_vi == b.vi->id && b.vi->remote_vi == a.vi->id && a.vi->peer == b.vi->peer,
             "pair %s/%s connected to the wrong VIs", a.name, b.name);
    for (uint32_t k = 0; k < kRecvSlots; k++) {
        if (slot_used(a, k)) post_recv(a, k);
        if (slot_used(b, k)) post_recv(b, k);
    }
    settle();
}

void Harness::reset_listener() {
    if (listen_) {
        ConnRequest req;
        if (eng_->unlisten(listen_, &req)) eng_->reject(req);  // answers whoever asked
    }
    listen_ = eng_->listen(reinterpret_cast<const uint8_t*>(kListenDisc), strlen(kListenDisc));
    settle();
}

void Harness::reset_client() {
    Endpoint& c = ep_[kClient];
    teardown(c);
    if (server_) {
        ConnRequest req;
        eng_->unlisten(server_, &req);
    }
    server_ = eng_->listen(reinterpret_cast<const uint8_t*>(kServerDisc), strlen(kServerDisc));
    c.vi = new_vi(c.attrs);
    int rc = eng_->connect_request(c.vi, self_addr_.data(), self_addr_.size(),
                                   reinterpret_cast<const uint8_t*>(kServerDisc), strlen(kServerDisc));
    FZ_CHECK(rc == 0, "connect_request: %d", rc);
    settle();
    for (uint32_t k = 0; k < kPlainSlots; k++) post_recv(c, k);
    settle();
}

void Harness::reset_peer_wait() {
    Endpoint& q = ep_[kPeerWait];
    teardown(q);
    q.vi = new_vi(q.attrs);
    int rc = eng_->peer_request(q.vi, self_addr_.data(), self_addr_.size(),
                                reinterpret_cast<const uint8_t*>(kPeerWaitLocal), strlen(kPeerWaitLocal),
                                reinterpret_cast<const uint8_t*>(kPeerWaitRemote), strlen(kPeerWaitRemote),
                                UINT64_MAX);
    FZ_CHECK(rc == 0, "peer_request: %d", rc);
    for (uint32_t k = 0; k < kPlainSlots; k++) post_recv(q, k);
    settle();
}

bool Harness::pair_ok(const Endpoint& e) const {
    const Vi* v = e.vi;
    const Endpoint& p = ep_[e.partner];
    if (!v || !p.vi) return false;
    if (v->state.load(std::memory_order_acquire) != NICFW_VI_CONNECTED) return false;
    if (v->peer != 0 || v->remote_vi != p.vi->id) return false;
    if (v->rx_busy || v->tx_busy || !v->sq.empty() || !v->pending.empty() || !v->serve.empty() ||
        v->reads_out || v->acks_owed)
        return false;
    // Message sequence numbers (duplicate detection) count from 0 on each connection:
    // a pair that carried a message is re-created, so every input starts alike.
    if (v->rx_seq != 0 || v->tx_seq != 0) return false;
    for (uint32_t k = 0; k < kRecvSlots; k++)
        if (slot_used(e, k) && !e.recv[k].posted) return false;
    for (auto& s : e.send)
        if (s.posted) return false;
    return !e.bad.posted;
}

// Brings every target back to its starting state: pairs connected and idle with all
// receive descriptors posted, the client pending at its listener, the peer-to-peer
// request pending, the fuzzer's listener open.
void Harness::normalize() {
    for (int round = 0;; round++) {
        settle();
        collect();
        repost();
        settle();
        collect();
        bool dirty = false;
        if (listen_->matched.load(std::memory_order_acquire)) {
            reset_listener();
            dirty = true;
        }
        for (int i = kUnrelA; i < kClient; i += 2)
            if (!pair_ok(ep_[i]) || !pair_ok(ep_[i + 1])) {
                reset_pair(i);
                dirty = true;
            }
        Vi* c = ep_[kClient].vi;
        bool client_ok = c->state.load() == NICFW_VI_CONNECT_PENDING && c->op == ConnOp::kClient &&
                         server_->matched.load(std::memory_order_acquire) && server_->req.client_vi == c->id &&
                         server_->req.req_id == c->req_id;
        if (!client_ok) {
            reset_client();
            dirty = true;
        }
        Vi* q = ep_[kPeerWait].vi;
        if (q->state.load() != NICFW_VI_CONNECT_PENDING || q->op != ConnOp::kPeer) {
            reset_peer_wait();
            dirty = true;
        }
        if (!dirty) return;
        FZ_CHECK(round < 8, "targets do not come back to their starting state after %d rounds", round);
    }
}

// A fresh pair connects and moves a message, an RDMA write and an RDMA read.
void Harness::live_check() {
    st_.live_checks++;
    ViAttrs at;
    at.reliability = NICFW_REL_RELIABLE_DELIVERY;
    at.ptag = ptag_[0];
    at.max_transfer = NICFW_MAX_TRANSFER;
    at.rdma_write = at.rdma_read = true;
    Vi* x = new_vi(at);
    Vi* y = new_vi(at);
    auto u = [](const char* s) { return reinterpret_cast<const uint8_t*>(s); };
    FZ_CHECK(eng_->peer_request(x, self_addr_.data(), self_addr_.size(), u("fz-live-x"), 9, u("fz-live-y"), 9, 5000) == 0,
             "liveness peer_request");
    FZ_CHECK(eng_->peer_request(y, self_addr_.data(), self_addr_.size(), u("fz-live-y"), 9, u("fz-live-x"), 9, 5000) == 0,
             "liveness peer_request");
    bool ok = pump([&] { return x->state.load() == NICFW_VI_CONNECTED && y->state.load() == NICFW_VI_CONNECTED; },
                   5000);
    FZ_CHECK(ok, "a fresh VI pair does not connect (states %u/%u)", x->state.load(), y->state.load());
    FZ_CHECK(x->remote_vi == y->id && y->remote_vi == x->id, "fresh pair connected to the wrong VIs");

    auto post = [&](Vi* v, nicfw_desc* d, uint16_t q) {
        sync(d, kDescBytes);
        eng_->ring(nicfw_doorbell{reinterpret_cast<uint64_t>(d), memh_desc_[0], static_cast<uint16_t>(NICFW_VI_INDEX(v->id)), q});
    };
    auto wait = [&](nicfw_desc* d, const char* what) {
        FZ_CHECK(pump([&] { return is_done(d); }, 5000), "liveness: %s never completes", what);
    };
    // 1. send/receive with immediate data, two frames.
    uint32_t imm = 0x5EED0000u + static_cast<uint32_t>(st_.live_checks);
    memset(live_dst_, 0, kLiveBytes);
    memset(live_rd_, 0, kDescBytes);
    live_rd_->cs.seg_count = 2;
    set_local(live_rd_, 0, live_dst_, memh_desc_[0], 5000);
    set_local(live_rd_, 1, live_dst_ + 5000, memh_desc_[0], kLiveBytes - 5000);
    post(y, live_rd_, NICFW_RECVQ);
    memset(live_sd_, 0, kDescBytes);
    live_sd_->cs.seg_count = 1;
    live_sd_->cs.control = NICFW_DC_OP_SEND | NICFW_DC_IMMEDIATE;
    live_sd_->cs.imm = imm;
    set_local(live_sd_, 0, live_src_, memh_desc_[0], kLiveBytes);
    post(x, live_sd_, NICFW_SENDQ);
    wait(live_rd_, "receive");
    wait(live_sd_, "send");
    FZ_CHECK(status_of(live_rd_) == (NICFW_DS_DONE | NICFW_DS_OP_RECEIVE | NICFW_DS_IMMEDIATE) &&
                 live_rd_->cs.length == kLiveBytes && live_rd_->cs.imm == imm,
             "liveness receive: status %#x length %u imm %#x", status_of(live_rd_), live_rd_->cs.length,
             live_rd_->cs.imm);
    FZ_CHECK(status_of(live_sd_) == (NICFW_DS_DONE | NICFW_DS_OP_SEND), "liveness send: status %#x",
             status_of(live_sd_));
    FZ_CHECK(memcmp(live_dst_, live_src_, kLiveBytes) == 0, "liveness: received data differs");

    // 2. RDMA write of 4 KiB into the window, 3. RDMA read of it back.
    uint8_t* spot = window_ + kWindowBytes - 8192;
    for (int step = 0; step < 2; step++) {
        bool read = step == 1;
        memset(live_dst_, 0, kLiveBytes);
        memset(live_sd_, 0, kDescBytes);
        live_sd_->cs.seg_count = 2;
        live_sd_->cs.control = read ? NICFW_DC_OP_RDMA_READ : NICFW_DC_OP_RDMA_WRITE;
        set_remote(live_sd_, 0, reinterpret_cast<uint64_t>(spot), memh_window_);
        set_local(live_sd_, 1, read ? live_dst_ : live_src_, memh_desc_[0], 4096);
        post(x, live_sd_, NICFW_SENDQ);
        wait(live_sd_, read ? "RDMA read" : "RDMA write");
        uint32_t want = NICFW_DS_DONE | (read ? NICFW_DS_OP_RDMA_READ : NICFW_DS_OP_RDMA_WRITE);
        FZ_CHECK(status_of(live_sd_) == want && live_sd_->cs.length == 4096, "liveness %s: status %#x length %u",
                 read ? "RDMA read" : "RDMA write", status_of(live_sd_), live_sd_->cs.length);
        FZ_CHECK(memcmp(read ? live_dst_ : spot, live_src_, 4096) == 0, "liveness %s: data differs",
                 read ? "RDMA read" : "RDMA write");
    }
    teardown_vi(x, "live-x");
    teardown_vi(y, "live-y");
    settle();
    int rx = eng_->destroy_vi(x), ry = eng_->destroy_vi(y);
    FZ_CHECK(rx == 0 && ry == 0, "liveness: destroy_vi %d/%d", rx, ry);
    settle();
}

// ================================================================ input

void Harness::fix_ext(uint8_t* p, Endpoint* t) {
    nicfw_rdma_ext x;
    memcpy(&x, p, sizeof x);
    switch (x.reserved & 3) {
        case kExtWindow:
            x.memh = memh_window_;
            x.addr = reinterpret_cast<uint64_t>(window_) + x.addr % kWindowBytes;
            break;
        case kExtDesc: {
            int r = t ? t->region : 0;
            x.memh = memh_desc_[r];
            x.addr = reinterpret_cast<uint64_t>(desc_[r]) + x.addr % desc_len_[r];
            break;
        }
        case kExtForeign:
            x.memh = memh_foreign_;
            x.addr = reinterpret_cast<uint64_t>(foreign_) + x.addr % kForeignBytes;
            break;
        default:
            break;
    }
    memcpy(p, &x, sizeof x);
}

void Harness::fix_conn(uint8_t* f, uint32_t len, nicfw_frame_hdr& h) {
    if (len < kHdr + kFixed) return;
    uint32_t room = std::min<uint32_t>(len - kHdr, sizeof(nicfw_conn_payload));
    nicfw_conn_payload pl{};
    memcpy(&pl, f + kHdr, room);
    uint32_t avail = room - kFixed;
    auto put = [&](const char* s, const char* d) {
        uint32_t ls = s ? static_cast<uint32_t>(strlen(s)) : 0, ld = static_cast<uint32_t>(strlen(d));
        if (ls + ld > avail) return false;
        pl.src_disc_len = static_cast<uint16_t>(ls);
        pl.dst_disc_len = static_cast<uint16_t>(ld);
        if (ls) memcpy(pl.disc, s, ls);
        memcpy(pl.disc + ls, d, ld);
        return true;
    };
    bool done = false;
    switch ((pl.rdma_write >> 1) & 3) {
        case kDiscPeerWait:
            done = put(kPeerWaitRemote, kPeerWaitLocal);
            if (!(pl.rdma_write & 0x08)) pl.reliability = ep_[kPeerWait].attrs.reliability;
            break;
        case kDiscListen: done = put(nullptr, kListenDisc); break;
        case kDiscServer: done = put(nullptr, kServerDisc); break;
        default: break;
    }
    if (!done) {
        uint32_t s = pl.src_disc_len % (std::min<uint32_t>(avail, NICFW_MAX_DISCRIMINATOR) + 1);
        uint32_t d = pl.dst_disc_len % (std::min<uint32_t>(avail - s, NICFW_MAX_DISCRIMINATOR) + 1);
        pl.src_disc_len = static_cast<uint16_t>(s);
        pl.dst_disc_len = static_cast<uint16_t>(d);
    }
    h.msg_len = kFixed + pl.src_disc_len + pl.dst_disc_len;
    memcpy(f + kHdr, &pl, h.msg_len);
}

void Harness::fixup(uint8_t* f, uint32_t len, nicfw_frame_hdr& h, Endpoint* t) {
    auto clip_msg = [&] {
        if (h.msg_len > NICFW_MAX_TRANSFER) h.msg_len %= 65536;
    };
    switch (h.type) {
        case NICFW_F_DATA:
        case NICFW_F_RDMA_WRITE: {
            uint32_t ext = h.type == NICFW_F_RDMA_WRITE ? kExt : 0;
            uint32_t room = len >= kHdr + ext ? len - kHdr - ext : 0;
            clip_msg();
            if (h.offset > h.msg_len) h.offset %= h.msg_len + 1;
            h.frag_len = std::min(room, h.msg_len - h.offset);
            if (ext && len >= kHdr + kExt) fix_ext(f + kHdr, t);
            break;
        }
        case NICFW_F_READ_REQ:
            clip_msg();
            if (len >= kHdr + kExt) fix_ext(f + kHdr, t);
            break;
        case NICFW_F_ATOMIC_REQ:
            if (len >= kHdr + kExt) fix_ext(f + kHdr, t);
            break;
        case NICFW_F_ATOMIC_GRANT:
            // As it comes: the descriptors it names are this process's own (the self
            // link), and only a NIC's memory and grant pages may be mapped.
            break;
        case NICFW_F_ATOMIC_RESP:
            // The answer an atomic in flight waits for, when there is one.
            if (t && t->vi) {
                for (const TxEntry& e : t->vi->pending)
                    if (e.kind == TxEntry::kOffload && !e.done) {
                        h.seq = e.seq;
                        break;
                    }
            }
            break;
        case NICFW_F_READ_RESP: {
            uint32_t room = len - kHdr;
            if (t && t->vi) {
                for (const TxEntry& e : t->vi->pending)
                    if (e.kind == TxEntry::kRead && !e.done) {
                        h.seq = e.seq;
                        h.msg_len = e.len;
                        h.offset = e.got;
                        break;
                    }
            }
            if (h.offset > h.msg_len) h.offset %= h.msg_len + 1;
            h.frag_len = std::min(room, h.msg_len - h.offset);
            break;
        }
        case NICFW_F_CONN_ACCEPT:
        case NICFW_F_CONN_REJECT:
        case NICFW_F_CONN_NOMATCH:
            if (t && t->vi) h.seq = t->vi->req_id;
            if (h.type == NICFW_F_CONN_ACCEPT) fix_conn(f, len, h);
            break;
        case NICFW_F_CONN_REQ:
        case NICFW_F_PEER_REQ:
        case NICFW_F_PEER_ACK:
            fix_conn(f, len, h);
            break;
        default:
            break;
    }
}

void Harness::do_frame(uint8_t ctl, const uint8_t* p, uint32_t len) {
    st_.frames++;
    // An exactly sized copy: AddressSanitizer sees any read past the frame's end.
    uint8_t* f = static_cast<uint8_t*>(malloc(len ? len : 1));
    if (len) memcpy(f, p, len);
    if (len >= kHdr) {
        nicfw_frame_hdr h;
        memcpy(&h, f, kHdr);
        uint32_t ti = ctl & kTargetMask;
        Endpoint* t = ti < kNumTargets ? &ep_[ti] : nullptr;
        if (t && t->vi) {
            h.dst_vi = t->vi->id;
            if (!(ctl & kRawSrc)) h.src_vi = t->partner >= 0 ? ep_[t->partner].vi->id : t->vi->remote_vi;
        }
        if (!(ctl & kRawVersion)) h.version = NICFW_ABI_VERSION;
        if (ctl & kFixup) fixup(f, len, h, t);
        memcpy(f, &h, kHdr);
        st_.by_type[h.type < 16 ? h.type : 0]++;
    }
    uint64_t drops = eng_->status()->nic.drops, errors = eng_->status()->nic.errors;
    eng_->inject_frame(0, f, len);
    free(f);
    if (g_trace) {
        nicfw_frame_hdr h{};
        memcpy(&h, p, std::min<uint32_t>(len, kHdr));
        uint32_t ti = ctl & kTargetMask;
        Vi* tv = ti < kNumTargets ? ep_[ti].vi : nullptr;
        FZ_TRACE("  frame ctl %#04x -> %s len %u type %u seq %u (vi rx_seq %u rq %u state %u)%s%s\n", ctl,
                 ti < kNumTargets ? ep_[ti].name : "raw-ids", len, h.type, h.seq, tv ? tv->rx_seq : 0,
                 tv ? tv->rq.size() : 0, tv ? tv->state.load() : 0,
                 eng_->status()->nic.drops != drops ? " DROPPED" : "", eng_->status()->nic.errors != errors ? " ERROR" : "");
    }
    check_rdma_targets();
}

void Harness::do_action(uint8_t ctl, uint8_t arg) {
    st_.actions++;
    Endpoint& e = ep_[(ctl & kTargetMask) % kNumTargets];
    if (!e.vi) return;
    uint8_t op = (ctl >> kOpShift) & 7;
    FZ_TRACE("  action %u arg %#04x on %s\n", op, arg, e.name);
    uint64_t win = reinterpret_cast<uint64_t>(window_);
    switch (op) {
        case kOpProgress:
            if (arg & 0x80)
                post_bad_recv(e, arg);
            else
                eng_->progress();
            break;
        case kOpSend:
        case kOpFencedSend: {
            uint16_t control = NICFW_DC_OP_SEND;
            if (arg & 0x80) control |= NICFW_DC_IMMEDIATE;
            if (arg & 0x40) control |= NICFW_DC_REPLY;
            if (op == kOpFencedSend) control |= NICFW_DC_QFENCE;
            post_send(e, control, 0xC0DE0000u | arg, 0, 0, (arg & 0x3F) * 128u, false);
            break;
        }
        case kOpRdmaWrite: {
            uint16_t control = NICFW_DC_OP_RDMA_WRITE | ((arg & 1) ? NICFW_DC_IMMEDIATE : 0);
            if ((arg & 0x21) == 0x21) control |= NICFW_DC_REPLY;
            uint32_t len = ((arg >> 1) & 15) * 512u;
            uint64_t off = (arg >> 5) * (128u << 10);
            post_send(e, control, 0xAB000000u | arg, win + off, memh_window_, len, false);
            break;
        }
        case kOpRdmaRead: {
            if ((arg & 15) == 15) {
                // A NIC atomic on a word of the window instead: compare-and-swap if arg &
                // 0x10, else fetch-add; the word at (arg >> 5) * 8.
                post_atomic(e, (arg & 0x10) ? NICFW_OFFLOAD_OP_CMP_SWAP : NICFW_OFFLOAD_OP_FETCH_ADD,
                            win + (arg >> 5) * 8u, memh_window_);
                break;
            }
            uint32_t len = (arg & 15) * 256u;
            uint64_t off = (arg >> 4) * (64u << 10);
            post_send(e, NICFW_DC_OP_RDMA_READ, 0, win + off, memh_window_, len, true);
            break;
        }
        case kOpBadRemote: {
            bool read = arg & 1;
            uint64_t addr = 0;
            uint32_t memh = 0;
            switch ((arg >> 1) & 3) {
                case 0: addr = reinterpret_cast<uint64_t>(foreign_); memh = memh_foreign_; break;
                case 1: addr = reinterpret_cast<uint64_t>(desc_[e.region]); memh = memh_desc_[e.region]; break;
                case 2: addr = win; memh = memh_window_ ^ 0x00010000u; break;  // stale generation
                default: addr = win + kWindowBytes - 256; memh = memh_window_; break;  // overruns the window
            }
            post_send(e, read ? NICFW_DC_OP_RDMA_READ : NICFW_DC_OP_RDMA_WRITE, 0, addr, memh, 1024, read);
            break;
        }
        case kOpDisconnect:
            eng_->disconnect(e.vi);
            break;
        default:
            settle();
            break;
    }
    check_rdma_targets();
}

void Harness::run(const uint8_t* data, size_t size) {
    st_.inputs++;
    FZ_TRACE("input %llu (%zu bytes)\n", static_cast<unsigned long long>(st_.inputs), size);
    size_t i = 0;
    for (uint32_t rec = 0; rec < kMaxRecords && i < size; rec++) {
        uint8_t ctl = data[i++];
        if (ctl & kAction) {
            uint8_t arg = i < size ? data[i++] : 0;
            do_action(ctl, arg);
            continue;
        }
        uint32_t len = 0;
        if (i < size) len = data[i++];
        if (i < size) len |= static_cast<uint32_t>(data[i++]) << 8;
        len = std::min<uint32_t>({len, static_cast<uint32_t>(size - i), eng_->transport().max_frame()});
        do_frame(ctl, data + i, len);
        i += len;
    }
    settle();
    collect();
    check_memory();
    normalize();
    check_memory();
    if (st_.inputs % kLiveEvery == 0) {
        live_check();
        check_memory();
    }
}

// ================================================================ invariants

void Harness::check_memory() {
    for (auto [off, len] : checked_) {
        if (memcmp(arena_ + off, shadow_.data() + off, len) == 0) continue;
        size_t k = off;
        while (arena_[k] == shadow_[k]) k++;
        size_t end = k;
        while (end < off + len && arena_[end] != shadow_[end]) end++;
        FZ_CHECK(false, "the NIC wrote memory it must not: arena offset %zu (%zu+ bytes) in \"%s\": %#04x, expected %#04x",
                 k, end - k, zone_name(k), arena_[k], shadow_[k]);
    }
}

// RDMA answers queued and RDMA writes in progress must name the window, through a VI
// that allows the operation.
void Harness::check_rdma_targets() {
    for (Endpoint& e : ep_) {
        Vi* v = e.vi;
        if (!v) continue;
        for (const ReadService& r : v->serve)
            FZ_CHECK(e.attrs.rdma_read && in_window(reinterpret_cast<const uint8_t*>(r.addr), r.len),
                     "%s: RDMA read answer queued from %#llx+%u, outside the window (or the VI forbids reads)", e.name,
                     static_cast<unsigned long long>(r.addr), r.len);
        if (v->rx_busy && v->rx_write && !v->rx_discard)
            FZ_CHECK(e.attrs.rdma_write && in_window(v->rx_dst, v->rx_len),
                     "%s: RDMA write accepted to %p+%u, outside the window (or the VI forbids writes)", e.name,
                     static_cast<void*>(v->rx_dst), v->rx_len);
    }
}

void Harness::print_stats(FILE* out) const {
    const nicfw_status_page* s = eng_->status();
    fprintf(out,
            "frame_fuzzer: %llu inputs, %llu frames, %llu actions, %llu VI re-creations, %llu liveness checks\n"
            "  receives completed %llu (ok %llu), sends completed %llu (ok %llu), async errors %llu\n"
            "  engine: rx_frames %llu tx_frames %llu drops %llu errors %llu\n  frames by type:",
            (unsigned long long)st_.inputs, (unsigned long long)st_.frames, (unsigned long long)st_.actions,
            (unsigned long long)st_.resets, (unsigned long long)st_.live_checks, (unsigned long long)st_.recv_done,
            (unsigned long long)st_.recv_ok, (unsigned long long)st_.send_done, (unsigned long long)st_.send_ok,
            (unsigned long long)st_.async_errors, (unsigned long long)s->nic.rx_frames,
            (unsigned long long)s->nic.tx_frames, (unsigned long long)s->nic.drops, (unsigned long long)s->nic.errors);
    for (int t = 0; t < 16; t++)
        if (st_.by_type[t]) fprintf(out, " %d:%llu", t, (unsigned long long)st_.by_type[t]);
    fputc('\n', out);
}

Harness* g_harness = nullptr;


Harness& harness() {
    if (!g_harness) {
        g_trace = getenv("FRAME_FUZZER_TRACE") != nullptr;
        g_harness = new Harness();  // lives for the process: no teardown order to get wrong
        if (getenv("FRAME_FUZZER_STATS"))
            atexit([] { g_harness->print_stats(stderr); });
    }
    return *g_harness;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    harness().run(data, size);
    return 0;
}

// For the replay driver.
extern "C" __attribute__((visibility("default"))) void frame_fuzzer_print_stats() {
    harness().print_stats(stdout);
}
