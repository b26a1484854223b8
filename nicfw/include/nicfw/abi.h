/*
 * nicfw/abi.h -- the contract between the driver (vipl) and the emulated NIC (nicfw),
 * and between this NIC and the status readers (softvia-nicinfo).
 *
 * Plain C, fixed-width fields, valid in C and C++. Everything here that crosses a
 * process boundary (the wire frame, the status page) carries a magic and a version.
 * docs/abi.md explains each structure and docs/memory-ordering.md each barrier.
 */
#ifndef NICFW_ABI_H
#define NICFW_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NICFW_ABI_VERSION 3u

/* ---- limits the NIC advertises (the driver's NIC attributes tell the same) -------- */
#define NICFW_MAX_VI 4096u                /* per NIC instance */
#define NICFW_MAX_DESC_PER_QUEUE 4096u    /* power of two */
#define NICFW_MAX_SEGMENTS 64u            /* data segments per descriptor */
#define NICFW_MAX_CQ 1024u
#define NICFW_MAX_CQ_ENTRIES 65536u
#define NICFW_MAX_REGIONS 65535u          /* index 0 is never used: handle 0 is invalid */
#define NICFW_MAX_REGION_BYTES (1ull << 40)
#define NICFW_MAX_TRANSFER (16u << 20)    /* bytes in one message, segmented into frames */
#define NICFW_MAX_PTAGS 1024u
#define NICFW_MAX_DISCRIMINATOR 128u
#define NICFW_MAX_ADDR 64u                /* bytes of a NIC address, any transport */
#define NICFW_DOORBELL_ENTRIES 8192u      /* per-NIC doorbell queue, power of two */

/* ---- memory handles: region index (low 16 bits) + generation (high 16, never 0) --- */
#define NICFW_MEMH_INDEX(h) ((h) & 0xFFFFu)
#define NICFW_MEMH_GEN(h) ((h) >> 16)
#define NICFW_MEMH_MAKE(idx, gen) (((uint32_t)(gen) << 16) | (uint32_t)(idx))

/* ---- VI identifiers on the wire: slot index (low 16) + generation (high 16) ---------- */
#define NICFW_VI_INDEX(v) ((v) & 0xFFFFu)
#define NICFW_VI_GEN(v) ((v) >> 16)
#define NICFW_VI_MAKE(idx, gen) (((uint32_t)(gen) << 16) | (uint32_t)(idx))

/* ---- descriptors as the device reads them ----------------------------------------
 * The driver's descriptor (VIA's VIP_DESCRIPTOR) has this layout; vipl/src/device.h
 * checks every size, offset and constant below against vipl.h at compile time, so the
 * device never needs the driver's header. All fields are untrusted host memory: the
 * firmware reads them through nicfw/hostmem.h. */
typedef struct {
    uint64_t next;      /* next descriptor (the driver's chain; the device ignores it) */
    uint32_t next_memh;
    uint16_t seg_count; /* data or address segments that follow */
    uint16_t control;   /* NICFW_DC_* */
    uint32_t reserved;
    uint32_t imm;       /* immediate data */
    uint32_t length;    /* written by the device: bytes transferred */
    uint32_t status;    /* written by the device: NICFW_DS_* */
} nicfw_desc_ctrl;

typedef struct {
    uint64_t addr; /* local: host address of the data; remote: the peer's address */
    uint32_t memh; /* memory handle of the region holding it */
    uint32_t len;  /* local: bytes; remote: reserved */
} nicfw_desc_seg;

typedef struct {
    nicfw_desc_ctrl cs;
    nicfw_desc_seg ds[2]; /* seg_count of them really: index from the control segment */
} nicfw_desc;

/* control: the operation and its modifiers */
#define NICFW_DC_OP_SEND 0x0u
#define NICFW_DC_OP_RDMA_WRITE 0x1u
#define NICFW_DC_OP_RDMA_READ 0x2u
#define NICFW_DC_OP_RESERVED 0x3u  /* VIA's reserved op: softvia's offload operations */
#define NICFW_DC_OP_OFFLOAD NICFW_DC_OP_RESERVED
#define NICFW_DC_OP_MASK 0x3u
#define NICFW_DC_IMMEDIATE 0x4u
#define NICFW_DC_QFENCE 0x8u
#define NICFW_DC_REPLY 0x8000u    /* steering: the message is a reply (a softvia extension) */
#define NICFW_DC_RESERVED 0xFFF0u /* bits the device refuses, NICFW_DC_REPLY aside */
/* Offload operations (op NICFW_DC_OP_OFFLOAD): bits 4-7 of control name which one, so
 * an offload adds descriptor opcodes without taking more of VIA's reserved bits. */
