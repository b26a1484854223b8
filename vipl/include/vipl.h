/*
 * vipl.h -- softvia's Virtual Interface Provider Library (VIA 1.0 names and values).
 *
 * Existing VIPL programs compile against this header unchanged. Everything that is
 * not part of VIA 1.0 carries the VipExt / VIP_EXT_ prefix and is listed at the end.
 * The reference of every call and its errors is docs/vipl-reference.md.
 *
 * Width decisions (made on purpose, see docs/abi.md):
 *   VIP_ULONG is 64 bits on every host (the original Windows header made it 32), so a
 *   registration or transfer length is never truncated on LP64 Linux.
 *   VIP_BOOLEAN is 32 bits; VIP_TRUE is 1.
 */
#ifndef VIPL_H
#define VIPL_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- basic types ---------------------------------------------------------------- */
typedef uint8_t VIP_UINT8;
typedef uint16_t VIP_UINT16;
typedef uint32_t VIP_UINT32;
typedef uint64_t VIP_UINT64;
typedef uint64_t VIP_ULONG;
typedef char VIP_CHAR;
typedef void *VIP_PVOID;
typedef uint32_t VIP_BOOLEAN;
#define VIP_TRUE 1
#define VIP_FALSE 0

/* One layout for descriptors on 32- and 64-bit hosts. */
typedef union {
    VIP_UINT64 AddressBits;
    VIP_PVOID Address;
} VIP_PVOID64;

/* Handles are opaque values (not pointers to anything a program may read): a handle
 * that is not live, of the wrong kind, or made up is refused with VIP_INVALID_PARAMETER
 * (VIP_INVALID_PTAG for protection tags), and a destroyed object's handle stays
 * refused. NULL is never a valid handle. */
typedef struct vip_nic *VIP_NIC_HANDLE;
typedef struct vip_vi *VIP_VI_HANDLE;
typedef struct vip_ptag *VIP_PROTECTION_HANDLE;
typedef struct vip_conn *VIP_CONN_HANDLE;
typedef struct vip_cq *VIP_CQ_HANDLE;
typedef VIP_UINT32 VIP_MEM_HANDLE; /* interpreted by the NIC: region index + generation */
typedef VIP_PVOID VIP_QOS;         /* opaque; softvia accepts and ignores it */

#define VIP_INFINITE ((VIP_ULONG)~(VIP_ULONG)0) /* timeout that never expires */

/* ---- return codes (VIA 1.0 order) ----------------------------------------------- */
typedef enum {
    VIP_SUCCESS = 0,
    VIP_NOT_DONE = 1,
    VIP_INVALID_PARAMETER = 2,
    VIP_ERROR_RESOURCE = 3,
    VIP_TIMEOUT = 4,
    VIP_REJECT = 5,
    VIP_INVALID_RELIABILITY_LEVEL = 6,
    VIP_INVALID_MTU = 7,
    VIP_INVALID_QOS = 8,
    VIP_INVALID_PTAG = 9,
    VIP_INVALID_RDMAREAD = 10,
    VIP_DESCRIPTOR_ERROR = 11,
    VIP_INVALID_STATE = 12,
    VIP_ERROR_NAMESERVICE = 13,
    VIP_NO_MATCH = 14,
    /* Extension: the call exists in VIA 1.0 but this provider does not implement it. */
    VIP_EXT_NOT_IMPLEMENTED = 64
} VIP_RETURN;

/* ---- network address ------------------------------------------------------------ */
/* Variable length: HostAddressLen bytes of NIC address, then DiscriminatorLen bytes of
 * discriminator at HostAddress + HostAddressLen. */
typedef struct {
    VIP_UINT16 HostAddressLen;
    VIP_UINT16 DiscriminatorLen;
    VIP_UINT8 HostAddress[1];
} VIP_NET_ADDRESS;

/* Extension: the limits of an address on every softvia NIC (VipQueryNic reports the
 * same: NicAddressLen <= VIP_EXT_MAX_HOST_ADDRESS_LEN, MaxDiscriminatorLen ==
 * VIP_EXT_MAX_DISCRIMINATOR_LEN). An address over them is VIP_INVALID_PARAMETER.
 * A VIP_NET_ADDRESS the provider fills (VipConnectWait's and VipExtListenDone's
 * RemoteAddr, VipNSGetHostByName's Address) needs VIP_EXT_NET_ADDRESS_SIZE bytes of
 * storage; the provider never writes beyond them. */
