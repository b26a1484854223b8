// internal.h -- libsoftvia_shm's process-wide state and the helpers its parts share.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "ctl.h"
#include "softvia_shm.h"

namespace svshm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be address-free");

// What each process tells every other at start-up (through the launcher's allgather).
struct Info {
    uint64_t magic;
    int64_t pid;
    uint64_t sock_nonce;  // the random part of its start-up socket's name
    uint64_t uid;
    uint64_t host;  // identity of the host: kernel boot, network and PID namespaces
    uint64_t heap_base, heap_size;
    uint64_t data_lo, data_hi;
    uint64_t flags;
};

// One same-host process as this one sees it (this process too: its own addresses).
struct Peer {
    int rank = -1;
    pid_t pid = 0;
    int pidfd = -1;          // readable once the process has exited
    bool gone = false;       // read and written with __atomic builtins (is_gone): any thread may ask
    char* heap_view = nullptr;  // its heap memfd (heap, then control block), mapped here
    uint64_t view_size = 0;
    char* data_view = nullptr;  // its data segment, mapped here (or nullptr)
    uint64_t data_lo = 0, data_hi = 0;
    int64_t heap_off = 0;    // local address = peer address + heap_off (inside the heap)
    int64_t data_off = 0;    // the same inside the data segment
    Ctl ctl;
};

struct Attachment {
    char* map_lo;  // the new mapping (page-rounded)
    size_t map_len;
    void* addr;    // what sv_shm_attach returned
};

struct State {
    bool up = false;
    bool made = false;     // this process's heap exists: sv_shm_init runs once per process
    uint64_t sock_nonce = 0;
    int rank = -1, size = 0;
    uint32_t job_tag = 0;  // 24 bits, never 0
    uint8_t key[16]{};     // the job's secret: proves membership in the start-up exchange
    uint64_t heap_base = 0, heap_size = 0;
    uint64_t data_lo = 0, data_hi = 0;  // this process's moved data segment, or 0, 0
    int heap_fd = -1, data_fd = -1;     // open only during sv_shm_init
    char* ctl_base = nullptr;
    CtlLayout layout;
    std::vector<Info> infos;        // every rank's
    std::vector<int> local_of;      // rank -> index among this host's processes, or -1
    std::vector<int> host_of;       // rank -> host (numbered by lowest rank)
    std::vector<int> host_leader;   // host -> its lowest rank
    std::vector<int> host_size;     // host -> its processes
    std::vector<Peer> peers;        // by local index (this process included)
    int my_local = -1;
    uint32_t next_export = 3;       // segment index of the next export (1 heap, 2 data)
    std::vector<Attachment> attachments;
    // calls
    uint64_t ring_head = 0;  // the consumer's position in this process's ring
    sv_shm_handler_fn handlers[SV_SHM_MAX_HANDLERS]{};
    void* handler_ctx[SV_SHM_MAX_HANDLERS]{};
    bool in_handler = false;
    uint32_t call_id = 0;    // the last call's number (0 is never used)
    void (*progress)(void*) = nullptr;
    void* progress_arg = nullptr;
    // barrier
    uint64_t epoch = 0;
    // liveness
    int lost_rank = -1;
    int64_t last_check_ns = 0;
};
extern State S;

// Sets this thread's last error (printf-style) and returns -err.
int fail(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();
int64_t now_ns();

inline Peer* peer_of(int rank) {
    if (rank < 0 || rank >= S.size) return nullptr;
    const int li = S.local_of[static_cast<size_t>(rank)];
    return li < 0 ? nullptr : &S.peers[static_cast<size_t>(li)];
}
inline Ctl& my_ctl() { return S.peers[static_cast<size_t>(S.my_local)].ctl; }
inline bool is_gone(const Peer& p) { return __atomic_load_n(&p.gone, __ATOMIC_RELAXED); }

// Segment ids: job tag (24 bits) | rank (16) | index (24).
inline sv_shm_segid_t make_segid(int rank, uint32_t index) {
    return (uint64_t{S.job_tag} << 40) | (uint64_t(uint16_t(rank)) << 24) | (index & 0xffffffu);
}

// ---- parts -------------------------------------------------------------------------
// segments.cc
int make_heap(const sv_shm_config& cfg);
int move_data_segment();
int make_ctl();  // after the layout is known: this process's control block
int map_peer(Peer& p, int heap_fd, int data_fd, const Info& in);
void unmap_peer(Peer& p);
void add_own_exports();
// handoff.cc: the start-up exchange of memfds between the processes of this host.
int handoff_listen();  // before the allgather
int handoff(int timeout_ms);
void handoff_close();  // the listener, when start-up fails before handoff
// exports.cc: the owner's lookup of an export (a seqlock read of rank's table).
struct ExportView {
    uint64_t lo, hi;
    uint32_t index, flags, tag;
};
bool find_export(const Peer& p, uint64_t addr, uint64_t len, ExportView* out);
bool find_export_by_index(const Peer& p, uint32_t index, ExportView* out);
// liveness (job.cc): marks exited peers; true if every one is alive.
bool peers_alive();
// A waiting loop's turn (calls.cc): serves this process's calls, runs the progress
// function, checks liveness every few milliseconds and gives the core away after a
// while idle. Returns -ESRCH (error set) when the process the wait depends on (the one
// whose action ends it) has exited; another's exit does not end this wait (it may have
// left the job's last barrier, as it may).
struct Waiter {
    const Peer* on;
    unsigned turns = 0;
    explicit Waiter(const Peer* depends_on) : on(depends_on) {}
    int turn();
};

}  // namespace svshm
