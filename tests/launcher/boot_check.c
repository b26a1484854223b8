/* boot_check - run as `softvia-run -n N boot_check N` or `mpirun -np N boot_check N`:
 * exercises softvia_boot across real processes, with whichever back end the launcher
 * gives (job directory or PMIx). Silent on success; exits 1 with a message on failure. */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TMO 20000 /* ms; generous for a loaded 2-core machine */

static int rank, size;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "boot_check rank %d: line %d: ", rank, __LINE__);                     \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

struct item {
    uint32_t rank;
    uint32_t iter;
    uint64_t magic;
};

static void test_allgather(void)
{
    struct item mine, all[64];
    for (uint32_t it = 0; it < 20; it++) {
        mine = (struct item){.rank = (uint32_t)rank, .iter = it, .magic = 0x5eed0000u + it * 7u};
        memset(all, 0xff, sizeof all);
        int rc = sv_boot_allgather(&mine, sizeof mine, all, TMO);
        CHECK(rc == 0, "allgather: %d", rc);
        for (int r = 0; r < size; r++)
            CHECK(all[r].rank == (uint32_t)r && all[r].iter == it &&
                      all[r].magic == 0x5eed0000u + it * 7u,
                  "allgather iter %u: bad slot %d", it, r);
    }
    /* In place: mine is our own slot of all. */
    for (int r = 0; r < size; r++)
        all[r].rank = 9999;
    all[rank] = (struct item){.rank = (uint32_t)rank, .iter = 77, .magic = 1};
    CHECK(sv_boot_allgather(&all[rank], sizeof all[0], all, TMO) == 0, "in-place allgather");
    for (int r = 0; r < size; r++)
        CHECK(all[r].rank == (uint32_t)r && all[r].iter == 77, "in-place slot %d", r);
}

/* Before barrier i every rank puts "it.i.<rank>"; after it, all of them must
 * already be visible (timeout 0), or the barrier let someone through early. */
static void test_barrier(void)
{
    char key[64];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "it.%d.%d", i, rank);
        CHECK(sv_boot_put(key, &i, sizeof i) == 0, "put %s", key);
        int rc = sv_boot_barrier(TMO);
        CHECK(rc == 0, "barrier %d: %d", i, rc);
        for (int r = 0; r < size; r++) {
            int v = -1;
            size_t len = 0;
            snprintf(key, sizeof key, "it.%d.%d", i, r);
            rc = sv_boot_get(key, &v, sizeof v, &len, 0);
            CHECK(rc == 0 && len == sizeof v && v == i, "after barrier %d: %s rc=%d", i, key, rc);
        }
    }
}

static void test_put_get(void)
{
    char key[32], buf[64];
    size_t len = 0;
    int64_t t0;
    struct timespec ts;

    snprintf(key, sizeof key, "hello.%d", rank);
    snprintf(buf, sizeof buf, "from rank %d", rank);
    CHECK(sv_boot_put(key, buf, strlen(buf)) == 0, "put hello");
    snprintf(key, sizeof key, "hello.%d", (rank + 1) % size);
    memset(buf, 0, sizeof buf);
    CHECK(sv_boot_get(key, buf, sizeof buf - 1, &len, -1) == 0, "get %s", key);
    char want[64];
    snprintf(want, sizeof want, "from rank %d", (rank + 1) % size);
    CHECK(len == strlen(want) && strcmp(buf, want) == 0, "got '%s'", buf);

    /* Replacing a value is atomic too (after the barrier: the peer has read it). */
    CHECK(sv_boot_barrier(TMO) == 0, "barrier before re-put");
    snprintf(key, sizeof key, "hello.%d", rank);
    CHECK(sv_boot_put(key, "x", 1) == 0, "re-put");
    CHECK(sv_boot_get(key, buf, sizeof buf, &len, 0) == 0 && len == 1 && buf[0] == 'x', "re-get");

    CHECK(sv_boot_put("bad/key", "x", 1) == -EINVAL, "slash key");
    CHECK(sv_boot_put("", "x", 1) == -EINVAL, "empty key");
    CHECK(sv_boot_put("..", "x", 1) == -EINVAL, "dotdot key");
    CHECK(sv_boot_put("sp ace", "x", 1) == -EINVAL, "space key");
    CHECK(sv_boot_put("@a.1.0", "x", 1) == -EINVAL, "reserved key");
    CHECK(sv_boot_get(NULL, buf, sizeof buf, &len, 0) == -EINVAL, "NULL key");
    CHECK(sv_boot_get("never.set", buf, sizeof buf, &len, 0) == -ETIMEDOUT, "timeout 0");

    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    CHECK(sv_boot_get("never.set", buf, sizeof buf, &len, 50) == -ETIMEDOUT, "timeout 50");
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t waited = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - t0;
    CHECK(waited >= 45 && waited < 5000, "50 ms timeout took %lld ms", (long long)waited);

    char big[100];
    memset(big, 'b', sizeof big);
    snprintf(key, sizeof key, "big.%d", rank);
    CHECK(sv_boot_put(key, big, sizeof big) == 0, "put big");
    CHECK(sv_boot_get(key, buf, 10, &len, 0) == -ENOSPC && len == sizeof big, "ENOSPC");

    snprintf(key, sizeof key, "empty.%d", rank);
    CHECK(sv_boot_put(key, NULL, 0) == 0, "put empty");
    CHECK(sv_boot_get(key, NULL, 0, &len, 0) == 0 && len == 0, "get empty");
}

