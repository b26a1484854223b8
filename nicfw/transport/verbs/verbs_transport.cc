// verbs transport implementation. Design and limits: verbs_transport.h, docs/transports.md.
#include "verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "nicfw/clock.h"

namespace softvia::nicfw {

struct VerbsConn {
    rdma_cm_id* id = nullptr;
    ibv_qp* qp = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_mr* send_mr = nullptr;
    uint8_t* send_buf = nullptr;
    int peer = -1;
    bool up = false;  // established: sends may be posted
    // Send ring, in frames: committed, posted to the QP, known complete.
    uint64_t prod = 0, posted = 0, done = 0;
    uint32_t max_inline = 0;
    ibv_send_wr wr[VerbsTransport::kSendSlots];
    ibv_sge sge[VerbsTransport::kSendSlots];
};

namespace {
constexpr uint32_t kInlineWanted = 256;   // asked for at QP creation; the device may refuse
constexpr uint8_t kMinRnrTimer = 8;       // IB encoding: 0.16 ms before a sender retries an RNR
constexpr uint8_t kUnlimitedRetry = 7;    // 3-bit RNR retry count: 7 means retry forever
constexpr uint8_t kRetryCount = 7;        // transport retries (lost packets) before the QP fails
constexpr int kResolveMs = 2000;
constexpr uint64_t kCrossedWaitNs = 10'000'000'000ull;
constexpr uint8_t kCrossedMagic[4] = {'S', 'V', 'X', 'C'};  // reject data: "I connect to you"
// An int, not the enum: ibv_reg_mr is a macro that ANDs it with another enum's value.
constexpr int kLocalWrite = IBV_ACCESS_LOCAL_WRITE;
constexpr size_t kHelloLen = kVerbsAddrLen + 4;  // connect data: our address, the target's nonce (<= 56)

// -errno of the call that just failed, never 0 (a library that set no errno is EIO).
int neg_errno() { return errno ? -errno : -EIO; }

// *why = "what: reason"; returns the failed call's -errno.
int fail(std::string* why, const std::string& what, const char* hint = "") {
    int rc = neg_errno();
    *why = what + ": " + strerror(-rc) + hint;
    return rc;
}

std::string ip_text(uint32_t ip) {
    char b[INET_ADDRSTRLEN] = "?";
    in_addr a{ip};
    inet_ntop(AF_INET, &a, b, sizeof b);
    return b;
}

bool parse_u16(const std::string& s, uint16_t* out) {
    if (s.empty() || s.size() > 5) return false;
    uint32_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint32_t>(c - '0');
    }
    if (v > 65535) return false;
    *out = static_cast<uint16_t>(v);
    return true;
}

bool same_nic(const VerbsAddr& a, const VerbsAddr& b) {
    return a.ip == b.ip && a.port == b.port && a.nonce == b.nonce;
}

// The first IPv4-mapped GID (::ffff:a.b.c.d, what RoCE keeps for each IPv4 address of
// the netdev) of a device, or 0. InfiniBand GIDs carry no IPv4: give addr= there.
uint32_t ipv4_from_gids(ibv_context* ctx) {
    ibv_device_attr da;
    if (ibv_query_device(ctx, &da) != 0) return 0;
    for (uint8_t port = 1; port <= da.phys_port_cnt; port++) {
        ibv_port_attr pa;
        if (ibv_query_port(ctx, port, &pa) != 0) continue;
        for (int i = 0; i < pa.gid_tbl_len; i++) {
            ibv_gid g;
            if (ibv_query_gid(ctx, port, i, &g) != 0) continue;  // empty entries may fail
            static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (memcmp(g.raw, kMapped, 12) != 0) continue;
            uint32_t ip;
            memcpy(&ip, g.raw + 12, 4);
            if (ip != 0) return ip;
        }
    }
    return 0;
}
}  // namespace

