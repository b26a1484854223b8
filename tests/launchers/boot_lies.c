/* boot_lies - what a process does when the launcher's environment lies or a peer never
 * shows up: a clear error (naming the setting) within a bounded time, never a hang.
 *   boot_lies env-no-rank      PMIX_NAMESPACE without PMIX_RANK (run without a launcher)
 *   boot_lies env-no-server    PMIX_NAMESPACE and PMIX_RANK, but no PMIx server
 *   mpirun -np 2 boot_lies silent-peer
 *                              rank 1 never joins a collective nor publishes: rank 0's
 *                              get and allgather time out with -ETIMEDOUT, and every
 *                              collective after that is refused (-EIO) */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "boot_lies: line %d: ", __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void env_case(const char *mode)
{
    unsetenv("SOFTVIA_RANK");
    unsetenv("SOFTVIA_SIZE");
    unsetenv("SOFTVIA_JOB_DIR");
    int rank = -1, size = -1;
    double t0 = now_s();
    int rc;
    if (!strcmp(mode, "env-no-rank")) {
        setenv("PMIX_NAMESPACE", "softvia-liar", 1);
        unsetenv("PMIX_RANK");
        rc = sv_boot_init(&rank, &size);
        EXPECT(rc == -EINVAL, "sv_boot_init: %d, want -EINVAL", rc);
        EXPECT(strstr(sv_boot_last_error(), "PMIX_RANK") != NULL, "the error does not name PMIX_RANK: '%s'",
               sv_boot_last_error());
    } else {
        setenv("PMIX_NAMESPACE", "softvia-liar", 1);
        setenv("PMIX_RANK", "0", 1);
        /* no server: nothing to connect to */
        unsetenv("PMIX_SERVER_URI4");
        unsetenv("PMIX_SERVER_URI3");
        unsetenv("PMIX_SERVER_URI2");
        unsetenv("PMIX_SERVER_URI21");
        unsetenv("PMIX_SERVER_URI");
        rc = sv_boot_init(&rank, &size);
        EXPECT(rc == -EIO, "sv_boot_init: %d, want -EIO", rc);
        EXPECT(strstr(sv_boot_last_error(), "PMIx_Init") != NULL, "the error does not say PMIx_Init failed: '%s'",
               sv_boot_last_error());
    }
    EXPECT(rank == 0 && size == 1, "rank %d size %d after a failed init", rank, size);
    EXPECT(now_s() - t0 < 10, "took %.1f s", now_s() - t0);
    /* every later call gives the same answer at once */
    char buf[8];
    EXPECT(sv_boot_barrier(1000) == rc, "barrier after a failed init");
    EXPECT(sv_boot_get("k", buf, sizeof buf, NULL, 1000) == rc, "get after a failed init");
    printf("boot_lies %s: %s\n", mode, sv_boot_last_error());
}

static void silent_peer(void)
{
    int rank, size;
    int rc = sv_boot_init(&rank, &size);
    EXPECT(rc == 0 && size == 2, "sv_boot_init: %d, size %d (run with mpirun -np 2)", rc, size);
    EXPECT(!strcmp(sv_boot_backend(), "pmix"), "back end %s, want pmix", sv_boot_backend());
    if (rc != 0 || size != 2)
        return;
    if (rank == 1) {
        sleep(6); /* alive, but never joins: rank 0 must give up on its own */
        return;
    }
    char buf[16];
    double t0 = now_s();
    rc = sv_boot_get("never.published", buf, sizeof buf, NULL, 1000);
    double t1 = now_s();
    EXPECT(rc == -ETIMEDOUT, "get: %d, want -ETIMEDOUT", rc);
    EXPECT(t1 - t0 >= 0.9 && t1 - t0 < 5, "get's 1 s timeout took %.2f s", t1 - t0);
    printf("boot_lies silent-peer: get: %s\n", sv_boot_last_error());
    int mine = 7, all[2];
    rc = sv_boot_allgather(&mine, sizeof mine, all, 1500);
    double t2 = now_s();
    EXPECT(rc == -ETIMEDOUT, "allgather: %d, want -ETIMEDOUT", rc);
    EXPECT(t2 - t1 >= 1.4 && t2 - t1 < 5, "allgather's 1.5 s timeout took %.2f s", t2 - t1);
    EXPECT(strstr(sv_boot_last_error(), "fence") != NULL, "the error does not say what did not complete: '%s'",
           sv_boot_last_error());
    printf("boot_lies silent-peer: allgather: %s\n", sv_boot_last_error());
    /* The timed-out fence is still pending at the server: a later collective must not be
     * matched against it (it would complete without the silent peer). */
    rc = sv_boot_barrier(1000);
    double t3 = now_s();
    EXPECT(rc == -EIO, "barrier after a timed-out allgather: %d, want -EIO", rc);
    EXPECT(t3 - t2 < 0.5, "the refused barrier took %.2f s", t3 - t2);
    EXPECT(strstr(sv_boot_last_error(), "out of step") != NULL, "the error does not say why: '%s'",
           sv_boot_last_error());
    printf("boot_lies silent-peer: barrier after it: %s\n", sv_boot_last_error());
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "env-no-rank") || !strcmp(mode, "env-no-server"))
        env_case(mode);
    else if (!strcmp(mode, "silent-peer"))
        silent_peer();
    else {
        fprintf(stderr, "usage: boot_lies env-no-rank|env-no-server|silent-peer\n");
        return 2;
    }
    if (failures == 0)
        printf("boot_lies %s: PASS\n", mode);
    return failures ? 1 : 0;
}