#define VIP_EXT_MAX_HOST_ADDRESS_LEN 64
#define VIP_EXT_MAX_DISCRIMINATOR_LEN 128
#define VIP_EXT_NET_ADDRESS_SIZE \
    (offsetof(VIP_NET_ADDRESS, HostAddress) + VIP_EXT_MAX_HOST_ADDRESS_LEN + VIP_EXT_MAX_DISCRIMINATOR_LEN)

/* ---- reliability ---------------------------------------------------------------- */
typedef VIP_UINT16 VIP_RELIABILITY_LEVEL;
#define VIP_SERVICE_UNRELIABLE 0x01
#define VIP_SERVICE_RELIABLE_DELIVERY 0x02
#define VIP_SERVICE_RELIABLE_RECEPTION 0x04

/* ---- attributes ----------------------------------------------------------------- */
typedef struct {
    VIP_CHAR Name[64];
    VIP_ULONG HardwareVersion;
    VIP_ULONG ProviderVersion;
    VIP_UINT16 NicAddressLen;
    const VIP_UINT8 *LocalNicAddress;
    VIP_BOOLEAN ThreadSafe;
    VIP_UINT16 MaxDiscriminatorLen;
    VIP_ULONG MaxRegisterBytes;
    VIP_ULONG MaxRegisterRegions;
    VIP_ULONG MaxRegisterBlockBytes;
    VIP_ULONG MaxVI;
    VIP_ULONG MaxDescriptorsPerQueue;
    VIP_ULONG MaxSegmentsPerDesc;
    VIP_ULONG MaxCQ;
    VIP_ULONG MaxCQEntries;
    VIP_ULONG MaxTransferSize;
    VIP_ULONG NativeMTU;
    VIP_ULONG MaxPtags;
    VIP_RELIABILITY_LEVEL ReliabilityLevelSupport;
    VIP_RELIABILITY_LEVEL RDMAReadSupport;
} VIP_NIC_ATTRIBUTES;

typedef struct {
    VIP_RELIABILITY_LEVEL ReliabilityLevel;
    VIP_ULONG MaxTransferSize;
    VIP_QOS QoS;
    VIP_PROTECTION_HANDLE Ptag;
    VIP_BOOLEAN EnableRdmaWrite;
    VIP_BOOLEAN EnableRdmaRead;
} VIP_VI_ATTRIBUTES;

typedef struct {
    VIP_PROTECTION_HANDLE Ptag;
    VIP_BOOLEAN EnableRdmaWrite;
    VIP_BOOLEAN EnableRdmaRead;
} VIP_MEM_ATTRIBUTES;

typedef enum {
    VIP_STATE_IDLE = 0,
    VIP_STATE_CONNECTED = 1,
    VIP_STATE_CONNECT_PENDING = 2,
    VIP_STATE_ERROR = 3
} VIP_VI_STATE;

/* ---- descriptors ---------------------------------------------------------------- */
typedef struct {
    VIP_PVOID64 Next;
    VIP_MEM_HANDLE NextHandle;
    VIP_UINT16 SegCount;
    VIP_UINT16 Control;
    VIP_UINT32 Reserved;
    VIP_UINT32 ImmediateData;
    VIP_UINT32 Length;
    VIP_UINT32 Status;
} VIP_CONTROL_SEGMENT;

typedef struct {
    VIP_PVOID64 Data;
    VIP_MEM_HANDLE Handle;
    VIP_UINT32 Reserved;
} VIP_ADDRESS_SEGMENT;

typedef struct {
    VIP_PVOID64 Data;
    VIP_MEM_HANDLE Handle;
    VIP_UINT32 Length;
} VIP_DATA_SEGMENT;

typedef union {
    VIP_ADDRESS_SEGMENT Remote;
    VIP_DATA_SEGMENT Local;
} VIP_DESCRIPTOR_SEGMENT;

