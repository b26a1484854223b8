/* launcher_child - a rank program with scripted behaviour, for launcher_test.sh.
 *
 *   park DIR                   record pid in DIR/pid.<rank>, then sleep forever
 *   park-noterm DIR            same, ignoring SIGTERM (launcher must SIGKILL)
 *   fail DIR RANK CODE [noterm] everyone parks; RANK exits CODE once all
 *                              SOFTVIA_SIZE pid files exist
 *   signal RANK SIGNO          RANK kills itself with SIGNO, the others park
 *   env DIR                    check the job environment; write
 *                              DIR/jobdir.<rank> = SOFTVIA_JOB_DIR
 *   echo                       print tagged-output test lines
 *   pin                        print "<rank> <cpu>" (or "<rank> many")
 *   args ARGS...               print each argument on its own line
 *
 * Under --hosts:
 *   hostcheck DIR              check the host environment: SOFTVIA_HOST = rank % hosts,
 *                              SOFTVIA_HOST_ADDR on interface SOFTVIA_HOST_IFACE, a
 *                              network namespace that is not the launcher's; a
 *                              SOFTVIA_DEVICE, if set, must read
 *                              "t:iface=<iface>,addr=<addr>,keep=%z" (the launcher
 *                              expands "t:iface=%i,addr=%a,keep=%z"); write
 *                              DIR/ns.<rank> = "<host> <namespace inode> <MTU>"
 *   udpmesh                    every rank exchanges UDP datagrams with every rank on
 *                              another host, over the hosts' addresses
 *   flow DOWN_MS UP_MS END_MS  rank 0 sends a numbered datagram to rank 1 every 10 ms
 *                              for END_MS after storing key "flow-start", rank 1 echoes;
 *                              rank 0 checks that echoes come before DOWN_MS, stop
 *                              between DOWN_MS and UP_MS and come back after UP_MS
 */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int rank, size;

static void die(const char *msg)
{
    fprintf(stderr, "launcher_child rank %d: %s\n", rank, msg);
    exit(1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Atomic, so the script never reads a half-written file. */
static void write_file(const char *dir, const char *name, const char *text)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, dst) != 0)
        die("cannot write result file");
}

static void record_pid(const char *dir)
{
    char name[32], text[32];
    snprintf(name, sizeof name, "pid.%d", rank);
    snprintf(text, sizeof text, "%ld\n", (long)getpid());
    write_file(dir, name, text);
}

static int count_pid_files(const char *dir)
{
    int n = 0;
    struct dirent *e;
    DIR *d = opendir(dir);
    if (d == NULL)
        die("opendir");
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "pid.", 4) == 0)
            n++;
    closedir(d);
    return n;
}

static void park(void)
{
    for (;;)
        pause();
}

static void check_env(const char *outdir)
{
    const char *dir = getenv("SOFTVIA_JOB_DIR");
    const char *id = getenv("SOFTVIA_JOB_ID");
    char pattern[64], path[PATH_MAX];
    struct stat st;
    regex_t re;

    if (dir == NULL || id == NULL || dir[0] != '/')
        die("SOFTVIA_JOB_DIR/SOFTVIA_JOB_ID missing or relative");
    const char *base = strrchr(dir, '/') + 1;
    if (strcmp(base, id) != 0)
        die("SOFTVIA_JOB_ID is not the basename of SOFTVIA_JOB_DIR");
    snprintf(pattern, sizeof pattern, "^softvia-job\\.%ld\\.[0-9a-f]+$", (long)getppid());
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        die("regcomp");
    if (regexec(&re, id, 0, NULL, 0) != 0)
        die("job id does not look like softvia-job.<launcher pid>.<hex>");
    regfree(&re);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 07777) != 0700)
        die("job directory missing or not mode 0700");
    snprintf(path, sizeof path, "%s/names", dir);
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        die("names/ missing");
    snprintf(path, sizeof path, "%s/kv", dir);
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        die("kv/ missing");

    char name[32], text[PATH_MAX + 2];
    snprintf(name, sizeof name, "jobdir.%d", rank);
    snprintf(text, sizeof text, "%s\n", dir);
    write_file(outdir, name, text);
}