#define NICFW_DC_OFFLOAD_SHIFT 4u
#define NICFW_DC_OFFLOAD_MASK 0x00F0u
#define NICFW_DC_OFFLOAD_OP(c) (((c) & NICFW_DC_OFFLOAD_MASK) >> NICFW_DC_OFFLOAD_SHIFT)
#define NICFW_OFFLOAD_OP_FETCH_ADD 1u  /* NIC atomics (nicfw/offload/atomics) */
#define NICFW_OFFLOAD_OP_CMP_SWAP 2u

/* status: what the device writes back (VIA's bit values, so the driver passes them on) */
#define NICFW_DS_DONE 0x1u
#define NICFW_DS_FORMAT_ERROR 0x2u
#define NICFW_DS_PROTECTION_ERROR 0x4u
#define NICFW_DS_LENGTH_ERROR 0x8u
#define NICFW_DS_PARTIAL_ERROR 0x10u
#define NICFW_DS_FLUSHED 0x20u
#define NICFW_DS_TRANSPORT_ERROR 0x40u
#define NICFW_DS_RDMA_PROT_ERROR 0x80u
#define NICFW_DS_REMOTE_DESC_ERROR 0x100u
#define NICFW_DS_ERROR_MASK 0x1FEu
/* softvia: before DONE, on a send-queue descriptor whose data the device has read for
 * the last time (every frame built, and none will be resent: a lossless wire), so the
 * program may reuse its buffers before the target's acknowledgement completes it. DONE
 * implies it; the completion's status does not carry it. */
#define NICFW_DS_SOURCE_READ 0x200u
#define NICFW_DS_OP_SEND 0x0u
#define NICFW_DS_OP_RECEIVE 0x10000u
#define NICFW_DS_OP_RDMA_WRITE 0x20000u
#define NICFW_DS_OP_REMOTE_RDMA_WRITE 0x30000u
#define NICFW_DS_OP_RDMA_READ 0x40000u
#define NICFW_DS_OP_ATOMIC 0x50000u      /* softvia: a NIC atomic (fetch-add, compare-and-swap) */
#define NICFW_DS_OP_MASK 0x70000u
#define NICFW_DS_IMMEDIATE 0x80000u

/* ---- VI state and service level (the device's, read by the driver) ---------------- */
enum nicfw_vi_state {
    NICFW_VI_IDLE = 0,
    NICFW_VI_CONNECTED = 1,
    NICFW_VI_CONNECT_PENDING = 2,
    NICFW_VI_ERROR = 3
};
#define NICFW_REL_UNRELIABLE 0x01u
#define NICFW_REL_RELIABLE_DELIVERY 0x02u
#define NICFW_REL_RELIABLE_RECEPTION 0x04u

/* ---- device result of a connection step (Vi::conn_result; the driver names it) ------ */
enum nicfw_result {
    NICFW_R_OK = 0,
    NICFW_R_TIMEOUT = 1,      /* nobody answered in time */
    NICFW_R_REJECTED = 2,     /* the server rejected the request */
    NICFW_R_NO_MATCH = 3,     /* nobody waits on that discriminator */
    NICFW_R_RELIABILITY = 4,  /* the two VIs' service levels differ */
    NICFW_R_FLUSHED = 5       /* the VI was flushed while the connect was pending */
};

/* ---- asynchronous errors the device reports (the driver's error callback) --------- */
enum nicfw_async_code {
    NICFW_AE_POST_DESC = 0,  /* a posted descriptor could not be processed */
    NICFW_AE_CONN_LOST,
    NICFW_AE_RECVQ_EMPTY,
    NICFW_AE_VI_OVERRUN,
    NICFW_AE_RDMAW_PROT,
    NICFW_AE_RDMAW_DATA,
    NICFW_AE_RDMAW_ABORT,
    NICFW_AE_RDMAR_PROT,
    NICFW_AE_COMP_PROT,      /* a completion could not be written */
    NICFW_AE_RDMA_TRANSPORT,
    NICFW_AE_CATASTROPHIC
};
enum nicfw_async_resource { NICFW_RES_NIC = 0, NICFW_RES_VI, NICFW_RES_CQ, NICFW_RES_DESCRIPTOR };

