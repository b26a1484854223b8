/*
 * splitc.h -- the Split-C global address space as a C library (libsplitc), over softvia.
 *
 * Split-C programs were written in a C dialect whose compiler turned every access through
 * a global pointer into a call of its runtime; here the program makes those calls itself,
 * under Split-C's names: read/write (blocking), get/put (split-phase, Split-C's `:=`,
 * completed by sync()), store (signalling, Split-C's `:-`, completed at the owner by
 * store_sync()), bulk forms of each, spread arrays, collectives and atomic procedures.
 *
 * The program provides `int splitc_main(int argc, char **argv)`; the library provides
 * main(), which starts the runtime (every process of the job, connected), calls
 * splitc_main, and ends the job with its return value. Start it with softvia-run -n N.
 * docs/splitc.md has the design, the back ends (SPLITC_BACKEND) and the figures.
 *
 * Global memory is the same in every process: the program's global variables (build it
 * with the flags pkg-config splitc or softvia::splitc give: a non-PIE executable, and
 * the runtime checks the layout at start-up) and the memory of the all_* allocators. A
 * global pointer to anything else works once its owner has made it global
 * (splitc_make_global). Every call that takes a global pointer checks it; a bad one (a
 * process out of range, an address outside the owner's global memory) stops the job
 * with a message naming the call, the process and the address.
 *
 * Not thread-safe: one thread per process makes Split-C calls.
 */
#ifndef SPLITC_H
#define SPLITC_H

#include <stddef.h>
#include <stdint.h>
/* POSIX declares sync(2) in <unistd.h>; it is included here, before the sync() macro
 * below, so a program that includes it too (before or after) still compiles, and its
 * sync() is Split-C's. So are the C++ headers with a member named sync. */
#include <unistd.h>
#ifdef __cplusplus
/* The C++ library declares members named sync (streams, stream buffers, wbuffer_convert,
 * syncbuf); the macro below would rename or break them in a header included after this
 * one (<iostream> then fails to compile). They are read here, before it. */
#include <fstream>
#include <iostream>
#include <locale>
#include <sstream>
#include <streambuf>
#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<syncstream>)
#include <syncstream>
#endif
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* libsplitc is built with hidden visibility; what this header declares is its API. */
#pragma GCC visibility push(default)

/* ---- processes ------------------------------------------------------------------- */
extern int splitc_myproc_;
extern int splitc_procs_;
#define MYPROC (splitc_myproc_ + 0) /* this process, 0..PROCS-1 (not assignable) */
#define PROCS (splitc_procs_ + 0)   /* processes in the job */

int splitc_main(int argc, char **argv); /* the program's entry point */
/* What main() does (libsplitc_main.a, which pkg-config splitc and softvia::splitc link
 * in): starts the runtime, runs entry, ends the job. A program with a main of its own
 * calls it from there. */
int splitc_run(int argc, char **argv, int (*entry)(int, char **));

/* Completes this process's outstanding gets and puts (as sync() does), then returns once
 * every process has entered the barrier. */
void barrier(void);
/* Ends the whole job with exit status code, from any one process. */
void splitc_exit(int code) __attribute__((noreturn));
/* Serves requests that have arrived and returns at once: for a program that spins on a
 * flag another process's store will set. */
void splitc_poll(void);
/* The back end in use: "am", "via-rel", "via-unrel". */
const char *splitc_backend(void);

/* ---- global pointers --------------------------------------------------------------- */
/* Plain data: a process number and an address in that process, in one 64-bit word (an
 * x86-64 user address has 47 bits). Copy it anywhere, send it to another process. */
typedef struct {
    uint64_t bits;
} gptr_t;
#define SPLITC_ADDR_BITS 48
#define SPLITC_ADDR_MASK ((UINT64_C(1) << SPLITC_ADDR_BITS) - 1)
#define SPLITC_MAX_PROCS 65535

static inline gptr_t toglobal(int proc, const void *addr) {
    gptr_t g = {((uint64_t)(uint16_t)proc << SPLITC_ADDR_BITS) | ((uint64_t)(uintptr_t)addr & SPLITC_ADDR_MASK)};
    return g;
}
static inline int toproc(gptr_t g) { return (int)(g.bits >> SPLITC_ADDR_BITS); }
/* The address part, whichever process it is in (only meaningful there). */
static inline void *toaddr(gptr_t g) { return (void *)(uintptr_t)(g.bits & SPLITC_ADDR_MASK); }
static inline int is_local(gptr_t g) { return toproc(g) == MYPROC; }
/* The local address, or NULL if g points into another process. */
static inline void *tolocal(gptr_t g) { return is_local(g) ? toaddr(g) : NULL; }
static inline gptr_t gptr_add(gptr_t g, ptrdiff_t bytes) {
    gptr_t r = {(g.bits & ~SPLITC_ADDR_MASK) | ((g.bits + (uint64_t)bytes) & SPLITC_ADDR_MASK)};
    return r;
}
static inline int gptr_eq(gptr_t a, gptr_t b) { return a.bits == b.bits; }

