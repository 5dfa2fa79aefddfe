/* Test helper: uint64_t goro_test_regs_across(void (*fn)(void), uint64_t seed)
 * Loads every callee-saved general register with a pattern derived from
 * seed, calls fn (which switches coroutines), and returns a bit mask of the
 * registers whose value changed (bit 0 rbx, 1 rbp, 2 r12 ... 5 r15); 0 means
 * all survived. */
        .text
        .globl  goro_test_regs_across
        .type   goro_test_regs_across, @function
goro_test_regs_across:
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
        pushq   %rsi                    /* seed; 8 words pushed: rsp is 16-aligned */
        .cfi_adjust_cfa_offset 8
        movq    %rsi, %rbx
        leaq    1(%rsi), %rbp
        leaq    2(%rsi), %r12
        leaq    3(%rsi), %r13
        leaq    4(%rsi), %r14
        leaq    5(%rsi), %r15
        call    *%rdi
        movq    0(%rsp), %rsi
        xorl    %eax, %eax
        cmpq    %rsi, %rbx
        je      1f
        orq     $1, %rax
1:      incq    %rsi
        cmpq    %rsi, %rbp
        je      1f
        orq     $2, %rax
1:      incq    %rsi
        cmpq    %rsi, %r12
        je      1f
        orq     $4, %rax
1:      incq    %rsi
        cmpq    %rsi, %r13
        je      1f
        orq     $8, %rax
1:      incq    %rsi
        cmpq    %rsi, %r14
        je      1f
        orq     $16, %rax
1:      incq    %rsi
        cmpq    %rsi, %r15
        je      1f
        orq     $32, %rax
1:      addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %r15
        .cfi_adjust_cfa_offset -8
        popq    %r14
        .cfi_adjust_cfa_offset -8
        popq    %r13
        .cfi_adjust_cfa_offset -8
        popq    %r12
        .cfi_adjust_cfa_offset -8
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        ret
        .cfi_endproc
        .size   goro_test_regs_across, .-goro_test_regs_across

        .section .note.GNU-stack,"",@progbits
