// access.cc -- reads, writes, gets, puts and stores: the check of every global pointer,
// local accesses done here, remote ones handed to the back end; sync and store_sync.
#include <algorithm>
#include <cstring>

#include "backend.h"
#include "collectives.h"
#include "runtime.h"

namespace splitc {
namespace {

constexpr uint64_t kUserTop = 1ull << 47;  // x86-64 user addresses lie below

// Checks g for an access of n bytes by call and returns its owner. A local address must be
// global memory here (so that a program behaves the same on 1 process as on N); of a
// remote one only the process and that it is a user address: its owner checks the rest.
[[gnu::always_inline]] inline int check(gptr_t g, size_t n, uint8_t call) {
    if (st.in_handler) [[unlikely]]
        called_in_atomic(call_name(call));
    const int p = toproc(g);
    const uint64_t a = g.bits & SPLITC_ADDR_MASK;
    if (p >= PROCS) [[unlikely]]
        bad_gptr(call, p, a, n, "there is no such process");
    if (a + n < a || a + n > kUserTop || a < 4096) [[unlikely]]
        bad_gptr(call, p, a, n, "not a user address");
    if (p == MYPROC && !is_global(a, n)) [[unlikely]]
        bad_gptr(call, p, a, n, "not global memory of that process");
    return p;
}

inline uint64_t addr_of(gptr_t g) { return g.bits & SPLITC_ADDR_MASK; }

void wait_blocking() {
    while (st.blocking) g_backend->poll();
}

template <class T>
T read_(gptr_t g, uint8_t call) {
    T v;
    const int p = check(g, sizeof v, call);
    if (p == MYPROC) {
        memcpy(&v, toaddr(g), sizeof v);
        return v;
    }
    g_backend->get(&v, p, addr_of(g), sizeof v, Wait::kBlocking, call);
    wait_blocking();
    return v;
}

template <class T>
void write_(gptr_t g, T v, uint8_t call) {
    const int p = check(g, sizeof v, call);
    if (p == MYPROC) {
        memcpy(toaddr(g), &v, sizeof v);
        return;
    }
    g_backend->put(p, addr_of(g), &v, sizeof v, Wait::kBlocking, call);
    wait_blocking();
}

template <class T>
void get_(T* dst, gptr_t g, uint8_t call) {
    const int p = check(g, sizeof *dst, call);
    if (p == MYPROC)
        memcpy(dst, toaddr(g), sizeof *dst);
    else
        g_backend->get(dst, p, addr_of(g), sizeof *dst, Wait::kSync, call);
}

template <class T>
void put_(gptr_t g, T v, uint8_t call) {
    const int p = check(g, sizeof v, call);
    if (p == MYPROC)
        memcpy(toaddr(g), &v, sizeof v);
    else
        g_backend->put(p, addr_of(g), &v, sizeof v, Wait::kSync, call);
}

void store_bytes(gptr_t g, const void* src, size_t n, uint8_t call) {
    const int p = check(g, n, call);
    if (p == MYPROC) {
        memcpy(toaddr(g), src, n);
        st.stored += n;  // store_sync counts our own stores too
        return;
    }
    st.sent[static_cast<size_t>(p)] += n;
    g_backend->store(p, addr_of(g), src, n, call);
}

template <class T>
void store_(gptr_t g, T v, uint8_t call) {
    store_bytes(g, &v, sizeof v, call);
}

}  // namespace
}  // namespace splitc

using namespace splitc;

#define SPLITC_DEFINE_TYPE(name, T)                                                                     \
    extern "C" T read_##name(gptr_t src) { return read_<T>(src, kRead_##name); }                        \
    extern "C" void write_##name(gptr_t dst, T v) { write_<T>(dst, v, kWrite_##name); }                \
    extern "C" void get_##name(T* dst, gptr_t src) { get_<T>(dst, src, kGet_##name); }                 \
    extern "C" void put_##name(gptr_t dst, T v) { put_<T>(dst, v, kPut_##name); }                      \
    extern "C" void store_##name(gptr_t dst, T v) { store_<T>(dst, v, kStore_##name); }
SPLITC_DEFINE_TYPE(char, char)
SPLITC_DEFINE_TYPE(short, short)
SPLITC_DEFINE_TYPE(int, int)
SPLITC_DEFINE_TYPE(long, long)
SPLITC_DEFINE_TYPE(longlong, long long)
SPLITC_DEFINE_TYPE(float, float)
SPLITC_DEFINE_TYPE(double, double)

extern "C" void bulk_read(void* dst, gptr_t src, size_t n) {
    const int p = check(src, n, kBulkRead);
    if (p == MYPROC) {
        memmove(dst, toaddr(src), n);
        return;
    }
    g_backend->get(dst, p, addr_of(src), n, Wait::kBlocking, kBulkRead);
    wait_blocking();
}

extern "C" void bulk_write(gptr_t dst, const void* src, size_t n) {
    const int p = check(dst, n, kBulkWrite);
    if (p == MYPROC) {
        memmove(toaddr(dst), src, n);
        return;
    }
    g_backend->put(p, addr_of(dst), src, n, Wait::kBlocking, kBulkWrite);
    wait_blocking();
}

extern "C" void bulk_get(void* dst, gptr_t src, size_t n) {
    const int p = check(src, n, kBulkGet);
    if (p == MYPROC)
        memmove(dst, toaddr(src), n);
    else
        g_backend->get(dst, p, addr_of(src), n, Wait::kSync, kBulkGet);
}

extern "C" void bulk_put(gptr_t dst, const void* src, size_t n) {
    const int p = check(dst, n, kBulkPut);
    if (p == MYPROC)
        memmove(toaddr(dst), src, n);
    else
        g_backend->put(p, addr_of(dst), src, n, Wait::kSync, kBulkPut);
}

extern "C" void bulk_store(gptr_t dst, const void* src, size_t n) { store_bytes(dst, src, n, kBulkStore); }

extern "C" void splitc_sync(void) {
    not_in_atomic("sync");
    while (st.outstanding) g_backend->poll();
}

// The shm back end's counts of bytes stored by same-host processes are collected only in
// the waits for them: a writer's counter stays in its cache while the owner does anything else.
extern "C" void store_sync(size_t bytes) {
    not_in_atomic("store_sync");
    for (g_backend->collect_stores(); st.stored < bytes; g_backend->collect_stores()) g_backend->poll();
    st.stored -= bytes;
}

extern "C" void reset_store_sync(void) {
    g_backend->collect_stores();  // bytes that landed before the reset, counted or not yet, are dropped
    st.stored = 0;
}

extern "C" void all_store_sync(void) {
    not_in_atomic("all_store_sync");
    // Every process tells every other how many bytes it stored there since the last
    // all_store_sync (a put into a symmetric array), then waits for that many to land.
    uint64_t* expect = g_store_expect;  // PROCS slots: bytes process q stored here
    for (int q = 0; q < PROCS; q++) {
        if (q == MYPROC) continue;
        g_backend->put(q, reinterpret_cast<uint64_t>(&expect[MYPROC]), &st.sent[static_cast<size_t>(q)],
                       sizeof(uint64_t), Wait::kSync, kInternal);
    }
    internal_barrier();
    uint64_t total = 0;
    for (int q = 0; q < PROCS; q++)
        if (q != MYPROC) total += expect[q];
    for (g_backend->collect_stores(); st.landed < total; g_backend->collect_stores()) g_backend->poll();
    // Nobody stores anew before the barrier below, so the counts start from 0 cleanly.
    st.landed = 0;
    st.stored = 0;
    std::fill(st.sent.begin(), st.sent.end(), 0);
    internal_barrier();
}
