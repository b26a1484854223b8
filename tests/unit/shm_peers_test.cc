// tests/unit/shm_peers_test.cc -- shm peers come and go: released peers are freed and
// their indices reused, a dead peer's mappings and fds go at once, the peer limit and a
// refused link are answered at once (notices), memfds are sealed and private, a peer
// whose memfd is not sealed is refused; and through the engine, a disconnected peer's
// link is released. Real transports and processes, no mocks.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_transport.h"
#include "unit_util.h"

using namespace softvia::nicfw;
using unit::now_ms;

namespace {

std::unique_ptr<ShmTransport> make(uint32_t max_peers = ShmTransport::kMaxPeers) {
    std::unique_ptr<ShmTransport> t;
    EXPECT_EQ(0, ShmTransport::create(&t, max_peers));
    return t;
}

std::vector<uint8_t> addr(const ShmTransport& t) {
    size_t n;
    const uint8_t* a = t.local_addr(&n);
    return std::vector<uint8_t>(a, a + n);
}

bool send(ShmTransport& t, int peer, uint8_t tag) {
    uint8_t* p = t.tx_reserve(peer, 64);
    if (!p) return false;
    memset(p, tag, 64);
    t.tx_commit(peer, 64);
    return true;
}

// The peer index of the next frame to arrive at t (and its tag), or -1.
int receive(ShmTransport& t, uint8_t* tag = nullptr, uint64_t ms = 2000) {
    uint64_t end = now_ms() + ms;
    RxFrame f[4];
    while (now_ms() < end) {
        int n = t.rx_burst(f, 4);
        if (n == 0) continue;
        int peer = f[0].peer;
        if (tag) *tag = f[0].data[0];
        t.rx_release();
        return peer;
    }
    return -1;
}

// Mappings of shm lanes in this process, and open fds.
int lane_maps() {
    std::ifstream m("/proc/self/maps");
    std::string line;
    int n = 0;
    while (std::getline(m, line))
        if (line.find("memfd:softvia-lane") != std::string::npos) n++;
    return n;
}
int open_fds() {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) >= 0) n++;
    return n;
}

// poll_slow on every transport until an event of kind for peer shows at t (true), or ms.
bool wait_event(ShmTransport& t, PeerEvent kind, int peer, const std::vector<ShmTransport*>& others,
                uint64_t ms = 2000) {
    uint64_t end = now_ms() + ms;
    std::vector<TransportEvent> ev;
    while (now_ms() < end) {
        for (ShmTransport* o : others) {
            ev.clear();
            o->poll_slow(ev);
        }
        ev.clear();
        t.poll_slow(ev);
        for (auto& e : ev)
            if (e.kind == kind && e.peer == peer) return true;
        usleep(1000);
    }
    return false;
}

// ---------------------------------------------------------------- lifetimes
TEST(ShmPeers, ReleasedPeersAreFreedBothWaysAndIndicesReused) {
    auto a = make(), b = make();
    const int maps0 = lane_maps(), fds0 = open_fds();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    ASSERT_TRUE(send(*a, pb, 1));
    int pa = receive(*b);
    ASSERT_GE(pa, 0);
    ASSERT_TRUE(send(*b, pa, 2));
    ASSERT_EQ(pb, receive(*a));
    EXPECT_EQ(1u, a->live_peers());
    EXPECT_EQ(1u, b->live_peers());
    EXPECT_EQ(maps0 + 4, lane_maps());  // each side maps its own lane and the other's

    // Both engines let go: after the linger both links close and both indices are freed.
    a->release_peer(pb);
    b->release_peer(pa);
    // Both sides polled together, each one's events kept: the two links may close in the
    // same turn (waiting for a's event first threw b's away: failed once in a CI run).
    bool a_freed = false, b_freed = false;
    std::vector<TransportEvent> ev;
    for (uint64_t end = now_ms() + 3000; !(a_freed && b_freed) && now_ms() < end; usleep(1000)) {
        ev.clear();
        a->poll_slow(ev);
        for (auto& e : ev) a_freed |= e.kind == PeerEvent::kFreed && e.peer == pb;
        ev.clear();
        b->poll_slow(ev);
        for (auto& e : ev) b_freed |= e.kind == PeerEvent::kFreed && e.peer == pa;
    }
    ASSERT_TRUE(a_freed);
    ASSERT_TRUE(b_freed);
    EXPECT_EQ(0u, a->live_peers());
    EXPECT_EQ(0u, b->live_peers());
    EXPECT_FALSE(a->peer_alive(pb));
    EXPECT_TRUE(a->peer_addr(pb).empty());
    EXPECT_EQ(maps0, lane_maps());
    EXPECT_EQ(fds0, open_fds());

    // A new peer takes the freed index; the old one links again as a new peer.
    auto c = make();
    auto ca = addr(*c);
    EXPECT_EQ(pb, a->resolve(ca.data(), ca.size()));
    int pb2 = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb2, 0);
    EXPECT_NE(pb, pb2);
    ASSERT_TRUE(send(*a, pb2, 3));
    uint8_t tag = 0;
    EXPECT_GE(receive(*b, &tag), 0);
    EXPECT_EQ(3, tag);
}

