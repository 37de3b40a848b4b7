/* error.h — status codes and the caller-owned error record.
 *
 * Library code never prints and never exits: it returns an sv_status and, when
 * the caller passed a non-NULL sv_error_t, fills it with a message and whatever
 * context locates the problem (a byte offset in a regex, a keyword and a JSON
 * pointer in a schema).
 */
#ifndef SV_UTIL_ERROR_H
#define SV_UTIL_ERROR_H

#include <stddef.h>

typedef enum {
    SV_OK = 0,
    SV_ERR_SYNTAX,      /* the input does not parse (offset says where) */
    SV_ERR_UNSUPPORTED, /* a valid construct this implementation refuses */
    SV_ERR_EMPTY,       /* the constraint matches no string at all */
    SV_ERR_BUDGET,      /* a state, memory or size budget was exceeded */
    SV_ERR_TIMEOUT,     /* the time budget was exceeded */
    SV_ERR_NOMEM,       /* an allocation failed */
    SV_ERR_IO,          /* reading or writing a file failed */
    SV_ERR_ARG,         /* a caller passed an invalid argument */
    SV_ERR_CAPACITY,    /* the service is full for now (a queue, an inbox): retry later */
    SV_ERR_INTERNAL,    /* sieve's own fault: an invariant does not hold */
    SV_ERR_CANCELLED,   /* the caller gave up (a client that disconnected) */
    SV_ERR_NOT_FOUND,   /* what the caller names does not exist (a file, a batch) */
} sv_status;

/* An invariant of sieve's own code. When it does not hold, the operation
 * fails with SV_ERR_INTERNAL (at the server: a 500 for that request), and
 * the process goes on; builds with SV_ABORT_ON_INTERNAL (the fuzz and
 * sanitizer builds) stop at once instead, so the fault is found. */
#ifdef SV_ABORT_ON_INTERNAL
#include <stdio.h>
#include <stdlib.h>
#define SV_INVARIANT(cond, err, ...)                                              \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                              \
        }                                                                         \
    } while (0)
#else
#define SV_INVARIANT(cond, err, ...)                                              \
    do {                                                                          \
        if (!(cond)) return sv_error_set((err), SV_ERR_INTERNAL, -1, __VA_ARGS__); \
    } while (0)
#endif

typedef struct sv_error {
    sv_status code;
    long offset;        /* byte offset into the input, or -1 when not applicable */
    char message[512];
    char keyword[64];   /* schema keyword at fault ("" when not applicable) */
    char pointer[256];  /* JSON pointer of the schema location ("" when not applicable) */
} sv_error_t;

/* Fills err (if non-NULL) and returns code, so callers can write
 * `return sv_error_set(err, SV_ERR_SYNTAX, off, "...", ...);`. */
sv_status sv_error_set(sv_error_t *err, sv_status code, long offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Resets err to SV_OK with an empty message and offset -1. err may be NULL. */
void sv_error_clear(sv_error_t *err);

/* A stable lower-case name for a status ("syntax", "budget", ...). */
const char *sv_status_name(sv_status code);

#endif
