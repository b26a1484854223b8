// api.cc -- the library's state and its set-up: AM_Init and AM_Terminate (the NIC, AM's
// own settings, the knock listener), the limits, bundles and their event mask, the
// process-wide AMX_ settings and the names of codes. Nothing here is on the message
// path: endpoints and translations are in endpoint.cc, MAP objects in peer.cc, sending
// in channel.cc, receiving and polling in dispatch.cc (docs/am.md, "Source layout").
#include "internal.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace softvia::am;

namespace softvia::am {

Global g;

namespace {

// AM's own settings, read once by AM_Init: unset or empty takes the default; anything
// else must be a value we accept, or AM_Init says which and refuses (AM_ERR_BAD_ARG).
bool flag_setting(const char* name, int* out) {
    const char* s = getenv(name);
    if (!s || !*s) return true;
    if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0) {
        *out = s[0] - '0';
        return true;
    }
    fprintf(stderr, "amvia: %s='%s': accepted values are 0 and 1\n", name, s);
    return false;
}

bool check_settings() {
    int steer = 1, listen = 1;
    bool ok = flag_setting("AMVIA_STEERING", &steer) && flag_setting("AMVIA_LISTEN", &listen);
    if (const char* s = getenv("AMVIA_CONNECT_TIMEOUT_MS"); ok && s && *s) {
        char* end = nullptr;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (*end || errno || v < 1 || v > 3600000) {
            fprintf(stderr, "amvia: AMVIA_CONNECT_TIMEOUT_MS='%s': accepted values are 1 to 3600000 (ms)\n", s);
            ok = false;
        }
    }
    return ok;
}

}  // namespace

bool steering_default() {
    if (g.steering < 0) {
        const char* s = getenv("AMVIA_STEERING");
        g.steering = (s && s[0] == '0') ? 0 : 1;
    }
    return g.steering;
}

long connect_timeout() {
    if (g.connect_timeout_ms < 0) {
        const char* s = getenv("AMVIA_CONNECT_TIMEOUT_MS");
        long v = s && *s ? strtol(s, nullptr, 10) : 0;  // checked by AM_Init (check_settings)
        g.connect_timeout_ms = v > 0 ? v : 20000;
    }
    return g.connect_timeout_ms;
}

namespace {

// Opens the NIC SOFTVIA_DEVICE names (any transport). Nothing here depends on the wire:
// a message is one VIPL send (or RDMA write) that the NIC cuts to its NativeMTU, so the
// only requirement is that the largest one fits a VIPL transfer.
int open_nic() {
    VIP_RETURN r = VipOpenNic(nullptr, &g.nic);
    // VIP_INVALID_PARAMETER: a SOFTVIA_* setting or the device name is wrong, which vipl
    // has named on stderr already; that is bad configuration, not a lack of resources.
    if (r == VIP_INVALID_PARAMETER) return AM_ERR_BAD_ARG;
    if (r != VIP_SUCCESS) {
        fprintf(stderr, "amvia: AM_Init: cannot open the NIC: VipOpenNic -> %s\n", VipExtReturnString(r));
        return AM_ERR_RESOURCE;
    }
    const char* why = nullptr;
    if (VipQueryNic(g.nic, &g.na) != VIP_SUCCESS) why = "VipQueryNic failed";
    else if (g.na.NicAddressLen > sizeof(en_t{}.nic_addr)) why = "the NIC address does not fit an en_t";
    else if (g.na.MaxTransferSize < kBufBytes[C_MEDIUM] || g.na.MaxTransferSize < AMX_MAX_LONG)
        why = "the NIC's MaxTransferSize is below AM's largest message";
    else if (VipCreatePtag(g.nic, &g.ptag) != VIP_SUCCESS) why = "VipCreatePtag failed";
    else if (!(g.probe_pad = static_cast<char*>(aligned_alloc(64, 64)))) why = "out of memory";
    else {
        VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_TRUE, VIP_FALSE};  // remote write: liveness probes
        if (VipRegisterMem(g.nic, g.probe_pad, 64, &ma, &g.probe_mh) != VIP_SUCCESS) why = "VipRegisterMem failed";
    }
    if (why) {
        free(g.probe_pad);
        g.probe_pad = nullptr;
        fprintf(stderr, "amvia: AM_Init: %s\n", why);
        VipCloseNic(g.nic);
        g.nic = nullptr;
        return AM_ERR_RESOURCE;
    }
    return AM_OK;
}

void free_bundle(Bundle* b) {
    for (Endpoint* ep : b->eps) free_endpoint(ep);
    *b = Bundle{};  // magic 0
    g.dead_bundles.push_back(b);
}

}  // namespace
}  // namespace softvia::am