static void print_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        die("sched_getaffinity");
    if (CPU_COUNT(&set) != 1) {
        printf("%d many\n", rank);
        return;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            printf("%d %d\n", rank, c);
}

static long env_long(const char *name)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || *v == '\0')
        die("a SOFTVIA_HOST* variable is missing");
    long x = strtol(v, &end, 10);
    if (*end != '\0')
        die("a SOFTVIA_HOST* variable is not a number");
    return x;
}

static unsigned long netns_inode(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        die("cannot stat a network namespace");
    return (unsigned long)st.st_ino;
}

static void check_host(const char *outdir)
{
    long host = env_long("SOFTVIA_HOST"), hosts = env_long("SOFTVIA_HOST_COUNT");
    const char *addr = getenv("SOFTVIA_HOST_ADDR"), *iface = getenv("SOFTVIA_HOST_IFACE");
    const char *ns = getenv("SOFTVIA_NETNS");
    char parent_ns[64], want_name[32], text[64], name[32];
    struct ifaddrs *ifs;
    int found = 0;

    if (hosts < 1 || host != rank % hosts)
        die("SOFTVIA_HOST is not rank % SOFTVIA_HOST_COUNT");
    if (addr == NULL || iface == NULL || ns == NULL)
        die("SOFTVIA_HOST_ADDR, SOFTVIA_HOST_IFACE or SOFTVIA_NETNS missing");
    snprintf(want_name, sizeof want_name, "svh%ld-%ld", (long)getppid(), host);
    if (strcmp(ns, want_name) != 0 || strcmp(iface, want_name) != 0)
        die("SOFTVIA_NETNS / SOFTVIA_HOST_IFACE is not svh<launcher pid>-<host>");
    if (getifaddrs(&ifs) != 0)
        die("getifaddrs");
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        char buf[INET_ADDRSTRLEN];
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, sizeof buf);
        if (strcmp(buf, addr) == 0 && strcmp(i->ifa_name, iface) == 0 && (i->ifa_flags & IFF_UP))
            found = 1;
        else if (strcmp(i->ifa_name, "lo") != 0)
            die("an interface other than lo and SOFTVIA_HOST_IFACE has an address");
    }
    freeifaddrs(ifs);
    if (!found)
        die("SOFTVIA_HOST_ADDR is not on SOFTVIA_HOST_IFACE, or it is down");
    if (strncmp(addr, "198.18.", 7) != 0 && strncmp(addr, "198.19.", 7) != 0)
        die("SOFTVIA_HOST_ADDR is not in 198.18.0.0/15");
    const char *dev = getenv("SOFTVIA_DEVICE");
    char want_dev[128];
    snprintf(want_dev, sizeof want_dev, "t:iface=%s,addr=%s,keep=%%z", iface, addr);
    if (dev != NULL && strcmp(dev, want_dev) != 0)
        die("%i / %a in SOFTVIA_DEVICE not expanded as expected");
    snprintf(parent_ns, sizeof parent_ns, "/proc/%ld/ns/net", (long)getppid());
    unsigned long mine = netns_inode("/proc/self/ns/net");
    if (mine == netns_inode(parent_ns))
        die("the rank runs in the launcher's network namespace");
    struct ifreq ifr = {0};
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
    if (sock < 0 || ioctl(sock, SIOCGIFMTU, &ifr) != 0)
        die("cannot read the interface's MTU");
    close(sock);
    snprintf(name, sizeof name, "ns.%d", rank);
    snprintf(text, sizeof text, "%ld %lu %d\n", host, mine, ifr.ifr_mtu);
    write_file(outdir, name, text);
}

/* A UDP socket on this host's address; its port goes to every rank. */
struct udp_peer {
    struct sockaddr_in sa;
    long host;
};

