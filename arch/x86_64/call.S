/*
 * Argument forwarding for go(fn, args...).
 *
 * goro__capture is called through a pointer cast to fn's own type, so the
 * compiler has placed every argument where fn expects it. It stores the
 * argument registers and the first GORO__STACK_ARGS bytes of the caller's
 * stack-argument area in a struct goro_callregs (runtime/internal.h, which
 * checks the offsets below) and hands it to C. goro__invoke later replays them into a call of fn on the
 * coroutine's own stack.
 *
 * struct goro_callregs: gpr[8] at 0 (rdi rsi rdx rcx r8 r9), vec[8][16] at 64
 * (xmm0-xmm7), stack[192] at 192; 384 bytes. goro__capture_regs stores the
 * first 192 (no argument on the stack).
 */
        .text

/* The argument registers into gpr[] and vec[] at (%rsp). */
        .macro  store_arg_regs
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movups  %xmm0, 64(%rsp)
        movups  %xmm1, 80(%rsp)
        movups  %xmm2, 96(%rsp)
        movups  %xmm3, 112(%rsp)
        movups  %xmm4, 128(%rsp)
        movups  %xmm5, 144(%rsp)
        movups  %xmm6, 160(%rsp)
        movups  %xmm7, 176(%rsp)
        .endm

        .globl  goro__capture
        .type   goro__capture, @function
        .p2align 4
goro__capture:
        .cfi_startproc
        subq    $392, %rsp              /* 384 + 8: realigns rsp to 16 */
        .cfi_adjust_cfa_offset 392
        store_arg_regs
        /* the caller's stack arguments, at 400(%rsp), to stack[] at 192 */
        .irp    off, 0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176
        movups  400+\off(%rsp), %xmm0
        movups  %xmm0, 192+\off(%rsp)
        .endr
        movq    %rsp, %rdi
        movl    $1, %esi                /* with the stack window */
        call    goro__capture_store
        addq    $392, %rsp
        .cfi_adjust_cfa_offset -392
        ret
        .cfi_endproc
        .size   goro__capture, .-goro__capture

/* The same for a call whose every argument is in a register (go() decides
 * at compile time): no stack window, half the bytes stored. */
        .globl  goro__capture_regs
        .type   goro__capture_regs, @function
        .p2align 4
goro__capture_regs:
        .cfi_startproc
        subq    $200, %rsp              /* 192 + 8: realigns rsp to 16 */
        .cfi_adjust_cfa_offset 200
        store_arg_regs
        movq    %rsp, %rdi
        xorl    %esi, %esi
        call    goro__capture_store
        addq    $200, %rsp
        .cfi_adjust_cfa_offset -200
        ret
        .cfi_endproc
        .size   goro__capture_regs, .-goro__capture_regs

/* long goro__invoke(const struct goro_callregs *regs, void (*fn)(void), long stack)
 * stack: non-zero when regs->stack must be copied (stack arguments). */
        .globl  goro__invoke
        .hidden goro__invoke
        .type   goro__invoke, @function
        .p2align 4
goro__invoke:
        .cfi_startproc
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbp, 0
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        subq    $192, %rsp
        movq    %rsi, %r10
        movq    %rdi, %r11
        testq   %rdx, %rdx              /* no stack arguments to carry */
        jz      1f
        .irp    off, 0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176
        movups  192+\off(%r11), %xmm0
        movaps  %xmm0, \off(%rsp)
        .endr
1:
        movups  64(%r11), %xmm0
        movups  80(%r11), %xmm1
        movups  96(%r11), %xmm2
        movups  112(%r11), %xmm3
        movups  128(%r11), %xmm4
        movups  144(%r11), %xmm5
        movups  160(%r11), %xmm6
        movups  176(%r11), %xmm7
        movq    0(%r11), %rdi
        movq    8(%r11), %rsi
        movq    16(%r11), %rdx
        movq    24(%r11), %rcx
        movq    32(%r11), %r8
        movq    40(%r11), %r9
        movl    $8, %eax                /* fn may be variadic */
        call    *%r10
        leave
        .cfi_def_cfa %rsp, 8
        ret
        .cfi_endproc
        .size   goro__invoke, .-goro__invoke

        .section .note.GNU-stack,"",@progbits
