// nic.cc -- VipOpenNic/VipCloseNic/VipQueryNic, protection tags, memory registration,
// error callback, and the softvia extensions that concern the NIC as a whole.
#include <sched.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"
#include "nicfw/device.h"
#include "nicfw/faults.h"
#include "nicfw/hot_path.h"

using namespace softvia;
using namespace softvia::vipl;

namespace softvia::vipl {

VIP_RETURN from_errno(int rc) {
    switch (rc) {
        case 0: return VIP_SUCCESS;
        case -EINVAL: return VIP_INVALID_PARAMETER;
        case -EBUSY: return VIP_INVALID_STATE;
        case -EPERM: return VIP_INVALID_PTAG;
        case -EPROTO: return VIP_INVALID_RELIABILITY_LEVEL;
        case -ETIMEDOUT: return VIP_TIMEOUT;
        default: return VIP_ERROR_RESOURCE;  // -ENOSPC, -ENOMEM, -EHOSTUNREACH, -EAGAIN
    }
}

}  // namespace softvia::vipl

namespace {
bool parse_progress(const char* s, nicfw::Progress* p) {
    if (strcmp(s, "inline") == 0) *p = nicfw::Progress::kInline;
    else if (strcmp(s, "thread") == 0) *p = nicfw::Progress::kThread;
    else return false;
    return true;
}

// A bad setting: one line on stderr naming it, the value, and what is accepted.
// Returns false, for the caller's VIP_INVALID_PARAMETER.
bool bad_setting(const char* setting, const char* value, const char* accepted) {
    fprintf(stderr, "softvia: %s='%s' is not valid: %s\n", setting, value, accepted);
    return false;
}

// Where the device name came from, for messages: the argument or SOFTVIA_DEVICE.
struct DevName {
    std::string name;
    bool from_env = false;
    std::string what() const { return from_env ? "SOFTVIA_DEVICE" : "device name"; }
};

// A whole number 0..max as a device option's value.
bool parse_count(const char* v, uint32_t max, uint32_t* out) {
    char* end = nullptr;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (!*v || *end || errno || *v == '-' || n > max) return false;
    *out = static_cast<uint32_t>(n);
    return true;
}

// Device names "kind[:key=value,...]" (nicfw/device.h): vipl reads progress=, txbatch=
// and rxspin= here, the transport the rest when the NIC is created.
bool parse_device(const DevName& dn, nicfw::EngineConfig* cfg) {
    const std::string& name = dn.name;
    nicfw::DeviceSpec spec;
    std::string why;
    if (nicfw::parse_device_name(name, &spec, &why) < 0)
        return bad_setting(dn.what().c_str(), name.c_str(), (why + "; want kind[:key=value,...]").c_str());
    const char* p = spec.get("progress");
    if (p && !parse_progress(p, &cfg->progress))
        return bad_setting(dn.what().c_str(), name.c_str(), "progress= takes inline or thread");
    const char* b = spec.get("txbatch");
    if (b && !parse_count(b, nicfw::kMaxTxBatch, &cfg->tx_batch)) {
        std::string acc = "txbatch= takes 0 to " + std::to_string(nicfw::kMaxTxBatch) + " frames";
        return bad_setting(dn.what().c_str(), name.c_str(), acc.c_str());
    }
    const char* r = spec.get("rxspin");
    if (r && !parse_count(r, nicfw::kMaxRxSpin, &cfg->rx_spin)) {
        std::string acc = "rxspin= takes 0 to " + std::to_string(nicfw::kMaxRxSpin) + " reads";
        return bad_setting(dn.what().c_str(), name.c_str(), acc.c_str());
    }
    return true;
}

// The environment's settings of a NIC being opened (docs/vipl-reference.md, section 17).
// False (after the message) if one is set and not valid.
bool read_env_settings(nicfw::EngineConfig* cfg) {
    const char* penv = getenv("SOFTVIA_PROGRESS");
    if (penv && *penv && !parse_progress(penv, &cfg->progress))
        return bad_setting("SOFTVIA_PROGRESS", penv, "inline or thread (or unset)");
    const char* fenv = getenv("SOFTVIA_FAULTS");
    if (fenv && *fenv) {
        nicfw::FaultSpec spec;
        if (!nicfw::parse_fault_spec(fenv, &spec))
            return bad_setting("SOFTVIA_FAULTS", fenv,
                               "comma-separated key=value with keys drop, dup, reorder, corrupt, delay "
                               "(probabilities 0 to 1), delay_us, seed (whole numbers); empty or unset: no faults");
        cfg->faults = fenv;
    }
    const char* renv = getenv("SOFTVIA_RETRY_TIMEOUT_MS");
    if (renv && *renv) {
        char* end;
        errno = 0;
        unsigned long long ms = strtoull(renv, &end, 10);
        if (errno || *end || ms == 0 || ms > nicfw::kMaxRetryTimeoutMs || *renv == '-' || *renv == '+' ||
            *renv == ' ') {
            std::string acc = "milliseconds, a whole number from 1 to " + std::to_string(nicfw::kMaxRetryTimeoutMs);
            return bad_setting("SOFTVIA_RETRY_TIMEOUT_MS", renv, acc.c_str());
        }
        cfg->retry_timeout_ms = ms;
    }
    return true;
}
// The open NICs, for the exit hook: with inline progress an ACK waits for the next call
// to carry it on a reply, and a program that exits after its last receive makes none.
// Leaked on purpose: the hook runs while static destructors may already have run.
std::mutex& open_nics_lock() {
    static auto* m = new std::mutex;
    return *m;
}
std::vector<NicObj*>& open_nics() {
    static auto* v = new std::vector<NicObj*>;
    return *v;
}
void flush_acks_at_exit() {
    std::lock_guard<std::mutex> g(open_nics_lock());
    for (NicObj* n : open_nics()) n->eng->flush_owed_acks();
}
void note_open(NicObj* nic) {
    static bool hooked = false;
    std::lock_guard<std::mutex> g(open_nics_lock());
    if (!hooked) hooked = atexit(flush_acks_at_exit) == 0;
    open_nics().push_back(nic);
}
void note_closed(NicObj* nic) {
    std::lock_guard<std::mutex> g(open_nics_lock());
    auto& v = open_nics();
    v.erase(std::remove(v.begin(), v.end(), nic), v.end());
}
}  // namespace

