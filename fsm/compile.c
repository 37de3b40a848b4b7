/* compile.c — the pipeline from an AST (or a regex) to the canonical DFA. */
#include <stdlib.h>

#include "dfa_internal.h"
#include "regex.h"

/* sv_dfa_from_ast is in dfa_cache.c (the pipeline behind a process-wide memo). */

sv_status sv_regex_compile(const char *pattern, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                           sv_error_t *err) {
    sv_arena_t *arena = sv_arena_create(0);
    if (!arena) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_ast_t *ast;
    sv_status st = sv_regex_parse(pattern, len, arena, &ast, err);
    if (!st) {
        st = sv_dfa_from_ast(ast, lim, out, err);
        if (st == SV_ERR_EMPTY) sv_error_set(err, SV_ERR_EMPTY, -1, "the pattern matches no string");
    }
    sv_arena_destroy(arena);
    return st;
}
