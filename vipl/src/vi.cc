// vi.cc -- VIs and the data path: post (doorbell), Done and Wait.
#include <cstring>

#include "internal.h"
#include "nicfw/hot_path.h"

using namespace softvia;
using namespace softvia::vipl;

namespace {
// Checks VI attributes against what this NIC supports; the VIA return code on failure.
VIP_RETURN check_attrs(NicObj* nic, const VIP_VI_ATTRIBUTES* a, nicfw::ViAttrs* out) {
    if (!a) return VIP_INVALID_PARAMETER;
    VIP_RELIABILITY_LEVEL r = a->ReliabilityLevel;
    if (r != VIP_SERVICE_UNRELIABLE && r != VIP_SERVICE_RELIABLE_DELIVERY &&
        r != VIP_SERVICE_RELIABLE_RECEPTION)
        return VIP_INVALID_RELIABILITY_LEVEL;
    if (a->MaxTransferSize > NICFW_MAX_TRANSFER) return VIP_INVALID_MTU;
    PtagObj* pt = ptag_of(a->Ptag);
    if (!pt || pt->nic != nic) return VIP_INVALID_PTAG;
    // RDMA read needs a reliable VI (VIP_NIC_ATTRIBUTES.RDMAReadSupport).
    if (a->EnableRdmaRead && r == VIP_SERVICE_UNRELIABLE) return VIP_INVALID_RDMAREAD;
    out->reliability = r;
    out->ptag = pt->id;
    out->rdma_write = a->EnableRdmaWrite != 0;
    out->rdma_read = a->EnableRdmaRead != 0;
    // 0 asks for the NIC's maximum.
    out->max_transfer = a->MaxTransferSize ? static_cast<uint32_t>(a->MaxTransferSize) : NICFW_MAX_TRANSFER;
    return VIP_SUCCESS;
}

// Appends d to the driver queue and rings the doorbell, under the queue lock so the
// doorbells of one queue reach the NIC in the order of the driver queue.
NICFW_HOT VIP_RETURN post(ViObj* vi, DriverQueue& q, uint16_t kind, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE memh) {
    // The NIC writes status into the descriptor, so it must lie in registered memory
    // under memh; anything wrong beyond that comes back as descriptor status.
    if (!vi->nic->eng->desc_in_registered_memory(memh, d, sizeof(VIP_CONTROL_SEGMENT)))
        return VIP_INVALID_PARAMETER;
    nicfw::Engine* eng = vi->nic->eng.get();
    bool direct;
    {
        std::lock_guard<SpinLock> g(q.lock);
        if (!q.reserve()) return VIP_ERROR_RESOURCE;  // MaxDescriptorsPerQueue outstanding
        // Registered, but perhaps unmapped or write-protected by the program since.
        if (nicfw::hostmem::store32(&d->CS.Status, 0) != 0) return VIP_INVALID_PARAMETER;
        if (q.head == q.tail) q.front.store(d, std::memory_order_release);
        q.ring[q.tail++ & q.mask] = d;
        nicfw_doorbell db{reinterpret_cast<uint64_t>(d), memh,
                          static_cast<uint16_t>(NICFW_VI_INDEX(vi->dev->id)), kind};
        // Inline mode: handed over (and a send sent) now when the NIC is free; a receive
        // needs no step, as every step takes the doorbells before it reads frames.
        direct = eng->ring_direct(db);
        if (!direct) eng->ring(db);
    }
    if (direct)
        eng->deliver_pending_errors();
    else if (kind == NICFW_SENDQ)
        eng->post_progress();  // a send leaves now, not at the next poll
    return VIP_SUCCESS;
}

// q's head was taken (under its lock): the next one, if any, is the front now.
NICFW_HOT void pop_front(DriverQueue& q) {
    q.head++;
    q.front.store(q.head == q.tail ? nullptr : q.ring[q.head & q.mask], std::memory_order_release);
}

// Whether q's head is certainly not done, seen without its lock: a program polling an idle
// VI takes no lock for it (two locked instructions fewer per poll). The front may be stale
// when another thread takes from this queue at the same time; a stale one was the head an
// instant ago, so "not done" is still an answer that call could have had. Anything else
// (done, unreadable, a lost completion) goes the locked way.
NICFW_HOT bool surely_not_done(const DriverQueue& q) {
    VIP_DESCRIPTOR* f = q.front.load(std::memory_order_acquire);
    if (f == nullptr) return true;  // empty
    uint32_t status;
    if (!nicfw::hostmem::load32_acquire(&f->CS.Status, &status) || (status & VIP_STATUS_DONE)) return false;
    return !q.dev || q.dev->lost_n[q.kind].load(std::memory_order_acquire) == q.lost_seen.load(std::memory_order_relaxed);
}

// Takes the head of q if the NIC has marked it done.
NICFW_HOT VIP_RETURN take_done(DriverQueue& q, VIP_DESCRIPTOR** out) {
    if (surely_not_done(q)) return VIP_NOT_DONE;
    std::lock_guard<SpinLock> g(q.lock);
    if (q.head == q.tail) return VIP_NOT_DONE;
    VIP_DESCRIPTOR* d = q.ring[q.head & q.mask];
    // Acquire pairs with the firmware's store of Length and Status (nicfw/src/datapath.h,
    // complete_on). A descriptor the program unmapped after posting it cannot be read:
    // it leaves the queue with VIP_DESCRIPTOR_ERROR (docs/memory-safety.md).
    uint32_t status;
    if (!nicfw::hostmem::load32_acquire(&d->CS.Status, &status)) {
        pop_front(q);
        *out = d;
        return VIP_DESCRIPTOR_ERROR;
    }
    if (!(status & VIP_STATUS_DONE)) {
        // The device may have failed to write this one's status (the program made it
        // read-only or deregistered it after posting): it says so in lost_n.
        if (q.dev && q.dev->lost_n[q.kind].load(std::memory_order_acquire) != q.lost_seen.load(std::memory_order_relaxed) &&
            q.dev->take_lost(device_view(d))) [[unlikely]] {
            q.lost_seen.fetch_add(1, std::memory_order_relaxed);
            pop_front(q);
            *out = d;
            return VIP_DESCRIPTOR_ERROR;
        }
        return VIP_NOT_DONE;
    }
    pop_front(q);
    *out = d;
    return VIP_SUCCESS;
}

NICFW_HOT VIP_RETURN done(ViObj* vi, DriverQueue& q, VIP_DESCRIPTOR** out) {
    VIP_RETURN r = take_done(q, out);
    if (r != VIP_NOT_DONE) return r;
    if (!vi->nic->eng->progress()) return VIP_NOT_DONE;
    return take_done(q, out);
}

// The Wait calls (the caller holds vi's NIC): VIP_INVALID_STATE also when the NIC closes.
VIP_RETURN wait(ViObj* vi, DriverQueue& q, VIP_ULONG timeout, VIP_DESCRIPTOR** out) {
    {
        std::lock_guard<SpinLock> g(q.lock);
        if (q.head == q.tail) return VIP_INVALID_STATE;  // nothing posted: it would never end
    }
    VIP_RETURN r = VIP_NOT_DONE;
    switch (wait_until(vi->nic, timeout, [&] { return (r = take_done(q, out)) != VIP_NOT_DONE; })) {
        case Waited::kHeld: return r;
        case Waited::kTimeout: return VIP_TIMEOUT;
        default: return VIP_INVALID_STATE;
    }
}
}  // namespace