// ================================================================== API
// Callers get these four as constants from am.h (function-like macros); the functions
// stay for programs built against an older am.h. The parentheses keep the macros out.
AMX_API int(AM_MaxShort)(void) { return AMX_MAX_ARGS; }
AMX_API int(AM_MaxMedium)(void) { return AMX_MAX_MEDIUM; }
AMX_API int(AM_MaxLong)(void) { return AMX_MAX_LONG; }
AMX_API int(AM_MaxNumHandlers)(void) { return AMX_MAX_HANDLERS; }
AMX_API int AM_MaxNumTranslations(int* n) {
    if (!n) return AM_ERR_BAD_ARG;
    *n = AMX_MAX_TRANSLATIONS;
    return AM_OK;
}
AMX_API int AM_MaxSegLength(uintptr_t* nbytes) {
    if (!nbytes) return AM_ERR_BAD_ARG;
    if (!g.inited) return AM_ERR_NOT_INIT;
    *nbytes = static_cast<uintptr_t>(g.na.MaxRegisterBytes);
    return AM_OK;
}

AMX_API int AM_Init(void) {
    if (g.inited) return AM_OK;
    if (!check_settings()) return AM_ERR_BAD_ARG;
    int rc = open_nic();
    if (rc != AM_OK) return rc;
    g.inited = true;
    VIP_EXT_PROGRESS_MODE pm = VIP_EXT_PROGRESS_INLINE;
    g.inline_progress = VipExtGetProgressMode(g.nic, &pm) == VIP_SUCCESS && pm == VIP_EXT_PROGRESS_INLINE;
    VIP_BOOLEAN lossy = VIP_TRUE;
    g.zero_copy_long = g.inline_progress && VipExtQueryWireLossy(g.nic, &lossy) == VIP_SUCCESS && !lossy &&
                       !getenv("AMVIA_BOUNCE");
    start_listener();
    steering_default();
    connect_timeout();
    return AM_OK;
}

AMX_API int AM_Terminate(void) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (in_handler()) return AM_ERR_RESOURCE;
    stop_listener();
    for (Bundle* b : g.bundles) free_bundle(b);
    g.bundles.clear();
    drop_source_regs();
    VipDeregisterMem(g.nic, g.probe_pad, g.probe_mh);
    free(g.probe_pad);
    g.probe_pad = nullptr;
    VipCloseNic(g.nic);
    g.nic = nullptr;
    g.ptag = nullptr;
    g.inited = false;
    return AM_OK;
}

AMX_API int AM_AllocateBundle(int type, eb_t* out) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!out || (type != AM_SEQ && type != AM_PAR)) return AM_ERR_BAD_ARG;
    if (type == AM_PAR) return AM_ERR_RESOURCE;  // one thread per bundle only
    auto* b = new (std::nothrow) Bundle();
    if (!b) return AM_ERR_RESOURCE;
    b->magic = kEbMagic;
    g.bundles.push_back(b);
    *out = b;
    return AM_OK;
}

AMX_API int AM_FreeBundle(eb_t b) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    for (size_t i = 0; i < g.bundles.size(); i++)
        if (g.bundles[i] == b) g.bundles.erase(g.bundles.begin() + long(i));
    free_bundle(b);
    return AM_OK;
}

AMX_API int AM_GetEventMask(eb_t b, int* mask) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || !mask) return AM_ERR_BAD_ARG;
    *mask = b->event_mask;
    return AM_OK;
}

AMX_API int AM_SetEventMask(eb_t b, int mask) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || (mask != AM_NOEVENTS && mask != AM_NOTEMPTY)) return AM_ERR_BAD_ARG;
    b->event_mask = mask;
    return AM_OK;
}

AMX_API int AMX_SetSteering(int on) {
    g.steering = on ? 1 : 0;
    return AM_OK;
}

AMX_API int AMX_GetSteering(ep_t ep, int* on) {
    if (!ep_ok(ep) || !on) return AM_ERR_BAD_ARG;
    *on = ep->steering;
    return AM_OK;
}

AMX_API int AMX_SetConnectTimeout(unsigned ms) {
    if (ms == 0) return AM_ERR_BAD_ARG;
    g.connect_timeout_ms = long(ms);
    return AM_OK;
}

AMX_API const char* AMX_ErrorString(int code) {
    switch (code) {
        case AM_OK: return "AM_OK";
        case AM_ERR_NOT_INIT: return "AM_ERR_NOT_INIT";
        case AM_ERR_BAD_ARG: return "AM_ERR_BAD_ARG";
        case AM_ERR_RESOURCE: return "AM_ERR_RESOURCE";
        case AM_ERR_NOT_SENT: return "AM_ERR_NOT_SENT";
        case AM_ERR_IN_USE: return "AM_ERR_IN_USE";
        default: return "AM_ERR_(unknown)";
    }
}

AMX_API const char* AMX_StatusString(int status) {
    switch (status) {
        case EBADARGS: return "EBADARGS";
        case EBADENTRY: return "EBADENTRY";
        case EBADTAG: return "EBADTAG";
        case EBADHANDLER: return "EBADHANDLER";
        case EBADSEGOFF: return "EBADSEGOFF";
        case EBADLENGTH: return "EBADLENGTH";
        case EBADENDPOINT: return "EBADENDPOINT";
        case ECONGESTION: return "ECONGESTION";
        case EUNREACHABLE: return "EUNREACHABLE";
        case EREPLYREJECTED: return "EREPLYREJECTED";
        default: return "E(unknown)";
    }
}
