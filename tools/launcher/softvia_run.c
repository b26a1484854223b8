/* softvia-run - start N copies of a program as one softvia job.
 *
 * usage: softvia-run -n N [--timeout SECONDS] [--pin] [--tag-output]
 *                    [--hosts H [--mtu BYTES] [--at MS:HOST:down|up] [--exec-at MS:HOST:CMD]
 *                     [--at-from KEY]] [--] program [args...]
 *
 * Creates the job directory described in softvia_boot.h (first removing those of
 * this user that a killed launcher left), starts the ranks, waits for them, and
 * removes the directory. The first failing rank decides
 * the exit status and brings the others down (SIGTERM, then SIGKILL after
 * 2 s). All waiting happens in one poll() loop over a signalfd (SIGCHLD,
 * SIGINT, SIGTERM, SIGHUP) and, with --tag-output, the ranks' output pipes.
 *
 * --hosts H puts rank r in network namespace r % H, one "host" each (hosts.h); the
 * loop then also runs the scheduled --at / --exec-at actions at their times.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

#define MAX_RANKS 4096
#define GRACE_NS (2 * (int64_t)1000000000) /* SIGTERM -> SIGKILL */
#define PEND_CAP 4096 /* a longer tagged line is split */
#define MAX_TIMEOUT 1e8 /* seconds; keeps the ns arithmetic in range */

/* Exit codes of the launcher itself (the timeout(1) conventions). */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_INTERNAL 125
#define EXIT_NOEXEC 126
#define EXIT_NOTFOUND 127

#define MAX_EVENTS 64
#define MAX_AT_MS 86400000 /* a day */
#define KEY_POLL_NS (10 * (int64_t)1000000) /* how often --at-from looks for its key */

static const char usage_line[] =
    "usage: softvia-run -n N [--timeout SECONDS] [--pin] [--tag-output] [--hosts H [--mtu BYTES]\n"
    "                   [--at MS:HOST:down|up]... [--exec-at MS:HOST:CMD]... [--at-from KEY]]\n"
    "                   [--] program [args...]\n";

/* A scheduled --at / --exec-at action. */
struct event {
    int64_t ms; /* after the clock's origin */
    int host;
    enum { LINK_DOWN, LINK_UP, EXEC } what;
    const char *cmd; /* EXEC: a /bin/sh command line */
    const char *spec; /* as given, for messages */
    int done;
};

/* One rank's stdout or stderr pipe (--tag-output only). */
struct stream {
    int fd;      /* read end; -1 when closed */
    int out;     /* our fd the tagged lines go to */
    char *pend;  /* start of a line that has no '\n' yet */
    size_t plen;
};

struct child {
    pid_t pid; /* 0 when not running */
    struct stream s[2];
};

enum phase { RUNNING, STOPPING, KILLING };

static struct {
    /* options */
    int n;
    double timeout; /* 0 = none */
    int pin;
    int tag;
    char **argv;
    int nhosts; /* 0: no --hosts */
    int mtu;
    struct event events[MAX_EVENTS];
    int nevents;
    const char *at_from; /* kv key that starts the event clock; NULL: the ranks' start */

    struct hosts hosts;
    char *device_template; /* SOFTVIA_DEVICE as given, before %i/%a expansion */
    int64_t clock_origin; /* -1 until the event clock runs */
    int64_t next_key_poll;
    pid_t helpers[MAX_EVENTS]; /* running --exec-at commands; 0 = free slot */
    const char *helper_spec[MAX_EVENTS];

    pid_t self;
    struct child *kids;
    int live;
    char job_dir[PATH_MAX];
    int have_job_dir;
    int lock_fd; /* <job_dir>/.launcher, flocked while we live */
    int *cpus; /* CPUs we may run on, for --pin */
    int ncpus;

    /* state to restore in the children before exec */
    sigset_t oldmask;
    struct sigaction old_pipe, old_chld;
    struct rlimit old_nofile;
    int nofile_changed;

    int sfd; /* signalfd */
    enum phase phase;
    int64_t kill_at;
    int decided, exit_code, exit_sig;
} L = {.sfd = -1, .lock_fd = -1, .mtu = 1500, .clock_origin = -1};