static void test_names(void)
{
    const char *dir = sv_boot_job_dir();
    unsigned char addr[6] = {0xde, 0xad, 0x00, 0x0f, (unsigned char)rank, 0xff};
    char name[32], path[PATH_MAX], line[64], want[64];
    int peer = (rank + 1) % size;

    snprintf(name, sizeof name, "rank%d:node", rank); /* ':' is allowed in names */
    CHECK(sv_boot_publish_name(name, addr, sizeof addr) == 0, "publish");
    CHECK(sv_boot_publish_name(".hidden", addr, 1) == -EINVAL, "dot name");
    CHECK(sv_boot_publish_name("a/b", addr, 1) == -EINVAL, "slash name");
    CHECK(sv_boot_publish_name("a b", addr, 1) == -EINVAL, "space name");
    CHECK(sv_boot_publish_name("ok", addr, 0) == -EINVAL, "empty address");
    CHECK(sv_boot_barrier(TMO) == 0, "barrier after publish");

    /* The peer's name and address, as the vipl name service looks them up. */
    unsigned char got[16];
    char gotname[64];
    size_t glen = 0;
    snprintf(name, sizeof name, "rank%d:node", peer);
    CHECK(sv_boot_lookup_name(name, got, sizeof got, &glen) == 0, "lookup %s", name);
    CHECK(glen == sizeof addr && memcmp(got, addr, 4) == 0 && got[4] == peer && got[5] == 0xff,
          "lookup %s: wrong address", name);
    CHECK(sv_boot_lookup_name(name, got, 2, &glen) == -ENOSPC && glen == sizeof addr, "lookup ENOSPC");
    CHECK(sv_boot_lookup_name("nobody.here", got, sizeof got, &glen) == -ENOENT, "lookup unknown");
    CHECK(sv_boot_lookup_addr(got, sizeof addr, gotname, sizeof gotname) == 0 && strcmp(gotname, name) == 0,
          "reverse lookup of %s", name);
    CHECK(sv_boot_lookup_addr(got, sizeof addr, gotname, 3) == -ENOSPC, "reverse lookup ENOSPC");
    got[0] ^= 1;
    CHECK(sv_boot_lookup_addr(got, sizeof addr, gotname, sizeof gotname) == -ENOENT, "reverse lookup unknown");
    if (dir == NULL)
        return; /* PMIx: no files to look at */

    /* Read the peer's file: the job directory's format (softvia_boot.h). */
    snprintf(path, sizeof path, "%s/names/rank%d:node", dir, peer);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    snprintf(want, sizeof want, "dead000f%02xff\n", peer);
    CHECK(strcmp(line, want) == 0, "names file holds '%s', want '%s'", line, want);

    /* No temporary files may be left behind. */
    snprintf(path, sizeof path, "%s/names", dir);
    DIR *d = opendir(path);
    CHECK(d != NULL, "opendir names");
    int count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        CHECK(strncmp(e->d_name, "rank", 4) == 0, "stray file names/%s", e->d_name);
        count++;
    }
    closedir(d);
    CHECK(count == size, "%d name files, want %d", count, size);
}

int main(int argc, char **argv)
{
    int rc = sv_boot_init(&rank, &size);
    CHECK(rc == 0, "sv_boot_init: %d", rc);
    CHECK(argc < 2 || size == atoi(argv[1]), "size %d, want %s", size, argv[1]);
    CHECK(size >= 2 && size <= 64, "run with 2..64 ranks");
    const char *backend = sv_boot_backend();
    CHECK(argc < 3 || strcmp(backend, argv[2]) == 0, "back end %s, want %s", backend, argv[2]);
    if (strcmp(backend, "pmix") == 0)
        CHECK(sv_boot_job_dir() == NULL, "a job dir under PMIx");
    else
        CHECK(sv_boot_job_dir() != NULL && sv_boot_job_dir()[0] == '/', "job dir");

    test_allgather();
    test_barrier();
    test_put_get();
    test_names();
    /* Everyone must still be here, so no rank's exit ends the job early. */
    CHECK(sv_boot_barrier(TMO) == 0, "final barrier");
    return 0;
}
