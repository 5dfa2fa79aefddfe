/*
 * goro/cxx.h: the C++ forms of go(), goro_go(), goro_group_go() and
 * goro_join() (docs/cxx.md), and the declarations of their implementation
 * that runtime/coro/cxx.c and C programs see too. goro.h includes it; it
 * may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_CXX_H
#define GORO_CXX_H
/* ------------------------------------------------------------------------
 * C++ (C++17; docs/cxx.md)
 *
 * From C++ the same API, plus native forms in place of the go() macro:
 *
 *   goro_t *h = go([=] { return count(text); });     // any callable
 *   go(f, 2, std::string("x"));                       // copies, as std::thread
 *   long n = goro_join_rethrow(h);                    // rethrows its exception
 *
 * go(f, args...) -> goro_t *, or NULL with errno set (EINVAL: f is a null
 *   pointer; ENOMEM: no memory for the callable; else as the C form).
 *   f and args are decay-copied (moved when they are rvalues) in the
 *   caller, which gets any exception their constructors throw; the
 *   coroutine calls std::invoke(std::move(f), std::move(args)...) and
 *   destroys them when it ends. Pass references with std::ref. The call
 *   returns void, an integer, an enum, bool or a pointer (checked at
 *   compile time), which goro_join hands back as a long.
 * goro_go(&h, &attr, f, args...) -> 0 or -errno; h NULL: detached.
 * An exception that escapes f ends the coroutine (join result 0) and is
 *   kept for its joiner:
 *     goro_join(h, &result, &error)  0 or -errno as goro_join; error (a
 *                                    std::exception_ptr *, may be NULL)
 *                                    receives it, or nullptr;
 *     goro_join_until(h, &result, &error, deadline)   the same, timed;
 *     goro_join_rethrow(h)           the result, or rethrows the exception;
 *                                    a join error as std::system_error.
 *   A coroutine that is detached when an exception escapes it calls
 *   std::terminate, as std::thread does. A plain goro_join (C, or the
 *   two-argument form) of a coroutine whose exception escaped returns 0
 *   with result 0, and the exception is destroyed.
 *
 * In every coroutine, however started: the exceptions being handled
 * (`throw;`) and std::uncaught_exceptions() belong to the coroutine, not
 * to its thread; goro_exit() unwinds the coroutine's frames, running
 * destructors, before it ends it (catch (...) sees it, and must rethrow).
 * ------------------------------------------------------------------------ */

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* Implementation of the C++ forms (runtime/coro/cxx.c, coro.c). Not part of
 * the contract. An exception that escaped a coroutine stays with the
 * coroutine until a join takes it; a join or detach that does not want it
 * destroys it. */
struct goro__cxx_escaped {
    void (*destroy)(struct goro__cxx_escaped *e);
    const char *what;              /* the exception's what() (a group's error), or NULL */
};
void goro__cxx_register(void *(*get_globals)(void));
int goro__cxx_keep(struct goro__cxx_escaped *e);
int goro__cxx_join_until(goro_t *h, long *result, struct goro__cxx_escaped **escaped,
                         int64_t deadline);
int goro__cxx_exiting(void);
int goro__err_set_escaped(goro_err_t *e, struct goro__cxx_escaped *x);
struct goro__cxx_escaped *goro__err_take_escaped(goro_err_t *e);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && __cplusplus >= 201703L
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cxxabi.h>

#undef go
#undef goro_go

namespace goro__cxx {

/* goro keeps the C++ runtime's exception state per coroutine once it
 * knows where that runtime keeps it. It looks when libgoro is loaded; each
 * C++ translation unit that includes this header also tells it when it is
 * loaded, which covers a C++ library that a C program dlopens later. */
inline const bool registered =
    (goro__cxx_register(reinterpret_cast<void *(*)(void)>(&abi::__cxa_get_globals)), true);

template <class R>
inline constexpr bool returns_a_long = std::is_void_v<R> || std::is_integral_v<R> ||
    std::is_enum_v<R> || std::is_pointer_v<R> || std::is_null_pointer_v<R>;

/* The join value, widened as the C form widens it. */
template <class R>
long to_long(R &&value)
{
    using D = std::decay_t<R>;
    if constexpr (std::is_pointer_v<D>)
        return static_cast<long>(reinterpret_cast<std::intptr_t>(value));
    else if constexpr (std::is_null_pointer_v<D>)
        return 0;
    else
        return static_cast<long>(value);
}

/* The callable and its arguments, decay-copied. On the heap, but for a
 * small lone callable (fits_in_arg): the spawner may return before the
 * coroutine runs, and goro_spawn carries one pointer. */
template <class F, class... A>
struct task {
    std::tuple<F, A...> parts;