VIPL_API VIP_RETURN VipCreateVi(VIP_NIC_HANDLE h, VIP_VI_ATTRIBUTES* attrs, VIP_CQ_HANDLE scqh,
                                VIP_CQ_HANDLE rcqh, VIP_VI_HANDLE* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out) return VIP_INVALID_PARAMETER;
    CqObj* scq = scqh ? cq_of(scqh) : nullptr;
    CqObj* rcq = rcqh ? cq_of(rcqh) : nullptr;
    if ((scqh && (!scq || scq->nic != nic)) || (rcqh && (!rcq || rcq->nic != nic))) return VIP_INVALID_PARAMETER;
    nicfw::ViAttrs a;
    if (VIP_RETURN r = check_attrs(nic, attrs, &a)) return r;
    auto* vi = new (std::nothrow) ViObj();
    if (!vi) return VIP_ERROR_RESOURCE;
    vi->nic = nic;
    vi->attrs = *attrs;
    vi->attrs.MaxTransferSize = a.max_transfer;
    vi->scq = scq;
    vi->rcq = rcq;
    if (!reserve(vi, Kind::kVi)) {
        delete vi;
        return VIP_ERROR_RESOURCE;
    }
    // The device puts the handle in CQ entries and error descriptors.
    int rc = nic->eng->create_vi(a, scq ? scq->dev : nullptr, rcq ? rcq->dev : nullptr,
                                 handle_of<void*>(vi->handle), &vi->dev);
    if (rc < 0) {
        Handles::remove(vi->handle);
        delete vi;
        return rc == -EPERM ? VIP_INVALID_PTAG : VIP_ERROR_RESOURCE;
    }
    vi->sq.dev = vi->rq.dev = vi->rq_reply.dev = vi->dev;
    vi->sq.kind = NICFW_SENDQ;
    vi->rq.kind = NICFW_RECVQ;
    vi->rq_reply.kind = NICFW_REPLYQ;
    publish(vi, nic->vis);
    *out = handle_of<VIP_VI_HANDLE>(vi->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipDestroyVi(VIP_VI_HANDLE h) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    {
        // Descriptors the program has not taken back yet keep the VI alive (VIA 1.0).
        std::lock_guard<SpinLock> a(vi->sq.lock);
        std::lock_guard<SpinLock> b(vi->rq.lock);
        std::lock_guard<SpinLock> c(vi->rq_reply.lock);
        if (!vi->sq.empty() || !vi->rq.empty() || !vi->rq_reply.empty()) return VIP_INVALID_STATE;
    }
    if (vi->nic->eng->destroy_vi(vi->dev) < 0) return VIP_INVALID_STATE;  // still connected
    unpublish(vi, vi->nic->vis);
    delete vi;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipQueryVi(VIP_VI_HANDLE h, VIP_VI_STATE* state, VIP_VI_ATTRIBUTES* attrs,
                               VIP_BOOLEAN* sq_empty, VIP_BOOLEAN* rq_empty) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    vi->nic->eng->progress();
    if (state) *state = static_cast<VIP_VI_STATE>(vi->dev->state.load(std::memory_order_acquire));
    if (attrs) *attrs = vi->attrs;
    if (sq_empty) {
        std::lock_guard<SpinLock> g(vi->sq.lock);
        *sq_empty = vi->sq.empty();
    }
    if (rq_empty) {
        std::lock_guard<SpinLock> g(vi->rq.lock);
        *rq_empty = vi->rq.empty();
    }
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE h, VIP_VI_ATTRIBUTES* attrs) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    nicfw::ViAttrs a;
    if (VIP_RETURN r = check_attrs(vi->nic, attrs, &a)) return r;
    int rc = vi->nic->eng->set_vi_attrs(vi->dev, a);
    if (rc == -EBUSY) return VIP_INVALID_STATE;
    if (rc < 0) return VIP_INVALID_PTAG;
    vi->attrs = *attrs;
    vi->attrs.MaxTransferSize = a.max_transfer;
    return VIP_SUCCESS;
}

