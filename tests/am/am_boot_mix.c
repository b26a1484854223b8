/* am_boot_mix: a program that uses the launcher's collectives (softvia_boot) and AM's
 * SPMD collectives side by side, interleaved. libamvia carries its own hidden copy of
 * the bootstrap code: the two copies count collectives separately, and their keys
 * must not meet (a program all-gather must never read what amvia's all-gather wrote
 * under the same sequence number). Every value names its rank, round and side. */
#include "am_test.h"

#include <softvia_boot.h>

#define ROUNDS 20

int main(void) {
    at_init("am_boot_mix", 60);
    eb_t eb;
    ep_t ep;
    int rank, size;
    if (sv_boot_init(&rank, &size) != 0) FATAL("sv_boot_init");
    AM_CHECK(AMX_SPMDStartup(5, 0, &eb, &ep)); /* amvia's own all-gather and barrier */
    EXPECT(AMX_SPMDMyProc() == rank && AMX_SPMDNumProcs() == size, "ranks disagree");
    int64_t *mine = calloc((size_t)size, sizeof *mine), *theirs = calloc((size_t)size, sizeof *theirs);
    if (!mine || !theirs) FATAL("out of memory");
    for (int r = 0; r < ROUNDS; r++) {
        int64_t boot_v = 1000000 * 1 + 1000 * r + rank, am_v = 1000000 * 2 + 1000 * r + rank;
        if (sv_boot_allgather(&boot_v, sizeof boot_v, mine, 30000) != 0) FATAL("sv_boot_allgather %d", r);
        AM_CHECK(AMX_SPMDAllGather(&am_v, theirs, sizeof am_v));
        for (int i = 0; i < size; i++) {
            EXPECT(mine[i] == 1000000 + 1000 * r + i, "round %d: program all-gather got %lld from rank %d",
                   r, (long long)mine[i], i);
            EXPECT(theirs[i] == 2000000 + 1000 * r + i, "round %d: AM all-gather got %lld from rank %d", r,
                   (long long)theirs[i], i);
        }
        if (sv_boot_barrier(30000) != 0) FATAL("sv_boot_barrier %d", r);
        AM_CHECK(AMX_SPMDBarrier());
    }
    AM_CHECK(AMX_SPMDExit());
    free(mine);
    free(theirs);
    return th_result();
}
