/* Part of sc_types: a file that includes <unistd.h> after splitc.h. Its sync() is still
 * Split-C's (it completes the get), and unistd.h's own declarations are usable. */
#include <splitc.h>
#include <unistd.h>

int sc_get_after_sync(gptr_t src, int sentinel);

int sc_get_after_sync(gptr_t src, int sentinel) {
    int v = sentinel;
    if (getpid() <= 0) return sentinel; /* unistd.h's declarations are there */
    get_int(&v, src);
    sync();
    return v;
}
