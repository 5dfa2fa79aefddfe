/* pipeline: a request log through parse -> hash -> aggregate, on a
 * scheduled pipeline whose workers follow the bottleneck.
 *
 * The log is a CSV file (made first when it does not exist), one request
 * per line:
 *
 *   <time>,<user>,<kind>,<rounds>,<payload, percent-encoded>
 *
 * parse   splits the line and decodes the payload (cost: the line's length)
 * hash    stretches a digest of the payload over <rounds> rounds, as a
 *         password hash does (cost: the rounds)
 * the sink aggregates per user: requests and a digest of the digests.
 *
 * The file's first half is "login" requests - short payloads, many rounds:
 * hash is the bottleneck; the second half is "upload" requests - long
 * payloads, one round: parse is. A status line every 50 ms shows each
 * stage's queue, its workers and its service time: watch the workers move
 * from hash to parse. At the end an SVG timeline is written, and the
 * result is checked against the same work done by a plain loop.
 *
 *   pipeline [-n lines] [-w workers] [-r dhondt|exhaustive|static]
 *            [-f file.csv] [-o timeline.svg] [-O] [-q]
 *
 * -O: ordered output; -q: no status lines. Exit status 0 when the
 * pipeline's result equals the loop's, 1 otherwise, 2 for bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <goro.h>

#define USERS 64
#define LOGIN_ROUNDS 3000
#define LOGIN_PAYLOAD 24
#define UPLOAD_PAYLOAD 900

static long lines_wanted = 30000;
static int workers;
static int rule = GORO_PIPELINE_DHONDT;
static const char *path = "pipeline-requests.csv";
static const char *svg_path = "pipeline-timeline.svg";
static bool ordered, quiet;

/* ---- the log ---- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int make_log(void)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "pipeline: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint64_t r = 42;
    for (long i = 0; i < lines_wanted; i++) {
        bool login = i < lines_wanted / 2;
        int len = login ? LOGIN_PAYLOAD : UPLOAD_PAYLOAD;
        r = mix(r);
        fprintf(f, "%ld,u%02d,%s,%d,", 1700000000L + i, (int)(r % USERS),
                login ? "login" : "upload", login ? LOGIN_ROUNDS : 1);
        for (int k = 0; k < len; k++) {
            r = mix(r);
            fprintf(f, "%%%02x", (unsigned)(r & 0xff));
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "pipeline: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the stages ---- */

struct request {
    char *line;                    /* as read */
    int user, rounds;
    unsigned char *payload;
    size_t len;
    uint64_t digest;
};

static void request_free(void *item, void *arg)
{
    (void)arg;
    struct request *rq = item;
    free(rq->line);
    free(rq->payload);
    free(rq);
}

static int hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static long parse(void **item, void *arg, goro_err_t **err)
{
    (void)arg;
    struct request *rq = *item;
    char *f[5], *save = NULL, *s = rq->line;
    for (int i = 0; i < 5; i++, s = NULL)
        if (!(f[i] = strtok_r(s, i < 4 ? "," : "\n", &save))) {
            *err = goro_err_new(EBADMSG, "a line with %d fields", i);
            return -EBADMSG;
        }
    rq->user = atoi(f[1] + 1);
    rq->rounds = atoi(f[3]);
    size_t enc = strlen(f[4]);
    if (enc % 3) {
        *err = goro_err_new(EBADMSG, "a payload of %zu characters", enc);
        return -EBADMSG;
    }
    rq->payload = malloc(enc / 3 + 1);
    if (!rq->payload)
        return -ENOMEM;
    for (size_t i = 0; i < enc; i += 3) {
        int hi = hex(f[4][i + 1]), lo = hex(f[4][i + 2]);
        if (f[4][i] != '%' || hi < 0 || lo < 0) {
            *err = goro_err_new(EBADMSG, "bad payload at %zu", i);
            return -EBADMSG;
        }
        rq->payload[rq->len++] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static uint64_t digest(const unsigned char *p, size_t len, int rounds)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    for (int r = 0; r < rounds; r++)
        h = mix(h);
    return h;
}

static long hash(void **item, void *arg, goro_err_t **err)
{
    (void)arg, (void)err;
    struct request *rq = *item;
    rq->digest = digest(rq->payload, rq->len, rq->rounds);
    return 0;
}

struct totals {
    long requests[USERS];
    uint64_t digest[USERS];
    long count;
};

static void add(struct totals *t, int user, uint64_t d)
{
    t->requests[user]++;
    t->digest[user] ^= mix(d);
    t->count++;
}

static long aggregate(void *item, void *arg)
{
    struct request *rq = item;
    add(arg, rq->user, rq->digest);
    request_free(rq, NULL);
    return 0;
}

/* ---- the source ---- */

static long read_request(void **item, void *arg)
{
    FILE *f = arg;
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, f) < 0) {
        free(line);
        return ferror(f) ? -EIO : GORO_PIPELINE_END;
    }
    struct request *rq = calloc(1, sizeof *rq);
    if (!rq) {
        free(line);
        return -ENOMEM;
    }
    rq->line = line;
    *item = rq;
    return 0;
}

/* ---- status ---- */

