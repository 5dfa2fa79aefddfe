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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace {

/* Whether this program's allocator is part of the executable: clang links
 * a sanitizer's runtime (ASan, TSan, MSan) into the executable, gcc links
 * the shared libasan or libtsan; nothing else these builds link defines
 * malloc. Decided by how the program was built, not by the lookup the
 * runtime makes, so that the tests check that lookup. */
constexpr bool executable_holds_malloc()
{
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
    return true;
#endif
#endif
    return false;
}

/* malloc's address, taken in code: in the build without PIE
 * (goro_cxx_tests_nopie) the executable then gets a stub for malloc in
 * its PLT, exported under malloc's name, and dlsym returns that stub - in
 * the executable, yet not an allocator of its own. */
__attribute__((noinline)) void *(*malloc_address())(size_t)
{
    return std::malloc;
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
    char reason[512] = "";
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

/* What is wrong with the stall report's verdict on the executable's code,
 * or "" (nothing). The full reason is checked: it ends with the way out. */
std::string verdict_error(int reports, int why, const char *reason)
{
    char msg[512];
    if (reports < 1)
        return "no stall report";
    if (executable_holds_malloc()) {
        if (why != GORO_STALL_FOREIGN || !std::strstr(reason, "holds its own allocator")) {
            std::snprintf(msg, sizeof msg, "why %d (%s), want %d and the allocator named: "
                          "malloc is in the executable", why, reason, GORO_STALL_FOREIGN);
            return msg;
        }
        size_t n = std::strlen(reason);
        const char *tail = "only code marked GORO_PREEMPTIBLE is preempted)";
        if (n < std::strlen(tail) || std::strcmp(reason + n - std::strlen(tail), tail) != 0) {
            std::snprintf(msg, sizeof msg, "reason cut short: %s", reason);
            return msg;
        }
    } else if (why != GORO_STALL_PREEMPTIBLE) {
        std::snprintf(msg, sizeof msg, "why %d (%s), want %d: the executable's code is a "
                      "safe point", why, reason, GORO_STALL_PREEMPTIBLE);
        return msg;
    }
    return "";
}

/* Spins in the executable until the stall report: its verdict. */
void spin_for_a_verdict(stall_seen &seen)
{
    CT_CHECK(goro_stall_watch(20 * GORO_MSEC, on_stall, &seen) == 0);
    CT_CHECK(goro_join(go(spin_until_reported, &seen), nullptr) == 0);
    CT_CHECK(goro_stall_watch(0, nullptr, nullptr) == 0);
}

} // namespace

/* The stall report says whether the executable's code is a safe point:
 * the slice is off, so nothing ends the stall, and the report gives the
 * verdict for where the coroutine was sampled. In the build without PIE
 * the executable holds PLT stubs that dlsym returns for malloc and for
 * the C++ runtime: stubs are not an allocator of the executable's own. */
CT_TEST(executable_holding_an_allocator_is_not_a_safe_point)
{
    if (!ct::async_preemption()) {
        ct::skip("asynchronous preemption is off here");
        return;
    }
    CT_CHECK(malloc_address() != nullptr);
    ct::start(1, -1);
    stall_seen seen;
    spin_for_a_verdict(seen);
    std::string err = verdict_error(seen.n.load(), seen.why, seen.reason);
    CT_CHECKF(err.empty(), "%s", err.c_str());
}

/* In a process of its own: goro_preempt_allow before the first start. */
CT_CHILD(child_allows_code_before_start)
{
    static const char marked[64] = {};
    int err = goro_preempt_allow(marked, marked + sizeof marked);
    ct::start(1, -1);
    stall_seen seen;
    spin_for_a_verdict(seen);
    std::fprintf(stderr, "allow %d reports %d why %d: %s\n", err, seen.n.load(), seen.why,
                 seen.reason);
    ct::stop();
}

/* Code a program marks before it starts the runtime adds to the safe
 * points; it takes none away (the executable's code stays one). */
CT_TEST(code_allowed_before_start_keeps_the_executable)
{
    if (!ct::async_preemption()) {
        ct::skip("asynchronous preemption is off here");
        return;
    }
    std::string out;
    int status = ct::run_child("child_allows_code_before_start", &out);
    int allow = -1, reports = 0, why = -1, at = 0;
    CT_CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  std::sscanf(out.c_str(), "allow %d reports %d why %d: %n", &allow, &reports,
                              &why, &at) == 3 && at > 0,
              "status %#x; stderr: %s", status, out.c_str());
    CT_CHECKF(allow == 0, "goro_preempt_allow before the start: %d", allow);
    std::string reason = at > 0 ? out.substr(static_cast<size_t>(at)) : "";
    while (!reason.empty() && reason.back() == '\n')
        reason.pop_back();
    std::string err = verdict_error(reports, why, reason.c_str());
    CT_CHECKF(err.empty(), "%s", err.c_str());
}