// ---------------------------------------------------------------- options and addresses
int parse_verbs_options(const DeviceSpec& spec, VerbsOptions* out, std::string* why) {
    VerbsOptions o;
    for (const auto& [k, v] : spec.opts) {
        if (common_device_option(k)) continue;  // vipl's and the same-host wrapper's (device.h)
        if (k == "addr") {
            in_addr a{};
            if (inet_pton(AF_INET, v.c_str(), &a) != 1 || a.s_addr == 0) {
                *why = "verbs: addr='" + v + "' is not a non-zero IPv4 address (a.b.c.d)";
                return -EINVAL;
            }
            o.ip = a.s_addr;
        } else if (k == "port") {
            if (!parse_u16(v, &o.port)) {
                *why = "verbs: port='" + v + "' is not a number from 0 to 65535";
                return -EINVAL;
            }
        } else if (k == "dev") {
            if (v.empty() || v.size() >= IBV_SYSFS_NAME_MAX) {
                *why = "verbs: dev='" + v + "' is not an RDMA device name (see ibv_devices)";
                return -EINVAL;
            }
            o.dev = v;
        } else {
            *why = "verbs takes no option '" + k + "' (it takes addr, port, dev)";
            return -EINVAL;
        }
    }
    *out = std::move(o);
    return 0;
}

void encode_verbs_addr(const VerbsAddr& a, uint8_t out[kVerbsAddrLen]) {
    out[0] = kVerbsAddrKind;
    out[1] = 1;
    out[2] = static_cast<uint8_t>(a.port >> 8);
    out[3] = static_cast<uint8_t>(a.port);
    memcpy(out + 4, &a.ip, 4);
    memcpy(out + 8, &a.host, 8);
    memcpy(out + 16, &a.nonce, 4);
}

bool decode_verbs_addr(const uint8_t* p, size_t len, VerbsAddr* out) {
    if (p == nullptr || len != kVerbsAddrLen || p[0] != kVerbsAddrKind || p[1] != 1) return false;
    VerbsAddr a;
    a.port = static_cast<uint16_t>(p[2] << 8 | p[3]);
    memcpy(&a.ip, p + 4, 4);
    memcpy(&a.host, p + 8, 8);
    memcpy(&a.nonce, p + 16, 4);
    if (a.ip == 0 || a.port == 0) return false;
    *out = a;
    return true;
}

bool verbs_addr_before(const VerbsAddr& a, const VerbsAddr& b) {
    uint32_t ai = ntohl(a.ip), bi = ntohl(b.ip);
    if (ai != bi) return ai < bi;
    if (a.port != b.port) return a.port < b.port;
    return a.nonce < b.nonce;
}

// ---------------------------------------------------------------- open and close
int VerbsTransport::create(const VerbsOptions& opts, std::unique_ptr<VerbsTransport>* out,
                           std::string* why) {
    std::unique_ptr<VerbsTransport> t(new VerbsTransport());
    int rc = t->open(opts, why);
    if (rc < 0) return rc;  // the destructor frees what open got
    *out = std::move(t);
    return 0;
}