typedef struct {
    VIP_CONTROL_SEGMENT CS;
    VIP_DESCRIPTOR_SEGMENT DS[2];
} VIP_DESCRIPTOR;

#define VIP_DESCRIPTOR_ALIGNMENT 64

/* Control field */
#define VIP_CONTROL_OP_SENDRECV 0x0
#define VIP_CONTROL_OP_RDMAWRITE 0x1
#define VIP_CONTROL_OP_RDMAREAD 0x2
#define VIP_CONTROL_OP_RESERVED 0x3
#define VIP_CONTROL_OP_MASK 0x3
#define VIP_CONTROL_IMMEDIATE 0x4
#define VIP_CONTROL_QFENCE 0x8
#define VIP_CONTROL_RESERVED 0xFFF0

/* Status field */
#define VIP_STATUS_DONE 0x1
#define VIP_STATUS_FORMAT_ERROR 0x2
#define VIP_STATUS_PROTECTION_ERROR 0x4
#define VIP_STATUS_LENGTH_ERROR 0x8
#define VIP_STATUS_PARTIAL_ERROR 0x10
#define VIP_STATUS_DESC_FLUSHED_ERROR 0x20
#define VIP_STATUS_TRANSPORT_ERROR 0x40
#define VIP_STATUS_RDMA_PROT_ERROR 0x80
#define VIP_STATUS_REMOTE_DESC_ERROR 0x100
#define VIP_STATUS_ERROR_MASK 0x1FE
#define VIP_STATUS_OP_SEND 0x0
#define VIP_STATUS_OP_RECEIVE 0x10000
#define VIP_STATUS_OP_RDMA_WRITE 0x20000
#define VIP_STATUS_OP_REMOTE_RDMA_WRITE 0x30000
#define VIP_STATUS_OP_RDMA_READ 0x40000
#define VIP_STATUS_OP_MASK 0x70000
#define VIP_STATUS_IMMEDIATE 0x80000
#define VIP_STATUS_RESERVED 0xFFF0FE00

/* ---- asynchronous errors ------------------------------------------------------- */
typedef enum {
    VIP_ERROR_POST_DESC = 0,
    VIP_ERROR_CONN_LOST,
    VIP_ERROR_RECVQ_EMPTY,
    VIP_ERROR_VI_OVERRUN,
    VIP_ERROR_RDMAW_PROT,
    VIP_ERROR_RDMAW_DATA,
    VIP_ERROR_RDMAW_ABORT,
    VIP_ERROR_RDMAR_PROT,
    VIP_ERROR_COMP_PROT,
    VIP_ERROR_RDMA_TRANSPORT,
    VIP_ERROR_CATASTROPHIC
} VIP_ERROR_CODE;

typedef enum {
    VIP_RESOURCE_NIC = 0,
    VIP_RESOURCE_VI,
    VIP_RESOURCE_CQ,
    VIP_RESOURCE_DESCRIPTOR
} VIP_RESOURCE_CODE;

typedef struct {
    VIP_NIC_HANDLE NicHandle;
    VIP_VI_HANDLE ViHandle;
    VIP_CQ_HANDLE CQHandle;
    VIP_DESCRIPTOR *DescriptorPtr;
    VIP_ULONG OpCode;
    VIP_RESOURCE_CODE ResourceCode;
    VIP_ERROR_CODE ErrorCode;
} VIP_ERROR_DESCRIPTOR;

/* ---- NIC --------------------------------------------------------------------- */
/* DeviceName: NULL or "" opens the default NIC (SOFTVIA_DEVICE, else "shm").
 * Names: "shm" and "shm:<option>=<value>[,...]"; options: progress=inline|thread.
 * Any other name is VIP_INVALID_PARAMETER. */
VIP_RETURN VipOpenNic(const VIP_CHAR *DeviceName, VIP_NIC_HANDLE *NicHandle);
VIP_RETURN VipCloseNic(VIP_NIC_HANDLE NicHandle);
VIP_RETURN VipQueryNic(VIP_NIC_HANDLE NicHandle, VIP_NIC_ATTRIBUTES *NicAttributes);

/* ---- protection tags ---------------------------------------------------------- */
VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE *ProtectionTag);
VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE ProtectionTag);

