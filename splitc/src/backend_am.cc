// backend_am.cc -- Split-C over AMVIA (the paper's section 5.2): one AM-2 endpoint per
// process, a request per remote get, put, store or atomic operation, whose reply writes
// the result (get, atomic), signals the put, or does nothing (store). Values of up to 8
// bytes travel in the handler arguments of short messages; bulk operations go in medium
// messages of up to AM_MaxMedium() bytes each. The barrier is a two-phase binary tree of
// requests. Handlers run inside AM_Poll, one at a time.
#include <am.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "backend.h"

namespace splitc {
namespace {

enum : handler_t {
    H_GET = 1,  // short request (a value of up to 8 bytes comes back in a short reply)
    H_GET_M,    // medium request without payload (the reply is medium: AM's symmetry rule)
    H_GET_DONE_S,
    H_GET_DONE_M,
    H_PUT_S,
    H_PUT_M,
    H_PUT_DONE,
    H_STORE_S,
    H_STORE_M,
    H_NOOP,
    H_ATOMIC,
    H_ATOMIC_DONE,
    H_REFUSED,
    H_BAR_UP,
    H_BAR_DOWN,
    H_EXIT,
};

constexpr tag_t kTag = 0x53504c4954430001ull;  // "SPLITC" + version

inline int32_t lo(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
inline int32_t hi(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v >> 32)); }
inline uint64_t join(int l, int h) {
    return static_cast<uint64_t>(static_cast<uint32_t>(l)) | static_cast<uint64_t>(static_cast<uint32_t>(h)) << 32;
}

struct GetSlot {
    void* dst;
    size_t n;
    Wait w;
};

struct AmState {
    eb_t eb = nullptr;
    ep_t ep = nullptr;
    size_t medium = 4096;
    std::vector<GetSlot> slots;
    std::vector<int> free_slots;
    int64_t atomic_result = 0;
    int bar_up[2] = {0, 0};
    int bar_released = 0;
    int bar_gen = 0;
    bool exiting = false; // splitc_exit: peers going away is what we asked for
    unsigned polls = 0;   // poll's calls since the last operation, for its yields
};
AmState A;

int take_slot(void* dst, size_t n, Wait w) {
    int s;
    if (!A.free_slots.empty()) {
        s = A.free_slots.back();
        A.free_slots.pop_back();
        A.slots[static_cast<size_t>(s)] = GetSlot{dst, n, w};
    } else {
        s = static_cast<int>(A.slots.size());
        A.slots.push_back(GetSlot{dst, n, w});
    }
    return s;
}

void finish_slot(int s, const void* data, size_t n) {
    if (s < 0 || static_cast<size_t>(s) >= A.slots.size()) fatal("am back end: a reply names no get (slot %d)", s);
    GetSlot g = A.slots[static_cast<size_t>(s)];
    if (n != g.n) fatal("am back end: a get's reply has %zu bytes, %zu expected", n, g.n);
    memcpy(g.dst, data, n);
    A.free_slots.push_back(s);
    counter(g.w)--;
}

void check_am(int rc, const char* what, int proc) {
    if (rc != AM_OK) fatal("am back end: %s to process %d: %s", what, proc, AMX_ErrorString(rc));
}

// A reply that cannot go is a bug of ours, not something to wait for.
void check_reply(int rc, const char* what) {
    if (rc != AM_OK) fatal("am back end: %s reply: %s", what, AMX_ErrorString(rc));
}

// ---- owner side: requests ------------------------------------------------------------
// A refusal names the operation, the call, the address and the length; the caller stops.
void refuse(void* token, Op op, int call, uint64_t addr, size_t n) {
    check_reply(AM_Reply6(token, H_REFUSED, static_cast<int>(op), call, lo(addr), hi(addr), static_cast<int>(n), MYPROC),
                "refusal");
}

void h_get(void* token, int slot, int alo, int ahi, int n, int call) {
    const uint64_t a = join(alo, ahi);
    if (n < 0 || n > 8 || !is_global(a, static_cast<size_t>(n)))
        return refuse(token, Op::kGet, call, a, static_cast<size_t>(n));
    uint64_t v = 0;
    memcpy(&v, reinterpret_cast<void*>(a), static_cast<size_t>(n));
    check_reply(AM_Reply3(token, H_GET_DONE_S, slot, lo(v), hi(v)), "get");
}

void h_get_m(void* token, void*, size_t, int slot, int alo, int ahi, int n, int call) {
    const uint64_t a = join(alo, ahi);
    if (n < 0 || n > static_cast<int>(A.medium) || !is_global(a, static_cast<size_t>(n)))
        return refuse(token, Op::kGet, call, a, static_cast<size_t>(n));
    check_reply(AM_ReplyI1(token, H_GET_DONE_M, reinterpret_cast<void*>(a), static_cast<size_t>(n), slot), "get");
}

void h_put_s(void* token, int w, int call, int alo, int ahi, int n, int vlo, int vhi) {
    const uint64_t a = join(alo, ahi);
    if (n < 0 || n > 8 || !is_global(a, static_cast<size_t>(n))) return refuse(token, Op::kPut, call, a, static_cast<size_t>(n));
    const uint64_t v = join(vlo, vhi);
    memcpy(reinterpret_cast<void*>(a), &v, static_cast<size_t>(n));
    check_reply(AM_Reply1(token, H_PUT_DONE, w), "put");
}

void h_put_m(void* token, void* buf, size_t n, int w, int call, int alo, int ahi) {
    const uint64_t a = join(alo, ahi);
    if (!is_global(a, n)) return refuse(token, Op::kPut, call, a, n);
    memcpy(reinterpret_cast<void*>(a), buf, n);
    check_reply(AM_Reply1(token, H_PUT_DONE, w), "put");
}

void h_store_s(void* token, int call, int alo, int ahi, int n, int vlo, int vhi) {
    const uint64_t a = join(alo, ahi);
    if (n < 0 || n > 8 || !is_global(a, static_cast<size_t>(n))) return refuse(token, Op::kStore, call, a, static_cast<size_t>(n));
    const uint64_t v = join(vlo, vhi);
    memcpy(reinterpret_cast<void*>(a), &v, static_cast<size_t>(n));
    landed_store(static_cast<size_t>(n));
    check_reply(AM_Reply0(token, H_NOOP), "store");
}

void h_store_m(void* token, void* buf, size_t n, int call, int alo, int ahi) {
    const uint64_t a = join(alo, ahi);
    if (!is_global(a, n)) return refuse(token, Op::kStore, call, a, n);
    memcpy(reinterpret_cast<void*>(a), buf, n);
    landed_store(n);
    check_reply(AM_Reply0(token, H_NOOP), "store");
}

void h_atomic(void* token, int kind, int call, int alo, int ahi, int xlo, int xhi, int ylo, int yhi, int flo, int fhi) {
    AtomicReq r{static_cast<AtomicKind>(kind), join(alo, ahi), static_cast<int64_t>(join(xlo, xhi)),
                static_cast<int64_t>(join(ylo, yhi)), join(flo, fhi)};
    if (kind < 0 || kind > static_cast<int>(AtomicKind::kCswap) || !atomic_ok(r))
        return refuse(token, Op::kAtomic, call, r.addr, r.kind == AtomicKind::kCall ? 1 : sizeof(long));
    const int64_t res = run_atomic(r);
    check_reply(AM_Reply2(token, H_ATOMIC_DONE, lo(static_cast<uint64_t>(res)), hi(static_cast<uint64_t>(res))),
                "atomic");
}

void h_bar_up(void*, int gen) { A.bar_up[gen & 1]++; }
void h_bar_down(void*, int gen) { A.bar_released = gen; }
void h_exit(void*, int code) { end_process(code); }

// ---- caller side: replies -------------------------------------------------------------
void h_get_done_s(void*, int slot, int vlo, int vhi) {
    const uint64_t v = join(vlo, vhi);
    const bool known = slot >= 0 && static_cast<size_t>(slot) < A.slots.size();
    finish_slot(slot, &v, known ? A.slots[static_cast<size_t>(slot)].n : 0);
}
void h_get_done_m(void*, void* buf, size_t n, int slot) { finish_slot(slot, buf, n); }
void h_put_done(void*, int w) { counter(w ? Wait::kBlocking : Wait::kSync)--; }
void h_noop(void*) {}
void h_atomic_done(void*, int rlo, int rhi) {
    A.atomic_result = static_cast<int64_t>(join(rlo, rhi));
    st.blocking--;
}
void h_refused(void*, int op, int call, int alo, int ahi, int n, int proc) {
    bad_gptr(static_cast<uint8_t>(call), proc, join(alo, ahi), static_cast<size_t>(n),
             op == static_cast<int>(Op::kAtomic) ? "not global memory of that process (or, for atomic_call, a "
                                                   "function outside the program)"
                                                 : "not global memory of that process");
}
void h_returned(int status, op_t opcode, void* token) {
    if (A.exiting) return; // our K_EXIT (or an earlier request) to a process that has exited
    // Which process: the message's peer, found in the translation table (index = rank).
    en_t src{};
    int proc = -1;
    if (AM_GetSourceEndpoint(token, &src) == AM_OK)
        for (int i = 0; i < PROCS && proc < 0; i++) {
            en_t name{};
            if (AM_GetTranslationName(A.ep, i, &name) == AM_OK && name.ep_id == src.ep_id) proc = i;
        }
    if (proc >= 0)
        fatal("am back end: lost process %d: a message to it came back undelivered (%s, opcode %d). It exited, "
              "crashed or stopped answering; the job stops",
              proc, AMX_StatusString(status), opcode);
    fatal("am back end: a message came back undelivered: %s (opcode %d): a process of the job is gone",
          AMX_StatusString(status), opcode);
}

class AmBackend final : public Backend {
public:
    const char* name() const override { return "am"; }

