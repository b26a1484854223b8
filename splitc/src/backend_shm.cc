// backend_shm.cc -- Split-C with shared memory (the paper's section 5.3), on an unpatched
// kernel, over libsoftvia_shm (docs/shm.md).
//
// Every process's heap and data segment are shared memory mapped by every process of
// its host (shm_map_memory, before anything else starts). An operation on a same-host
// process's global memory is a load, a store or memcpy through the view of it, with one
// addition to the address; its completion is immediate (sync has nothing to wait for).
// What the paper left out is here too:
//   - memory made global outside those segments (the stack, malloc'd memory): the owner
//     exports it; the caller checks the owner's export table and copies through the
//     kernel (process_vm_readv/writev);
//   - atomics: fetch-add and cswap on an aligned word with the hardware's instructions
//     (the owner uses them too when it serves the network: atomics.cc); atomic_call, and
//     atomics on unaligned or unmapped words, through the owner's call queue, which it
//     drains whenever it polls, syncs or waits: the paper's planned "producer/consumer
//     queue containing functions for each process to execute";
//   - stores count their bytes in a counter per writer in the owner's heap, written
//     after the data with release order; store_sync collects the counters;
//   - the barrier: among the processes of a host, then one process per host in a
//     dissemination barrier over the network back end (the paper's hierarchy).
// Processes on other hosts are the network back end's (am, via-rel or via-unrel), which
// starts only when there are any.
#include <softvia_shm.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "backend.h"
#include "collectives.h"

namespace splitc {
namespace {

enum : int { H_ATOMIC = 1, H_EXIT = 2 };
constexpr uint32_t kMadeGlobalTag = 0x53504c43;  // "SPLC": exports of splitc_make_global
constexpr int kRounds = 17;                      // a dissemination barrier of up to 2^17 hosts
constexpr size_t kSlotWords = 8;                 // a store counter per cache line

struct PeerView {
    bool local = false;
    int64_t heap_off = 0, data_off = 0;  // local address = its address + offset
    uint64_t* slot = nullptr;            // this process's store counter in its heap (through the view)
    uint64_t sent = 0;                   // bytes this process ever stored there through the path
};

struct Made {
    uint64_t lo, hi;
    sv_shm_segid_t segid;
};

int64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

[[noreturn]] void shm_fatal(int rc, const char* what) {
    if (rc == -ESRCH)
        fatal("shm back end: lost process %d: it exited or was killed (%s); the job stops", sv_shm_lost_rank(), what);
    fatal("shm back end: %s: %s", what, sv_shm_last_error());
}

// ---- owner side: the call queue's handlers -----------------------------------------------
int h_atomic(int, const uint64_t a[SV_SHM_CALL_ARGS], int64_t* result, void*) {
    const uint64_t kind = a[0] & 0xff;
    const AtomicReq r{static_cast<AtomicKind>(kind), a[1], static_cast<int64_t>(a[2]), static_cast<int64_t>(a[3]), a[4]};
    if (kind > static_cast<uint64_t>(AtomicKind::kCswap) || !atomic_ok(r)) return -EACCES;
    *result = run_atomic(r);
    return 0;
}

int h_exit(int, const uint64_t a[SV_SHM_CALL_ARGS], int64_t*, void*) { end_process(static_cast<int>(a[0])); }

class ShmBackend final : public Backend {
public:
    explicit ShmBackend(Backend* (*make_net)()) : make_net_(make_net) {}

    const char* name() const override { return name_.c_str(); }