TEST(ShmPeers, PeerStillSendingIsNotFreed) {
    // a releases b, but b keeps its lane to a open and sends: a must keep the index.
    auto a = make(), b = make();
    auto aa = addr(*a);
    int pa = b->resolve(aa.data(), aa.size());
    ASSERT_TRUE(send(*b, pa, 1));
    int pb = receive(*a);
    ASSERT_GE(pb, 0);
    a->release_peer(pb);
    EXPECT_FALSE(wait_event(*a, PeerEvent::kFreed, pb, {b.get()}, 400));
    // A frame after the release takes the index back into use; it still names b.
    ASSERT_TRUE(send(*b, pa, 7));
    uint8_t tag = 0;
    EXPECT_EQ(pb, receive(*a, &tag));
    EXPECT_EQ(7, tag);
    EXPECT_EQ(addr(*b), a->peer_addr(pb));
    ASSERT_TRUE(send(*a, pb, 8));  // a's closed lane is replaced by a new one
    EXPECT_EQ(pa, receive(*b, &tag));
    EXPECT_EQ(8, tag);
}

TEST(ShmPeers, DeadPeerReleasesMappingsAndFdsAtOnce) {
    auto a = make();
    const int maps0 = lane_maps(), fds0 = open_fds();
    auto aa = addr(*a);
    int go[2];
    ASSERT_EQ(0, pipe(go));
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        std::unique_ptr<ShmTransport> t;
        if (ShmTransport::create(&t) != 0) _exit(10);
        int p = t->resolve(aa.data(), aa.size());
        if (p < 0 || !send(*t, p, 5)) _exit(11);
        char c;
        ssize_t n = read(go[0], &c, 1);  // blocks until killed
        (void)n;
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    close(go[0]);
    int pc = receive(*a);
    ASSERT_GE(pc, 0);
    ASSERT_TRUE(send(*a, pc, 6));  // our lane to it, too
    EXPECT_GT(lane_maps(), maps0);
    EXPECT_GT(open_fds(), fds0);  // the pidfd at least
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(go[1]);
    ASSERT_TRUE(wait_event(*a, PeerEvent::kDead, pc, {}, 3000));
    // Everything of the dead peer is gone before the engine has released anything.
    EXPECT_EQ(maps0, lane_maps());
    EXPECT_EQ(fds0, open_fds());
    EXPECT_EQ(0u, a->live_peers());
    a->release_peer(pc);
    EXPECT_TRUE(wait_event(*a, PeerEvent::kFreed, pc, {}, 1000));
}

