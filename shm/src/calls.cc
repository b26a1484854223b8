// calls.cc -- requests a same-host process runs for its peers: a ring of call cells in
// each process's control block (many producers: its peers; one consumer: itself),
// handlers by index, replies into the caller's reply slot.
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "internal.h"

namespace svshm {
namespace {

// Runs a call here: the handler's status (0 or its refusal) and result, or -ENOENT
// without a handler.
int64_t run(int src, unsigned index, const uint64_t* args, int32_t* status) {
    sv_shm_handler_fn fn = index < SV_SHM_MAX_HANDLERS ? S.handlers[index] : nullptr;
    if (!fn) {
        *status = -ENOENT;
        return 0;
    }
    int64_t v = 0;
    S.in_handler = true;
    const int rc = fn(src, args, &v, S.handler_ctx[index]);
    S.in_handler = false;
    *status = rc < 0 ? rc : 0;
    return v;
}

// Takes a ticket in p's ring and fills its cell. A full ring is waited out, serving our
// own ring meanwhile (its owner may be waiting for us); deadline_ns < 0: no limit.
int enqueue(Peer& p, int index, const uint64_t* args, uint8_t flags, uint32_t id, int64_t deadline_ns) {
    const Ctl& c = p.ctl;
    const uint64_t mask = S.layout.ring_cap - 1;
    Waiter w(&p);
    for (;;) {
        uint64_t pos = c.ring_tail()->v.load(std::memory_order_relaxed);
        CallCell& cell = c.ring()[pos & mask];
        // Pairs with the owner's release when it consumed the cell: free once seq == pos.
        const uint64_t seq = cell.seq.load(std::memory_order_acquire);
        const int64_t dif = static_cast<int64_t>(seq - pos);
        if (dif == 0) {
            if (!c.ring_tail()->v.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) continue;
            cell.src = static_cast<uint16_t>(S.rank);
            cell.handler = static_cast<uint8_t>(index);
            cell.flags = flags;
            cell.id = id;
            memcpy(cell.args, args, sizeof cell.args);
            // The owner reads the fields only after it sees this mark (its acquire in poll).
            cell.seq.store(pos + 1, std::memory_order_release);
            return 0;
        }
        if (dif > 0) continue;  // another producer took this ticket: take the next
        if (deadline_ns >= 0 && now_ns() > deadline_ns)
            return fail(EAGAIN, "process %d's call queue stayed full", p.rank);
        if (const int rc = w.turn()) return rc;
    }
}

int check_call(const char* call, int rank, int index, const uint64_t* args, Peer** p) {
    if (!S.up) return fail(EINVAL, "%s: not initialised", call);
    if (S.in_handler) return fail(EDEADLK, "%s: called from a handler (it runs inside the owner's poll)", call);
    if (index < 0 || index >= SV_SHM_MAX_HANDLERS)
        return fail(EINVAL, "%s: handler index %d is out of range (0..%d)", call, index, SV_SHM_MAX_HANDLERS - 1);
    if (!args) return fail(EINVAL, "%s: args is NULL", call);
    *p = peer_of(rank);
    if (!*p)
        return fail(rank >= 0 && rank < S.size ? EREMOTE : EINVAL, "%s: rank %d is %s", call, rank,
                    rank >= 0 && rank < S.size ? "on another host" : "not a process of the job");
    if (is_gone(**p)) return fail(ESRCH, "%s: process %d (pid %d) has exited", call, rank, (*p)->pid);
    return 0;
}

}  // namespace

int Waiter::turn() {
    const int served = S.in_handler ? 0 : sv_shm_poll();
    if (S.progress) S.progress(S.progress_arg);
    if ((++turns & 255) == 0) {
        if (now_ns() - S.last_check_ns > 2000000) peers_alive();
        if (on && is_gone(*on)) return fail(ESRCH, "process %d (pid %d) of this host has exited", on->rank, on->pid);
        // On a core shared with the process we wait for, let it run.
        if (!served) sched_yield();
    }
    return 0;
}

}  // namespace svshm