    bool start() override {
        // Symmetric memory the back end needs, zeroed now: before the network back end
        // starts, no process can have written to it (every process allocates the same).
        int most = 1;
        for (int h = 0; h < sv_shm_host_count(); h++) most = std::max(most, sv_shm_host_size(h));
        slots_ = static_cast<uint64_t*>(alloc_internal(uint64_t(most) * kSlotWords * 8));
        bar_flags_ = static_cast<uint64_t*>(alloc_internal(kRounds * 8));
        if (sv_shm_host_count() > 1) {
            net_ = make_net_();
            if (!net_->start()) return false;
            name_ = std::string("shm+") + net_->name();
            sv_shm_set_progress([](void* b) { static_cast<Backend*>(b)->poll(); }, net_);
        }
        if (sv_shm_set_handler(H_ATOMIC, h_atomic, nullptr) || sv_shm_set_handler(H_EXIT, h_exit, nullptr)) {
            fprintf(stderr, "splitc: shm back end: %s\n", sv_shm_last_error());
            return false;
        }
        heap_ = heap_range();
        const Range d = data_segment();
        seen_.assign(static_cast<size_t>(sv_shm_local_size()), 0);
        const int me = sv_shm_local_index(MYPROC);
        peers_.assign(static_cast<size_t>(PROCS), PeerView{});
        for (int p = 0; p < PROCS; p++) {
            if (p == MYPROC || sv_shm_local_index(p) < 0) continue;
            PeerView& v = peers_[static_cast<size_t>(p)];
            char* h = static_cast<char*>(sv_shm_translate(p, heap_.lo, 1));
            char* dv = d.hi > d.lo ? static_cast<char*>(sv_shm_translate(p, d.lo, 1)) : nullptr;
            if (!h || (d.hi > d.lo && !dv)) {
                fprintf(stderr, "splitc: shm back end: no view of process %d's memory\n", p);
                return false;
            }
            v.local = true;
            v.heap_off = static_cast<int64_t>(reinterpret_cast<uint64_t>(h) - heap_.lo);
            v.data_off = dv ? static_cast<int64_t>(reinterpret_cast<uint64_t>(dv) - d.lo) : 0;
            v.slot = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(slots_ + size_t(me) * kSlotWords) + v.heap_off);
        }
        net_hook_ = g_global_range_hook;  // the network back end's (via-rel registers ranges)
        g_global_range_hook = made_global;
        last_check_ = now_ns();
        return true;
    }

    void stop() override {
        if (net_) net_->stop();
    }

    void get(void* dst, int p, uint64_t a, size_t n, Wait w, uint8_t call) override {
        PeerView& v = peers_[static_cast<size_t>(p)];
        if (!v.local) return net_->get(dst, p, a, n, w, call);
        if (const char* q = direct(v, a, n))
            sv_shm_copy(dst, q, n);
        else
            copy(p, dst, a, n, false, call);
        tick();
    }

    void put(int p, uint64_t a, const void* src, size_t n, Wait w, uint8_t call) override {
        PeerView& v = peers_[static_cast<size_t>(p)];
        if (!v.local) return net_->put(p, a, src, n, w, call);
        if (char* q = direct(v, a, n))
            sv_shm_copy(q, src, n);
        else
            copy(p, const_cast<void*>(src), a, n, true, call);
        tick();
    }

    void store(int p, uint64_t a, const void* src, size_t n, uint8_t call) override {
        PeerView& v = peers_[static_cast<size_t>(p)];
        if (!v.local) return net_->store(p, a, src, n, call);
        if (char* q = direct(v, a, n))
            sv_shm_copy(q, src, n);
        else
            copy(p, const_cast<void*>(src), a, n, true, call);
        // Release: the owner that reads the count (collect_stores, acquire) sees the bytes.
        // This process is the counter's only writer: a store, not a locked add.
        __atomic_store_n(v.slot, v.sent += n, __ATOMIC_RELEASE);
        tick();
    }

    int64_t atomic(int p, const AtomicReq& r, uint8_t call) override {
        PeerView& v = peers_[static_cast<size_t>(p)];
        if (!v.local) return net_->atomic(p, r, call);
        if (r.kind != AtomicKind::kCall && (r.addr & 7) == 0)
            if (char* q = direct(v, r.addr, sizeof(long))) return hw_atomic(r, q);
        // The owner runs it (an atomic_call, or a word only it can change atomically).
        const uint64_t args[SV_SHM_CALL_ARGS] = {static_cast<uint64_t>(r.kind), r.addr, static_cast<uint64_t>(r.a),
                                                 static_cast<uint64_t>(r.b), r.fn, call};
        int64_t result = 0;
        const int rc = sv_shm_call(p, H_ATOMIC, args, &result);
        if (rc == -EACCES)
            bad_gptr(call, p, r.addr, r.kind == AtomicKind::kCall ? 1 : sizeof(long),
                     "not global memory of that process (or, for atomic_call, a function outside the program)");
        if (rc) lost_or_fatal(rc, call_name(call));
        return result;
    }