// ---------------------------------------------------------------- refusals
TEST(ShmPeers, PeerLimitRefusesAtOnceWithANotice) {
    auto srv = make(2);
    auto sa = addr(*srv);
    std::vector<std::unique_ptr<ShmTransport>> cl;
    std::vector<int> to_srv;
    for (int i = 0; i < 3; i++) {
        cl.push_back(make());
        to_srv.push_back(cl.back()->resolve(sa.data(), sa.size()));
        ASSERT_GE(to_srv.back(), 0);
        ASSERT_TRUE(send(*cl.back(), to_srv.back(), static_cast<uint8_t>(i)));
    }
    std::vector<TransportEvent> ev;
    srv->poll_slow(ev);  // takes the hellos: two links, the third refused
    EXPECT_EQ(2u, srv->live_peers());
    // The third client learns it from the server's notice board, not from a timeout.
    uint64_t t0 = now_ms();
    ASSERT_TRUE(wait_event(*cl[2], PeerEvent::kDead, to_srv[2], {}, 2000));
    EXPECT_LT(now_ms() - t0, 100u);
    EXPECT_FALSE(cl[2]->peer_alive(to_srv[2]));
    for (int i = 0; i < 2; i++) EXPECT_TRUE(cl[i]->peer_alive(to_srv[i]));
    // Once a link is freed, the refused client can link again.
    int first = receive(*srv);  // (one burst: both frames are read and released)
    ASSERT_GE(first, 0);
    cl[0].reset();
    cl[1].reset();
    ASSERT_TRUE(wait_event(*srv, PeerEvent::kDead, first, {}, 2000));
    for (int p = 0; p < static_cast<int>(srv->peer_count()); p++) srv->release_peer(p);
    ev.clear();
    srv->poll_slow(ev);
    cl[2]->release_peer(to_srv[2]);
    ev.clear();
    cl[2]->poll_slow(ev);
    int again = cl[2]->resolve(sa.data(), sa.size());
    ASSERT_GE(again, 0);
    ASSERT_TRUE(send(*cl[2], again, 9));
    uint8_t tag = 0;
    EXPECT_GE(receive(*srv, &tag), 0);
    EXPECT_EQ(9, tag);
}

TEST(ShmPeers, OutOfFdsIsAnErrorNotAHang) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    struct rlimit old;
    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
    // No fd left (a limit just above the highest open fd, the holes below it filled):
    // the link cannot be made, and resolve says why at once.
    int hi = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) >= 0) hi = fd;
    struct rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(hi + 1);
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
    std::vector<int> extra;
    for (int fd; (fd = dup(a->segment_fd())) >= 0;) extra.push_back(fd);
    uint64_t t0 = now_ms();
    int rc = a->resolve(ba.data(), ba.size());
    uint64_t ms = now_ms() - t0;
    for (int fd : extra) close(fd);
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &old));
    EXPECT_TRUE(rc == -EMFILE || rc == -ENFILE) << rc;
    EXPECT_LT(ms, 100u);
    EXPECT_GE(a->resolve(ba.data(), ba.size()), 0);  // and with fds again it links
}

// ---------------------------------------------------------------- sealed, private memfds
TEST(ShmPeers, SegmentAndLaneAreSealedAndPrivate) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());
    ASSERT_GE(pb, 0);
    ASSERT_GE(a->lane_fd(pb), 0);  // b has not mapped it yet
    for (int fd : {a->segment_fd(), a->lane_fd(pb)}) {
        // Opened as a peer would, through /proc.
        std::string path = "/proc/self/fd/" + std::to_string(fd);
        int f = open(path.c_str(), O_RDWR | O_CLOEXEC);
        ASSERT_GE(f, 0) << path;
        struct stat st;
        ASSERT_EQ(0, fstat(f, &st));
        EXPECT_EQ(0600u, st.st_mode & 0777) << path;
        int seals = fcntl(f, F_GET_SEALS);
        EXPECT_EQ(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
        // A hostile peer of the same user cannot shrink it (our reads would fault) or
        // take the seals off.
        EXPECT_EQ(-1, ftruncate(f, 0));
        EXPECT_EQ(EPERM, errno);
        EXPECT_EQ(-1, ftruncate(f, st.st_size / 2));
        EXPECT_EQ(-1, ftruncate(f, st.st_size + 4096));
        EXPECT_EQ(-1, fcntl(f, F_ADD_SEALS, F_SEAL_WRITE));
        ASSERT_EQ(0, fstat(f, &st));
        EXPECT_GT(st.st_size, 0);
        close(f);
    }
}

