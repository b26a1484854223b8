// spmd.cc -- SPMD start-up for programs launched by softvia-run: one bundle, one
// endpoint, translation index i = rank i, and collectives that poll while they wait.
// Built on the AM_* calls, plus the few internal hooks internal.h declares for it.
#include "internal.h"

#include <softvia_boot.h>

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
constexpr int kBootMs = 60000;
int s_rank = 0, s_size = 1, s_gen = 0, s_ag_gen = 0;
bool s_up = false;
eb_t s_eb = nullptr;
ep_t s_ep = nullptr;
void* s_seg = nullptr;

int fail(const char* what, int rc) {
    fprintf(stderr, "amvia: SPMD start-up: %s (%s)\n", what, AMX_ErrorString(rc));
    return rc;
}

// Waits for launcher key `key` (up to len bytes into buf, *got its stored length) while
// polling the NIC, so this rank keeps answering its peers meanwhile. A dead peer ends the
// wait with AM_ERR_NOT_SENT, and so does the deadline (0: none); with arrived_may_leave a
// key that is there by then still counts (a rank that saw every key may leave at once).
int wait_key(const char* key, void* buf, size_t len, size_t* got, uint64_t deadline_ms, bool arrived_may_leave) {
    unsigned turn = 0;
    for (;;) {
        int e = sv_boot_get(key, buf, len, got, 0);
        if (e == 0) return AM_OK;
        if (e != -ETIMEDOUT && e != -ENOENT) return AM_ERR_RESOURCE;
        if (softvia::am::any_peer_dead(s_ep) || (deadline_ms && softvia::am::now_ms() > deadline_ms)) {
            if (arrived_may_leave && sv_boot_get(key, buf, len, got, 0) == 0) return AM_OK;
            return AM_ERR_NOT_SENT;
        }
        AM_Poll(s_eb);
        if ((++turn & 15) == 0) sched_yield();
    }
}

// The exit's last barrier, through the launcher's store, polling the NIC while it waits:
// a rank that has quiesced still reads and acknowledges what the others send while they
// quiesce (their credit returns). The launcher's own barrier does not poll, and a rank
// waiting in it left such a frame unacknowledged until the other's quiesce gave up after
// 2 s (over udp, about every second run).
int exit_barrier() {
    char key[48];
    snprintf(key, sizeof key, "amx.exit.%d", s_rank);
    const char here = 1;
    if (sv_boot_put(key, &here, 1) != 0) return AM_ERR_RESOURCE;
    const uint64_t end = softvia::am::now_ms() + kBootMs;
    for (int r = 0; r < s_size; r++) {
        snprintf(key, sizeof key, "amx.exit.%d", r);
        char v;
        size_t got = 0;
        // A rank gone is an error only if it never arrived.
        if (int rc = wait_key(key, &v, 1, &got, end, true)) return rc;
    }
    return AM_OK;
}
}  // namespace

AMX_API int AMX_SPMDMyProc(void) { return s_rank; }
AMX_API int AMX_SPMDNumProcs(void) { return s_size; }
AMX_API void* AMX_SPMDSegment(void) { return s_seg; }

AMX_API int AMX_SPMDStartup(tag_t tag, uintptr_t seg_bytes, eb_t* eb, ep_t* ep) {
    if (!eb || !ep) return AM_ERR_BAD_ARG;
    if (s_up) return AM_ERR_RESOURCE;  // once per process
    if (sv_boot_init(&s_rank, &s_size) != 0 || s_size < 1) {
        // The launcher's environment is incomplete or wrong: say which setting.
        std::string why = std::string("start-up through the launcher failed: ") + sv_boot_last_error();
        return fail(why.c_str(), AM_ERR_RESOURCE);
    }
    int rc = AM_Init();
    if (rc != AM_OK) return fail("AM_Init", rc);
    if ((rc = AM_AllocateBundle(AM_SEQ, &s_eb)) != AM_OK) return fail("AM_AllocateBundle", rc);
    en_t me;
    if ((rc = AM_AllocateEndpoint(s_eb, &s_ep, &me)) != AM_OK) return fail("AM_AllocateEndpoint", rc);
    if ((rc = AM_SetTag(s_ep, tag)) != AM_OK) return fail("AM_SetTag", rc);
    if (s_size > AMX_DEFAULT_TRANSLATIONS && (rc = AM_SetNumTranslations(s_ep, s_size)) != AM_OK)
        return fail("AM_SetNumTranslations", rc);
    if (seg_bytes) {
        size_t len = (seg_bytes + 4095) & ~uintptr_t(4095);
        s_seg = aligned_alloc(4096, len);
        if (!s_seg) return fail("segment allocation", AM_ERR_RESOURCE);
        memset(s_seg, 0, len);
        if ((rc = AM_SetSeg(s_ep, s_seg, seg_bytes)) != AM_OK) return fail("AM_SetSeg", rc);
    }
    // Nobody can send before every rank has mapped everyone, so the launcher's
    // all-gather (which does not poll) is safe here.
    en_t* names = static_cast<en_t*>(calloc(size_t(s_size), sizeof(en_t)));
    if (!names) return fail("memory", AM_ERR_RESOURCE);
    if (sv_boot_allgather(&me, sizeof me, names, kBootMs) != 0) {
        free(names);
        std::string why = std::string("exchanging endpoint names through the launcher: ") + sv_boot_last_error();
        return fail(why.c_str(), AM_ERR_RESOURCE);
    }
    for (int r = 0; r < s_size && rc == AM_OK; r++) rc = AM_Map(s_ep, r, names[r], tag);
    free(names);
    if (rc != AM_OK) return fail("AM_Map", rc);
    // Every connection up and every segment announced, so a long message right after
    // start-up finds its destination.
    uint64_t turns = 0;
    while (!softvia::am::all_peers_ready(s_ep)) {
        if (softvia::am::any_peer_dead(s_ep)) return fail("a rank went away during start-up", AM_ERR_NOT_SENT);
        AM_Poll(s_eb);
        if (++turns % 64 == 0) sched_yield();
        if (turns > 50000000ull) return fail("connections did not come up", AM_ERR_NOT_SENT);
    }
    s_up = true;
    if ((rc = AMX_SPMDBarrier()) != AM_OK) return fail("first barrier", rc);
    *eb = s_eb;
    *ep = s_ep;
    return AM_OK;
}