/* ---- memory registration ------------------------------------------------------ */
VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_ULONG Length,
                          VIP_MEM_ATTRIBUTES *MemAttrs, VIP_MEM_HANDLE *MemoryHandle);
VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                            VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipQueryMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                       VIP_MEM_HANDLE MemoryHandle, VIP_MEM_ATTRIBUTES *MemAttrs);
VIP_RETURN VipSetMemAttributes(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                               VIP_MEM_HANDLE MemoryHandle, VIP_MEM_ATTRIBUTES *MemAttrs);

/* ---- completion queues -------------------------------------------------------- */
VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE NicHandle, VIP_ULONG EntryCount, VIP_CQ_HANDLE *CQHandle);
VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE CQHandle);
VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE CQHandle, VIP_ULONG EntryCount);
VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue);
VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE *ViHandle,
                     VIP_BOOLEAN *RecvQueue);

/* ---- virtual interfaces ------------------------------------------------------- */
VIP_RETURN VipCreateVi(VIP_NIC_HANDLE NicHandle, VIP_VI_ATTRIBUTES *ViAttribs,
                       VIP_CQ_HANDLE SendCQHandle, VIP_CQ_HANDLE RecvCQHandle,
                       VIP_VI_HANDLE *ViHandle);
VIP_RETURN VipDestroyVi(VIP_VI_HANDLE ViHandle);
VIP_RETURN VipQueryVi(VIP_VI_HANDLE ViHandle, VIP_VI_STATE *State, VIP_VI_ATTRIBUTES *Attribs,
                      VIP_BOOLEAN *SendQueueEmpty, VIP_BOOLEAN *RecvQueueEmpty);
VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *Attribs);

/* ---- connections: client/server ---------------------------------------------- */
/* RemoteAddr (may be NULL) receives the client's NIC address and discriminator: give it
 * VIP_EXT_NET_ADDRESS_SIZE bytes. */
VIP_RETURN VipConnectWait(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *LocalAddr, VIP_ULONG Timeout,
                          VIP_NET_ADDRESS *RemoteAddr, VIP_VI_ATTRIBUTES *RemoteViAttribs,
                          VIP_CONN_HANDLE *ConnHandle);
VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ConnHandle, VIP_VI_HANDLE ViHandle);
VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ConnHandle);
VIP_RETURN VipConnectRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                             VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout,
                             VIP_VI_ATTRIBUTES *RemoteViAttribs);
VIP_RETURN VipDisconnect(VIP_VI_HANDLE ViHandle);

/* ---- connections: peer-to-peer ----------------------------------------------- */
VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                                 VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout);
VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs);
VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs);

/* ---- data transfer ------------------------------------------------------------ */
VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr);

/* ---- notification (asynchronous handlers) --------------------------------------- */
typedef void (*VIP_DESC_NOTIFY_FN)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
                                   VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *Descriptor);
typedef void (*VIP_CQ_NOTIFY_FN)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
                                 VIP_VI_HANDLE ViHandle, VIP_BOOLEAN RecvQueue);
typedef void (*VIP_ERROR_HANDLER_FN)(VIP_PVOID Context, VIP_ERROR_DESCRIPTOR *ErrorDesc);

VIP_RETURN VipSendNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESC_NOTIFY_FN Handler);
VIP_RETURN VipRecvNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESC_NOTIFY_FN Handler);
VIP_RETURN VipCQNotify(VIP_CQ_HANDLE CqHandle, VIP_PVOID Context, VIP_CQ_NOTIFY_FN Handler);
VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE NicHandle, VIP_PVOID Context,
                            VIP_ERROR_HANDLER_FN Handler);

/* ---- name service ------------------------------------------------------------- */
/* NSInitInfo: NULL, or a path (const char *) of a hosts file of "name hex-address" lines.
 * Names are also resolved through the launcher's table ($SOFTVIA_JOB_DIR/names/).
 * The hosts file must be a regular file of at most VIP_EXT_HOSTS_FILE_MAX_BYTES, each
 * line at most VIP_EXT_HOSTS_LINE_MAX bytes; anything else (a directory, a FIFO, a
 * device, a malformed line) is VIP_ERROR_NAMESERVICE with one line on stderr naming the
 * file and the line. */
