/*
 * ns_hosts_file: VipNSInit takes regular files only, of bounded size and line length.
 * A missing file, a directory, a FIFO, /dev/zero, a file over VIP_EXT_HOSTS_FILE_MAX_BYTES,
 * a line over VIP_EXT_HOSTS_LINE_MAX and malformed lines each give
 * VIP_ERROR_NAMESERVICE promptly, with one line on stderr naming the file (and the line),
 * and leave the service stopped; files exactly at the bounds load.
 *
 * Each VipNSInit runs in a child process with a watchdog (and, outside the sanitizers,
 * a memory limit), so a provider that blocks on a FIFO or reads /dev/zero forever fails this
 * test instead of hanging it or eating the machine's memory.
 */
#include "helpers.h" /* first: it sets _GNU_SOURCE */

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Sanitizers reserve far more address space than the limit allows: no limit under them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

static VIP_NIC_HANDLE g_nic;
static char g_dir[] = "/tmp/softvia-nsf-XXXXXX";

enum { CHILD_HUNG = -1, CHILD_STILL_UP = 100 };

/* VipNSInit(path) in a child; its VIP_RETURN (CHILD_HUNG if it did not return within
 * 5 s or died; CHILD_STILL_UP if it failed but left the service running). What the
 * child wrote to stderr goes to err (NUL-terminated). */
static int init_in_child(const char *path, char *err, size_t errsz) {
    char errpath[300];
    snprintf(errpath, sizeof errpath, "%s/stderr", g_dir);
    int efd = open(errpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (efd < 0) FATAL("open %s: %s", errpath, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) FATAL("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(efd, 2);
        signal(SIGALRM, SIG_DFL); /* not the test's watchdog: die of it */
        alarm(5 * th_slow());
#ifndef UNDER_SANITIZER
        struct rlimit rl = {1ul << 30, 1ul << 30}; /* a reader that never stops dies here */
        setrlimit(RLIMIT_DATA, &rl);
#endif
        VIP_RETURN r = VipNSInit(g_nic, (VIP_PVOID)path);
        if (r != VIP_SUCCESS) {
            th_addr a;
            if (VipNSGetHostByName(g_nic, "node-a", &a.a, 0) != VIP_INVALID_STATE) _exit(CHILD_STILL_UP);
        }
        _exit((int)r);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    ssize_t n = pread(efd, err, errsz - 1, 0);
    err[n > 0 ? n : 0] = 0;
    close(efd);
    if (!WIFEXITED(st)) {
        fprintf(stderr, "  child for '%s' did not return (signal %d)\n", path, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        return CHILD_HUNG;
    }
    return WEXITSTATUS(st);
}

static void write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "w");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) FATAL("writing %s", path);
}

/* A refused file: VIP_ERROR_NAMESERVICE, and stderr names the path and each of the
 * words given (NULL-terminated). */
static void refused(const char *what, const char *path, const char *w1, const char *w2) {
    th_phase(what);
    char err[4096];
    int rc = init_in_child(path, err, sizeof err);
    EXPECT(rc == VIP_ERROR_NAMESERVICE, "%s: VipNSInit -> %s", what,
           rc == CHILD_HUNG ? "did not return" : rc == CHILD_STILL_UP ? "failed but the service is up" : th_rs(rc));
    EXPECT(strstr(err, path) != NULL, "%s: stderr does not name '%s': '%s'", what, path, err);
    if (w1) EXPECT(strstr(err, w1) != NULL, "%s: stderr does not say '%s': '%s'", what, w1, err);
    if (w2) EXPECT(strstr(err, w2) != NULL, "%s: stderr does not say '%s': '%s'", what, w2, err);
    EXPECT(strchr(err, '\n') == err + strlen(err) - 1, "%s: want one line on stderr: '%s'", what, err);
}

static void loads(const char *what, const char *path) {
    th_phase(what);
    char err[4096];
    int rc = init_in_child(path, err, sizeof err);
    EXPECT(rc == VIP_SUCCESS, "%s: VipNSInit -> %s (stderr '%s')", what, rc < 0 ? "did not return" : th_rs(rc), err);
}

