/*
 * goro__preempt_resume: where an asynchronously preempted coroutine goes.
 *
 * The SIGURG handler (runtime/sched/preempt.c) copied the kernel's signal frame -
 * x0-x30, sp, pc, pstate, and the FP/SIMD record with q0-q31, FPSR and
 * FPCR - onto the coroutine's stack, and returned here instead of to the
 * interrupted instruction, with
 *   x0 = the copied frame (siginfo, then ucontext), sp = 16-byte aligned
 *   below it.
 * AArch64 has no register free at an arbitrary instruction to branch back
 * through, so the way back is the kernel's: when resumed, rt_sigreturn on
 * the copy restores every register, pc included. The CFI describes the
 * interrupted frame through the copy (held in x19).
 */
/* Offsets from the frame: ucontext at 128, its uc_mcontext at +176; in
 * it regs[] at +8, sp at +256, pc at +264. */

    .text
    .globl goro__preempt_resume
    .hidden goro__preempt_resume
    .type goro__preempt_resume, %function
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column 32
    .cfi_escape 0x0f, 4, 0x83, 0xb0, 0x04, 0x06     /* CFA = *(x19+560): interrupted sp */
    .cfi_escape 0x10, 32, 3, 0x83, 0xb8, 0x04       /* pc at x19+568 */
    .cfi_escape 0x10, 29, 3, 0x83, 0xa0, 0x04       /* x29 at x19+544 */
    .cfi_escape 0x10, 30, 3, 0x83, 0xa8, 0x04       /* x30 at x19+552 */
    .cfi_escape 0x10, 19, 3, 0x83, 0xd0, 0x03       /* x19 at x19+464 */
    nop
goro__preempt_resume:
    hint #34                        /* bti c: a landing pad where BTI is on */
    mov x19, x0
    msr fpcr, xzr                   /* C code: default rounding; the copy keeps the old */
    add x0, x0, #128                /* goro__preempt_park(the copied ucontext) */
    bl goro__preempt_park
    mov sp, x19                     /* the kernel finds its frame at sp */
    mov x8, #139                    /* __NR_rt_sigreturn */
    svc #0
    brk #0
    .cfi_endproc
    .size goro__preempt_resume, . - goro__preempt_resume

    .section .note.GNU-stack, "", %progbits