// ---------------------------------------------------------------- data path
VIPL_API NICFW_HOT VIP_RETURN VipPostSend(VIP_VI_HANDLE h, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE memh) {
    ViObj* vi = vi_of(h);
    if (!vi || !d || (reinterpret_cast<uintptr_t>(d) & (VIP_DESCRIPTOR_ALIGNMENT - 1)))
        return VIP_INVALID_PARAMETER;
    // Sends need a connection; receives may be posted before one (VIA 1.0).
    if (vi->dev->state.load(std::memory_order_acquire) != VIP_STATE_CONNECTED) return VIP_INVALID_STATE;
    return post(vi, vi->sq, NICFW_SENDQ, d, memh);
}

VIPL_API VIP_RETURN VipExtAtomicNow(VIP_VI_HANDLE h, VIP_ULONG op, VIP_MEM_HANDLE rmemh, VIP_UINT64 raddr,
                                    VIP_UINT64 operand, VIP_UINT64 swap, VIP_UINT64* old) {
    ViObj* vi = vi_of(h);
    if (!vi || !old || raddr % 8 ||
        (op != VIP_EXT_CONTROL_ATOMIC_FETCH_ADD && op != VIP_EXT_CONTROL_ATOMIC_CMP_SWAP))
        return VIP_INVALID_PARAMETER;
    if (vi->dev->state.load(std::memory_order_acquire) != VIP_STATE_CONNECTED) return VIP_INVALID_STATE;
    nicfw::OffloadRequest req;
    req.op = NICFW_DC_OFFLOAD_OP(op);
    req.raddr = raddr;
    req.rmemh = rmemh;
    req.arg[0] = operand;
    req.arg[1] = swap;
    uint64_t answer[2];
    if (!vi->nic->eng->offload_now(vi->dev, req, answer)) return VIP_NOT_DONE;
    *old = answer[0];
    return VIP_SUCCESS;
}

