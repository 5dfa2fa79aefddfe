/*
 * Argument forwarding for go(fn, args...), AArch64 (AAPCS64, Linux).
 *
 * goro__capture is called through a pointer cast to fn's own type, so the
 * compiler has placed every argument where fn expects it. It stores the
 * argument registers and the first GORO__STACK_ARGS bytes of the caller's
 * stack-argument area in a struct goro_callregs (runtime/internal.h, which
 * checks the offsets below) and hands it to C. goro__invoke later replays them into a call of fn on the
 * coroutine's own stack.
 *
 * struct goro_callregs: gpr[8] at 0 (x0-x7), vec[8][16] at 64 (q0-q7, all
 * 128 bits: long double and HFAs of floats live there), stack[192] at 192;
 * 384 bytes. On Linux variadic arguments are passed exactly like named ones,
 * so variadic functions need nothing more. x8 (indirect result) is not
 * forwarded: go() only accepts functions returning scalars.
 */
        .text

/* The argument registers into gpr[] and vec[] at [sp]. */
        .macro  store_arg_regs
        stp     x0, x1, [sp, #0]
        stp     x2, x3, [sp, #16]
        stp     x4, x5, [sp, #32]
        stp     x6, x7, [sp, #48]
        stp     q0, q1, [sp, #64]
        stp     q2, q3, [sp, #96]
        stp     q4, q5, [sp, #128]
        stp     q6, q7, [sp, #160]
        .endm

/* void goro__capture(<fn's parameters>)
 * Frame (400 bytes): struct goro_callregs at sp+0, frame record x29/x30 at
 * sp+384; the caller's stack arguments start at sp+400. */
        .globl  goro__capture
        .type   goro__capture, %function
        .p2align 4
goro__capture:
        .cfi_startproc
        sub     sp, sp, #400
        .cfi_def_cfa_offset 400
        stp     x29, x30, [sp, #384]
        .cfi_offset x29, -16
        .cfi_offset x30, -8
        add     x29, sp, #384
        store_arg_regs
        /* caller's stack arguments (sp+400) -> stack[] (sp+192); q16-q19
         * are scratch (caller-saved, not argument registers) */
        add     x9, sp, #400
        ldp     q16, q17, [x9, #0]
        ldp     q18, q19, [x9, #32]
        stp     q16, q17, [sp, #192]
        stp     q18, q19, [sp, #224]
        ldp     q16, q17, [x9, #64]
        ldp     q18, q19, [x9, #96]
        stp     q16, q17, [sp, #256]
        stp     q18, q19, [sp, #288]
        ldp     q16, q17, [x9, #128]
        ldp     q18, q19, [x9, #160]
        stp     q16, q17, [sp, #320]
        stp     q18, q19, [sp, #352]
        mov     x0, sp
        mov     w1, #1                  /* with the stack window */
        bl      goro__capture_store
        ldp     x29, x30, [sp, #384]
        add     sp, sp, #400
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        ret
        .cfi_endproc
        .size   goro__capture, .-goro__capture

/* The same for a call whose every argument is in a register (go() decides
 * at compile time): no stack window. Frame (208 bytes): the registers at
 * sp+0, frame record at sp+192. */
        .globl  goro__capture_regs
        .type   goro__capture_regs, %function
        .p2align 4
goro__capture_regs:
        .cfi_startproc
        sub     sp, sp, #208
        .cfi_def_cfa_offset 208
        stp     x29, x30, [sp, #192]
        .cfi_offset x29, -16
        .cfi_offset x30, -8
        add     x29, sp, #192
        store_arg_regs
        mov     x0, sp
        mov     w1, #0
        bl      goro__capture_store
        ldp     x29, x30, [sp, #192]
        add     sp, sp, #208
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        ret
        .cfi_endproc
        .size   goro__capture_regs, .-goro__capture_regs

/* long goro__invoke(const struct goro_callregs *regs, void (*fn)(void), long stack)
 * Frame: frame record x29/x30, below it 192 bytes of outgoing stack
 * arguments, so that fn finds them at its sp exactly as the original call
 * laid them out. x16/x17 (intra-procedure-call scratch) hold fn and regs
 * while the argument registers are loaded. */
        .globl  goro__invoke
        .hidden goro__invoke
        .type   goro__invoke, %function
        .p2align 4
goro__invoke:
        .cfi_startproc
        stp     x29, x30, [sp, #-16]!
        .cfi_def_cfa_offset 16
        .cfi_offset x29, -16
        .cfi_offset x30, -8
        mov     x29, sp
        .cfi_def_cfa_register x29
        sub     sp, sp, #192
        mov     x16, x1
        mov     x17, x0
        cbz     x2, 1f                  /* no stack arguments to carry */
        ldp     q16, q17, [x17, #192]
        ldp     q18, q19, [x17, #224]
        stp     q16, q17, [sp, #0]
        stp     q18, q19, [sp, #32]
        ldp     q16, q17, [x17, #256]
        ldp     q18, q19, [x17, #288]
        stp     q16, q17, [sp, #64]
        stp     q18, q19, [sp, #96]
        ldp     q16, q17, [x17, #320]
        ldp     q18, q19, [x17, #352]
        stp     q16, q17, [sp, #128]
        stp     q18, q19, [sp, #160]
1:      ldp     q0, q1, [x17, #64]
        ldp     q2, q3, [x17, #96]
        ldp     q4, q5, [x17, #128]
        ldp     q6, q7, [x17, #160]
        ldp     x0, x1, [x17, #0]
        ldp     x2, x3, [x17, #16]
        ldp     x4, x5, [x17, #32]
        ldp     x6, x7, [x17, #48]
        blr     x16
        mov     sp, x29
        .cfi_def_cfa_register sp
        ldp     x29, x30, [sp], #16
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        ret
        .cfi_endproc
        .size   goro__invoke, .-goro__invoke

        .section .note.GNU-stack,"",%progbits
