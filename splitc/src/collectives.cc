// collectives.cc -- reductions, broadcast, scan and the runtime's agreement check, built
// on the primitives as Split-C's were: every process puts its value into a slot at
// process 0, a barrier, process 0 computes each process's answer and puts it back, a
// barrier. Two barriers and 2(P-1) puts per call; the second barrier also keeps the next
// call from overwriting slots still being read.
#include <cstring>

#include "backend.h"
#include "collectives.h"
#include "runtime.h"

namespace splitc {
namespace {
uint64_t* g_in = nullptr;   // PROCS slots (process 0's are the ones used)
uint64_t* g_out = nullptr;  // this process's answer

template <class T>
uint64_t bits(T v) {
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T>
T value(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

// Every process gives mine; process 0 computes answer(in, p) for every p; each gets its own.
template <class F>
uint64_t gather_compute(uint64_t mine, F answer) {
    const int P = PROCS;
    if (P == 1) {
        g_in[0] = mine;
        return answer(g_in, 0);
    }
    if (MYPROC == 0)
        g_in[0] = mine;
    else
        g_backend->put(0, reinterpret_cast<uint64_t>(&g_in[MYPROC]), &mine, sizeof mine, Wait::kSync, kInternal);
    internal_barrier();
    if (MYPROC == 0) {
        for (int p = 1; p < P; p++) {
            uint64_t r = answer(g_in, p);
            g_backend->put(p, reinterpret_cast<uint64_t>(g_out), &r, sizeof r, Wait::kSync, kInternal);
        }
        *g_out = answer(g_in, 0);
    }
    internal_barrier();
    return *g_out;
}

template <class T, class Op>
T reduce(T v, Op op) {
    return value<T>(gather_compute(bits(v), [op](const uint64_t* in, int) {
        T acc = value<T>(in[0]);
        for (int q = 1; q < PROCS; q++) acc = op(acc, value<T>(in[q]));
        return bits(acc);
    }));
}

template <class T>
T scan_add(T v) {
    return value<T>(gather_compute(bits(v), [](const uint64_t* in, int p) {
        T acc = value<T>(in[0]);
        for (int q = 1; q <= p; q++) acc += value<T>(in[q]);
        return bits(acc);
    }));
}

template <class T>
T bcast(T v) {
    return value<T>(gather_compute(bits(v), [](const uint64_t* in, int) { return in[0]; }));
}

template <class T>
T add(T a, T b) { return a + b; }
template <class T>
T max(T a, T b) { return a > b ? a : b; }
template <class T>
T min(T a, T b) { return a < b ? a : b; }
}  // namespace

uint64_t* g_store_expect = nullptr;

void collectives_init() {
    g_in = static_cast<uint64_t*>(alloc_internal(sizeof(uint64_t) * static_cast<uint64_t>(PROCS)));
    g_out = static_cast<uint64_t*>(alloc_internal(64));
    g_store_expect = static_cast<uint64_t*>(alloc_internal(sizeof(uint64_t) * static_cast<uint64_t>(PROCS)));
}

void internal_barrier() {
    splitc_sync();
    if (PROCS > 1) g_backend->barrier();
}

bool all_agree(uint64_t v) {
    return gather_compute(v, [](const uint64_t* in, int) {
               for (int q = 1; q < PROCS; q++)
                   if (in[q] != in[0]) return uint64_t{0};
               return uint64_t{1};
           }) == 1;
}

}  // namespace splitc

using namespace splitc;

#define SPLITC_DEFINE_COLL(name, T)                                                          \
    extern "C" T all_reduce_to_one_add_##name(T v) { return reduce<T>(v, add<T>); }          \
    extern "C" T all_reduce_to_one_max_##name(T v) { return reduce<T>(v, max<T>); }          \
    extern "C" T all_reduce_to_one_min_##name(T v) { return reduce<T>(v, min<T>); }          \
    extern "C" T all_reduce_to_all_add_##name(T v) { return reduce<T>(v, add<T>); }          \
    extern "C" T all_reduce_to_all_max_##name(T v) { return reduce<T>(v, max<T>); }          \
    extern "C" T all_reduce_to_all_min_##name(T v) { return reduce<T>(v, min<T>); }          \
    extern "C" T all_bcast_##name(T v) { return bcast<T>(v); }                               \
    extern "C" T all_scan_add_##name(T v) { return scan_add<T>(v); }
SPLITC_DEFINE_COLL(int, int)
SPLITC_DEFINE_COLL(long, long)
SPLITC_DEFINE_COLL(double, double)