/* Output buffer reused for tagged writes. */
static char *obuf;
static size_t olen, ocap;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((format(printf, 1, 2))) static void complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("softvia-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

__attribute__((format(printf, 1, 2))) static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("softvia-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fputs(usage_line, stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v;
    if (s == NULL || *s < '0' || *s > '9') /* no sign, no spaces */
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* MS:HOST:REST -> the event; REST is the action (down, up) or the command. */
static void parse_event(const char *opt, const char *arg, int exec)
{
    char buf[32];
    const char *c1 = strchr(arg, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    struct event *e = &L.events[L.nevents];

    if (L.nevents == MAX_EVENTS)
        usage_error("at most %d --at/--exec-at actions", MAX_EVENTS);
    if (c2 == NULL || (size_t)(c1 - arg) >= sizeof buf || (size_t)(c2 - c1 - 1) >= sizeof buf)
        usage_error("%s needs MS:HOST:%s, not '%s'", opt, exec ? "CMD" : "down|up", arg);
    int ms, host;
    snprintf(buf, sizeof buf, "%.*s", (int)(c1 - arg), arg);
    if (parse_int(buf, &ms) != 0 || ms > MAX_AT_MS)
        usage_error("%s '%s': MS must be an integer from 0 to %d", opt, arg, MAX_AT_MS);
    snprintf(buf, sizeof buf, "%.*s", (int)(c2 - c1 - 1), c1 + 1);
    if (parse_int(buf, &host) != 0 || host >= HOSTS_MAX)
        usage_error("%s '%s': HOST must be a host index", opt, arg);
    e->ms = ms;
    e->host = host;
    e->spec = arg;
    if (exec) {
        e->what = EXEC;
        e->cmd = c2 + 1;
        if (*e->cmd == '\0')
            usage_error("%s '%s': empty command", opt, arg);
    } else if (strcmp(c2 + 1, "down") == 0) {
        e->what = LINK_DOWN;
    } else if (strcmp(c2 + 1, "up") == 0) {
        e->what = LINK_UP;
    } else {
        usage_error("%s '%s': the action must be down or up", opt, arg);
    }
    L.nevents++;
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"timeout", required_argument, NULL, 't'},
        {"pin", no_argument, NULL, 'p'},
        {"tag-output", no_argument, NULL, 'T'},
        {"hosts", required_argument, NULL, 'H'},
        {"mtu", required_argument, NULL, 'M'},
        {"at", required_argument, NULL, 'A'},
        {"exec-at", required_argument, NULL, 'E'},
        {"at-from", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, have_n = 0, have_mtu = 0;

    opterr = 0;
    /* '+': stop at the program name so its own options are left alone.
     * ':': report a missing option argument as ':'. */
    while ((c = getopt_long(argc, argv, "+:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, &L.n) != 0 || L.n < 1 || L.n > MAX_RANKS)
                usage_error("-n must be an integer from 1 to %d, not '%s'", MAX_RANKS, optarg);
            have_n = 1;
            break;
        case 't': {
            char *end;
            errno = 0;
            L.timeout = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !isfinite(L.timeout) ||
                L.timeout <= 0 || L.timeout > MAX_TIMEOUT)
                usage_error("--timeout needs a positive number of seconds, not '%s'", optarg);
            break;
        }
        case 'p':
            L.pin = 1;
            break;
        case 'T':
            L.tag = 1;
            break;
        case 'H':
            if (parse_int(optarg, &L.nhosts) != 0 || L.nhosts < 1 || L.nhosts > HOSTS_MAX)
                usage_error("--hosts must be an integer from 1 to %d, not '%s'", HOSTS_MAX, optarg);
            break;
        case 'M':
            if (parse_int(optarg, &L.mtu) != 0 || L.mtu < 68 || L.mtu > 65535)
                usage_error("--mtu must be an integer from 68 to 65535, not '%s'", optarg);
            have_mtu = 1;
            break;
        case 'A':
        case 'E':
            parse_event(c == 'A' ? "--at" : "--exec-at", optarg, c == 'E');
            break;
        case 'F':
            if (optarg[0] == '\0' || optarg[0] == '.' || strchr(optarg, '/') != NULL)
                usage_error("--at-from needs a key name, not '%s'", optarg);
            L.at_from = optarg;
            break;
        case 'h':
            fputs(usage_line, stdout);
            fputs("  -n N            number of ranks (1..4096)\n"
                  "  --timeout S     kill the job after S seconds (exit 124)\n"
                  "  --pin           pin rank i to the (i mod ncpus)-th allowed CPU\n"
                  "  --tag-output    prefix every output line with \"[rank] \"\n"
                  "  --hosts H       run the ranks on H hosts (1..256): network namespaces joined\n"
                  "                  by a bridge; rank r runs on host r % H (needs root; exit 77\n"
                  "                  without). Host i is namespace svh<pid>-<i> (anonymous, not in\n"
                  "                  /run/netns) with interface svh<pid>-<i> and address\n"
                  "                  198.18.0.<i+1>/16 (host 255: 198.18.1.0). Each rank gets\n"
                  "                  SOFTVIA_HOST, SOFTVIA_HOST_ADDR, SOFTVIA_NETNS, SOFTVIA_HOST_IFACE;\n"
                  "                  %i and %a in SOFTVIA_DEVICE become its interface and address.\n"
                  "                  Everything is removed when the launcher exits, even by SIGKILL.\n"
                  "  --mtu BYTES     MTU of the hosts' links (default 1500)\n"
                  "  --at MS:HOST:down|up\n"
                  "                  MS ms after the ranks start, pull HOST's cable (its bridge\n"
                  "                  port goes down: no carrier, every frame lost; the host keeps\n"
                  "                  its address and routes) or put it back\n"
                  "  --exec-at MS:HOST:CMD\n"
                  "                  MS ms after the ranks start, run /bin/sh -c CMD in HOST's\n"
                  "                  namespace (with SOFTVIA_HOST* set); a failing CMD fails the\n"
                  "                  job, one still running when the job ends is killed\n"
                  "  --at-from KEY   count the MS of --at/--exec-at from the moment a rank\n"
                  "                  stores KEY (sv_boot_put), not from the ranks' start\n"
                  "\n"
                  "The job directory is ${SOFTVIA_JOB_ROOT:-/dev/shm}/softvia-job.<pid>.<hex>,\n"
                  "removed when the launcher exits. If the launcher is killed (SIGKILL), the\n"
                  "ranks die with it (not processes they started themselves) and the next\n"
                  "softvia-run removes the directory: it removes this user's job directories\n"
                  "whose launcher is gone (never another user's).\n",
                  stdout);
            exit(0);
        case ':':
            usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            if (optopt != 0)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!have_n)
        usage_error("-n N is required");
    if (optind >= argc)
        usage_error("no program given");
    if (L.nhosts == 0 && (have_mtu || L.nevents > 0 || L.at_from != NULL))
        usage_error("--mtu, --at, --exec-at and --at-from need --hosts");
    for (int i = 0; i < L.nevents; i++)
        if (L.events[i].host >= L.nhosts)
            usage_error("'%s': there are only %d hosts", L.events[i].spec, L.nhosts);
    if (L.at_from != NULL && L.nevents == 0)
        usage_error("--at-from without --at or --exec-at");
    L.argv = argv + optind;
}

/* A closed stdio fd would be reused by our pipes and confuse the children. */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            if (open("/dev/null", O_RDWR) < 0)
                exit(EXIT_INTERNAL);
        }
    }
}

/* The CPUs in our affinity mask, so --pin also works inside a cpuset. */
static void load_cpus(void)
{
    for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        size_t sz = CPU_ALLOC_SIZE(ncpu);
        if (set == NULL)
            break;
        CPU_ZERO_S(sz, set);
        if (sched_getaffinity(0, sz, set) == 0) {
            L.cpus = malloc(sizeof(int) * (size_t)CPU_COUNT_S(sz, set));
            for (int c = 0; L.cpus != NULL && c < ncpu; c++)
                if (CPU_ISSET_S(c, sz, set))
                    L.cpus[L.ncpus++] = c;
            CPU_FREE(set);
            break;
        }
        CPU_FREE(set);
        if (errno != EINVAL) /* EINVAL: mask too small for this kernel */
            break;
    }
    if (L.ncpus == 0) {
        complain("cannot read the CPU affinity mask; --pin ignored");
        L.pin = 0;
    }
}