#define VIP_EXT_HOSTS_FILE_MAX_BYTES (1024 * 1024)
#define VIP_EXT_HOSTS_LINE_MAX 1024
VIP_RETURN VipNSInit(VIP_NIC_HANDLE NicHandle, VIP_PVOID NSInitInfo);
VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE NicHandle, VIP_CHAR *Name, VIP_NET_ADDRESS *Address,
                              VIP_ULONG NameIndex);
VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *Address, VIP_CHAR *Name,
                              VIP_ULONG *NameLen);
VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE NicHandle);

VIP_RETURN VipQuerySystemManagementInfo(VIP_NIC_HANDLE NicHandle, VIP_ULONG InfoType,
                                        VIP_PVOID SysManInfo);

/* =================================================================================
 * softvia extensions (not VIA 1.0)
 * ================================================================================= */

/* Progress mode of a NIC's firmware: a dedicated polling thread, or stepped inline from
 * the application's own calls (post, Done, Wait, CQDone, CQWait, connection calls). */
typedef enum { VIP_EXT_PROGRESS_INLINE = 0, VIP_EXT_PROGRESS_THREAD = 1 } VIP_EXT_PROGRESS_MODE;

typedef struct {
    VIP_EXT_PROGRESS_MODE Progress;
} VIP_EXT_NIC_OPTIONS;

/* Like VipOpenNic, with options that override the device name and the environment. */
VIP_RETURN VipExtOpenNic(const VIP_CHAR *DeviceName, const VIP_EXT_NIC_OPTIONS *Options,
                         VIP_NIC_HANDLE *NicHandle);
VIP_RETURN VipExtGetProgressMode(VIP_NIC_HANDLE NicHandle, VIP_EXT_PROGRESS_MODE *Mode);
/* Step the firmware once (inline mode); returns VIP_SUCCESS if it did work, else
 * VIP_NOT_DONE. In thread mode it returns VIP_NOT_DONE without doing anything. */
VIP_RETURN VipExtProgress(VIP_NIC_HANDLE NicHandle);
/* Whether the NIC's wire may lose frames (udp, dpdk, verbs, any wire with injected faults):
 * reliable VIs then acknowledge and retransmit, and a reliable send completes only when
 * the peer has acknowledged it. On a lossless wire (shm) a send completes once the NIC has
 * put its frames on the wire: it has read the send's memory. */
VIP_RETURN VipExtQueryWireLossy(VIP_NIC_HANDLE NicHandle, VIP_BOOLEAN *Lossy);

/* Counters, per NIC and per VI. The same block is readable from other processes
 * (softvia-nicinfo). */
typedef struct {
    VIP_UINT64 TxFrames, TxBytes, RxFrames, RxBytes;
    VIP_UINT64 SendsDone, RecvsDone;
    VIP_UINT64 Drops;  /* frames received that no receive descriptor took */
    VIP_UINT64 Errors; /* descriptors completed with an error status */
    VIP_UINT64 Retransmits; /* requests sent again (reliable VIs on a lossy wire) */
} VIP_EXT_COUNTERS;

VIP_RETURN VipExtQueryNicCounters(VIP_NIC_HANDLE NicHandle, VIP_EXT_COUNTERS *Counters);
VIP_RETURN VipExtQueryViCounters(VIP_VI_HANDLE ViHandle, VIP_EXT_COUNTERS *Counters);
/* The NIC-wide index of a VI (what the stat tool prints). */
VIP_RETURN VipExtQueryViId(VIP_VI_HANDLE ViHandle, VIP_UINT32 *ViId);

/* Request/reply steering (docs/steering.md). A send (or RDMA write with immediate
 * data) whose Control has VIP_EXT_CONTROL_REPLY is a reply; any other is a request. On a
 * VI with steering enabled, the receiving firmware places replies into the VI's reply
 * receive queue and requests into its ordinary receive queue, so the host need not
 * sort them. Without steering the bit is ignored and everything uses the receive queue.
 * The bit is one of VIA 1.0's reserved control bits; only this provider accepts it. */