int VerbsTransport::open(const VerbsOptions& opts, std::string* why) {
    // Is there any device at all? (On a kernel without RDMA the list is empty or NULL.)
    int ndev = 0;
    ibv_device** list = ibv_get_device_list(&ndev);
    if (list == nullptr || ndev == 0) {
        int e = errno;
        *why = "no RDMA device: " +
               (list ? std::string("ibv_get_device_list found none")
                     : std::string("ibv_get_device_list: ") + strerror(e)) +
               " (kernel without rxe/siw, or no RDMA NIC; docs/transports.md)";
        if (list) ibv_free_device_list(list);
        return -ENXIO;
    }
    bool named = opts.dev.empty();
    std::string names;
    for (int i = 0; i < ndev; i++) {
        const char* n = ibv_get_device_name(list[i]);
        if (!n) continue;
        names += (names.empty() ? "" : ", ") + std::string(n);
        if (opts.dev == n) named = true;
    }
    ibv_free_device_list(list);
    if (!named) {
        *why = "no RDMA device: no device named '" + opts.dev + "' (have " + names + ")";
        return -ENXIO;
    }

    uint32_t ip = opts.ip;
    if (ip == 0) {
        int n = 0;
        ibv_context** ctxs = rdma_get_devices(&n);
        if (ctxs == nullptr) {
            fail(why, "no RDMA device: rdma_get_devices");
            return -ENXIO;
        }
        for (int i = 0; i < n && ip == 0; i++) {
            const char* name = ibv_get_device_name(ctxs[i]->device);
            if (opts.dev.empty() || (name && opts.dev == name)) ip = ipv4_from_gids(ctxs[i]);
        }
        rdma_free_devices(ctxs);
        if (ip == 0) {
            *why = "no RDMA device with an IPv4 address in its GID table (give addr=)";
            return -ENXIO;
        }
    }

    channel_ = rdma_create_event_channel();
    if (!channel_) {
        int rc = fail(why, "rdma_create_event_channel");
        if (rc != -ENODEV && rc != -ENOENT) return rc;
        *why = "no RDMA device: " + *why;
        return -ENXIO;
    }
    int fl = fcntl(channel_->fd, F_GETFL);
    if (fl < 0 || fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        return fail(why, "fcntl(rdma_cm channel, O_NONBLOCK)");
    }
    if (rdma_create_id(channel_, &listen_id_, nullptr, RDMA_PS_TCP) != 0) {
        listen_id_ = nullptr;
        return fail(why, "rdma_create_id");
    }
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(opts.port);
    sin.sin_addr.s_addr = ip;
    if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&sin)) != 0) {
        int e = errno;
        std::string what = ip_text(ip) + ":" + std::to_string(opts.port);
        if (e == ENODEV || e == EADDRNOTAVAIL) {
            *why = "no RDMA device: " + what + " is not an address of an RDMA device (rdma_bind_addr: " +
                   strerror(e) + ")";
            return -ENXIO;
        }
        *why = "rdma_bind_addr(" + what + "): " + strerror(e);
        return -e;
    }
    ctx_ = listen_id_->verbs;
    if (ctx_ == nullptr) {
        *why = "no RDMA device: " + ip_text(ip) + " is bound to no RDMA device";
        return -ENXIO;
    }
    const char* dname = ibv_get_device_name(ctx_->device);
    if (!opts.dev.empty() && opts.dev != (dname ? dname : "")) {
        *why = "verbs: addr " + ip_text(ip) + " belongs to device " + (dname ? dname : "?") + ", not " + opts.dev;
        return -EINVAL;
    }
    if (ctx_->device->transport_type != IBV_TRANSPORT_IB) {
        *why = "no RDMA device: " + std::string(dname ? dname : "?") +
               " is iWARP; this transport drives InfiniBand and RoCE QPs only";
        return -ENXIO;
    }
    ibv_device_attr da;
    if (int qrc = ibv_query_device(ctx_, &da); qrc != 0) {  // returns the errno value
        *why = std::string("ibv_query_device: ") + strerror(qrc);
        return -qrc;
    }
    if (da.max_srq == 0 || da.max_qp_wr < static_cast<int>(kSendSlots)) {
        *why = std::string("verbs: device ") + (dname ? dname : "?") + " has no shared receive queue or too short a send queue";
        return -ENXIO;
    }
    recv_count_ = std::min<uint32_t>(kRecvBufs, static_cast<uint32_t>(da.max_srq_wr));
    pd_ = ibv_alloc_pd(ctx_);
    if (!pd_) {
        return fail(why, "ibv_alloc_pd");
    }
    recv_cq_ = ibv_create_cq(ctx_, static_cast<int>(recv_count_), nullptr, nullptr, 0);
    if (!recv_cq_) {
        return fail(why, "ibv_create_cq");
    }
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = recv_count_;
    sa.attr.max_sge = 1;
    srq_ = ibv_create_srq(pd_, &sa);
    if (!srq_) {
        return fail(why, "ibv_create_srq");
    }
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, size_t{recv_count_} * kMaxFrame) != 0) {
        *why = "verbs: out of memory for receive buffers";
        return -ENOMEM;
    }
    recv_buf_ = static_cast<uint8_t*>(buf);
    recv_mr_ = ibv_reg_mr(pd_, recv_buf_, size_t{recv_count_} * kMaxFrame, kLocalWrite);
    if (!recv_mr_) {
        return fail(why, "ibv_reg_mr(receive buffers)", " (registered memory is locked: check ulimit -l)");
    }
    for (uint32_t i = 0; i < recv_count_; i++) repost_.push_back(i);
    post_recvs();
    if (!repost_.empty()) {
        *why = "verbs: ibv_post_srq_recv refused the receive buffers";
        return -EIO;
    }
    if (rdma_listen(listen_id_, 64) != 0) {
        return fail(why, "rdma_listen");
    }

    local_.ip = ip;
    local_.port = ntohs(rdma_get_src_port(listen_id_));
    local_.host = host_identity();
    if (getrandom(&local_.nonce, sizeof local_.nonce, 0) != sizeof local_.nonce)
        local_.nonce = static_cast<uint32_t>(now_ns());
    encode_verbs_addr(local_, addr_);
    return 0;
}

