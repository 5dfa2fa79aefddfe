/*
 * Cooperative context switch for x86-64 (System V ABI).
 *
 * A parked context is its stack pointer. At that address lies the frame
 * this file pushes (the layout is shared with ctx_layout.h, the crash
 * reporter and the gdb extension; keep them in step):
 *
 *   sp+0   MXCSR (4 bytes), x87 control word (2 bytes), padding (2 bytes)
 *   sp+8   r15
 *   sp+16  r14
 *   sp+24  r13
 *   sp+32  r12
 *   sp+40  rbx
 *   sp+48  rbp
 *   sp+56  return address (where the context resumes)
 *   sp+64  the resumed caller's stack pointer
 *
 * Only what the ABI calls callee-saved is kept: everything else is dead
 * across a call anyway, so a switch costs little more than a call.
 */
        .text

/* void *goro__ctx_switch(void **save_sp, void *load_sp, void *value)
 * Saves the running context, stores its sp in *save_sp and resumes the
 * context whose sp is load_sp, whose own goro__ctx_switch call returns
 * value. Returns when something switches back, with that switcher's value
 * (the runtime passes the worker it runs on). */
        .globl  goro__ctx_switch
        .hidden goro__ctx_switch
        .type   goro__ctx_switch, @function
        .p2align 4
goro__ctx_switch:
        .cfi_startproc
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbp, 0
        pushq   %rbx
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbx, 0
        pushq   %r12
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r12, 0
        pushq   %r13
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r13, 0
        pushq   %r14
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r14, 0
        pushq   %r15
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %r15, 0
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movq    %rsp, (%rdi)
        /* From here on the frame described by the CFI is the resumed
         * context's, which has the same layout. */
        movq    %rsi, %rsp
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %r15
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r15
        popq    %r14
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r14
        popq    %r13
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r13
        popq    %r12
        .cfi_adjust_cfa_offset -8
        .cfi_restore %r12
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        .cfi_restore %rbx
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        .cfi_restore %rbp
        movq    %rdx, %rax              /* hand the resumer's value back */
        /* `ret`, not pop + jmp: the runtime suspends every coroutine at the
         * same call site, so the return predictor's guess is right and the
         * returns that follow stay balanced (measured: yield 17 ns with ret,
         * 30 ns with jmp). */
        ret
        .cfi_endproc
        .size   goro__ctx_switch, .-goro__ctx_switch

/* First code a new context runs: goro__ctx_switch "returns" here with
 * r12 = argument and r13 = the C entry function, which never returns.
 * It is the outermost frame: the return address column is undefined, so
 * unwinders stop here instead of walking into garbage. Unwinders look a
 * return address up at address - 1; for a context not started yet that is
 * the nop under goro__ctx_fresh, which this same outermost FDE covers. */
        .globl  goro__ctx_entry
        .hidden goro__ctx_entry
        .type   goro__ctx_entry, @function
        .type   goro__ctx_fresh, @function
        .p2align 4
goro__ctx_fresh:
        .cfi_startproc
        .cfi_undefined %rip
        nop
        .size   goro__ctx_fresh, .-goro__ctx_fresh
goro__ctx_entry:
        xorl    %ebp, %ebp
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .cfi_endproc
        .size   goro__ctx_entry, .-goro__ctx_entry

        .section .note.GNU-stack,"",@progbits