VIPL_API VIP_RETURN VipExtOpenNic(const VIP_CHAR* DeviceName, const VIP_EXT_NIC_OPTIONS* Options,
                                  VIP_NIC_HANDLE* NicHandle) {
    if (!NicHandle) return VIP_INVALID_PARAMETER;
    DevName dn;
    dn.name = DeviceName ? DeviceName : "";
    if (dn.name.empty()) {
        const char* env = getenv("SOFTVIA_DEVICE");
        dn.from_env = env && *env;
        dn.name = dn.from_env ? env : "shm";
    }
    const std::string& name = dn.name;
    nicfw::EngineConfig cfg;
    if (!read_env_settings(&cfg)) return VIP_INVALID_PARAMETER;
    if (!parse_device(dn, &cfg)) return VIP_INVALID_PARAMETER;
    if (Options) {
        // Read as an integer: a caller's out-of-range value is bad input, not UB here.
        uint32_t mode;
        memcpy(&mode, &Options->Progress, sizeof mode);
        if (mode != VIP_EXT_PROGRESS_INLINE && mode != VIP_EXT_PROGRESS_THREAD) {
            fprintf(stderr, "softvia: VipExtOpenNic: Options->Progress %u is not valid: "
                            "VIP_EXT_PROGRESS_INLINE (0) or VIP_EXT_PROGRESS_THREAD (1)\n", mode);
            return VIP_INVALID_PARAMETER;
        }
        cfg.progress = mode == VIP_EXT_PROGRESS_THREAD ? nicfw::Progress::kThread : nicfw::Progress::kInline;
    }
    auto* nic = new (std::nothrow) NicObj();
    if (!nic) return VIP_ERROR_RESOURCE;
    // The handle exists before the engine, whose errors name it (deliver_error); it finds
    // nothing until the NIC is complete (attach below).
    {
        std::lock_guard<std::mutex> g(Handles::lock());
        nic->handle = Handles::add_locked(Kind::kNic, nullptr);
    }
    if (!nic->handle) {
        delete nic;
        return VIP_ERROR_RESOURCE;
    }
    cfg.device = name;
    std::string why;
    int rc = nicfw::Engine::create(cfg, &nic->eng, &why);
    if (rc < 0) {
        Handles::remove(nic->handle);
        delete nic;
        // A name or option that is wrong is the caller's; a device that cannot start is not.
        fprintf(stderr, "softvia: cannot open NIC '%s'%s: %s\n", name.c_str(),
                dn.from_env ? " (SOFTVIA_DEVICE)" : "", why.c_str());
        return rc == -EINVAL || rc == -ENODEV ? VIP_INVALID_PARAMETER : VIP_ERROR_RESOURCE;
    }
    nic->device = name;
    size_t alen;
    const uint8_t* a = nic->eng->transport().local_addr(&alen);
    nic->addr.assign(a, a + alen);
    note_open(nic);
    {
        std::lock_guard<std::mutex> g(Handles::lock());
        Handles::attach_locked(nic->handle, nic);
    }
    *NicHandle = handle_of<VIP_NIC_HANDLE>(nic->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipOpenNic(const VIP_CHAR* DeviceName, VIP_NIC_HANDLE* NicHandle) {
    return VipExtOpenNic(DeviceName, nullptr, NicHandle);
}

VIPL_API VIP_RETURN VipCloseNic(VIP_NIC_HANDLE h) {
    NicObj* nic;
    {
        // Every handle of the NIC ends at once: from here no call finds any of them, and
        // no blocking call takes a new hold on the NIC.
        std::lock_guard<std::mutex> g(Handles::lock());
        nic = nic_of(h);
        if (!nic) return VIP_INVALID_PARAMETER;
        if (NicHold::held_here(nic)) return VIP_INVALID_STATE;  // an error callback inside a wait on it
        if (in_error_callback(nic)) return VIP_INVALID_STATE;  // inside its error callback (docs)
        nic->closing.store(true, std::memory_order_relaxed);
        std::lock_guard<std::mutex> o(nic->objs_lock);
        for (auto* v : nic->vis) Handles::remove_locked(v->handle);
        for (auto* c : nic->cqs) Handles::remove_locked(c->handle);
        for (auto* p : nic->ptags) Handles::remove_locked(p->handle);
        for (auto* c : nic->conns) Handles::remove_locked(c->handle);
        for (auto* l : nic->listens) Handles::remove_locked(l->handle);
        Handles::remove_locked(nic->handle);
    }
    // Threads in the NIC's blocking calls see closing and return VIP_INVALID_STATE; in
    // thread mode they may be asleep in the firmware's futex, so wake them until all left.
    while (nic->holds.load(std::memory_order_acquire) != 0) {
        nic->eng->wake_blocked();
        struct timespec ts = {0, 50000};
        nanosleep(&ts, nullptr);
    }
    note_closed(nic);
    nic->eng.reset();  // stops the firmware, tells connected peers we left
    for (auto* v : nic->vis) delete v;
    for (auto* c : nic->cqs) delete c;
    for (auto* p : nic->ptags) delete p;
    for (auto* c : nic->conns) delete c;
    for (auto* l : nic->listens) delete l;  // the engine owned their listeners
    delete nic;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipQueryNic(VIP_NIC_HANDLE h, VIP_NIC_ATTRIBUTES* a) {
    NicObj* nic = nic_of(h);
    if (!nic || !a) return VIP_INVALID_PARAMETER;
    memset(a, 0, sizeof *a);
    snprintf(a->Name, sizeof a->Name, "softvia-%s", nic->device.c_str());
    a->HardwareVersion = NICFW_ABI_VERSION;
    a->ProviderVersion = 0x000100;  // 0.1.0
    a->NicAddressLen = static_cast<VIP_UINT16>(nic->addr.size());
    a->LocalNicAddress = nic->addr.data();
    a->ThreadSafe = VIP_TRUE;
    a->MaxDiscriminatorLen = NICFW_MAX_DISCRIMINATOR;
    a->MaxRegisterBytes = NICFW_MAX_REGION_BYTES;
    a->MaxRegisterRegions = NICFW_MAX_REGIONS;
    a->MaxRegisterBlockBytes = NICFW_MAX_REGION_BYTES;
    a->MaxVI = NICFW_MAX_VI;
    a->MaxDescriptorsPerQueue = NICFW_MAX_DESC_PER_QUEUE;
    a->MaxSegmentsPerDesc = NICFW_MAX_SEGMENTS;
    a->MaxCQ = NICFW_MAX_CQ;
    a->MaxCQEntries = NICFW_MAX_CQ_ENTRIES;
    a->MaxTransferSize = NICFW_MAX_TRANSFER;
    a->NativeMTU = nic->eng->mtu();
    a->MaxPtags = NICFW_MAX_PTAGS;
    // shm is lossless and in order, and the firmware acknowledges placement for
    // reliable reception, so all three levels hold. RDMA read runs on the reliable ones.
    a->ReliabilityLevelSupport =
        VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
    a->RDMAReadSupport = VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
    return VIP_SUCCESS;
}

// ---------------------------------------------------------------- protection tags
VIPL_API VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE h, VIP_PROTECTION_HANDLE* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out) return VIP_INVALID_PARAMETER;
    auto* p = new (std::nothrow) PtagObj();
    if (!p) return VIP_ERROR_RESOURCE;
    int rc = nic->eng->create_ptag(&p->id);
    if (rc < 0) {
        delete p;
        return VIP_ERROR_RESOURCE;
    }
    p->nic = nic;
    if (!reserve(p, Kind::kPtag)) {
        nic->eng->destroy_ptag(p->id);
        delete p;
        return VIP_ERROR_RESOURCE;
    }
    publish(p, nic->ptags);
    *out = handle_of<VIP_PROTECTION_HANDLE>(p->handle);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE h, VIP_PROTECTION_HANDLE ph) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    PtagObj* p = ptag_of(ph);
    if (!p || p->nic != nic) return VIP_INVALID_PTAG;
    int rc = nic->eng->destroy_ptag(p->id);
    if (rc == -EBUSY) return VIP_INVALID_STATE;  // memory or VIs still carry it
    if (rc < 0) return VIP_INVALID_PTAG;
    unpublish(p, nic->ptags);
    delete p;
    return VIP_SUCCESS;
}

