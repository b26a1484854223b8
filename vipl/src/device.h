// vipl/src/device.h -- where the driver meets the device's contract (nicfw/abi.h).
//
// The firmware knows nothing of VIA's header: it reads descriptors as nicfw_desc and
// reports nicfw_* codes. Here the driver checks, at compile time, that VIA's descriptor
// is the layout the device reads and that the status, control, state and service bits
// the device writes are VIA's values (so a completion's status passes through as is),
// and turns the device's results and asynchronous errors into VIA's names.
#pragma once

#include <cstddef>

#include "nicfw/abi.h"
#include "vipl.h"

namespace softvia::vipl {

// Two names of one value (the enums differ in type, not in number).
constexpr bool same(long a, long b) { return a == b; }

// ---- the descriptor as the device reads it
static_assert(sizeof(VIP_CONTROL_SEGMENT) == sizeof(nicfw_desc_ctrl));
static_assert(offsetof(VIP_CONTROL_SEGMENT, Next) == offsetof(nicfw_desc_ctrl, next));
static_assert(offsetof(VIP_CONTROL_SEGMENT, NextHandle) == offsetof(nicfw_desc_ctrl, next_memh));
static_assert(offsetof(VIP_CONTROL_SEGMENT, SegCount) == offsetof(nicfw_desc_ctrl, seg_count));
static_assert(offsetof(VIP_CONTROL_SEGMENT, Control) == offsetof(nicfw_desc_ctrl, control));
static_assert(offsetof(VIP_CONTROL_SEGMENT, ImmediateData) == offsetof(nicfw_desc_ctrl, imm));
static_assert(offsetof(VIP_CONTROL_SEGMENT, Length) == offsetof(nicfw_desc_ctrl, length));
static_assert(offsetof(VIP_CONTROL_SEGMENT, Status) == offsetof(nicfw_desc_ctrl, status));
static_assert(sizeof(VIP_DESCRIPTOR_SEGMENT) == sizeof(nicfw_desc_seg));
static_assert(offsetof(VIP_DATA_SEGMENT, Data) == offsetof(nicfw_desc_seg, addr));
static_assert(offsetof(VIP_DATA_SEGMENT, Handle) == offsetof(nicfw_desc_seg, memh));
static_assert(offsetof(VIP_DATA_SEGMENT, Length) == offsetof(nicfw_desc_seg, len));
static_assert(offsetof(VIP_ADDRESS_SEGMENT, Data) == offsetof(nicfw_desc_seg, addr));
static_assert(offsetof(VIP_ADDRESS_SEGMENT, Handle) == offsetof(nicfw_desc_seg, memh));
static_assert(sizeof(VIP_DESCRIPTOR) == sizeof(nicfw_desc));
static_assert(offsetof(VIP_DESCRIPTOR, DS) == offsetof(nicfw_desc, ds));

// A program's descriptor as the device sees it (the layouts above are one).
inline const nicfw_desc* device_view(const VIP_DESCRIPTOR* d) { return reinterpret_cast<const nicfw_desc*>(d); }

// ---- control bits the device reads
static_assert(same(VIP_CONTROL_OP_SENDRECV, NICFW_DC_OP_SEND) && same(VIP_CONTROL_OP_RDMAWRITE, NICFW_DC_OP_RDMA_WRITE) &&
              same(VIP_CONTROL_OP_RDMAREAD, NICFW_DC_OP_RDMA_READ) && same(VIP_CONTROL_OP_RESERVED, NICFW_DC_OP_RESERVED) &&
              same(VIP_CONTROL_OP_MASK, NICFW_DC_OP_MASK) && same(VIP_CONTROL_IMMEDIATE, NICFW_DC_IMMEDIATE) &&
              same(VIP_CONTROL_QFENCE, NICFW_DC_QFENCE) && same(VIP_CONTROL_RESERVED, NICFW_DC_RESERVED) &&
              same(VIP_EXT_CONTROL_REPLY, NICFW_DC_REPLY) && same(VIP_EXT_CONTROL_OP_ATOMIC, NICFW_DC_OP_OFFLOAD) &&
              same(VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, NICFW_OFFLOAD_OP_FETCH_ADD << NICFW_DC_OFFLOAD_SHIFT) &&
              same(VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, NICFW_OFFLOAD_OP_CMP_SWAP << NICFW_DC_OFFLOAD_SHIFT));
// An atomic descriptor: address segment, operands, result segment, as the device reads them.
static_assert(sizeof(VIP_EXT_ATOMIC_SEGMENT) == sizeof(nicfw_atomic_args));
static_assert(offsetof(VIP_EXT_ATOMIC_DESCRIPTOR, Remote) == offsetof(nicfw_desc, ds) &&
              offsetof(VIP_EXT_ATOMIC_DESCRIPTOR, Args) == offsetof(nicfw_desc, ds) + sizeof(nicfw_desc_seg) &&
              offsetof(VIP_EXT_ATOMIC_DESCRIPTOR, Result) == offsetof(nicfw_desc, ds) + 2 * sizeof(nicfw_desc_seg));

// ---- status bits the device writes: VIA's, so the driver hands them on unchanged
static_assert(same(VIP_STATUS_DONE, NICFW_DS_DONE) && same(VIP_STATUS_FORMAT_ERROR, NICFW_DS_FORMAT_ERROR) &&
              same(VIP_STATUS_PROTECTION_ERROR, NICFW_DS_PROTECTION_ERROR) &&
              same(VIP_STATUS_LENGTH_ERROR, NICFW_DS_LENGTH_ERROR) && same(VIP_STATUS_PARTIAL_ERROR, NICFW_DS_PARTIAL_ERROR) &&
              same(VIP_STATUS_DESC_FLUSHED_ERROR, NICFW_DS_FLUSHED) &&
              same(VIP_STATUS_TRANSPORT_ERROR, NICFW_DS_TRANSPORT_ERROR) &&
              same(VIP_STATUS_RDMA_PROT_ERROR, NICFW_DS_RDMA_PROT_ERROR) &&
              same(VIP_STATUS_REMOTE_DESC_ERROR, NICFW_DS_REMOTE_DESC_ERROR) &&
              same(VIP_STATUS_ERROR_MASK, NICFW_DS_ERROR_MASK) &&
              same(VIP_EXT_STATUS_SOURCE_READ, NICFW_DS_SOURCE_READ));
static_assert(same(VIP_STATUS_OP_SEND, NICFW_DS_OP_SEND) && same(VIP_STATUS_OP_RECEIVE, NICFW_DS_OP_RECEIVE) &&
              same(VIP_STATUS_OP_RDMA_WRITE, NICFW_DS_OP_RDMA_WRITE) &&
              same(VIP_STATUS_OP_REMOTE_RDMA_WRITE, NICFW_DS_OP_REMOTE_RDMA_WRITE) &&
              same(VIP_STATUS_OP_RDMA_READ, NICFW_DS_OP_RDMA_READ) && same(VIP_STATUS_OP_MASK, NICFW_DS_OP_MASK) &&
              same(VIP_STATUS_IMMEDIATE, NICFW_DS_IMMEDIATE) && same(VIP_EXT_STATUS_OP_ATOMIC, NICFW_DS_OP_ATOMIC));

// ---- VI state and service levels
static_assert(same(VIP_STATE_IDLE, NICFW_VI_IDLE) && same(VIP_STATE_CONNECTED, NICFW_VI_CONNECTED) &&
              same(VIP_STATE_CONNECT_PENDING, NICFW_VI_CONNECT_PENDING) && same(VIP_STATE_ERROR, NICFW_VI_ERROR));
static_assert(same(VIP_SERVICE_UNRELIABLE, NICFW_REL_UNRELIABLE) &&
              same(VIP_SERVICE_RELIABLE_DELIVERY, NICFW_REL_RELIABLE_DELIVERY) &&
              same(VIP_SERVICE_RELIABLE_RECEPTION, NICFW_REL_RELIABLE_RECEPTION));

inline VIP_VI_STATE vi_state(uint32_t device_state) { return static_cast<VIP_VI_STATE>(device_state); }

// The device's result of a connection step, in VIA's words.
inline VIP_RETURN connect_return(int r) {
    switch (r) {
        case NICFW_R_OK: return VIP_SUCCESS;
        case NICFW_R_TIMEOUT: return VIP_TIMEOUT;
        case NICFW_R_REJECTED: return VIP_REJECT;
        case NICFW_R_NO_MATCH: return VIP_NO_MATCH;
        case NICFW_R_RELIABILITY: return VIP_INVALID_RELIABILITY_LEVEL;
        case NICFW_R_FLUSHED: return VIP_ERROR_RESOURCE;
        default: return VIP_ERROR_RESOURCE;
    }
}

// ---- asynchronous errors: the codes are VIA's order, checked one by one
static_assert(same(VIP_ERROR_POST_DESC, NICFW_AE_POST_DESC) && same(VIP_ERROR_CONN_LOST, NICFW_AE_CONN_LOST) &&
              same(VIP_ERROR_RECVQ_EMPTY, NICFW_AE_RECVQ_EMPTY) && same(VIP_ERROR_VI_OVERRUN, NICFW_AE_VI_OVERRUN) &&
              same(VIP_ERROR_RDMAW_PROT, NICFW_AE_RDMAW_PROT) && same(VIP_ERROR_RDMAW_DATA, NICFW_AE_RDMAW_DATA) &&
              same(VIP_ERROR_RDMAW_ABORT, NICFW_AE_RDMAW_ABORT) && same(VIP_ERROR_RDMAR_PROT, NICFW_AE_RDMAR_PROT) &&
              same(VIP_ERROR_COMP_PROT, NICFW_AE_COMP_PROT) && same(VIP_ERROR_RDMA_TRANSPORT, NICFW_AE_RDMA_TRANSPORT) &&
              same(VIP_ERROR_CATASTROPHIC, NICFW_AE_CATASTROPHIC));
static_assert(same(VIP_RESOURCE_NIC, NICFW_RES_NIC) && same(VIP_RESOURCE_VI, NICFW_RES_VI) &&
              same(VIP_RESOURCE_CQ, NICFW_RES_CQ) && same(VIP_RESOURCE_DESCRIPTOR, NICFW_RES_DESCRIPTOR));

// A device event as VIA's error descriptor; the VI and CQ contexts are the handles the
// driver gave the device when it created them.
inline VIP_ERROR_DESCRIPTOR error_descriptor(VIP_NIC_HANDLE nic, const nicfw_async_event& e) {
    VIP_ERROR_DESCRIPTOR d{};
    d.NicHandle = nic;
    d.ViHandle = static_cast<VIP_VI_HANDLE>(e.vi_context);
    d.CQHandle = static_cast<VIP_CQ_HANDLE>(e.cq_context);
    d.DescriptorPtr = reinterpret_cast<VIP_DESCRIPTOR*>(e.desc);
    d.OpCode = e.op;
    d.ResourceCode = static_cast<VIP_RESOURCE_CODE>(e.resource);
    d.ErrorCode = static_cast<VIP_ERROR_CODE>(e.code);
    return d;
}

}  // namespace softvia::vipl