#define VIP_EXT_CONTROL_REPLY 0x8000
/* CQ entries of the reply queue report RecvQueue = VIP_EXT_REPLY_QUEUE. */
#define VIP_EXT_REPLY_QUEUE 2

/* Enables steering on an idle VI; ReplyCQ (may be NULL) receives the reply queue's
 * completion entries. VIP_INVALID_STATE if the VI is not idle. */
VIP_RETURN VipExtEnableSteering(VIP_VI_HANDLE ViHandle, VIP_CQ_HANDLE ReplyCQ);
/* The reply receive queue: post, poll, wait (as VipPostRecv/VipRecvDone/VipRecvWait).
 * VIP_INVALID_STATE when steering is not enabled on the VI. */
VIP_RETURN VipExtPostRecvReply(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                               VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipExtRecvReplyDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipExtRecvReplyWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr);

/* VipCQDone without stepping the NIC (inline mode): takes an entry already there, else
 * VIP_NOT_DONE. For draining a CQ after a call that stepped it: a program that polls
 * only with this never sees new completions in inline mode. */
VIP_RETURN VipExtCQTake(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue);

/* A word of the program's for a VI (NULL until set), carried by the VI's completion
 * entries from then on: VipExtCQDoneContext returns it beside the VI handle, so a
 * consumer with many VIs on one CQ finds its own object without a lookup. Completions
 * already in the CQ keep the word they were written with. */
VIP_RETURN VipExtSetViContext(VIP_VI_HANDLE ViHandle, VIP_PVOID Context);
/* VipCQDone that also returns the VI's context word. */
VIP_RETURN VipExtCQDoneContext(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue,
                               VIP_PVOID *Context);

/* Standing listener (client/server connections). VipConnectWait listens only while it
 * runs; a VipExtListen listener stays on its discriminator until VipExtUnlisten, so a
 * request finds it whenever the NIC runs. The NIC holds the first matching request
 * (later ones get VIP_NO_MATCH until it is taken); VipExtListenDone takes it without
 * waiting and returns a connection handle to answer with VipConnectAccept or
 * VipConnectReject, as VipConnectWait does, and the listener listens again. Inline
 * progress: VipExtListenDone steps the NIC once when nothing is held. VipExtUnlisten
 * rejects a request still held. */
typedef struct vip_listen *VIP_EXT_LISTEN_HANDLE;
VIP_RETURN VipExtListen(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *LocalAddr, VIP_EXT_LISTEN_HANDLE *Listen);
VIP_RETURN VipExtListenDone(VIP_EXT_LISTEN_HANDLE Listen, VIP_NET_ADDRESS *RemoteAddr,
                            VIP_VI_ATTRIBUTES *RemoteViAttribs, VIP_CONN_HANDLE *ConnHandle);
VIP_RETURN VipExtUnlisten(VIP_EXT_LISTEN_HANDLE Listen);

/* Fault injection (docs/faults.md). A NIC opened while SOFTVIA_FAULTS holds a spec such
 * as "drop=0.01,dup=0.01,reorder=0.01,corrupt=0.001,delay=0.01,delay_us=50,seed=7" runs
 * its wire through a seeded injector that also checksums every frame (a corrupted frame
 * is detected and dropped, never delivered). All NICs of a job must agree on whether the
 * injector is on. VipExtSetFaults changes the rates of such a NIC (VIP_INVALID_STATE on
 * a NIC opened without it; VIP_INVALID_PARAMETER for a malformed spec). */
typedef struct {
    VIP_UINT64 Dropped, Duplicated, Reordered, Corrupted, Delayed;
    VIP_UINT64 BadChecksum; /* frames this NIC received corrupted (and dropped) */
} VIP_EXT_FAULT_COUNTERS;

VIP_RETURN VipExtSetFaults(VIP_NIC_HANDLE NicHandle, const VIP_CHAR *Spec);
VIP_RETURN VipExtQueryFaultCounters(VIP_NIC_HANDLE NicHandle, VIP_EXT_FAULT_COUNTERS *Counters);

