// collectives.h -- the runtime's own collectives, built on puts and barriers
// (collectives.cc); the all_reduce / all_bcast / all_scan API is their typed face.
#pragma once

#include <cstdint>

namespace splitc {

// sync(), then the back end's barrier: every process has entered.
void internal_barrier();
// Collective: whether every process passed the same v.
bool all_agree(uint64_t v);
// Zeroed symmetric memory for the runtime's own use, allocated at start-up (every
// process makes the same calls in the same order).
void* alloc_internal(uint64_t n);
// all_store_sync's symmetric array: PROCS slots, slot q the bytes process q stored here.
extern uint64_t* g_store_expect;

}  // namespace splitc
