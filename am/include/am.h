/*
 * am.h -- Active Messages (Berkeley AM-2 API) over softvia's VIPL ("AMVIA").
 *
 * Existing AM-2 programs compile against this header: the AM-2 names, types, codes and
 * handler signatures. Everything that is not AM-2 carries the AMX_ prefix. The design,
 * the limits and the error rules are in docs/am.md.
 *
 * Error rule: a call that returns an error code did nothing (the message was not sent).
 * A request or reply that returns AM_OK is either delivered or comes back to handler 0
 * of the sending endpoint with a status code (EBADHANDLER, EBADTAG, EBADSEGOFF, ...).
 */
#ifndef AM_H
#define AM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ----------------------------------------------------------------------- */
typedef uint64_t tag_t;     /* endpoint tag; AM_NONE accepts nothing, AM_ALL everything */
typedef uint8_t handler_t;  /* handler index 0..255; 0 receives returned messages */
typedef int op_t;           /* opcode of a returned message (AM_REQUEST_M ...) */
typedef struct amx_bundle *eb_t;
typedef struct amx_endpoint *ep_t;

/* An endpoint name: plain data. Copy it byte for byte to another process (any means)
 * and pass it to AM_Map there. It holds the NIC address and a random endpoint id. */
typedef struct {
    uint32_t magic;        /* AMX_EN_MAGIC */
    uint16_t nic_addr_len; /* bytes used in nic_addr */
    uint16_t reserved;     /* 0 */
    uint64_t ep_id;        /* unique per endpoint (random) */
    uint8_t nic_addr[64];  /* the VIPL NIC address (VIP_NIC_ATTRIBUTES.LocalNicAddress) */
} en_t;
#define AMX_EN_MAGIC 0x414d5631u /* "AMV1" */

/* Handler functions are called with the signatures below; they are stored untyped.
 *   short:          void h(void *token, int a0, ..., int aN-1)
 *   medium, long:   void h(void *token, void *buf, size_t nbytes, int a0, ..., int aN-1)
 *   handler 0:      void h(int status, op_t opcode, void *token)   (returned messages) */
#ifdef __cplusplus
typedef void (*amx_handler_fn_t)(...);
#else
typedef void (*amx_handler_fn_t)();
#endif
typedef void (*amx_returned_fn_t)(int status, op_t opcode, void *token);

/* ---- codes ------------------------------------------------------------------------ */
#define AM_OK 0
#define AM_ERR_NOT_INIT 1 /* AM_Init has not been called */
#define AM_ERR_BAD_ARG 2  /* an argument is invalid (handle, index, size, NULL) */
#define AM_ERR_RESOURCE 3 /* out of a resource, or not allowed here (e.g. inside a handler) */
#define AM_ERR_NOT_SENT 4 /* the destination is unreachable (not connected, or gone) */
#define AM_ERR_IN_USE 5   /* AM_RequestXferAsync: no credit or buffer free right now */

#define AM_NONE 0 /* tag: accept no message */
#define AM_ALL 1  /* tag: accept every message */

#define AM_SEQ 0 /* bundle used by one thread at a time (the only kind supported) */
#define AM_PAR 1 /* refused with AM_ERR_RESOURCE */

#define AM_NOEVENTS 0 /* event mask: AM_WaitSema would never return */
#define AM_NOTEMPTY 1 /* event mask: AM_WaitSema returns once a message is waiting */

/* Status codes given to handler 0 with a returned message. */
#define EBADARGS 1
#define EBADENTRY 2
#define EBADTAG 3
#define EBADHANDLER 4
#define EBADSEGOFF 5
#define EBADLENGTH 6
#define EBADENDPOINT 7
#define ECONGESTION 8
#define EUNREACHABLE 9
#define EREPLYREJECTED 10

/* Opcodes given to handler 0 (what kind of message came back). */
#define AM_REQUEST_M 1
#define AM_REQUEST_IM 2
#define AM_REQUEST_XFER_M 3
#define AM_REPLY_M 4
#define AM_REPLY_IM 5
#define AM_REPLY_XFER_M 6

