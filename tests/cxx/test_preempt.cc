/* Preemption and an executable that holds its own allocator
 * (runtime/sched/preempt.c, docs/preemption.md, "What a safe point is").
 *
 * This program is such an executable when clang links a sanitizer's
 * runtime into it (ASan: malloc, free and operator new are then the
 * executable's code), as a program linked with a static malloc or with
 * -static-libstdc++ is. Its text is then not a safe point: a coroutine
 * suspended inside the allocator, and another on the same thread calling
 * it, would corrupt the thread's allocator cache. Built with gcc, or
 * without a sanitizer, the allocator is libc's and the executable's own
 * code is preemptible as usual; the tests check whichever applies. */
#include "runner.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

/* The object file that holds addr, as dladdr names it (the executable is
 * named as it was started: compare with a function of this file). */
std::string object_of(const void *addr)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fname)
        return "?";
    return info.dli_fname;
}

bool executable_holds_malloc()
{
    void *(*m)(size_t) = std::malloc;
    return object_of(reinterpret_cast<const void *>(m)) ==
           object_of(reinterpret_cast<const void *>(&object_of));
}

/* ---- allocating coroutines that share a worker ---- */

struct churn_run {
    int64_t until;
    std::atomic<long> rounds{0};
};

/* Not marked preemptible: where the executable is a safe point this loop
 * is preempted in its own code, and never inside an allocator that lives
 * in the executable. Each string holds its owner's letter; a chunk
 * handed out twice shows as a letter changed under its owner (or as the
 * sanitizer's report of a double free). */
void churn(churn_run *run, int me)
{
    std::vector<std::string *> held(64, nullptr);
    const char mine = static_cast<char>('a' + me);
    unsigned long x = static_cast<unsigned long>(me) + 1;
    long rounds = 0;
    while (goro_now() < run->until) {
        for (int i = 0; i < 256; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
            size_t slot = (x >> 33) % held.size();
            if (std::string *s = held[slot]) {
                CT_CHECKF(s->find_first_not_of(mine) == std::string::npos,
                          "coroutine %d: a string of its own changed under it", me);
                delete s;
            }
            held[slot] = new std::string(16 + (x >> 20) % 200, mine);
            rounds++;
        }
        /* parks now and then too, so that the coroutines interleave where
         * preemption is off */
        if (rounds % 8192 == 0)
            goro_yield();
    }
    for (std::string *s : held)
        delete s;
    run->rounds.fetch_add(rounds);
}

} // namespace

CT_TEST(allocating_coroutines_preempted_on_one_worker)
{
    ct::start(1, GORO_MSEC);
    churn_run run;
    run.until = goro_now() + (ct::sanitized() ? 1500 : 500) * GORO_MSEC;
    std::vector<goro_t *> hs;
    for (int i = 0; i < 4; i++)
        hs.push_back(go(churn, &run, i));
    for (goro_t *h : hs)
        CT_CHECK(goro_join(h, nullptr) == 0);
    CT_CHECK(run.rounds.load() > 0);
}

namespace {

struct stall_seen {
    std::atomic<int> n{0};
    int why = -1;
    char reason[200] = "";
};

void on_stall(const goro_stall_t *st, void *arg)
{
    auto *s = static_cast<stall_seen *>(arg);
    if (s->n.load() == 0) {
        s->why = st->why;
        std::snprintf(s->reason, sizeof s->reason, "%s", st->reason);
    }
    s->n.fetch_add(1);
}

/* Unmarked code in the executable, computing until the monitor reported
 * it, or for some seconds. It calls nothing (not even the clock, in the
 * vDSO), so the sample finds it in the executable's code. */
void spin_until_reported(stall_seen *seen)
{
    unsigned long x = 1;
    for (long round = 0; round < 50000000 && seen->n.load(std::memory_order_relaxed) == 0; round++)
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
    static std::atomic<unsigned long> sink;
    sink.store(x);
}

} // namespace

/* The stall report says whether the executable's code is a safe point:
 * the slice is off, so nothing ends the stall, and the report gives the
 * verdict for where the coroutine was sampled. */
CT_TEST(executable_holding_an_allocator_is_not_a_safe_point)
{
    if (!ct::async_preemption()) {
        ct::skip("asynchronous preemption is off here");
        return;
    }
    ct::start(1, -1);
    stall_seen seen;
    CT_CHECK(goro_stall_watch(20 * GORO_MSEC, on_stall, &seen) == 0);
    CT_CHECK(goro_join(go(spin_until_reported, &seen), nullptr) == 0);
    CT_CHECK(goro_stall_watch(0, nullptr, nullptr) == 0);
    CT_CHECKF(seen.n.load() >= 1, "no stall report");
    if (executable_holds_malloc()) {
        CT_CHECKF(seen.why == GORO_STALL_FOREIGN, "why %d (%s), want %d: malloc is in the "
                  "executable", seen.why, seen.reason, GORO_STALL_FOREIGN);
        CT_CHECKF(std::strstr(seen.reason, "holds its own allocator"), "%s", seen.reason);
    } else {
        CT_CHECKF(seen.why == GORO_STALL_PREEMPTIBLE, "why %d (%s), want %d", seen.why,
                  seen.reason, GORO_STALL_PREEMPTIBLE);
    }
}
