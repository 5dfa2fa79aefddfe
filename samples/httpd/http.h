/* The HTTP/1.1 side of httpd: reading a request head, dates, ranges. */
#ifndef HTTPD_HTTP_H
#define HTTPD_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <goro.h>

/* Limits on what a client may send. A request line longer than the
 * reader's buffer is answered 414, a header section past HEAD_MAX bytes
 * or HEADERS_MAX lines 431, a body past BODY_MAX bytes 413 (GET and HEAD
 * take none: a small one is read and dropped). */
#define REQUEST_BUF 8192
#define HEAD_MAX 16384
#define HEADERS_MAX 100
#define BODY_MAX 65536
#define PATH_MAX_REQ 1024

enum method { METHOD_GET, METHOD_HEAD, METHOD_OTHER };

struct request {
    enum method method;
    char method_name[16];        /* for the log */
    int minor;                   /* HTTP/1.<minor> */
    bool keep_alive;
    char path[PATH_MAX_REQ];     /* "a/b.html", relative to the root, no ".." */
    time_t if_modified_since;    /* -1: none */
    char range[64];              /* the Range value, "" for none */
    char if_range[40];           /* the If-Range value, "" for none */
    int64_t content_length;
};

/* Reads the next request head from r. Returns 0 with *req filled, -1 when
 * the connection should just close (end of file, an error, the deadline),
 * or an HTTP status (400, 413, 414, 431, 501, 505) to answer before
 * closing. */
int http_read_request(goro_reader_t *r, struct request *req, int64_t deadline);

/* A connection's formatted dates, redone when the second changes. */
struct clock {
    time_t sec;
    char http[32];               /* "Sun, 06 Nov 1994 08:49:37 GMT" (IMF-fixdate) */
    char log[32];                /* "06/Nov/1994:08:49:37 +0000" (the access log's) */
};
void clock_update(struct clock *c);
void http_date(time_t t, char out[32]);

/* A single "bytes=" range of a size-byte file: 1 with [*first, *last], 0
 * to ignore it (malformed, or several ranges: the whole file goes out),
 * -1 when it cannot be satisfied (416). */
int http_range(const char *value, int64_t size, int64_t *first, int64_t *last);

/* The Content-Type for a file name. */
const char *http_mime_type(const char *path);

/* The reason phrase of a status. */
const char *http_reason(int status);

#endif