    template <class... X>
    explicit task(X &&...x) : parts(std::forward<X>(x)...) {}

    long run()
    {
        return std::apply([](F &f, A &...a) -> long {
            if constexpr (std::is_void_v<std::invoke_result_t<F, A...>>) {
                std::invoke(std::move(f), std::move(a)...);
                return 0;
            } else {
                return to_long(std::invoke(std::move(f), std::move(a)...));
            }
        }, parts);
    }
};

/* An exception that escaped a coroutine, until its joiner takes it. */
struct escaped : goro__cxx_escaped {
    std::exception_ptr error;
};

inline void destroy_escaped(goro__cxx_escaped *e)
{
    delete static_cast<escaped *>(e);
}

/* In the handler of what escaped: keep it for the joiner, or terminate. */
inline void keep_escaped() noexcept
{
    escaped *e = new (std::nothrow) escaped{};
    if (e) {
        e->destroy = &destroy_escaped;
        e->error = std::current_exception();
        try {
            throw;                  /* the message of a group's error */
        } catch (const std::exception &x) {
            e->what = x.what();     /* lives as long as e->error */
        } catch (...) {
        }
        if (goro__cxx_keep(e) == 0)
            return;
        delete e;
        std::fprintf(stderr, "goro: an exception escaped detached coroutine %llu "
                     "(not a group member: nobody can take it)\n",
                     static_cast<unsigned long long>(goro_id(goro_self())));
    } else {
        std::fprintf(stderr, "goro: no memory to keep the exception that escaped "
                     "coroutine %llu\n", static_cast<unsigned long long>(goro_id(goro_self())));
    }
    std::terminate();               /* in the handler: the message names the exception */
}

/* Runs the task and keeps what escapes it for the joiner. goro_exit's
 * unwinding passes through the catch (...) on to the coroutine's first
 * frame. */
template <class Task>
long run_guarded(Task &t)
{
    try {
        return t.run();
    } catch (...) {
        if (goro__cxx_exiting())
            throw;
        keep_escaped();
    }
    return 0;
}

/* The coroutine's entry (goro_spawn's fn) for a task on the heap. */
template <class Task>
long entry(void *arg)
{
    std::unique_ptr<Task> t(static_cast<Task *>(arg));
    return run_guarded(*t);
}

/* A callable without arguments that fits in a pointer and copies as bytes
 * - a function pointer, a lambda that captures a pointer or two ints -
 * travels in goro_spawn's arg itself: no allocation. */
template <class Fn>
inline constexpr bool fits_in_arg = std::is_trivially_copyable_v<Fn> &&
    sizeof(Fn) <= sizeof(void *) && alignof(Fn) <= alignof(void *);

template <class Fn>
long entry_in_arg(void *arg)
{
    alignas(Fn) unsigned char bytes[sizeof(Fn)];
    std::memcpy(bytes, &arg, sizeof(Fn));
    task<Fn> t(*std::launder(reinterpret_cast<Fn *>(bytes)));
    return run_guarded(t);
}

template <class F, class... A>
int spawn(goro_t **h, const goro_attr_t *attr, F &&f, A &&...args)
{
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_v<Fn, std::decay_t<A>...>,
                  "goro: go(f, args...) calls f with moved copies of args, as std::thread "
                  "does; pass references with std::ref, null pointers as nullptr");
    static_assert(returns_a_long<std::invoke_result_t<Fn, std::decay_t<A>...>>,
                  "goro: the callable must return void, an integer, an enum, bool or a "
                  "pointer (goro_join hands it back as a long); hand other results back "
                  "through a captured reference, a channel or a std::promise");
    if (h)
        *h = nullptr;
    using Given = std::remove_cv_t<std::remove_reference_t<F>>;
    if constexpr (std::is_pointer_v<Given> || std::is_member_pointer_v<Given>) {
        if (!f)
            return -EINVAL;             /* as the C form: "fn is NULL" */
    }
    if constexpr (sizeof...(A) == 0 && fits_in_arg<Fn>) {
        Fn copy(std::forward<F>(f));
        void *arg = nullptr;
        std::memcpy(&arg, &copy, sizeof copy);
        return goro_spawn(h, attr, &entry_in_arg<Fn>, arg);
    }
    using Task = task<Fn, std::decay_t<A>...>;
    Task *t = new (std::nothrow) Task(std::forward<F>(f), std::forward<A>(args)...);
    if (!t)
        return -ENOMEM;
    int err = goro_spawn(h, attr, &entry<Task>, t);
    if (err)
        delete t;
    return err;
}

} // namespace goro__cxx