/* ---- reads, writes, gets, puts and stores of the basic types ------------------------ */
/*   T read_T(gptr_t src)            blocking read
 *   void write_T(gptr_t dst, T v)   blocking: returns once v is in the remote memory
 *   void get_T(T *dst, gptr_t src)  split-phase (Split-C's dst := *src); sync() completes
 *   void put_T(gptr_t dst, T v)     split-phase (*dst := v); sync() completes
 *   void store_T(gptr_t dst, T v)   signalling store (*dst :- v): no completion here; the
 *                                   owner's store_sync counts its bytes
 * for T in char, short, int, long, longlong (long long), float, double. */
#define SPLITC_DECLARE_TYPE(name, T)              \
    T read_##name(gptr_t src);                    \
    void write_##name(gptr_t dst, T v);           \
    void get_##name(T *dst, gptr_t src);          \
    void put_##name(gptr_t dst, T v);             \
    void store_##name(gptr_t dst, T v);
SPLITC_DECLARE_TYPE(char, char)
SPLITC_DECLARE_TYPE(short, short)
SPLITC_DECLARE_TYPE(int, int)
SPLITC_DECLARE_TYPE(long, long)
SPLITC_DECLARE_TYPE(longlong, long long)
SPLITC_DECLARE_TYPE(float, float)
SPLITC_DECLARE_TYPE(double, double)
#undef SPLITC_DECLARE_TYPE

/* Bulk forms: n bytes. */
void bulk_read(void *dst, gptr_t src, size_t n);
void bulk_write(gptr_t dst, const void *src, size_t n);
void bulk_get(void *dst, gptr_t src, size_t n);
void bulk_put(gptr_t dst, const void *src, size_t n);
void bulk_store(gptr_t dst, const void *src, size_t n);

/* Waits until every get and put this process issued has completed. */
void splitc_sync(void);
#define sync() splitc_sync()
/* Waits until bytes bytes have been stored into this process (by anyone's store_T /
 * bulk_store) since the last reset_store_sync() (or the start), then takes them off the
 * count. */
void store_sync(size_t bytes);
void reset_store_sync(void);
/* Collective: returns once every store issued by every process has landed; the store
 * count starts again from 0. */
void all_store_sync(void);

/* ---- global memory ------------------------------------------------------------------ */
/* Collectives (every process makes the same call; each returns once all have): */
/* nblocks blocks of blocksize bytes spread over the processes; returns the same local
 * address in every process. Block i lives on process i % PROCS at local offset
 * (i / PROCS) * blocksize. Zeroed. NULL (in every process) if the heap is full. */
void *all_spread_malloc(size_t nblocks, size_t blocksize);
void all_spread_free(void *base);
/* One block of n bytes per process, at the same local address everywhere. Zeroed. */
void *all_malloc(size_t n);
void all_free(void *base);
/* The global pointer to block i of a spread array. */
static inline gptr_t spread_gptr(void *spread_base, size_t blocksize, size_t i) {
    return toglobal((int)(i % (size_t)PROCS), (char *)spread_base + (i / (size_t)PROCS) * blocksize);
}
/* Not collective: makes [addr, addr+n) of this process reachable through global
 * pointers (a stack array, malloc'd memory), until splitc_unmake_global(addr). */
void splitc_make_global(void *addr, size_t n);
void splitc_unmake_global(void *addr);

/* ---- collectives on values ---------------------------------------------------------- */
/*   all_reduce_to_one_{add,max,min}_T(v)  the result at process 0 (others: unspecified)
 *   all_reduce_to_all_{add,max,min}_T(v)  the result everywhere
 *   all_bcast_T(v)                        process 0's v, everywhere
 *   all_scan_add_T(v)                     the sum of v over processes 0..MYPROC (inclusive)
 * for T in int, long, double. */
#define SPLITC_DECLARE_COLL(name, T)             \
    T all_reduce_to_one_add_##name(T v);         \
    T all_reduce_to_one_max_##name(T v);         \
    T all_reduce_to_one_min_##name(T v);         \
    T all_reduce_to_all_add_##name(T v);         \
    T all_reduce_to_all_max_##name(T v);         \
    T all_reduce_to_all_min_##name(T v);         \
    T all_bcast_##name(T v);                     \
    T all_scan_add_##name(T v);
SPLITC_DECLARE_COLL(int, int)
SPLITC_DECLARE_COLL(long, long)
SPLITC_DECLARE_COLL(double, double)
#undef SPLITC_DECLARE_COLL

/* ---- atomic remote procedures --------------------------------------------------------- */
/* Runs fn(address of target at its owner, arg) at the owner of target, atomically with
 * respect to every other atomic call and request handled there, and returns its result.
 * fn must be a function of the program itself (the executable, which is at the same
 * address in every process), not of a shared library. */
typedef int64_t (*splitc_atomic_fn)(void *addr, int64_t arg);
int64_t atomic_call(splitc_atomic_fn fn, gptr_t target, int64_t arg);
/* *target += v; returns the old value. */
long atomic_fetch_add_long(gptr_t target, long v);
/* if (*target == expected) *target = desired; returns the old value. */
long atomic_cswap_long(gptr_t target, long expected, long desired);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* SPLITC_H */
