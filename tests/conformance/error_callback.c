/*
 * error_callback: VipErrorCallback's handler is called (from inside a later vipl call in
 * inline mode, or from the firmware thread) with an error descriptor naming the NIC and
 * the VI, for a connection broken by the peer (VIP_ERROR_CONN_LOST), for a reliable
 * send that found no receive (VIP_ERROR_RECVQ_EMPTY at the receiver), for a descriptor
 * error on a reliable VI (VIP_ERROR_POST_DESC), and for a peer NIC that closed. The
 * handler may call back into vipl. A NULL handler stops the calls. VipCloseNic of the
 * handler's own NIC, from inside the handler, is refused (VIP_INVALID_STATE): the NIC
 * goes on working and closes normally afterwards (before, the firmware thread joined
 * itself and the process ended in std::terminate; inline, the delivering call went on
 * with a freed NIC).
 */
#include "helpers.h"

enum { MAXREC = 64 };
static struct {
    pthread_mutex_t mu;
    int n;
    VIP_ERROR_DESCRIPTOR rec[MAXREC];
    void *ctx[MAXREC];
    VIP_VI_STATE state_in_handler[MAXREC];
} R = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, {0}, {0}};

static void handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    VIP_VI_STATE st = (VIP_VI_STATE)-1;
    if (ed->ViHandle) VipQueryVi(ed->ViHandle, &st, NULL, NULL, NULL); /* calling back into vipl */
    pthread_mutex_lock(&R.mu);
    if (R.n < MAXREC) {
        R.rec[R.n] = *ed;
        R.ctx[R.n] = ctx;
        R.state_in_handler[R.n] = st;
        R.n++;
    }
    pthread_mutex_unlock(&R.mu);
}

static VIP_RETURN close_rc = (VIP_RETURN)-1;
static int close_calls;
static void closer(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    VIP_RETURN r = VipCloseNic(ed->NicHandle);
    pthread_mutex_lock(&R.mu);
    close_rc = r;
    close_calls++;
    pthread_mutex_unlock(&R.mu);
}

static int count(void) {
    pthread_mutex_lock(&R.mu);
    int n = R.n;
    pthread_mutex_unlock(&R.mu);
    return n;
}

/* Waits until a record for vi with code shows up; its index or -1. Polls vipl calls on
 * poll_vi so an inline NIC makes progress (and delivers). */
static int await(VIP_VI_HANDLE vi, VIP_ERROR_CODE code, VIP_VI_HANDLE poll_vi) {
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    do {
        pthread_mutex_lock(&R.mu);
        for (int i = 0; i < R.n; i++)
            if (R.rec[i].ViHandle == vi && R.rec[i].ErrorCode == code) {
                pthread_mutex_unlock(&R.mu);
                return i;
            }
        pthread_mutex_unlock(&R.mu);
        VipQueryVi(poll_vi, NULL, NULL, NULL, NULL);
        sched_yield();
    } while (th_now_ms() < end);
    return -1;
}