    bool start() override {
        int rc = AMX_SPMDStartup(kTag, 0, &A.eb, &A.ep);
        if (rc != AM_OK) {
            fprintf(stderr, "splitc: am back end: AMX_SPMDStartup: %s\n", AMX_ErrorString(rc));
            return false;
        }
        A.medium = static_cast<size_t>(AM_MaxMedium());
        struct {
            handler_t h;
            amx_handler_fn_t fn;
        } const table[] = {
            {0, reinterpret_cast<amx_handler_fn_t>(h_returned)},
            {H_GET, reinterpret_cast<amx_handler_fn_t>(h_get)},
            {H_GET_M, reinterpret_cast<amx_handler_fn_t>(h_get_m)},
            {H_GET_DONE_S, reinterpret_cast<amx_handler_fn_t>(h_get_done_s)},
            {H_GET_DONE_M, reinterpret_cast<amx_handler_fn_t>(h_get_done_m)},
            {H_PUT_S, reinterpret_cast<amx_handler_fn_t>(h_put_s)},
            {H_PUT_M, reinterpret_cast<amx_handler_fn_t>(h_put_m)},
            {H_PUT_DONE, reinterpret_cast<amx_handler_fn_t>(h_put_done)},
            {H_STORE_S, reinterpret_cast<amx_handler_fn_t>(h_store_s)},
            {H_STORE_M, reinterpret_cast<amx_handler_fn_t>(h_store_m)},
            {H_NOOP, reinterpret_cast<amx_handler_fn_t>(h_noop)},
            {H_ATOMIC, reinterpret_cast<amx_handler_fn_t>(h_atomic)},
            {H_ATOMIC_DONE, reinterpret_cast<amx_handler_fn_t>(h_atomic_done)},
            {H_REFUSED, reinterpret_cast<amx_handler_fn_t>(h_refused)},
            {H_BAR_UP, reinterpret_cast<amx_handler_fn_t>(h_bar_up)},
            {H_BAR_DOWN, reinterpret_cast<amx_handler_fn_t>(h_bar_down)},
            {H_EXIT, reinterpret_cast<amx_handler_fn_t>(h_exit)},
        };
        for (const auto& t : table) {
            rc = AM_SetHandler(A.ep, t.h, t.fn);
            if (rc != AM_OK) {
                fprintf(stderr, "splitc: am back end: AM_SetHandler(%d): %s\n", t.h, AMX_ErrorString(rc));
                return false;
            }
        }
        // Every process has its handlers in place before anyone sends a request.
        rc = AMX_SPMDBarrier();
        if (rc != AM_OK) fprintf(stderr, "splitc: am back end: first barrier: %s\n", AMX_ErrorString(rc));
        return rc == AM_OK;
    }

