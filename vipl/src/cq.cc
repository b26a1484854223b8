// cq.cc -- completion queues.
#include "internal.h"
#include "nicfw/hot_path.h"

using namespace softvia;
using namespace softvia::vipl;

VIPL_API VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE h, VIP_ULONG count, VIP_CQ_HANDLE* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out || count == 0 || count > NICFW_MAX_CQ_ENTRIES) return VIP_INVALID_PARAMETER;
    {
        std::lock_guard<std::mutex> g(nic->objs_lock);
        if (nic->cqs.size() >= NICFW_MAX_CQ) return VIP_ERROR_RESOURCE;
    }
    auto* cq = new (std::nothrow) CqObj();
    if (!cq) return VIP_ERROR_RESOURCE;
    cq->nic = nic;
    if (!reserve(cq, Kind::kCq)) {
        delete cq;
        return VIP_ERROR_RESOURCE;
    }
    // The device puts the handle in error descriptors.
    cq->dev = nic->eng->create_cq(static_cast<uint32_t>(count), handle_of<void*>(cq->handle));
    publish(cq, nic->cqs);
    *out = handle_of<VIP_CQ_HANDLE>(cq->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE h) {
    CqObj* cq = cq_of(h);
    if (!cq) return VIP_INVALID_PARAMETER;
    if (cq->nic->eng->destroy_cq(cq->dev) < 0) return VIP_INVALID_STATE;  // VIs still bound
    unpublish(cq, cq->nic->cqs);
    delete cq;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE h, VIP_ULONG count) {
    CqObj* cq = cq_of(h);
    if (!cq || count == 0 || count > NICFW_MAX_CQ_ENTRIES) return VIP_INVALID_PARAMETER;
    std::lock_guard<SpinLock> g(cq->lock);  // no consumer moves cons while we copy
    // Fewer entries than are waiting in the queue: refused, nothing is lost.
    return cq->nic->eng->resize_cq(cq->dev, static_cast<uint32_t>(count)) < 0 ? VIP_ERROR_RESOURCE
                                                                              : VIP_SUCCESS;
}

namespace {
VIP_RETURN take(CqObj* cq, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv, VIP_PVOID* ctx = nullptr) {
    nicfw::Cq* d = cq->dev;
    // An empty CQ (most polls) is seen without taking the lock; a consumer that races
    // us to the last entry is settled under it.
    if (d->prod.load(std::memory_order_relaxed) == d->cons.load(std::memory_order_relaxed)) return VIP_NOT_DONE;
    std::lock_guard<SpinLock> g(cq->lock);
    uint64_t cons = d->cons.load(std::memory_order_relaxed);
    // Acquire pairs with the firmware's release of prod (nicfw/src/datapath.h, cq_push).
    if (d->prod.load(std::memory_order_acquire) == cons) return VIP_NOT_DONE;
    const nicfw_cqe e = d->entries[cons % d->entries.size()];
    // Release: the firmware that sees cons may overwrite the entry we just read.
    d->cons.store(cons + 1, std::memory_order_release);
    *vi = handle_of<VIP_VI_HANDLE>(e.vi_context);  // the VI's handle (VipCreateVi)
    *recv = e.recv;  // VIP_FALSE send, VIP_TRUE receive, VIP_EXT_REPLY_QUEUE reply (steering)
    if (ctx) *ctx = reinterpret_cast<VIP_PVOID>(e.user_context);  // VipExtSetViContext
    return VIP_SUCCESS;
}
}  // namespace

VIPL_API NICFW_HOT VIP_RETURN VipCQDone(VIP_CQ_HANDLE h, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv) {
    CqObj* cq = cq_of(h);
    if (!cq || !vi || !recv) return VIP_INVALID_PARAMETER;
    if (take(cq, vi, recv) == VIP_SUCCESS) return VIP_SUCCESS;
    if (!cq->nic->eng->progress()) return VIP_NOT_DONE;
    return take(cq, vi, recv);
}

VIPL_API VIP_RETURN VipExtCQDoneContext(VIP_CQ_HANDLE h, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv, VIP_PVOID* ctx) {
    CqObj* cq = cq_of(h);
    if (!cq || !vi || !recv || !ctx) return VIP_INVALID_PARAMETER;
    if (take(cq, vi, recv, ctx) == VIP_SUCCESS) return VIP_SUCCESS;
    if (!cq->nic->eng->progress()) return VIP_NOT_DONE;
    return take(cq, vi, recv, ctx);
}

VIPL_API VIP_RETURN VipExtCQTake(VIP_CQ_HANDLE h, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv) {
    CqObj* cq = cq_of(h);
    if (!cq || !vi || !recv) return VIP_INVALID_PARAMETER;
    return take(cq, vi, recv);
}

VIPL_API VIP_RETURN VipCQWait(VIP_CQ_HANDLE h, VIP_ULONG timeout, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv) {
    NicHold hold;
    CqObj* cq = hold.take<CqObj>(h, Kind::kCq);
    if (!cq || !vi || !recv) return VIP_INVALID_PARAMETER;
    switch (wait_until(cq->nic, timeout, [&] { return take(cq, vi, recv) == VIP_SUCCESS; })) {
        case Waited::kHeld: return VIP_SUCCESS;
        case Waited::kTimeout: return VIP_TIMEOUT;
        default: return VIP_INVALID_STATE;  // the NIC is closing
    }
}
