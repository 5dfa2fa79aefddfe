/* Test helper: uint64_t goro_test_regs_across(void (*fn)(void), uint64_t seed)
 * AArch64 twin of tests/arch/x86_64/regs.S. Loads every callee-saved
 * register with a pattern derived from seed, calls fn (which switches
 * coroutines), and returns a bit mask of the registers whose value changed;
 * 0 means all survived:
 *   bit i (0..9)      x19+i, loaded with seed + i
 *   bit 10            x29 (frame pointer): not equal to sp after the call
 *   bit 16+i (16..23) d8+i, loaded with the bits (seed + 16 + i) ^ 0xaaaa...aa
 * sp itself is checked implicitly: the results would be garbage otherwise. */
        .text
        .globl  goro_test_regs_across
        .type   goro_test_regs_across, %function
        .p2align 4
goro_test_regs_across:
        .cfi_startproc
        stp     x29, x30, [sp, #-176]!
        .cfi_def_cfa_offset 176
        .cfi_offset x29, -176
        .cfi_offset x30, -168
        mov     x29, sp
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
        str     x1, [sp, #160]          /* seed */

        mov     x16, x0                 /* fn */
        add     x19, x1, #0
        add     x20, x1, #1
        add     x21, x1, #2
        add     x22, x1, #3
        add     x23, x1, #4
        add     x24, x1, #5
        add     x25, x1, #6
        add     x26, x1, #7
        add     x27, x1, #8
        add     x28, x1, #9
        .macro  SETD reg, off
        add     x9, x1, #\off
        eor     x9, x9, #0xaaaaaaaaaaaaaaaa
        fmov    \reg, x9
        .endm
        SETD    d8, 16
        SETD    d9, 17
        SETD    d10, 18
        SETD    d11, 19
        SETD    d12, 20
        SETD    d13, 21
        SETD    d14, 22
        SETD    d15, 23
        blr     x16

        ldr     x11, [sp, #160]         /* seed */
        mov     x0, #0
        .macro  CHKX reg, off, bit
        add     x12, x11, #\off
        cmp     \reg, x12
        cset    x9, ne
        orr     x0, x0, x9, lsl #\bit
        .endm
        .macro  CHKD reg, off, bit
        add     x12, x11, #\off
        eor     x12, x12, #0xaaaaaaaaaaaaaaaa
        fmov    x13, \reg
        cmp     x13, x12
        cset    x9, ne
        orr     x0, x0, x9, lsl #\bit
        .endm
        CHKX    x19, 0, 0
        CHKX    x20, 1, 1
        CHKX    x21, 2, 2
        CHKX    x22, 3, 3
        CHKX    x23, 4, 4
        CHKX    x24, 5, 5
        CHKX    x25, 6, 6
        CHKX    x26, 7, 7
        CHKX    x27, 8, 8
        CHKX    x28, 9, 9
        mov     x12, sp
        cmp     x29, x12
        cset    x9, ne
        orr     x0, x0, x9, lsl #10
        CHKD    d8, 16, 16
        CHKD    d9, 17, 17
        CHKD    d10, 18, 18
        CHKD    d11, 19, 19
        CHKD    d12, 20, 20
        CHKD    d13, 21, 21
        CHKD    d14, 22, 22
        CHKD    d15, 23, 23

        ldp     x19, x20, [sp, #16]
        ldp     x21, x22, [sp, #32]
        ldp     x23, x24, [sp, #48]
        ldp     x25, x26, [sp, #64]
        ldp     x27, x28, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldp     x29, x30, [sp], #176
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
        ret
        .cfi_endproc
        .size   goro_test_regs_across, .-goro_test_regs_across

        .section .note.GNU-stack,"",%progbits
