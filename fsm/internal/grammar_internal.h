/* grammar_internal.h — what the grammar front ends (fsm/grammar_gbnf.c,
 * fsm/grammar_lark.c) share with the analysis and lowering of fsm/grammar.c.
 *
 * A front end parses its text into rules (gp_rule_of) whose bodies are trees
 * of gnode_t: leaves are ASTs (fsm/ast.h) at once, references to rules stay
 * by index until every rule is known. It returns the index of the start
 * rule; grammar.c does the rest. */
#ifndef SV_FSM_GRAMMAR_INTERNAL_H
#define SV_FSM_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/ast.h"
#include "fsm/grammar.h"
#include "fsm/dfa.h"
#include "util/arena.h"
#include "util/error.h"

/* The largest bound of a {m,n} repetition (its copies are states). */
#define SV_GRAMMAR_MAX_REPEAT 10000u

typedef enum { G_LEAF, G_REF, G_SEQ, G_ALT, G_REP } gkind;

typedef struct gnode {
    gkind kind;
    uint32_t n;            /* SEQ, ALT: kids */
    struct gnode **kids;   /* SEQ, ALT; REP: kids[0] */
    uint32_t min, max;     /* REP (max SV_AST_INF: unbounded) */
    sv_ast_t *leaf;        /* LEAF */
    uint32_t rule;         /* REF */
    size_t off;            /* where it starts in the text, for messages */
} gnode_t;

typedef struct {
    const char *name;      /* in the text, not NUL-terminated */
    uint32_t len;
    gnode_t *body;         /* NULL until defined */
    size_t def_off, use_off;
    bool reachable, productive, nullable, recursive;
    bool shared;           /* not recursive, but a part its uses call (grammar.c, "shared rules") */
    uint8_t plain;         /* 0 not known yet, 1 no call below it, 2 a call below it */
    uint32_t part;         /* its part id when recursive (or shared) and productive */
    sv_ast_t *ast;         /* the inlined AST (non-recursive) or the part's body */
    sv_dfa_t *dfa;         /* the part's compiled DFA, once asked for */
} rule_t;

typedef struct {
    const char *s;
    size_t n, pos;
    sv_arena_t *a;
    sv_error_t *err;
    const sv_fsm_limits_t *lim;
    rule_t *rules;
    uint32_t nrules, cap;
    uint32_t *ht, htcap;   /* rule index + 1 by name hash; htcap a power of two */
    uint32_t depth;
    uint32_t *part_rule;   /* (nparts + 1) the rule of each part id */
    uint32_t nparts;
    bool lark;             /* the text is Lark-style EBNF, not GBNF */
    uint64_t deadline_ns;  /* the whole compile's end (lim->max_time_us from its start); 0: none */
    uint64_t absorb_end_ns; /* the end of the rounds that absorb returns (grammar.c); 0: none */
    sv_fsm_limits_t lim_now; /* lim with the time left of it (gp_lim) */
    uint32_t id_base;      /* the parts' call ids are id_base + 1 .. id_base + nparts */
} gp_t;

sv_status gp_fail(gp_t *p, sv_status code, size_t off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
sv_status gp_nomem(gp_t *p);
/* A new tree node of p's arena (NULL, with err set, when out of memory). */
gnode_t *gp_node(gp_t *p, gkind kind, size_t off);
/* The index of the rule named s[0..len), added (undefined) when new;
 * UINT32_MAX with err set past SV_GRAMMAR_MAX_RULES or out of memory. */
uint32_t gp_rule_of(gp_t *p, const char *s, uint32_t len, size_t off);
/* One character of a literal at p->pos: a UTF-8 sequence (not NUL), or
 * the escapes both formats share, \xHH \uHHHH \UHHHHHHHH (a Unicode scalar
 * value). Another backslash escape leaves its letter in *escape (0
 * otherwise) and p->pos after it, for the front end to read. */
sv_status gp_char(gp_t *p, uint32_t *cp, char *escape);
/* A repetition bound in decimal at p->pos (at most SV_GRAMMAR_MAX_REPEAT). */
sv_status gp_uint(gp_t *p, uint32_t *v);
/* A node of kind SEQ or ALT over kids[0..n) (copied), or kids[0] when n is 1. */
gnode_t *gp_list(gp_t *p, gkind kind, gnode_t **kids, uint32_t n, size_t off);

/* The front ends: parse p->s[0..p->n) into p's rules and set *root. */
sv_status sv_gbnf_parse(gp_t *p, uint32_t *root);
sv_status sv_lark_parse(gp_t *p, uint32_t *root);

/* A grammar lowered for a compiler that embeds it (fsm/structural_tag.c):
 * the start rule's AST, whose calls name parts id_base + 1 .. id_base +
 * parts, and the parts' DFAs on demand, for that compiler's own
 * sv_program_link. The text must outlive it. The AST and the parts are
 * freed with it. */
typedef struct sv_grammar_lowered sv_grammar_lowered_t;
sv_status sv_grammar_lower(sv_grammar_format format, const char *text, size_t len, const sv_fsm_limits_t *lim,
                           uint32_t id_base, sv_grammar_lowered_t **out, sv_error_t *err);
sv_ast_t *sv_grammar_lowered_ast(const sv_grammar_lowered_t *g);
uint32_t sv_grammar_lowered_parts(const sv_grammar_lowered_t *g);
/* Part id's DFA (compiled the first time), or NULL with err set. */
const sv_dfa_t *sv_grammar_lowered_part(sv_grammar_lowered_t *g, uint32_t id, sv_error_t *err);
void sv_grammar_lowered_free(sv_grammar_lowered_t *g);

#endif
