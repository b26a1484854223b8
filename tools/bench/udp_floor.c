/*
 * udp_floor: the fastest a UDP ping-pong can be on this machine with each way of
 * sending and receiving that the udp wire could use, without softvia in between: what
 * udp_compare.sh's figures should be read against.
 *
 *   udp_floor MODE server|client LOCAL_IP PEER_IP [ITERS]
 *
 * MODE: plain   sendmsg + recv polled with MSG_DONTWAIT (what sockperf --nonblocked does)
 *       ring    io_uring sendmsg + multishot recvmsg into a provided-buffer ring, the
 *               ring set up as the udp wire sets it up (COOP_TASKRUN, TASKRUN_FLAG:
 *               enter the kernel only when the ring's flag says work waits)
 *       mixed   io_uring sendmsg + recvmmsg polled with MSG_DONTWAIT (rx=syscall, the
 *               udp wire's default)
 *       mmsg    sendmsg + recvmmsg: with mixed, what sending through io_uring costs
 *       peer    sendmsg on a second socket connected to the peer (another port) +
 *               recvmmsg on the bound one: the udp wire's send sockets (txsock=peer);
 *               with mmsg, what a connected socket's kept route saves
 *       conn    sendmsg + recvmmsg on one socket, bound and connected to the peer: with
 *               peer, what a connected receiving socket saves (the kernel finds it by
 *               the datagram's four addresses before routing, "early demux", and keeps
 *               its input route; the udp wire receives on an unconnected socket)
 * The server binds port 7001, the client 7002; the client prints the median one-way
 * latency (half the round trip) of 14-byte messages, sockperf's smallest.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

enum { NBUF = 64, BUFLEN = 2048, MSGLEN = 14, BURST = 32, GROUP = 1 };
enum mode { PLAIN, RING, MIXED, MMSG, PEER, CONN };

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int err) {
    fprintf(stderr, "udp_floor: %s: %s\n", what, strerror(err));
    exit(2);
}

struct ctx {
    enum mode mode;
    int fd, tx_fd; /* tx_fd: fd, or (peer) the connected send socket */
    struct io_uring ring;
    struct io_uring_buf_ring *br;
    char (*bufs)[BUFLEN];
    struct msghdr rx_msg, tx_msg;
    struct iovec tx_iov;
    char tx_buf[MSGLEN];
    struct mmsghdr mm[BURST];
    struct iovec mm_iov[BURST];
    struct sockaddr_in mm_from[BURST];
};

static void arm_recv(struct ctx *c) {
    struct io_uring_sqe *s = io_uring_get_sqe(&c->ring);
    if (!s) die("io_uring_get_sqe", EBUSY);
    io_uring_prep_recvmsg_multishot(s, c->fd, &c->rx_msg, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = GROUP;
    io_uring_sqe_set_data64(s, 1);
    io_uring_submit(&c->ring);
}

static void send_one(struct ctx *c) {
    if (c->mode == PLAIN || c->mode == MMSG || c->mode == PEER || c->mode == CONN) {
        if (sendmsg(c->tx_fd, &c->tx_msg, MSG_DONTWAIT) < 0) die("sendmsg", errno);
        return;
    }
    struct io_uring_sqe *s = io_uring_get_sqe(&c->ring);
    if (!s) die("io_uring_get_sqe", EBUSY);
    io_uring_prep_sendmsg(s, c->fd, &c->tx_msg, MSG_DONTWAIT);
    io_uring_sqe_set_data64(s, 2);
    io_uring_submit(&c->ring);
}

/* Reaps completions; true once a datagram arrived. Send completions are just counted off. */
static int reap(struct ctx *c) {
    int got = 0;
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&c->ring, head, cqe) {
        n++;
        if (cqe->user_data != 1) continue;
        if (cqe->res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
            unsigned short bid = (unsigned short)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            io_uring_buf_ring_add(c->br, c->bufs[bid], BUFLEN, bid, io_uring_buf_ring_mask(NBUF), 0);
            io_uring_buf_ring_advance(c->br, 1);
            got = 1;
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) arm_recv(c);
    }
    io_uring_cq_advance(&c->ring, n);
    return got;
}