/* Retransmission (docs/reliability.md). Reliable VIs on a wire that can lose frames
 * (UDP, or any NIC with the fault injector on) retransmit what the peer does not
 * acknowledge. A VI that makes no progress for its retry timeout (default 5000 ms, or
 * SOFTVIA_RETRY_TIMEOUT_MS when the NIC was opened) moves to VIP_STATE_ERROR: requests
 * in flight complete with VIP_STATUS_TRANSPORT_ERROR, the rest are flushed, and the
 * error callback receives VIP_ERROR_CONN_LOST. Milliseconds: 1 to 3600000, else
 * VIP_INVALID_PARAMETER. Takes effect at once, also on a connected VI. */
VIP_RETURN VipExtSetRetryTimeout(VIP_VI_HANDLE ViHandle, VIP_ULONG Milliseconds);

/* NIC atomics (docs/offloads.md): remote fetch-add and compare-and-swap on an 8-byte
 * aligned word of the peer's registered memory, done by the peer's NIC without its
 * program, the old value written into a local buffer. Post a VIP_EXT_ATOMIC_DESCRIPTOR
 * (aligned to VIP_DESCRIPTOR_ALIGNMENT, in registered memory) with VipPostSend, on a
 * connected reliable VI (an unreliable one completes it with VIP_STATUS_FORMAT_ERROR):
 *   CS.Control  VIP_EXT_CONTROL_OP_ATOMIC | VIP_EXT_CONTROL_ATOMIC_FETCH_ADD or _CMP_SWAP
 *               (VIP_CONTROL_QFENCE allowed), CS.SegCount 3
 *   Remote      the word (its address in the peer, the peer's memory handle)
 *   Args        fetch-add: Operand = the addend; compare-and-swap: Operand = the value
 *               to compare with, Swap = the value stored when they are equal
 *   Result      8 bytes of local registered memory (Length 8) for the old value
 * It completes in post order with VIP_EXT_STATUS_OP_ATOMIC, Length 8. The peer checks
 * it as an RDMA write (handle, range, protection tag, its VI's EnableRdmaWrite) and also
 * that the region allows atomics (VipExtSetMemAtomics) and the word is 8-byte aligned:
 * a refusal completes it with VIP_STATUS_RDMA_PROT_ERROR and breaks the connection. An
 * atomic is applied exactly once, also when the wire loses, repeats or reorders frames.
 * Atomics on one word are atomic against each other and against the peer program's own
 * locked instructions (lock xadd, lock cmpxchg, C11 atomics) on it. */
#define VIP_EXT_CONTROL_OP_ATOMIC 0x3 /* VIA's reserved op, softvia's offload operations */
#define VIP_EXT_CONTROL_ATOMIC_FETCH_ADD 0x0010
#define VIP_EXT_CONTROL_ATOMIC_CMP_SWAP 0x0020
#define VIP_EXT_STATUS_OP_ATOMIC 0x50000

/* Source read (softvia): on a posted send or RDMA write that completes only when the
 * peer acknowledges it (an RDMA write on a reliable VI, any send with reliable
 * reception), the NIC sets VIP_EXT_STATUS_SOURCE_READ in CS.Status, before
 * VIP_STATUS_DONE, once it has read the descriptor's local data for the last time: from
 * then on the program may reuse those buffers (not the descriptor) while the
 * acknowledgement is on its way. It comes only where nothing will be resent (a lossless
 * wire: shm, or verbs; on udp or with the fault injector a resend reads the data again,
 * so there only DONE says so). The final status written with VIP_STATUS_DONE does not
 * carry the bit: test (Status & (VIP_STATUS_DONE | VIP_EXT_STATUS_SOURCE_READ)). */
#define VIP_EXT_STATUS_SOURCE_READ 0x200

typedef struct {
    VIP_UINT64 Operand;
    VIP_UINT64 Swap;
} VIP_EXT_ATOMIC_SEGMENT;

typedef struct {
    VIP_CONTROL_SEGMENT CS;
    VIP_ADDRESS_SEGMENT Remote;
    VIP_EXT_ATOMIC_SEGMENT Args;
    VIP_DATA_SEGMENT Result;
} VIP_EXT_ATOMIC_DESCRIPTOR;

