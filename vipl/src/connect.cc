// connect.cc -- VIA connection management: client/server and peer-to-peer.
#include <algorithm>
#include <cstring>

#include "internal.h"

using namespace softvia;
using namespace softvia::vipl;

// One set of address limits: what the firmware and the wire take (abi.h) is what vipl.h
// promises callers, and VIP_EXT_NET_ADDRESS_SIZE covers the largest address.
static_assert(NICFW_MAX_ADDR == VIP_EXT_MAX_HOST_ADDRESS_LEN, "vipl.h and abi.h disagree on the address limit");
static_assert(NICFW_MAX_DISCRIMINATOR == VIP_EXT_MAX_DISCRIMINATOR_LEN, "vipl.h and abi.h disagree on the discriminator limit");

namespace {
bool addr_ok(const VIP_NET_ADDRESS* a) {
    return a && a->HostAddressLen > 0 && a->HostAddressLen <= NICFW_MAX_ADDR &&
           a->DiscriminatorLen <= NICFW_MAX_DISCRIMINATOR;
}
const uint8_t* disc_of(const VIP_NET_ADDRESS* a) { return a->HostAddress + a->HostAddressLen; }

void fill_attrs(const nicfw::ViAttrs& r, VIP_VI_ATTRIBUTES* out) {
    memset(out, 0, sizeof *out);
    out->ReliabilityLevel = r.reliability;
    out->MaxTransferSize = r.max_transfer;
    out->EnableRdmaWrite = r.rdma_write;
    out->EnableRdmaRead = r.rdma_read;
    // Ptag and QoS are local notions; the remote side's are not meaningful here.
}

// Waits until the firmware posts a connect result for vi: the result, -1 if the timeout
// passes, -2 if the NIC closes first.
int wait_result(ViObj* vi, VIP_ULONG timeout) {
    Waited w = wait_until(vi->nic, timeout, [&] { return vi->dev->conn_result.load(std::memory_order_acquire) != -1; });
    return w == Waited::kClosing ? -2 : vi->dev->conn_result.load(std::memory_order_acquire);
}
}  // namespace

VIPL_API VIP_RETURN VipConnectRequest(VIP_VI_HANDLE h, VIP_NET_ADDRESS* local, VIP_NET_ADDRESS* remote,
                                      VIP_ULONG timeout, VIP_VI_ATTRIBUTES* remote_attrs) {
    // The server matches on the discriminator of the address we connect to; ours (from
    // local) is what its VipConnectWait reports as the remote address.
    NicHold hold;
    ViObj* vi = hold.take<ViObj>(h, Kind::kVi);
    if (!vi || !addr_ok(remote)) return VIP_INVALID_PARAMETER;
    if (local && !addr_ok(local)) return VIP_INVALID_PARAMETER;
    vi->peer_requested.store(false, std::memory_order_relaxed);
    int rc = vi->nic->eng->connect_request(vi->dev, remote->HostAddress, remote->HostAddressLen,
                                           disc_of(remote), remote->DiscriminatorLen,
                                           local ? disc_of(local) : nullptr, local ? local->DiscriminatorLen : 0);
    if (rc < 0) return rc == -EINVAL ? VIP_INVALID_PARAMETER : from_errno(rc);
    int r = wait_result(vi, timeout);
    if (r == -2) {  // the NIC is closing: withdraw the request
        vi->nic->eng->connect_cancel(vi->dev);
        return VIP_INVALID_STATE;
    }
    if (r == -1) {
        vi->nic->eng->connect_cancel(vi->dev);
        r = vi->dev->conn_result.load(std::memory_order_acquire);  // it may have just arrived
    }
    const VIP_RETURN rr = connect_return(r);
    if (rr == VIP_SUCCESS && remote_attrs) fill_attrs(vi->dev->remote, remote_attrs);
    return rr;
}

namespace {
// Fills what a server learns of a request it took, and lists the connection handle.
// The caller's RemoteAddr holds VIP_EXT_NET_ADDRESS_SIZE bytes (vipl.h): the firmware
// refuses longer fields in the request, and the copy is bounded here all the same.
void report_request(ConnObj* conn, VIP_NET_ADDRESS* remote, VIP_VI_ATTRIBUTES* remote_attrs) {
    if (remote) {
        const size_t alen = std::min<size_t>(conn->req.addr.size(), NICFW_MAX_ADDR);
        const size_t dlen = std::min<size_t>(conn->req.disc.size(), NICFW_MAX_DISCRIMINATOR);
        remote->HostAddressLen = static_cast<VIP_UINT16>(alen);
        if (alen) memcpy(remote->HostAddress, conn->req.addr.data(), alen);
        remote->DiscriminatorLen = static_cast<VIP_UINT16>(dlen);
        // A client without a discriminator of its own sent none: an empty vector's data()
        // may be null, which memcpy must not get even for 0 bytes.
        if (dlen) memcpy(remote->HostAddress + alen, conn->req.disc.data(), dlen);
    }
    if (remote_attrs) {
        nicfw::ViAttrs a;
        a.reliability = conn->req.reliability;
        a.max_transfer = conn->req.max_transfer;
        a.rdma_write = conn->req.rdma_write;
        a.rdma_read = conn->req.rdma_read;
        fill_attrs(a, remote_attrs);
    }
    publish(conn, conn->nic->conns);
}
}  // namespace

