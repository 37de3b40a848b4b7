/* json_num.h — numeric languages: the spellings of JSON numbers whose values
 * satisfy integer / bound / multipleOf constraints, as exact digit automata.
 *
 * Spellings (no exponents in these automata; sv_json_number_exp adds the
 * exponent spellings Python writes apart, keeping or dropping each whole
 * exponent range, since a bound inside one would need an automaton that
 * compares exponents and mantissas):
 *   number:  -?(0|[1-9][0-9]*)(\.[0-9]+)?     every spelling of each value
 *                                            (trailing zeros, -0, -0.0 included)
 *   integer: 0|-?[1-9][0-9]*                  one spelling per value (no "-0",
 *                                            no "1.0": generation never needs them)
 * Languages are value-based: a number language holds every spelling above of
 * each accepted value, so products and differences with other languages that
 * follow the same rule are exact.
 *
 * Decimal strings given to these functions are plain decimals: an optional
 * '-', digits, optionally '.' and digits; no exponent, no '+'. */
#ifndef SV_FSM_JSON_NUM_H
#define SV_FSM_JSON_NUM_H

#include <stdbool.h>

#include "util/arena.h"
#include "util/error.h"
#include "ast.h"
#include "dfa.h"

typedef struct sv_num_bound {
    bool set;
    bool exclusive;      /* > or < instead of >= or <= */
    const char *value;   /* plain decimal string */
} sv_num_bound_t;

typedef struct sv_num_spec {
    bool integer;              /* JSON Schema type "integer" */
    sv_num_bound_t min, max;
    const char *multiple_of;   /* NULL, or a positive plain decimal string */
} sv_num_spec_t;

/* The language of numbers satisfying spec. Memory comes from the arena (DFAs
 * built on the way are registered with sv_arena_defer). SV_ERR_EMPTY when no
 * number satisfies it (min > max, say); SV_ERR_BUDGET when a multipleOf
 * modulus would need more states than lim allows. */
sv_status sv_json_number(sv_arena_t *a, const sv_num_spec_t *spec, const sv_fsm_limits_t *lim, sv_ast_t **out,
                         sv_error_t *err);

/* The exponent spellings Python's repr gives floats outside 1e-4 <= |x| <
 * 1e16 ("1e-05", "1.256e-06", "1e+16", "-2.5e+300"), as far as every value
 * they spell satisfies spec. Four groups: tiny (0 < |x| < 1e-4, exponent
 * -05..-307) and huge (1e16 <= |x| < 1e308, exponent +16..+307), each
 * positive or negative; the mantissa has no trailing zeros, as repr writes
 * it (its length is not capped at repr's 17 digits: that would cost 28 more
 * states per number). A group is kept only when the bounds hold
 * for all of its values (minimum <= 0 for the positive tiny ones, say), so the
 * result is exact but not value-complete: a bound inside a group drops the
 * group's exponent spellings, never its plain ones. Integers and multipleOf
 * get none. *out is NULL when no group is kept. */
sv_status sv_json_number_exp(sv_arena_t *a, const sv_num_spec_t *spec, sv_ast_t **out, sv_error_t *err);

/* The exponent spelling Python's repr writes for a plain decimal, if it
 * writes one (|x| < 1e-4 or |x| >= 1e16, at most 17 significant digits,
 * exponent within +-307): "0.00001" -> "1e-05", "12500000000000000" ->
 * "1.25e+16". Returns false (buf untouched) when repr would write it plainly
 * or not at all. buf needs 32 bytes. */
bool sv_json_number_exp_spelling(const char *decimal, char *buf, size_t cap);

/* Every number spelling of one value (for const and enum): "10" gives
 * 10(\.0+)?, "0" gives -?0(\.0+)?, "2.50" gives 2\.50*. */
sv_status sv_json_number_value(sv_arena_t *a, const char *decimal, sv_ast_t **out, sv_error_t *err);

/* The shortest digit string that reads back as x (finite, nonzero), as
 * Python's repr chooses it: x = (neg ? -1 : 1) * d0.d1d2... * 10^exp10 with
 * dig[0 .. nd) = d0 d1 ..., no trailing zeros, nd <= 17. False for 0 and
 * non-finite x. */
bool sv_shortest_digits(double x, char dig[24], int *nd, int *exp10, bool *neg);

/* Writes the plain decimal (no exponent) of a finite double, using the
 * shortest digit string that round-trips (as Python's repr does), e.g. 0.1 ->
 * "0.1", 1e21 -> "1000000000000000000000", 5e-7 -> "0.0000005". Returns false
 * if buf is too small or x is not finite. */
bool sv_decimal_from_double(double x, char *buf, size_t cap);

#endif