static void recv_one(struct ctx *c) {
    char buf[BUFLEN];
    switch (c->mode) {
        case PLAIN:
            while (recv(c->fd, buf, sizeof buf, MSG_DONTWAIT) < 0)
                if (errno != EAGAIN && errno != EINTR) die("recv", errno);
            return;
        case MIXED:
        case MMSG:
        case PEER:
        case CONN:
            if (c->mode == MIXED) reap(c); /* the sends' completions */
            for (;;) {
                for (int k = 0; k < BURST; k++) {
                    c->mm_iov[k] = (struct iovec){c->bufs[k], BUFLEN};
                    memset(&c->mm[k].msg_hdr, 0, sizeof c->mm[k].msg_hdr);
                    c->mm[k].msg_hdr.msg_name = &c->mm_from[k];
                    c->mm[k].msg_hdr.msg_namelen = sizeof c->mm_from[k];
                    c->mm[k].msg_hdr.msg_iov = &c->mm_iov[k];
                    c->mm[k].msg_hdr.msg_iovlen = 1;
                }
                if (recvmmsg(c->fd, c->mm, BURST, MSG_DONTWAIT, NULL) > 0) return;
                if (errno != EAGAIN && errno != EINTR) die("recvmmsg", errno);
            }
        case RING:
            for (;;) {
                if (IO_URING_READ_ONCE(*c->ring.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&c->ring);
                if (reap(c)) return;
            }
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: udp_floor plain|ring|mixed|mmsg|peer|conn server|client LOCAL_IP PEER_IP [ITERS]\n");
        return 2;
    }
    struct ctx *c = calloc(1, sizeof *c);
    c->bufs = calloc(NBUF, BUFLEN);
    if (!c || !c->bufs) die("calloc", ENOMEM);
    if (strcmp(argv[1], "plain") == 0) c->mode = PLAIN;
    else if (strcmp(argv[1], "ring") == 0) c->mode = RING;
    else if (strcmp(argv[1], "mixed") == 0) c->mode = MIXED;
    else if (strcmp(argv[1], "mmsg") == 0) c->mode = MMSG;
    else if (strcmp(argv[1], "peer") == 0) c->mode = PEER;
    else if (strcmp(argv[1], "conn") == 0) c->mode = CONN;
    else die("mode must be plain, ring, mixed, mmsg, peer or conn", EINVAL);
    const int server = strcmp(argv[2], "server") == 0;
    const int iters = argc > 5 ? atoi(argv[5]) : 100000;
    if (iters < 1) die("ITERS", EINVAL);

    struct sockaddr_in me = {.sin_family = AF_INET}, peer = {.sin_family = AF_INET};
    me.sin_port = htons(server ? 7001 : 7002);
    peer.sin_port = htons(server ? 7002 : 7001);
    if (inet_pton(AF_INET, argv[3], &me.sin_addr) != 1 || inet_pton(AF_INET, argv[4], &peer.sin_addr) != 1)
        die("LOCAL_IP/PEER_IP", EINVAL);
    c->fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (c->fd < 0) die("socket", errno);
    if (bind(c->fd, (struct sockaddr *)&me, sizeof me) < 0) die("bind", errno);

    c->tx_fd = c->fd;
    c->tx_iov = (struct iovec){c->tx_buf, MSGLEN};
    c->tx_msg.msg_name = &peer;
    c->tx_msg.msg_namelen = sizeof peer;
    if (c->mode == CONN) {
        if (connect(c->fd, (struct sockaddr *)&peer, sizeof peer) < 0) die("connect", errno);
        c->tx_msg.msg_name = NULL;
        c->tx_msg.msg_namelen = 0;
    } else if (c->mode == PEER) {
        struct sockaddr_in any_port = me;
        any_port.sin_port = 0;
        c->tx_fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (c->tx_fd < 0) die("socket", errno);
        if (bind(c->tx_fd, (struct sockaddr *)&any_port, sizeof any_port) < 0) die("bind (send socket)", errno);
        if (connect(c->tx_fd, (struct sockaddr *)&peer, sizeof peer) < 0) die("connect", errno);
        c->tx_msg.msg_name = NULL; /* the kept route: no address per send */
        c->tx_msg.msg_namelen = 0;
    }
    c->tx_msg.msg_iov = &c->tx_iov;
    c->tx_msg.msg_iovlen = 1;
    c->rx_msg.msg_namelen = sizeof(struct sockaddr_in);
    if (c->mode != PLAIN && c->mode != MMSG) {
        struct io_uring_params p = {.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG};
        int rc = io_uring_queue_init_params(256, &c->ring, &p);
        if (rc < 0) die("io_uring_queue_init_params", -rc);
    }
    if (c->mode == RING) {
        static char ring_mem[NBUF * sizeof(struct io_uring_buf)] __attribute__((aligned(4096)));
        struct io_uring_buf_reg reg = {.ring_addr = (uintptr_t)ring_mem, .ring_entries = NBUF, .bgid = GROUP};
        int rc = io_uring_register_buf_ring(&c->ring, &reg, 0);
        if (rc < 0) die("io_uring_register_buf_ring", -rc);
        c->br = (struct io_uring_buf_ring *)ring_mem;
        io_uring_buf_ring_init(c->br);
        for (int i = 0; i < NBUF; i++)
            io_uring_buf_ring_add(c->br, c->bufs[i], BUFLEN, (unsigned short)i, io_uring_buf_ring_mask(NBUF), i);
        io_uring_buf_ring_advance(c->br, NBUF);
        arm_recv(c);
    }

    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters);
    if (!t) die("malloc", ENOMEM);
    const int warm = 1000;
    for (int i = -warm; i < iters; i++) {
        uint64_t t0 = now_ns();
        if (!server) send_one(c);
        recv_one(c);
        if (server) send_one(c);
        else if (i >= 0) t[i] = now_ns() - t0;
    }
    if (!server) {
        qsort(t, (size_t)iters, sizeof *t, cmp_u64);
        printf("udp_floor %s: one-way median %.3f us\n", argv[1], (double)t[iters / 2] / 2000.0);
    }
    return 0;
}