// A copy of t's segment in a memfd of our making: sealed (seals) or not, size len.
int fake_segment(const ShmTransport& t, unsigned seals, size_t len) {
    int fd = memfd_create("fake-seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    void* src = mmap(nullptr, sizeof(ShmSegment), PROT_READ, MAP_SHARED, t.segment_fd(), 0);
    if (src == MAP_FAILED || ftruncate(fd, static_cast<off_t>(len)) != 0 ||
        pwrite(fd, src, sizeof(ShmSegment), 0) != static_cast<ssize_t>(sizeof(ShmSegment)))
        return -1;
    munmap(src, sizeof(ShmSegment));
    if (seals && fcntl(fd, F_ADD_SEALS, seals) != 0) return -1;
    return fd;
}

TEST(ShmPeers, PeerSegmentNotSealedIsRefused) {
    auto a = make(), b = make();
    auto good = addr(*b);
    auto with_fd = [&](int fd) {
        auto x = good;
        uint32_t v = static_cast<uint32_t>(fd);
        memcpy(x.data() + 8, &v, 4);
        return x;
    };
    int unsealed = fake_segment(*b, 0, sizeof(ShmSegment));
    int grown = fake_segment(*b, F_SEAL_SHRINK, sizeof(ShmSegment) + 4096);
    int sealed = fake_segment(*b, F_SEAL_SHRINK, sizeof(ShmSegment));
    ASSERT_GE(unsealed, 0);
    ASSERT_GE(grown, 0);
    ASSERT_GE(sealed, 0);
    auto x = with_fd(unsealed);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(x.data(), x.size())) << "an unsealed segment was mapped";
    x = with_fd(grown);
    EXPECT_EQ(-EHOSTUNREACH, a->resolve(x.data(), x.size())) << "a segment of the wrong size was mapped";
    x = with_fd(sealed);  // the same bytes, sealed: taken (it names b's process and nonce)
    EXPECT_GE(a->resolve(x.data(), x.size()), 0);
    close(unsealed);
    close(grown);
    close(sealed);
}

// Posts a hello into to's mailbox as if from `from`, for a lane in memfd lane_fd.
void forge_hello(ShmTransport& to, const ShmTransport& from, int lane_fd, uint32_t serial) {
    auto* s = static_cast<ShmSegment*>(
        mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, to.segment_fd(), 0));
    ASSERT_NE(MAP_FAILED, static_cast<void*>(s));
    uint32_t i = 0, free_state = shm::kMboxFree;
    while (i < shm::kMailbox && !s->mbox[i].state.compare_exchange_strong(free_state, shm::kMboxBusy)) {
        free_state = shm::kMboxFree;
        i++;
    }
    ASSERT_LT(i, shm::kMailbox);
    shm::MboxSlot& m = s->mbox[i];
    m.lane_fd = static_cast<uint32_t>(lane_fd);
    m.serial = serial;
    memcpy(m.from, addr(from).data(), ShmTransport::kAddrLen);
    m.state.store(shm::kMboxReady);
    s->mbox_posted.fetch_add(1);
    munmap(s, sizeof(ShmSegment));
}

