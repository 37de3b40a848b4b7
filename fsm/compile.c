/* compile.c — the pipeline from an AST (or a regex) to the canonical DFA. */
#include <stdlib.h>

#include "../src/util/clock.h"
#include "dfa_internal.h"
#include "regex.h"

sv_status sv_dfa_from_ast(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    uint64_t t0 = sv_now_ns();
    sv_nfa_t nfa;
    sv_status st = sv_nfa_build(ast, lim, &nfa, err);
    if (st) return st;
    sv_rawdfa_t raw = {0};
    st = sv_dfa_determinize(&nfa, lim, t0, &raw, err);
    sv_nfa_free(&nfa);
    if (st) return st;
    if (!st) st = sv_dfa_minimize_budget(&raw, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

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