    void stop() override { AMX_SPMDExit(); }

    void get(void* dst, int proc, uint64_t addr, size_t n, Wait w, uint8_t call) override {
        A.polls = 0;  // a new operation: a new wait
        for (size_t off = 0; off < n; off += A.medium) {
            const size_t piece = std::min(A.medium, n - off);
            const int slot = take_slot(static_cast<char*>(dst) + off, piece, w);
            counter(w)++;
            const uint64_t a = addr + off;
            if (piece <= 8)
                check_am(AM_Request5(A.ep, proc, H_GET, slot, lo(a), hi(a), static_cast<int>(piece), call), "get", proc);
            else
                check_am(AM_RequestI5(A.ep, proc, H_GET_M, nullptr, 0, slot, lo(a), hi(a), static_cast<int>(piece), call),
                         "get", proc);
        }
    }

    void put(int proc, uint64_t addr, const void* src, size_t n, Wait w, uint8_t call) override {
        A.polls = 0;  // a new operation: a new wait
        const int wi = w == Wait::kBlocking;
        if (n <= 8) {
            if (n == 0) return;
            uint64_t v = 0;
            memcpy(&v, src, n);
            counter(w)++;
            check_am(AM_Request7(A.ep, proc, H_PUT_S, wi, call, lo(addr), hi(addr), static_cast<int>(n), lo(v), hi(v)),
                     "put", proc);
            return;
        }
        for (size_t off = 0; off < n; off += A.medium) {
            const size_t piece = std::min(A.medium, n - off);
            const uint64_t a = addr + off;
            counter(w)++;
            check_am(AM_RequestI4(A.ep, proc, H_PUT_M, const_cast<char*>(static_cast<const char*>(src)) + off, piece, wi,
                                  call, lo(a), hi(a)),
                     "put", proc);
        }
    }

