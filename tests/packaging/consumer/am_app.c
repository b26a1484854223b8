/* Starts AM the SPMD way outside softvia-run (one rank), sends a request to itself,
 * gets the reply, shuts down and prints OK: proof that an installed libamvia and am.h
 * work from outside the source tree. */
#include <am.h>

#include <stdio.h>

static volatile int replied, reply_value;

static void request_h(void *token, int a, int b) { AM_Reply1(token, 2, a + b); }

static void reply_h(void *token, int v) {
    (void)token;
    reply_value = v;
    replied = 1;
}

#define CHECK(call)                                                       \
    do {                                                                  \
        int rc_ = (call);                                                 \
        if (rc_ != AM_OK) {                                               \
            printf("%s: %s\n", #call, AMX_ErrorString(rc_));              \
            return 1;                                                     \
        }                                                                 \
    } while (0)

int main(void) {
    eb_t eb;
    ep_t ep;
    CHECK(AMX_SPMDStartup(7, 0, &eb, &ep));
    if (AMX_SPMDNumProcs() != 1 || AMX_SPMDMyProc() != 0) {
        printf("not launched, yet rank %d of %d\n", AMX_SPMDMyProc(), AMX_SPMDNumProcs());
        return 1;
    }
    CHECK(AM_SetHandler(ep, 1, request_h));
    CHECK(AM_SetHandler(ep, 2, reply_h));
    CHECK(AM_Request2(ep, 0, 1, 40, 2));
    for (long i = 0; i < 100000000 && !replied; i++) CHECK(AM_Poll(eb));
    if (!replied || reply_value != 42) {
        printf("no reply from itself (replied %d, value %d)\n", replied, reply_value);
        return 1;
    }
    CHECK(AMX_SPMDBarrier());
    CHECK(AMX_SPMDExit());
    printf("AM: request to itself answered with %d\nOK\n", reply_value);
    return 0;
}
