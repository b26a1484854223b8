// desc_check.h -- the checks of a descriptor taken from a work queue, shared by the
// requester (sends, RDMA) and the responder (receives): the descriptor in registered
// memory with the VI's protection tag, its segments against the memory table, and the
// re-check of segments when the table changed since (MemTable::epoch).
#pragma once

#include <cstring>

#include "hot_inline.h"
#include "nicfw/engine.h"

namespace softvia::nicfw {

// The descriptor itself (control segment plus seg_count segments) must lie in the region
// its memory handle names, with the VI's protection tag. Returns a status bit or 0, the
// control segment as read in *cs, and the region in *reg. One lookup serves both checks
// (the table only changes under the engine lock, which we hold): the control segment
// first, since seg_count is read from it.
HOT_INLINE uint32_t Engine::check_desc(Vi& vi, const WorkItem& w, nicfw_desc_ctrl* cs, const Region** reg) {
    const uint64_t d = reinterpret_cast<uint64_t>(w.desc);
    const Region* r = mem_.find(w.memh);
    if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, d, sizeof(nicfw_desc_ctrl)))
        return NICFW_DS_PROTECTION_ERROR;
    // One snapshot of what the driver may still be scribbling on: use what we read. The
    // program may have unmapped it since it registered it: then it is a protection error.
    // Only the 16 bytes the NIC reads (next_memh .. imm): one 16-byte move.
    static_assert(offsetof(nicfw_desc_ctrl, imm) + 4 - offsetof(nicfw_desc_ctrl, next_memh) == 16);
    if (hostmem::copy(&cs->next_memh, &w.desc->cs.next_memh, 16) != 0) return NICFW_DS_PROTECTION_ERROR;
    const uint16_t n = cs->seg_count;
    if (n > NICFW_MAX_SEGMENTS) return NICFW_DS_FORMAT_ERROR;
    uint64_t len = sizeof(nicfw_desc_ctrl) + uint64_t{n} * sizeof(nicfw_desc_seg);
    if (!MemTable::in_range(*r, d, len)) return NICFW_DS_PROTECTION_ERROR;
    if (reg) *reg = r;
    return 0;
}

// Checks count data segments starting at segment first and resolves them to host ranges.
HOT_INLINE uint32_t Engine::validate_segments(Vi& vi, nicfw_desc* d, uint32_t first, uint32_t count,
                                              Seg* out, uint32_t* total, const WorkItem& w, const Region* reg) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        nicfw_desc_seg s;
        if (!hostmem::load(desc_segment(d, first + i), &s))  // one snapshot of untrusted memory
            return NICFW_DS_PROTECTION_ERROR;
        if (s.len == 0) {
            out[i] = Seg{nullptr, 0, 0};
            continue;
        }
        // Data in the descriptor's own region (the usual case) needs no second lookup.
        const Region* r = reg && s.memh == w.memh ? reg : mem_.find(s.memh);
        if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, s.addr, s.len))
            return NICFW_DS_PROTECTION_ERROR;
        out[i] = Seg{reinterpret_cast<uint8_t*>(s.addr), s.len, s.memh};
        sum += s.len;
    }
    if (sum > UINT32_MAX) return NICFW_DS_LENGTH_ERROR;
    *total = static_cast<uint32_t>(sum);
    return 0;
}

HOT_INLINE uint32_t Engine::recheck_segs(const Vi& vi, const Seg* segs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (segs[i].len == 0) continue;
        const Region* r = mem_.find(segs[i].memh);
        if (!r || r->ptag != vi.attrs.ptag ||
            !MemTable::in_range(*r, reinterpret_cast<uint64_t>(segs[i].ptr), segs[i].len))
            return NICFW_DS_PROTECTION_ERROR;
    }
    return 0;
}

}  // namespace softvia::nicfw