// Arrivals go to rank 0, which releases everyone; both wait by polling, so requests
// sent to a rank that is in the barrier are still served.
AMX_API int AMX_SPMDBarrier(void) {
    if (!s_up) return AM_ERR_NOT_INIT;
    if (s_size == 1) return AM_Poll(s_eb);
    if (softvia::am::poll_count(s_eb) < 0) return AM_ERR_RESOURCE;  // inside a handler
    int gen = ++s_gen;
    softvia::am::IdleYield idle;
    if (s_rank == 0) {
        while (softvia::am::g_barrier_arrivals[gen & 1] < s_size - 1) {
            if (softvia::am::any_peer_dead(s_ep)) return AM_ERR_NOT_SENT;
            idle.after(softvia::am::poll_count(s_eb));
        }
        softvia::am::g_barrier_arrivals[gen & 1] -= s_size - 1;
        for (int r = 1; r < s_size; r++) {
            int rc = softvia::am::send_barrier(s_ep, r, 1, gen);
            if (rc != AM_OK) return rc;
        }
        softvia::am::flush_credits(s_ep);  // the arrivals' credits
        return AM_Poll(s_eb);
    }
    int rc = softvia::am::send_barrier(s_ep, 0, 0, gen);
    if (rc != AM_OK) return rc;
    while (softvia::am::g_barrier_released < gen) {
        if (softvia::am::peer_dead_at(s_ep, 0)) return AM_ERR_NOT_SENT;  // only rank 0 releases
        idle.after(softvia::am::poll_count(s_eb));
    }
    return AM_Poll(s_eb);
}

AMX_API int AMX_SPMDAllGather(const void* src, void* dst, size_t len) {
    if (!s_up) return AM_ERR_NOT_INIT;
    if ((!src || !dst) && len) return AM_ERR_BAD_ARG;
    int gen = ++s_ag_gen;
    char key[64];
    snprintf(key, sizeof key, "amx.ag.%d.%d", gen, s_rank);
    if (sv_boot_put(key, src, len) != 0) return AM_ERR_RESOURCE;
    for (int r = 0; r < s_size; r++) {
        snprintf(key, sizeof key, "amx.ag.%d.%d", gen, r);
        char* slot = static_cast<char*>(dst) + size_t(r) * len;
        size_t got = 0;
        if (int rc = wait_key(key, slot, len, &got, 0, false)) return rc;
        if (got != len) return AM_ERR_BAD_ARG;  // ranks disagree on len
    }
    return AM_OK;
}

AMX_API int AMX_SPMDExit(void) {
    if (!s_up) return AM_ERR_NOT_INIT;
    int rc = AMX_SPMDBarrier();
    softvia::am::quiesce(s_ep);  // the barrier's last messages must leave before the disconnects
    // Rank 0 must not go before every rank has its release: a NIC stops reading a peer
    // whose process is gone, so frames still in the lane would be lost (the others saw
    // rank 0 die in the barrier: AM_ERR_NOT_SENT). Nor may a rank stop reading before
    // every rank has quiesced (exit_barrier).
    if (rc == AM_OK && s_size > 1) rc = exit_barrier();
    AM_Terminate();
    free(s_seg);
    s_seg = nullptr;
    s_up = false;
    s_eb = nullptr;
    s_ep = nullptr;
    return rc;
}