/* ---- limits (docs/am.md says why these values) ------------------------------------ */
#define AMX_MAX_ARGS 16
#define AMX_MAX_MEDIUM 4096
#define AMX_MAX_LONG 65536
#define AMX_MAX_HANDLERS 256
#define AMX_MAX_TRANSLATIONS 16384
#define AMX_DEFAULT_TRANSLATIONS 256

/* These four are constants: AM_MaxLong() is 65536 where it is written (a loop condition
 * costs nothing, an array may be sized by it). libamvia keeps the functions for
 * programs built against an older am.h; (AM_MaxLong)() or &AM_MaxLong reaches them. */
int (AM_MaxShort)(void);        /* handler arguments: 16 */
int (AM_MaxMedium)(void);       /* bytes of a medium message: 4096 */
int (AM_MaxLong)(void);         /* bytes of a long message: 65536 */
int (AM_MaxNumHandlers)(void);  /* 256 */
#define AM_MaxShort() (AMX_MAX_ARGS)
#define AM_MaxMedium() (AMX_MAX_MEDIUM)
#define AM_MaxLong() (AMX_MAX_LONG)
#define AM_MaxNumHandlers() (AMX_MAX_HANDLERS)
int AM_MaxNumTranslations(int *ntrans); /* AMX_MAX_TRANSLATIONS */
int AM_MaxSegLength(uintptr_t *nbytes);

/* ---- set-up ----------------------------------------------------------------------- */
int AM_Init(void);      /* opens the NIC; a second call is a no-op. AM_ERR_BAD_ARG: a
                         * SOFTVIA_* setting or SOFTVIA_DEVICE is not valid (named on
                         * stderr); AM_ERR_RESOURCE: the NIC could not be created */
int AM_Terminate(void); /* frees every bundle and endpoint, closes the NIC */

int AM_AllocateBundle(int type, eb_t *bundle);
int AM_FreeBundle(eb_t bundle); /* frees its endpoints too */
int AM_AllocateEndpoint(eb_t bundle, ep_t *endpoint, en_t *name);
int AM_FreeEndpoint(ep_t ea);
int AM_MoveEndpoint(ep_t ea, eb_t from_bundle, eb_t to_bundle);

/* The segment long messages land in. Registered with the NIC for remote RDMA write;
 * every page of it must be mapped. nbytes 0 (or addr NULL) removes it. */
int AM_SetSeg(ep_t ea, void *addr, uintptr_t nbytes);
int AM_GetSeg(ep_t ea, void **addr, uintptr_t *nbytes);

int AM_SetTag(ep_t ea, tag_t tag);
int AM_GetTag(ep_t ea, tag_t *tag);

/* Translation table: index -> (endpoint name, tag to send with). */
int AM_Map(ep_t ea, int index, en_t name, tag_t tag);
int AM_MapAny(ep_t ea, int *index, en_t name, tag_t tag);
int AM_UnMap(ep_t ea, int index);
int AM_GetTranslationInuse(ep_t ea, int index); /* AM_OK if in use, else AM_ERR_RESOURCE */
int AM_GetTranslationTag(ep_t ea, int index, tag_t *tag);
int AM_GetTranslationName(ep_t ea, int index, en_t *name);
int AM_GetNumTranslations(ep_t ea, int *ntrans);
int AM_SetNumTranslations(ep_t ea, int ntrans);
int AM_SetExpectedResources(ep_t ea, int n_endpoints, int n_outstanding_requests);

int AM_SetHandler(ep_t ea, handler_t handler, amx_handler_fn_t function);
int AM_SetHandlerAny(ep_t ea, handler_t *handler, amx_handler_fn_t function);
int AM_GetNumHandlers(ep_t ea, int *numhandlers);
int AM_SetNumHandlers(ep_t ea, int numhandlers);

/* ---- events ----------------------------------------------------------------------- */
int AM_GetEventMask(eb_t eb, int *mask);
int AM_SetEventMask(eb_t eb, int mask);
int AM_WaitSema(eb_t eb); /* blocks until the mask's event; the mask then resets */

/* ---- inside handlers ------------------------------------------------------------------ */
int AM_GetSourceEndpoint(void *token, en_t *gan);
int AM_GetDestEndpoint(void *token, ep_t *endpoint);
int AM_GetMsgTag(void *token, tag_t *tagp);

