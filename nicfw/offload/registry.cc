// offload/registry.cc -- the offloads this firmware has. A new offload is a folder under
// nicfw/offload/ that defines one `Offload` (nicfw/offload.h), plus one line below and
// one in nicfw/CMakeLists.txt; the engine's blocks stay as they are (docs/offloads.md).
#include "nicfw/offload.h"

#include <cstring>

namespace softvia::nicfw {

extern const Offload kAtomicsOffload;   // offload/atomics: remote fetch-add, compare-and-swap
extern const Offload kSteeringOffload;  // offload/steering: replies to their own receive queue

namespace {
const Offload* const kOffloads[] = {&kAtomicsOffload, &kSteeringOffload};
static_assert(sizeof kOffloads / sizeof kOffloads[0] <= kMaxOffloads, "raise kMaxOffloads");
constexpr uint32_t kCount = sizeof kOffloads / sizeof kOffloads[0];
}  // namespace

const Offload* offload_at(uint32_t index) { return index < kCount ? kOffloads[index] : nullptr; }

const Offload* offload_for_op(uint32_t op, uint32_t* index) {
    if (op == 0 || op > 15) return nullptr;  // op 0 is never an operation
    for (uint32_t i = 0; i < kCount; i++)
        if (kOffloads[i]->ops & (1u << op)) {
            if (index) *index = i;
            return kOffloads[i];
        }
    return nullptr;
}

bool offload_index(const char* name, uint32_t* index) {
    for (uint32_t i = 0; i < kCount; i++)
        if (std::strcmp(kOffloads[i]->name, name) == 0) {
            *index = i;
            return true;
        }
    return false;
}

const OffloadFrameOp* offload_frame_op(uint8_t type) {
    for (const Offload* o : kOffloads)
        for (uint32_t i = 0; i < o->nframes; i++)
            if (o->frames[i].type == type) return &o->frames[i];
    return nullptr;
}

uint32_t offload_status_op(uint16_t control) {
    const Offload* o = offload_for_op(NICFW_DC_OFFLOAD_OP(control));
    return o ? o->status_op : NICFW_DS_OP_SEND;
}

}  // namespace softvia::nicfw
