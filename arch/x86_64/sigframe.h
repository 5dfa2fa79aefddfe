/* The signal frame, as asynchronous preemption reads and redirects it
 * (runtime/sched/preempt.c). x86-64 Linux. */
#ifndef GORO_SIGFRAME_H
#define GORO_SIGFRAME_H

#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#define GORO_RED_ZONE 128
#define GORO_FP_XSTATE_MAGIC1 0x46505853u

_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]) == 168, "UC_RIP in preempt.S");
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]) == 160, "UC_RSP in preempt.S");
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP]) == 120, "rbp CFI in preempt.S");

static inline uintptr_t goro__sigframe_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

static inline uintptr_t goro__sigframe_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
}

/* Bytes of XSAVE state the kernel stored: its software-reserved words say,
 * when the frame carries extended state; else the legacy 512. */
static inline size_t goro__sigframe_fpsize(const ucontext_t *uc)
{
    const unsigned char *fp = (const unsigned char *)uc->uc_mcontext.fpregs;
    if (!fp)
        return 0;
    uint32_t magic1, extended;
    memcpy(&magic1, fp + 464, 4);
    memcpy(&extended, fp + 468, 4);
    return magic1 == GORO_FP_XSTATE_MAGIC1 && extended >= 512 && extended < 65536 ? extended : 512;
}

/* Copies the frame below sp (past the red zone) and points uc at resume,
 * which gets the copy in %rdi. Returns false if the stack has no room
 * above lo. */
static inline bool goro__sigframe_redirect(ucontext_t *uc, uintptr_t lo, size_t margin,
                                           void (*resume)(void),
                                           void (*copy)(void *, const void *, size_t))
{
    uintptr_t sp = goro__sigframe_sp(uc);
    size_t fpsize = goro__sigframe_fpsize(uc);
    uintptr_t fp_dst = (sp - GORO_RED_ZONE - fpsize) & ~(uintptr_t)63;
    uintptr_t uc_dst = (fp_dst - sizeof(ucontext_t)) & ~(uintptr_t)15;
    uintptr_t new_sp = (uc_dst - 64) & ~(uintptr_t)15;
    if (new_sp < lo + margin)
        return false;
    copy((void *)uc_dst, uc, sizeof(ucontext_t));
    if (fpsize) {
        copy((void *)fp_dst, uc->uc_mcontext.fpregs, fpsize);
        ((ucontext_t *)uc_dst)->uc_mcontext.fpregs = (void *)fp_dst;
    }
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)new_sp;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)resume;
    uc->uc_mcontext.gregs[REG_RDI] = (greg_t)uc_dst;
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x400;   /* DF clear, as a call expects */
    return true;
}

#endif