VerbsTransport::~VerbsTransport() {
    tx_flush();  // committed frames go out (the engine's goodbyes), best effort
    // Peers learn that we left from the DISCONNECTED event each rdma_disconnect causes.
    while (!conns_.empty()) close_conn(conns_.back().get());
    if (listen_id_) rdma_destroy_id(listen_id_);
    if (srq_) ibv_destroy_srq(srq_);
    if (recv_mr_) ibv_dereg_mr(recv_mr_);
    free(recv_buf_);
    if (recv_cq_) ibv_destroy_cq(recv_cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (channel_) rdma_destroy_event_channel(channel_);
}

// ---------------------------------------------------------------- peers and connections
int VerbsTransport::find_peer(const VerbsAddr& a) const {
    for (size_t i = 0; i < peers_.size(); i++)
        if (same_nic(peers_[i].a, a)) return static_cast<int>(i);
    return -1;
}

int VerbsTransport::add_peer(const VerbsAddr& a) {
    Peer p;
    p.a = a;
    p.addr.resize(kVerbsAddrLen);
    encode_verbs_addr(a, p.addr.data());
    peers_.push_back(std::move(p));
    return static_cast<int>(peers_.size() - 1);
}

// Marks a peer dead at once (no more frames to it); poll_slow closes its connections and
// reports it.
void VerbsTransport::kill_peer(int peer) {
    if (peer >= 0 && static_cast<size_t>(peer) < peers_.size()) peers_[peer].dead = true;
}

int VerbsTransport::resolve(const uint8_t* addr, size_t len) {
    VerbsAddr a;
    if (!decode_verbs_addr(addr, len, &a)) return -EINVAL;
    int id = find_peer(a);
    if (id >= 0) return peers_[id].dead ? -EHOSTUNREACH : id;
    VerbsConn* c;
    int rc = start_connect(a, &c);
    if (rc < 0) return rc;
    id = add_peer(a);
    c->peer = id;
    peers_[id].tx = c;
    return id;
}

// Starts the active side: address resolution now, the rest as events arrive.
int VerbsTransport::start_connect(const VerbsAddr& a, VerbsConn** out) {
    auto c = std::make_unique<VerbsConn>();
    if (rdma_create_id(channel_, &c->id, c.get(), RDMA_PS_TCP) != 0) return neg_errno();
    sockaddr_in src{}, dst{};
    src.sin_family = dst.sin_family = AF_INET;
    src.sin_addr.s_addr = local_.ip;  // the device our listener is on
    dst.sin_addr.s_addr = a.ip;
    dst.sin_port = htons(a.port);
    if (rdma_resolve_addr(c->id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                          kResolveMs) != 0) {
        int e = errno;
        (void)rdma_destroy_id(c->id);  // never used: nothing to undo if this fails
        return e == ENETUNREACH || e == EHOSTUNREACH || e == EADDRNOTAVAIL ? -EHOSTUNREACH : -e;
    }
    *out = c.get();
    conns_.push_back(std::move(c));
    return 0;
}

// Send CQ, send ring and the QP (on our SRQ and receive CQ), moved to INIT.
int VerbsTransport::setup_qp(VerbsConn& c) {
    if (c.id->verbs != ctx_) return -EXDEV;  // routed through another device than our listener's
    c.send_cq = ibv_create_cq(ctx_, static_cast<int>(kSendSlots), nullptr, nullptr, 0);
    if (!c.send_cq) return neg_errno();
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, size_t{kSendSlots} * kMaxFrame) != 0) return -ENOMEM;
    c.send_buf = static_cast<uint8_t*>(buf);
    c.send_mr = ibv_reg_mr(pd_, c.send_buf, size_t{kSendSlots} * kMaxFrame, kLocalWrite);
    if (!c.send_mr) return neg_errno();
    ibv_qp_init_attr qa{};
    qa.qp_context = &c;
    qa.send_cq = c.send_cq;
    qa.recv_cq = recv_cq_;
    qa.srq = srq_;
    qa.cap.max_send_wr = kSendSlots;
    qa.cap.max_send_sge = 1;
    qa.cap.max_inline_data = kInlineWanted;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 0;
    c.qp = ibv_create_qp(pd_, &qa);
    if (!c.qp) {  // perhaps the inline size: try without
        qa.cap.max_inline_data = 0;
        c.qp = ibv_create_qp(pd_, &qa);
        if (!c.qp) return neg_errno();
    }
    c.max_inline = std::min(kInlineWanted, qa.cap.max_inline_data);  // ibv_create_qp reports what it gave
    by_qpn_[c.qp->qp_num] = &c;
    return move_qp(c, IBV_QPS_INIT);
}