template <class F, class... A>
goro_t *go(F &&f, A &&...args)
{
    goro_t *h = nullptr;
    int err = goro__cxx::spawn(&h, nullptr, std::forward<F>(f), std::forward<A>(args)...);
    return goro__handle_or_errno(err, h);
}

template <class F, class... A>
int goro_go(goro_t **h, const goro_attr_t *attr, F &&f, A &&...args)
{
    return goro__cxx::spawn(h, attr, std::forward<F>(f), std::forward<A>(args)...);
}

#undef goro_group_go
/* An exception escaping a group member is the member's failure: an error
 * of code ENOTRECOVERABLE whose message is its what() (std::exception;
 * else a fixed one) and which carries the exception. It fails the group
 * as any member's error does (FIRST_ERROR: the first failure cancels the
 * rest), and the C++ waits below hand the exception back. */
template <class F, class... A>
int goro_group_go(goro_group_t *g, F &&f, A &&...args)
{
    goro_attr_t attr{};
    attr.group = goro__group_arg(g);
    return goro__cxx::spawn(nullptr, &attr, std::forward<F>(f), std::forward<A>(args)...);
}

#undef goro_group_try_go
template <class F, class... A>
int goro_group_try_go(goro_group_t *g, F &&f, A &&...args)
{
    goro_attr_t attr{};
    attr.group = goro__group_try_arg(g);
    return goro__cxx::spawn(nullptr, &attr, std::forward<F>(f), std::forward<A>(args)...);
}

/* goro_group_wait that also hands over the exception the group's error
 * carries (*error: the first one found - the error's own, then its list's
 * in order, then its causes'; nullptr: none). err may be nullptr (the
 * error is then freed), as may error. */
inline int goro_group_wait(goro_group_t *g, long *result, goro_err_t **err,
                           std::exception_ptr *error)
{
    if (error)
        *error = nullptr;
    goro_err_t *e = nullptr;
    int r = goro_group_wait(g, result, &e);
    if (error) {
        std::unique_ptr<goro__cxx::escaped> x(
            static_cast<goro__cxx::escaped *>(goro__err_take_escaped(e)));
        if (x)
            *error = std::move(x->error);
    }
    if (err)
        *err = e;
    else
        goro_err_free(e);
    return r;
}

/* Waits for g; rethrows the exception its error carries, else throws
 * std::system_error for a failure (or a wait that failed); returns the
 * group's result (FIRST_RESULT's winner, else 0). */
inline long goro_group_wait_rethrow(goro_group_t *g)
{
    long result = 0;
    std::exception_ptr error;
    int r = goro_group_wait(g, &result, nullptr, &error);
    if (error)
        std::rethrow_exception(error);
    if (r)
        throw std::system_error(-r, std::generic_category(), "goro_group_wait");
    return result;
}

inline int goro_join_until(goro_t *h, long *result, std::exception_ptr *error,
                           int64_t deadline)
{
    if (error)
        *error = nullptr;
    goro__cxx_escaped *kept = nullptr;
    int err = goro__cxx_join_until(h, result, error ? &kept : nullptr, deadline);
    if (kept) {
        std::unique_ptr<goro__cxx::escaped> e(static_cast<goro__cxx::escaped *>(kept));
        *error = std::move(e->error);
    }
    return err;
}

inline int goro_join(goro_t *h, long *result, std::exception_ptr *error)
{
    return goro_join_until(h, result, error, GORO_FOREVER);
}

inline long goro_join_rethrow(goro_t *h)
{
    long result = 0;
    std::exception_ptr error;
    int err = goro_join(h, &result, &error);
    if (err)
        throw std::system_error(-err, std::generic_category(), "goro_join");
    if (error)
        std::rethrow_exception(error);
    return result;
}

#elif defined(__cplusplus)
/* Older C++ has had its one #error line (top of goro.h); the C spawn
 * macros would add a page more, so they go quiet. */
#undef go
#undef goro_go
#undef goro_group_go
#undef goro_group_try_go
#define go(...) ((goro_t *)0)
#define goro_go(...) (-1)
#define goro_group_go(...) (-1)
#define goro_group_try_go(...) (-1)
#endif /* C++17 */

#endif /* GORO_CXX_H */
