// runtime.h -- libsplitc's internals: the state every part shares, the checks of global
// pointers, and the contract between the runtime and its back ends (backend.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "splitc.h"

namespace splitc {

// Which API call an operation came from, so that an error found later (at the owner, or
// at sync) still names it. The names are the API's (call_name).
enum Call : uint8_t {
#define SPLITC_CALL_IDS(name) kRead_##name, kWrite_##name, kGet_##name, kPut_##name, kStore_##name,
    SPLITC_CALL_IDS(char) SPLITC_CALL_IDS(short) SPLITC_CALL_IDS(int) SPLITC_CALL_IDS(long)
        SPLITC_CALL_IDS(longlong) SPLITC_CALL_IDS(float) SPLITC_CALL_IDS(double)
#undef SPLITC_CALL_IDS
    kBulkRead, kBulkWrite, kBulkGet, kBulkPut, kBulkStore,
    kAtomicCall, kAtomicFetchAdd, kAtomicCswap,
    kInternal,  // the runtime's own (collectives, all_store_sync)
    kCallCount
};
const char* call_name(uint8_t call);

// The kinds of remote operation every back end carries.
enum class Op : uint8_t { kGet, kPut, kStore, kAtomic };
const char* op_name(Op op);

enum class AtomicKind : uint8_t { kCall, kFetchAdd, kCswap };
struct AtomicReq {
    AtomicKind kind;
    uint64_t addr;
    int64_t a, b;  // fetch-add: a; cswap: a expected, b desired; call: a the argument
    uint64_t fn;   // call: the function (an address in the program's text)
};

// ---- process-wide state ------------------------------------------------------------
struct State {
    int64_t outstanding = 0;       // gets and puts issued and not complete (sync waits)
    int64_t blocking = 0;          // pieces of the one blocking operation in progress
    uint64_t stored = 0;           // bytes stored into this process, for store_sync (which takes them off)
    uint64_t landed = 0;           // bytes other processes stored here since the last all_store_sync
    std::vector<uint64_t> sent;    // bytes this process stored into each process
    bool in_handler = false;       // an atomic_call function is running (run_atomic)
};
extern State st;

// Which counter an operation's completion takes away from: sync's, or the one blocking
// call's (read, write, bulk_read, bulk_write, atomics).
enum class Wait : uint8_t { kSync, kBlocking };
inline int64_t& counter(Wait w) { return w == Wait::kSync ? st.outstanding : st.blocking; }

// ---- errors: every one stops the job with a message on stderr ---------------------------
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Ends this process at once (no atexit handlers, no destructors), disconnected from the
// launcher first: a PMIx launcher takes a process that leaves connected for a crash.
[[noreturn]] void end_process(int code);
// A global pointer the program gave is bad (the caller's side, or the owner's answer).
[[noreturn]] void bad_gptr(uint8_t call, int proc, uint64_t addr, size_t n, const char* why);
// A Split-C call made by an atomic_call function: it runs inside the owner's handling of
// a request, where the back end cannot be entered again (am cannot send from a handler;
// via would poll before the request's reply went). The job stops, naming the call.
[[noreturn]] void called_in_atomic(const char* call);
inline void not_in_atomic(const char* call) {
    if (st.in_handler) [[unlikely]]
        called_in_atomic(call);
}

// ---- global memory -------------------------------------------------------------------
// The program's data segment and the symmetric heap: at the same addresses in every
// process (checked at start-up), so the caller can check an address for any process.
bool is_symmetric(uint64_t addr, size_t n);
// Inside the data segment and none of what memory.cc leaves out of it (.got.plt, copies
// of library variables): the same answer in every process, as the layout is the same.
bool in_global_data(uint64_t addr, size_t n);
// The owner's check: symmetric memory, or memory this process made global.
bool is_global(uint64_t addr, size_t n);
// Whether fn is an address in the program's own text (the executable).
bool in_program_text(uint64_t fn);
// Finds the data segment and the program's code, and sizes the heap (SPLITC_HEAP_SIZE);
// then memory_map_heap() reserves it as private memory, or the shm back end maps it
// shared (shm_map_memory). Both before any back end starts.
void memory_init();
void memory_map_heap();

// The data segment and the heap, for back ends that register them with the NIC.
struct Range {
    uint64_t lo, hi;
};
Range data_segment();
Range text_segment();
Range heap_range();
// A back end that registers memory with its NIC hears of the ranges the program makes
// global and unmakes (splitc_make_global / splitc_unmake_global); nullptr: none does.
extern void (*g_global_range_hook)(uint64_t lo, uint64_t hi, bool add);

// Owner side of an atomic operation: whether it may run here (its target is global
// memory, a called function is in the program's text), and running it.
bool atomic_ok(const AtomicReq& r);
int64_t run_atomic(const AtomicReq& r);
// Fetch-add or cswap on the long at word (8-byte aligned) with the hardware's atomic
// instructions: atomic also against processes that reach the word through shared memory.
int64_t hw_atomic(const AtomicReq& r, void* word);

// Owner side: another process's store landed (the back end copied the bytes after
// is_global).
inline void landed_store(size_t n) {
    st.stored += n;
    st.landed += n;
}

// The collectives' symmetric scratch, allocated at start-up.
void collectives_init();

}  // namespace splitc