typedef struct {
    void *vi_context;   /* the driver's value for the VI (NULL: none) */
    void *cq_context;   /* the driver's value for the CQ (NULL: none) */
    uint64_t desc;      /* the descriptor concerned (0: none) */
    uint32_t resource;  /* enum nicfw_async_resource */
    uint32_t code;      /* enum nicfw_async_code */
    uint32_t op;        /* NICFW_DC_OP_* of the descriptor, when there is one */
    uint32_t reserved;
} nicfw_async_event;

/* ---- doorbell: what the driver writes to tell the NIC about a posted descriptor ---
 * One per-NIC queue of rung doorbells, so the firmware never scans VIs to find work
 * (the paper's 15 us doorbell plateau came from that scan). */
/* NICFW_ALTQ: a VI's second receive queue, which an offload routes messages into by their
 * frame flags (Offload::route_flags; steering: reply-class messages). */
enum nicfw_queue_kind { NICFW_SENDQ = 0, NICFW_RECVQ = 1, NICFW_ALTQ = 2 };
#define NICFW_REPLYQ NICFW_ALTQ /* steering's name for it */

typedef struct {
    uint64_t desc;     /* descriptor virtual address (untrusted) */
    uint32_t memh;     /* memory handle of the region holding the descriptor (untrusted) */
    uint16_t vi_index; /* which VI */
    uint16_t queue;    /* enum nicfw_queue_kind */
} nicfw_doorbell;

/* ---- completion queue entry: names the VI and the queue, as VIA says ------------- */
typedef struct {
    uint64_t vi_context;   /* the driver's value for the VI (its handle) */
    uint64_t user_context; /* the program's value for the VI (VipExtSetViContext): a
                              consumer finds its own object from it, with no lookup */
    uint32_t vi_index;
    uint32_t recv;         /* enum nicfw_queue_kind */
} nicfw_cqe;

/* ---- wire frame header (transport independent, little-endian) --------------------
 * Every frame from any transport starts with this. The firmware's receive path checks
 * it in a fixed order (length, type, version, field ranges) before acting on it. */
enum nicfw_frame_type {
    NICFW_F_DATA = 1,         /* a fragment of a send/receive message */
    NICFW_F_ACK = 2,          /* reliable reception: messages placed at the receiver */
    NICFW_F_CONN_REQ = 3,     /* client/server connect request */
    NICFW_F_CONN_ACCEPT = 4,
    NICFW_F_CONN_REJECT = 5,
    NICFW_F_CONN_NOMATCH = 6, /* nobody waits on that discriminator */
    NICFW_F_PEER_REQ = 7,     /* peer-to-peer connect request (resent until answered) */
    NICFW_F_PEER_ACK = 8,
    NICFW_F_DISCONNECT = 9,   /* the sender's VI left the connection */
    NICFW_F_RDMA_WRITE = 10,  /* a fragment of an RDMA write; nicfw_rdma_ext follows the header */
    NICFW_F_READ_REQ = 11,    /* RDMA read request; nicfw_rdma_ext follows (frag_len unused) */
    NICFW_F_READ_RESP = 12,   /* a fragment of RDMA read data; seq = the request's seq */
    NICFW_F_NAK = 13,         /* the target refused a request: imm = NICFW_DS_* bits */
    NICFW_F_CORE_MAX = 13,
    /* Offload frames (nicfw/offload/): types from here up belong to offloads. */
    NICFW_F_ATOMIC_REQ = 14,  /* NIC atomic request: nicfw_rdma_ext, then nicfw_atomic_args */
    NICFW_F_ATOMIC_RESP = 15, /* its answer: seq = the request's, 8 bytes of old value */
    NICFW_F_ATOMIC_GRANT = 16,/* same host only: the target lets the initiator apply atomics
                                 to a region itself (nicfw_atomic_grant) */
    NICFW_F_TYPE_MAX = 16
};

/* Names for tracing and status readers (softvia-nicinfo, the Wireshark dissector's). */
static inline const char *nicfw_frame_type_name(unsigned type) {
    static const char *const names[NICFW_F_TYPE_MAX + 1] = {
        "?", "DATA", "ACK", "CONN_REQ", "CONN_ACCEPT", "CONN_REJECT", "CONN_NOMATCH",
        "PEER_REQ", "PEER_ACK", "DISCONNECT", "RDMA_WRITE", "READ_REQ", "READ_RESP", "NAK",
        "ATOMIC_REQ", "ATOMIC_RESP", "ATOMIC_GRANT"};
    return type <= NICFW_F_TYPE_MAX ? names[type] : "?";
}
static inline const char *nicfw_vi_state_name(uint32_t state) {
    switch (state) {
        case NICFW_VI_IDLE: return "IDLE";
        case NICFW_VI_CONNECTED: return "CONNECTED";
        case NICFW_VI_CONNECT_PENDING: return "CONNECT_PENDING";
        case NICFW_VI_ERROR: return "ERROR";
        default: return "UNKNOWN";
    }
}

