// backend.h -- what a Split-C back end provides (docs/splitc.md, "Back ends").
//
// The runtime (access.cc) handles every operation whose global pointer is local, and
// checks every global pointer before a back end sees it; a back end moves the rest
// between processes. Four: am (AM-2 requests), via-rel and via-unrel (VIPL directly),
// and shm (same-host mapped memory, backend_shm.cc), which sits in front of one of the
// other three: it serves the processes of its host and hands the rest to it.
//
// Completion: an operation issued with Wait w adds its number of pieces to counter(w)
// when it is issued and takes one away as each piece completes (a get's data is in dst,
// a put's bytes are in the remote memory). The runtime waits by calling poll() until the
// counter is 0. A store completes nowhere at the sender: its owner calls landed_store()
// once the bytes are in its memory (the shm back end: when collect_stores() finds them
// counted by their same-host writers).
//
// The owner side of every request checks is_global() before touching memory, and
// answers a refusal; the caller's back end then calls bad_gptr() with the call the
// request came from (requests carry it: runtime.h, Call).
#pragma once

#include "runtime.h"

namespace splitc {

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;

    // Connects this process to every other (MYPROC and PROCS are set). Prints why and
    // returns false on failure.
    virtual bool start() = 0;
    // After the last barrier: nobody sends any more.
    virtual void stop() = 0;

    // proc is never MYPROC. n may be 0 (nothing moves, nothing counts).
    virtual void get(void* dst, int proc, uint64_t addr, size_t n, Wait w, uint8_t call) = 0;
    virtual void put(int proc, uint64_t addr, const void* src, size_t n, Wait w, uint8_t call) = 0;
    virtual void store(int proc, uint64_t addr, const void* src, size_t n, uint8_t call) = 0;
    // Runs r at proc (atomically there) and returns its result. Blocking.
    virtual int64_t atomic(int proc, const AtomicReq& r, uint8_t call) = 0;

    // Serves what has arrived (requests, replies); returns at once.
    virtual void poll() = 0;
    // Takes in the counts of bytes other processes stored here without a message (the
    // shm back end's): store_sync and all_store_sync call it while they wait.
    virtual void collect_stores() {}
    // Every process has entered (gets and puts are complete before: the runtime syncs).
    virtual void barrier() = 0;
    // Tells every other process to exit with code (best effort: splitc_exit).
    virtual void broadcast_exit(int code) = 0;
};

extern Backend* g_backend;

Backend* make_am_backend();
Backend* make_via_backend(bool reliable);  // via-rel (true), via-unrel (false)
// The same-host path (SPLITC_SHM): maps the heap and moves the data segment, shared with
// the processes of this host (libsoftvia_shm), before any back end starts; then the
// back end, which starts make_net() only if some process runs on another host.
void shm_map_memory();
Backend* make_shm_backend(Backend* (*make_net)());

}  // namespace splitc
