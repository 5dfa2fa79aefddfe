/* file_pread.c - random 4 KiB reads of a cached file: goro_pread.
 *
 * Measures: reads per second of 256 coroutines, each reading 4 KiB at
 * random 4 KiB-aligned offsets of a 1 GiB file that is in the page cache
 * (the program writes it if it is missing or of another size, then reads
 * it through once). Workers: GORO_WORKERS (run.sh: 2). Run it as is (the
 * calls go through the workers' io_uring rings) and with GORO_IO_URING=0
 * (the offload pool): run.sh names the second file_pread_pool. Also
 * reports the threads the process has while the reads run (the most seen
 * in /proc/self/status, sampled by a plain thread every 10 ms), the
 * sampler not counted. Comparable to bench/peers/go/file_pread.go
 * (os.File.ReadAt from 256 goroutines). Best of REPS.
 *
 * The file: argv[1], or $TMPDIR/goro-bench-1g (left there for the next
 * run, as Go's peer uses the same one).
 *
 * Output:
 *   name=file_pread impl=goro value=<reads per second> unit=op/s
 *   name=file_pread_threads impl=goro value=<threads> unit=threads
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_SIZE (1L << 30)
#define BLOCK 4096
#define READERS 256
#define READS_EACH 2000L
#define REPS 3

static int fd;
static _Atomic int sampling;
static _Atomic long max_threads;

static long threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static void *sampler(void *unused)
{
    (void)unused;
    while (atomic_load(&sampling)) {
        long n = threads_now() - 1;          /* not this thread */
        if (n > atomic_load(&max_threads))
            atomic_store(&max_threads, n);
        usleep(10000);
    }
    return NULL;
}

/* The file, written once and read through so that it is cached. */
static void prepare(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size != FILE_SIZE) {
        int w = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
        if (w < 0)
            bench_die("file_pread: %s: %s", path, strerror(errno));
        static char buf[1 << 20];
        for (long off = 0; off < FILE_SIZE; off += (long)sizeof buf) {
            for (size_t i = 0; i < sizeof buf; i += 64)
                buf[i] = (char)(off >> 20) ^ (char)i;
            if (write(w, buf, sizeof buf) != (ssize_t)sizeof buf)
                bench_die("file_pread: write: %s", strerror(errno));
        }
        close(w);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bench_die("file_pread: %s: %s", path, strerror(errno));
    static char buf[1 << 20];
    for (long off = 0; off < FILE_SIZE; off += (long)sizeof buf)
        if (pread(fd, buf, sizeof buf, off) != (ssize_t)sizeof buf)
            bench_die("file_pread: warm-up read: %s", strerror(errno));
}

static void reader(long seed)
{
    char buf[BLOCK];
    uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ull + 1;
    for (long i = 0; i < READS_EACH; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        off_t off = (off_t)(x % (FILE_SIZE / BLOCK)) * BLOCK;
        ssize_t n = goro_pread(fd, buf, BLOCK, off);
        if (n != BLOCK)
            bench_die("file_pread: goro_pread: %zd", n);
    }
}

static double one_run(void)
{
    goro_t *h[READERS];
    double t0 = bench_now_ns();
    for (long i = 0; i < READERS; i++)
        h[i] = go(reader, i + 1);
    for (int i = 0; i < READERS; i++)
        if (!h[i] || goro_join(h[i], NULL) != 0)
            bench_die("file_pread: spawn or join failed");
    double secs = (bench_now_ns() - t0) / 1e9;
    return (double)READERS * READS_EACH / secs;
}

int main(int argc, char **argv)
{
    char def[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(def, sizeof def, "%s/goro-bench-1g", tmp && *tmp ? tmp : "/tmp");
    prepare(argc > 1 ? argv[1] : def);
    BENCH_CHECK(goro_start(NULL));
    pthread_t t;
    atomic_store(&sampling, 1);
    if (pthread_create(&t, NULL, sampler, NULL) != 0)
        bench_die("file_pread: no sampler thread");
    one_run();                                /* rings, pool threads, stacks made */
    double best = 0;
    for (int r = 0; r < REPS; r++) {
        double v = one_run();
        if (v > best)
            best = v;
    }
    atomic_store(&sampling, 0);
    pthread_join(t, NULL);
    bench_report("file_pread", best, "op/s");
    printf("name=file_pread_threads impl=goro value=%ld unit=threads\n",
           atomic_load(&max_threads));
    BENCH_CHECK(goro_shutdown());
    return 0;
}
