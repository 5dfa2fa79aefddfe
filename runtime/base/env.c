/*
 * Settings from the environment (GORO_WORKERS, GORO_STACK_SIZE, GORO_SLICE,
 * GORO_OFFLOAD_THREADS, ...), all read by one rule (docs/api.md,
 * "Environment variables"):
 *
 *   - unset or empty: the default, silently;
 *   - otherwise a whole decimal number - digits only, no sign or blanks -
 *     within the setting's range; sizes may end in k, M or g (KiB, MiB,
 *     GiB); a few settings also take a word (GORO_SLICE=off);
 *   - anything else, an overflow included, is ignored with one line on
 *     stderr, "goro: ignoring NAME=VALUE (want RANGE)", and the default is
 *     used: a typo never changes what the program does without a word.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* NAME's value, or NULL when it is unset or empty (the default applies). */
static const char *env_value(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

static void ignoring(const char *name, const char *value, const char *want)
{
    fprintf(stderr, "goro: ignoring %s=%s (want %s)\n", name, value, want);
}

/* Parses the digits at the start of s into *v; *end: what follows them.
 * False if s does not start with a digit or the number overflows. */
static bool parse_digits(const char *s, unsigned long long *v, const char **end)
{
    if (*s < '0' || *s > '9')
        return false;              /* strtoull would take blanks, + and - */
    int saved = errno;
    errno = 0;
    char *e;
    *v = strtoull(s, &e, 10);
    bool ok = errno == 0;          /* ERANGE: it saturated */
    errno = saved;
    *end = e;
    return ok;
}

bool goro__env_long(const char *name, long min, long max, const char *more, long *out)
{
    const char *s = env_value(name);
    if (!s)
        return false;
    unsigned long long v;
    const char *end;
    if (parse_digits(s, &v, &end) && !*end &&
        v >= (unsigned long long)min && v <= (unsigned long long)max) {
        *out = (long)v;
        return true;
    }
    char want[128];
    snprintf(want, sizeof want, "%ld..%ld%s", min, max, more ? more : "");
    ignoring(name, s, want);
    return false;
}

/* "16k", "1g", "100000": the largest suffix that divides n evenly. */
static void format_size(char *buf, size_t len, size_t n)
{
    static const char suffix[] = "gMk";
    for (int i = 0; i < 3; i++) {
        size_t unit = (size_t)1 << (10 * (3 - i));
        if (n && n % unit == 0) {
            snprintf(buf, len, "%zu%c", n / unit, suffix[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", n);
}

/* The shift of a size suffix (either case), or -1 for anything else. */
static int suffix_shift(char c)
{
    switch (c) {
    case 'k': case 'K': return 10;
    case 'm': case 'M': return 20;
    case 'g': case 'G': return 30;
    default: return -1;
    }
}

/* A size: digits, then at most one suffix. False on junk or overflow (the
 * shift must not wrap: 17592186044417M is 2^64 + 1 MiB, not 1 MiB). */
static bool parse_size(const char *s, size_t *out)
{
    unsigned long long v;
    const char *end;
    if (!parse_digits(s, &v, &end))
        return false;
    if (*end) {
        int shift = suffix_shift(*end);
        if (shift < 0 || end[1] || v > (ULLONG_MAX >> shift))
            return false;
        v <<= shift;
    }
    if (v > SIZE_MAX)
        return false;
    *out = (size_t)v;
    return true;
}

bool goro__env_size(const char *name, size_t min, size_t max, size_t *out)
{
    const char *s = env_value(name);
    if (!s)
        return false;
    size_t v;
    if (parse_size(s, &v) && v >= min && v <= max) {
        *out = v;
        return true;
    }
    char lo[32], hi[32], want[80];
    format_size(lo, sizeof lo, min);
    format_size(hi, sizeof hi, max);
    snprintf(want, sizeof want, "%s..%s", lo, hi);
    ignoring(name, s, want);
    return false;
}

bool goro__env_is(const char *name, const char *word)
{
    const char *s = env_value(name);
    return s && strcmp(s, word) == 0;
}

int goro__env_word(const char *name, const char *const *words, int n, const char *want,
                   int dflt)
{
    const char *s = env_value(name);
    if (!s)
        return dflt;
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0)
            return i;
    ignoring(name, s, want);
    return dflt;
}

bool goro__env_flag(const char *name, bool dflt)
{
    const char *s = env_value(name);
    if (!s)
        return dflt;
    if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0)
        return s[0] == '1';
    ignoring(name, s, "0 or 1");
    return dflt;
}