    void poll() override {
        sv_shm_poll();
        if (net_) net_->poll();
        if ((++polls_ & 1023) == 0) liveness();
    }

    void collect_stores() override {
        uint64_t d = 0;
        for (size_t i = 0; i < seen_.size(); i++) {
            // Acquire: pairs with the writer's release; its bytes are in before its count.
            const uint64_t c = __atomic_load_n(&slots_[i * kSlotWords], __ATOMIC_ACQUIRE);
            d += c - seen_[i];
            seen_[i] = c;
        }
        if (d) landed_store(d);
    }

    void barrier() override {
        const int rc = sv_shm_barrier(net_ ? between : nullptr, this);
        if (rc) lost_or_fatal(rc, "barrier");
    }

    // The processes of this host are told through their call queues (they exit when they
    // next poll), the other hosts through the network back end; then (up to 2 s) this
    // process waits for its host's processes to be gone, so none of them sees it leave
    // first and reports a lost process instead of the code.
    void broadcast_exit(int code) override {
        const uint64_t args[SV_SHM_CALL_ARGS] = {static_cast<uint64_t>(code)};
        for (int k = 0; k < sv_shm_local_size(); k++)
            if (sv_shm_local_rank(k) != MYPROC) sv_shm_send(sv_shm_local_rank(k), H_EXIT, args, 500);
        if (net_) net_->broadcast_exit(code);
        const int64_t until = now_ns() + 2000000000;
        for (int k = 0; k < sv_shm_local_size() && now_ns() < until;)
            if (sv_shm_local_rank(k) == MYPROC || sv_shm_is_alive(sv_shm_local_rank(k)) != 1)
                k++;
            else
                usleep(200);
    }

private:
    // Where [a, a+n) of a same-host process is here, when it is symmetric memory (the
    // heap, or the data segment's global part); the same rules as the owner's is_global.
    char* direct(const PeerView& v, uint64_t a, size_t n) const {
        if (a - heap_.lo < heap_.hi - heap_.lo && n <= heap_.hi - a) return reinterpret_cast<char*>(a + v.heap_off);
        if (in_global_data(a, n)) return reinterpret_cast<char*>(a + v.data_off);
        return nullptr;
    }

    // Memory the owner made global (splitc_make_global): found in its export table, then
    // copied through the view (inside its shared segments) or by the kernel. Anything
    // else is not global memory of that process.
    void copy(int p, void* buf, uint64_t a, size_t n, bool write, uint8_t call) {
        if (n == 0) return;
        sv_shm_export_info e;
        if (sv_shm_find_export(p, a, n, &e) != 0 || e.tag != kMadeGlobalTag)
            bad_gptr(call, p, a, n, "not global memory of that process");
        if (e.local) {
            char* q = static_cast<char*>(e.local) + (a - e.addr);
            write ? sv_shm_copy(q, buf, n) : sv_shm_copy(buf, q, n);
            return;
        }
        const int rc = write ? sv_shm_write(p, a, buf, n) : sv_shm_read(p, buf, a, n);
        if (rc) lost_or_fatal(rc, call_name(call));
    }

    // Every few thousand direct operations: serve the call queue (an exit request, peers'
    // atomic calls) and see whether the host's processes still live. A loop of reads from
    // a process that died would otherwise never end.
    void tick() {
        if (--countdown_ != 0) return;
        countdown_ = 16384;
        sv_shm_poll();
        liveness();
    }

    void liveness() {
        const int64_t t = now_ns();
        if (t - last_check_ < 2000000) return;
        last_check_ = t;
        const int rc = sv_shm_check_peers();
        if (rc) lost_or_fatal(rc, "a process of this host is gone");
    }