static int udp_open(struct udp_peer *all)
{
    struct udp_peer me = {.sa = {.sin_family = AF_INET}, .host = env_long("SOFTVIA_HOST")};
    socklen_t len = sizeof me.sa;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || inet_pton(AF_INET, getenv("SOFTVIA_HOST_ADDR"), &me.sa.sin_addr) != 1)
        die("socket or bad SOFTVIA_HOST_ADDR");
    if (bind(fd, (struct sockaddr *)&me.sa, sizeof me.sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&me.sa, &len) != 0)
        die("cannot bind to SOFTVIA_HOST_ADDR");
    if (sv_boot_allgather(&me, sizeof me, all, 20000) != 0)
        die("allgather of the UDP addresses failed");
    return fd;
}

struct ping {
    int32_t from, kind; /* kind 0: request, 1: reply */
    uint32_t seq;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Answers requests; returns a reply's sender (or -1) and its seq in *seq. */
static int udp_serve(int fd, const struct udp_peer *all, int wait_ms, uint32_t *seq)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct ping m;
    if (poll(&p, 1, wait_ms) <= 0 || recv(fd, &m, sizeof m, 0) != (ssize_t)sizeof m)
        return -1;
    if (m.from < 0 || m.from >= size)
        die("datagram from an unknown rank");
    if (m.kind == 1) {
        *seq = m.seq;
        return m.from;
    }
    struct ping r = {rank, 1, m.seq};
    sendto(fd, &r, sizeof r, 0, (const struct sockaddr *)&all[m.from].sa, sizeof all[m.from].sa);
    return -1;
}

static void udp_mesh(void)
{
    struct udp_peer *all = calloc((size_t)size, sizeof *all);
    char *answered = calloc((size_t)size, 1);
    char key[32];
    if (all == NULL || answered == NULL)
        die("out of memory");
    int fd = udp_open(all), missing = 0;
    for (int r = 0; r < size; r++)
        if (all[r].host != all[rank].host)
            missing++;
    if (missing == 0)
        die("no rank on another host");
    /* Ask every 100 ms until every remote rank answered; keep answering the others
     * until every rank is done. */
    for (int64_t next = 0, end = now_ms() + 20000; missing > 0;) {
        if (now_ms() >= end)
            die("some rank on another host never answered over UDP");
        if (now_ms() >= next) {
            for (int r = 0; r < size; r++) {
                struct ping m = {rank, 0, 0};
                if (all[r].host != all[rank].host && !answered[r])
                    sendto(fd, &m, sizeof m, 0, (struct sockaddr *)&all[r].sa, sizeof all[r].sa);
            }
            next = now_ms() + 100;
        }
        uint32_t seq;
        int from = udp_serve(fd, all, 10, &seq);
        if (from >= 0 && all[from].host == all[rank].host)
            die("a reply from a rank on my own host");
        if (from >= 0 && !answered[from]) {
            answered[from] = 1;
            missing--;
        }
    }
    snprintf(key, sizeof key, "udp-done.%d", rank);
    sv_boot_put(key, "1", 1);
    for (int r = 0; r < size; r++) {
        char v;
        snprintf(key, sizeof key, "udp-done.%d", r);
        while (sv_boot_get(key, &v, 1, NULL, 0) != 0) {
            uint32_t seq;
            udp_serve(fd, all, 10, &seq);
        }
    }
    printf("rank %d: every rank on another host answered\n", rank);
    free(all);
    free(answered);
}

