/* softvia_boot.h - how a process of a job finds its rank, the job's size and its peers.
 *
 * Two back ends, chosen at sv_boot_init from the environment (docs/launching.md):
 *   - softvia-run's job directory, when SOFTVIA_RANK/SOFTVIA_SIZE are set (below);
 *   - PMIx, when PMIX_NAMESPACE and PMIX_RANK are set (Open MPI's mpirun, Slurm's srun
 *     --mpi=pmix, any PMIx launcher): rank and size from PMIx; put/get through
 *     PMIx_Publish/PMIx_Lookup within the job's namespace (where the server has neither,
 *     as Slurm's: the putter's own data, read from every rank of the node); allgather
 *     through PMIx_Put, PMIx_Commit, a fence that collects data, and PMIx_Get; barrier
 *     through a fence; names published as two keys (name -> address, address -> name).
 *     Nothing is shared but the launcher's wire. Collectives are matched in call order,
 *     as MPI's: every rank calls them in the same order.
 * Neither set: a job of one (rank 0, size 1).
 *
 * Job directory protocol (the vipl name service reads it through sv_boot_lookup_name):
 *
 *   softvia-run creates  ${SOFTVIA_JOB_ROOT:-/dev/shm}/softvia-job.<launcher pid>.<16 hex digits>
 *   (mode 0700) with the subdirectories names/ and kv/ and the file .launcher, which
 *   the launcher keeps flock()ed for as long as it lives, and removes it recursively
 *   when it exits. A launcher killed by SIGKILL cannot: its ranks die with it
 *   (PR_SET_PDEATHSIG), and the next softvia-run on the same job root removes every
 *   job directory of the calling user whose .launcher it can lock (its launcher is
 *   gone), or, for one without .launcher, whose launcher pid is gone and which is
 *   over a minute old. Other users' directories are never touched.
 *   Each child gets these environment variables:
 *     SOFTVIA_RANK     0..N-1
 *     SOFTVIA_SIZE     N
 *     SOFTVIA_JOB_DIR  absolute path of the job directory
 *     SOFTVIA_JOB_ID   basename of SOFTVIA_JOB_DIR
 *
 *   names/<name>  one line: the address bytes in lowercase hex, then "\n".
 *   kv/<key>      the raw value bytes.
 *   Every file is written to a temporary file in the same directory whose name
 *   starts with ".tmp~" and then renamed into place, so a reader either sees no
 *   file or the complete file. Directory scanners must skip names starting
 *   with '.'. Keys starting with '@' (never valid user keys) are used
 *   internally by the collectives.
 *
 * All functions return 0 on success or a negative errno value:
 *   -EINVAL     bad arguments or malformed environment
 *   -ENOENT     not launched / no job directory
 *   -ETIMEDOUT  the timeout expired
 *   -ENOSPC     a value does not fit in the caller's buffer
 *   -EIO        I/O failure, or the job directory disappeared (launcher gone); under
 *               PMIx, the server refused or a collective before this one timed out
 *   -ENOTSUP    started by a PMIx launcher, built without libpmix
 *   -ENOMEM     out of memory
 *
 * Timeouts are in milliseconds; a negative timeout waits forever, 0 checks once.
 * Not thread-safe: call the collectives from one thread, in the same order on
 * every rank (like MPI collectives). put/get may be used from any thread.
 */
#ifndef SOFTVIA_BOOT_H
#define SOFTVIA_BOOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key or name accepted (a single path component). */
#define SV_BOOT_KEY_MAX 255

/* Reads SOFTVIA_RANK/SOFTVIA_SIZE/SOFTVIA_JOB_DIR (again on every call), else the PMIx
 * environment (connecting to the PMIx server once per process).
 * Not launched (neither set): rank 0, size 1, returns 0.
 * Malformed values, only one of RANK/SIZE set, SIZE > 1 without a job
 * directory, or a relative job directory: -EINVAL. Only one of PMIX_NAMESPACE and
 * PMIX_RANK set: -EINVAL; the PMIx server unreachable or refusing: -EIO.
 * sv_boot_last_error says which setting is at fault.
 * rank and size may be NULL. The other functions call this lazily. */
int sv_boot_init(int *rank, int *size);

/* Disconnects this process from a PMIx launcher (every connection the process made), for
 * a process about to end by _exit: a launcher takes a process that leaves connected for
 * one that crashed. exit() does it by itself. Nothing to do for the job directory. */
void sv_boot_finalize(void);

/* "jobdir", "pmix" or "none" (a job of one): the back end sv_boot_init chose. */
const char *sv_boot_backend(void);

/* Why the last failed call of this process failed, naming the setting or argument at
 * fault ("" when none failed). */
const char *sv_boot_last_error(void);

/* The job directory (SOFTVIA_JOB_DIR), or NULL when it is not set (also under PMIx). */
const char *sv_boot_job_dir(void);

/* Stores kv/<key> atomically (replacing an older value).
 * key must match [A-Za-z0-9._-]+ (not "." or "..", at most SV_BOOT_KEY_MAX). */
int sv_boot_put(const char *key, const void *val, size_t len);

/* Waits until kv/<key> exists, then copies it into val (cap bytes) and sets
 * *len (if len is not NULL) to its size. A value larger than cap gives
 * -ENOSPC with *len set to the size needed. */
int sv_boot_get(const char *key, void *val, size_t cap, size_t *len, int timeout_ms);

/* Every rank contributes len bytes; all (size*len bytes) receives them in rank
 * order. mine may alias its own slot all + rank*len. All ranks must pass the
 * same len. Size 1: copies mine into all. */
int sv_boot_allgather(const void *mine, size_t len, void *all, int timeout_ms);

/* Returns once every rank has entered the barrier. Size 1: returns 0. */
int sv_boot_barrier(int timeout_ms);

/* Writes names/<name> (lowercase hex of addr, then "\n") atomically.
 * name: printable ASCII without spaces or '/', not starting with '.',
 * at most SV_BOOT_KEY_MAX bytes. len must be 1..65536. */
int sv_boot_publish_name(const char *name, const void *addr, size_t len);

/* The address published under name (checked once, no waiting): 0 and *len set, -ENOENT
 * when there is none, -ENOSPC (with *len the size) when it does not fit cap. */
int sv_boot_lookup_name(const char *name, void *addr, size_t cap, size_t *len);

/* The name published for an address (checked once): 0, -ENOENT, or -ENOSPC when the
 * name and its NUL do not fit cap. */
int sv_boot_lookup_addr(const void *addr, size_t len, char *name, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* SOFTVIA_BOOT_H */
