/* The runner of the C++ tests: runs every CT_TEST (or those named on the
 * command line), one after another in this process, each with a time
 * limit, and prints "N passed, N failed, N skipped"; the exit status is
 * non-zero if any failed. "--child NAME" runs a CT_CHILD instead. */
#include "runner.h"

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace ct {
namespace {

struct entry {
    const char *name;
    test_fn fn;
    bool child;
};

std::vector<entry> &entries()
{
    static std::vector<entry> all;
    return all;
}

std::mutex note_lock;
std::string first_failure;
bool any_failure;
std::string skip_reason;
std::string partial;
const char *running = "";

const char *program;

bool is_sanitized()
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

bool is_tsan()
{
#if defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

void on_alarm(int)
{
    static const char msg[] = "\ngoro C++ tests: time limit reached in test ";
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, running, strlen(running));
    (void)!write(2, "\n", 1);
    _exit(3);
}

/* 0 passed, 1 failed, 2 skipped. */
int run_one(const entry &t)
{
    {
        std::lock_guard<std::mutex> l(note_lock);
        first_failure.clear();
        any_failure = false;
        skip_reason.clear();
        partial.clear();
    }
    running = t.name;
    alarm(is_sanitized() ? 240 : 60);
    t.fn();
    if (goro_workers() > 0)
        stop();
    alarm(0);
    std::lock_guard<std::mutex> l(note_lock);
    if (any_failure) {
        std::printf("FAIL %s: %s\n", t.name, first_failure.c_str());
        return 1;
    }
    if (!skip_reason.empty()) {
        std::printf("skip %s: %s\n", t.name, skip_reason.c_str());
        return 2;
    }
    if (!partial.empty())
        std::printf("ok   %s (%s)\n", t.name, partial.c_str());
    else
        std::printf("ok   %s\n", t.name);
    return 0;
}

} // namespace

registrar::registrar(const char *name, test_fn fn, bool child)
{
    entries().push_back({name, fn, child});
}

void fail(const char *file, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> l(note_lock);
    if (!any_failure)
        first_failure = std::string(file) + ":" + std::to_string(line) + ": " + msg;
    any_failure = true;
}

void note(const char *what)
{
    std::lock_guard<std::mutex> l(note_lock);
    partial = what;
}

bool failed()
{
    std::lock_guard<std::mutex> l(note_lock);
    return any_failure;
}

void skip(const char *why)
{
    std::lock_guard<std::mutex> l(note_lock);
    skip_reason = why;
}

void start(int workers, int64_t slice_ns)
{
    if (goro_workers() > 0)
        stop();
    goro_config_t cfg = {};
    cfg.workers = workers;
    cfg.slice_ns = slice_ns;
    int err = goro_start(&cfg);
    if (err) {
        std::fprintf(stderr, "goro_start(%d workers): %s\n", workers, std::strerror(-err));
        std::exit(2);
    }
}

void stop()
{
    int err = goro_shutdown();
    CT_CHECKF(err == 0, "goro_shutdown: %s", std::strerror(-err));
}

bool async_preemption()
{
    const char *p = std::getenv("GORO_PREEMPT");
    return !is_tsan() && !(p && std::strcmp(p, "0") == 0);
}

bool sanitized()
{
    return is_sanitized();
}

long scale(long n)
{
    long s = is_sanitized() ? n / 4 : n;
    return s > 0 ? s : 1;
}

int run_child(const char *child, std::string *err)
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 2);
    char *argv[] = { const_cast<char *>(program), const_cast<char *>("--child"),
                     const_cast<char *>(child), nullptr };
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipe_fds[1]);
    if (rc != 0) {
        close(pipe_fds[0]);
        return -1;
    }
    char buf[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            err->append(buf, static_cast<size_t>(n));
    close(pipe_fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

} // namespace ct

int main(int argc, char **argv)
{
    /* The tests choose their settings; a developer's environment must not. */
    unsetenv("GORO_STACK_SIZE");
    unsetenv("GORO_WORKERS");
    unsetenv("GORO_SLICE");
    ct::program = argv[0];
    if (argc == 3 && std::strcmp(argv[1], "--child") == 0) {
        for (const ct::entry &t : ct::entries())
            if (t.child && std::strcmp(t.name, argv[2]) == 0) {
                t.fn();
                return 0;
            }
        std::fprintf(stderr, "no child %s\n", argv[2]);
        return 2;
    }
    std::signal(SIGALRM, ct::on_alarm);
    int passed = 0, failed = 0, skipped = 0;
    for (const ct::entry &t : ct::entries()) {
        if (t.child)
            continue;
        bool wanted = argc < 2;
        for (int i = 1; i < argc; i++)
            wanted = wanted || std::strcmp(argv[i], t.name) == 0;
        if (!wanted)
            continue;
        switch (ct::run_one(t)) {
        case 0: passed++; break;
        case 1: failed++; break;
        default: skipped++; break;
        }
        std::fflush(stdout);
    }
    const char *base = std::strrchr(argv[0], '/');
    std::printf("%s: %d passed, %d failed, %d skipped\n", base ? base + 1 : argv[0],
                passed, failed, skipped);
    return failed ? 1 : 0;
}
