/*
 * Address space for coroutine stacks, and the guards below them. One of
 * two modes, chosen at each start of the runtime (goro__stack_guard_init):
 *
 *  - arenas, where the kernel has MADV_GUARD_INSTALL (Linux 6.13): a stack
 *    is a slot of a large read-write mapping, an arena, and its guard is a
 *    guard region inside the slot - no mapping of its own. An arena holds
 *    slots of one size; a size's next arena has as many slots as the size
 *    has so far (at least 4 MiB or one slot, at most 4096 slots or 2 GiB),
 *    so 10^6 stacks of 256 KiB take about 250 mappings and
 *    vm.max_map_count is no limit.
 *  - mprotect, on older kernels or with GORO_STACK_GUARD=mprotect: a
 *    mapping per stack whose low end is mprotect'ed to PROT_NONE, two
 *    kernel mappings per stack.
 *
 * Arenas are chosen only if a guard installed in a test mapping really
 * stops the kernel from reading it (write() from it fails with EFAULT) and
 * survives MADV_DONTNEED: an emulator that accepts the advice and ignores
 * it (qemu-user 7.2 does) gets the mprotect mode.
 *
 * Either way a stack is [map, map + size) with its guard at map, and
 * fault.c tells an overflow by the address alone.
 *
 * The arenas' invariants (under arena_lock):
 *  1. A slot is free - on its arena's free stack, or at or above `bumped`
 *     - or owned by one stack from reserve to release; `live` counts the
 *     owned ones.
 *  2. A slot's guard, once installed, stays until its arena is unmapped
 *     (MADV_DONTNEED keeps guard regions, checked at start). guarded[i] is
 *     written by the slot's owner only, and read by its next owner after
 *     the lock has passed between them.
 *  3. An arena is on its size's `open` list iff it has a free slot.
 *  4. An arena without a live slot is unmapped, unless it is the only one
 *     of its size and small (ARENA_KEEP): spawning coroutines of a size the
 *     pools do not hold maps nothing per spawn, and idle address space
 *     still goes back (RLIMIT_AS).
 * System calls are made outside the lock: by a slot's owner (installing
 * its guard, MADV_DONTNEED) or on an arena no list reaches any more
 * (munmap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "base/env.h"
#include "coro/coro.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102        /* Linux 6.13; glibc 2.36's headers lack it */
#define MADV_GUARD_REMOVE 103
#endif

#define SLOTS_MAX 4096
#define ARENA_BYTES_MIN ((size_t)4 << 20)
#define ARENA_BYTES_MAX ((size_t)2 << 30)
#define ARENA_KEEP ARENA_BYTES_MIN
#define MAP_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK)

struct size_class {
    size_t slot_size, guard;
    struct goro_arena *open;          /* arenas with a free slot */
    size_t slots;                     /* in all its arenas */
    int arenas;
    struct size_class *next;
};

struct arena_link {
    struct goro_arena *prev, *next;
};

struct goro_arena {
    char *base;
    struct size_class *cls;
    uint32_t nslots, bumped, live, nfree;
    struct arena_link on_open, on_all;   /* cls->open, all_arenas */
    uint32_t *free;                   /* nfree slot numbers, last freed on top */
    uint8_t *guarded;                 /* per slot: its guard is installed */
};

static goro_lock_t arena_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);
static struct size_class *classes;
static struct goro_arena *all_arenas;
static _Atomic bool use_arenas;
static _Atomic long arena_count, arena_live;     /* for goro_dump */

/* ---- the mode ---- */

/* Whether the kernel refuses to read addr: write() from it fails with
 * EFAULT. */
static bool unreadable(const void *addr)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    bool refused = write(fds[1], addr, 1) < 0 && errno == EFAULT;
    close(fds[0]);
    close(fds[1]);
    return refused;
}

/* Whether guard regions work here, and outlive MADV_DONTNEED. */
static bool guard_regions_work(void)
{
    size_t page = goro__page_size();
    char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    bool ok = madvise(m, page, MADV_GUARD_INSTALL) == 0 && unreadable(m) &&
              !unreadable(m + page) && madvise(m, 2 * page, MADV_DONTNEED) == 0 &&
              unreadable(m);
    munmap(m, 2 * page);
    return ok;
}

void goro__stack_guard_init(void)
{
    static const char *const words[] = { "auto", "mprotect" };
    int want = goro__env_word("GORO_STACK_GUARD", words, 2, "auto or mprotect", 0);
    atomic_store(&use_arenas, want == 0 && guard_regions_work());
}

bool goro__stacks_in_arenas(void)
{
    return atomic_load(&use_arenas);
}

void goro__stack_space_counts(long *arenas, long *stacks)
{
    *arenas = atomic_load_explicit(&arena_count, memory_order_relaxed);
    *stacks = atomic_load_explicit(&arena_live, memory_order_relaxed);
}