int main(void) {
    th_init("error_callback", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    int ctx_token;
    CHECK(VipErrorCallback(e.nic, &ctx_token, handler));
    VIP_DESCRIPTOR *sd = th_desc(&e, 1);
    char *buf = th_alloc(&e, 256);

    th_phase("connection broken by the peer");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "cb1");
        int before = count();
        CHECK(VipDisconnect(b));
        int i = await(a, VIP_ERROR_CONN_LOST, a);
        EXPECT(i >= 0, "no VIP_ERROR_CONN_LOST for the VI whose peer disconnected (%d calls)", count() - before);
        if (i >= 0) {
            EXPECT(R.rec[i].NicHandle == e.nic, "NicHandle %p want %p", (void *)R.rec[i].NicHandle, (void *)e.nic);
            EXPECT(R.rec[i].ResourceCode == VIP_RESOURCE_VI, "ResourceCode %d", R.rec[i].ResourceCode);
            EXPECT(R.ctx[i] == &ctx_token, "context %p want %p", R.ctx[i], (void *)&ctx_token);
            EXPECT(R.state_in_handler[i] == VIP_STATE_ERROR, "VI state seen by the handler: %s",
                   th_state_name(R.state_in_handler[i]));
        }
        /* the side that disconnected on purpose is not an error */
        th_sleep_ms(20);
        VipQueryVi(b, NULL, NULL, NULL, NULL);
        pthread_mutex_lock(&R.mu);
        for (int k = before; k < R.n; k++)
            EXPECT(R.rec[k].ViHandle != b, "the disconnecting VI got error %d", R.rec[k].ErrorCode);
        pthread_mutex_unlock(&R.mu);
        CHECK(VipDisconnect(a));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("reliable send with no receive posted");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "cb2");
        th_set1(sd, e.mh, buf, 10);
        CHECK(VipPostSend(a, sd, e.mh));
        EXPECT(await(b, VIP_ERROR_RECVQ_EMPTY, b) >= 0, "no VIP_ERROR_RECVQ_EMPTY for the receiver");
        EXPECT(await(a, VIP_ERROR_CONN_LOST, a) >= 0, "no VIP_ERROR_CONN_LOST for the sender");
        th_drain(a, 500);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("descriptor error on a reliable VI");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_RECEPTION, &a, &b, "cb3");
        th_set1(sd, e.mh, buf, 10);
        sd->CS.Control = 0x100; /* reserved bit: format error */
        CHECK(VipPostSend(a, sd, e.mh));
        int i = await(a, VIP_ERROR_POST_DESC, a);
        EXPECT(i >= 0, "no VIP_ERROR_POST_DESC for a format error on a reliable VI");
        EXPECT(await(b, VIP_ERROR_CONN_LOST, b) >= 0, "no VIP_ERROR_CONN_LOST for the peer of the failed VI");
        th_drain(a, 500);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("peer NIC closed");
    {
        th_env e2;
        th_open_env(&e2, NULL, 0);
        VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE b = th_vi(&e2, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        th_connect_peer2(&e, a, &e2, b, "cb4");
        th_close_env(&e2);
        EXPECT(await(a, VIP_ERROR_CONN_LOST, a) >= 0, "no VIP_ERROR_CONN_LOST when the peer NIC closed");
        CHECK(VipDisconnect(a));
        CHECK(VipDestroyVi(a));
    }

    th_phase("unreliable drop is not an asynchronous error");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_UNRELIABLE, &a, &b, "cb5");
        int before = count();
        th_set1(sd, e.mh, buf, 10);
        CHECK(VipPostSend(a, sd, e.mh));
        th_send_done_must(a, sd, "send");
        for (int k = 0; k < 50; k++) VipQueryVi(b, NULL, NULL, NULL, NULL), th_sleep_ms(1);
        EXPECT(count() == before, "%d handler calls for an unreliable drop", count() - before);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("the handler closes its own NIC: refused");
    {
        th_env e3;
        th_open_env(&e3, NULL, 0);
        CHECK(VipErrorCallback(e3.nic, NULL, closer));
        VIP_VI_HANDLE a, b;
        th_pair(&e3, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "cb7");
        CHECK(VipDisconnect(b));
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        int calls;
        do {
            VipQueryVi(a, NULL, NULL, NULL, NULL); /* inline: delivers the callback in here */
            pthread_mutex_lock(&R.mu);
            calls = close_calls;
            pthread_mutex_unlock(&R.mu);
        } while (!calls && th_now_ms() < end && (sched_yield(), 1));
        EXPECT(calls > 0, "the handler was never called");
        EXPECT(close_rc == VIP_INVALID_STATE, "VipCloseNic inside the NIC's own error callback: %s",
               th_rs(close_rc));
        VIP_VI_STATE st;
        EXPECT(VipQueryVi(a, &st, NULL, NULL, NULL) == VIP_SUCCESS, "the NIC stopped working after the refusal");
        CHECK(VipDisconnect(a));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
        th_close_env(&e3);
    }

    th_phase("NULL handler: no more calls");
    {
        CHECK(VipErrorCallback(e.nic, NULL, NULL));
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "cb6");
        int before = count();
        CHECK(VipDisconnect(b));
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "a: %s", th_state_name(th_state(a)));
        for (int k = 0; k < 20; k++) VipQueryVi(a, NULL, NULL, NULL, NULL), th_sleep_ms(1);
        EXPECT(count() == before, "%d handler calls after the handler was removed", count() - before);
    }
    th_close_env(&e);
    return th_result();
}