// ---------------------------------------------------------------- memory
VIPL_API VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE h, VIP_PVOID va, VIP_ULONG len,
                                   VIP_MEM_ATTRIBUTES* attrs, VIP_MEM_HANDLE* memh) {
    NicObj* nic = nic_of(h);
    if (!nic || !va || !attrs || !memh || len == 0) return VIP_INVALID_PARAMETER;
    if (len > NICFW_MAX_REGION_BYTES || reinterpret_cast<uint64_t>(va) + len < len)
        return VIP_INVALID_PARAMETER;
    PtagObj* pt = ptag_of(attrs->Ptag);
    if (!pt || pt->nic != nic) return VIP_INVALID_PTAG;
    // The NIC refuses memory it could not access as the attributes allow (-EFAULT: not
    // mapped, not readable, or not writable for RDMA write).
    int rc = nic->eng->register_mem(reinterpret_cast<uint64_t>(va), len, pt->id,
                                    attrs->EnableRdmaWrite != 0, attrs->EnableRdmaRead != 0, memh);
    if (rc == -EPERM) return VIP_INVALID_PTAG;
    if (rc == -EFAULT) return VIP_INVALID_PARAMETER;
    return rc < 0 ? VIP_ERROR_RESOURCE : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE h, VIP_PVOID va, VIP_MEM_HANDLE memh) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    return nic->eng->deregister_mem(reinterpret_cast<uint64_t>(va), memh) < 0 ? VIP_INVALID_PARAMETER
                                                                             : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipQueryMem(VIP_NIC_HANDLE h, VIP_PVOID va, VIP_MEM_HANDLE memh,
                                VIP_MEM_ATTRIBUTES* attrs) {
    NicObj* nic = nic_of(h);
    if (!nic || !attrs) return VIP_INVALID_PARAMETER;
    uint32_t ptag;
    bool w, r;
    if (nic->eng->query_mem(reinterpret_cast<uint64_t>(va), memh, &ptag, &w, &r) < 0)
        return VIP_INVALID_PARAMETER;
    attrs->Ptag = nullptr;
    std::lock_guard<std::mutex> g(nic->objs_lock);
    for (auto* p : nic->ptags)
        if (p->id == ptag) attrs->Ptag = handle_of<VIP_PROTECTION_HANDLE>(p->handle);
    attrs->EnableRdmaWrite = w;
    attrs->EnableRdmaRead = r;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipSetMemAttributes(VIP_NIC_HANDLE h, VIP_PVOID va, VIP_MEM_HANDLE memh,
                                        VIP_MEM_ATTRIBUTES* attrs) {
    NicObj* nic = nic_of(h);
    if (!nic || !attrs) return VIP_INVALID_PARAMETER;
    PtagObj* pt = ptag_of(attrs->Ptag);
    if (!pt || pt->nic != nic) return VIP_INVALID_PTAG;
    int rc = nic->eng->set_mem_attrs(reinterpret_cast<uint64_t>(va), memh, pt->id,
                                     attrs->EnableRdmaWrite != 0, attrs->EnableRdmaRead != 0);
    if (rc == -EPERM) return VIP_INVALID_PTAG;
    return rc < 0 ? VIP_INVALID_PARAMETER : VIP_SUCCESS;
}

// ---------------------------------------------------------------- errors, notify, misc
namespace {
// The callbacks of which NICs this thread is inside (nested: a callback may wait on another NIC).
constexpr int kCbDepth = 8;
thread_local const NicObj* tl_in_cb[kCbDepth];
thread_local int tl_cb_n = 0;

void deliver_error(void* ctx, const nicfw_async_event* ev) {
    auto* nic = static_cast<NicObj*>(ctx);
    VIP_ERROR_DESCRIPTOR ed = error_descriptor(handle_of<VIP_NIC_HANDLE>(nic->handle), *ev);
    VIP_PVOID uctx;
    VIP_ERROR_HANDLER_FN fn;
    {
        std::lock_guard<std::mutex> g(nic->err_lock);
        uctx = nic->err_ctx;
        fn = nic->err_fn;
    }
    if (!fn) return;
    const bool pushed = tl_cb_n < kCbDepth;
    if (pushed) tl_in_cb[tl_cb_n++] = nic;
    fn(uctx, &ed);
    if (pushed) tl_cb_n--;
}
}  // namespace

bool softvia::vipl::in_error_callback(const NicObj* nic) {
    for (int i = 0; i < tl_cb_n; i++)
        if (tl_in_cb[i] == nic) return true;
    return false;
}

VIPL_API VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE h, VIP_PVOID ctx, VIP_ERROR_HANDLER_FN fn) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    {
        std::lock_guard<std::mutex> g(nic->err_lock);
        nic->err_ctx = ctx;
        nic->err_fn = fn;
    }
    nic->eng->set_error_handler(fn ? nic : nullptr, fn ? deliver_error : nullptr);
    return VIP_SUCCESS;
}

