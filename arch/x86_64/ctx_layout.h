/* Layout of a parked context on x86-64: see switch.S. Shared by the runtime
 * (to build a new context and to read a parked one), the crash reporter and
 * the gdb extension (through the exported goro_debug description, runtime/debug/registry.c). */
#ifndef GORO_ARCH_CTX_LAYOUT_H
#define GORO_ARCH_CTX_LAYOUT_H

#include <stdint.h>
#include <string.h>

#define GORO_ARCH_NAME "x86_64"
#define GORO_CTX_FRAME_WORDS 8          /* words pushed by goro__ctx_switch */
#define GORO_CTX_SLOT_FPCTL 0           /* MXCSR | x87 control word << 32 */
#define GORO_CTX_SLOT_R15 1
#define GORO_CTX_SLOT_R14 2
#define GORO_CTX_SLOT_R13 3
#define GORO_CTX_SLOT_R12 4
#define GORO_CTX_SLOT_RBX 5
#define GORO_CTX_SLOT_FP 6              /* rbp */
#define GORO_CTX_SLOT_PC 7              /* return address */

void goro__ctx_entry(void);

/* Builds a context at the top of a fresh stack that starts entry(arg) on
 * its first resume. top must be 16-byte aligned. Returns the context's sp. */
static inline void *goro__ctx_make(void *top, void (*entry)(void *), void *arg)
{
    uint64_t *sp = (uint64_t *)top - GORO_CTX_FRAME_WORDS;
    memset(sp, 0, GORO_CTX_FRAME_WORDS * sizeof *sp);
    sp[GORO_CTX_SLOT_FPCTL] = 0x1f80u | ((uint64_t)0x037fu << 32); /* ABI defaults */
    sp[GORO_CTX_SLOT_R12] = (uint64_t)(uintptr_t)arg;
    sp[GORO_CTX_SLOT_R13] = (uint64_t)(uintptr_t)entry;
    sp[GORO_CTX_SLOT_PC] = (uint64_t)(uintptr_t)goro__ctx_entry;
    return sp;
}

#endif
