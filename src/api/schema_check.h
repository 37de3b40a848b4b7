/* schema_check.h — a JSON Schema validator over jansson values, independent
 * of the constraint compiler.
 *
 * sieve guarantees that a constrained output matches its schema because the
 * DFA the compiler built only lets such outputs through. This checks the
 * result the other way, by walking the schema over the parsed output, with
 * no code in common with fsm/: batch outputs are checked with it before they
 * are written (src/cli/cmd_batch.c), so a compiler bug would show as a
 * `validation_failed` line, never as a silently invalid one.
 *
 * Draft 2020-12 semantics (draft 7's array `items`, `additionalItems` and
 * `dependencies` and draft 4's boolean exclusive bounds are read too):
 * type, enum, const, the numeric bounds and multipleOf, minLength and
 * maxLength (code points), pattern and patternProperties (PCRE2, unanchored),
 * properties, additionalProperties, required, propertyNames, min/
 * maxProperties, dependentRequired, dependentSchemas, prefixItems, items,
 * min/maxItems, uniqueItems, contains with min/maxContains, allOf, anyOf,
 * oneOf, not, if/then/else, and $ref to a JSON pointer in the same document
 * ("#", "#/$defs/x", "#/definitions/x", "#/properties/a/items", ...).
 * `format` is an annotation (as 2020-12 says), so it is not checked.
 *
 * What it cannot check it says so rather than guess: $ref to anything but a
 * local JSON pointer, $dynamicRef, unevaluatedProperties/Items, a pattern
 * PCRE2 does not take, a $schema outside json-schema.org (its vocabularies
 * may differ), and nesting past 256 levels give SV_CHECK_UNCHECKED. */
#ifndef SV_SERVER_SCHEMA_CHECK_H
#define SV_SERVER_SCHEMA_CHECK_H

#include <jansson.h>
#include <stddef.h>

typedef enum { SV_CHECK_VALID = 0, SV_CHECK_INVALID = 1, SV_CHECK_UNCHECKED = 2 } sv_check_outcome;

typedef struct sv_check_result {
    char pointer[256];  /* INVALID: the instance location (JSON pointer) of the first failure */
    char keyword[32];   /* INVALID: its keyword; UNCHECKED: the construct not supported */
} sv_check_result_t;

/* Checks instance against schema, the root document of its $refs. res may
 * be NULL. */
sv_check_outcome sv_schema_check(const json_t *schema, const json_t *instance, sv_check_result_t *res);

/* Whether all of text[0..len) matches pattern, by PCRE2 (UTF mode, anchored
 * at both ends); UNCHECKED when PCRE2 does not take the pattern. */
sv_check_outcome sv_regex_check(const char *pattern, size_t plen, const char *text, size_t len);
/* Whether text is in the GBNF grammar's language, by sieve's own grammar
 * compiler (no independent GBNF engine is a dependency): SV_CHECK_UNCHECKED
 * when the grammar does not compile. */
sv_check_outcome sv_grammar_check(const char *grammar, size_t glen, const char *text, size_t len);
/* Whether text is in the structural tag's language (fsm/structural_tag.h),
 * its JSON Schema contents in whitespace mode ws (an sv_ws_mode), by sieve's
 * own compiler: SV_CHECK_UNCHECKED when the structural tag does not compile. */
sv_check_outcome sv_structural_tag_check(const char *stag, size_t slen, int ws, const char *text, size_t len);

#endif
