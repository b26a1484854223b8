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
 */
#define _GNU_SOURCE
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
    } else if (strcmp(mode, "args") == 0) {
        for (int i = 2; i < argc; i++)
            printf("%s\n", argv[i]);
    } else {
        die("bad mode or arguments");
    }
    return 0;
}