/* ---- progress ----------------------------------------------------------------------- */
int AM_Poll(eb_t bundle);

/* ---- requests and replies ------------------------------------------------------------ */
/* The one entry point behind every AM_Request*, AM_Reply* variant. kind: AMX_SHORT,
 * AMX_MEDIUM, AMX_LONG, AMX_LONG_ASYNC. args holds nargs values (0..16). */
#define AMX_SHORT 1
#define AMX_MEDIUM 2
#define AMX_LONG 3
#define AMX_LONG_ASYNC 4
int AMX_Request(ep_t ea, int dest, handler_t handler, int kind, const void *src, size_t nbytes,
                uintptr_t dest_offset, int nargs, const int32_t *args);
int AMX_Reply(void *token, handler_t handler, int kind, const void *src, size_t nbytes,
              uintptr_t dest_offset, int nargs, const int32_t *args);

/* Parameter and argument lists of each arity, built up one argument at a time. */
#define AMX_P0
#define AMX_P1 AMX_P0, int a0
#define AMX_P2 AMX_P1, int a1
#define AMX_P3 AMX_P2, int a2
#define AMX_P4 AMX_P3, int a3
#define AMX_P5 AMX_P4, int a4
#define AMX_P6 AMX_P5, int a5
#define AMX_P7 AMX_P6, int a6
#define AMX_P8 AMX_P7, int a7
#define AMX_P9 AMX_P8, int a8
#define AMX_P10 AMX_P9, int a9
#define AMX_P11 AMX_P10, int a10
#define AMX_P12 AMX_P11, int a11
#define AMX_P13 AMX_P12, int a12
#define AMX_P14 AMX_P13, int a13
#define AMX_P15 AMX_P14, int a14
#define AMX_P16 AMX_P15, int a15
#define AMX_A0
#define AMX_A1 AMX_A0, a0
#define AMX_A2 AMX_A1, a1
#define AMX_A3 AMX_A2, a2
#define AMX_A4 AMX_A3, a3
#define AMX_A5 AMX_A4, a4
#define AMX_A6 AMX_A5, a5
#define AMX_A7 AMX_A6, a6
#define AMX_A8 AMX_A7, a7
#define AMX_A9 AMX_A8, a8
#define AMX_A10 AMX_A9, a9
#define AMX_A11 AMX_A10, a10
#define AMX_A12 AMX_A11, a11
#define AMX_A13 AMX_A12, a12
#define AMX_A14 AMX_A13, a13
#define AMX_A15 AMX_A14, a14
#define AMX_A16 AMX_A15, a15

/* args_[0] is a placeholder so that arity 0 has an array too; the real ones follow. */
#define AMX_DEFINE_ARITY(N)                                                                         \
    static inline int AM_Request##N(ep_t ep, int dest, handler_t h AMX_P##N) {                      \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Request(ep, dest, h, AMX_SHORT, NULL, 0, 0, N, args_ + 1);                       \
    }                                                                                               \
    static inline int AM_RequestI##N(ep_t ep, int dest, handler_t h, void *src, size_t n AMX_P##N) { \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Request(ep, dest, h, AMX_MEDIUM, src, n, 0, N, args_ + 1);                       \
    }                                                                                               \
    static inline int AM_RequestXfer##N(ep_t ep, int dest, uintptr_t off, handler_t h, void *src,   \
                                        size_t n AMX_P##N) {                                        \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Request(ep, dest, h, AMX_LONG, src, n, off, N, args_ + 1);                       \
    }                                                                                               \
    static inline int AM_RequestXferAsync##N(ep_t ep, int dest, uintptr_t off, handler_t h,         \
                                             void *src, size_t n AMX_P##N) {                        \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Request(ep, dest, h, AMX_LONG_ASYNC, src, n, off, N, args_ + 1);                 \
    }                                                                                               \
    static inline int AM_Reply##N(void *token, handler_t h AMX_P##N) {                              \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Reply(token, h, AMX_SHORT, NULL, 0, 0, N, args_ + 1);                            \
    }                                                                                               \
    static inline int AM_ReplyI##N(void *token, handler_t h, void *src, size_t n AMX_P##N) {        \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Reply(token, h, AMX_MEDIUM, src, n, 0, N, args_ + 1);                            \
    }                                                                                               \
    static inline int AM_ReplyXfer##N(void *token, uintptr_t off, handler_t h, void *src,           \
                                      size_t n AMX_P##N) {                                          \
        int32_t args_[] = {0 AMX_A##N};                                                             \
        return AMX_Reply(token, h, AMX_LONG, src, n, off, N, args_ + 1);                            \
    }

