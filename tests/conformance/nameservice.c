/*
 * nameservice: VipNSInit with a hosts file of "name hexaddr" lines,
 * VipNSGetHostByName / VipNSGetHostByAddr round trips, unknown names and addresses
 * (VIP_ERROR_NAMESERVICE), calls before VipNSInit or after VipNSShutdown
 * (VIP_INVALID_STATE), NameIndex other than 0 (VIP_ERROR_NAMESERVICE), a name buffer
 * that is too small (VIP_ERROR_RESOURCE and the length needed), bad hosts files,
 * and a name resolved this way connects.
 */
#include "helpers.h"

static void hex(char *out, const uint8_t *a, unsigned n) {
    for (unsigned i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", a[i]);
}

int main(void) {
    th_init("nameservice", 0);
    unsetenv("SOFTVIA_JOB_DIR"); /* only the hosts file: nothing from a launcher job */
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
    unsetenv("SOFTVIA_HOSTS");
    th_env e, e2;
    th_open_env(&e, NULL, 1 << 16);
    th_open_env(&e2, NULL, 0);
    char dir[] = "/tmp/softvia-ns-XXXXXX";
    if (!mkdtemp(dir)) FATAL("mkdtemp: %s", strerror(errno));
    char path[256], bad1[256], bad2[256];
    snprintf(path, sizeof path, "%s/hosts", dir);
    snprintf(bad1, sizeof bad1, "%s/bad-hex", dir);
    snprintf(bad2, sizeof bad2, "%s/odd-hex", dir);
    char h1[2 * 64 + 1], h2[2 * 64 + 1]; /* the longest NIC address: 64 bytes */
    hex(h1, e.na.LocalNicAddress, e.na.NicAddressLen);
    hex(h2, e2.na.LocalNicAddress, e2.na.NicAddressLen);
    FILE *f = fopen(path, "w");
    fprintf(f, "# softvia hosts\n\nnode-one %s\nnode-two %s\na-much-longer-host-name-for-buffers %s\n", h1, h2,
            "0102030405");
    fclose(f);
    f = fopen(bad1, "w");
    fprintf(f, "x zz11\n");
    fclose(f);
    f = fopen(bad2, "w");
    fprintf(f, "y 123\n");
    fclose(f);

    th_addr a;
    char name[256];
    VIP_ULONG len;

    th_phase("before VipNSInit");
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_INVALID_STATE);
    th_mkaddr(&a, &e.na, NULL);
    len = sizeof name;
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &a.a, name, &len), VIP_INVALID_STATE);
    EXPECT_RC(VipNSShutdown(e.nic), VIP_INVALID_STATE);

    th_phase("bad hosts files");
    EXPECT_RC(VipNSInit(e.nic, (VIP_PVOID) "/nonexistent/softvia/hosts"), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSInit(e.nic, bad1), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSInit(e.nic, bad2), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_INVALID_STATE);

    th_phase("init and look up");
    EXPECT_RC(VipNSInit(e.nic, path), VIP_SUCCESS);
    memset(&a, 0xee, sizeof a);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_SUCCESS);
    EXPECT(a.a.HostAddressLen == e.na.NicAddressLen &&
               memcmp(a.a.HostAddress, e.na.LocalNicAddress, e.na.NicAddressLen) == 0,
           "node-one resolved to %u bytes that are not the NIC's address", a.a.HostAddressLen);
    EXPECT(a.a.DiscriminatorLen == 0, "DiscriminatorLen %u", a.a.DiscriminatorLen);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-two", &a.a, 0), VIP_SUCCESS);
    EXPECT(a.a.HostAddressLen == e2.na.NicAddressLen &&
               memcmp(a.a.HostAddress, e2.na.LocalNicAddress, e2.na.NicAddressLen) == 0,
           "node-two resolved wrongly");
    len = sizeof name;
    memset(name, 'x', sizeof name);
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &a.a, name, &len), VIP_SUCCESS);
    EXPECT(strcmp(name, "node-two") == 0 && len == strlen("node-two") + 1, "by address: '%.20s' len %llu", name,
           (unsigned long long)len);
    /* a discriminator in the address does not matter for the host */
    th_mkaddr(&a, &e.na, "some-disc");
    len = sizeof name;
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &a.a, name, &len), VIP_SUCCESS);
    EXPECT(strcmp(name, "node-one") == 0, "by address with discriminator: '%.20s'", name);

    th_phase("not found, NameIndex, bad names");
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-three", &a.a, 0), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-on", &a.a, 0), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 1), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 7), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "", &a.a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByName(e.nic, NULL, &a.a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", NULL, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByName(e.nic, "../hosts", &a.a, 0), VIP_INVALID_PARAMETER);
    th_addr unk;
    memset(&unk, 0, sizeof unk);
    unk.a.HostAddressLen = 4;
    memcpy(unk.a.HostAddress, "\x09\x08\x07\x06", 4);
    len = sizeof name;
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &unk.a, name, &len), VIP_ERROR_NAMESERVICE);
    unk.a.HostAddressLen = 0;
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &unk.a, name, &len), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &a.a, NULL, &len), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &a.a, name, NULL), VIP_INVALID_PARAMETER);

    th_phase("small name buffer");
    {
        const char *longname = "a-much-longer-host-name-for-buffers";
        th_addr la;
        memset(&la, 0, sizeof la);
        la.a.HostAddressLen = 5;
        memcpy(la.a.HostAddress, "\x01\x02\x03\x04\x05", 5);
        char small[8];
        memset(small, 'q', sizeof small);
        len = sizeof small;
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &la.a, small, &len), VIP_ERROR_RESOURCE);
        EXPECT(len == strlen(longname) + 1, "needed length reported as %llu, want %zu", (unsigned long long)len,
               strlen(longname) + 1);
        EXPECT(small[0] == 'q', "the too-small buffer was written to");
        /* exactly the size it asked for works */
        char *exact = malloc(len);
        VIP_ULONG l2 = len;
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &la.a, exact, &l2), VIP_SUCCESS);
        EXPECT(strcmp(exact, longname) == 0, "got '%s'", exact);
        free(exact);
        len = strlen(longname); /* one short: no room for the NUL */
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &la.a, name, &len), VIP_ERROR_RESOURCE);
        len = 0;
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &la.a, name, &len), VIP_ERROR_RESOURCE);
    }

    th_phase("per-NIC: the other NIC is not initialised");
    EXPECT_RC(VipNSGetHostByName(e2.nic, "node-one", &a.a, 0), VIP_INVALID_STATE);

    th_phase("a resolved name connects");
    {
        VIP_VI_HANDLE x = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE y = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        th_addr rx, ry, lx, ly;
        CHECK(VipNSGetHostByName(e.nic, "node-one", &rx.a, 0));
        CHECK(VipNSGetHostByName(e.nic, "node-one", &ry.a, 0));
        /* append discriminators to the resolved addresses */
        rx.a.DiscriminatorLen = 2;
        memcpy(rx.a.HostAddress + rx.a.HostAddressLen, "ny", 2);
        ry.a.DiscriminatorLen = 2;
        memcpy(ry.a.HostAddress + ry.a.HostAddressLen, "nx", 2);
        CHECK(VipConnectPeerRequest(x, th_mkaddr(&lx, &e.na, "nx"), &rx.a, TH_WAIT_MS));
        CHECK(VipConnectPeerRequest(y, th_mkaddr(&ly, &e.na, "ny"), &ry.a, TH_WAIT_MS));
        VIP_RETURN r1 = VIP_NOT_DONE, r2 = VIP_NOT_DONE;
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        while ((r1 == VIP_NOT_DONE || r2 == VIP_NOT_DONE) && th_now_ms() < end) {
            if (r1 == VIP_NOT_DONE) r1 = th_peer_done_poll(x);
            if (r2 == VIP_NOT_DONE) r2 = th_peer_done_poll(y);
        }
        EXPECT(r1 == VIP_SUCCESS && r2 == VIP_SUCCESS, "connect by name: %s %s", th_rs(r1), th_rs(r2));
    }

    th_phase("shutdown, re-init");
    EXPECT_RC(VipNSShutdown(e.nic), VIP_SUCCESS);
    EXPECT_RC(VipNSShutdown(e.nic), VIP_INVALID_STATE);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_INVALID_STATE);
    EXPECT_RC(VipNSInit(e.nic, NULL), VIP_SUCCESS); /* no file: an empty table */
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_ERROR_NAMESERVICE);
    setenv("SOFTVIA_HOSTS", path, 1); /* NULL falls back to $SOFTVIA_HOSTS */
    EXPECT_RC(VipNSInit(e.nic, NULL), VIP_SUCCESS);
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-one", &a.a, 0), VIP_SUCCESS);
    unsetenv("SOFTVIA_HOSTS");
    EXPECT_RC(VipNSInit(e.nic, path), VIP_SUCCESS); /* twice: reloads */
    EXPECT_RC(VipNSGetHostByName(e.nic, "node-two", &a.a, 0), VIP_SUCCESS);

    unlink(path);
    unlink(bad1);
    unlink(bad2);
    rmdir(dir);
    th_close_env(&e2);
    th_close_env(&e);
    return th_result();
}
