/* boot_unit - softvia_boot in a single process, without softvia-run:
 * environment parsing, size-1 behaviour, and -EIO when the job directory
 * disappears under a waiting call. */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "boot_unit line %d: ", __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            failures++;                                                                           \
        }                                                                                         \
    } while (0)

static void clear_env(void)
{
    unsetenv("SOFTVIA_RANK");
    unsetenv("SOFTVIA_SIZE");
    unsetenv("SOFTVIA_JOB_DIR");
    unsetenv("SOFTVIA_JOB_ID");
}

/* Sets the three variables (NULL = unset) and runs sv_boot_init. */
static int init_with(const char *r, const char *s, const char *d, int *rank, int *size)
{
    clear_env();
    if (r)
        setenv("SOFTVIA_RANK", r, 1);
    if (s)
        setenv("SOFTVIA_SIZE", s, 1);
    if (d)
        setenv("SOFTVIA_JOB_DIR", d, 1);
    return sv_boot_init(rank, size);
}

static void make_job_dir(char *dir, size_t cap)
{
    char sub[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/boot_unit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(sub, sizeof sub, "%s/kv", dir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/names", dir);
    mkdir(sub, 0700);
}

static void remove_job_dir(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "boot_unit: could not remove %s\n", dir);
}

static void test_not_launched(void)
{
    int rank = -1, size = -1;
    char mine[4] = "abc", all[4] = "";
    size_t len;

    CHECK(init_with(NULL, NULL, NULL, &rank, &size) == 0, "init without env");
    CHECK(rank == 0 && size == 1, "rank %d size %d", rank, size);
    CHECK(sv_boot_job_dir() == NULL, "job dir should be NULL");
    CHECK(sv_boot_allgather(mine, sizeof mine, all, 0) == 0 && strcmp(all, "abc") == 0,
          "size-1 allgather");
    CHECK(sv_boot_barrier(0) == 0, "size-1 barrier");
    CHECK(sv_boot_barrier(-1) == 0, "size-1 barrier, no timeout");
    CHECK(sv_boot_put("k", "v", 1) == -ENOENT, "put without job dir");
    CHECK(sv_boot_get("k", all, sizeof all, &len, 0) == -ENOENT, "get without job dir");
    CHECK(sv_boot_publish_name("n", "v", 1) == -ENOENT, "publish without job dir");
    CHECK(sv_boot_put("bad/key", "v", 1) == -EINVAL, "bad key checked first");
    CHECK(sv_boot_allgather(NULL, 4, all, 0) == -EINVAL, "NULL mine");
    CHECK(init_with(NULL, NULL, NULL, NULL, NULL) == 0, "NULL outputs allowed");
}

static void test_malformed(void)
{
    static const char *bad[][3] = {
        {"0", NULL, "/tmp"},   {NULL, "2", "/tmp"}, {"x", "2", "/tmp"},  {"0", "2x", "/tmp"},
        {"-1", "2", "/tmp"},   {"2", "2", "/tmp"},  {"0", "0", "/tmp"},  {"", "2", "/tmp"},
        {" 1", "2", "/tmp"},   {"0", "2", NULL},    {"0", "2", "rel/dir"}, {"0", "2", ""},
        {"0", "99999999999", "/tmp"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rank = -1, size = -1;
        int rc = init_with(bad[i][0], bad[i][1], bad[i][2], &rank, &size);
        CHECK(rc == -EINVAL, "case %zu (%s,%s,%s): rc %d", i, bad[i][0] ? bad[i][0] : "-",
              bad[i][1] ? bad[i][1] : "-", bad[i][2] ? bad[i][2] : "-", rc);
        /* The error sticks to the other calls until the env is fixed. */
        CHECK(sv_boot_barrier(0) == -EINVAL, "case %zu: barrier", i);
    }
    int rank, size;
    CHECK(init_with("0", "1", NULL, &rank, &size) == 0 && size == 1, "size 1 needs no dir");
    CHECK(init_with("3", "4", "/tmp", &rank, &size) == 0 && rank == 3 && size == 4, "valid");
}

/* SOFTVIA_JOB_DIR alone (no RANK/SIZE): size 1, but put/get work. */
static void test_dir_only(void)
{
    char dir[PATH_MAX], buf[16];
    size_t len = 0;
    int rank, size;

    make_job_dir(dir, sizeof dir);
    CHECK(init_with(NULL, NULL, dir, &rank, &size) == 0 && size == 1, "dir-only init");
    CHECK(sv_boot_job_dir() && strcmp(sv_boot_job_dir(), dir) == 0, "job dir");
    CHECK(sv_boot_put("a.b_c-1", "hello", 5) == 0, "put");
    CHECK(sv_boot_get("a.b_c-1", buf, sizeof buf, &len, 0) == 0 && len == 5 &&
              memcmp(buf, "hello", 5) == 0,
          "get");
    CHECK(sv_boot_publish_name("me", "\x01\xab", 2) == 0, "publish");

    char path[PATH_MAX + 16], line[16] = "";
    snprintf(path, sizeof path, "%s/names/me", dir);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(line, sizeof line, f) && strcmp(line, "01ab\n") == 0, "names file '%s'", line);
    if (f)
        fclose(f);
    remove_job_dir(dir);
}

/* A waiting call must notice that the launcher removed the directory. */
static void test_dir_vanishes(void)
{
    char dir[PATH_MAX], buf[8];
    size_t len;
    struct timespec a, b;

    for (int which = 0; which < 2; which++) {
        make_job_dir(dir, sizeof dir);
        CHECK(init_with("0", "2", dir, NULL, NULL) == 0, "init size 2");
        pid_t pid = fork();
        if (pid == 0) {
            usleep(200 * 1000);
            remove_job_dir(dir);
            _exit(0);
        }
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = which == 0 ? sv_boot_get("never", buf, sizeof buf, &len, -1) : sv_boot_barrier(-1);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        CHECK(rc == -EIO, "%s after dir removal: rc %d", which ? "barrier" : "get", rc);
        CHECK(secs < 10, "noticed only after %.1f s", secs);
        waitpid(pid, NULL, 0);
        CHECK(sv_boot_put("k", "v", 1) == -EIO, "put into a removed dir");
    }
}

int main(void)
{
    test_not_launched();
    test_malformed();
    test_dir_only();
    test_dir_vanishes();
    if (failures) {
        fprintf(stderr, "boot_unit: %d failure(s)\n", failures);
        return 1;
    }
    return 0;
}
