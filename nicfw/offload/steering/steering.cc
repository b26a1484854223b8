// offload/steering/steering.cc -- request/reply steering (VipExtEnableSteering): the
// paper's AM layer wants replies apart from requests, so that a requester waiting for
// credits can take replies without handling requests. A send whose descriptor carries
// NICFW_DC_REPLY travels with frame flag NICFW_FF_REPLY (the requester copies the class
// bit, as it copies the immediate flag); on a VI this offload is enabled on, the engine
// places such messages through the VI's alternate receive queue, which the driver calls
// the reply queue (NICFW_REPLYQ), completing on the CQ given at enable time. All of it is
// the engine's receive-queue routing (nicfw/offload.h): this offload is its route_flags.
#include "nicfw/offload.h"

namespace softvia::nicfw {

extern const Offload kSteeringOffload;
const Offload kSteeringOffload = {
    "steering",
    0,                  // no descriptor operations
    NICFW_DS_OP_SEND,   // (none of its own)
    nullptr,            // no frame types
    0,
    {nullptr, nullptr, nullptr, nullptr},
    NICFW_FF_REPLY,     // reply-class messages go to the reply queue
    nullptr,
    nullptr,
    nullptr,            // no same-host shortcut
    nullptr,
};

}  // namespace softvia::nicfw