VIPL_API VIP_RETURN VipConnectWait(VIP_NIC_HANDLE h, VIP_NET_ADDRESS* local, VIP_ULONG timeout,
                                   VIP_NET_ADDRESS* remote, VIP_VI_ATTRIBUTES* remote_attrs,
                                   VIP_CONN_HANDLE* out) {
    NicHold hold;
    NicObj* nic = hold.take<NicObj>(h, Kind::kNic);
    if (!nic || !local || local->DiscriminatorLen > NICFW_MAX_DISCRIMINATOR ||
        local->HostAddressLen > NICFW_MAX_ADDR || !out)
        return VIP_INVALID_PARAMETER;
    nicfw::Listener* l = nic->eng->listen(disc_of(local), local->DiscriminatorLen);
    Waited w = wait_until(nic, timeout, [&] { return l->matched.load(std::memory_order_acquire); });
    if (w == Waited::kClosing) {  // stop listening; a request that matched meanwhile is refused
        nicfw::ConnRequest lost;
        if (nic->eng->unlisten(l, &lost)) nic->eng->reject(lost);
        return VIP_INVALID_STATE;
    }
    auto* conn = new (std::nothrow) ConnObj();
    if (conn) conn->nic = nic;
    if (!conn || !reserve(conn, Kind::kConn)) {
        delete conn;
        nicfw::ConnRequest lost;
        if (nic->eng->unlisten(l, &lost)) nic->eng->reject(lost);
        return VIP_ERROR_RESOURCE;
    }
    if (!nic->eng->unlisten(l, &conn->req)) {
        Handles::remove(conn->handle);
        delete conn;
        return VIP_TIMEOUT;
    }
    report_request(conn, remote, remote_attrs);
    *out = handle_of<VIP_CONN_HANDLE>(conn->handle);
    return VIP_SUCCESS;
}

