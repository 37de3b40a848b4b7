/* ast.h — the regular-expression tree every constraint becomes.
 *
 * Regexes, and later JSON Schemas, choice lists and tool-call formats, are
 * lowered to this small algebra over Unicode text before the NFA is built:
 * code-point classes (a literal is a one-element class), concatenation,
 * alternation, bounded or unbounded repetition, and the zero-width
 * assertions for the start and the end of the whole string. Nodes live in an
 * arena and are immutable once built, so subtrees may be shared. */
#ifndef SV_FSM_AST_H
#define SV_FSM_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "util/arena.h"
#include "cpset.h"

#define SV_AST_INF UINT32_MAX /* REPEAT max for `*`, `+`, `{m,}` */

typedef enum {
    SV_AST_NONE,   /* matches no string */
    SV_AST_EMPTY,  /* matches the empty string */
    SV_AST_CLASS,  /* one code point from ranges[0..nranges) */
    SV_AST_BYTES,  /* one byte in [lo, hi]: raw bytes, for constraints below the text level */
    SV_AST_CAT,    /* kids in sequence */
    SV_AST_ALT,    /* any one kid */
    SV_AST_REPEAT, /* kids[0] repeated min..max times */
    SV_AST_BOL,    /* zero-width: the start of the string */
    SV_AST_EOL,    /* zero-width: the end of the string */
    SV_AST_DFA,    /* the language of a compiled DFA (borrowed; must outlive the AST) */
    SV_AST_GRAPH,  /* an explicit automaton whose edges are labeled by sub-languages */
} sv_ast_kind;

/* One edge of a GRAPH node; label NULL is an epsilon edge. */
typedef struct sv_ast_edge {
    uint32_t from, to;
    struct sv_ast *label;
} sv_ast_edge_t;

struct sv_dfa;

typedef struct sv_ast {
    sv_ast_kind kind;
    uint32_t nkids;
    struct sv_ast **kids;        /* CAT, ALT: nkids >= 1; REPEAT: one */
    uint32_t min, max;           /* REPEAT */
    const sv_cprange_t *ranges;  /* CLASS: normalized, nranges >= 1 */
    uint32_t nranges;
    uint8_t lo, hi;              /* BYTES */
    const struct sv_dfa *dfa;    /* DFA */
    bool json_escape;            /* DFA: spell the DFA's bytes as JSON string content:
                                    '"' '\\' and controls become their json.dumps escapes */
    uint32_t nnodes, nedges;     /* GRAPH: nodes 0..nnodes-1, start node 0 */
    sv_ast_edge_t *edges;        /* GRAPH */
    const uint8_t *final;        /* GRAPH: (nnodes) 1 = accepting node */
} sv_ast_t;

/* Constructors. All memory comes from the arena; each returns NULL when the
 * arena is out of memory, or when a kid it is given is NULL (so a failed
 * allocation anywhere below propagates up instead of becoming a hole). sv_ast_class copies a normalized set (an empty set
 * gives a NONE node). sv_ast_cat/alt copy the kids array. */
sv_ast_t *sv_ast_none(sv_arena_t *a);
sv_ast_t *sv_ast_empty(sv_arena_t *a);
sv_ast_t *sv_ast_class(sv_arena_t *a, const sv_cpset_t *set);
sv_ast_t *sv_ast_codepoint(sv_arena_t *a, uint32_t cp);
sv_ast_t *sv_ast_bytes(sv_arena_t *a, uint8_t lo, uint8_t hi);
sv_ast_t *sv_ast_cat(sv_arena_t *a, sv_ast_t *const *kids, uint32_t n);
sv_ast_t *sv_ast_alt(sv_arena_t *a, sv_ast_t *const *kids, uint32_t n);
sv_ast_t *sv_ast_repeat(sv_arena_t *a, sv_ast_t *kid, uint32_t min, uint32_t max);
sv_ast_t *sv_ast_assert(sv_arena_t *a, sv_ast_kind bol_or_eol);
/* Embeds a compiled DFA (borrowed: it must outlive every use of the AST).
 * With json_escape, the bytes of the DFA's strings are spelled as the content
 * of a JSON string the way Python's json.dumps(ensure_ascii=False) writes it:
 * '"' and '\\' and the controls below 0x20 become escapes (\" \\ \b \f \n \r
 * \t, else \u00xx in lower-case hex); every other byte stands for itself. */
sv_ast_t *sv_ast_dfa(sv_arena_t *a, const struct sv_dfa *dfa, bool json_escape);

/* An estimate of the size of a's automaton: the states of embedded DFAs,
 * one a byte or class (four for a class beyond ASCII), repeats multiplied
 * out (an unbounded one counted once more than its minimum), graphs by
 * their nodes and labels; saturating at cap. Not a bound on the DFA, which
 * subset construction can blow up: a filter for work that only pays on big
 * automata. */
uint64_t sv_ast_weight(const sv_ast_t *a, uint64_t cap);

/* A graph of nnodes nodes (start 0) with the given edges and accepting
 * nodes; edges and final are copied into the arena. Each edge's label is
 * built once per edge. */
sv_ast_t *sv_ast_graph(sv_arena_t *a, uint32_t nnodes, const sv_ast_edge_t *edges, uint32_t nedges,
                       const uint8_t *final);

#endif