/* The echo stream around a link outage; see the mode list at the top. */
static void flow(long down_ms, long up_ms, long end_ms)
{
    struct udp_peer all[2];
    enum { PERIOD_MS = 10, MAXSEQ = 100000 };
    static int64_t sent_at[MAXSEQ];
    static char echoed[MAXSEQ];
    char v;
    if (size != 2)
        die("flow needs 2 ranks");
    int fd = udp_open(all);
    if (all[0].host == all[1].host)
        die("flow needs the ranks on two hosts");
    if (rank == 1) {
        while (sv_boot_get("flow-done", &v, 1, NULL, 0) != 0) {
            uint32_t seq;
            udp_serve(fd, all, 10, &seq);
        }
        return;
    }
    sv_boot_put("flow-start", "1", 1);
    int64_t t0 = now_ms(), next = t0;
    uint32_t n = 0;
    while (now_ms() - t0 < end_ms + 500 && n < MAXSEQ) {
        if (now_ms() >= next && now_ms() - t0 < end_ms) {
            struct ping m = {0, 0, n};
            sent_at[n++] = now_ms() - t0;
            sendto(fd, &m, sizeof m, 0, (struct sockaddr *)&all[1].sa, sizeof all[1].sa);
            next += PERIOD_MS;
        }
        uint32_t seq;
        if (udp_serve(fd, all, 2, &seq) == 1 && seq < n)
            echoed[seq] = 1;
    }
    sv_boot_put("flow-done", "1", 1);
    /* Margins: the launcher sees the key within 10 ms and runs `ip` (a few ms, more
     * on a loaded machine); an echo may take a while when a rank is not scheduled. */
    int before = 0, before_ok = 0, during = 0, during_ok = 0, after = 0, after_ok = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (sent_at[s] < down_ms - 50)
            before++, before_ok += echoed[s];
        else if (sent_at[s] > down_ms + 300 && sent_at[s] < up_ms - 50)
            during++, during_ok += echoed[s];
        else if (sent_at[s] > up_ms + 300)
            after++, after_ok += echoed[s];
    }
    printf("flow: before the outage %d/%d echoed, during %d/%d, after %d/%d\n", before_ok, before,
           during_ok, during, after_ok, after);
    if (before == 0 || during == 0 || after == 0)
        die("a window of the flow is empty");
    if (before_ok * 10 < before * 8)
        die("fewer than 80% echoed before the outage");
    if (during_ok != 0)
        die("echoes came back while the link was down");
    if (after_ok * 10 < after * 8)
        die("fewer than 80% echoed after the link came back");
}

int main(int argc, char **argv)
{
    const char *r = getenv("SOFTVIA_RANK"), *s = getenv("SOFTVIA_SIZE");
    if (argc < 2 || r == NULL || s == NULL)
        die("usage: launcher_child MODE ... (under softvia-run)");
    rank = atoi(r);
    size = atoi(s);
    const char *mode = argv[1];

    if (strcmp(mode, "park") == 0 && argc == 3) {
        record_pid(argv[2]);
        park();
    } else if (strcmp(mode, "park-noterm") == 0 && argc == 3) {
        signal(SIGTERM, SIG_IGN);
        record_pid(argv[2]);
        park();
    } else if (strcmp(mode, "fail") == 0 && (argc == 5 || argc == 6)) {
        if (argc == 6)
            signal(SIGTERM, SIG_IGN);
        record_pid(argv[2]);
        if (rank != atoi(argv[3]))
            park();
        /* Fail only once every rank runs, so the test proves they get killed. */
        for (int i = 0; count_pid_files(argv[2]) < size; i++) {
            if (i > 2000)
                die("the other ranks never started");
            sleep_ms(10);
        }
        return atoi(argv[4]);
    } else if (strcmp(mode, "signal") == 0 && argc == 4) {
        if (rank != atoi(argv[2]))
            park();
        sleep_ms(100);
        raise(atoi(argv[3]));
        die("still alive after raise()");
    } else if (strcmp(mode, "env") == 0 && argc == 3) {
        if (rank < 0 || rank >= size)
            die("rank out of range");
        check_env(argv[2]);
    } else if (strcmp(mode, "echo") == 0) {
        /* Several writes per line, so the launcher has to join pieces. */
        printf("out %d ", rank);
        fflush(stdout);
        sleep_ms(20);
        printf("line1\nout %d line2\n", rank);
        fflush(stdout);
        fprintf(stderr, "err %d\n", rank);
        printf("partial %d", rank); /* no newline at exit */
    } else if (strcmp(mode, "pin") == 0) {
        print_cpu();
    } else if (strcmp(mode, "hostcheck") == 0 && argc == 3) {
        check_host(argv[2]);
    } else if (strcmp(mode, "udpmesh") == 0) {
        udp_mesh();
    } else if (strcmp(mode, "flow") == 0 && argc == 5) {
        flow(atol(argv[2]), atol(argv[3]), atol(argv[4]));
    } else if (strcmp(mode, "args") == 0) {
        for (int i = 2; i < argc; i++)
            printf("%s\n", argv[i]);
    } else {
        die("bad mode or arguments");
    }
    return 0;
}