// ---------------------------------------------------------------- standing listeners
VIPL_API VIP_RETURN VipExtListen(VIP_NIC_HANDLE h, VIP_NET_ADDRESS* local, VIP_EXT_LISTEN_HANDLE* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !local || local->DiscriminatorLen > NICFW_MAX_DISCRIMINATOR ||
        local->HostAddressLen > NICFW_MAX_ADDR || !out)
        return VIP_INVALID_PARAMETER;
    auto* ls = new (std::nothrow) ListenObj();
    if (!ls) return VIP_ERROR_RESOURCE;
    ls->nic = nic;
    if (!reserve(ls, Kind::kListen)) {
        delete ls;
        return VIP_ERROR_RESOURCE;
    }
    ls->disc.assign(disc_of(local), disc_of(local) + local->DiscriminatorLen);
    ls->l = nic->eng->listen(ls->disc.data(), ls->disc.size());
    publish(ls, nic->listens);
    *out = handle_of<VIP_EXT_LISTEN_HANDLE>(ls->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtListenDone(VIP_EXT_LISTEN_HANDLE h, VIP_NET_ADDRESS* remote,
                                     VIP_VI_ATTRIBUTES* remote_attrs, VIP_CONN_HANDLE* out) {
    ListenObj* ls = listen_of(h);
    if (!ls || !out) return VIP_INVALID_PARAMETER;
    std::lock_guard<SpinLock> g(ls->lock);
    // Acquire pairs with the firmware's release of matched: req is complete.
    if (!ls->l->matched.load(std::memory_order_acquire)) {
        if (!ls->nic->eng->progress() || !ls->l->matched.load(std::memory_order_acquire)) return VIP_NOT_DONE;
    }
    NicObj* nic = ls->nic;
    auto* conn = new (std::nothrow) ConnObj();
    if (conn) conn->nic = nic;
    if (!conn || !reserve(conn, Kind::kConn)) {
        delete conn;
        return VIP_ERROR_RESOURCE;  // still held: a later call may take it
    }
    nic->eng->unlisten(ls->l, &conn->req);  // matched, so the request is ours
    ls->l = nic->eng->listen(ls->disc.data(), ls->disc.size());
    report_request(conn, remote, remote_attrs);
    *out = handle_of<VIP_CONN_HANDLE>(conn->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtUnlisten(VIP_EXT_LISTEN_HANDLE h) {
    ListenObj* ls = listen_of(h);
    if (!ls) return VIP_INVALID_PARAMETER;
    NicObj* nic = ls->nic;
    unpublish(ls, nic->listens);
    {
        std::lock_guard<SpinLock> g(ls->lock);  // a VipExtListenDone that found it first ends
        nicfw::ConnRequest held;
        if (nic->eng->unlisten(ls->l, &held)) nic->eng->reject(held);
    }
    delete ls;
    return VIP_SUCCESS;
}

static void drop_conn(ConnObj* conn) {
    unpublish(conn, conn->nic->conns);
    delete conn;
}

VIPL_API VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ch, VIP_VI_HANDLE vh) {
    ConnObj* conn = conn_of(ch);
    ViObj* vi = vi_of(vh);
    if (!conn || !vi || vi->nic != conn->nic) return VIP_INVALID_PARAMETER;
    vi->peer_requested.store(false, std::memory_order_relaxed);
    int rc = conn->nic->eng->accept(conn->req, vi->dev);
    if (rc == -EHOSTUNREACH) {
        drop_conn(conn);  // the client is gone: nothing left to accept
        return VIP_ERROR_RESOURCE;
    }
    if (rc < 0) return from_errno(rc);  // the handle stays valid: the caller may reject
    drop_conn(conn);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ch) {
    ConnObj* conn = conn_of(ch);
    if (!conn) return VIP_INVALID_PARAMETER;
    conn->nic->eng->reject(conn->req);
    drop_conn(conn);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipDisconnect(VIP_VI_HANDLE h) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    return from_errno(vi->nic->eng->disconnect(vi->dev));
}

VIPL_API VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE h, VIP_NET_ADDRESS* local, VIP_NET_ADDRESS* remote,
                                          VIP_ULONG timeout) {
    ViObj* vi = vi_of(h);
    if (!vi || !local || local->DiscriminatorLen > NICFW_MAX_DISCRIMINATOR ||
        local->HostAddressLen > NICFW_MAX_ADDR || !addr_ok(remote))
        return VIP_INVALID_PARAMETER;
    int rc = vi->nic->eng->peer_request(vi->dev, remote->HostAddress, remote->HostAddressLen, disc_of(local),
                                        local->DiscriminatorLen, disc_of(remote), remote->DiscriminatorLen,
                                        timeout);
    if (rc < 0) return rc == -EINVAL ? VIP_INVALID_PARAMETER : from_errno(rc);
    vi->peer_requested.store(true, std::memory_order_relaxed);
    return VIP_SUCCESS;
}

namespace {
VIP_RETURN peer_done(ViObj* vi, VIP_VI_ATTRIBUTES* remote_attrs) {
    vi->nic->eng->progress();
    int r = vi->dev->conn_result.load(std::memory_order_acquire);
    if (r == -1) {
        // No result yet. Either the request is on its way, or the firmware has moved the
        // state on and is about to store the result (it stores the state first), or no
        // peer request was made: only the last is an error. (A bounded spin used to tell
        // these apart; a firmware thread descheduled between its two stores outlasted it.)
        if (vi->dev->state.load(std::memory_order_acquire) == VIP_STATE_CONNECT_PENDING ||
            vi->peer_requested.load(std::memory_order_relaxed))
            return VIP_NOT_DONE;
        return VIP_INVALID_STATE;  // no peer request outstanding
    }
    const VIP_RETURN rr = connect_return(r);
    if (rr == VIP_SUCCESS && remote_attrs) fill_attrs(vi->dev->remote, remote_attrs);
    return rr;
}
}  // namespace

VIPL_API VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE h, VIP_VI_ATTRIBUTES* remote_attrs) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    return peer_done(vi, remote_attrs);
}

VIPL_API VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE h, VIP_VI_ATTRIBUTES* remote_attrs) {
    NicHold hold;
    ViObj* vi = hold.take<ViObj>(h, Kind::kVi);
    if (!vi) return VIP_INVALID_PARAMETER;
    // The request's own timeout bounds this wait (the firmware expires it).
    VIP_RETURN r = VIP_NOT_DONE;
    Waited w = wait_until(vi->nic, VIP_INFINITE, [&] { return (r = peer_done(vi, remote_attrs)) != VIP_NOT_DONE; });
    return w == Waited::kClosing ? VIP_INVALID_STATE : r;
}
