/*
 * nicinfo_target READY_FILE: a process for softvia-nicinfo to look at. Opens a NIC
 * (inline progress: nothing runs while we sleep), connects two of its own VIs peer to
 * peer (RR), sends 10 messages from VI a to VI b, makes 3 NIC fetch-adds from a on b's
 * memory (the atomics offload's counters), leaves a third VI idle, writes "ready" to
 * READY_FILE and sleeps until killed.
 */
#include <vipl.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK(x)                                                                           \
    do {                                                                                \
        VIP_RETURN r_ = (x);                                                            \
        if (r_ != VIP_SUCCESS) {                                                        \
            fprintf(stderr, "nicinfo_target: %s:%d %s -> %s\n", __FILE__, __LINE__, #x, \
                    VipExtReturnString(r_));                                            \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

#define NMSG 10

static void make_addr(VIP_NET_ADDRESS *a, const VIP_NIC_ATTRIBUTES *na, char disc) {
    a->HostAddressLen = na->NicAddressLen;
    memcpy(a->HostAddress, na->LocalNicAddress, na->NicAddressLen);
    a->DiscriminatorLen = 1;
    a->HostAddress[na->NicAddressLen] = (VIP_UINT8)disc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: nicinfo_target READY_FILE\n");
        return 2;
    }
    VIP_EXT_NIC_OPTIONS opt = {VIP_EXT_PROGRESS_INLINE};
    VIP_NIC_HANDLE nic;
    CK(VipExtOpenNic("shm", &opt, &nic));
    VIP_NIC_ATTRIBUTES na;
    CK(VipQueryNic(nic, &na));
    VIP_PROTECTION_HANDLE pt;
    CK(VipCreatePtag(nic, &pt));
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_RELIABLE_RECEPTION;
    va.Ptag = pt;
    va.EnableRdmaWrite = VIP_TRUE; /* atomics are checked as RDMA writes */
    VIP_VI_HANDLE a, b, idle;
    CK(VipCreateVi(nic, &va, NULL, NULL, &a));
    CK(VipCreateVi(nic, &va, NULL, NULL, &b));
    CK(VipCreateVi(nic, &va, NULL, NULL, &idle));

    static _Alignas(8) char abuf[sizeof(VIP_NET_ADDRESS) + 192], bbuf[sizeof(VIP_NET_ADDRESS) + 192];
    VIP_NET_ADDRESS *la = (VIP_NET_ADDRESS *)abuf, *lb = (VIP_NET_ADDRESS *)bbuf;
    make_addr(la, &na, 'a');
    make_addr(lb, &na, 'b');
    CK(VipConnectPeerRequest(a, la, lb, 5000));
    CK(VipConnectPeerRequest(b, lb, la, 5000));
    CK(VipConnectPeerWait(a, NULL));
    CK(VipConnectPeerWait(b, NULL));

    size_t len = 1 << 16;
    char *mem = aligned_alloc(4096, len);
    if (!mem) return 1;
    memset(mem, 0, len);
    VIP_MEM_ATTRIBUTES ma;
    memset(&ma, 0, sizeof ma);
    ma.Ptag = pt;
    ma.EnableRdmaWrite = VIP_TRUE;
    VIP_MEM_HANDLE mh;
    CK(VipRegisterMem(nic, mem, len, &ma, &mh));
    CK(VipExtSetMemAtomics(nic, mem, mh, VIP_TRUE));
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)mem, *rd = (VIP_DESCRIPTOR *)(mem + 256);
    char *sbuf = mem + 4096, *rbuf = mem + 8192;
    for (int i = 0; i < NMSG; i++) {
        memset(rd, 0, 64);
        rd->CS.SegCount = 1;
        rd->DS[0].Local.Data.Address = rbuf;
        rd->DS[0].Local.Handle = mh;
        rd->DS[0].Local.Length = 4096;
        CK(VipPostRecv(b, rd, mh));
        snprintf(sbuf, 64, "message %d", i);
        memset(sd, 0, 64);
        sd->CS.SegCount = 1;
        sd->DS[0].Local.Data.Address = sbuf;
        sd->DS[0].Local.Handle = mh;
        sd->DS[0].Local.Length = 100;
        CK(VipPostSend(a, sd, mh));
        VIP_DESCRIPTOR *d;
        CK(VipRecvWait(b, 5000, &d));
        if (d != rd || (d->CS.Status & VIP_STATUS_ERROR_MASK) || strcmp(rbuf, sbuf) != 0) {
            fprintf(stderr, "nicinfo_target: bad receive %d (status %x)\n", i, d->CS.Status);
            return 1;
        }
        CK(VipSendWait(a, 5000, &d));
        if (d != sd || d->CS.Status != VIP_STATUS_DONE) {
            fprintf(stderr, "nicinfo_target: bad send %d (status %x)\n", i, d->CS.Status);
            return 1;
        }
    }

    /* Three fetch-adds of 1 on a word of the (same) registered memory, through VI a. */
    volatile VIP_UINT64 *word = (volatile VIP_UINT64 *)(mem + 12288);
    VIP_UINT64 *result = (VIP_UINT64 *)(mem + 12296);
    VIP_EXT_ATOMIC_DESCRIPTOR *ad = (VIP_EXT_ATOMIC_DESCRIPTOR *)(mem + 512);
    for (int i = 0; i < 3; i++) {
        memset(ad, 0, sizeof *ad);
        ad->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | VIP_EXT_CONTROL_ATOMIC_FETCH_ADD;
        ad->CS.SegCount = 3;
        ad->Remote.Data.Address = (VIP_PVOID)word;
        ad->Remote.Handle = mh;
        ad->Args.Operand = 1;
        ad->Result.Data.Address = result;
        ad->Result.Handle = mh;
        ad->Result.Length = 8;
        CK(VipPostSend(a, (VIP_DESCRIPTOR *)ad, mh));
        VIP_DESCRIPTOR *d;
        CK(VipSendWait(a, 5000, &d));
        if (d != (VIP_DESCRIPTOR *)ad || (d->CS.Status & VIP_STATUS_ERROR_MASK) || *result != (VIP_UINT64)i) {
            fprintf(stderr, "nicinfo_target: bad fetch-add %d (status %x, old value %llu)\n", i, d->CS.Status,
                    (unsigned long long)*result);
            return 1;
        }
    }
    if (*word != 3) {
        fprintf(stderr, "nicinfo_target: the word is %llu after 3 fetch-adds\n", (unsigned long long)*word);
        return 1;
    }

    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "ready\n") < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    for (;;) pause(); /* until killed */
}
