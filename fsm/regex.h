/* regex.h — regular expressions (the JSON Schema `pattern` dialect) to DFAs.
 *
 * The dialect is ECMA-262 with the `u` flag's view of text (code points, not
 * UTF-16 units), plus the few PCRE spellings common in real schemas:
 *   literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H..} \cX, escaped
 *   punctuation), classes and negated classes with ranges, \d \w \s and their
 *   negations (ECMA meanings: \d \w ASCII, \s Unicode spaces), \p{..} \P{..}
 *   for general categories, `.` (anything but \n \r U+2028 U+2029), `|`,
 *   `* + ?` and `{m} {m,} {m,n}` (lazy `?` suffixes accepted: they do not
 *   change the language), groups `( )`, `(?: )`, named groups, and `^` `$`
 *   (also \A \z) as zero-width assertions for the start and end of the whole
 *   string, wherever they appear. `[]` matches nothing and `[^]` any code
 *   point, as in ECMA-262; a `{` that does not start a quantifier is literal.
 * Refused with SV_ERR_UNSUPPORTED and the construct's byte offset:
 * lookarounds, back-references, \b \B, possessive quantifiers, inline flags,
 * POSIX classes, Unicode scripts.
 *
 * Matching is whole-string: the DFA accepts a byte string iff the whole
 * string matches. Surrogate code points never match (UTF-8 cannot hold them);
 * a `\uD83D\uDE00` pair is read as the one code point it encodes. */
#ifndef SV_FSM_REGEX_H
#define SV_FSM_REGEX_H

#include <stddef.h>

#include "util/arena.h"
#include "util/error.h"
#include "ast.h"
#include "dfa.h"

/* Parses pattern[0..len) into an AST allocated from arena. On error returns
 * the status and fills err (message and byte offset); *out is untouched. */
sv_status sv_regex_parse(const char *pattern, size_t len, sv_arena_t *arena, sv_ast_t **out,
                         sv_error_t *err);

/* Parses, builds the NFA, determinizes, minimizes and analyzes. On success
 * *out is a new DFA the caller frees with sv_dfa_destroy. A pattern that
 * matches no string at all is SV_ERR_EMPTY. lim may be NULL for defaults. */
sv_status sv_regex_compile(const char *pattern, size_t len, const sv_fsm_limits_t *lim,
                           sv_dfa_t **out, sv_error_t *err);

#endif
