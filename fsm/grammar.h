/* grammar.h — context-free grammars in GBNF (llama.cpp's grammar format) or
 * the Lark-style EBNF of vLLM and llguidance (fsm/grammar_lark.c says what
 * of Lark is taken, docs/grammar.md shows both).
 *
 * A GBNF grammar is a list of rules `name ::= alternatives`; the string it
 * accepts is the rule `root`'s. Elements: "literals" and [classes] (with
 * ranges, ^ negation and the escapes \x.. \u.... \U........ \t \r \n \\ \"
 * \[ \] \-), `.` (any character), rule names, ( groups ), and the
 * repetitions ? * + {m} {m,} {m,n}; `#` starts a comment. A rule ends at a
 * newline unless a group is open or the line ends in `|`.
 *
 * What sieve does with one (docs/grammar.md): rules that are not recursive
 * are inlined; each recursive rule becomes a part of a program (fsm/program.c),
 * a minimized DFA that its uses call, so recursion nests to any depth. The
 * matcher decides every call by the next byte; a grammar where it cannot
 * (a left-recursive rule, or a rule that may go on with the byte its caller
 * continues with) is refused with an error, never narrowed in silence.
 *
 * Errors: SV_ERR_SYNTAX with the byte offset (err->offset) and the line and
 * column in the message; SV_ERR_UNSUPPORTED for constructs sieve does not
 * take (token references like <[1234]>, left recursion, undecidable calls,
 * Lark's templates and imports other than common);
 * SV_ERR_EMPTY when the start rule (GBNF's root, Lark's start) accepts nothing; SV_ERR_BUDGET / SV_ERR_TIMEOUT
 * past lim. */
#ifndef SV_FSM_GRAMMAR_H
#define SV_FSM_GRAMMAR_H

#include <stddef.h>

#include "dfa.h"
#include "util/error.h"

/* The most rules a grammar may define, and the deepest nesting of groups. */
#define SV_GRAMMAR_MAX_RULES 4096u
#define SV_GRAMMAR_MAX_NESTING 128u

typedef enum { SV_GRAMMAR_AUTO, SV_GRAMMAR_GBNF, SV_GRAMMAR_LARK } sv_grammar_format;

/* GBNF when the text has a `::=` (every GBNF rule does, and Lark never
 * needs one), else Lark: the rule vLLM uses to tell them apart. */
sv_grammar_format sv_grammar_detect(const char *text, size_t len);

/* Compiles the grammar text[0..len) into *out (lim NULL: defaults), in the
 * format sv_grammar_detect finds. */
sv_status sv_grammar_compile(const char *text, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                             sv_error_t *err);
sv_status sv_grammar_compile_as(sv_grammar_format format, const char *text, size_t len, const sv_fsm_limits_t *lim,
                                sv_dfa_t **out, sv_error_t *err);

#endif
