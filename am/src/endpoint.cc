// endpoint.cc -- endpoints and what each one holds: its name, tag, segment, translation
// table (index -> MAP object, created through peer.cc), handler table and counters; the
// AM_* calls that set these up and read them. None of them is on the message path.
#include "internal.h"

#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <new>

using namespace softvia::am;

namespace softvia::am {
namespace {

bool name_ok(const en_t& n) {
    return n.magic == AMX_EN_MAGIC && n.nic_addr_len > 0 && n.nic_addr_len <= sizeof n.nic_addr && n.ep_id != 0;
}

// Handler 0 of a new endpoint.
void default_returned(int status, op_t opcode, void* token) {
    (void)token;
    if (g.returned_printed++ < 16)
        fprintf(stderr, "amvia: message returned to handler 0: %s (opcode %d); set handler 0 to handle it\n",
                AMX_StatusString(status), opcode);
}

}  // namespace

void free_endpoint(Endpoint* ep) {
    for (Peer* p : ep->peers) destroy_peer(p);
    ep->peers.clear();
    ep->connecting.clear();
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN q;
    while (VipCQDone(ep->cq, &vi, &q) == VIP_SUCCESS) {
    }
    if (ep->knock_vi) VipDestroyVi(ep->knock_vi);
    VipDestroyCQ(ep->cq);  // refused if a VI outlived its drain; VipCloseNic frees it then
    if (ep->seg_mh) VipDeregisterMem(g.nic, ep->seg, ep->seg_mh);
    *ep = Endpoint{};  // magic 0
    g.dead_eps.push_back(ep);
}

}  // namespace softvia::am

// ================================================================== API
AMX_API int AM_AllocateEndpoint(eb_t b, ep_t* out, en_t* name) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || !out) return AM_ERR_BAD_ARG;
    auto* ep = new (std::nothrow) Endpoint();
    if (!ep) return AM_ERR_RESOURCE;
    ep->cq_entries = 1024;
    if (VipCreateCQ(g.nic, ep->cq_entries, &ep->cq) != VIP_SUCCESS) {
        delete ep;
        return AM_ERR_RESOURCE;
    }
    uint64_t id = 0;
    while (id == 0)
        if (getrandom(&id, sizeof id, 0) != sizeof id) id = uint64_t(now_ms()) * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid());
    ep->magic = kEpMagic;
    ep->bundle = b;
    ep->name.magic = AMX_EN_MAGIC;
    ep->name.nic_addr_len = g.na.NicAddressLen;
    ep->name.ep_id = id;
    memcpy(ep->name.nic_addr, g.na.LocalNicAddress, g.na.NicAddressLen);
    ep->steering = steering_default();
    ep->trans.resize(AMX_DEFAULT_TRANSLATIONS);
    ep->handlers.assign(AMX_MAX_HANDLERS, nullptr);
    ep->handlers[0] = reinterpret_cast<amx_handler_fn_t>(default_returned);
    b->eps.push_back(ep);
    *out = ep;
    if (name) *name = ep->name;
    return AM_OK;
}

AMX_API int AM_FreeEndpoint(ep_t ep) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    Bundle* b = ep->bundle;
    for (size_t i = 0; i < b->eps.size(); i++)
        if (b->eps[i] == ep) b->eps.erase(b->eps.begin() + long(i));
    free_endpoint(ep);
    return AM_OK;
}

AMX_API int AM_MoveEndpoint(ep_t ep, eb_t from, eb_t to) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !eb_ok(from) || !eb_ok(to) || ep->bundle != from) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    for (size_t i = 0; i < from->eps.size(); i++)
        if (from->eps[i] == ep) from->eps.erase(from->eps.begin() + long(i));
    to->eps.push_back(ep);
    ep->bundle = to;
    return AM_OK;
}

AMX_API int AM_SetSeg(ep_t ep, void* addr, uintptr_t nbytes) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    if (!addr || nbytes == 0) {
        addr = nullptr;
        nbytes = 0;
    }
    if (nbytes > g.na.MaxRegisterBytes) return AM_ERR_BAD_ARG;
    VIP_MEM_HANDLE mh = 0;
    if (nbytes) {
        VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_TRUE, VIP_FALSE};  // peers RDMA-write long payloads here
        if (VipRegisterMem(g.nic, addr, nbytes, &ma, &mh) != VIP_SUCCESS) return AM_ERR_BAD_ARG;
    }
    if (ep->seg_mh) VipDeregisterMem(g.nic, ep->seg, ep->seg_mh);
    ep->seg = addr;
    ep->seg_len = nbytes;
    ep->seg_mh = mh;
    // By index: announcing polls, and a poll may add an implicit MAP object (a knock).
    for (size_t i = 0; i < ep->peers.size(); i++)
        if (ep->peers[i]->state == P_UP) announce_segment(ep->peers[i]);
    return AM_OK;
}

AMX_API int AM_GetSeg(ep_t ep, void** addr, uintptr_t* nbytes) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !addr || !nbytes) return AM_ERR_BAD_ARG;
    *addr = ep->seg;
    *nbytes = ep->seg_len;
    return AM_OK;
}