// Asynchronous completion handlers need a notification thread per NIC; not built yet.
VIPL_API VIP_RETURN VipSendNotify(VIP_VI_HANDLE vi, VIP_PVOID, VIP_DESC_NOTIFY_FN) {
    return vi_of(vi) ? VIP_EXT_NOT_IMPLEMENTED : VIP_INVALID_PARAMETER;
}
VIPL_API VIP_RETURN VipRecvNotify(VIP_VI_HANDLE vi, VIP_PVOID, VIP_DESC_NOTIFY_FN) {
    return vi_of(vi) ? VIP_EXT_NOT_IMPLEMENTED : VIP_INVALID_PARAMETER;
}
VIPL_API VIP_RETURN VipCQNotify(VIP_CQ_HANDLE cq, VIP_PVOID, VIP_CQ_NOTIFY_FN) {
    return cq_of(cq) ? VIP_EXT_NOT_IMPLEMENTED : VIP_INVALID_PARAMETER;
}
VIPL_API VIP_RETURN VipQuerySystemManagementInfo(VIP_NIC_HANDLE nic, VIP_ULONG, VIP_PVOID) {
    return nic_of(nic) ? VIP_EXT_NOT_IMPLEMENTED : VIP_INVALID_PARAMETER;
}

VIPL_API VIP_RETURN VipExtGetProgressMode(VIP_NIC_HANDLE h, VIP_EXT_PROGRESS_MODE* mode) {
    NicObj* nic = nic_of(h);
    if (!nic || !mode) return VIP_INVALID_PARAMETER;
    *mode = nic->eng->progress_mode() == nicfw::Progress::kThread ? VIP_EXT_PROGRESS_THREAD
                                                                 : VIP_EXT_PROGRESS_INLINE;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtQueryWireLossy(VIP_NIC_HANDLE h, VIP_BOOLEAN* lossy) {
    NicObj* nic = nic_of(h);
    if (!nic || !lossy) return VIP_INVALID_PARAMETER;
    *lossy = nic->eng->transport().lossy() ? VIP_TRUE : VIP_FALSE;
    return VIP_SUCCESS;
}

VIPL_API NICFW_HOT VIP_RETURN VipExtProgress(VIP_NIC_HANDLE h) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    return nic->eng->progress() ? VIP_SUCCESS : VIP_NOT_DONE;
}

