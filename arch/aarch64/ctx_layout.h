/* Layout of a parked context on AArch64: see switch.S. Shared by the runtime
 * (to build a new context and to read a parked one), the crash reporter and
 * the gdb extension (through the exported goro_debug description, runtime/debug/registry.c). */
#ifndef GORO_ARCH_CTX_LAYOUT_H
#define GORO_ARCH_CTX_LAYOUT_H

#include <stdint.h>
#include <string.h>

#define GORO_ARCH_NAME "aarch64"
#define GORO_CTX_FRAME_WORDS 22         /* words stored by goro__ctx_switch */
#define GORO_CTX_SLOT_FPCTL 0           /* FPCR */
#define GORO_CTX_SLOT_FPCR 0
#define GORO_CTX_SLOT_PAD 1             /* zero */
#define GORO_CTX_SLOT_X19 2
#define GORO_CTX_SLOT_X20 3
#define GORO_CTX_SLOT_X21 4
#define GORO_CTX_SLOT_X22 5
#define GORO_CTX_SLOT_X23 6
#define GORO_CTX_SLOT_X24 7
#define GORO_CTX_SLOT_X25 8
#define GORO_CTX_SLOT_X26 9
#define GORO_CTX_SLOT_X27 10
#define GORO_CTX_SLOT_X28 11
#define GORO_CTX_SLOT_D8 12             /* d8..d15 in slots 12..19 */
#define GORO_CTX_SLOT_D9 13
#define GORO_CTX_SLOT_D10 14
#define GORO_CTX_SLOT_D11 15
#define GORO_CTX_SLOT_D12 16
#define GORO_CTX_SLOT_D13 17
#define GORO_CTX_SLOT_D14 18
#define GORO_CTX_SLOT_D15 19
#define GORO_CTX_SLOT_X29 20
#define GORO_CTX_SLOT_X30 21
#define GORO_CTX_SLOT_FP GORO_CTX_SLOT_X29  /* frame pointer */
#define GORO_CTX_SLOT_PC GORO_CTX_SLOT_X30  /* link register: resume address */

_Static_assert(GORO_CTX_FRAME_WORDS % 2 == 0, "sp must stay 16-byte aligned");

void goro__ctx_entry(void);

/* Builds a context at the top of a fresh stack that starts entry(arg) on
 * its first resume (x19 = arg, x20 = entry, x30 = goro__ctx_entry, FPCR and
 * x29 zero: the AAPCS64 defaults and the end of the frame chain). top must
 * be 16-byte aligned; after the first switch into it sp == top. Returns the
 * context's sp. */
static inline void *goro__ctx_make(void *top, void (*entry)(void *), void *arg)
{
    uint64_t *sp = (uint64_t *)top - GORO_CTX_FRAME_WORDS;
    memset(sp, 0, GORO_CTX_FRAME_WORDS * sizeof *sp);
    sp[GORO_CTX_SLOT_FPCR] = 0;         /* round to nearest, no FZ/DN/AHP */
    sp[GORO_CTX_SLOT_X19] = (uint64_t)(uintptr_t)arg;
    sp[GORO_CTX_SLOT_X20] = (uint64_t)(uintptr_t)entry;
    sp[GORO_CTX_SLOT_FP] = 0;
    sp[GORO_CTX_SLOT_PC] = (uint64_t)(uintptr_t)goro__ctx_entry;
    return sp;
}

#endif