static void status_line(goro_pipeline_t *p)
{
    goro_pipeline_stats_t st;
    goro_stage_stats_t ss[2];
    goro_pipeline_stats(p, &st, ss, 2);
    printf("%6.2fs  in %6llu out %6llu inside %4ld idle %d", (double)st.elapsed_ns / 1e9,
           (unsigned long long)st.in, (unsigned long long)st.out, st.inside, st.idle);
    for (int s = 0; s < 2; s++)
        printf("  | %-5s q %3ld workers %d (share %d) %5.1f us %6.0f/s", ss[s].name,
               ss[s].queued, ss[s].workers, ss[s].share, ss[s].service_ns / 1e3, ss[s].per_sec);
    printf("\n");
    fflush(stdout);
}

static long status_loop(goro_pipeline_t *p)
{
    goro_ticker_t *t;
    if (goro_ticker_new(&t, 50 * GORO_MSEC) != 0)
        return 0;
    while (goro_ticker_wait(t, NULL) == 0)     /* until cancelled */
        status_line(p);
    goro_ticker_free(t);
    return 0;
}

/* ---- the run ---- */

static int usage(void)
{
    fprintf(stderr, "usage: pipeline [-n lines] [-w workers] [-r dhondt|exhaustive|static] "
                    "[-f file.csv] [-o timeline.svg] [-O] [-q]\n");
    return 2;
}

static bool loop_agrees(const struct totals *got, double *loop_s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    struct totals want = { 0 };
    int64_t t0 = goro_now();
    void *item;
    while (read_request(&item, f) == 0) {
        goro_err_t *err = NULL;
        if (parse(&item, NULL, &err) != 0) {
            goro_err_free(err);
            request_free(item, NULL);
            fclose(f);
            return false;
        }
        hash(&item, NULL, NULL);
        aggregate(item, &want);
    }
    *loop_s = (double)(goro_now() - t0) / 1e9;
    fclose(f);
    return memcmp(&want, got, sizeof want) == 0;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "n:w:r:f:o:Oqh")) != -1) {
        switch (opt) {
        case 'n': lines_wanted = atol(optarg); if (lines_wanted < 2) return usage(); break;
        case 'w': workers = atoi(optarg); if (workers < 1) return usage(); break;
        case 'f': path = optarg; break;
        case 'o': svg_path = optarg; break;
        case 'O': ordered = true; break;
        case 'q': quiet = true; break;
        case 'r':
            if (strcmp(optarg, "dhondt") == 0) rule = GORO_PIPELINE_DHONDT;
            else if (strcmp(optarg, "exhaustive") == 0) rule = GORO_PIPELINE_EXHAUSTIVE;
            else if (strcmp(optarg, "static") == 0) rule = GORO_PIPELINE_STATIC;
            else return usage();
            break;
        default: return usage();
        }
    }
    if (optind != argc)
        return usage();
    if (access(path, R_OK) != 0) {
        printf("writing %ld requests to %s\n", lines_wanted, path);
        if (make_log() != 0)
            return 1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "pipeline: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }

    goro_pipeline_t *p;
    int r = goro_pipeline_new(&p, &(goro_pipeline_attr_t){
                                      .name = "requests", .workers = workers, .rule = rule,
                                      .ordered = ordered, .timeline = 1,
                                      .discard = request_free });
    if (r) {
        fprintf(stderr, "pipeline: %s\n", strerror(-r));
        return 1;
    }
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "parse", .fn = parse });
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "hash", .fn = hash });

    goro_t *status = NULL;
    if (!quiet)
        goro_go(&status, NULL, status_loop, p);
    struct totals got = { 0 };
    goro_err_t *err = NULL;
    r = goro_pipeline_run(p, read_request, f, aggregate, &got, &err);
    if (status) {
        goro_cancel(status);
        goro_join(status, NULL);
    }
    fclose(f);
    if (!quiet)
        status_line(p);
    if (r) {
        goro_err_print(stderr, err);
        goro_err_free(err);
        goro_pipeline_free(p);
        return 1;
    }

    goro_pipeline_stats_t st;
    goro_stage_stats_t ss[2];
    goro_pipeline_stats(p, &st, ss, 2);
    double secs = (double)st.elapsed_ns / 1e9;
    printf("%ld requests from %d users in %.2f s on %d workers (%llu allocator decisions)\n",
           got.count, USERS, secs, st.workers, (unsigned long long)st.decisions);
    for (int s = 0; s < 2; s++)
        printf("  %-5s %llu items, %.2f worker-seconds\n", ss[s].name,
               (unsigned long long)ss[s].items, (double)ss[s].busy_ns / 1e9);
    FILE *svg = fopen(svg_path, "w");
    if (!svg || goro_pipeline_svg(p, svg) != 0)
        fprintf(stderr, "pipeline: cannot write %s\n", svg_path);
    else
        printf("timeline: %s\n", svg_path);
    if (svg)
        fclose(svg);
    goro_pipeline_free(p);

    double loop_s = 0;
    bool ok = loop_agrees(&got, &loop_s);
    printf("the same work in a plain loop: %.2f s (the pipeline %.2fx); results %s\n", loop_s,
           secs > 0 ? loop_s / secs : 0, ok ? "agree" : "DIFFER");
    return goro_shutdown() == 0 && ok ? 0 : 1;
}
