/*
 * Cooperative context switch for AArch64 (AAPCS64, Linux).
 *
 * A parked context is its stack pointer. At that address lies the frame
 * this file stores, 176 bytes, 16-byte aligned (the layout is shared with
 * arch/aarch64/ctx_layout.h, the crash reporter and the gdb extension; keep
 * them in step):
 *
 *   sp+0    FPCR (rounding mode, flush-to-zero, ...)   slot 0
 *   sp+8    padding (zero)                             slot 1
 *   sp+16   x19, x20                                   slots 2, 3
 *   sp+32   x21, x22                                   slots 4, 5
 *   sp+48   x23, x24                                   slots 6, 7
 *   sp+64   x25, x26                                   slots 8, 9
 *   sp+80   x27, x28                                   slots 10, 11
 *   sp+96   d8, d9                                     slots 12, 13
 *   sp+112  d10, d11                                   slots 14, 15
 *   sp+128  d12, d13                                   slots 16, 17
 *   sp+144  d14, d15                                   slots 18, 19
 *   sp+160  x29 (frame pointer)                        slot 20
 *   sp+168  x30 (link register: where it resumes)      slot 21
 *   sp+176  the resumed caller's stack pointer
 *
 * x29/x30 at the top form an ordinary AAPCS64 frame record, as the saved
 * rbp / return address do on x86-64. Only what the ABI calls callee-saved
 * is kept (plus FPCR, whose rounding and flush-to-zero modes belong to the
 * running code): everything else is dead across a call anyway. FPSR (the
 * cumulative exception flags, status rather than mode) is not switched:
 * flags raised by one coroutine stay visible to the next on that thread.
 * The upper 64 bits of v8-v15 are not callee-saved.
 */
        .text

/* void *goro__ctx_switch(void **save_sp, void *load_sp, void *value)
 * Saves the running context, stores its sp in *save_sp and resumes the
 * context whose sp is load_sp, whose own goro__ctx_switch call returns
 * value. Returns when something switches back, with that switcher's value
 * (the runtime passes the worker it runs on). */
        .globl  goro__ctx_switch
        .hidden goro__ctx_switch
        .type   goro__ctx_switch, %function
        .p2align 4
goro__ctx_switch:
        .cfi_startproc
        sub     sp, sp, #176
        .cfi_def_cfa_offset 176
        stp     x29, x30, [sp, #160]
        .cfi_offset x29, -16
        .cfi_offset x30, -8
        stp     x19, x20, [sp, #16]
        .cfi_offset x19, -160
        .cfi_offset x20, -152
        stp     x21, x22, [sp, #32]
        .cfi_offset x21, -144
        .cfi_offset x22, -136
        stp     x23, x24, [sp, #48]
        .cfi_offset x23, -128
        .cfi_offset x24, -120
        stp     x25, x26, [sp, #64]
        .cfi_offset x25, -112
        .cfi_offset x26, -104
        stp     x27, x28, [sp, #80]
        .cfi_offset x27, -96
        .cfi_offset x28, -88
        stp     d8, d9, [sp, #96]
        .cfi_offset d8, -80
        .cfi_offset d9, -72
        stp     d10, d11, [sp, #112]
        .cfi_offset d10, -64
        .cfi_offset d11, -56
        stp     d12, d13, [sp, #128]
        .cfi_offset d12, -48
        .cfi_offset d13, -40
        stp     d14, d15, [sp, #144]
        .cfi_offset d14, -32
        .cfi_offset d15, -24
        mrs     x9, fpcr
        stp     x9, xzr, [sp, #0]
        mov     x10, sp
        str     x10, [x0]
        /* From here on the frame described by the CFI is the resumed
         * context's, which has the same layout. There is no red zone and
         * signal frames go below sp, so the frame above sp is safe. */
        mov     sp, x1
        ldr     x10, [sp, #0]
        cmp     x9, x10                 /* writing FPCR can be slow: skip it */
        b.eq    1f                      /* when nothing changes (the rule) */
        msr     fpcr, x10
1:      ldp     x19, x20, [sp, #16]
        ldp     x21, x22, [sp, #32]
        ldp     x23, x24, [sp, #48]
        ldp     x25, x26, [sp, #64]
        ldp     x27, x28, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldp     x29, x30, [sp, #160]
        add     sp, sp, #176
        .cfi_def_cfa_offset 0
        .cfi_restore x19
        .cfi_restore x20
        .cfi_restore x21
        .cfi_restore x22
        .cfi_restore x23
        .cfi_restore x24
        .cfi_restore x25
        .cfi_restore x26
        .cfi_restore x27
        .cfi_restore x28
        .cfi_restore d8
        .cfi_restore d9
        .cfi_restore d10
        .cfi_restore d11
        .cfi_restore d12
        .cfi_restore d13
        .cfi_restore d14
        .cfi_restore d15
        .cfi_restore x29
        .cfi_restore x30
        mov     x0, x2                  /* hand the resumer's value back */
        ret
        .cfi_endproc
        .size   goro__ctx_switch, .-goro__ctx_switch

/* First code a new context runs: goro__ctx_switch "returns" here (through
 * x30) with sp at the top of the fresh stack, x19 = argument and x20 = the
 * C entry function, which never returns. It is the outermost frame: the
 * return address column is undefined and x29 is 0, so unwinders (CFI or
 * frame-pointer based) stop here instead of walking into garbage.
 *
 * The FDE starts one instruction before the symbol: while a fresh context
 * is being resumed, goro__ctx_entry is goro__ctx_switch's return address,
 * and unwinders look a return address up at address - 1 (gdb, libunwind);
 * that must find this outermost FDE, not the end of goro__ctx_switch. The
 * local symbol goro__ctx_fresh names that instruction, so debuggers show
 * "goro__ctx_fresh" as the caller of a context that has not started yet. */
        .globl  goro__ctx_entry
        .hidden goro__ctx_entry
        .type   goro__ctx_entry, %function
        .type   goro__ctx_fresh, %function
        .p2align 4
goro__ctx_fresh:
        .cfi_startproc
        .cfi_undefined x30
        nop
        .size   goro__ctx_fresh, .-goro__ctx_fresh
goro__ctx_entry:
        mov     x29, #0
        mov     x0, x19
        blr     x20
        brk     #0x3e8
        udf     #0
        .cfi_endproc
        .size   goro__ctx_entry, .-goro__ctx_entry

        .section .note.GNU-stack,"",%progbits
