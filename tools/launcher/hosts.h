/* hosts.h - softvia-run --hosts: network namespaces as hosts on one machine.
 *
 * Each host is an anonymous network namespace (never bind-mounted under /run/netns)
 * joined by a veth pair to a Linux bridge that sits in one more anonymous namespace.
 * The launcher keeps one file descriptor per namespace; the ranks and helper commands
 * live in them. When the launcher exits, however it exits (even SIGKILL), its
 * descriptors close and its children die (PR_SET_PDEATHSIG), so the kernel destroys
 * the namespaces and the interfaces in them: nothing needs cleaning at the next start,
 * and the root namespace is never touched.
 *
 * Names (unique per launcher, so they never clash in logs or in `ip` output):
 *   host i's namespace and its interface  svh<launcher pid>-<i>
 *   the bridge                            svbr<launcher pid>
 *   host i's port on the bridge           svb<launcher pid>-<i>
 * Addresses: host i has 198.18.0.0 + i + 1 in 198.18.0.0/16 (198.18.0.1, 198.18.0.2, ...).
 * Every launcher's bridge is private, so two launchers running at once never share a
 * link and may both use the same addresses.
 */
#ifndef SOFTVIA_HOSTS_H
#define SOFTVIA_HOSTS_H

#include <signal.h>
#include <sys/types.h>

#define HOSTS_MAX 256
#define HOSTS_NAME_LEN 32 /* room to format; names are checked against IFNAMSIZ */

struct hosts {
    int count;
    int mtu;
    pid_t owner;           /* the launcher */
    const sigset_t *mask;  /* the signal mask to give to helper programs */
    int root_fd;           /* the namespace we started in */
    int bridge_fd;
    int fd[HOSTS_MAX];     /* host i's namespace; -1 when not created */
    char name[HOSTS_MAX][HOSTS_NAME_LEN];
    char addr[HOSTS_MAX][24];
};

/* Exit code for "cannot run here" (no root): the test-suite skip convention. */
#define HOSTS_EXIT_NO_PRIVILEGE 77

/* Creates the bridge and count hosts. 0 on success; otherwise the launcher exit code
 * (HOSTS_EXIT_NO_PRIVILEGE without the privilege, else a failure) after saying why on
 * stderr, with whatever was created already released. */
int hosts_setup(struct hosts *h, int count, int mtu, pid_t owner, const sigset_t *mask);

/* In a child before exec: moves the process into host i's namespace. -1 with errno. */
int hosts_enter(const struct hosts *h, int i);

/* Sets SOFTVIA_HOST, SOFTVIA_HOST_ADDR, SOFTVIA_NETNS, SOFTVIA_HOST_IFACE for host i,
 * and expands %i (interface) and %a (address) in SOFTVIA_DEVICE from device_template
 * (NULL: leave SOFTVIA_DEVICE unset). 0, or -1 when out of memory. */
int hosts_set_env(const struct hosts *h, int i, const char *device_template);

/* Takes host i's bridge port down or up (the cable pulled or put back): the host keeps
 * its interface, address and routes, but its interface loses carrier and every frame
 * to or from it is dropped. 0, or -1 after saying why on stderr. */
int hosts_set_link(const struct hosts *h, int i, int up);

/* Closes the namespace descriptors; the kernel removes the namespaces and their
 * interfaces once no process is left in them. */
void hosts_release(struct hosts *h);

#endif /* SOFTVIA_HOSTS_H */
