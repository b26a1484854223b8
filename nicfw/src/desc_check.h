// desc_check.h -- the checks of a descriptor the NIC takes from a work queue, shared by
// the requester (send descriptors) and the responder (receive descriptors). Inline: both
// run once per message.
#pragma once

#include <cstring>

#include "nicfw/engine.h"

namespace softvia::nicfw {

// The descriptor itself (control segment plus segcount segments) must lie in the region
// its memory handle names, with the VI's protection tag. Returns a status bit or 0, and
// the region in *reg. One lookup serves both checks (the table only changes under the
// engine lock, which we hold): the control segment first, since SegCount is read from it.
inline uint32_t Engine::check_desc(Vi& vi, const WorkItem& w, uint16_t* segcount, const Region** reg) {
    const uint64_t d = reinterpret_cast<uint64_t>(w.desc);
    const Region* r = mem_.find(w.memh);
    if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, d, sizeof(VIP_CONTROL_SEGMENT)))
        return VIP_STATUS_PROTECTION_ERROR;
    // One read of the field the driver may still be scribbling on: use what we read.
    uint16_t n = __atomic_load_n(&w.desc->CS.SegCount, __ATOMIC_RELAXED);
    *segcount = n;
    if (n > NICFW_MAX_SEGMENTS) return VIP_STATUS_FORMAT_ERROR;
    uint64_t len = sizeof(VIP_CONTROL_SEGMENT) + uint64_t{n} * sizeof(VIP_DESCRIPTOR_SEGMENT);
    if (!MemTable::in_range(*r, d, len)) return VIP_STATUS_PROTECTION_ERROR;
    if (reg) *reg = r;
    return 0;
}

// Checks count data segments starting at segment first and resolves them to host ranges.
inline uint32_t Engine::validate_segments(Vi& vi, VIP_DESCRIPTOR* d, uint32_t first, uint32_t count, Seg* out,
                                          uint32_t* total, const WorkItem& w, const Region* reg) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        VIP_DATA_SEGMENT s;
        memcpy(&s, &desc_segment(d, first + i)->Local, sizeof s);  // one snapshot of untrusted memory
        if (s.Length == 0) {
            out[i] = Seg{nullptr, 0};
            continue;
        }
        // Data in the descriptor's own region (the usual case) needs no second lookup.
        const Region* r = reg && s.Handle == w.memh ? reg : mem_.find(s.Handle);
        if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, s.Data.AddressBits, s.Length))
            return VIP_STATUS_PROTECTION_ERROR;
        out[i] = Seg{static_cast<uint8_t*>(s.Data.Address), s.Length};
        sum += s.Length;
    }
    if (sum > UINT32_MAX) return VIP_STATUS_LENGTH_ERROR;
    *total = static_cast<uint32_t>(sum);
    return 0;
}

}  // namespace softvia::nicfw
