/* schema_frame.c — free text around a schema's JSON text (fsm/schema.h,
 * sv_schema_frame_t). */
#include <string.h>

#include "fsm/internal/free_text.h"
#include "fsm/internal/schema_internal.h"

static sv_ast_t *bytes_of(sctx_t *c, const char *s) { return sv_sc_lit(c, s ? s : "", s ? strlen(s) : 0); }

sv_status sv_sc_frame(sctx_t *c, const sv_schema_frame_t *f, sv_ast_t **top, sv_dfa_t *kept[2]) {
    size_t tn = f->trigger ? strlen(f->trigger) : 0;
    if (tn == 0) return sv_sc_fail(c, SV_ERR_INTERNAL, NULL, "internal: a frame without a trigger");
    sv_error_t e;
    sv_error_clear(&e);
    sv_status st = sv_text_avoiding(&f->trigger, &tn, 1, sv_sc_lim(c), &kept[0], &e);
    if (!st && f->blocks) st = sv_text_until(kept[0], f->trigger, tn, sv_sc_lim(c), &kept[1], &e);
    if (st) return sv_sc_fail(c, st, NULL, "the free text around the value: %s", e.message);
    sv_arena_t *a = c->arena;
    sv_ast_t *text = sv_ast_dfa(a, kept[0], false), *out;
    if (f->blocks) {
        sv_ast_t *k[4] = {sv_ast_dfa(a, kept[1], false), bytes_of(c, f->open), *top, bytes_of(c, f->close)};
        sv_ast_t *block = sv_ast_cat(a, k, 4);
        if (f->repeat) {
            sv_ast_t *k2[2] = {sv_ast_repeat(a, block, 0, SV_AST_INF), text};
            out = sv_ast_cat(a, k2, 2);
        } else {
            sv_ast_t *k2[2] = {text, block};
            out = sv_ast_alt(a, k2, 2);
        }
    } else {
        sv_ast_t *k2[2] = {text, *top};
        sv_ast_t *k3[2] = {text, sv_ast_cat(a, k2, 2)};
        out = sv_ast_alt(a, k3, 2);
    }
    if (!out) return sv_sc_nomem(c);
    *top = out;
    return SV_OK;
}
