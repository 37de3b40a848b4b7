/* compile.c — the pipeline from an AST (or a regex) to the canonical DFA. */
#include <stdlib.h>

#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"
#include "regex.h"

/* sv_dfa_from_ast is in dfa_cache.c (the pipeline behind a process-wide memo). */

sv_status sv_regex_compile(const char *pattern, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                           sv_error_t *err) {
    sv_memacct_t acct; /* the whole compile within lim->max_memory (util/memacct.h) */
    bool own = sv_memacct_begin(&acct, lim ? sv_memacct_limit_for(lim->max_memory, len) : 0);
    sv_arena_t *arena = sv_arena_create(0);
    sv_status st = arena ? SV_OK : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_ast_t *ast;
    if (!st) st = sv_regex_parse(pattern, len, arena, &ast, err);
    if (!st) {
        st = sv_dfa_from_ast(ast, lim, out, err);
        if (st == SV_ERR_EMPTY) sv_error_set(err, SV_ERR_EMPTY, -1, "the pattern matches no string");
    }
    sv_arena_destroy(arena);
    if (st == SV_ERR_NOMEM && own && acct.refused)
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "compiling the pattern exceeds the memory budget of %zu bytes",
                          lim->max_memory);
    if (st && own) st = sv_memacct_outcome(st, &acct, err);
    if (own) {
        if (!st) sv_dfa_uncharge(*out); /* the result outlives the account */
        sv_memacct_end(&acct);
    }
    return st;
}