// One state step with the attributes the connection manager negotiated; a short RNR
// timer in RTR (the receiver's, carried in its RNR NAKs).
int VerbsTransport::move_qp(VerbsConn& c, int state) {
    ibv_qp_attr at{};
    int mask = 0;
    at.qp_state = static_cast<ibv_qp_state>(state);
    if (rdma_init_qp_attr(c.id, &at, &mask) != 0) return neg_errno();
    if (state == IBV_QPS_RTR) {
        at.min_rnr_timer = kMinRnrTimer;
        mask |= IBV_QP_MIN_RNR_TIMER;
        // As librdmacm does for its own QPs: on an InfiniBand port the kernel may return
        // mask bits 21-23 (RoCE-only, an old rdma_ucm bug) that modify_qp refuses.
        ibv_port_attr pa;
        int qrc = ibv_query_port(ctx_, c.id->port_num, &pa);  // returns the errno value
        if (qrc != 0) return -qrc;
        if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND) mask &= ~0xe00000;
    }
    int rc = ibv_modify_qp(c.qp, &at, mask);
    return rc ? -rc : 0;  // ibv_modify_qp returns the errno value itself
}

void VerbsTransport::close_conn(VerbsConn* c) {
    unposted_.erase(std::remove(unposted_.begin(), unposted_.end(), c), unposted_.end());
    if (c->peer >= 0) {
        Peer& p = peers_[c->peer];
        if (p.tx == c) p.tx = nullptr;
        if (p.rx_only == c) p.rx_only = nullptr;
    }
    // Cleanup of a connection that is going away either way: the peer sees DISCONNECTED
    // (or nothing, if it is gone already), so these results change nothing.
    if (c->up) (void)rdma_disconnect(c->id);
    if (c->qp) {
        by_qpn_.erase(c->qp->qp_num);
        (void)ibv_destroy_qp(c->qp);
    }
    if (c->send_cq) (void)ibv_destroy_cq(c->send_cq);
    if (c->send_mr) (void)ibv_dereg_mr(c->send_mr);
    free(c->send_buf);
    // Every event of this id was acknowledged when read, so this does not block.
    if (c->id) (void)rdma_destroy_id(c->id);
    conns_.erase(std::find_if(conns_.begin(), conns_.end(), [c](auto& u) { return u.get() == c; }));
}

