/*
 * mp_perm: shm connections between processes of different users fail at once, with a
 * documented error and one line on stderr that says why (docs/transports.md, "shm").
 * Run as root: a forked child drops to user nobody (65534).
 *
 *   1. nobody connects to root's NIC: it may not open root's memfd, so its
 *      VipConnectRequest returns VIP_ERROR_RESOURCE at once and it prints a line naming
 *      root's process and the permission problem; root's server never sees a request.
 *   2. root connects to nobody's NIC: root may open nobody's memfd, but nobody may not
 *      open root's lane, so nobody's NIC refuses the link (a notice, and a line); root's
 *      VipConnectRequest returns VIP_ERROR_RESOURCE within a second, not a timeout.
 *
 * Skips (77) when not root or when the child cannot change its user.
 */
#include "../conformance/helpers.h"

#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define NOBODY 65534
#define CONNECT_TIMEOUT_MS 5000
#define PROMPT_MS 1500 /* well under the connect timeout: a refusal, not a timeout */

/* Runs fn in a child process as user nobody; the child's stderr goes to *err_fd. */
static pid_t spawn_nobody(int (*fn)(int in, int out), int *to_child, int *from_child, int *err_fd) {
    int down[2], up[2], err[2];
    if (pipe(down) || pipe(up) || pipe(err)) FATAL("pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) FATAL("fork: %s", strerror(errno));
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        close(err[0]);
        dup2(err[1], 2);
        if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) != 0) {
            fprintf(stderr, "cannot become user %d: %s\n", NOBODY, strerror(errno));
            _exit(T_SKIP);
        }
        prctl(PR_SET_DUMPABLE, 1); /* like any process of that user, not a set-uid one */
        _exit(fn(down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    close(err[1]);
    *to_child = down[1];
    *from_child = up[0];
    *err_fd = err[0];
    return pid;
}

static int read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static void slurp(int fd, char *buf, size_t cap) {
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, buf + got, cap - 1 - got)) > 0) got += (size_t)r;
    buf[got] = 0;
}