static void pin_self(int rank)
{
    int cpu = L.cpus[rank % L.ncpus];
    cpu_set_t *set = CPU_ALLOC(cpu + 1);
    size_t sz = CPU_ALLOC_SIZE(cpu + 1);
    if (set == NULL)
        return;
    CPU_ZERO_S(sz, set);
    CPU_SET_S(cpu, sz, set);
    if (sched_setaffinity(0, sz, set) != 0)
        complain("rank %d: cannot pin to CPU %d: %s", rank, cpu, strerror(errno));
    CPU_FREE(set);
}

/* Two pipes per rank can exceed the usual soft limit of 1024 fds. */
static void raise_fd_limit(void)
{
    rlim_t need = (rlim_t)L.n * 2 + 16;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return;
    L.old_nofile = rl;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        complain("--tag-output with %d ranks needs %llu open files, the limit is %llu", L.n,
              (unsigned long long)need, (unsigned long long)rl.rlim_max);
        exit(EXIT_INTERNAL);
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        L.nofile_changed = 1;
}

/* Signals go through a signalfd so the poll loop sees them in order with
 * everything else. A signal ignored on entry (nohup, background job) stays
 * ignored: blocked signals would be queued even when ignored. */
static void setup_signals(void)
{
    static const int fwd[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old;
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++) {
        if (sigaction(fwd[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaddset(&set, fwd[i]);
    }
    sigprocmask(SIG_BLOCK, &set, &L.oldmask);
    L.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (L.sfd < 0) {
        complain("signalfd: %s", strerror(errno));
        exit(EXIT_INTERNAL);
    }

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    /* An inherited SIG_IGN for SIGCHLD would auto-reap and hide exit codes. */
    sa.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &sa, &L.old_chld);
    /* A closed stdout must not kill us while ranks are still running. */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, &L.old_pipe);
}

/* ---- job directory --------------------------------------------------------------- */

static uint64_t random64(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) == (ssize_t)sizeof r)
        return r;
    /* Uniqueness is also enforced by mkdir below; this is only a fallback. */
    return (uint64_t)now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
}