// The firmware writes the counters while we read (relaxed atomics on both sides, nicfw::bump).
static void copy_counters(const nicfw_counters& c, VIP_EXT_COUNTERS* out) {
    auto rd = [](const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
    out->TxFrames = rd(c.tx_frames);
    out->TxBytes = rd(c.tx_bytes);
    out->RxFrames = rd(c.rx_frames);
    out->RxBytes = rd(c.rx_bytes);
    out->SendsDone = rd(c.sends_done);
    out->RecvsDone = rd(c.recvs_done);
    out->Drops = rd(c.drops);
    out->Errors = rd(c.errors);
    out->Retransmits = rd(c.retransmits);
}

VIPL_API VIP_RETURN VipExtQueryNicCounters(VIP_NIC_HANDLE h, VIP_EXT_COUNTERS* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out) return VIP_INVALID_PARAMETER;
    copy_counters(nic->eng->status()->nic, out);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtQueryViCounters(VIP_VI_HANDLE h, VIP_EXT_COUNTERS* out) {
    ViObj* vi = vi_of(h);
    if (!vi || !out) return VIP_INVALID_PARAMETER;
    copy_counters(vi->dev->st->c, out);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtQueryViId(VIP_VI_HANDLE h, VIP_UINT32* id) {
    ViObj* vi = vi_of(h);
    if (!vi || !id) return VIP_INVALID_PARAMETER;
    *id = NICFW_VI_INDEX(vi->dev->id);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtSetViContext(VIP_VI_HANDLE h, VIP_PVOID ctx) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    vi->nic->eng->set_vi_context(vi->dev, reinterpret_cast<uint64_t>(ctx));
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtSetMemAtomics(VIP_NIC_HANDLE h, VIP_PVOID va, VIP_MEM_HANDLE memh, VIP_BOOLEAN enable) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    return nic->eng->set_mem_atomics(reinterpret_cast<uint64_t>(va), memh, enable != 0) < 0 ? VIP_INVALID_PARAMETER
                                                                                            : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtAllocMem(VIP_NIC_HANDLE h, VIP_ULONG len, VIP_PVOID* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out || len == 0 || len > nicfw::SharedMemory::kMaxBlock) return VIP_INVALID_PARAMETER;
    void* p = nullptr;
    int rc = nic->eng->alloc_mem(len, &p);
    if (rc == -EINVAL) return VIP_INVALID_PARAMETER;
    if (rc < 0) return VIP_ERROR_RESOURCE;
    *out = p;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtFreeMem(VIP_NIC_HANDLE h, VIP_PVOID addr) {
    NicObj* nic = nic_of(h);
    if (!nic || !addr) return VIP_INVALID_PARAMETER;
    int rc = nic->eng->free_mem(addr);
    return rc == -EBUSY ? VIP_INVALID_STATE : rc < 0 ? VIP_INVALID_PARAMETER : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtQueryAtomicCounters(VIP_NIC_HANDLE h, VIP_EXT_ATOMIC_COUNTERS* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out) return VIP_INVALID_PARAMETER;
    uint32_t index = 0;
    if (!nicfw::offload_for_op(NICFW_OFFLOAD_OP_FETCH_ADD, &index)) return VIP_EXT_NOT_IMPLEMENTED;
    // The atomics offload's counters, in its order: applied, replayed, refused.
    out->Applied = nic->eng->offload_counter(index, 0);
    out->Replayed = nic->eng->offload_counter(index, 1);
    out->Refused = nic->eng->offload_counter(index, 2);
    out->Shortcut = nic->eng->offload_counter(index, 3);
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtSetRetryTimeout(VIP_VI_HANDLE h, VIP_ULONG ms) {
    ViObj* vi = vi_of(h);
    if (!vi) return VIP_INVALID_PARAMETER;
    return vi->nic->eng->set_retry_timeout(vi->dev, ms) < 0 ? VIP_INVALID_PARAMETER : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtSetFaults(VIP_NIC_HANDLE h, const VIP_CHAR* spec) {
    NicObj* nic = nic_of(h);
    if (!nic || !spec) return VIP_INVALID_PARAMETER;
    int rc = nic->eng->set_faults(spec);
    return rc == -EINVAL ? VIP_INVALID_PARAMETER : rc < 0 ? VIP_INVALID_STATE : VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipExtQueryFaultCounters(VIP_NIC_HANDLE h, VIP_EXT_FAULT_COUNTERS* out) {
    NicObj* nic = nic_of(h);
    if (!nic || !out) return VIP_INVALID_PARAMETER;
    nicfw::FaultCounters c;
    if (!nic->eng->fault_counters(&c)) return VIP_INVALID_STATE;
    out->Dropped = c.dropped;
    out->Duplicated = c.duplicated;
    out->Reordered = c.reordered;
    out->Corrupted = c.corrupted;
    out->Delayed = c.delayed;
    out->BadChecksum = c.bad_checksum;
    return VIP_SUCCESS;
}

VIPL_API const char* VipExtReturnString(VIP_RETURN code) {
    static const char* const names[] = {
        "VIP_SUCCESS", "VIP_NOT_DONE", "VIP_INVALID_PARAMETER", "VIP_ERROR_RESOURCE",
        "VIP_TIMEOUT", "VIP_REJECT", "VIP_INVALID_RELIABILITY_LEVEL", "VIP_INVALID_MTU",
        "VIP_INVALID_QOS", "VIP_INVALID_PTAG", "VIP_INVALID_RDMAREAD", "VIP_DESCRIPTOR_ERROR",
        "VIP_INVALID_STATE", "VIP_ERROR_NAMESERVICE", "VIP_NO_MATCH"};
    if (code >= 0 && static_cast<size_t>(code) < sizeof names / sizeof *names) return names[code];
    if (code == VIP_EXT_NOT_IMPLEMENTED) return "VIP_EXT_NOT_IMPLEMENTED";
    return "VIP_RETURN(unknown)";
}
