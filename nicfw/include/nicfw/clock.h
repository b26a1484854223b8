// clock.h -- the firmware's one clock: CLOCK_MONOTONIC in nanoseconds, for the engine's
// timers, its offloads and the transports' liveness and link set-up alike.
#pragma once

#include <time.h>

#include <cstdint>

namespace softvia::nicfw {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace softvia::nicfw
