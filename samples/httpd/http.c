/* Reading an HTTP/1.1 request head (RFC 9112), dates and ranges (RFC 9110).
 *
 * Strict where leniency would be a risk - one space between the parts of
 * the request line, no space before a header's colon, no obsolete line
 * folding, one Content-Length, no control characters in the path - and
 * lenient where RFC 9110 lets a server ignore what it does not understand:
 * a malformed or multiple Range, or an If-Modified-Since that is not an
 * IMF-fixdate, is simply ignored. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

/* tchar of RFC 9110: the characters of a method or a header name. */
static bool is_token(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && !strchr("!#$%&'*+-.^_`|~", c))
            return false;
    }
    return n > 0;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The origin-form target ("/a/b%20c?q") to req->path ("a/b c"): the query
 * dropped, %XX decoded, empty and "." segments dropped. A ".." segment is
 * refused (400) rather than resolved: nothing a client sends can name a
 * file outside the root, and symbolic links are left to the opening
 * (main.c). */
static int parse_target(const char *t, size_t len, struct request *req)
{
    char buf[PATH_MAX_REQ];
    size_t n = 0;

    if (len == 0 || t[0] != '/')
        return 400;                     /* absolute-form and '*' are not served */
    for (size_t i = 0; i < len && t[i] != '?'; i++) {
        int c = (unsigned char)t[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex(t[i + 1]) : -1, lo = hi >= 0 ? hex(t[i + 2]) : -1;
            if (lo < 0)
                return 400;
            c = hi * 16 + lo;
            i += 2;
        }
        if (c < 0x20 || c == 0x7f)      /* NUL, and nothing that could split a log line */
            return 400;
        if (n + 1 >= sizeof buf)
            return 414;
        buf[n++] = (char)c;
    }
    buf[n] = 0;

    size_t o = 0;
    for (char *seg = buf; *seg;) {
        size_t sl = strcspn(seg, "/");
        char *next = seg[sl] ? seg + sl + 1 : seg + sl;
        if (sl == 2 && seg[0] == '.' && seg[1] == '.')
            return 400;
        if (sl > 0 && !(sl == 1 && seg[0] == '.')) {
            if (o > 0)
                req->path[o++] = '/';
            memcpy(req->path + o, seg, sl);
            o += sl;
        }
        seg = next;
    }
    req->path[o] = 0;
    return 0;
}

/* "GET /index.html HTTP/1.1" */
static int parse_request_line(const char *s, size_t len, struct request *req)
{
    const char *end = s + len;
    const char *sp1 = memchr(s, ' ', len);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
    if (!sp2)
        return 400;                     /* HTTP/0.9's "GET /" included */

    size_t mlen = (size_t)(sp1 - s);
    if (mlen >= sizeof req->method_name || !is_token(s, mlen))
        return 400;
    memcpy(req->method_name, s, mlen);
    req->method_name[mlen] = 0;
    req->method = strcmp(req->method_name, "GET") == 0    ? METHOD_GET
                  : strcmp(req->method_name, "HEAD") == 0 ? METHOD_HEAD
                                                          : METHOD_OTHER;

    const char *v = sp2 + 1;
    if (end - v != 8 || memcmp(v, "HTTP/", 5) != 0 || !isdigit((unsigned char)v[5]) ||
        v[6] != '.' || !isdigit((unsigned char)v[7]))
        return 400;
    if (v[5] != '1')
        return 505;
    req->minor = v[7] - '0';            /* 1.2 and up are spoken to as 1.1 */
    req->keep_alive = req->minor >= 1;
    return parse_target(sp1 + 1, (size_t)(sp2 - sp1 - 1), req);
}

/* Whether the comma-separated list v (Connection's) holds token. */
static bool has_token(const char *v, size_t n, const char *token)
{
    size_t tl = strlen(token);
    for (size_t i = 0; i < n;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t j = i;
        while (j < n && v[j] != ',' && v[j] != ' ' && v[j] != '\t')
            j++;
        if (j - i == tl && strncasecmp(v + i, token, tl) == 0)
            return true;
        i = j;
    }
    return false;
}

/* An IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", or -1. */
static time_t parse_date(const char *v, size_t n)
{
    char s[40];
    struct tm tm = { 0 };
    if (n >= sizeof s)
        return -1;
    memcpy(s, v, n);
    s[n] = 0;
    const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return end && *end == 0 ? timegm(&tm) : -1;
}

static void copy_value(char *dst, size_t size, const char *v, size_t n)
{
    if (n >= size)
        n = 0;                          /* too long to be one we would act on */
    memcpy(dst, v, n);
    dst[n] = 0;
}

