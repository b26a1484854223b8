// nicfw/offload.h -- the offload interface: how a NIC feature joins the firmware as one
// folder under nicfw/offload/ without edits to the engine's blocks (docs/offloads.md).
//
// An offload is a table of hooks (struct Offload) listed once in nicfw/offload/registry.cc.
// The engine calls them at four points:
//   - send side: a send-queue descriptor with op NICFW_DC_OP_OFFLOAD and offload op k
//     (control bits 4-7) goes to the offload that claims k: load() checks it and turns it
//     into an OffloadRequest, emit() puts that request on the wire. The request takes a
//     sequence number like any other, so it is ordered, windowed, retransmitted (load and
//     emit run again on a go-back-N resend) and flushed by the engine; it completes when
//     the offload calls Engine::answer_offload() for it.
//   - receive side: frame types from NICFW_F_CORE_MAX + 1 up belong to offloads; each
//     offload lists its types with their minimum length and handler, and the engine's
//     opcode table dispatches to them after the common header checks.
//   - per-VI state: Vi::offload_state[index] holds an OffloadViState the offload creates
//     when it first needs it; the engine drops it when the VI (re)connects, leaves its
//     connection or goes away.
//   - same host (optional hooks): shortcut() serves a request without the wire;
//     memory_changed() hears of every deregistration and loss of permission, so what a
//     shortcut allowed can be taken back.
//   - counters: Engine::offload_count(index, i) (names in Offload::counter_names), read
//     with Engine::offload_counter; they are on the status page, so softvia-nicinfo
//     shows them.
//   - receive-queue routing: an offload with route_flags, once the driver enables it on a
//     VI (Engine::enable_offload, with a CQ), has the engine place messages whose frame
//     flags meet route_flags through the VI's alternate receive queue (doorbell queue kind
//     NICFW_ALTQ) instead of its receive queue: a mask test per message, no call.
//     Request/reply steering (offload/steering) is that and nothing more.
// Hooks run under the engine lock, in the firmware's step; they use the engine's
// services for offloads (engine.h) and never block.
#pragma once

#include <cstdint>
#include <memory>

#include "nicfw/abi.h"
#include "nicfw/queues.h"

namespace softvia::nicfw {

class Engine;
struct Vi;
struct RxFrame;

constexpr uint32_t kMaxOffloads = 4;          // entries of the registry
constexpr uint32_t kMaxOffloadCounters = 4;   // counters per offload
static_assert(kMaxOffloads <= NICFW_STATUS_OFFLOADS && kMaxOffloadCounters <= NICFW_STATUS_OFFLOAD_COUNTERS,
              "the status page has a line for every offload and counter");

// One request of an offload operation, as load() decoded it from its descriptor. It is
// kept beside the request in the VI's pending FIFO until answered.
struct OffloadRequest {
    uint32_t op = 0;         // the offload op (NICFW_DC_OFFLOAD_OP of the control)
    uint64_t raddr = 0;      // remote address, when the operation has one
    uint32_t rmemh = 0;      // remote memory handle
    uint64_t arg[2] = {};    // operands
    Seg result{};            // local buffer the answer goes to (checked at load)
};

// Per-VI state of an offload (its own subclass), created on first use.
struct OffloadViState {
    virtual ~OffloadViState() = default;
};

struct OffloadFrameOp {
    uint8_t type;       // NICFW_F_*, above NICFW_F_CORE_MAX
    const char* name;   // tracing (nicfw_frame_type_name knows it too)
    uint32_t min_len;   // whole frame, header included
    void (*handle)(Engine&, const RxFrame&, const nicfw_frame_hdr&);
};

struct Offload {
    const char* name;
    uint16_t ops;        // bit k set: it serves offload op k (NICFW_DC_OFFLOAD_OP)
    uint32_t status_op;  // NICFW_DS_OP_* its completions report
    const OffloadFrameOp* frames;
    uint32_t nframes;
    const char* counter_names[kMaxOffloadCounters];
    // Frame flags (NICFW_FF_*) whose messages go to the alternate receive queue of a VI
    // this offload is enabled on; 0: it routes nothing.
    uint8_t route_flags;
    // Checks descriptor w (cs: the snapshot of its control segment, already checked to lie
    // in registered memory with the VI's tag) and fills *req. Returns 0 or NICFW_DS_*
    // error bits, with which the descriptor completes (and a reliable VI breaks).
    uint32_t (*load)(Engine&, Vi&, const WorkItem& w, const nicfw_desc_ctrl& cs, OffloadRequest* req);
    // Puts request req (sequence number seq) on the wire to vi's peer. False if the link
    // is full: the engine calls it again on a later step.
    bool (*emit)(Engine&, Vi&, const OffloadRequest& req, uint32_t seq);
    // Optional (null: none). A way to serve a loaded request without the wire (a
    // same-host shortcut), tried when nothing the VI posted before it is outstanding: true
    // if it was served, with its answer (req.result.len bytes, at most 16) in answer; the
    // descriptor then completes at once and takes no sequence number.
    bool (*shortcut)(Engine&, Vi&, const OffloadRequest& req, uint64_t answer[2]);
    // Optional. Region memh was deregistered or lost permissions (its attributes or
    // atomics bit changed): whatever the offload let peers do to it without asking this
    // NIC ends before the call returns.
    void (*memory_changed)(Engine&, uint32_t memh);
};

// The registry (nicfw/offload/registry.cc): the offloads this firmware has, by index.
const Offload* offload_at(uint32_t index);  // null past the last
// The offload that serves offload op k, and its index; null if none.
const Offload* offload_for_op(uint32_t op, uint32_t* index = nullptr);
// The registry index of the offload called name; false if there is none.
bool offload_index(const char* name, uint32_t* index);
// The offload frame op for frame type t (above NICFW_F_CORE_MAX); null if none.
const OffloadFrameOp* offload_frame_op(uint8_t type);

}  // namespace softvia::nicfw