VIPL_API NICFW_HOT VIP_RETURN VipPostRecv(VIP_VI_HANDLE h, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE memh) {
    ViObj* vi = vi_of(h);
    if (!vi || !d || (reinterpret_cast<uintptr_t>(d) & (VIP_DESCRIPTOR_ALIGNMENT - 1)))
        return VIP_INVALID_PARAMETER;
    return post(vi, vi->rq, NICFW_RECVQ, d, memh);
}

VIPL_API NICFW_HOT VIP_RETURN VipSendDone(VIP_VI_HANDLE h, VIP_DESCRIPTOR** out) {
    ViObj* vi = vi_of(h);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    return done(vi, vi->sq, out);
}

VIPL_API NICFW_HOT VIP_RETURN VipRecvDone(VIP_VI_HANDLE h, VIP_DESCRIPTOR** out) {
    ViObj* vi = vi_of(h);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    return done(vi, vi->rq, out);
}

VIPL_API VIP_RETURN VipSendWait(VIP_VI_HANDLE h, VIP_ULONG timeout, VIP_DESCRIPTOR** out) {
    NicHold hold;
    ViObj* vi = hold.take<ViObj>(h, Kind::kVi);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    return wait(vi, vi->sq, timeout, out);
}

VIPL_API VIP_RETURN VipRecvWait(VIP_VI_HANDLE h, VIP_ULONG timeout, VIP_DESCRIPTOR** out) {
    NicHold hold;
    ViObj* vi = hold.take<ViObj>(h, Kind::kVi);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    return wait(vi, vi->rq, timeout, out);
}

// ---------------------------------------------------------------- steering (extension)
VIPL_API VIP_RETURN VipExtEnableSteering(VIP_VI_HANDLE h, VIP_CQ_HANDLE cqh) {
    ViObj* vi = vi_of(h);
    CqObj* reply_cq = cqh ? cq_of(cqh) : nullptr;
    if (!vi || (cqh && (!reply_cq || reply_cq->nic != vi->nic))) return VIP_INVALID_PARAMETER;
    static uint32_t steering = [] {
        uint32_t i = 0;
        nicfw::offload_index("steering", &i);
        return i;
    }();
    if (vi->nic->eng->enable_offload(vi->dev, steering, reply_cq ? reply_cq->dev : nullptr) < 0)
        return VIP_INVALID_STATE;
    vi->reply_cq = reply_cq;
    vi->steering = true;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtPostRecvReply(VIP_VI_HANDLE h, VIP_DESCRIPTOR* d, VIP_MEM_HANDLE memh) {
    ViObj* vi = vi_of(h);
    if (!vi || !d || (reinterpret_cast<uintptr_t>(d) & (VIP_DESCRIPTOR_ALIGNMENT - 1)))
        return VIP_INVALID_PARAMETER;
    if (!vi->steering) return VIP_INVALID_STATE;
    return post(vi, vi->rq_reply, NICFW_REPLYQ, d, memh);
}

VIPL_API VIP_RETURN VipExtRecvReplyDone(VIP_VI_HANDLE h, VIP_DESCRIPTOR** out) {
    ViObj* vi = vi_of(h);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    if (!vi->steering) return VIP_INVALID_STATE;
    return done(vi, vi->rq_reply, out);
}

VIPL_API VIP_RETURN VipExtRecvReplyWait(VIP_VI_HANDLE h, VIP_ULONG timeout, VIP_DESCRIPTOR** out) {
    NicHold hold;
    ViObj* vi = hold.take<ViObj>(h, Kind::kVi);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    if (!vi->steering) return VIP_INVALID_STATE;
    return wait(vi, vi->rq_reply, timeout, out);
}
