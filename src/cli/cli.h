/* cli.h — shared pieces of the `sieve` verbs: exit codes, usage errors,
 * reading inputs, printing error objects. */
#ifndef SV_CLI_H
#define SV_CLI_H

#include <stddef.h>

#include "util/error.h"

enum {
    SV_EXIT_OK = 0,
    SV_EXIT_RUNTIME = 1,     /* a runtime failure */
    SV_EXIT_CONSTRAINT = 2,  /* the constraint does not compile */
    SV_EXIT_USAGE = 64,      /* bad verb, flag or input format (EX_USAGE) */
    SV_EXIT_DATA = 65,       /* `sieve batch`: input lines that do not check (EX_DATAERR) */
    SV_EXIT_INTERRUPTED = 130, /* `sieve batch`: stopped by SIGINT or SIGTERM (resumable) */
};

/* Prints "sieve VERB: message" to stderr, a hint to use --help, and returns
 * SV_EXIT_USAGE. */
int sv_cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads a whole file ("-" is standard input) into a NUL-terminated buffer
 * the caller frees. Returns NULL with err set on failure. */
char *sv_cli_read_file(const char *path, size_t *len, sv_error_t *err);

/* Prints {"error": {"message", "type", "offset"?}} on stdout for a constraint
 * that does not compile; returns SV_EXIT_CONSTRAINT, or SV_EXIT_RUNTIME for
 * errors that are not the constraint's fault (out of memory, I/O). */
int sv_cli_constraint_error(const sv_error_t *err);

/* Parses a non-negative decimal integer option value; returns 0 on success. */
int sv_cli_parse_u64(const char *s, unsigned long long max, unsigned long long *out);

#endif
