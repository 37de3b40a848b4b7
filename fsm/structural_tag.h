/* structural_tag.h — XGrammar's structural tags (the `structural_tag`
 * response format of vLLM and SGLang) to one byte-level DFA.
 *
 * The input is the response_format object itself:
 *   {"type": "structural_tag", "format": FORMAT}                 (current)
 *   {"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
 *    "triggers": [...]}                                          (legacy)
 * where FORMAT is one of const_string {value}, json_schema {json_schema},
 * grammar {grammar} (GBNF, fsm/grammar.h), regex {pattern}, sequence
 * {elements}, or {elements}, tag {begin, content, end}, any_text {excludes},
 * triggered_tags {triggers, tags, at_least_one, stop_after_first, excludes}
 * and tags_with_separator {tags, separator, at_least_one, stop_after_first}.
 * The legacy form is triggered_tags whose tags hold JSON Schemas.
 *
 * The language is regular (docs/structural_tag.md has every
 * rule): free text is "text that does not contain a trigger, an end string
 * of the enclosing tag or an excluded string", built as a DFA difference,
 * and the first occurrence of one of them is where the text stops and the
 * tag it starts is enforced. So the token index masks it as any DFA: a
 * token that would complete a trigger and go on with bytes no tag allows is
 * masked, and so is one that would hide a trigger inside free text.
 *
 * A grammar with recursive rules keeps them as calls: its parts are linked
 * into the whole (fsm/program.c), the result a program.
 *
 * What is refused (SV_ERR_UNSUPPORTED, err->pointer names the part): a
 * grammar whose calls the next byte cannot decide where the tag uses it
 * (no pointer: the link sees the whole), a trigger, end string or excluded string that is part of another (which of
 * them fires would be ambiguous), a tag that no trigger starts, an unlimited
 * format (any_text, triggered_tags, tags_with_separator) before the end of a
 * sequence, an `or` mixing unlimited and limited formats, unknown fields.
 * Malformed input is SV_ERR_SYNTAX; the budgets below and lim's are
 * SV_ERR_BUDGET / SV_ERR_TIMEOUT. JSON Schema contents are compiled with
 * the options given, flat (free-form values to the bounded depth, recursive
 * $refs cut at max_ref_depth: fsm/schema.h); their errors keep the schema's
 * keyword, and their pointer is the structural tag's pointer followed by
 * the schema's. */
#ifndef SV_FSM_STRUCTURAL_TAG_H
#define SV_FSM_STRUCTURAL_TAG_H

#include <stddef.h>

#include "dfa.h"
#include "schema.h"
#include "util/error.h"

/* The deepest nesting of formats, and the most formats in one structural tag. */
#define SV_STAG_MAX_DEPTH 32u
#define SV_STAG_MAX_FORMATS 4096u
/* The most strings (triggers, end strings, excluded strings) one free text scans for. */
#define SV_STAG_MAX_STOPS 256u

/* Compiles the structural tag json[0..len) into *out, a new DFA the caller
 * frees with sv_dfa_destroy. o: the options of its JSON Schema contents
 * (whitespace, strictness, depths) and the budgets of the whole compile
 * (o->lim); NULL: defaults. On failure *out is NULL and err says why. */
sv_status sv_structural_tag_compile(const char *json, size_t len, const sv_schema_opts_t *o, sv_dfa_t **out,
                                    sv_error_t *err);

#endif
