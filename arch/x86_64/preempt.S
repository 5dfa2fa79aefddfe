/*
 * goro__preempt_resume: where an asynchronously preempted coroutine goes.
 *
 * The SIGURG handler (runtime/sched/preempt.c) copied the kernel's signal frame -
 * every general register, the flags and the complete XSAVE state, sized by
 * the kernel from CPUID - onto the coroutine's stack below the red zone,
 * and returned here instead of to the interrupted instruction, with
 *   %rdi = the copied ucontext, %rsp = 16-byte aligned below the copy.
 * We yield to the scheduler like any switch; when resumed, rt_sigreturn on
 * the copy restores every register exactly and continues the interrupted
 * code. The CFI describes the interrupted frame through the copy (held in
 * %rbx), so debuggers and libunwind see through the preemption.
 */

/* Offsets in ucontext_t: uc_mcontext.gregs[] starts at 40. */
#define UC_RIP 168
#define UC_RSP 160

    .text
    .globl goro__preempt_resume
    .hidden goro__preempt_resume
    .type goro__preempt_resume, @function
    .cfi_startproc simple
    .cfi_signal_frame
    /* CFA = the interrupted %rsp, read from the copy at %rbx. */
    .cfi_escape 0x0f, 4, 0x73, 0xa0, 0x01, 0x06     /* DW_CFA_def_cfa_expression: *(rbx+160) */
    .cfi_escape 0x10, 16, 3, 0x73, 0xa8, 0x01       /* rip at rbx+168 */
    .cfi_escape 0x10, 6, 3, 0x73, 0xf8, 0x00        /* rbp at rbx+120 */
    .cfi_escape 0x10, 3, 3, 0x73, 0x80, 0x01        /* rbx at rbx+128 */
    .cfi_escape 0x10, 12, 3, 0x73, 0xc8, 0x00       /* r12 at rbx+72 */
    .cfi_escape 0x10, 13, 3, 0x73, 0xd0, 0x00       /* r13 at rbx+80 */
    .cfi_escape 0x10, 14, 3, 0x73, 0xd8, 0x00       /* r14 at rbx+88 */
    .cfi_escape 0x10, 15, 3, 0x73, 0xe0, 0x00       /* r15 at rbx+96 */
    nop                             /* unwinders look up pc-1 from the caller */
goro__preempt_resume:
    movq %rdi, %rbx
    /* C code expects the ABI's state at a call: an empty x87 stack (the
     * interrupted code may have filled it) and default control words.
     * The interrupted state is safe in the copy. */
    fninit
    ldmxcsr default_mxcsr(%rip)
    call goro__preempt_park         /* (the copied ucontext, still in %rdi) */
    movq %rbx, %rsp                 /* the kernel finds its frame at rsp - 8 */
    movl $15, %eax                  /* __NR_rt_sigreturn */
    syscall
    ud2
    .cfi_endproc
    .size goro__preempt_resume, . - goro__preempt_resume

    .section .rodata
    .p2align 2
default_mxcsr:
    .long 0x1f80

    .section .note.GNU-stack, "", @progbits