// ---------------------------------------------------------------- connection manager
void VerbsTransport::handle_cm_events() {
    rdma_cm_event* ev;
    // Non-blocking channel: -1 with EAGAIN once it is empty.
    while (rdma_get_cm_event(channel_, &ev) == 0) {
        int type = ev->event;
        rdma_cm_id* id = ev->id;
        uint8_t pdata[64] = {};
        size_t plen = 0;
        // Only these carry connection private data (param is a union).
        bool has_data = type == RDMA_CM_EVENT_CONNECT_REQUEST || type == RDMA_CM_EVENT_REJECTED;
        if (has_data && ev->param.conn.private_data) {
            plen = std::min<size_t>(ev->param.conn.private_data_len, sizeof pdata);
            memcpy(pdata, ev->param.conn.private_data, plen);
        }
        // Acknowledge before acting: destroying an id waits for its events' acks.
        (void)rdma_ack_cm_event(ev);  // fails only for a bad pointer
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            on_connect_request(id, pdata, plen);
        } else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
            for (size_t i = 0; i < peers_.size(); i++) kill_peer(static_cast<int>(i));
        } else if (id != listen_id_ && id->context) {
            on_conn_event(*static_cast<VerbsConn*>(id->context), type, pdata, plen);
        }
    }
}

void VerbsTransport::on_conn_event(VerbsConn& c, int type, const uint8_t* pdata, size_t plen) {
    switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (rdma_resolve_route(c.id, kResolveMs) != 0) kill_peer(c.peer);
            return;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            if (setup_qp(c) < 0) {
                kill_peer(c.peer);
                return;
            }
            // Who we are (the listener sees only our ephemeral port), and which NIC we
            // mean: a NIC that reopened on the same port has another nonce.
            uint8_t hello[kHelloLen];
            memcpy(hello, addr_, kVerbsAddrLen);
            memcpy(hello + kVerbsAddrLen, &peers_[c.peer].a.nonce, 4);
            rdma_conn_param cp{};
            cp.private_data = hello;  // copied by rdma_connect
            cp.private_data_len = kHelloLen;
            cp.retry_count = kRetryCount;
            cp.rnr_retry_count = kUnlimitedRetry;
            cp.srq = 1;
            cp.qp_num = c.qp->qp_num;  // our own QP: librdmacm does not manage it
            if (rdma_connect(c.id, &cp) != 0) kill_peer(c.peer);
            return;
        }
        case RDMA_CM_EVENT_CONNECT_RESPONSE:
            // The listener accepted: RTR and RTS with what it answered, then RTU.
            if (move_qp(c, IBV_QPS_RTR) < 0 || move_qp(c, IBV_QPS_RTS) < 0 || rdma_establish(c.id) != 0) {
                kill_peer(c.peer);
                return;
            }
            c.up = true;
            return;
        case RDMA_CM_EVENT_ESTABLISHED:
            c.up = true;
            return;
        case RDMA_CM_EVENT_REJECTED:
            if (c.peer >= 0 && plen >= sizeof kCrossedMagic && memcmp(pdata, kCrossedMagic, sizeof kCrossedMagic) == 0) {
                // We both connected and the peer's connection wins: wait for it.
                int peer = c.peer;
                close_conn(&c);
                peers_[peer].wait_until_ns = now_ns() + kCrossedWaitNs;
                return;
            }
            kill_peer(c.peer);
            return;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_DISCONNECTED:
            kill_peer(c.peer);
            return;
        default:  // TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do
            return;
    }
}

