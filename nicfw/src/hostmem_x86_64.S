/*
 * hostmem_x86_64.S -- the device's only instructions that touch host (application)
 * memory: a copy, stores, a load and two atomic read-modify-writes (for NIC atomics),
 * each 0 on success or -EFAULT (-14) when the memory is not there or not writable any
 * more.
 *
 * How a fault becomes -EFAULT (hostmem.cc): every function between nicfw_hostmem_begin
 * and nicfw_hostmem_end is a leaf that never touches the stack, so when one faults the
 * SIGSEGV/SIGBUS handler finishes it for it: rax = -EFAULT, then the effect of `ret`
 * (rip = [rsp], rsp += 8). The kernel's copy_from_user works the same way with its
 * exception table; here the table is one address range.
 *
 * Keep it that way: no push, no call, no frame in this range. And no CET shadow stack:
 * the emulated `ret` does not pop it, so this file carries no SHSTK property note (no
 * _CET_ENDBR, no .note.gnu.property), which keeps the whole library without shadow stacks.
 */
    .intel_syntax noprefix
    // .text.hot.*: laid out with the per-message code (nicfw/hot_path.h)
    .section .text.hot.nicfw_hostmem, "ax", @progbits

    .globl nicfw_hostmem_begin
    .hidden nicfw_hostmem_begin
nicfw_hostmem_begin:

/* int nicfw_hm_copy(void *dst, const void *src, size_t n); dst and src do not overlap. */
    .globl nicfw_hm_copy
    .hidden nicfw_hm_copy
    .type nicfw_hm_copy, @function
    .p2align 4
nicfw_hm_copy:
    cmp rdx, 16
    jbe .Lsmall
    cmp rdx, 32
    jbe .L32
    cmp rdx, 2048
    ja .Lrep
    /* 33..2048 bytes: 16-byte moves, the last 16 bytes overlapping the loop's end. */
    movdqu xmm1, [rsi + rdx - 16]
    xor ecx, ecx
1:  movdqu xmm0, [rsi + rcx]
    movdqu [rdi + rcx], xmm0
    add rcx, 16
    lea r8, [rcx + 16]
    cmp r8, rdx
    jb 1b
    movdqu [rdi + rdx - 16], xmm1
    xor eax, eax
    ret
.L32:
    /* 17..32 bytes (a control segment, a few data segments): two overlapping moves. */
    movdqu xmm0, [rsi]
    movdqu xmm1, [rsi + rdx - 16]
    movdqu [rdi], xmm0
    movdqu [rdi + rdx - 16], xmm1
    xor eax, eax
    ret
.Lrep:
    /* Large: the string move (fast strings on every x86-64 of the last decade), except
     * when dst lies 1..63 bytes past src modulo a page: there `rep movsb` runs 20-40x
     * slower on AMD Zen (4 KiB: 4,000-6,000 cycles instead of 120-220, measured on this
     * project's EPYC VMs; Intel has a milder 4K-aliasing penalty there), and which pairs
     * of a sender's buffers and a lane's slots fall in that window depends on where the
     * mappings landed, so a stream ran at 2.5 or 9 GB/s from one run to the next. */
    mov rax, rdi
    sub rax, rsi
    and eax, 4095
    dec eax
    cmp eax, 63
    jb .Lvec64
    mov rcx, rdx
    rep movsb
    xor eax, eax
    ret
.Lvec64:
    /* 64 bytes a turn with four 16-byte moves; the last 64 bytes overlap the loop's end
     * (n > 2048 here). */
    lea r8, [rdx - 64]
    xor ecx, ecx
1:  movdqu xmm0, [rsi + rcx]
    movdqu xmm1, [rsi + rcx + 16]
    movdqu xmm2, [rsi + rcx + 32]
    movdqu xmm3, [rsi + rcx + 48]
    movdqu [rdi + rcx], xmm0
    movdqu [rdi + rcx + 16], xmm1
    movdqu [rdi + rcx + 32], xmm2
    movdqu [rdi + rcx + 48], xmm3
    add rcx, 64
    cmp rcx, r8
    jb 1b
    movdqu xmm0, [rsi + r8]
    movdqu xmm1, [rsi + r8 + 16]
    movdqu xmm2, [rsi + r8 + 32]
    movdqu xmm3, [rsi + r8 + 48]
    movdqu [rdi + r8], xmm0
    movdqu [rdi + r8 + 16], xmm1
    movdqu [rdi + r8 + 32], xmm2
    movdqu [rdi + r8 + 48], xmm3
    xor eax, eax
    ret