/* "Name: value" */
static int parse_header(const char *s, size_t len, struct request *req, bool *host)
{
    const char *colon = memchr(s, ':', len);
    if (!colon || !is_token(s, (size_t)(colon - s)))
        return 400;                     /* obs-fold, "Name : v", no colon */
    size_t nl = (size_t)(colon - s);
    const char *v = colon + 1, *end = s + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vl = (size_t)(end - v);

#define IS(name) (nl == sizeof name - 1 && strncasecmp(s, name, nl) == 0)
    if (IS("Host")) {
        if (*host)
            return 400;
        *host = true;
    } else if (IS("Connection")) {
        if (has_token(v, vl, "close"))
            req->keep_alive = false;
        else if (has_token(v, vl, "keep-alive"))
            req->keep_alive = true;
    } else if (IS("If-Modified-Since")) {
        req->if_modified_since = parse_date(v, vl);
    } else if (IS("Range")) {
        copy_value(req->range, sizeof req->range, v, vl);
    } else if (IS("If-Range")) {
        copy_value(req->if_range, sizeof req->if_range, v, vl);
    } else if (IS("Content-Length")) {
        if (req->content_length >= 0 || vl == 0)
            return 400;
        req->content_length = 0;
        for (size_t i = 0; i < vl; i++) {
            if (!isdigit((unsigned char)v[i]))
                return 400;
            if (req->content_length <= BODY_MAX)   /* past it the value no longer matters */
                req->content_length = req->content_length * 10 + (v[i] - '0');
        }
    } else if (IS("Transfer-Encoding")) {
        return 501;                     /* a chunked body: not taken */
    }
#undef IS
    return 0;
}

int http_read_request(goro_reader_t *r, struct request *req, int64_t deadline)
{
    const char *line;
    size_t len;
    int n, blanks = 0;

    req->method = METHOD_OTHER;
    req->method_name[0] = 0;
    req->minor = 1;
    req->path[0] = 0;
    req->keep_alive = false;
    req->if_modified_since = -1;
    req->range[0] = req->if_range[0] = 0;
    req->content_length = -1;
    /* A client may send an empty line between requests (RFC 9112, 2.2). */
    do {
        n = goro_reader_read_line_until(r, &line, &len, deadline);
        if (n == -EMSGSIZE)
            return 414;
        if (n <= 0)
            return -1;
    } while (len == 0 && ++blanks < 4);

    int status = parse_request_line(line, len, req);
    if (status != 0)
        return status;

    size_t total = len;
    bool host = false;
    for (int count = 0;; count++) {
        n = goro_reader_read_line_until(r, &line, &len, deadline);
        if (n == -EMSGSIZE)
            return 431;
        if (n <= 0)
            return -1;
        if (len == 0)
            break;
        total += len + 2;
        if (total > HEAD_MAX || count == HEADERS_MAX)
            return 431;
        if ((status = parse_header(line, len, req, &host)) != 0)
            return status;
    }
    if (req->minor >= 1 && !host)
        return 400;                     /* RFC 9112, 3.2: a 1.1 request names its host */
    return req->content_length > BODY_MAX ? 413 : 0;
}

void http_date(time_t t, char out[32])
{
    struct tm tm;
    strftime(out, 32, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&t, &tm));
}

void clock_update(struct clock *c)
{
    time_t now = time(NULL);
    if (now == c->sec)
        return;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(c->http, sizeof c->http, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    strftime(c->log, sizeof c->log, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    c->sec = now;
}

/* Digits to *v (up to 18 of them); the end, or NULL for none or too many. */
static const char *number(const char *s, int64_t *v)
{
    const char *p = s;
    for (*v = 0; isdigit((unsigned char)*p) && p - s < 18; p++)
        *v = *v * 10 + (*p - '0');
    return p == s || isdigit((unsigned char)*p) ? NULL : p;
}

int http_range(const char *value, int64_t size, int64_t *first, int64_t *last)
{
    int64_t a = -1, b = -1;
    const char *p = value;

    if (strncasecmp(p, "bytes=", 6) != 0 || strchr(p, ','))
        return 0;                       /* another unit, or several ranges */
    p += 6;
    if (*p != '-' && !(p = number(p, &a)))
        return 0;
    if (*p++ != '-')
        return 0;
    if (*p && !(p = number(p, &b)))
        return 0;
    if (*p || (a < 0 && b < 0) || (a >= 0 && b >= 0 && b < a))
        return 0;

    if (a < 0) {                        /* "-n": the last n bytes */
        if (b == 0 || size == 0)
            return -1;
        *first = b >= size ? 0 : size - b;
    } else {
        if (a >= size)
            return -1;
        *first = a;
    }
    *last = b < 0 || a < 0 || b >= size ? size - 1 : b;
    return 1;
}

const char *http_mime_type(const char *path)
{
    static const char *const types[][2] = {
        { "html", "text/html; charset=utf-8" }, { "htm", "text/html; charset=utf-8" },
        { "txt", "text/plain; charset=utf-8" }, { "css", "text/css" },
        { "js", "text/javascript" },            { "json", "application/json" },
        { "svg", "image/svg+xml" },             { "png", "image/png" },
        { "jpg", "image/jpeg" },                { "jpeg", "image/jpeg" },
        { "gif", "image/gif" },                 { "ico", "image/vnd.microsoft.icon" },
        { "pdf", "application/pdf" },           { "wasm", "application/wasm" },
    };
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            if (strcasecmp(dot + 1, types[i][0]) == 0)
                return types[i][1];
    return "application/octet-stream";
}

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default:  return "Internal Server Error";
    }
}
