/* Command-line helpers shared by echod and echoload (cli.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

const char *cli_program = "echod";

void cli_usage(const char *text, int status)
{
    fputs(text, status ? stderr : stdout);
    exit(status);
}

void cli_bad(const char *option, const char *value)
{
    fprintf(stderr, "%s: bad value for %s: '%s' (see %s --help)\n",
            cli_program, option, value, cli_program);
    exit(2);
}

long cli_long(const char *option, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        cli_bad(option, s);
    return v;
}

double cli_seconds(const char *option, const char *s, double max)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > max)
        cli_bad(option, s);
    return v;
}
