// nicfw/faults.h -- the fault injector's settings and counters (fault_transport.h has
// the injector itself).
#pragma once

#include <cstdint>
#include <string>

namespace softvia::nicfw {

struct FaultSpec {
    double drop = 0, dup = 0, reorder = 0, corrupt = 0, delay = 0;  // probabilities per frame
    uint32_t delay_us = 100;  // how long a delayed frame is held
    uint64_t seed = 1;
};

// Parses "drop=0.01,dup=0.01,reorder=0.01,corrupt=0.001,delay=0.01,delay_us=50,seed=7"
// (any subset, any order). Returns false on an unknown key, a malformed number, or a
// probability outside [0, 1].
bool parse_fault_spec(const std::string& text, FaultSpec* out);

struct FaultCounters {
    uint64_t dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, delayed = 0;
    uint64_t bad_checksum = 0;  // frames received with a failing trailer (dropped)
};

}  // namespace softvia::nicfw
