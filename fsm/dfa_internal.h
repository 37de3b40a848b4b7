/* dfa_internal.h — the DFA struct and the construction pipeline, shared by
 * the files of fsm/ and by its tests; not part of the public API. */
#ifndef SV_FSM_DFA_INTERNAL_H
#define SV_FSM_DFA_INTERNAL_H

#include "ast.h"
#include "dfa.h"

struct sv_dfa {
    uint32_t nstates;
    uint32_t nclasses;
    uint8_t classes[256];     /* byte -> class */
    uint8_t class_rep[256];   /* class -> its smallest byte */
    int32_t *trans;           /* (nstates, nclasses): next state or SV_DFA_DEAD */
    uint8_t *accept;          /* (nstates): 1 if accepting */
    uint32_t *dist;           /* (nstates): fewest bytes to acceptance */
    uint32_t *forced_off;     /* (nstates): offset into forced_buf */
    uint32_t *forced_len;     /* (nstates): 0 if not forced */
    uint8_t *forced_buf;      /* the forced chains, each state's a suffix of one */
    uint32_t nforced;         /* states with forced_len > 0 */
    _Atomic uint64_t fp;      /* fingerprint of the tables (dfa_cache.c), 0 = not yet */
};

/* Thompson NFA over bytes. */
/* NFA_DFA: state q of an embedded DFA. Its byte moves are the DFA's own
 * (read from the DFA, not stored as NFA edges: an embedded DFA costs one NFA
 * state per DFA state); out is the fragment's exit when q accepts, else -1;
 * out1 indexes nfa->embeds. */
typedef enum { NFA_BYTE, NFA_SPLIT, NFA_EPS, NFA_BOL, NFA_EOL, NFA_MATCH, NFA_DFA } nfa_kind;

typedef struct {
    uint8_t kind, lo, hi;
    int32_t out, out1;  /* out1: SPLIT's second branch, or NFA_DFA's embed index */
} sv_nfa_state_t;

typedef struct sv_nfa_embed {
    const sv_dfa_t *dfa;
    int32_t base;       /* NFA id of the DFA's state 0 */
} sv_nfa_embed_t;

typedef struct sv_nfa {
    sv_nfa_state_t *s;
    uint32_t n, cap;
    int32_t start;
    sv_nfa_embed_t *embeds;
    uint32_t nembeds, capembeds;
} sv_nfa_t;

/* Builds the NFA of an AST. Caller frees with sv_nfa_free. */
sv_status sv_nfa_build(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_nfa_t *nfa, sv_error_t *err);
void sv_nfa_free(sv_nfa_t *nfa);

/* A raw DFA from subset construction: complete numbering, not minimal; may
 * contain states that cannot reach acceptance. */
typedef struct sv_rawdfa {
    uint32_t nstates, nclasses;
    uint8_t classes[256];
    int32_t *trans;   /* (nstates, nclasses) */
    uint8_t *accept;
    int32_t start;
} sv_rawdfa_t;

void sv_rawdfa_free(sv_rawdfa_t *r);

/* Subset construction with the budgets of lim, measured from t0_ns. */
sv_status sv_dfa_determinize(const sv_nfa_t *nfa, const sv_fsm_limits_t *lim, uint64_t t0_ns, sv_rawdfa_t *out,
                             sv_error_t *err);

/* SV_ERR_BUDGET (with err filled) if minimizing raw would hold more than
 * lim->max_memory bytes of scratch. */
sv_status sv_dfa_minimize_budget(const sv_rawdfa_t *raw, const sv_fsm_limits_t *lim, sv_error_t *err);

/* Hopcroft minimization, trimming, BFS renumbering, byte-class coarsening and
 * the forced/distance analysis. Returns SV_ERR_EMPTY when the language is
 * empty. On success *out is a new DFA. */
sv_status sv_dfa_minimize(const sv_rawdfa_t *raw, sv_dfa_t **out, sv_error_t *err);

/* Computes dist, forced_* and nforced of a DFA whose nstates, classes,
 * class_rep, trans and accept are set (minimal and trimmed). */
sv_status sv_dfa_analyze(sv_dfa_t *d, sv_error_t *err);

/* The whole pipeline from an AST. */
sv_status sv_dfa_from_ast(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);

#endif