AMX_API int AM_SetTag(ep_t ep, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    ep->tag = tag;
    return AM_OK;
}

AMX_API int AM_GetTag(ep_t ep, tag_t* tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !tag) return AM_ERR_BAD_ARG;
    *tag = ep->tag;
    return AM_OK;
}

AMX_API int AM_Map(ep_t ep, int index, en_t name, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size() || !name_ok(name)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    Translation& t = ep->trans[size_t(index)];
    if (t.used) return AM_ERR_RESOURCE;
    bool self = same_name(name, ep->name);
    Peer* peer = nullptr;
    for (Peer* p : ep->peers)
        if (same_name(p->name, name) && p->role != 2 && p->state != P_DEAD) peer = p;
    if (!peer) {
        int rc = create_peer(ep, name, self ? 1 : 0, &peer);
        if (rc != AM_OK) return rc;
        if (self) {
            Peer* twin = nullptr;
            rc = create_peer(ep, name, 2, &twin);
            if (rc != AM_OK) {
                ep->peers.pop_back();
                ep->connecting.pop_back();
                destroy_peer(peer);
                return rc;
            }
            peer->twin = twin;
            twin->twin = peer;
        }
    }
    t.used = true;
    t.name = name;
    t.tag = tag;
    t.peer = peer;
    return AM_OK;
}

AMX_API int AM_MapAny(ep_t ep, int* index, en_t name, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !index) return AM_ERR_BAD_ARG;
    for (size_t i = 0; i < ep->trans.size(); i++)
        if (!ep->trans[i].used) {
            int rc = AM_Map(ep, int(i), name, tag);
            if (rc == AM_OK) *index = int(i);
            return rc;
        }
    return AM_ERR_RESOURCE;
}

// The connection stays: the remote endpoint may still send requests here.
AMX_API int AM_UnMap(ep_t ep, int index) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    ep->trans[size_t(index)] = Translation{};
    return AM_OK;
}

AMX_API int AM_GetTranslationInuse(ep_t ep, int index) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size()) return AM_ERR_BAD_ARG;
    return ep->trans[size_t(index)].used ? AM_OK : AM_ERR_RESOURCE;
}

AMX_API int AM_GetTranslationTag(ep_t ep, int index, tag_t* tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !tag || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    *tag = ep->trans[size_t(index)].tag;
    return AM_OK;
}

AMX_API int AM_GetTranslationName(ep_t ep, int index, en_t* name) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !name || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    *name = ep->trans[size_t(index)].name;
    return AM_OK;
}

AMX_API int AM_GetNumTranslations(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    *n = int(ep->trans.size());
    return AM_OK;
}

AMX_API int AM_SetNumTranslations(ep_t ep, int n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n < 1 || n > AMX_MAX_TRANSLATIONS) return AM_ERR_BAD_ARG;
    for (size_t i = size_t(n); i < ep->trans.size(); i++)
        if (ep->trans[i].used) return AM_ERR_RESOURCE;  // would drop a mapping
    ep->trans.resize(size_t(n));
    return AM_OK;
}

AMX_API int AM_SetExpectedResources(ep_t ep, int n_endpoints, int n_outstanding_requests) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n_endpoints < 0 || n_outstanding_requests < 0 || n_endpoints > AMX_MAX_TRANSLATIONS)
        return AM_ERR_BAD_ARG;
    // A hint only: credits per channel stay fixed (docs/am.md).
    ep->expected_endpoints = n_endpoints;
    ep->expected_requests = n_outstanding_requests;
    return AM_OK;
}

AMX_API int AM_SetHandler(ep_t ep, handler_t h, amx_handler_fn_t fn) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !fn || h >= ep->handlers.size()) return AM_ERR_BAD_ARG;
    ep->handlers[h] = fn;
    return AM_OK;
}

AMX_API int AM_SetHandlerAny(ep_t ep, handler_t* h, amx_handler_fn_t fn) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !fn || !h) return AM_ERR_BAD_ARG;
    for (size_t i = 1; i < ep->handlers.size(); i++)
        if (!ep->handlers[i]) {
            ep->handlers[i] = fn;
            *h = static_cast<handler_t>(i);
            return AM_OK;
        }
    return AM_ERR_RESOURCE;
}

AMX_API int AM_GetNumHandlers(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    *n = int(ep->handlers.size());
    return AM_OK;
}

AMX_API int AM_SetNumHandlers(ep_t ep, int n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n < 1 || n > AMX_MAX_HANDLERS) return AM_ERR_BAD_ARG;
    ep->handlers.resize(size_t(n), nullptr);
    return AM_OK;
}

AMX_API int AMX_GetCounters(ep_t ep, amx_counters_t* c) {
    if (!ep_ok(ep) || !c) return AM_ERR_BAD_ARG;
    *c = ep->ctr;
    return AM_OK;
}

AMX_API int AMX_Outstanding(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    int sum = 0;
    for (Peer* p : ep->peers)
        if (p->state != P_DEAD)
            for (const Channel& c : p->ch) sum += c.k - c.credits;
    *n = sum;
    return AM_OK;
}