static int mkdir_0700(const char *path)
{
    /* chmod: the umask may have taken bits from 0700 that the ranks need. */
    if (mkdir(path, 0700) != 0)
        return -1;
    return chmod(path, 0700);
}

/* ---- leftovers of launchers that died ---------------------------------------------
 * A launcher holds an exclusive flock on <job dir>/.launcher for as long as it lives;
 * the kernel drops it when the process dies, however it dies. The file is locked
 * before it is given that name, so a lockable .launcher means a dead launcher. */

#define LOCK_NAME ".launcher"
#define NOLOCK_AGE_S 60 /* a directory without .launcher older than this may be stale */

/* "softvia-job.<pid>.<16 hex digits>", the names make_job_dir gives; *pid: the pid. */
static int job_dir_name(const char *name, long *pid)
{
    static const char prefix[] = "softvia-job.";
    const char *p = name + sizeof prefix - 1;
    long v = 0;
    int nd = 0;
    if (strncmp(name, prefix, sizeof prefix - 1) != 0)
        return 0;
    for (; *p >= '0' && *p <= '9' && nd < 10; p++, nd++)
        v = v * 10 + (*p - '0');
    if (nd == 0 || *p++ != '.')
        return 0;
    for (nd = 0; p[nd] != '\0'; nd++)
        if (!((p[nd] >= '0' && p[nd] <= '9') || (p[nd] >= 'a' && p[nd] <= 'f')))
            return 0;
    if (nd != 16)
        return 0;
    *pid = v;
    return 1;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw);

/* Removes the job directories under root (a directory fd; root_path its name) that
 * this user owns and whose launcher is gone. Another user's are never touched. */
static void remove_stale_job_dirs(const char *root_path)
{
    int dfd = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *e;
    if (d == NULL) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char rel[NAME_MAX + sizeof "/" LOCK_NAME], path[PATH_MAX];
        struct stat st;
        long pid;
        int lfd, gone;
        if (!job_dir_name(e->d_name, &pid) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        snprintf(rel, sizeof rel, "%s/" LOCK_NAME, e->d_name);
        lfd = openat(dfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (lfd >= 0) {
            gone = flock(lfd, LOCK_EX | LOCK_NB) == 0; /* held until removed */
        } else {
            /* No lock: a launcher killed between its mkdir and its lock (a moment's
             * window), or an older softvia-run. Gone when its pid is, and not new. */
            gone = errno == ENOENT && time(NULL) - st.st_mtime > NOLOCK_AGE_S &&
                   kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        }
        if (gone && snprintf(path, sizeof path, "%s/%s", strcmp(root_path, "/") == 0 ? "" : root_path,
                             e->d_name) < (int)sizeof path)
            nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (lfd >= 0)
            close(lfd);
    }
    closedir(d);
}

/* <job dir>/.launcher, locked, for as long as we live (O_CLOEXEC: the ranks do not
 * hold it). Made under a temporary name and renamed once locked. */
static int lock_job_dir(void)
{
    char tmp[sizeof L.job_dir + 16], final[sizeof L.job_dir + 16];
    char line[64];
    int n;
    snprintf(tmp, sizeof tmp, "%s/" LOCK_NAME ".tmp", L.job_dir);
    snprintf(final, sizeof final, "%s/" LOCK_NAME, L.job_dir);
    L.lock_fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (L.lock_fd < 0 || flock(L.lock_fd, LOCK_EX) != 0)
        return -1;
    n = snprintf(line, sizeof line, "softvia-run pid %ld\n", (long)L.self);
    if (write(L.lock_fd, line, (size_t)n) != n || rename(tmp, final) != 0)
        return -1;
    return 0;
}

static int make_job_dir(void)
{
    const char *root = getenv("SOFTVIA_JOB_ROOT");
    char sub[sizeof L.job_dir + 8]; /* job_dir is kept 16 bytes short of PATH_MAX */
    char *abs;

    if (root == NULL || root[0] == '\0')
        root = "/dev/shm";
    abs = realpath(root, NULL); /* the ranks need an absolute path */
    if (abs == NULL) {
        complain("job root '%s': %s (set SOFTVIA_JOB_ROOT to a writable directory)", root,
              strerror(errno));
        return -1;
    }
    remove_stale_job_dirs(abs);
    for (int tries = 0;; tries++) {
        int n = snprintf(L.job_dir, sizeof L.job_dir, "%s/softvia-job.%ld.%016llx",
                         strcmp(abs, "/") == 0 ? "" : abs, (long)L.self,
                         (unsigned long long)random64());
        if (n < 0 || (size_t)n >= sizeof L.job_dir - 16) {
            complain("job root '%s': path too long", abs);
            free(abs);
            return -1;
        }
        if (mkdir_0700(L.job_dir) == 0)
            break;
        if (errno != EEXIST || tries >= 100) {
            complain("cannot create job directory '%s': %s", L.job_dir, strerror(errno));
            free(abs);
            return -1;
        }
    }
    free(abs);
    L.have_job_dir = 1;
    if (lock_job_dir() != 0) {
        complain("cannot create '%s/" LOCK_NAME "': %s", L.job_dir, strerror(errno));
        return -1;
    }
    snprintf(sub, sizeof sub, "%s/names", L.job_dir);
    if (mkdir_0700(sub) != 0)
        goto fail;
    snprintf(sub, sizeof sub, "%s/kv", L.job_dir);
    if (mkdir_0700(sub) != 0)
        goto fail;
    return 0;
fail:
    complain("cannot create '%s': %s", sub, strerror(errno));
    return -1;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path); /* best effort: keep going */
    return 0;
}

