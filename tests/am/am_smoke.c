/* am_smoke: one process, an endpoint mapped to itself: short request and reply. */
#include "am_test.h"
static volatile int got_req, got_rep, rep_val;
static void req_h(void *token, int a, int b) {
    got_req++;
    AM_Reply1(token, 2, a + b);
}
static void rep_h(void *token, int v) {
    (void)token;
    got_rep++;
    rep_val = v;
}
int main(void) {
    at_init("am_smoke", 30);
    eb_t eb; ep_t ep; en_t me;
    AM_CHECK(AM_Init());
    AM_CHECK(AM_AllocateBundle(AM_SEQ, &eb));
    AM_CHECK(AM_AllocateEndpoint(eb, &ep, &me));
    AM_CHECK(AM_SetTag(ep, 42));
    AM_CHECK(AM_SetHandler(ep, 1, req_h));
    AM_CHECK(AM_SetHandler(ep, 2, rep_h));
    AM_CHECK(AM_Map(ep, 0, me, 42));
    for (int i = 0; i < 1000; i++) {
        AM_CHECK(AM_Request2(ep, 0, 1, i, 5));
        if (!at_poll_until(eb, &got_rep, i + 1, 5000)) FATAL("no reply %d", i);
        EXPECT(rep_val == i + 5, "reply %d", rep_val);
    }
    AM_CHECK(AM_Terminate());
    return th_result();
}
