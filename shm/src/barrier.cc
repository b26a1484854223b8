// barrier.cc -- the barrier among the processes of one host: a dissemination barrier
// (ceil(log2 n) rounds, each a flag written into one peer's block), or, when the host's
// first process must do something once all have arrived (a barrier among hosts: the
// paper's hierarchy), arrivals gathered in its block and one release word.
//
// Flags hold barrier numbers (epochs), which only grow: nothing is reset, and a peer
// already at the next barrier writes a larger number, which still satisfies this one.
#include <cerrno>

#include "internal.h"

namespace svshm {
namespace {

// Waits until *flag holds epoch e or more, keeping the process's duties going. A peer
// may set the flag and exit at once (it left the job's last barrier): its flag counts,
// so the flag is read again before a loss is reported.
int wait_for(const Line* flag, uint64_t e, const Peer& writer) {
    Waiter w(&writer);
    // Acquire: what the writer did before its release store is seen after the barrier.
    while (flag->v.load(std::memory_order_acquire) < e)
        if (const int rc = w.turn()) return flag->v.load(std::memory_order_acquire) >= e ? 0 : rc;
    return 0;
}

}  // namespace
}  // namespace svshm

using namespace svshm;

extern "C" int sv_shm_barrier(void (*between)(void*), void* arg) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_barrier: not initialised");
    if (S.in_handler) return fail(EDEADLK, "sv_shm_barrier: called from a handler");
    const uint64_t e = ++S.epoch;
    const uint32_t n = static_cast<uint32_t>(S.peers.size()), me = static_cast<uint32_t>(S.my_local);
    int rc = 0;
    if (!between) {
        for (int k = 0; (1u << k) < n; k++) {
            // Release: this process's stores before the barrier are seen by whoever reads the flag.
            S.peers[(me + (1u << k)) % n].ctl.dissem(k)->v.store(e, std::memory_order_release);
            if ((rc = wait_for(my_ctl().dissem(k), e, S.peers[(me + n - (1u << k) % n) % n]))) return rc;
        }
        return 0;
    }
    const Ctl& first = S.peers[0].ctl;
    if (me != 0) {
        first.arrive(me)->v.store(e, std::memory_order_release);
        return wait_for(first.release(), e, S.peers[0]);
    }
    for (uint32_t i = 1; i < n; i++)
        if ((rc = wait_for(first.arrive(i), e, S.peers[i]))) return rc;
    between(arg);
    first.release()->v.store(e, std::memory_order_release);
    return 0;
}