void VerbsTransport::on_connect_request(rdma_cm_id* id, const uint8_t* pdata, size_t plen) {
    auto refuse = [&](bool crossed) {
        // A failed reject leaves a request the peer times out on; nothing else to do.
        (void)rdma_reject(id, crossed ? kCrossedMagic : nullptr, crossed ? sizeof kCrossedMagic : 0);
        (void)rdma_destroy_id(id);
    };
    VerbsAddr a;
    uint32_t target_nonce = 0;
    // The private data may be longer than sent (zero padded): the hello is its start.
    if (plen < kHelloLen || !decode_verbs_addr(pdata, kVerbsAddrLen, &a)) return refuse(false);
    memcpy(&target_nonce, pdata + kVerbsAddrLen, 4);
    if (target_nonce != local_.nonce) return refuse(false);  // meant for an earlier NIC on this port
    int peer = find_peer(a);
    bool rx_only = false;
    VerbsConn* loser = nullptr;
    if (peer >= 0) {
        Peer& p = peers_[peer];
        if (p.dead) return refuse(false);
        if (same_nic(a, local_)) {
            // Our own connection to ourselves: the accepted end only receives.
            if (p.rx_only) return refuse(false);
            rx_only = true;
        } else if (p.tx && !p.tx->up && p.tx->send_cq == nullptr) {
            // Still resolving: no request of ours is out yet. Ours goes, theirs stays.
            loser = p.tx;
        } else if (p.tx && !p.tx->up) {
            // Crossed connects: the one from the lower address wins, on both sides.
            if (verbs_addr_before(local_, a)) return refuse(true);
            loser = p.tx;
        } else if (p.tx) {
            return refuse(false);  // a second connection from a NIC we are connected to
        }
    }
    auto owned = std::make_unique<VerbsConn>();
    VerbsConn& c = *owned;
    c.id = id;
    id->context = &c;
    conns_.push_back(std::move(owned));
    rdma_conn_param cp{};
    cp.rnr_retry_count = kUnlimitedRetry;
    cp.srq = 1;
    bool ok = setup_qp(c) == 0 && move_qp(c, IBV_QPS_RTR) == 0 && move_qp(c, IBV_QPS_RTS) == 0;
    if (ok) {
        cp.qp_num = c.qp->qp_num;
        ok = rdma_accept(id, &cp) == 0;
    }
    if (!ok) {
        (void)rdma_reject(id, nullptr, 0);
        close_conn(&c);  // destroys id
        return;
    }
    if (peer < 0) peer = add_peer(a);
    c.peer = peer;
    if (loser) close_conn(loser);
    Peer& p = peers_[peer];
    if (rx_only) {
        p.rx_only = &c;
    } else {
        p.tx = &c;
        p.wait_until_ns = 0;
    }
}

// ---------------------------------------------------------------- data path
uint8_t* VerbsTransport::tx_reserve(int peer, uint32_t len) {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || len > kMaxFrame) return nullptr;
    Peer& p = peers_[peer];
    if (p.dead || !p.tx || !p.tx->up) return nullptr;  // not connected yet: the engine retries
    VerbsConn& c = *p.tx;
    if (c.prod - c.done >= kSendSlots) {
        reap_sends(c);
        if (c.prod - c.done >= kSendSlots || p.dead) return nullptr;
    }
    return c.send_buf + (c.prod % kSendSlots) * kMaxFrame;
}

void VerbsTransport::tx_commit(int peer, uint32_t len) {
    VerbsConn& c = *peers_[peer].tx;  // tx_reserve just found it
    uint32_t slot = static_cast<uint32_t>(c.prod % kSendSlots);
    ibv_sge& s = c.sge[slot];
    s.addr = reinterpret_cast<uintptr_t>(c.send_buf + slot * kMaxFrame);
    s.length = len;
    s.lkey = c.send_mr->lkey;
    ibv_send_wr& w = c.wr[slot];
    w = ibv_send_wr{};
    w.wr_id = c.prod;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = 0;
    if (len <= c.max_inline) w.send_flags |= IBV_SEND_INLINE;
    // Any kSendSlots consecutive sends include a signaled one, so a full ring always has
    // a completion coming that frees it.
    if (c.prod % kSignalEvery == kSignalEvery - 1) w.send_flags |= IBV_SEND_SIGNALED;
    if (c.prod == c.posted) unposted_.push_back(&c);
    c.prod++;
}

void VerbsTransport::tx_flush() {
    for (VerbsConn* c : unposted_) post_sends(*c);
    unposted_.clear();
}

