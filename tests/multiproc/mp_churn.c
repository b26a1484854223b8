/*
 * mp_churn: a long-running server whose clients come and go. Rank 0 serves; rank 1
 * plays N short-lived clients in a row, each a NIC of its own that connects, sends one
 * message, gets the echo and goes away: most close their NIC (VipCloseNic) and every
 * --fork-every'th is a forked process that exits without closing anything (its death is
 * seen through its process). The server must serve them all with flat resources: after
 * a warm-up its open fds, VmSize and VmRSS may not grow by more than a few links' worth
 * (docs/transports.md, "Peers come and go"). With --nofile N the server runs under that
 * fd limit, which a server that kept every peer's fds would soon exhaust. Every
 * --reject-every'th client is rejected: the next client, which has the same VI number,
 * request number and (reused) peer index at the server, must still be accepted.
 *
 *   softvia-run -n 2 mp_churn --clients N [--progress inline|thread] [--nofile N]
 *                             [--fork-every K] [--reject-every K]
 */
#include "mp_common.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

enum { MSG = 64 };
#define DISC "churn"

/* Bounds on the server's growth after the warm-up (a few links in flight, allocator
 * noise); keeping every peer costs 1 fd and well over 100 MB of address space each. */
#define MAX_FD_GROWTH 8
#define MAX_VMSIZE_GROWTH_KB (64 * 1024)
#define MAX_RSS_GROWTH_KB (32 * 1024)

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) FATAL("opendir /proc/self/fd");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) FATAL("fopen /proc/self/status");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    if (v < 0) FATAL("no %s in /proc/self/status", field);
    return v;
}

typedef struct {
    int fds;
    long vmsize_kb, rss_kb;
} usage;

static int fork_every = 10, reject_every = 7;

static int rejected(int i) { return reject_every > 0 && i % reject_every == reject_every - 2; }
static int forked(int i) { return fork_every > 0 && i % fork_every == fork_every - 1; }

static usage sample(void) {
    usage u = {open_fds(), status_kb("VmSize"), status_kb("VmRSS")};
    return u;
}