    // A process of this host is gone. It may have been told to exit by splitc_exit, which
    // tells one process after another: this one's exit request may be on its way. Serve
    // requests for a moment before calling it lost.
    [[noreturn]] void lost_or_fatal(int rc, const char* what) {
        if (rc == -ESRCH)
            for (const int64_t until = now_ns() + 100000000; now_ns() < until;) {
                sv_shm_poll();
                if (net_) net_->poll();
            }
        shm_fatal(rc, what);
    }

    // The host's first process, once all of the host have arrived: a dissemination
    // barrier among the hosts' first processes, each round a put of the barrier's number
    // into a partner's flag. Before leaving, its own puts are complete (their replies
    // in), so no reply comes back to a process that has left the job's last barrier.
    static void between(void* self) { static_cast<ShmBackend*>(self)->hosts_barrier(); }
    void hosts_barrier() {
        const int H = sv_shm_host_count(), h = sv_shm_host_of(MYPROC);
        bar_epoch_++;
        for (int k = 0; (1 << k) < H; k++) {
            const int to = sv_shm_host_leader((h + (1 << k)) % H);
            net_->put(to, reinterpret_cast<uint64_t>(&bar_flags_[k]), &bar_epoch_, sizeof bar_epoch_, Wait::kSync,
                      kInternal);
            while (__atomic_load_n(&bar_flags_[k], __ATOMIC_ACQUIRE) < bar_epoch_) poll();
        }
        while (st.outstanding) poll();
    }

    static void made_global(uint64_t lo, uint64_t hi, bool add);

    Backend* (*make_net_)();
    Backend* net_ = nullptr;
    std::string name_ = "shm";
    Range heap_{0, 0};
    std::vector<PeerView> peers_;
    uint64_t* slots_ = nullptr;      // symmetric: slot i counts bytes stored here by this host's i-th process
    std::vector<uint64_t> seen_;     // the counts collected so far
    uint64_t* bar_flags_ = nullptr;  // symmetric: the hosts' barrier flags, one per round
    uint64_t bar_epoch_ = 0;
    unsigned countdown_ = 16384, polls_ = 0;
    int64_t last_check_ = 0;
    void (*net_hook_)(uint64_t, uint64_t, bool) = nullptr;
    std::vector<Made> made_;
};

ShmBackend* g_shm = nullptr;

void ShmBackend::made_global(uint64_t lo, uint64_t hi, bool add) {
    ShmBackend& b = *g_shm;
    if (add) {
        sv_shm_segid_t s = 0;
        if (sv_shm_export(reinterpret_cast<void*>(lo), hi - lo, 0, kMadeGlobalTag, &s) != 0)
            fatal("splitc_make_global(%#llx, %llu): %s", (unsigned long long)lo, (unsigned long long)(hi - lo),
                  sv_shm_last_error());
        b.made_.push_back(Made{lo, hi, s});
    } else {
        auto it = std::find_if(b.made_.begin(), b.made_.end(), [&](const Made& m) { return m.lo == lo && m.hi == hi; });
        if (it != b.made_.end()) {
            sv_shm_unexport(it->segid);
            b.made_.erase(it);
        }
    }
    if (b.net_hook_) b.net_hook_(lo, hi, add);
}

}  // namespace

void shm_map_memory() {
    const Range h = heap_range();
    sv_shm_config c;
    sv_shm_config_default(&c);
    c.heap_base = h.lo;
    c.heap_size = h.hi - h.lo;
    c.flags = SV_SHM_MOVE_DATA;
    if (sv_shm_init(&c) != 0)
        fatal("start-up: the same-host path (SPLITC_SHM=on): %s. SPLITC_SHM=off sends everything through the NIC",
              sv_shm_last_error());
}

Backend* make_shm_backend(Backend* (*make_net)()) {
    static ShmBackend b(make_net);
    g_shm = &b;
    return &b;
}

}  // namespace splitc