static void remove_job_dir(void)
{
    if (!L.have_job_dir)
        return;
    /* Depth first, and never follow a symlink a rank may have planted. */
    nftw(L.job_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    L.have_job_dir = 0;
    if (L.lock_fd >= 0) /* after the removal: nobody else may take it for stale first */
        close(L.lock_fd);
    L.lock_fd = -1;
}

/* ---- tagged output ----------------------------------------------------------------- */

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) { /* inherited non-blocking stdout */
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                poll(&pfd, 1, -1);
                continue;
            }
            return; /* reader gone: drop the output, keep the job going */
        }
        p += n;
        len -= (size_t)n;
    }
}

static void out_add(const char *p, size_t len)
{
    if (len == 0) /* p may be NULL (no pending text); memcpy must not see it */
        return;
    if (olen + len > ocap) {
        size_t cap = ocap ? ocap : 65536;
        while (cap < olen + len)
            cap *= 2;
        char *nb = realloc(obuf, cap);
        if (nb == NULL)
            return; /* out of memory: lose some output rather than the job */
        obuf = nb;
        ocap = cap;
    }
    memcpy(obuf + olen, p, len);
    olen += len;
}

/* Emits "[rank] " + pending part + line. */
static void out_line(struct stream *s, int rank, const char *p, size_t len)
{
    char prefix[24];
    int n = snprintf(prefix, sizeof prefix, "[%d] ", rank);
    out_add(prefix, (size_t)n);
    out_add(s->pend, s->plen);
    out_add(p, len);
    s->plen = 0;
}

/* Only whole lines are printed, so lines of different ranks never mix. */
static void tag_chunk(struct stream *s, int rank, const char *data, size_t n)
{
    size_t start = 0;
    olen = 0;
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n') {
            out_line(s, rank, data + start, i + 1 - start);
            start = i + 1;
        }
    }
    while (start < n) {
        if (s->pend == NULL && (s->pend = malloc(PEND_CAP)) == NULL)
            break;
        size_t take = n - start;
        if (take > PEND_CAP - s->plen)
            take = PEND_CAP - s->plen;
        memcpy(s->pend + s->plen, data + start, take);
        s->plen += take;
        start += take;
        if (s->plen == PEND_CAP) /* overlong line: print it in pieces */
            out_line(s, rank, "\n", 1);
    }
    write_all(s->out, obuf, olen);
}

static void close_stream(struct stream *s, int rank)
{
    if (s->plen > 0) { /* last line without '\n' */
        olen = 0;
        out_line(s, rank, "\n", 1);
        write_all(s->out, obuf, olen);
    }
    free(s->pend);
    s->pend = NULL;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

static void pump(struct stream *s, int rank)
{
    static char buf[65536];
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n > 0)
        tag_chunk(s, rank, buf, (size_t)n);
    else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        close_stream(s, rank);
}

/* ---- children ---------------------------------------------------------------------- */

