// atomics.cc -- atomic remote procedures: run at the owner of the target, between the
// requests it serves (a back end runs one request at a time, in its poll), so each is
// atomic with respect to every other atomic call and request handled there.
#include <cstring>

#include "backend.h"
#include "runtime.h"

namespace splitc {

bool atomic_ok(const AtomicReq& r) {
    switch (r.kind) {
        case AtomicKind::kCall: return in_program_text(r.fn) && is_global(r.addr, 1);
        case AtomicKind::kFetchAdd:
        case AtomicKind::kCswap: return is_global(r.addr, sizeof(long));
    }
    return false;
}

int64_t run_atomic(const AtomicReq& r) {
    void* p = reinterpret_cast<void*>(r.addr);
    switch (r.kind) {
        case AtomicKind::kCall: {
            st.in_handler = true;  // the function may not make Split-C calls (not_in_atomic)
            const int64_t v = reinterpret_cast<splitc_atomic_fn>(r.fn)(p, r.a);
            st.in_handler = false;
            return v;
        }
        case AtomicKind::kFetchAdd: {
            if ((r.addr & 7) == 0) return hw_atomic(r, p);
            long old;
            memcpy(&old, p, sizeof old);
            long now = static_cast<long>(static_cast<unsigned long>(old) + static_cast<unsigned long>(r.a));
            memcpy(p, &now, sizeof now);
            return old;
        }
        case AtomicKind::kCswap: {
            if ((r.addr & 7) == 0) return hw_atomic(r, p);
            long old;
            memcpy(&old, p, sizeof old);
            if (old == r.a) memcpy(p, &r.b, sizeof(long));
            return old;
        }
    }
    return 0;
}

// With the same-host path, processes of the host change aligned words with these
// instructions while the owner serves remote requests: the owner must use them too. An
// unaligned word is never reached that way (the path sends it to the owner).
int64_t hw_atomic(const AtomicReq& r, void* word) {
    auto* w = static_cast<long*>(word);
    if (r.kind == AtomicKind::kFetchAdd)
        return __atomic_fetch_add(w, static_cast<long>(r.a), __ATOMIC_SEQ_CST);
    long expected = static_cast<long>(r.a);
    __atomic_compare_exchange_n(w, &expected, static_cast<long>(r.b), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;  // the old value, swapped or not
}

namespace {
int64_t atomic_at(gptr_t target, const AtomicReq& r, size_t n, uint8_t call) {
    const int p = toproc(target);
    const uint64_t a = r.addr;
    if (p >= PROCS) bad_gptr(call, p, a, n, "there is no such process");
    if (a + n < a || a < 4096 || a + n > (1ull << 47)) bad_gptr(call, p, a, n, "not a user address");
    if (p == MYPROC) {
        if (!is_global(a, n)) bad_gptr(call, p, a, n, "not global memory of that process");
        return run_atomic(r);
    }
    return g_backend->atomic(p, r, call);
}
}  // namespace

}  // namespace splitc

using namespace splitc;

extern "C" int64_t atomic_call(splitc_atomic_fn fn, gptr_t target, int64_t arg) {
    const uint64_t f = reinterpret_cast<uint64_t>(fn);
    if (!in_program_text(f))
        fatal("atomic_call: function %p is not in the program's own code (a shared library's functions are at "
              "different addresses in each process)", reinterpret_cast<void*>(fn));
    return atomic_at(target, AtomicReq{AtomicKind::kCall, target.bits & SPLITC_ADDR_MASK, arg, 0, f}, 1,
                     kAtomicCall);
}

extern "C" long atomic_fetch_add_long(gptr_t target, long v) {
    return static_cast<long>(atomic_at(target, AtomicReq{AtomicKind::kFetchAdd, target.bits & SPLITC_ADDR_MASK, v, 0, 0},
                                       sizeof(long), kAtomicFetchAdd));
}

extern "C" long atomic_cswap_long(gptr_t target, long expected, long desired) {
    return static_cast<long>(atomic_at(target,
                                       AtomicReq{AtomicKind::kCswap, target.bits & SPLITC_ADDR_MASK, expected, desired, 0},
                                       sizeof(long), kAtomicCswap));
}
