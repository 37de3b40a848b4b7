/* free_text.c — free text that stops at given strings (free_text.h). */
#include "fsm/internal/free_text.h"

#include "fsm/ast.h"
#include "fsm/internal/dfa_internal.h"
#include "util/arena.h"

/* Σ*: any code point, as UTF-8. */
static sv_ast_t *any_text(sv_arena_t *a) {
    sv_cpset_t set;
    sv_cpset_init(&set);
    sv_ast_t *one = NULL;
    if (!sv_cpset_add(&set, 0, 0xD7FF) && !sv_cpset_add(&set, 0xE000, 0x10FFFF) && !sv_cpset_normalize(&set))
        one = sv_ast_class(a, &set);
    sv_cpset_free(&set);
    return one ? sv_ast_repeat(a, one, 0, SV_AST_INF) : NULL;
}

static sv_ast_t *literal(sv_arena_t *a, const char *s, size_t n) {
    if (n == 0) return sv_ast_empty(a);
    sv_ast_t **k = sv_arena_alloc(a, n * sizeof *k);
    if (!k) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(k[i] = sv_ast_bytes(a, (uint8_t)s[i], (uint8_t)s[i]))) return NULL;
    return sv_ast_cat(a, k, (uint32_t)n);
}

sv_status sv_text_avoiding(const char *const *s, const size_t *len, uint32_t n, const sv_fsm_limits_t *lim,
                           sv_dfa_t **out, sv_error_t *err) {
    *out = NULL;
    sv_arena_t *a = sv_arena_create(0);
    if (!a) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_ast_t *any = any_text(a), *bad = NULL;
    sv_ast_t **lits = n ? sv_arena_alloc(a, n * sizeof *lits) : NULL;
    bool ok = any && (n == 0 || lits);
    for (uint32_t i = 0; ok && i < n; i++) ok = (lits[i] = literal(a, s[i], len[i])) != NULL;
    if (ok && n) {
        sv_ast_t *k[3] = {any, sv_ast_alt(a, lits, n), any};
        ok = k[1] && (bad = sv_ast_cat(a, k, 3)) != NULL;
    }
    sv_status st = ok ? SV_OK : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_dfa_t *all = NULL, *with = NULL;
    if (!st) st = sv_dfa_from_ast(any, lim, &all, err);
    if (!st && n) st = sv_dfa_from_ast(bad, lim, &with, err);
    if (!st && n) st = sv_dfa_product(all, with, SV_DFA_DIFF, lim, out, err);
    if (!st && !n) *out = all, all = NULL;
    sv_dfa_destroy(all);
    sv_dfa_destroy(with);
    sv_arena_destroy(a);
    return st;
}

sv_status sv_text_until(const sv_dfa_t *p, const char *k, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                        sv_error_t *err) {
    *out = NULL;
    if (len == 0) return sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: free text up to the empty string");
    size_t last = len - 1; /* k's last code point starts at last */
    while (last > 0 && ((uint8_t)k[last] & 0xC0) == 0x80) last--;
    sv_arena_t *a = sv_arena_create(0);
    if (!a) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_ast_t *pc[2] = {sv_ast_dfa(a, p, false), literal(a, k + last, len - last)};
    sv_ast_t *ak[2] = {any_text(a), literal(a, k, len)};
    sv_ast_t *x = pc[0] && pc[1] ? sv_ast_cat(a, pc, 2) : NULL, *y = ak[0] && ak[1] ? sv_ast_cat(a, ak, 2) : NULL;
    sv_status st = x && y ? SV_OK : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_dfa_t *dx = NULL, *dy = NULL;
    if (!st) st = sv_dfa_from_ast(x, lim, &dx, err);
    if (!st) st = sv_dfa_from_ast(y, lim, &dy, err);
    if (!st) st = sv_dfa_product(dx, dy, SV_DFA_AND, lim, out, err);
    sv_dfa_destroy(dx);
    sv_dfa_destroy(dy);
    sv_arena_destroy(a);
    return st;
}