static _Noreturn void exec_child(int rank, int pipes[2][2])
{
    int e;
    /* Die with the launcher even if it is SIGKILLed; the getppid() check
     * covers a launcher that died before the prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != L.self)
        _exit(EXIT_INTERNAL);
    if (L.pin)
        pin_self(rank);
    if (L.nhosts > 0 && hosts_enter(&L.hosts, rank % L.nhosts) != 0) {
        dprintf(STDERR_FILENO, "softvia-run: rank %d: cannot enter host %d's namespace: %s\n", rank,
                rank % L.nhosts, strerror(errno));
        _exit(EXIT_INTERNAL);
    }
    if (L.tag && (dup2(pipes[0][1], STDOUT_FILENO) < 0 || dup2(pipes[1][1], STDERR_FILENO) < 0))
        _exit(EXIT_INTERNAL);
    /* Give the program the environment it would have had without us. */
    sigaction(SIGPIPE, &L.old_pipe, NULL);
    sigaction(SIGCHLD, &L.old_chld, NULL);
    if (L.nofile_changed)
        setrlimit(RLIMIT_NOFILE, &L.old_nofile);
    sigprocmask(SIG_SETMASK, &L.oldmask, NULL);

    execvp(L.argv[0], L.argv);
    e = errno;
    dprintf(STDERR_FILENO, "softvia-run: rank %d: cannot execute '%s': %s\n", rank, L.argv[0],
            strerror(e));
    _exit(e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
}

static int spawn(int rank)
{
    struct child *c = &L.kids[rank];
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    char rs[16];
    pid_t pid;

    /* O_CLOEXEC: other ranks must not inherit this rank's pipes, or EOF
     * would never come while they live. */
    if (L.tag && (pipe2(pipes[0], O_CLOEXEC) != 0 || pipe2(pipes[1], O_CLOEXEC) != 0)) {
        complain("pipe: %s", strerror(errno));
        goto fail;
    }
    snprintf(rs, sizeof rs, "%d", rank);
    setenv("SOFTVIA_RANK", rs, 1); /* inherited through fork */
    if (L.nhosts > 0 && hosts_set_env(&L.hosts, rank % L.nhosts, L.device_template) != 0) {
        complain("out of memory");
        goto fail;
    }
    fflush(NULL);                  /* or the child would repeat buffered output */
    pid = fork();
    if (pid < 0) {
        complain("fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0)
        exec_child(rank, pipes);
    c->pid = pid;
    L.live++;
    if (L.tag) {
        for (int k = 0; k < 2; k++) {
            close(pipes[k][1]);
            c->s[k].fd = pipes[k][0];
            c->s[k].out = k == 0 ? STDOUT_FILENO : STDERR_FILENO;
        }
    }
    return 0;
fail:
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++)
            if (pipes[k][j] >= 0)
                close(pipes[k][j]);
    return -1;
}

static void signal_all(int sig)
{
    for (int i = 0; i < L.n; i++) {
        if (L.kids[i].pid > 0) {
            kill(L.kids[i].pid, sig);
            if (sig != SIGKILL) /* a stopped rank could not act on it */
                kill(L.kids[i].pid, SIGCONT);
        }
    }
}

static void decide(int code)
{
    if (!L.decided) {
        L.decided = 1;
        L.exit_code = code;
    }
}

static void begin_shutdown(int sig)
{
    if (L.phase != RUNNING)
        return;
    signal_all(sig);
    L.phase = STOPPING;
    L.kill_at = now_ns() + GRACE_NS;
}

static void escalate(void)
{
    signal_all(SIGKILL);
    L.phase = KILLING;
}

/* ---- scheduled actions (--at, --exec-at) --------------------------------------- */

static int helper_slot(pid_t pid)
{
    for (int i = 0; i < MAX_EVENTS; i++)
        if (L.helpers[i] == pid)
            return i;
    return -1;
}

/* --exec-at: /bin/sh -c CMD in the host's namespace, not waited for here (reap()
 * collects it), so a slow command does not hold up the loop. */
static int start_exec(const struct event *e)
{
    int slot = helper_slot(0);
    if (slot < 0 || hosts_set_env(&L.hosts, e->host, L.device_template) != 0) {
        complain("'%s': no room to start it", e->spec);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        complain("'%s': fork: %s", e->spec, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != L.self)
            _exit(EXIT_INTERNAL);
        if (hosts_enter(&L.hosts, e->host) != 0) {
            dprintf(STDERR_FILENO, "softvia-run: '%s': setns: %s\n", e->spec, strerror(errno));
            _exit(EXIT_INTERNAL);
        }
        sigaction(SIGPIPE, &L.old_pipe, NULL);
        sigaction(SIGCHLD, &L.old_chld, NULL);
        sigprocmask(SIG_SETMASK, &L.oldmask, NULL);
        execl("/bin/sh", "sh", "-c", e->cmd, (char *)NULL);
        _exit(EXIT_NOEXEC);
    }
    L.helpers[slot] = pid;
    L.helper_spec[slot] = e->spec;
    return 0;
}

/* A failed action fails the job: the run would not test what it was meant to. */
static void action_failed(void)
{
    decide(EXIT_INTERNAL);
    begin_shutdown(SIGTERM);
}

static void run_due_events(int64_t now)
{
    if (L.clock_origin < 0)
        return;
    for (int i = 0; i < L.nevents && L.phase == RUNNING; i++) {
        struct event *e = &L.events[i];
        if (e->done || now < L.clock_origin + e->ms * 1000000)
            continue;
        e->done = 1;
        int rc = e->what == EXEC ? start_exec(e) : hosts_set_link(&L.hosts, e->host, e->what == LINK_UP);
        if (rc != 0) {
            complain("scheduled action '%s' failed", e->spec);
            action_failed();
        }
    }
}

/* --at-from: the clock starts when a rank has stored the key (a file in kv/). */
static void poll_clock_key(int64_t now)
{
    char path[PATH_MAX + 300]; /* job dir + "/kv/" + key */
    struct stat st;
    if (L.clock_origin >= 0 || now < L.next_key_poll)
        return;
    L.next_key_poll = now + KEY_POLL_NS;
    snprintf(path, sizeof path, "%s/kv/%s", L.job_dir, L.at_from);
    if (stat(path, &st) == 0)
        L.clock_origin = now;
}

/* When the loop must wake next for the event clock; -1 when it need not. */
static int64_t next_event_time(void)
{
    int64_t t = -1;
    if (L.nevents == 0 || L.phase != RUNNING)
        return -1;
    if (L.clock_origin < 0)
        return L.next_key_poll;
    for (int i = 0; i < L.nevents; i++) {
        int64_t at = L.clock_origin + L.events[i].ms * 1000000;
        if (!L.events[i].done && (t < 0 || at < t))
            t = at;
    }
    return t;
}

static void stop_helpers(void)
{
    for (int i = 0; i < MAX_EVENTS; i++) {
        if (L.helpers[i] > 0) {
            kill(L.helpers[i], SIGKILL);
            waitpid(L.helpers[i], NULL, 0);
            L.helpers[i] = 0;
        }
    }
}

static void reap(void)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        int code = 0, found = 0, rank_of = -1;
        for (int i = 0; i < L.n && !found; i++) {
            if (L.kids[i].pid == pid) {
                L.kids[i].pid = 0;
                found = 1;
                rank_of = i;
            }
        }
        if (!found) {
            int slot = helper_slot(pid);
            if (slot >= 0) {
                L.helpers[slot] = 0;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    complain("--exec-at '%s' %s %d", L.helper_spec[slot],
                             WIFEXITED(st) ? "exited with" : "killed by signal",
                             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                    action_failed();
                }
            }
            continue;
        }
        L.live--;
        if (WIFEXITED(st))
            code = WEXITSTATUS(st);
        else if (WIFSIGNALED(st))
            code = 128 + WTERMSIG(st);
        if (code != 0) {
            /* Name the rank that ends the job (not the ones brought down after it): a
             * rank killed by a signal loses its buffered output, so this may be all
             * there is to see. */
            if (L.phase == RUNNING) {
                if (WIFSIGNALED(st))
                    complain("rank %d killed by signal %d (%s)%s", rank_of, WTERMSIG(st), strsignal(WTERMSIG(st)),
                             WCOREDUMP(st) ? ", core dumped" : "");
                else
                    complain("rank %d exited with %d", rank_of, code);
            }
            decide(code);
            begin_shutdown(SIGTERM);
        }
    }
}