    void store(int proc, uint64_t addr, const void* src, size_t n, uint8_t call) override {
        A.polls = 0;  // a new operation: a new wait
        if (n <= 8) {
            if (n == 0) return;
            uint64_t v = 0;
            memcpy(&v, src, n);
            check_am(AM_Request6(A.ep, proc, H_STORE_S, call, lo(addr), hi(addr), static_cast<int>(n), lo(v), hi(v)),
                     "store", proc);
            return;
        }
        for (size_t off = 0; off < n; off += A.medium) {
            const size_t piece = std::min(A.medium, n - off);
            const uint64_t a = addr + off;
            check_am(AM_RequestI3(A.ep, proc, H_STORE_M, const_cast<char*>(static_cast<const char*>(src)) + off, piece,
                                  call, lo(a), hi(a)),
                     "store", proc);
        }
    }

    int64_t atomic(int proc, const AtomicReq& r, uint8_t call) override {
        A.polls = 0;  // a new operation: a new wait
        st.blocking++;
        check_am(AM_Request10(A.ep, proc, H_ATOMIC, static_cast<int>(r.kind), call, lo(r.addr), hi(r.addr),
                              lo(static_cast<uint64_t>(r.a)), hi(static_cast<uint64_t>(r.a)),
                              lo(static_cast<uint64_t>(r.b)), hi(static_cast<uint64_t>(r.b)), lo(r.fn), hi(r.fn)),
                 "atomic", proc);
        while (st.blocking) poll();
        return A.atomic_result;
    }

    // Called by every waiting loop of the runtime. After 256 calls with no operation
    // issued in between (a wait that lasts), every 256th gives the core away: with more
    // processes than cores, the one being waited for may need it (the via back ends'
    // waits do the same). A short wait (a read's round trip) never yields.
    void poll() override {
        int rc = AM_Poll(A.eb);
        if (rc != AM_OK) fatal("am back end: AM_Poll: %s", AMX_ErrorString(rc));
        if ((++A.polls & 255) == 0) sched_yield();
    }

    // Two phases over a binary tree: arrivals go up to process 0, the release comes down.
    void barrier() override {
        const int gen = ++A.bar_gen;
        const int me = MYPROC, P = PROCS;
        const int kids = (2 * me + 1 < P) + (2 * me + 2 < P);
        while (A.bar_up[gen & 1] < kids) poll();
        A.bar_up[gen & 1] -= kids;
        if (me != 0) {
            check_am(AM_Request1(A.ep, (me - 1) / 2, H_BAR_UP, gen), "barrier", (me - 1) / 2);
            while (A.bar_released < gen) poll();
        }
        for (int c = 2 * me + 1; c <= 2 * me + 2 && c < P; c++) check_am(AM_Request1(A.ep, c, H_BAR_DOWN, gen), "barrier", c);
    }

    // Waits (up to 2 s) until every process has gone, so that none of them sees this one
    // end first (a request of its own to us returned) and reports a lost process instead
    // of the code. The receivers _exit in the handler: our requests come back returned.
    void broadcast_exit(int code) override {
        A.exiting = true;
        for (int p = 0; p < PROCS; p++)
            if (p != MYPROC) AM_Request1(A.ep, p, H_EXIT, code);
        timespec t0{}, t{};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int n = 1; n > 0;) {
            AM_Poll(A.eb);
            if (AMX_Outstanding(A.ep, &n) != AM_OK) break;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= 2) break;
        }
    }
};

}  // namespace

Backend* make_am_backend() {
    static AmBackend b;
    return &b;
}

}  // namespace splitc