int main(void) {
    th_init("ns_hosts_file", 0);
    unsetenv("SOFTVIA_JOB_DIR"); /* only the hosts file: nothing from a launcher */
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
    unsetenv("SOFTVIA_HOSTS");
    th_env e;
    th_open_env(&e, NULL, 0);
    g_nic = e.nic;
    if (!mkdtemp(g_dir)) FATAL("mkdtemp: %s", strerror(errno));
    char p[300];

    snprintf(p, sizeof p, "%s/no-such-file", g_dir);
    refused("missing file", p, "No such file", NULL);

    refused("a directory", g_dir, "directory", "not a regular file");

    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
    if (mkfifo(fifo, 0600) != 0) FATAL("mkfifo: %s", strerror(errno));
    refused("a FIFO", fifo, "FIFO", "not a regular file");

    refused("/dev/zero", "/dev/zero", "character device", "not a regular file");

    /* Size bound: comment lines up to exactly the bound load, one byte more is refused. */
    const size_t max = VIP_EXT_HOSTS_FILE_MAX_BYTES;
    char *big = malloc(max + 1);
    if (!big) FATAL("out of memory");
    const char *host = "node-a 0102030405\n";
    memcpy(big, host, strlen(host));
    for (size_t i = strlen(host); i < max; i += 64) {
        size_t n = max - i < 64 ? max - i : 64;
        memset(big + i, '#', n);
        big[i + n - 1] = '\n';
    }
    char atmax[300], over[300];
    snprintf(atmax, sizeof atmax, "%s/at-max", g_dir);
    snprintf(over, sizeof over, "%s/over-max", g_dir);
    write_file(atmax, big, max);
    big[max] = '\n';
    write_file(over, big, max + 1);
    loads("a file of exactly VIP_EXT_HOSTS_FILE_MAX_BYTES", atmax);
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%zu bytes", max);
    refused("a file one byte over the size bound", over, "larger than", bytes);
    free(big);

    /* Line bound: a line of exactly VIP_EXT_HOSTS_LINE_MAX bytes loads; one more is refused
     * and the message names line 2. */
    const size_t lmax = VIP_EXT_HOSTS_LINE_MAX;
    char *text = malloc(lmax + 64);
    if (!text) FATAL("out of memory");
    size_t hl = strlen(host);
    memcpy(text, host, hl);
    memset(text + hl, '#', lmax);
    text[hl + lmax] = '\n';
    char lineok[300], longline[300];
    snprintf(lineok, sizeof lineok, "%s/line-at-max", g_dir);
    snprintf(longline, sizeof longline, "%s/line-over-max", g_dir);
    write_file(lineok, text, hl + lmax + 1);
    loads("a line of exactly VIP_EXT_HOSTS_LINE_MAX bytes", lineok);
    memset(text + hl, 'n', lmax + 1); /* a name line, one byte over */
    text[hl + lmax + 1] = '\n';
    write_file(longline, text, hl + lmax + 2);
    refused("a line one byte over the line bound", longline, "line 2", "longer than");
    /* Also without a final newline, and with no newline at all in the file. */
    write_file(longline, text + hl, lmax + 1);
    refused("a file that is one overlong line without a newline", longline, "line 1", "longer than");
    free(text);

    /* Malformed lines name their line. */
    struct {
        const char *what, *text, *line;
    } bad[] = {
        {"a name without an address", "# hosts\nnode-a 0102\nnode-b\n", "line 3"},
        {"three fields", "node-a 0102 extra\n", "line 1"},
        {"a signed hex digit", "\n\nnode-a -f-f\n", "line 3"},
        {"an odd number of hex digits", "node-a 012\n", "line 1"},
        {"an address over the limit", NULL, "line 1"},
        {"a name with '/'", "a/b 0102\n", "line 1"},
        {"a NUL byte", "node-a 01\0" "02\n", "line 1"},
    };
    char overaddr[16 + 2 * (VIP_EXT_MAX_HOST_ADDRESS_LEN + 1) + 2];
    strcpy(overaddr, "node-a ");
    for (int i = 0; i < VIP_EXT_MAX_HOST_ADDRESS_LEN + 1; i++) strcat(overaddr, "ab");
    strcat(overaddr, "\n");
    bad[4].text = overaddr;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/bad-%zu", g_dir, i);
        size_t len = i == 6 ? 13 : strlen(bad[i].text); /* the NUL case: 9 + 1 + 3 bytes */
        write_file(path, bad[i].text, len);
        refused(bad[i].what, path, bad[i].line, NULL);
    }

    th_phase("a good file still loads in this process, and a bad one stops the service");
    {
        char good[300];
        snprintf(good, sizeof good, "%s/good", g_dir);
        write_file(good, "  node-a\t0102030405  \r\n", 23);
        EXPECT_RC(VipNSInit(e.nic, good), VIP_SUCCESS);
        th_addr a;
        EXPECT_RC(VipNSGetHostByName(e.nic, "node-a", &a.a, 0), VIP_SUCCESS);
        EXPECT(a.a.HostAddressLen == 5 && memcmp(a.a.HostAddress, "\x01\x02\x03\x04\x05", 5) == 0,
               "node-a resolved to %u bytes", a.a.HostAddressLen);
        EXPECT_RC(VipNSInit(e.nic, g_dir), VIP_ERROR_NAMESERVICE);
        EXPECT_RC(VipNSGetHostByName(e.nic, "node-a", &a.a, 0), VIP_INVALID_STATE);
        unlink(good);
    }

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", g_dir);
    th_close_env(&e);
    return th_result();
}