.Lsmall:
    /* 0..16 bytes: two possibly overlapping moves of the widest size that fits. */
    cmp edx, 8
    jb .Llt8
    mov rax, [rsi]
    mov rcx, [rsi + rdx - 8]
    mov [rdi], rax
    mov [rdi + rdx - 8], rcx
    xor eax, eax
    ret
.Llt8:
    cmp edx, 4
    jb .Llt4
    mov eax, [rsi]
    mov ecx, [rsi + rdx - 4]
    mov [rdi], eax
    mov [rdi + rdx - 4], ecx
    xor eax, eax
    ret
.Llt4:
    test edx, edx
    jz 2f
    /* 1..3 bytes: first, middle (n/2) and last. */
    mov r9, rdx
    shr r9, 1
    movzx eax, byte ptr [rsi]
    movzx ecx, byte ptr [rsi + r9]
    movzx r8d, byte ptr [rsi + rdx - 1]
    mov [rdi], al
    mov [rdi + r9], cl
    mov [rdi + rdx - 1], r8b
2:  xor eax, eax
    ret
    .size nicfw_hm_copy, . - nicfw_hm_copy

/* int nicfw_hm_store64(void *dst, uint64_t v): one 8-byte store (dst 8-byte aligned, so
 * a reader sees both halves change at once). */
    .globl nicfw_hm_store64
    .hidden nicfw_hm_store64
    .type nicfw_hm_store64, @function
    .p2align 4
nicfw_hm_store64:
    mov [rdi], rsi
    xor eax, eax
    ret
    .size nicfw_hm_store64, . - nicfw_hm_store64

/* uint64_t nicfw_hm_load32(const void *src): the 32-bit value (zero-extended), or
 * -EFAULT, which has bits above 31 set. One plain load: acquire on x86-64. */
    .globl nicfw_hm_load32
    .hidden nicfw_hm_load32
    .type nicfw_hm_load32, @function
    .p2align 4
nicfw_hm_load32:
    mov eax, [rdi]
    ret
    .size nicfw_hm_load32, . - nicfw_hm_load32

/* int nicfw_hm_store32(void *dst, uint32_t v) */
    .globl nicfw_hm_store32
    .hidden nicfw_hm_store32
    .type nicfw_hm_store32, @function
    .p2align 4
nicfw_hm_store32:
    mov [rdi], esi
    xor eax, eax
    ret
    .size nicfw_hm_store32, . - nicfw_hm_store32

/* int nicfw_hm_fadd64(uint64_t *dst, uint64_t add, uint64_t *old): one locked
 * fetch-and-add on host memory (dst 8-byte aligned); *old (device memory) gets the
 * value before. A fault leaves dst and *old untouched. */
    .globl nicfw_hm_fadd64
    .hidden nicfw_hm_fadd64
    .type nicfw_hm_fadd64, @function
    .p2align 4
nicfw_hm_fadd64:
    lock xadd [rdi], rsi
    mov [rdx], rsi
    xor eax, eax
    ret
    .size nicfw_hm_fadd64, . - nicfw_hm_fadd64

/* int nicfw_hm_cas64(uint64_t *dst, uint64_t expect, uint64_t desired, uint64_t *old):
 * one locked compare-and-swap on host memory (dst 8-byte aligned); *old gets the value
 * found (== expect when the swap happened). A fault leaves dst and *old untouched. */
    .globl nicfw_hm_cas64
    .hidden nicfw_hm_cas64
    .type nicfw_hm_cas64, @function
    .p2align 4
nicfw_hm_cas64:
    mov rax, rsi
    lock cmpxchg [rdi], rdx
    mov [rcx], rax
    xor eax, eax
    ret
    .size nicfw_hm_cas64, . - nicfw_hm_cas64

    .globl nicfw_hostmem_end
    .hidden nicfw_hostmem_end
nicfw_hostmem_end:

    .section .note.GNU-stack, "", @progbits