// Posts the connection's committed requests as one chain.
void VerbsTransport::post_sends(VerbsConn& c) {
    if (c.posted == c.prod) return;
    for (uint64_t i = c.posted; i < c.prod; i++)
        c.wr[i % kSendSlots].next = i + 1 < c.prod ? &c.wr[(i + 1) % kSendSlots] : nullptr;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(c.qp, &c.wr[c.posted % kSendSlots], &bad) != 0) {
        // The QP is in error (or the ring accounting is wrong): frames would be lost.
        kill_peer(c.peer);
        return;
    }
    c.posted = c.prod;
}

// Frees the send slots that completed; a failed send means the connection is gone.
void VerbsTransport::reap_sends(VerbsConn& c) {
    ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(c.send_cq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                kill_peer(c.peer);
                continue;
            }
            c.done = std::max<uint64_t>(c.done, wc[i].wr_id + 1);
        }
    }
    if (n < 0) kill_peer(c.peer);
}

int VerbsTransport::rx_burst(RxFrame* out, int max) {
    if (max <= 0) return 0;
    ibv_wc wc[32];
    int n = ibv_poll_cq(recv_cq_, std::min(max, 32), wc);
    int got = 0;
    for (int i = 0; i < n; i++) {
        uint32_t idx = static_cast<uint32_t>(wc[i].wr_id);
        if (idx >= recv_count_) continue;  // not one of ours; cannot happen
        auto it = by_qpn_.find(wc[i].qp_num);
        if (wc[i].status != IBV_WC_SUCCESS || it == by_qpn_.end() || it->second->peer < 0 ||
            wc[i].byte_len > kMaxFrame) {
            // A failed receive (or one for a connection we closed) costs the frame; a
            // failure on a live connection breaks it.
            if (wc[i].status != IBV_WC_SUCCESS && it != by_qpn_.end()) kill_peer(it->second->peer);
            repost_.push_back(idx);
            continue;
        }
        held_.push_back(idx);
        out[got++] = RxFrame{recv_buf_ + size_t{idx} * kMaxFrame, wc[i].byte_len, it->second->peer};
    }
    if (!repost_.empty()) post_recvs();
    return got;
}

void VerbsTransport::rx_release() {
    repost_.insert(repost_.end(), held_.begin(), held_.end());
    held_.clear();
    post_recvs();
}

// Posts the buffers in repost_ to the SRQ, a chain per 32 (a burst's worth, on the
// stack: no allocation on the data path); what the SRQ refuses stays for the next try.
void VerbsTransport::post_recvs() {
    constexpr size_t kChain = 32;
    size_t posted = 0;
    while (posted < repost_.size()) {
        size_t n = std::min(kChain, repost_.size() - posted);
        ibv_recv_wr wr[kChain];
        ibv_sge sge[kChain];
        for (size_t i = 0; i < n; i++) {
            uint32_t idx = repost_[posted + i];
            sge[i].addr = reinterpret_cast<uintptr_t>(recv_buf_ + size_t{idx} * kMaxFrame);
            sge[i].length = kMaxFrame;
            sge[i].lkey = recv_mr_->lkey;
            wr[i].wr_id = idx;
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
        }
        ibv_recv_wr* bad = nullptr;
        if (ibv_post_srq_recv(srq_, wr, &bad) != 0) {
            posted += bad ? static_cast<size_t>(bad - wr) : 0;
            break;
        }
        posted += n;
    }
    repost_.erase(repost_.begin(), repost_.begin() + static_cast<std::ptrdiff_t>(posted));
}

void VerbsTransport::poll_slow(std::vector<TransportEvent>& events) {
    handle_cm_events();
    uint64_t now = now_ns();
    for (Peer& p : peers_) {
        if (p.dead) continue;
        if (p.tx && p.tx->up) reap_sends(*p.tx);  // errors show up here even when idle
        if (!p.tx && p.wait_until_ns && now > p.wait_until_ns) p.dead = true;
    }
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (!p.dead || p.dead_reported) continue;
        if (p.tx) close_conn(p.tx);
        if (p.rx_only) close_conn(p.rx_only);
        p.dead_reported = true;
        events.push_back({PeerEvent::kDead, static_cast<int>(i)});
    }
}

}  // namespace softvia::nicfw