static void read_signals(void)
{
    struct signalfd_siginfo si[16];
    ssize_t n;
    while ((n = read(L.sfd, si, sizeof si)) > 0) {
        for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++) {
            int sig = (int)si[i].ssi_signo;
            if (sig == SIGCHLD)
                continue; /* reap() runs after every wake-up anyway */
            if (L.phase == RUNNING) {
                if (!L.decided)
                    L.exit_sig = sig;
                decide(128 + sig);
                begin_shutdown(sig); /* forward the user's signal */
            } else if (L.phase == STOPPING) {
                escalate(); /* asked twice: stop waiting */
            }
        }
    }
}

/* Fills fds with the signalfd (if wanted) and the open pipes. */
static nfds_t collect_fds(struct pollfd *fds, struct stream **who, int *whorank, int with_sfd)
{
    nfds_t n = 0;
    if (with_sfd) {
        fds[n].fd = L.sfd;
        fds[n].events = POLLIN;
        who[n] = NULL;
        n++;
    }
    for (int i = 0; i < L.n && L.tag; i++) {
        for (int k = 0; k < 2; k++) {
            if (L.kids[i].s[k].fd >= 0) {
                fds[n].fd = L.kids[i].s[k].fd;
                fds[n].events = POLLIN;
                who[n] = &L.kids[i].s[k];
                whorank[n] = i;
                n++;
            }
        }
    }
    return n;
}

static int ms_until(int64_t t)
{
    int64_t d = t - now_ns();
    if (d <= 0)
        return 0;
    d = (d + 999999) / 1000000; /* round up: waking early would spin */
    return d > INT_MAX ? INT_MAX : (int)d;
}