/* Takes client i's connection: one message in, the echo out, then disconnects. */
static void serve_one(th_env *e, VIP_CONN_HANDLE conn, int i, VIP_DESCRIPTOR *rd, VIP_DESCRIPTOR *sd, char *rb,
                      char *sb) {
    th_phase("serve a client");
    VIP_VI_HANDLE vi = th_vi(e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_set1(rd, e->mh, rb, MSG);
    CHECK(VipPostRecv(vi, rd, e->mh));
    CHECK(VipConnectAccept(conn, vi));
    th_recv_done_must(vi, rd, "client's message");
    if (rd->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("client %d: receive status 0x%x", i, rd->CS.Status);
    if (th_verify(rb, MSG, (uint32_t)i) >= 0) FATAL("client %d: wrong message", i);
    memcpy(sb, rb, MSG);
    th_set1(sd, e->mh, sb, MSG);
    CHECK(VipPostSend(vi, sd, e->mh));
    th_send_done_must(vi, sd, "echo");
    if (sd->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("client %d: send status 0x%x", i, sd->CS.Status);
    CHECK(VipDisconnect(vi));
    th_drain(vi, 1000);
    CHECK(VipDestroyVi(vi));
}

static void serve(th_env *e, int clients) {
    th_addr la;
    VIP_EXT_LISTEN_HANDLE ls;
    CHECK(VipExtListen(e->nic, th_mkaddr(&la, &e->na, DISC), &ls));
    /* the first client connects only once this listens (else VIP_NO_MATCH: a slow
     * server, as under ASan, lost that race once) */
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("listening barrier");
    VIP_DESCRIPTOR *rd = th_desc(e, 1), *sd = th_desc(e, 1);
    char *rb = th_alloc(e, MSG), *sb = th_alloc(e, MSG);
    const int warm = clients / 10 < 200 ? clients / 10 : 200;
    usage base = {0, 0, 0}, peak = {0, 0, 0};
    uint64_t t0 = th_now_ms();
    for (int i = 0; i < clients; i++) {
        th_phase("wait for a client");
        VIP_CONN_HANDLE conn;
        VIP_RETURN r;
        uint64_t end = th_now_ms() + 20000;
        while ((r = VipExtListenDone(ls, NULL, NULL, &conn)) == VIP_NOT_DONE && th_now_ms() < end) sched_yield();
        if (r != VIP_SUCCESS) FATAL("client %d never came: VipExtListenDone -> %s", i, th_rs(r));
        if (rejected(i)) {
            CHECK(VipConnectReject(conn));
        } else {
            serve_one(e, conn, i, rd, sd, rb, sb);
        }
        if (i + 1 == warm) {
            base = peak = sample();
        } else if (i + 1 > warm && (i % 16 == 0 || i + 1 == clients)) {
            usage u = sample();
            if (u.fds > peak.fds) peak.fds = u.fds;
            if (u.vmsize_kb > peak.vmsize_kb) peak.vmsize_kb = u.vmsize_kb;
            if (u.rss_kb > peak.rss_kb) peak.rss_kb = u.rss_kb;
        }
    }
    uint64_t ms = th_now_ms() - t0;
    usage last = sample();
    printf("mp_churn: %d clients in %llu ms (%.1f us each); server after %d clients: %d fds, VmSize %ld kB, "
           "VmRSS %ld kB; peak after them: %d fds, VmSize %ld kB, VmRSS %ld kB; at the end: %d fds, VmSize %ld kB, "
           "VmRSS %ld kB\n",
           clients, (unsigned long long)ms, 1000.0 * (double)ms / clients, warm, base.fds, base.vmsize_kb,
           base.rss_kb, peak.fds, peak.vmsize_kb, peak.rss_kb, last.fds, last.vmsize_kb, last.rss_kb);
    EXPECT(peak.fds - base.fds <= MAX_FD_GROWTH, "open fds grew from %d to %d", base.fds, peak.fds);
    EXPECT(peak.vmsize_kb - base.vmsize_kb <= MAX_VMSIZE_GROWTH_KB, "VmSize grew from %ld to %ld kB",
           base.vmsize_kb, peak.vmsize_kb);
    EXPECT(peak.rss_kb - base.rss_kb <= MAX_RSS_GROWTH_KB, "VmRSS grew from %ld to %ld kB", base.rss_kb,
           peak.rss_kb);
    CHECK(VipExtUnlisten(ls));
}

/* One short-lived client: its own NIC, one message each way, then it goes away. */
static void client(const uint8_t *srv, VIP_UINT16 alen, const char *progress, int i, int close_nic) {
    th_env e;
    mp_open(&e, progress, 4096);
    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_DESCRIPTOR *rd = th_desc(&e, 1), *sd = th_desc(&e, 1);
    char *rb = th_alloc(&e, MSG), *sb = th_alloc(&e, MSG);
    th_set1(rd, e.mh, rb, MSG);
    CHECK(VipPostRecv(vi, rd, e.mh));
    th_addr ra;
    mp_mkaddr(&ra, srv, alen, DISC);
    VIP_RETURN r = VipConnectRequest(vi, NULL, &ra.a, 10000, NULL);
    if (rejected(i)) {
        if (r != VIP_REJECT) FATAL("client %d: VipConnectRequest -> %s, want VIP_REJECT", i, th_rs(r));
        if (close_nic) th_close_env(&e);
        return;
    }
    if (r != VIP_SUCCESS) FATAL("client %d: VipConnectRequest -> %s", i, th_rs(r));
    th_fill(sb, MSG, (uint32_t)i);
    th_set1(sd, e.mh, sb, MSG);
    CHECK(VipPostSend(vi, sd, e.mh));
    th_send_done_must(vi, sd, "client send");
    th_recv_done_must(vi, rd, "echo");
    if ((rd->CS.Status & VIP_STATUS_ERROR_MASK) || th_verify(rb, MSG, (uint32_t)i) >= 0)
        FATAL("client %d: bad echo (status 0x%x)", i, rd->CS.Status);
    if (close_nic) th_close_env(&e);
    /* else: the process ends with the NIC open (forked clients) */
}

int main(int argc, char **argv) {
    const char *progress = "inline";
    int clients = 2000;
    long nofile = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--progress")) progress = argv[i + 1];
        else if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nofile")) nofile = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--fork-every")) fork_every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reject-every")) reject_every = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "mp_churn: unknown option %s\n", argv[i]);
            return T_FAIL;
        }
    }
    if (clients < 20) clients = 20;
    /* about 1 ms per client on a loaded 2-core host, plus margin */
    mp_init("mp_churn", 2, 60 + (unsigned)(clients / 200));
    if (mp_rank == 0 && nofile > 0) {
        struct rlimit rl = {(rlim_t)nofile, (rlim_t)nofile};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) FATAL("setrlimit(RLIMIT_NOFILE, %ld): %s", nofile, strerror(errno));
    }
    th_env e;
    mp_open(&e, progress, mp_rank == 0 ? 4096 : 0);
    mp_addrs ad;
    mp_exchange(&e, &ad);
    if (mp_rank == 0) {
        serve(&e, clients);
    } else {
        /* The rank's own NIC only carried the address exchange: clients get their own.
         * Closed first, so that no firmware thread runs when a client is forked. */
        th_close_env(&e);
        if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("listening barrier");  /* the server listens */
        for (int i = 0; i < clients; i++) {
            th_phase("client");
            if (forked(i)) {
                fflush(NULL);
                pid_t pid = fork();
                if (pid < 0) FATAL("fork: %s", strerror(errno));
                if (pid == 0) {
                    client(ad.addr[0], ad.alen, progress, i, 0);
                    _exit(th_failures ? T_FAIL : T_PASS);
                }
                int st = 0;
                if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    FATAL("forked client %d failed (status 0x%x)", i, st);
            } else {
                client(ad.addr[0], ad.alen, progress, i, 1);
            }
        }
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("final barrier");
    if (mp_rank == 0) th_close_env(&e);
    return th_result();
}