AMX_DEFINE_ARITY(0)
AMX_DEFINE_ARITY(1)
AMX_DEFINE_ARITY(2)
AMX_DEFINE_ARITY(3)
AMX_DEFINE_ARITY(4)
AMX_DEFINE_ARITY(5)
AMX_DEFINE_ARITY(6)
AMX_DEFINE_ARITY(7)
AMX_DEFINE_ARITY(8)
AMX_DEFINE_ARITY(9)
AMX_DEFINE_ARITY(10)
AMX_DEFINE_ARITY(11)
AMX_DEFINE_ARITY(12)
AMX_DEFINE_ARITY(13)
AMX_DEFINE_ARITY(14)
AMX_DEFINE_ARITY(15)
AMX_DEFINE_ARITY(16)

/* =================================================================================
 * softvia extensions (not AM-2)
 * ================================================================================= */

/* How incoming requests and replies are told apart (docs/am.md). Chosen per endpoint
 * when it is allocated: the value of AMX_SetSteering at that time, whose default comes
 * from $AMVIA_STEERING ("1" firmware steering, "0" host marshalling; default 1). */
int AMX_SetSteering(int on);
int AMX_GetSteering(ep_t ea, int *on);

/* Connection timeout (ms) for a send to a mapped endpoint that has not mapped this one
 * back yet ($AMVIA_CONNECT_TIMEOUT_MS, default 20000). */
int AMX_SetConnectTimeout(unsigned ms);

/* Counters of one endpoint. */
typedef struct {
    uint64_t requests_sent, replies_sent, credit_msgs_sent;
    uint64_t requests_handled, replies_handled, returned; /* returned: handler 0 calls */
    uint64_t probes_sent; /* liveness probes to peers that owed replies and were silent */
} amx_counters_t;
int AMX_GetCounters(ep_t ea, amx_counters_t *c);

/* Requests this endpoint has sent (internal ones included) whose reply, returned
 * message or implicit credit has not come back yet. 0 means everything sent has been
 * answered: a program (or a test phase) can poll until then before it moves on. */
int AMX_Outstanding(ep_t ea, int *n);

/* A readable name of an AM_* code or a returned-message status. Never NULL. */
const char *AMX_ErrorString(int code);
const char *AMX_StatusString(int status);

/* ---- SPMD start-up for programs launched by softvia-run (docs/am.md) ----------------- */
/* AM_Init, one bundle and one endpoint with the given tag (and a segment of seg_bytes,
 * 0 for none), the endpoint names of all ranks exchanged through the launcher, index i
 * mapped to rank i (this rank maps itself), and every connection up. Not launched:
 * size 1. Returns AM_OK or an AM_ERR_* code (with a message on stderr). */
int AMX_SPMDStartup(tag_t tag, uintptr_t seg_bytes, eb_t *eb, ep_t *ep);
int AMX_SPMDMyProc(void);  /* this rank */
int AMX_SPMDNumProcs(void); /* number of ranks */
void *AMX_SPMDSegment(void); /* the segment AMX_SPMDStartup allocated (NULL if none) */
/* Returns once every rank has entered; polls the bundle meanwhile (handlers run). */
int AMX_SPMDBarrier(void);
/* Every rank gives len bytes; dst (size*len bytes) receives them in rank order. Polls
 * the bundle meanwhile. */
int AMX_SPMDAllGather(const void *src, void *dst, size_t len);
/* Frees everything AMX_SPMDStartup made (after a barrier, so nobody sends any more). */
int AMX_SPMDExit(void);

#ifdef __cplusplus
}
#endif
#endif /* AM_H */