// A lane from `from` to `to` in a memfd of our making, sealed (seals) or not.
int fake_lane(const ShmTransport& from, const ShmTransport& to, unsigned seals, uint32_t serial) {
    int fd = memfd_create("fake-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, sizeof(ShmLane)) != 0) return -1;
    auto* l = static_cast<ShmLane*>(mmap(nullptr, sizeof(ShmLane), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (l == MAP_FAILED) return -1;
    auto fa = addr(from), ta = addr(to);
    l->version = shm::kVersion;
    l->nslots = shm::kSlots;
    l->slot_bytes = shm::kSlotBytes;
    l->serial = serial;
    l->src_pid = shm::get32(fa.data() + 4);
    l->src_nonce = shm::get32(fa.data() + 12);
    l->dst_pid = shm::get32(ta.data() + 4);
    l->dst_nonce = shm::get32(ta.data() + 12);
    l->slots[0].len = 64;
    memset(l->slots[0].frame, 0x5A, 64);
    l->slots[0].seq.store(1);
    l->magic = shm::kLaneMagic;
    munmap(l, sizeof(ShmLane));
    if (seals && fcntl(fd, F_ADD_SEALS, seals) != 0) return -1;
    return fd;
}

TEST(ShmPeers, PeerLaneNotSealedIsRefusedAndThePeerTold) {
    auto a = make(), b = make();
    auto ba = addr(*b);
    int pb = a->resolve(ba.data(), ba.size());  // a maps b's segment (to read its notices)
    ASSERT_GE(pb, 0);
    int lane = fake_lane(*a, *b, 0, 1000);
    ASSERT_GE(lane, 0);
    forge_hello(*b, *a, lane, 1000);
    std::vector<TransportEvent> ev;
    b->poll_slow(ev);  // refuses the lane: cuts a, posts a notice
    RxFrame f[2];
    EXPECT_EQ(0, b->rx_burst(f, 2)) << "a frame was read from an unsealed lane";
    EXPECT_TRUE(wait_event(*a, PeerEvent::kDead, pb, {}, 1000)) << "a never heard it was refused";
    close(lane);
}

TEST(ShmPeers, SealedForgedLaneIsReadPositiveControl) {
    // The same forged lane with the seal is taken: the refusal above is the seal's doing.
    auto a = make(), b = make();
    int lane = fake_lane(*a, *b, F_SEAL_SHRINK, 1000);
    ASSERT_GE(lane, 0);
    forge_hello(*b, *a, lane, 1000);
    uint8_t tag = 0;
    EXPECT_GE(receive(*b, &tag), 0);
    EXPECT_EQ(0x5A, tag);
    close(lane);
}

// ---------------------------------------------------------------- through the engine
TEST(ShmPeersEngine, DisconnectedPeerLinkIsReleased) {
    const int maps0 = lane_maps();
    unit::Nic cn, sn;
    Vi* client = cn.vi();
    Vi* server = sn.vi();
    auto sad = unit::addr_of(sn.e());
    const uint8_t* svc = reinterpret_cast<const uint8_t*>("svc");
    for (int round = 0; round < 2; round++) {
        Listener* l = sn.e().listen(svc, 3);
        ASSERT_EQ(0, cn.e().connect_request(client, sad.data(), sad.size(), svc, 3));
        ASSERT_TRUE(unit::pump_until({&cn.e(), &sn.e()}, [&] { return l->matched.load(); }));
        ConnRequest req;
        ASSERT_TRUE(sn.e().unlisten(l, &req));
        ASSERT_EQ(0, sn.e().accept(req, server));
        ASSERT_TRUE(unit::pump_until({&cn.e(), &sn.e()}, [&] { return client->conn_result.load() != -1; }));
        ASSERT_EQ(NICFW_R_OK, client->conn_result.load());
        EXPECT_TRUE(unit::pump_until({&cn.e(), &sn.e()}, [&] { return sn.e().status()->peers == 1; }));
        EXPECT_GT(lane_maps(), maps0);
        // Both NICs stay open; once the VIs are idle nothing refers to the peers.
        ASSERT_EQ(0, cn.e().disconnect(client));
        ASSERT_TRUE(unit::pump_until({&cn.e(), &sn.e()}, [&] { return unit::state_of(server) == NICFW_VI_ERROR; }));
        ASSERT_EQ(0, sn.e().disconnect(server));
        EXPECT_TRUE(unit::pump_until({&cn.e(), &sn.e()},
                                     [&] {
                                         return cn.e().status()->peers == 0 && sn.e().status()->peers == 0 &&
                                                lane_maps() == maps0;
                                     },
                                     3000))
            << "peers " << cn.e().status()->peers << "/" << sn.e().status()->peers << ", lanes mapped "
            << lane_maps() - maps0;
        // (round 2: the same NICs link again)
    }
}

}  // namespace