static int wait_child(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- case 1: nobody's client, root's server */
static int nobody_client(int in, int out) {
    uint8_t srv[64];
    uint16_t alen;
    if (read_full(in, &alen, sizeof alen) || alen > sizeof srv || read_full(in, srv, alen)) return 10;
    th_env e;
    th_open_env(&e, NULL, 4096);
    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_addr ra;
    memset(&ra, 0, sizeof ra);
    ra.a.HostAddressLen = alen;
    memcpy(ra.a.HostAddress, srv, alen);
    ra.a.DiscriminatorLen = 4;
    memcpy(ra.a.HostAddress + alen, "perm", 4);
    uint64_t t0 = th_now_ms();
    VIP_RETURN r = VipConnectRequest(vi, NULL, &ra.a, CONNECT_TIMEOUT_MS, NULL);
    uint32_t ms = (uint32_t)(th_now_ms() - t0);
    if (write(out, &r, sizeof r) != sizeof r || write(out, &ms, sizeof ms) != sizeof ms) return 11;
    th_close_env(&e);
    return 0;
}

static void case_nobody_to_root(void) {
    th_phase("nobody connects to root");
    int to, from, err;
    pid_t pid = spawn_nobody(nobody_client, &to, &from, &err);
    th_env e;
    th_open_env(&e, NULL, 4096);
    th_addr la;
    VIP_EXT_LISTEN_HANDLE ls;
    CHECK(VipExtListen(e.nic, th_mkaddr(&la, &e.na, "perm"), &ls));
    uint16_t alen = (uint16_t)e.na.NicAddressLen;
    if (write(to, &alen, sizeof alen) != sizeof alen || write(to, e.na.LocalNicAddress, alen) != alen)
        FATAL("write to child");
    VIP_RETURN r = VIP_NOT_DONE;
    uint32_t ms = 0;
    /* Serve (inline: step the NIC) until the child reports; a request must not come. */
    for (;;) {
        VIP_CONN_HANDLE conn;
        VIP_RETURN l = VipExtListenDone(ls, NULL, NULL, &conn);
        EXPECT(l == VIP_NOT_DONE, "root's server got a request from nobody: %s", th_rs(l));
        if (l == VIP_SUCCESS) CHECK(VipConnectReject(conn));
        struct timeval tv = {0, 1000};
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(from, &fs);
        if (select(from + 1, &fs, NULL, NULL, &tv) > 0) break;
    }
    if (read_full(from, &r, sizeof r) || read_full(from, &ms, sizeof ms)) {
        int st = wait_child(pid);
        if (st == T_SKIP) {
            printf("mp_perm: SKIP: the child cannot become user %d\n", NOBODY);
            exit(T_SKIP);
        }
        FATAL("the child failed (status %d)", st);
    }
    char msg[4096];
    slurp(err, msg, sizeof msg);
    EXPECT(wait_child(pid) == 0, "the child failed");
    printf("mp_perm: nobody -> root: %s after %u ms; its stderr: %s", th_rs(r), ms, msg);
    EXPECT(r == VIP_ERROR_RESOURCE, "nobody's VipConnectRequest -> %s, want VIP_ERROR_RESOURCE", th_rs(r));
    EXPECT(ms < PROMPT_MS, "the refusal took %u ms", ms);
    char pid_s[32];
    snprintf(pid_s, sizeof pid_s, "process %d", (int)getpid());
    EXPECT(strstr(msg, "permission denied") && strstr(msg, "same user") && strstr(msg, pid_s),
           "no line on nobody's stderr naming %s and the permission problem", pid_s);
    EXPECT(strchr(msg, '\n') == strrchr(msg, '\n'), "more than one line on nobody's stderr");
    CHECK(VipExtUnlisten(ls));
    th_close_env(&e);
    close(to);
    close(from);
    close(err);
}

/* ---- case 2: root's client, nobody's server */
static int nobody_server(int in, int out) {
    th_env e;
    th_open_env(&e, NULL, 4096);
    th_addr la;
    VIP_EXT_LISTEN_HANDLE ls;
    CHECK(VipExtListen(e.nic, th_mkaddr(&la, &e.na, "perm"), &ls));
    uint16_t alen = (uint16_t)e.na.NicAddressLen;
    if (write(out, &alen, sizeof alen) != sizeof alen || write(out, e.na.LocalNicAddress, alen) != alen) return 10;
    /* Serve until root says it is done; a request must not come. */
    int got = 0;
    for (;;) {
        VIP_CONN_HANDLE conn;
        if (VipExtListenDone(ls, NULL, NULL, &conn) == VIP_SUCCESS) {
            got++;
            VipConnectReject(conn);
        }
        struct timeval tv = {0, 1000};
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(in, &fs);
        if (select(in + 1, &fs, NULL, NULL, &tv) > 0) break;
    }
    VipExtUnlisten(ls);
    th_close_env(&e);
    return got ? 12 : 0;
}

static void case_root_to_nobody(void) {
    th_phase("root connects to nobody");
    int to, from, err;
    pid_t pid = spawn_nobody(nobody_server, &to, &from, &err);
    uint8_t srv[64];
    uint16_t alen;
    if (read_full(from, &alen, sizeof alen) || alen > sizeof srv || read_full(from, srv, alen)) {
        if (wait_child(pid) == T_SKIP) {
            printf("mp_perm: SKIP: the child cannot become user %d\n", NOBODY);
            exit(T_SKIP);
        }
        FATAL("no address from the child");
    }
    th_env e;
    th_open_env(&e, NULL, 4096);
    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_addr ra;
    memset(&ra, 0, sizeof ra);
    ra.a.HostAddressLen = alen;
    memcpy(ra.a.HostAddress, srv, alen);
    ra.a.DiscriminatorLen = 4;
    memcpy(ra.a.HostAddress + alen, "perm", 4);
    /* Our own stderr goes to a pipe for the call, to check what we said. */
    int mine[2];
    if (pipe(mine)) FATAL("pipe");
    fflush(stderr);
    int saved = dup(2);
    dup2(mine[1], 2);
    uint64_t t0 = th_now_ms();
    VIP_RETURN r = VipConnectRequest(vi, NULL, &ra.a, CONNECT_TIMEOUT_MS, NULL);
    uint32_t ms = (uint32_t)(th_now_ms() - t0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(mine[1]);
    char ours[4096], theirs[4096];
    slurp(mine[0], ours, sizeof ours);
    close(mine[0]);
    close(to); /* the server may stop */
    slurp(err, theirs, sizeof theirs);
    int st = wait_child(pid);
    printf("mp_perm: root -> nobody: %s after %u ms; root's stderr: %s; nobody's stderr: %s", th_rs(r), ms, ours,
           theirs);
    EXPECT(st == 0, "the nobody server failed (status %d: 12 = it saw a request)", st);
    EXPECT(r == VIP_ERROR_RESOURCE, "root's VipConnectRequest -> %s, want VIP_ERROR_RESOURCE", th_rs(r));
    EXPECT(ms < PROMPT_MS, "the refusal took %u ms", ms);
    EXPECT(strstr(theirs, "permission denied") && strstr(theirs, "same user"),
           "no line on nobody's stderr about the permission problem");
    EXPECT(strstr(ours, "refused") && strstr(ours, "permission denied"),
           "no line on root's stderr saying nobody's NIC refused the link for lack of permission");
    th_close_env(&e);
    close(from);
    close(err);
}

int main(void) {
    th_init("mp_perm", 60);
    if (geteuid() != 0) return th_skip("needs root, to run a process as user nobody");
    case_nobody_to_root();
    case_root_to_nobody();
    return th_result();
}