using namespace svshm;

extern "C" {

int sv_shm_set_handler(int index, sv_shm_handler_fn fn, void* ctx) {
    clear_error();
    if (index < 0 || index >= SV_SHM_MAX_HANDLERS)
        return fail(EINVAL, "sv_shm_set_handler: index %d is out of range (0..%d)", index, SV_SHM_MAX_HANDLERS - 1);
    S.handlers[index] = fn;
    S.handler_ctx[index] = ctx;
    return 0;
}

void sv_shm_set_progress(void (*fn)(void*), void* arg) {
    S.progress = fn;
    S.progress_arg = arg;
}

int sv_shm_poll(void) {
    if (!S.up || S.in_handler) return 0;
    const Ctl& c = my_ctl();
    const uint64_t cap = S.layout.ring_cap;
    int n = 0;
    for (;;) {
        CallCell& cell = c.ring()[S.ring_head & (cap - 1)];
        // Pairs with the producer's release of seq = ticket + 1: its fields are complete.
        if (cell.seq.load(std::memory_order_acquire) != S.ring_head + 1) return n;
        const int src = cell.src;
        const uint8_t index = cell.handler, flags = cell.flags;
        const uint32_t id = cell.id;
        uint64_t args[SV_SHM_CALL_ARGS];
        memcpy(args, cell.args, sizeof args);
        // Free for the producer whose ticket is a lap ahead (it reads seq with acquire).
        cell.seq.store(S.ring_head + cap, std::memory_order_release);
        S.ring_head++;
        int32_t status = 0;
        const int64_t v = run(src, index, args, &status);
        n++;
        Peer* q = peer_of(src);
        if ((flags & kCallNoReply) || !q || is_gone(*q)) continue;
        ReplySlot* r = q->ctl.reply(static_cast<uint32_t>(S.my_local));
        r->value.store(v, std::memory_order_relaxed);
        r->status.store(status, std::memory_order_relaxed);
        r->ready.store(id, std::memory_order_release);  // the caller's acquire sees value and status
    }
}

int sv_shm_call(int rank, int index, const uint64_t args[SV_SHM_CALL_ARGS], int64_t* result) {
    clear_error();
    Peer* p;
    int rc = check_call("sv_shm_call", rank, index, args, &p);
    if (rc) return rc;
    int32_t status = 0;
    int64_t v;
    if (rank == S.rank) {
        v = run(rank, static_cast<unsigned>(index), args, &status);
    } else {
        // The reply slot only the callee writes; this call's number tells its reply from
        // that of an earlier call abandoned before its answer came.
        ReplySlot* r = my_ctl().reply(static_cast<uint32_t>(S.local_of[static_cast<size_t>(rank)]));
        const uint32_t id = ++S.call_id ? S.call_id : ++S.call_id;
        if ((rc = enqueue(*p, index, args, 0, id, -1))) return rc;
        Waiter w(p);
        while (r->ready.load(std::memory_order_acquire) != id)
            if ((rc = w.turn())) return rc;
        status = r->status.load(std::memory_order_relaxed);
        v = r->value.load(std::memory_order_relaxed);
    }
    if (status == -ENOENT) return fail(ENOENT, "sv_shm_call: process %d has no handler %d", rank, index);
    if (status) return fail(-status, "sv_shm_call: process %d's handler %d refused: %s", rank, index, strerror(-status));
    if (result) *result = v;
    return 0;
}

int sv_shm_send(int rank, int index, const uint64_t args[SV_SHM_CALL_ARGS], int timeout_ms) {
    clear_error();
    Peer* p;
    int rc = check_call("sv_shm_send", rank, index, args, &p);
    if (rc) return rc;
    if (rank == S.rank) {
        int32_t status;
        run(rank, static_cast<unsigned>(index), args, &status);
        return 0;
    }
    return enqueue(*p, index, args, kCallNoReply, 0, timeout_ms < 0 ? -1 : now_ns() + int64_t(timeout_ms) * 1000000);
}

}  // extern "C"
