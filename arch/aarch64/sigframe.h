/* The signal frame, as asynchronous preemption reads and redirects it
 * (runtime/sched/preempt.c). AArch64 Linux. */
#ifndef GORO_SIGFRAME_H
#define GORO_SIGFRAME_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#define GORO_RED_ZONE 0
#define GORO_SIGINFO_BYTES 128          /* rt_sigframe: siginfo, then ucontext */
#define GORO_EXTRA_MAGIC 0x45585401u    /* extra_context: state beyond the frame */

_Static_assert(offsetof(ucontext_t, uc_mcontext) == 176, "uc_mcontext offset in preempt.S");
_Static_assert(offsetof(mcontext_t, sp) == 256, "sp offset in preempt.S");
_Static_assert(offsetof(mcontext_t, pc) == 264, "pc offset in preempt.S");

static inline uintptr_t goro__sigframe_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.pc;
}

static inline uintptr_t goro__sigframe_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.sp;
}

/* True if all of the frame's state lies inside it: large SVE state is
 * kept beyond it (extra_context, with absolute pointers), and such a
 * frame is not moved. */
static inline bool goro__sigframe_self_contained(const ucontext_t *uc)
{
    const unsigned char *p = (const unsigned char *)uc->uc_mcontext.__reserved;
    const unsigned char *end = p + sizeof uc->uc_mcontext.__reserved;
    while (p + 8 <= end) {
        uint32_t magic, size;
        memcpy(&magic, p, 4);
        memcpy(&size, p + 4, 4);
        if (magic == 0)
            return true;
        if (magic == GORO_EXTRA_MAGIC || size < 8 || size > (size_t)(end - p))
            return false;
        p += size;
    }
    return false;
}

/* Copies the frame below sp and points uc at resume, which gets the copy
 * in x0. Returns false if the stack has no room above lo. */
static inline bool goro__sigframe_redirect(ucontext_t *uc, uintptr_t lo, size_t margin,
                                           void (*resume)(void),
                                           void (*copy)(void *, const void *, size_t))
{
    if (!goro__sigframe_self_contained(uc))
        return false;
    uintptr_t sp = goro__sigframe_sp(uc);
    uintptr_t frame = (sp - GORO_SIGINFO_BYTES - sizeof(ucontext_t)) & ~(uintptr_t)15;
    uintptr_t new_sp = (frame - 64) & ~(uintptr_t)15;
    if (new_sp < lo + margin)
        return false;
    static const unsigned char no_info[GORO_SIGINFO_BYTES];
    copy((void *)frame, no_info, GORO_SIGINFO_BYTES);
    copy((void *)(frame + GORO_SIGINFO_BYTES), uc, sizeof(ucontext_t));
    uc->uc_mcontext.sp = new_sp;
    uc->uc_mcontext.pc = (uintptr_t)resume;
    uc->uc_mcontext.regs[0] = frame;
    return true;
}

#endif
