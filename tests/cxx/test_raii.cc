/* Ordinary C++ in coroutines: objects live across parks and are destroyed
 * once, at the end of their scope, on whatever worker the coroutine has
 * reached by then; a std::mutex guards short sections that make no goro
 * call; a goro_mutex_t, held across parks, is unlocked by a guard. */
#include "runner.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct tracked {
    static std::atomic<int> live;
    std::string payload;
    explicit tracked(std::string p) : payload(std::move(p)) { live++; }
    tracked(const tracked &o) : payload(o.payload) { live++; }
    ~tracked() { live--; }
};
std::atomic<int> tracked::live{0};

/* A scope guard for goro_mutex_t (which any coroutine may unlock, so it
 * may be held across parks, unlike std::mutex). */
class goro_lock_guard {
public:
    explicit goro_lock_guard(goro_mutex_t *mu) : mu_(mu) { goro_mutex_lock(mu_); }
    ~goro_lock_guard() { goro_mutex_unlock(mu_); }
    goro_lock_guard(const goro_lock_guard &) = delete;
    goro_lock_guard &operator=(const goro_lock_guard &) = delete;

private:
    goro_mutex_t *mu_;
};

void keeps_objects_across_parks(goro_chan_t *ch, goro_mutex_t *mu, long *shared, int me)
{
    tracked outer("outer " + std::to_string(me));
    std::vector<std::unique_ptr<tracked>> many;
    for (int i = 0; i < 10; i++) {
        many.push_back(std::make_unique<tracked>(std::string(100, static_cast<char>('a' + i))));
        goro_sleep(20 * GORO_USEC);
        {
            tracked inner("inner");
            int v = me;
            if (me % 2)
                goro_chan_recv(ch, &v);
            else
                goro_chan_send(ch, &v);
            CT_CHECK(inner.payload == "inner");
        }
        {
            goro_lock_guard hold(mu);
            long seen = *shared;
            goro_yield();               /* parks holding the goro mutex */
            *shared = seen + 1;
        }
    }
    CT_CHECK(outer.payload == "outer " + std::to_string(me));
    for (int i = 0; i < 10; i++)
        CT_CHECK(many[static_cast<size_t>(i)]->payload ==
                 std::string(100, static_cast<char>('a' + i)));
}

} // namespace

CT_TEST(raii_across_parks)
{
    ct::start(2);
    goro_chan_t *ch;
    CT_CHECK(goro_chan_new(&ch, sizeof(int), 0) == 0);
    goro_mutex_t mu = GORO_MUTEX_INIT;
    long shared = 0;
    std::vector<goro_t *> hs;
    for (int i = 0; i < 8; i++)
        hs.push_back(go(keeps_objects_across_parks, ch, &mu, &shared, i));
    for (goro_t *h : hs)
        CT_CHECK(goro_join(h, nullptr) == 0);
    CT_CHECK(shared == 80);
    CT_CHECKF(tracked::live.load() == 0, "%d objects never destroyed", tracked::live.load());
    goro_chan_free(ch);
}

/* std::mutex around sections that make no goro call (docs/cxx.md):
 * coroutines of both workers, yielding between sections. */
CT_TEST(std_mutex_short_sections)
{
    ct::start(2);
    std::mutex mu;
    std::map<int, long> counts;
    long per = ct::scale(20000);
    std::vector<goro_t *> hs;
    for (int c = 0; c < 8; c++)
        hs.push_back(go([&mu, &counts, per, c] {
            for (long i = 0; i < per; i++) {
                {
                    std::lock_guard<std::mutex> hold(mu);
                    counts[c % 3]++;
                }
                if (i % 64 == 0)
                    goro_yield();
            }
        }));
    for (goro_t *h : hs)
        CT_CHECK(goro_join(h, nullptr) == 0);
    long total = 0;
    for (const auto &kv : counts)
        total += kv.second;
    CT_CHECK(total == 8 * per);
}
