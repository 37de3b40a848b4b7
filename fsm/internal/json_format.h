/* json_format.h — JSON Schema `format` values as languages over the decoded
 * string content (code points, before JSON escaping).
 *
 * Every string in a format's language is valid for that format as Python's
 * `jsonschema` FormatChecker judges it (with the format-nongpl extras); the
 * language may be narrower than the RFC (a generator never needs every
 * spelling), never wider. */
#ifndef SV_FSM_JSON_FORMAT_H
#define SV_FSM_JSON_FORMAT_H

#include "util/arena.h"
#include "util/error.h"
#include "fsm/ast.h"

/* The content language of `format`, from the arena. SV_ERR_UNSUPPORTED (with
 * a message naming the format) for a format not in the supported set:
 * date-time, date, time, duration, email, hostname, ipv4, ipv6, uri,
 * uri-reference, uuid. */
sv_status sv_json_format(sv_arena_t *a, const char *format, sv_ast_t **out, sv_error_t *err);

/* Whether the format is supported (the list above). */
bool sv_json_format_known(const char *format);

/* Whether the format's language holds every valid value (date, ipv4); the
 * others are narrower, so a complement over them would be unsound. */
bool sv_json_format_exact(const char *format);

#endif