/* ---- the mprotect mode ---- */

static char *map_alone(size_t size, size_t guard)
{
    char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    if (mprotect(map, guard, PROT_NONE) != 0) {
        int e = errno;
        munmap(map, size);
        errno = e;
        return NULL;
    }
    return map;
}

/* ---- arenas (callers hold arena_lock unless said) ---- */

static struct size_class *class_of(size_t slot_size, size_t guard)
{
    struct size_class *c;
    for (c = classes; c && c->slot_size != slot_size; c = c->next)
        ;
    if (!c && (c = calloc(1, sizeof *c))) {
        c->slot_size = slot_size;
        c->guard = guard;
        c->next = classes;
        classes = c;
    }
    return c;
}

/* The two lists an arena is on, by the offset of its link. */
#define ON_OPEN offsetof(struct goro_arena, on_open)
#define ON_ALL offsetof(struct goro_arena, on_all)

static struct arena_link *link_of(struct goro_arena *a, size_t on)
{
    return (struct arena_link *)((char *)a + on);
}

static void list_push(struct goro_arena **head, struct goro_arena *a, size_t on)
{
    struct arena_link *l = link_of(a, on);
    l->prev = NULL;
    l->next = *head;
    if (l->next)
        link_of(l->next, on)->prev = a;
    *head = a;
}

static void list_remove(struct goro_arena **head, struct goro_arena *a, size_t on)
{
    struct arena_link *l = link_of(a, on);
    if (l->prev)
        link_of(l->prev, on)->next = l->next;
    else
        *head = l->next;
    if (l->next)
        link_of(l->next, on)->prev = l->prev;
}

static bool has_free_slot(const struct goro_arena *a)
{
    return a->nfree || a->bumped < a->nslots;
}

/* Takes a free slot of a (which has one). */
static uint32_t slot_take(struct goro_arena *a)
{
    uint32_t i = a->nfree ? a->free[--a->nfree] : a->bumped++;
    a->live++;
    if (!has_free_slot(a))
        list_remove(&a->cls->open, a, ON_OPEN);
    return i;
}

static size_t arena_bytes(const struct goro_arena *a)
{
    return (size_t)a->nslots * a->cls->slot_size;
}

/* Whether a stays mapped without a live slot (4). */
static bool kept_empty(const struct goro_arena *a)
{
    return a->cls->arenas == 1 && arena_bytes(a) <= ARENA_KEEP;
}

/* Gives slot i back; returns a when that left it to be unmapped (4). */
static struct goro_arena *slot_give(struct goro_arena *a, uint32_t i)
{
    if (!has_free_slot(a))
        list_push(&a->cls->open, a, ON_OPEN);
    a->free[a->nfree++] = i;
    a->live--;
    if (a->live || kept_empty(a))
        return NULL;
    list_remove(&a->cls->open, a, ON_OPEN);
    list_remove(&all_arenas, a, ON_ALL);
    a->cls->arenas--;
    a->cls->slots -= a->nslots;
    return a;
}

static void arena_unmap(struct goro_arena *a)
{
    munmap(a->base, arena_bytes(a));
    atomic_fetch_sub_explicit(&arena_count, 1, memory_order_relaxed);
    free(a);
}

/* Without the lock: a new arena of about `want` slots of slot_size bytes
 * (within the bounds above), fewer when the address space is short; NULL
 * (errno) if not even one slot fits. */