#define NICFW_FF_IMMEDIATE 0x01 /* DATA: imm carries immediate data */
#define NICFW_FF_LAST 0x02      /* DATA: last fragment of the message */
#define NICFW_FF_REPLY 0x04     /* DATA, RDMA_WRITE: message class reply (steering) */
#define NICFW_FF_GAP 0x08       /* ACK: frames after seq arrived but seq did not: resend from seq */
#define NICFW_FF_ACKED 0x10     /* DATA, RDMA_WRITE: a piggybacked ACK (uint32 seq) follows the payload */

typedef struct {
    uint8_t type;     /* enum nicfw_frame_type */
    uint8_t version;  /* NICFW_ABI_VERSION */
    uint8_t flags;    /* NICFW_FF_* */
    uint8_t reserved;
    uint32_t dst_vi;  /* NICFW_VI_MAKE at the receiver (0xFFFFFFFF: none yet) */
    uint32_t src_vi;  /* NICFW_VI_MAKE at the sender */
    uint32_t msg_len; /* DATA: whole message; control: payload length */
    uint32_t offset;  /* DATA: offset of this fragment in the message */
    uint32_t frag_len;/* DATA: bytes of payload in this frame */
    uint32_t imm;     /* DATA: immediate data; ACK: number of messages acknowledged */
    uint32_t seq;     /* DATA, RDMA_WRITE, READ_REQ: per-VI request sequence number;
                         ACK: the next one expected (cumulative); control: request id */
} nicfw_frame_hdr;

/* RDMA extension header: the remote buffer, after nicfw_frame_hdr in RDMA_WRITE and
 * READ_REQ frames. The target checks it against its own memory table. */
typedef struct {
    uint64_t addr;  /* remote virtual address of offset 0 of the message */
    uint32_t memh;  /* remote memory handle */
    uint32_t reserved;
} nicfw_rdma_ext;

/* Operands of a NIC atomic: in the descriptor (segment 1, after the address segment)
 * and on the wire (after nicfw_rdma_ext in ATOMIC_REQ). Fetch-add: add = operand[0].
 * Compare-and-swap: compare = operand[0], swap = operand[1]. */
typedef struct {
    uint64_t operand[2];
} nicfw_atomic_args;

/* ATOMIC_GRANT payload: a target NIC on the initiator's host lets it apply atomics to a
 * region of memory the target's NIC allocated (a memfd) with its own locked instructions,
 * for as long as the grant's word in the target's grant page (a memfd of one page of
 * 64-bit words) holds generation gen with the open bit (offload/atomics/grants.h). The
 * descriptors are numbers in the target's process, opened through /proc/<pid>/fd. */
typedef struct {
    uint64_t base;     /* the region: its address at the target */
    uint64_t len;      /* and its length */
    uint64_t file_off; /* where base lies in the memfd holding the region */
    uint32_t mem_fd;   /* that memfd */
    uint32_t page_fd;  /* the grant page */
    uint32_t memh;     /* the region's memory handle */
    uint32_t slot;     /* the grant's word in the page */
    uint32_t gen;      /* the word's generation while the grant holds */
    uint32_t reserved;
} nicfw_atomic_grant;

/* Connection control payload (after the header) for CONN_* and PEER_* frames. */
typedef struct {
    uint16_t reliability; /* NICFW_REL_* */
    uint8_t rdma_write;
    uint8_t rdma_read;
    uint32_t max_transfer;
    uint16_t src_disc_len; /* PEER_REQ: sender's local discriminator; CONN_REQ: target */
    uint16_t dst_disc_len; /* PEER_REQ: the discriminator the sender wants to reach */
    uint16_t src_addr_len; /* CONN_REQ: bytes of src_addr; 0 elsewhere */
    uint16_t reserved;
    /* CONN_REQ: the sender NIC's whole address, which a server's VipConnectWait reports:
     * the wire a frame came by may show only part of it (the same-host shortcut). */
    uint8_t src_addr[NICFW_MAX_ADDR];
    uint8_t disc[2 * NICFW_MAX_DISCRIMINATOR]; /* src bytes, then dst bytes */
} nicfw_conn_payload;

