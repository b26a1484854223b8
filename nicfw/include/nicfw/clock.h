// clock.h -- the firmware's one clock: CLOCK_MONOTONIC in nanoseconds, for the engine's
// timers, its offloads and the transports' liveness and link set-up alike.
#pragma once

#include <time.h>

#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define NICFW_HAVE_TSC 1
#endif

namespace softvia::nicfw {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

#ifdef NICFW_HAVE_TSC
// For a look a polling loop takes now and then without a system call: true once `ticks`
// TSC ticks have passed since *last, which it then moves on. A TSC that goes backwards
// (another CPU) only makes it true sooner. Callers choose their own rule without a TSC.
inline bool tsc_passed(uint64_t* last, uint64_t ticks) {
    const uint64_t now = __rdtsc();
    if (now - *last < ticks) return false;
    *last = now;
    return true;
}
#endif

}  // namespace softvia::nicfw
