/* Command-line helpers shared by echod and echoload: a bad value ends the
 * program with status 2 and a one-line message naming the option. */
#ifndef ECHOD_CLI_H
#define ECHOD_CLI_H

/* The program's name in messages ("echod", "echoload"); set before parsing. */
extern const char *cli_program;

void cli_usage(const char *text, int status) __attribute__((noreturn));
void cli_bad(const char *option, const char *value) __attribute__((noreturn));
/* A decimal integer in [lo, hi]. */
long cli_long(const char *option, const char *s, long lo, long hi);
/* Seconds, fractions allowed, in [0, max]. */
double cli_seconds(const char *option, const char *s, double max);

#endif
