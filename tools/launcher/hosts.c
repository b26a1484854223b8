/* hosts.c - softvia-run --hosts (see hosts.h). The links are configured by running
 * iproute2's `ip` inside the right namespace; every failure is reported with the
 * command that failed. */
#define _GNU_SOURCE
#include "hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_FAILED 125 /* the launcher's "internal error" code */
#define MAX_IP_ARGS 16

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("softvia-run: --hosts: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Runs `ip ARGS...` (NULL-terminated) in the namespace ns_fd and waits for it.
 * Waits for that pid only, so the launcher's reaping of its ranks is not disturbed. */
static int run_ip(const struct hosts *h, int ns_fd, ...)
{
    const char *argv[MAX_IP_ARGS + 2] = {"ip"};
    char line[512];
    size_t used = 0;
    int argc = 1, st;
    va_list ap;

    va_start(ap, ns_fd);
    for (const char *a; argc <= MAX_IP_ARGS && (a = va_arg(ap, const char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    line[0] = '\0';
    for (int i = 0; i < argc && used < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s", i ? " " : "", argv[i]);

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        say("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != h->owner)
            _exit(EXIT_FAILED);
        sigprocmask(SIG_SETMASK, h->mask, NULL);
        if (setns(ns_fd, CLONE_NEWNET) != 0) {
            dprintf(STDERR_FILENO, "softvia-run: --hosts: setns: %s\n", strerror(errno));
            _exit(EXIT_FAILED);
        }
        execvp("ip", (char **)argv);
        /* root's PATH may lack the sbin directories */
        execv("/usr/sbin/ip", (char **)argv);
        execv("/sbin/ip", (char **)argv);
        dprintf(STDERR_FILENO, "softvia-run: --hosts: cannot run 'ip' (install iproute2): %s\n",
                strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            say("waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFEXITED(st))
        say("'%s' failed (exit %d)", line, WEXITSTATUS(st));
    else
        say("'%s' killed by signal %d", line, WTERMSIG(st));
    return -1;
}

/* A new, empty network namespace, held by the returned descriptor (or -1 with errno).
 * The launcher enters it only to take the reference, then goes back. */
static int new_netns(const struct hosts *h)
{
    if (unshare(CLONE_NEWNET) != 0)
        return -1;
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int e = errno;
    if (setns(h->root_fd, CLONE_NEWNET) != 0) {
        /* We would start ranks and write files from a namespace that is not ours. */
        say("cannot return to the launcher's own namespace: %s", strerror(errno));
        exit(EXIT_FAILED);
    }
    errno = e;
    return fd;
}

/* "/proc/<launcher>/fd/<fd>": how `ip ... netns` names a namespace we hold. */
static void ns_path(const struct hosts *h, int fd, char *out, size_t len)
{
    snprintf(out, len, "/proc/%ld/fd/%d", (long)h->owner, fd);
}

static int add_host(struct hosts *h, int i, const char *bridge)
{
    char port[HOSTS_NAME_LEN], path[64], mtu[16], cidr[24];
    snprintf(port, sizeof port, "svb%ld-%d", (long)h->owner, i);
    snprintf(mtu, sizeof mtu, "%d", h->mtu);
    snprintf(cidr, sizeof cidr, "%s/16", h->addr[i]);

    h->fd[i] = new_netns(h);
    if (h->fd[i] < 0) {
        say("cannot create host %d's namespace: %s", i, strerror(errno));
        return -1;
    }
    ns_path(h, h->fd[i], path, sizeof path);
    /* The pair is made in the bridge's namespace with its host end sent straight to
     * the host, so no interface ever appears in the root namespace. */
    if (run_ip(h, h->bridge_fd, "link", "add", port, "mtu", mtu, "type", "veth", "peer", "name",
               h->name[i], "mtu", mtu, "netns", path, NULL) != 0 ||
        run_ip(h, h->bridge_fd, "link", "set", "dev", port, "master", bridge, "up", NULL) != 0 ||
        run_ip(h, h->fd[i], "link", "set", "dev", "lo", "up", NULL) != 0 ||
        run_ip(h, h->fd[i], "addr", "add", cidr, "dev", h->name[i], NULL) != 0 ||
        run_ip(h, h->fd[i], "link", "set", "dev", h->name[i], "up", NULL) != 0)
        return -1;
    return 0;
}

int hosts_setup(struct hosts *h, int count, int mtu, pid_t owner, const sigset_t *mask)
{
    char bridge[HOSTS_NAME_LEN], mtus[16];

    memset(h, 0, sizeof *h);
    h->count = count;
    h->mtu = mtu;
    h->owner = owner;
    h->mask = mask;
    h->bridge_fd = -1;
    for (int i = 0; i < HOSTS_MAX; i++)
        h->fd[i] = -1;
    for (int i = 0; i < count; i++) {
        unsigned a = (unsigned)i + 1;
        snprintf(h->name[i], sizeof h->name[i], "svh%ld-%d", (long)owner, i);
        snprintf(h->addr[i], sizeof h->addr[i], "198.18.%u.%u", a >> 8, a & 255);
    }
    /* "svh" + a 7-digit pid (the largest pid_max) + "-" + 3 digits: always fits */
    if (strlen(h->name[count - 1]) >= IFNAMSIZ) {
        say("interface name '%s' too long", h->name[count - 1]);
        return EXIT_FAILED;
    }
    h->root_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (h->root_fd < 0) {
        say("cannot open /proc/self/ns/net: %s", strerror(errno));
        return EXIT_FAILED;
    }

    h->bridge_fd = new_netns(h);
    if (h->bridge_fd < 0) {
        int e = errno;
        if (e == EPERM) {
            say("needs root for --hosts (CAP_SYS_ADMIN and CAP_NET_ADMIN to create network "
                "namespaces)");
            hosts_release(h);
            return HOSTS_EXIT_NO_PRIVILEGE;
        }
        say("cannot create a network namespace: %s", strerror(e));
        hosts_release(h);
        return EXIT_FAILED;
    }
    snprintf(bridge, sizeof bridge, "svbr%ld", (long)owner);
    snprintf(mtus, sizeof mtus, "%d", mtu);
    if (run_ip(h, h->bridge_fd, "link", "add", bridge, "mtu", mtus, "type", "bridge", NULL) != 0 ||
        run_ip(h, h->bridge_fd, "link", "set", "dev", bridge, "up", NULL) != 0)
        goto fail;
    for (int i = 0; i < count; i++)
        if (add_host(h, i, bridge) != 0)
            goto fail;
    return 0;
fail:
    hosts_release(h);
    return EXIT_FAILED;
}

int hosts_enter(const struct hosts *h, int i)
{
    return setns(h->fd[i], CLONE_NEWNET);
}

/* template with %i -> iface and %a -> addr; other characters (and a lone %) kept. */
static char *expand_device(const char *tmpl, const char *iface, const char *addr)
{
    size_t cap = strlen(tmpl) * (HOSTS_NAME_LEN + 16) + 1, n = 0;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    for (const char *p = tmpl; *p != '\0'; p++) {
        const char *sub = NULL;
        if (p[0] == '%' && p[1] == 'i')
            sub = iface;
        else if (p[0] == '%' && p[1] == 'a')
            sub = addr;
        if (sub != NULL) {
            n += (size_t)snprintf(out + n, cap - n, "%s", sub);
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return out;
}

int hosts_set_env(const struct hosts *h, int i, const char *device_template)
{
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    if (setenv("SOFTVIA_HOST", num, 1) != 0 || setenv("SOFTVIA_HOST_ADDR", h->addr[i], 1) != 0 ||
        setenv("SOFTVIA_NETNS", h->name[i], 1) != 0 ||
        setenv("SOFTVIA_HOST_IFACE", h->name[i], 1) != 0)
        return -1;
    if (device_template == NULL)
        return 0;
    char *dev = expand_device(device_template, h->name[i], h->addr[i]);
    int rc = dev != NULL ? setenv("SOFTVIA_DEVICE", dev, 1) : -1;
    free(dev);
    return rc;
}

int hosts_set_link(const struct hosts *h, int i, int up)
{
    char port[HOSTS_NAME_LEN];
    snprintf(port, sizeof port, "svb%ld-%d", (long)h->owner, i);
    return run_ip(h, h->bridge_fd, "link", "set", "dev", port, up ? "up" : "down", NULL);
}

void hosts_release(struct hosts *h)
{
    for (int i = 0; i < HOSTS_MAX; i++) {
        if (h->fd[i] >= 0)
            close(h->fd[i]);
        h->fd[i] = -1;
    }
    if (h->bridge_fd >= 0)
        close(h->bridge_fd);
    if (h->root_fd >= 0)
        close(h->root_fd);
    h->bridge_fd = h->root_fd = -1;
}
