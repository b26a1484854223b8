// runtime.cc -- main(): start-up (processes, heap, layout check, back end), the end of the
// job, errors, and the calls about the job as a whole (barrier, poll, exit).
#include <softvia_boot.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend.h"
#include "collectives.h"
#include "runtime.h"

extern "C" {
int splitc_myproc_ = 0;
int splitc_procs_ = 1;
}

namespace splitc {

State st;
Backend* g_backend = nullptr;

const char* call_name(uint8_t call) {
    static const char* const names[kCallCount] = {
#define SPLITC_CALL_NAMES(name) "read_" #name, "write_" #name, "get_" #name, "put_" #name, "store_" #name,
        SPLITC_CALL_NAMES(char) SPLITC_CALL_NAMES(short) SPLITC_CALL_NAMES(int) SPLITC_CALL_NAMES(long)
            SPLITC_CALL_NAMES(longlong) SPLITC_CALL_NAMES(float) SPLITC_CALL_NAMES(double)
#undef SPLITC_CALL_NAMES
        "bulk_read", "bulk_write", "bulk_get", "bulk_put", "bulk_store",
        "atomic_call", "atomic_fetch_add_long", "atomic_cswap_long",
        "the runtime (a collective)"};
    return call < kCallCount ? names[call] : "(unknown call)";
}

const char* op_name(Op op) {
    switch (op) {
        case Op::kGet: return "get";
        case Op::kPut: return "put";
        case Op::kStore: return "store";
        case Op::kAtomic: return "atomic";
    }
    return "?";
}

void fatal(const char* fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "splitc: process %d: ", MYPROC);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    // A failing process ends the job: softvia-run brings the others down.
    end_process(1);
}

void end_process(int code) {
    fflush(nullptr);
    sv_boot_finalize();
    _exit(code);
}

void bad_gptr(uint8_t call, int proc, uint64_t addr, size_t n, const char* why) {
    fatal("%s: global pointer to process %d, address %#llx (%zu bytes): %s", call_name(call), proc,
          static_cast<unsigned long long>(addr), n, why);
}

void called_in_atomic(const char* call) {
    fatal("%s: called inside an atomic_call function; such a function may only work on the memory it was "
          "given (it runs while its owner handles the request)",
          call);
}

namespace {

Backend* choose_backend() {
    const char* s = getenv("SPLITC_BACKEND");
    if (!s || !*s || strcmp(s, "am") == 0) return make_am_backend();
    if (strcmp(s, "via-rel") == 0) return make_via_backend(true);
    if (strcmp(s, "via-unrel") == 0) return make_via_backend(false);
    fatal("SPLITC_BACKEND='%s': accepted values are am, via-rel and via-unrel", s);
}

// SPLITC_SHM: whether processes of one host reach each other through shared memory
// (default on; a job of one process has no one to share with).
bool shm_setting() {
    const char* s = getenv("SPLITC_SHM");
    if (!s || !*s || strcmp(s, "on") == 0 || strcmp(s, "1") == 0) return true;
    if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0) return false;
    fatal("SPLITC_SHM='%s': accepted values are on (the default) and off", s);
}

// Split-C relies on global variables being at the same address in every process: the
// processes compare where their data segment, code and heap are (and that they agree
// on SPLITC_SHM, which decides how the heap is made).
struct Layout {
    uint64_t data_lo, data_hi, text_lo, text_hi, heap_lo, heap_hi, entry, shm;
};

void check_layout(int (*entry)(int, char**), bool shm) {
    const Range d = data_segment(), t = text_segment(), h = heap_range();
    Layout mine{d.lo, d.hi, t.lo, t.hi, h.lo, h.hi, reinterpret_cast<uint64_t>(entry), shm};
    if (PROCS == 1) return;
    std::vector<Layout> all(static_cast<size_t>(PROCS));
    int rc = sv_boot_allgather(&mine, sizeof mine, all.data(), 60000);
    if (rc != 0)
        fatal("start-up: cannot compare memory layouts through the launcher: %s (%s)", strerror(-rc),
              sv_boot_last_error());
    for (int p = 1; p < PROCS; p++) {
        const Layout& a = all[0];
        const Layout& b = all[static_cast<size_t>(p)];
        if (memcmp(&a, &b, sizeof a) == 0) continue;
        if (a.shm != b.shm)
            fatal("processes 0 and %d disagree on SPLITC_SHM (%s and %s): give every process the same", p,
                  a.shm ? "on" : "off", b.shm ? "on" : "off");
        fatal("processes 0 and %d have different memory layouts (data %#llx-%#llx and %#llx-%#llx, code %#llx and "
              "%#llx, heap %#llx+%llu and %#llx+%llu): global variables would not be at the same address "
              "everywhere. Build the program as a non-PIE executable (the flags of `pkg-config --cflags --libs "
              "splitc`, or link softvia::splitc) and give every process the same SPLITC_HEAP_SIZE",
              p, (unsigned long long)a.data_lo, (unsigned long long)a.data_hi, (unsigned long long)b.data_lo,
              (unsigned long long)b.data_hi, (unsigned long long)a.entry, (unsigned long long)b.entry,
              (unsigned long long)a.heap_lo, (unsigned long long)(a.heap_hi - a.heap_lo),
              (unsigned long long)b.heap_lo, (unsigned long long)(b.heap_hi - b.heap_lo));
    }
}

void start(int (*entry)(int, char**)) {
    int rank = 0, size = 1;
    int rc = sv_boot_init(&rank, &size);
    if (rc != 0) fatal("start-up: the launcher's environment is not usable: %s", sv_boot_last_error());
    if (size > SPLITC_MAX_PROCS) fatal("start-up: %d processes; at most %d", size, SPLITC_MAX_PROCS);
    splitc_myproc_ = rank;
    splitc_procs_ = size;
    st.sent.assign(static_cast<size_t>(size), 0);
    memory_init();
    const bool shm = shm_setting() && PROCS > 1;
    check_layout(entry, shm);
    if (shm) {
        shm_map_memory();
        g_backend = make_shm_backend(choose_backend);
    } else {
        memory_map_heap();
        g_backend = choose_backend();
    }
    if (!g_backend->start()) fatal("start-up: the %s back end could not connect the processes", g_backend->name());
    collectives_init();
    internal_barrier();
}

}  // namespace
}  // namespace splitc

using namespace splitc;

extern "C" {

// main() (main.c, linked into the program) calls this with the program's splitc_main.
int splitc_run(int argc, char** argv, int (*entry)(int, char**)) {
    start(entry);
    int rc = entry(argc, argv);
    // Nobody leaves while others may still be using its memory.
    internal_barrier();
    g_backend->stop();
    return rc;
}

void barrier(void) {
    not_in_atomic("barrier");
    internal_barrier();
}

void splitc_poll(void) {
    not_in_atomic("splitc_poll");
    if (PROCS > 1) g_backend->poll();
}

void splitc_exit(int code) {
    if (PROCS > 1) g_backend->broadcast_exit(code);
    end_process(code);
}

const char* splitc_backend(void) { return g_backend ? g_backend->name() : "none"; }

}  // extern "C"