/* A NIC atomic applied at once, in the calling thread, without a descriptor (softvia):
 * when a same-host peer's grant covers the word (memory the peer's NIC allocated,
 * VipExtAllocMem) and everything posted on the VI's send queue has completed, the NIC
 * applies Op to the peer's word, writes the old value to *Old and returns VIP_SUCCESS,
 * ordered after all the VI's earlier sends as a posted atomic would be. Otherwise it does
 * nothing and returns VIP_NOT_DONE: post a VIP_EXT_ATOMIC_DESCRIPTOR instead (the first
 * atomic on a region always takes that way; the grant comes with its answer; a peer on
 * another host never grants). This is the descriptor's same-host shortcut without the
 * descriptor's post and Done, as ucp_atomic_fetch_nb completes in place over shared memory.
 *   Op         VIP_EXT_CONTROL_ATOMIC_FETCH_ADD (Operand is added) or
 *              VIP_EXT_CONTROL_ATOMIC_CMP_SWAP (Swap is stored if the word equals Operand)
 *   RemoteHandle, RemoteAddress   the word, as in the descriptor's Remote segment
 * Errors: VIP_INVALID_PARAMETER (ViHandle, Op, Old NULL, RemoteAddress not 8-byte
 * aligned), VIP_INVALID_STATE (the VI is not connected). */
VIP_RETURN VipExtAtomicNow(VIP_VI_HANDLE ViHandle, VIP_ULONG Op, VIP_MEM_HANDLE RemoteHandle,
                           VIP_UINT64 RemoteAddress, VIP_UINT64 Operand, VIP_UINT64 Swap, VIP_UINT64 *Old);

/* Memory the NIC allocates (softvia): Length bytes (rounded up to pages), zeroed and
 * page-aligned, in a memfd the NIC keeps, which the NIC of a peer on this host (same
 * kernel, same user) can map too. Registered and opened to atomics like any memory, it
 * lets such a peer's NIC apply NIC atomics to it with its own CPU's locked instructions
 * instead of a round trip through this NIC, after the first one went the usual way:
 * this NIC grants that once its checks passed, and takes the grant back before
 * VipDeregisterMem, VipSetMemAttributes or VipExtSetMemAtomics (closing) returns and when
 * the connection ends (docs/offloads.md). Over other wires it is ordinary memory.
 * Errors: VIP_INVALID_PARAMETER (NicHandle, Address NULL, Length 0 or above 1 TiB),
 * VIP_ERROR_RESOURCE (no memory, file descriptors or room for more blocks: 4096 per NIC).
 * The memory goes away with VipExtFreeMem or VipCloseNic. */
VIP_RETURN VipExtAllocMem(VIP_NIC_HANDLE NicHandle, VIP_ULONG Length, VIP_PVOID *Address);
/* Frees memory of VipExtAllocMem: VIP_INVALID_PARAMETER if Address is not the start of
 * a block of this NIC, VIP_INVALID_STATE while a registration lies in it. */
VIP_RETURN VipExtFreeMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address);

/* Opens (Enable true) or closes a registered region to NIC atomics from peers; a new
 * registration starts closed. VIP_INVALID_PARAMETER for a handle or address that does
 * not name a registration, or memory that is not writable. */
VIP_RETURN VipExtSetMemAtomics(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_MEM_HANDLE MemHandle,
                               VIP_BOOLEAN Enable);

/* What this NIC did as the target of atomics: applied, answered again from its record
 * of recent answers (a repeated request on a lossy wire), refused; and as an initiator:
 * atomics it applied itself under a same-host target's grant (VipExtAllocMem). */
typedef struct {
    VIP_UINT64 Applied, Replayed, Refused;
    VIP_UINT64 Shortcut;
} VIP_EXT_ATOMIC_COUNTERS;
VIP_RETURN VipExtQueryAtomicCounters(VIP_NIC_HANDLE NicHandle, VIP_EXT_ATOMIC_COUNTERS *Counters);

/* A readable name of a VIP_RETURN value ("VIP_NO_MATCH"); never NULL. */
const char *VipExtReturnString(VIP_RETURN Code);

#ifdef __cplusplus
}
#endif
#endif /* VIPL_H */