/* ---- status page: one memfd per NIC, readable by other processes -------------------
 * Written only by the firmware (relaxed stores); readers tolerate torn counters. */
#define NICFW_STATUS_MAGIC 0x53564e4943535432ull    /* "SVNICST2": this layout */
#define NICFW_STATUS_MAGIC_V1 0x53564e4943535431ull /* "SVNICST1": before the offload lines */
#define NICFW_STATUS_OFFLOADS 4         /* offload lines on the page */
#define NICFW_STATUS_OFFLOAD_COUNTERS 4 /* counters per offload line */
#define NICFW_STATUS_NAME 24            /* name fields, NUL included */

typedef struct {
    uint64_t tx_frames, tx_bytes, rx_frames, rx_bytes;
    uint64_t sends_done, recvs_done;
    uint64_t drops;  /* frames no receive descriptor took */
    uint64_t errors; /* descriptors completed with an error status */
    uint64_t retransmits; /* requests sent again (reliable VIs on a lossy wire) */
} nicfw_counters;

typedef struct {
    uint32_t state;       /* enum nicfw_vi_state; 0xFFFFFFFF: slot unused */
    uint16_t reliability; /* NICFW_REL_* */
    uint16_t peer;        /* transport peer index */
    uint32_t remote_vi;
    uint32_t reserved;
    nicfw_counters c;
} nicfw_vi_status; /* 88 bytes */

/* One offload of the firmware (nicfw/offload.h) and its counters: name "" means the line
 * is unused, a counter named "" is unused. */
typedef struct {
    char name[NICFW_STATUS_NAME];
    char counter_names[NICFW_STATUS_OFFLOAD_COUNTERS][NICFW_STATUS_NAME];
    uint64_t counter[NICFW_STATUS_OFFLOAD_COUNTERS];
} nicfw_offload_status; /* 152 bytes */

typedef struct {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t pid;
    char device[64];     /* device name as opened */
    char transport[16];  /* "shm", ... */
    char progress[16];   /* "inline" | "thread" */
    uint32_t addr_len;
    uint8_t addr[NICFW_MAX_ADDR];
    uint32_t mtu;
    uint32_t max_vi;
    uint32_t vi_hwm;     /* one past the highest VI slot ever used */
    uint32_t peers;      /* transport peers known */
    nicfw_counters nic;
    uint32_t offloads;   /* offload lines in use, from the first */
    uint32_t reserved;
    nicfw_offload_status offload[NICFW_STATUS_OFFLOADS];
    /* followed by max_vi nicfw_vi_status entries */
} nicfw_status_page;

/* ---- sizes and offsets both sides rely on ----------------------------------------- */
#ifdef __cplusplus
#define NICFW_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define NICFW_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
NICFW_STATIC_ASSERT(sizeof(nicfw_desc_ctrl) == 32, "descriptor control segment");
NICFW_STATIC_ASSERT(sizeof(nicfw_desc_seg) == 16, "descriptor segment");
NICFW_STATIC_ASSERT(sizeof(nicfw_desc) == 64, "descriptor with two segments");
NICFW_STATIC_ASSERT(__builtin_offsetof(nicfw_desc_ctrl, length) % 8 == 0 &&
                        __builtin_offsetof(nicfw_desc_ctrl, status) == __builtin_offsetof(nicfw_desc_ctrl, length) + 4,
                    "length and status: one 8-byte store");
NICFW_STATIC_ASSERT(sizeof(nicfw_doorbell) == 16, "doorbell");
NICFW_STATIC_ASSERT(sizeof(nicfw_cqe) == 24, "completion entry");
NICFW_STATIC_ASSERT(sizeof(nicfw_frame_hdr) == 32, "wire frame header");
NICFW_STATIC_ASSERT(sizeof(nicfw_rdma_ext) == 16, "RDMA extension header");
NICFW_STATIC_ASSERT(sizeof(nicfw_vi_status) == 88, "status page VI line");
NICFW_STATIC_ASSERT(sizeof(nicfw_offload_status) == 152, "status page offload line");
NICFW_STATIC_ASSERT(sizeof(nicfw_status_page) % 8 == 0, "VI lines after the header stay aligned");
NICFW_STATIC_ASSERT(sizeof(nicfw_atomic_args) == sizeof(nicfw_desc_seg), "atomic operands take one segment");
NICFW_STATIC_ASSERT(sizeof(nicfw_atomic_grant) == 48, "an atomic grant is 48 bytes on the wire");

#ifdef __cplusplus
}
#endif
#endif /* NICFW_ABI_H */
