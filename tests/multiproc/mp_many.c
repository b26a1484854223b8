/*
 * mp_many: one server NIC with many clients connected at once. Rank 1 opens --clients
 * NICs (each a distinct peer of the server) and connects a VI of each to rank 0's
 * standing listener; all stay connected while a message goes each way on every
 * connection, then rank 1 closes them all and the server sees every VI fail.
 *
 * Every connect must end in VIP_SUCCESS or, once the server is at a limit (its peer
 * limit, --server-dev shm:peers=N, or its fd limit, --nofile N), VIP_ERROR_RESOURCE,
 * never VIP_TIMEOUT; and no connection is half-open: the server's connected VIs are
 * exactly the clients that succeeded. --expect N: exactly N clients succeed.
 *
 *   softvia-run -n 2 mp_many --clients K [--server-dev NAME] [--nofile N] [--expect N]
 */
#include "mp_common.h"

#include <sys/resource.h>

enum { MSG = 64 };
#define DISC "many"

typedef struct {
    VIP_VI_HANDLE vi;
    VIP_DESCRIPTOR *rd, *sd;
    char *rb, *sb;
} conn_t;

/* The server: accepts until the client says it is done connecting, then echoes one
 * message on every connection, then waits for every VI to fail (the clients leave). */
static void serve(th_env *e, int clients, int expect) {
    th_addr la;
    VIP_EXT_LISTEN_HANDLE ls;
    CHECK(VipExtListen(e->nic, th_mkaddr(&la, &e->na, DISC), &ls));
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("listening barrier");  /* before the first client connects */
    conn_t *c = calloc((size_t)clients, sizeof *c);
    int n = 0, refused = 0, done = -1;
    th_phase("accept");
    uint64_t end = th_now_ms() + 90000;
    while (done < 0) {
        VIP_CONN_HANDLE conn;
        VIP_RETURN r = VipExtListenDone(ls, NULL, NULL, &conn);
        if (r == VIP_SUCCESS) {
            if (n >= clients) FATAL("more requests than clients");
            conn_t *k = &c[n];
            k->vi = th_vi(e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
            k->rd = th_desc(e, 1);
            k->sd = th_desc(e, 1);
            k->rb = th_alloc(e, MSG);
            k->sb = th_alloc(e, MSG);
            th_set1(k->rd, e->mh, k->rb, MSG);
            CHECK(VipPostRecv(k->vi, k->rd, e->mh));
            r = VipConnectAccept(conn, k->vi);
            if (r == VIP_SUCCESS) {
                n++;
            } else if (r == VIP_ERROR_RESOURCE) {
                refused++; /* the handle is consumed; the client hears VIP_ERROR_RESOURCE */
                CHECK(VipDisconnect(k->vi));
                th_drain(k->vi, 1000);
                CHECK(VipDestroyVi(k->vi));
            } else {
                FATAL("VipConnectAccept -> %s", th_rs(r));
            }
            continue;
        }
        if (r != VIP_NOT_DONE) FATAL("VipExtListenDone -> %s", th_rs(r));
        char v[16] = {0};
        if (sv_boot_get("many-connected", v, sizeof v - 1, NULL, 0) == 0) done = atoi(v);
        if (th_now_ms() > end) FATAL("the client never finished connecting (%d accepted)", n);
    }
    printf("mp_many: server accepted %d connections (%d accepts refused), the client counts %d\n", n, refused, done);
    /* No half-open connection: every VI the server accepted is one the client has. */
    EXPECT(n == done, "the server has %d connected VIs, the client %d connections", n, done);
    if (expect >= 0) EXPECT(n == expect, "%d connections, want %d", n, expect);
    for (int i = 0; i < n; i++) EXPECT(th_state(c[i].vi) == VIP_STATE_CONNECTED, "VI %d is not connected", i);

    th_phase("echo");
    for (int i = 0; i < n; i++) {
        th_recv_done_must(c[i].vi, c[i].rd, "client message");
        if (c[i].rd->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("connection %d: status 0x%x", i, c[i].rd->CS.Status);
        memcpy(c[i].sb, c[i].rb, MSG);
        th_set1(c[i].sd, e->mh, c[i].sb, MSG);
        CHECK(VipPostSend(c[i].vi, c[i].sd, e->mh));
        th_send_done_must(c[i].vi, c[i].sd, "echo");
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier after the echoes");

    th_phase("clients leave");
    for (int i = 0; i < n; i++) {
        if (!th_wait_state(c[i].vi, VIP_STATE_ERROR, 10000)) FATAL("VI %d still %s", i, th_state_name(th_state(c[i].vi)));
        CHECK(VipDisconnect(c[i].vi));
        th_drain(c[i].vi, 1000);
        CHECK(VipDestroyVi(c[i].vi));
    }
    CHECK(VipExtUnlisten(ls));
    free(c);
}

static void clients_main(const uint8_t *srv, VIP_UINT16 alen, int clients) {
    th_env *e = calloc((size_t)clients, sizeof *e);
    conn_t *c = calloc((size_t)clients, sizeof *c);
    int *ok = calloc((size_t)clients, sizeof *ok);
    int n = 0, refused = 0;
    th_phase("connect");
    for (int i = 0; i < clients; i++) {
        mp_open(&e[i], "inline", 4096);
        conn_t *k = &c[i];
        k->vi = th_vi(&e[i], VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        k->rd = th_desc(&e[i], 1);
        k->sd = th_desc(&e[i], 1);
        k->rb = th_alloc(&e[i], MSG);
        k->sb = th_alloc(&e[i], MSG);
        th_set1(k->rd, e[i].mh, k->rb, MSG);
        CHECK(VipPostRecv(k->vi, k->rd, e[i].mh));
        th_addr ra;
        mp_mkaddr(&ra, srv, alen, DISC);
        uint64_t t0 = th_now_ms();
        VIP_RETURN r = VipConnectRequest(k->vi, NULL, &ra.a, 5000, NULL);
        if (r == VIP_SUCCESS) {
            ok[i] = 1;
            n++;
        } else if (r == VIP_ERROR_RESOURCE) {
            if (refused++ == 0)
                printf("mp_many: client %d: VIP_ERROR_RESOURCE after %llu ms\n", i,
                       (unsigned long long)(th_now_ms() - t0));
        } else {
            FATAL("client %d: VipConnectRequest -> %s after %llu ms (%d connected before it)", i, th_rs(r),
                  (unsigned long long)(th_now_ms() - t0), n);
        }
    }
    printf("mp_many: %d clients connected, %d refused\n", n, refused);
    char v[16];
    snprintf(v, sizeof v, "%d", n);
    if (sv_boot_put("many-connected", v, strlen(v)) != 0) FATAL("sv_boot_put");

    th_phase("messages");
    for (int i = 0; i < clients; i++) {
        if (!ok[i]) continue;
        th_fill(c[i].sb, MSG, (uint32_t)i);
        th_set1(c[i].sd, e[i].mh, c[i].sb, MSG);
        CHECK(VipPostSend(c[i].vi, c[i].sd, e[i].mh));
        th_send_done_must(c[i].vi, c[i].sd, "client send");
    }
    for (int i = 0; i < clients; i++) {
        if (!ok[i]) continue;
        th_recv_done_must(c[i].vi, c[i].rd, "echo");
        if ((c[i].rd->CS.Status & VIP_STATUS_ERROR_MASK) || th_verify(c[i].rb, MSG, (uint32_t)i) >= 0)
            FATAL("client %d: bad echo (status 0x%x)", i, c[i].rd->CS.Status);
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier after the echoes");
    th_phase("close");
    for (int i = 0; i < clients; i++) th_close_env(&e[i]);
    free(e);
    free(c);
    free(ok);
}

int main(int argc, char **argv) {
    int clients = 300, expect = -1;
    long nofile = 0;
    const char *server_dev = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nofile")) nofile = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--server-dev")) server_dev = argv[i + 1];
        else if (!strcmp(argv[i], "--expect")) expect = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "mp_many: unknown option %s\n", argv[i]);
            return T_FAIL;
        }
    }
    if (clients < 1) clients = 1;
    mp_init("mp_many", 2, 110);
    /* The client process holds a few fds per NIC. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) FATAL("getrlimit");
    if (mp_rank == 1) {
        rlim_t want = 8 * (rlim_t)clients + 64;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
            printf("mp_many: SKIP: %d client NICs need about %llu fds, the hard limit is %llu\n", clients,
                   (unsigned long long)want, (unsigned long long)rl.rlim_max);
            return T_SKIP;
        }
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) FATAL("setrlimit: %s", strerror(errno));
    } else if (nofile > 0) {
        rl.rlim_cur = (rlim_t)nofile;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) FATAL("setrlimit(%ld): %s", nofile, strerror(errno));
    }
    th_env e;
    if (mp_rank == 0 && server_dev) {
        th_open_env(&e, server_dev, (size_t)clients * 512 + 4096);
    } else {
        mp_open(&e, "inline", mp_rank == 0 ? (size_t)clients * 512 + 4096 : 0);
    }
    mp_addrs ad;
    mp_exchange(&e, &ad);
    if (mp_rank == 0) {
        serve(&e, clients, expect);
    } else {
        th_close_env(&e); /* its NIC only carried the address exchange */
        /* the server listens: else the first client can get VIP_NO_MATCH (mp_churn did) */
        if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("listening barrier");
        clients_main(ad.addr[0], ad.alen, clients);
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("final barrier");
    if (mp_rank == 0) th_close_env(&e);
    return th_result();
}