static void event_loop(struct pollfd *fds, struct stream **who, int *whorank, int64_t deadline)
{
    while (L.live > 0) {
        int wait_ms = -1;
        int64_t ev = next_event_time();
        if (L.phase == RUNNING && deadline >= 0)
            wait_ms = ms_until(deadline);
        else if (L.phase == STOPPING)
            wait_ms = ms_until(L.kill_at);
        if (ev >= 0 && (wait_ms < 0 || ms_until(ev) < wait_ms))
            wait_ms = ms_until(ev);

        nfds_t nfds = collect_fds(fds, who, whorank, 1);
        if (poll(fds, nfds, wait_ms) > 0) {
            for (nfds_t i = 0; i < nfds; i++) {
                if (fds[i].revents == 0)
                    continue;
                if (who[i] == NULL)
                    read_signals();
                else
                    pump(who[i], whorank[i]);
            }
        }
        reap();

        int64_t now = now_ns();
        if (L.nevents > 0 && L.phase == RUNNING) {
            if (L.at_from != NULL)
                poll_clock_key(now);
            run_due_events(now);
        }
        if (L.phase == RUNNING && deadline >= 0 && now >= deadline && L.live > 0) {
            fprintf(stderr, "softvia-run: timeout after %g s\n", L.timeout);
            decide(EXIT_TIMEOUT);
            begin_shutdown(SIGTERM);
        }
        if (L.phase == STOPPING && now >= L.kill_at)
            escalate();
    }
}

/* The ranks are gone, but their last output may still sit in the pipes. The
 * iteration cap stops a grandchild that keeps a pipe busy from holding us. */
static void drain_output(struct pollfd *fds, struct stream **who, int *whorank)
{
    for (int iter = 0; iter < 1000; iter++) {
        nfds_t nfds = collect_fds(fds, who, whorank, 0);
        if (nfds == 0 || poll(fds, nfds, 0) <= 0)
            break;
        for (nfds_t i = 0; i < nfds; i++)
            if (fds[i].revents != 0)
                pump(who[i], whorank[i]);
    }
    for (int i = 0; i < L.n && L.tag; i++)
        for (int k = 0; k < 2; k++)
            close_stream(&L.kids[i].s[k], i);
}

static struct pollfd *fds;
static struct stream **who;
static int *whorank;

static void free_buffers(void)
{
    free(obuf);
    free(fds);
    free(who);
    free(whorank);
    free(L.kids);
    free(L.cpus);
    free(L.device_template);
}

int main(int argc, char **argv)
{
    char num[32];
    int64_t deadline = -1;

    ensure_std_fds();
    parse_args(argc, argv);
    L.self = getpid();
    if (L.pin)
        load_cpus();
    if (L.tag)
        raise_fd_limit();

    L.kids = calloc((size_t)L.n, sizeof *L.kids);
    fds = calloc((size_t)L.n * 2 + 1, sizeof *fds);
    who = calloc((size_t)L.n * 2 + 1, sizeof *who);
    whorank = calloc((size_t)L.n * 2 + 1, sizeof *whorank);
    if (L.kids == NULL || fds == NULL || who == NULL || whorank == NULL) {
        complain("out of memory");
        return EXIT_INTERNAL;
    }
    for (int i = 0; i < L.n; i++)
        L.kids[i].s[0].fd = L.kids[i].s[1].fd = -1;

    /* Signals are blocked before the directory exists, so no signal can
     * arrive at a moment where we would fail to remove it. */
    setup_signals();
    if (make_job_dir() != 0) {
        remove_job_dir();
        return EXIT_INTERNAL;
    }
    if (L.nhosts > 0) {
        int rc = hosts_setup(&L.hosts, L.nhosts, L.mtu, L.self, &L.oldmask);
        if (rc != 0) {
            remove_job_dir();
            free_buffers();
            return rc;
        }
        if (getenv("SOFTVIA_DEVICE") != NULL)
            L.device_template = strdup(getenv("SOFTVIA_DEVICE"));
        snprintf(num, sizeof num, "%d", L.nhosts);
        setenv("SOFTVIA_HOST_COUNT", num, 1);
    }
    snprintf(num, sizeof num, "%d", L.n);
    setenv("SOFTVIA_SIZE", num, 1);
    setenv("SOFTVIA_JOB_DIR", L.job_dir, 1);
    setenv("SOFTVIA_JOB_ID", strrchr(L.job_dir, '/') + 1, 1);

    if (L.timeout > 0)
        deadline = now_ns() + (int64_t)(L.timeout * 1e9);
    for (int i = 0; i < L.n; i++) {
        if (spawn(i) != 0) {
            decide(EXIT_INTERNAL);
            begin_shutdown(SIGTERM);
            break;
        }
    }
    if (L.at_from == NULL)
        L.clock_origin = now_ns();

    event_loop(fds, who, whorank, deadline);
    drain_output(fds, who, whorank);
    stop_helpers();
    if (L.nhosts > 0)
        hosts_release(&L.hosts);
    remove_job_dir();

    free_buffers();

    if (L.exit_sig != 0) {
        /* Die by the same signal so our caller sees how the job ended. */
        fflush(NULL);
        signal(L.exit_sig, SIG_DFL);
        sigprocmask(SIG_SETMASK, &L.oldmask, NULL);
        raise(L.exit_sig);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, L.exit_sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
    }
    return L.exit_code;
}