static struct goro_arena *arena_map(size_t slot_size, size_t want)
{
    size_t bytes = want * slot_size;
    bytes = bytes < ARENA_BYTES_MIN ? ARENA_BYTES_MIN : bytes > ARENA_BYTES_MAX ? ARENA_BYTES_MAX : bytes;
    size_t n = bytes / slot_size;
    n = n < 1 ? 1 : n > SLOTS_MAX ? SLOTS_MAX : n;
    char *base;
    for (;;) {
        base = mmap(NULL, n * slot_size, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
        if (base != MAP_FAILED)
            break;
        if (errno != ENOMEM || n == 1)
            return NULL;
        n /= 2;
    }
    struct goro_arena *a = calloc(1, sizeof *a + n * (sizeof(uint32_t) + 1));
    if (!a) {
        munmap(base, n * slot_size);
        errno = ENOMEM;
        return NULL;
    }
    a->base = base;
    a->nslots = (uint32_t)n;
    a->free = (uint32_t *)(a + 1);
    a->guarded = (uint8_t *)(a->free + n);
    atomic_fetch_add_explicit(&arena_count, 1, memory_order_relaxed);
    return a;
}

/* A slot of slot_size bytes with its guard, or NULL (errno). */
static char *arena_reserve(size_t slot_size, size_t guard, struct goro_arena **arena)
{
    goro__lock(&arena_lock);
    struct size_class *c = class_of(slot_size, guard);
    while (c && !c->open) {
        size_t want = c->slots;
        goro__unlock(&arena_lock);
        struct goro_arena *fresh = arena_map(slot_size, want);
        if (!fresh)
            return NULL;
        goro__lock(&arena_lock);
        fresh->cls = c;
        c->arenas++;
        c->slots += fresh->nslots;
        list_push(&c->open, fresh, ON_OPEN);
        list_push(&all_arenas, fresh, ON_ALL);
    }
    if (!c) {
        goro__unlock(&arena_lock);
        errno = ENOMEM;
        return NULL;
    }
    struct goro_arena *a = c->open;
    uint32_t i = slot_take(a);
    goro__unlock(&arena_lock);
    char *map = a->base + (size_t)i * slot_size;
    if (!a->guarded[i]) {
        if (madvise(map, guard, MADV_GUARD_INSTALL) != 0 &&
            mprotect(map, guard, PROT_NONE) != 0) {   /* mlock'ed since start */
            int e = errno;
            goro__lock(&arena_lock);
            struct goro_arena *gone = slot_give(a, i);
            goro__unlock(&arena_lock);
            if (gone)
                arena_unmap(gone);
            errno = e;
            return NULL;
        }
        a->guarded[i] = 1;
    }
    atomic_fetch_add_explicit(&arena_live, 1, memory_order_relaxed);
    *arena = a;
    return map;
}

static void arena_release(char *map, struct goro_arena *a)
{
    size_t slot_size = a->cls->slot_size;
    uint32_t i = (uint32_t)((map - a->base) / slot_size);
    /* The slot's memory goes back before the slot does (another owner
     * would use it), unless the arena goes as a whole. */
    goro__lock(&arena_lock);
    struct goro_arena *gone = a->live == 1 && !kept_empty(a) ? slot_give(a, i) : NULL;
    goro__unlock(&arena_lock);
    if (!gone) {
        madvise(map, slot_size, MADV_DONTNEED);      /* the guard stays (2) */
        goro__lock(&arena_lock);
        gone = slot_give(a, i);
        goro__unlock(&arena_lock);
    }
    atomic_fetch_sub_explicit(&arena_live, 1, memory_order_relaxed);
    if (gone)
        arena_unmap(gone);
}

/* ---- the contract with stack.c ---- */

char *goro__stack_reserve(size_t size, size_t guard, struct goro_arena **arena)
{
    *arena = NULL;
    if (atomic_load_explicit(&use_arenas, memory_order_relaxed))
        return arena_reserve(size, guard, arena);
    return map_alone(size, guard);
}

void goro__stack_release(char *map, size_t size, struct goro_arena *arena)
{
    if (arena)
        arena_release(map, arena);
    else
        munmap(map, size);
}

/* At shutdown, every stack released: unmaps the arenas kept (4). */
void goro__stack_space_free(void)
{
    goro__lock(&arena_lock);
    struct size_class *c = classes;
    classes = NULL;
    all_arenas = NULL;
    goro__unlock(&arena_lock);
    while (c) {
        struct goro_arena *a;
        while ((a = c->open)) {
            list_remove(&c->open, a, ON_OPEN);
            arena_unmap(a);
        }
        struct size_class *next = c->next;
        free(c);
        c = next;
    }
}

/* For gdb, with every thread stopped (the extension's hooks around
 * generate-core-file and gcore): lift every guard region (lift = 1) - gdb
 * cannot read one, and leaves the whole 1 MiB it reads at a time out of
 * the core - or put them back (0). No lock is taken: a stopped thread may
 * hold arena_lock. Returns the number of arenas. The kernel's own cores
 * need none of this: it writes a guard region as zeros. */
__attribute__((used, noinline)) long goro__arena_guards(int lift)
{
    long n = 0;
    for (struct goro_arena *a = all_arenas; a; a = a->on_all.next, n++) {
        size_t size = a->cls->slot_size;
        if (lift) {
            madvise(a->base, arena_bytes(a), MADV_GUARD_REMOVE);
            continue;
        }
        for (uint32_t i = 0; i < a->bumped; i++)
            if (a->guarded[i])
                madvise(a->base + (size_t)i * size, a->cls->guard, MADV_GUARD_INSTALL);
    }
    return n;
}

void goro__stack_space_each(void (*fn)(const void *lo, size_t len, void *arg), void *arg)
{
    goro__lock(&arena_lock);
    for (struct goro_arena *a = all_arenas; a; a = a->on_all.next)
        fn(a->base, arena_bytes(a), arg);
    goro__unlock(&arena_lock);
}
