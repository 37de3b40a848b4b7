/* json_quote.c — the quoted spelling of a string content, built directly.
 *
 * A JSON string value is '"', its content spelled as json.dumps writes it
 * (ensure_ascii=False: '"' and '\\' and the controls below 0x20 become
 * escapes, everything else stands for itself), and '"'. The schema compiler
 * asks for that language for every string member and for every object's
 * extra keys (the content there is "any string but the declared keys"), so
 * it is built often: as an NFA that spells each escaped byte out, its
 * subset construction took about 20 µs a state (1 ms for a 50-key object;
 * a third of compiling the GitHub MCP server's tools).
 *
 * The escapes need no subset construction. Each content state q becomes a
 * state Q(q) that reads the unescaped bytes of its moves directly; a '\\'
 * from Q(q) enters E(q), which reads the escape letter of each escaped byte
 * q moves on (\" \\ \b \f \n \r \t), and 'u' then "00" and one hex digit
 * pair for the other controls (\u0000..\u001f, lowercase hex, as json.dumps
 * writes them). Every escape is a byte path of its own, so the table is
 * deterministic as built: one start state reading '"', one final state
 * after the closing '"' (read where q accepts), and at most six escape
 * states per content state, made only where q moves on an escaped byte and
 * shared by the states that move alike on every escaped byte.
 * Minimization then merges what is still alike and gives the same
 * canonical table as the NFA route, which tests/unit/test_dfa_ops.c checks
 * on fixed and random contents. */
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

/* The escape states of one content state (-1: not made). */
enum { E_BS, E_U, E_U0, E_U00, E_H0, E_H1, E_N };

static bool escaped(uint32_t b) { return b < 0x20 || b == '"' || b == '\\'; }

/* The letter after '\\' of an escape with a short form, else 0. */
static uint8_t short_escape(uint32_t b) {
    switch (b) {
    case '"': return '"';
    case '\\': return '\\';
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
    }
}

static const char HEX[] = "0123456789abcdef";

sv_status sv_dfa_json_quoted_uncached(const sv_dfa_t *content, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                      sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    if (content->call_off)
        return sv_error_set(err, SV_ERR_ARG, -1, "a program cannot be the content of a JSON string");
    const uint32_t n = content->nstates;
    /* Byte classes: the content's, split so that every byte an escape
     * spells, every escaped byte and '"' and '\\' is told apart. */
    sv_rawdfa_t raw = {0};
    {
        int32_t key_class[256 * 2]; /* (content class, control or not) -> class */
        for (size_t i = 0; i < sizeof key_class / sizeof *key_class; i++) key_class[i] = -1;
        uint32_t nc = 0;
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t kind = 0;
            if (b < 0x20) kind = 1; /* never read raw */
            else if (b == '"' || b == '\\' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't' || b == 'u' ||
                     (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f'))
                kind = 2 + b; /* a byte of its own */
            int32_t *slot;
            int32_t single = -1;
            if (kind >= 2) slot = &single;
            else slot = &key_class[content->classes[b] * 2 + kind];
            if (*slot < 0) *slot = (int32_t)nc++;
            raw.classes[b] = (uint8_t)*slot;
        }
        raw.nclasses = nc;
    }
    uint8_t rep[256]; /* a byte of each class: its bytes move alike from every state */
    for (int b = 255; b >= 0; b--) rep[raw.classes[b]] = (uint8_t)b;
    const uint32_t k = raw.nclasses;
    /* State ids: 0 the start, 1 the final state, 2 + q the content states,
     * then escape states as they are made. Content states that move alike
     * on every escaped byte share their escape states: what those read, and
     * where they end, depends on those moves alone, so sharing keeps the
     * language and spares minimization the copies it would merge (an
     * object's extra keys, "any string but the declared keys", move alike
     * on escaped bytes from all but a few of their states). grp[q] is q's
     * group (UINT32_MAX: no escaped byte moves from q), grep[g] the group's
     * first state; groups are found by hashing the escaped bytes' targets. */
    static const uint8_t EB[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                                 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, '"', '\\'}; /* escaped() */
    enum { NEB = sizeof EB };
    uint32_t tcap = 16;
    while (tcap < 2 * (size_t)n) tcap *= 2;
    int32_t *esc = malloc(((size_t)n * E_N + 1) * sizeof *esc);
    uint32_t *grp = malloc(((size_t)n + 1) * sizeof *grp), *grep = malloc(((size_t)n + 1) * sizeof *grep);
    uint32_t *slot = malloc((size_t)tcap * sizeof *slot);
    if (!esc || !grp || !grep || !slot) {
        free(esc), free(grp), free(grep), free(slot);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory quoting a string content");
    }
    for (size_t i = 0; i < (size_t)n * E_N; i++) esc[i] = -1;
    for (uint32_t i = 0; i < tcap; i++) slot[i] = UINT32_MAX;
    uint32_t ns = 2 + n, ngroups = 0;
    for (uint32_t q = 0; q < n; q++) {
        const int32_t *row = content->trans + (size_t)q * content->nclasses;
        bool any = false, u = false, lo = false, hi = false;
        uint64_t h = 0x9e3779b97f4a7c15ull;
        for (uint32_t i = 0; i < NEB; i++) {
            int32_t t = row[content->classes[EB[i]]];
            h = (h ^ (uint32_t)t) * 0x100000001b3ull;
            if (t < 0) continue;
            any = true;
            if (!short_escape(EB[i])) u = true, (EB[i] < 0x10 ? (lo = true) : (hi = true));
        }
        grp[q] = UINT32_MAX;
        if (!any) continue;
        uint32_t at = (uint32_t)(h ^ (h >> 32)) & (tcap - 1);
        for (; slot[at] != UINT32_MAX; at = (at + 1) & (tcap - 1)) {
            const int32_t *r0 = content->trans + (size_t)grep[slot[at]] * content->nclasses;
            uint32_t i = 0;
            while (i < NEB && r0[content->classes[EB[i]]] == row[content->classes[EB[i]]]) i++;
            if (i == NEB) break;
        }
        if (slot[at] != UINT32_MAX) {
            grp[q] = slot[at];
            continue;
        }
        uint32_t g = ngroups++;
        slot[at] = g, grp[q] = g, grep[g] = q;
        int32_t *e = esc + (size_t)g * E_N;
        e[E_BS] = (int32_t)ns++;
        if (u) {
            e[E_U] = (int32_t)ns++;
            e[E_U0] = (int32_t)ns++;
            e[E_U00] = (int32_t)ns++;
            if (lo) e[E_H0] = (int32_t)ns++;
            if (hi) e[E_H1] = (int32_t)ns++;
        }
    }
    free(slot);
    if (lim->max_dfa_states && ns > lim->max_dfa_states) {
        free(esc), free(grp), free(grep);
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the quoted string needs more than %u DFA states",
                            lim->max_dfa_states);
    }
    size_t cells = (size_t)ns * k, bytes = cells * sizeof *raw.trans + ns;
    if (!sv_memacct_fits(bytes, lim->max_memory)) {
        free(esc), free(grp), free(grep);
        return sv_error_set(err, SV_ERR_BUDGET, -1, "quoting a string content needs about %zu bytes, more than is left "
                            "of the compile's memory budget of %zu bytes", bytes, lim->max_memory);
    }
    raw.nstates = ns;
    raw.start = 0;
    raw.trans = malloc((cells ? cells : 1) * sizeof *raw.trans);
    raw.accept = calloc(ns, 1);
    if (!raw.trans || !raw.accept) {
        free(esc), free(grp), free(grep);
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory quoting a string content");
    }
    for (size_t i = 0; i < cells; i++) raw.trans[i] = -1;
#define SET(s, b, t) (raw.trans[(size_t)(s) * k + raw.classes[(uint8_t)(b)]] = (int32_t)(t))
    SET(0, '"', 2);
    raw.accept[1] = 1;
    for (uint32_t q = 0; q < n; q++) {
        uint32_t s = 2 + q;
        const int32_t *e = grp[q] == UINT32_MAX ? NULL : esc + (size_t)grp[q] * E_N;
        /* Raw bytes: one class at a time (a class never mixes escaped and
         * unescaped bytes, nor bytes of different content classes). */
        const int32_t *row = content->trans + (size_t)q * content->nclasses;
        for (uint32_t j = 0; j < k; j++) {
            if (escaped(rep[j])) continue;
            int32_t t = row[content->classes[rep[j]]];
            if (t >= 0) raw.trans[(size_t)s * k + j] = 2 + t;
        }
        if (content->accept[q]) SET(s, '"', 1);
        if (!e) continue;
        SET(s, '\\', e[E_BS]);
        if (grep[grp[q]] != q) continue; /* the group's escape states are written */
        for (uint32_t i = 0; i < NEB; i++) {
            uint32_t b = EB[i];
            int32_t t = row[content->classes[b]];
            if (t < 0) continue;
            uint8_t letter = short_escape(b);
            if (letter) {
                SET(e[E_BS], letter, 2 + (uint32_t)t);
                continue;
            }
            /* \u00XY: X is 0 or 1, Y the low hex digit */
            SET(e[E_BS], 'u', e[E_U]);
            SET(e[E_U], '0', e[E_U0]);
            SET(e[E_U0], '0', e[E_U00]);
            int32_t h = b < 0x10 ? e[E_H0] : e[E_H1];
            SET(e[E_U00], b < 0x10 ? '0' : '1', h);
            SET(h, HEX[b & 15], 2 + (uint32_t)t);
        }
    }
#undef SET
    free(esc), free(grp), free(grep);
    sv_status st = sv_dfa_minimize_budget(&raw, bytes, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

/* ---- counted strings -------------------------------------------------------
 *
 * A string with minLength and maxLength and nothing else is the commonest
 * counted language in real schemas (OpenAPI and Snowplow write maxLength on
 * most strings), and through the general route the costliest to build: a
 * content DFA of eight states a code point (subset construction of a
 * repeat), quoted to fourteen (each level's escapes), minimized twice, 8 ms
 * for maxLength 512. Its minimal DFA is known in advance, so it is written
 * down directly. Level k (k code points read) has a boundary state B(k)
 * and, where a code point may still follow, the states inside one: six of
 * an escape (after '\\', 'u', "u0", "u00", "u000", "u001") and seven of a
 * multi-byte UTF-8 sequence (one, two or three continuation bytes left, and
 * the four lead bytes whose first continuation is narrower: E0, ED (no
 * surrogates), F0, F4). Every move inside a code point ends at B(k+1);
 * with no maxLength the last level's moves end at B(mn) again. '"' closes
 * from B(k) for k >= mn. No two states accept the same strings (they differ
 * in what they read next, or, a level apart, in how many code points may or
 * must still follow), so minimization has nothing to merge: the raw table
 * is marked minimal and only trimmed, renumbered breadth-first and given
 * its coarsest classes (minimize.c), which gives the table of the general
 * route (tests/fsm_test.c compares them). */

/* The byte classes of the raw table (minimize.c coarsens them). */
enum {
    K_CTRL, K_QUOTE, K_BSLASH, K_BF, K_NRT, K_U, K_0, K_1, K_HEX_ANY, K_HEX_HI, K_PLAIN,
    K_C80, K_C90, K_CA0, K_L2, K_E0, K_E, K_ED, K_F0, K_F, K_F4, K_BAD, K_N
};

static uint8_t counted_class(uint32_t b) {
    if (b < 0x20) return K_CTRL;
    switch (b) {
    case '"': return K_QUOTE;
    case '\\': return K_BSLASH;
    case 'b': case 'f': return K_BF; /* an escape letter and a hex digit of \u000X */
    case 'n': case 'r': case 't': return K_NRT;
    case 'u': return K_U;
    case '0': return K_0;
    case '1': return K_1;
    case '2': case '3': case '4': case '5': case '6': case '7': case 'e': return K_HEX_ANY;
    case '8': case '9': case 'a': case 'c': case 'd': return K_HEX_HI; /* \u000X has a short form */
    default: break;
    }
    if (b < 0x80) return K_PLAIN;
    if (b < 0x90) return K_C80;
    if (b < 0xA0) return K_C90;
    if (b < 0xC0) return K_CA0;
    if (b < 0xC2) return K_BAD;
    if (b < 0xE0) return K_L2;
    if (b == 0xE0) return K_E0;
    if (b == 0xED) return K_ED;
    if (b < 0xF0) return K_E;
    if (b == 0xF0) return K_F0;
    if (b < 0xF4) return K_F;
    if (b == 0xF4) return K_F4;
    return K_BAD;
}

/* The states inside a code point, after its level's boundary. */
enum { S_BS, S_U, S_U0, S_U00, S_H0, S_H1, S_T1, S_T2, S_T3, S_XE0, S_XED, S_XF0, S_XF4, S_IN };

sv_status sv_dfa_json_quoted_counted_uncached(uint32_t mn, uint32_t mx, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                              sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    if (mx != SV_AST_INF && mn > mx) return sv_error_set(err, SV_ERR_EMPTY, -1, "minLength is above maxLength");
    /* Boundaries B(0..top). The states inside a code point are made once
     * per boundary they end at, B(1..top), or B(0) alone for a loop at
     * level 0: the moves from B(top) back to B(top) share those from
     * B(top - 1), which end there too. */
    const bool loop = mx == SV_AST_INF;
    const uint64_t top = loop ? mn : mx, nin = loop ? (mn ? mn : 1) : mx;
    const uint64_t ns64 = 2 + (top + 1) + nin * S_IN; /* start, final, boundaries, insides */
    if ((lim->max_dfa_states && ns64 > lim->max_dfa_states) || ns64 > INT32_MAX)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the counted string needs more than %u DFA states",
                            lim->max_dfa_states);
    const uint32_t ns = (uint32_t)ns64, k = K_N;
    size_t cells = (size_t)ns * k, bytes = cells * sizeof(int32_t) + ns;
    if (!sv_memacct_fits(bytes, lim->max_memory))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "a counted string needs about %zu bytes, more than is left of the "
                            "compile's memory budget of %zu bytes", bytes, lim->max_memory);
    sv_rawdfa_t raw = {.nstates = ns, .nclasses = k, .start = 0, .minimal = true};
    /* classes numbered by their first byte, as subset construction numbers
     * them: the minimized table's class ids follow the raw ones */
    uint8_t cid[K_N];
    memset(cid, 0xFF, sizeof cid);
    for (uint32_t b = 0, nc = 0; b < 256; b++) {
        uint8_t c = counted_class(b);
        if (cid[c] == 0xFF) cid[c] = (uint8_t)nc++;
        raw.classes[b] = cid[c];
    }
    raw.trans = malloc(cells * sizeof *raw.trans);
    raw.accept = calloc(ns, 1);
    if (!raw.trans || !raw.accept) {
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building a counted string");
    }
    for (size_t i = 0; i < cells; i++) raw.trans[i] = -1;
    /* ids: 0 the start, 1 the final state, 2 + level its boundary, then
     * the S_IN states that end at each boundary */
    const uint32_t fin = 1, inside0 = 2 + (uint32_t)top + 1;
#define B(l) (2u + (uint32_t)(l))
#define IN(s) (inside0 + (uint32_t)(nl ? nl - 1 : 0) * S_IN + (uint32_t)(s)) /* nl: the level it ends at */
#define SET(s, c, t) (raw.trans[(size_t)(s) * k + cid[c]] = (int32_t)(t))
    raw.accept[fin] = 1;
    SET(0, K_QUOTE, B(0));
    for (uint64_t l = 0; l <= top; l++) {
        const uint32_t b = B(l);
        if (l >= mn) SET(b, K_QUOTE, fin);
        if (!loop && l == top) continue; /* no code point after the last */
        const uint64_t nl = loop && l == top ? top : l + 1; /* the level a code point ends at */
        const uint32_t next = B(nl);
        /* one byte: printable ASCII */
        static const uint8_t plain[] = {K_BF, K_NRT, K_U, K_0, K_1, K_HEX_ANY, K_HEX_HI, K_PLAIN};
        for (size_t i = 0; i < sizeof plain; i++) SET(b, plain[i], next);
        /* escapes: \" \\ \b \f \n \r \t, and \u00XY for the other controls */
        SET(b, K_BSLASH, IN(S_BS));
        SET(IN(S_BS), K_QUOTE, next);
        SET(IN(S_BS), K_BSLASH, next);
        SET(IN(S_BS), K_BF, next);
        SET(IN(S_BS), K_NRT, next);
        SET(IN(S_BS), K_U, IN(S_U));
        SET(IN(S_U), K_0, IN(S_U0));
        SET(IN(S_U0), K_0, IN(S_U00));
        SET(IN(S_U00), K_0, IN(S_H0));
        SET(IN(S_U00), K_1, IN(S_H1));
        static const uint8_t h0[] = {K_0, K_1, K_HEX_ANY, K_BF}; /* 0-7 b e f: 8 9 a c d have short forms */
        for (size_t i = 0; i < sizeof h0; i++) SET(IN(S_H0), h0[i], next), SET(IN(S_H1), h0[i], next);
        SET(IN(S_H1), K_HEX_HI, next);
        /* UTF-8 sequences of two to four bytes, no surrogates, up to U+10FFFF */
        SET(b, K_L2, IN(S_T1));
        SET(b, K_E0, IN(S_XE0));
        SET(b, K_E, IN(S_T2));
        SET(b, K_ED, IN(S_XED));
        SET(b, K_F0, IN(S_XF0));
        SET(b, K_F, IN(S_T3));
        SET(b, K_F4, IN(S_XF4));
        static const uint8_t cont[] = {K_C80, K_C90, K_CA0};
        for (size_t i = 0; i < sizeof cont; i++) {
            SET(IN(S_T1), cont[i], next);
            SET(IN(S_T2), cont[i], IN(S_T1));
            SET(IN(S_T3), cont[i], IN(S_T2));
        }
        SET(IN(S_XE0), K_CA0, IN(S_T1));
        SET(IN(S_XED), K_C80, IN(S_T1));
        SET(IN(S_XED), K_C90, IN(S_T1));
        SET(IN(S_XF0), K_C90, IN(S_T2));
        SET(IN(S_XF0), K_CA0, IN(S_T2));
        SET(IN(S_XF4), K_C80, IN(S_T2));
    }
#undef SET
#undef IN
#undef B
    sv_status st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

/* ---- every key but a few ---------------------------------------------------
 *
 * An object's extra members have keys outside its declared ones: the JSON
 * strings whose content is not one of them. Through the general route that
 * is the declared keys' DFA (subset construction of their union), its
 * difference from any string (a product), and that quoted: three
 * minimizations per object, a fifth of compiling a Kubernetes schema of a
 * hundred objects. When no key holds a byte a spelling may escape or a
 * non-ASCII one, the quoted automaton is written down: after '"', the trie
 * of the keys' bytes; from a trie node, a byte no key continues with (or a
 * '\\', whose escape spells a character no key has) leaves the keys for
 * good, into any string's automaton at the state after that byte (all of
 * the node's bytes were plain ASCII, so any string's automaton was at its
 * boundary state all along); '"' closes from a node that is not a key.
 * Trimmed, renumbered and coarsened by minimize.c, that is the general
 * route's table (its raw classes are numbered by their lowest byte too;
 * tests/unit/test_dfa_ops.c compares the two). */
static bool plain_key(const char *k) {
    for (const unsigned char *p = (const unsigned char *)k; *p; p++)
        if (*p < 0x20 || *p >= 0x7F || *p == '"' || *p == '\\') return false;
    return true;
}

sv_status sv_dfa_json_quoted_except(const sv_dfa_t *any, const char *const *keys, uint32_t n,
                                    const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    *out = NULL;
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    if (any->call_off || any->nstates == 0) return SV_OK;
    int32_t q1 = sv_dfa_next(any, 0, '"'); /* inside a string, at its boundary */
    if (q1 < 0) return SV_OK;
    size_t nbytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!plain_key(keys[i])) return SV_OK;
        nbytes += strlen(keys[i]);
    }
    if (nbytes > (size_t)lim->max_dfa_states) return SV_OK; /* the general route reports the budget */
    /* Classes: each byte some key has alone, the others as any string's;
     * numbered by lowest byte. */
    bool keyb[256] = {false};
    for (uint32_t i = 0; i < n; i++)
        for (const unsigned char *p = (const unsigned char *)keys[i]; *p; p++) keyb[*p] = true;
    sv_rawdfa_t raw = {0};
    {
        int32_t of_any[256], nc = 0;
        for (int i = 0; i < 256; i++) of_any[i] = -1;
        for (uint32_t b = 0; b < 256; b++) {
            if (keyb[b] || b == '"') {
                raw.classes[b] = (uint8_t)nc++;
                continue;
            }
            int32_t *slot = &of_any[any->classes[b]];
            if (*slot < 0) *slot = nc++;
            raw.classes[b] = (uint8_t)*slot;
        }
        raw.nclasses = (uint32_t)nc;
    }
    uint8_t rep[256];
    for (int b = 255; b >= 0; b--) rep[raw.classes[b]] = (uint8_t)b;
    const uint32_t k = raw.nclasses;
    /* States: 0 the start, 1 + t trie node t (0 the root), then any
     * string's states from 1 + nodes. The trie's children as moves of its
     * own table (node, class) -> child, filled as keys are added. */
    uint32_t cap_nodes = (uint32_t)nbytes + 1, nodes = 1;
    size_t ns = 1 + (size_t)cap_nodes + any->nstates;
    size_t bytes = ns * k * sizeof(int32_t) + ns + (size_t)cap_nodes;
    sv_status st = sv_dfa_minimize_budget(&(sv_rawdfa_t){.nstates = (uint32_t)ns, .nclasses = k}, bytes, lim, err);
    if (st) return st;
    raw.trans = malloc(ns * k * sizeof *raw.trans);
    raw.accept = calloc(ns, 1);
    uint8_t *is_key = calloc(cap_nodes, 1);
    if (!raw.trans || !raw.accept || !is_key) {
        free(is_key);
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building an object's extra keys");
    }
    memset(raw.trans, 0xFF, ns * k * sizeof *raw.trans);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = 0;
        for (const unsigned char *p = (const unsigned char *)keys[i]; *p; p++) {
            int32_t *cell = &raw.trans[(size_t)(1 + t) * k + raw.classes[*p]];
            if (*cell < 0) *cell = (int32_t)(1 + nodes++);
            t = (uint32_t)*cell - 1;
        }
        is_key[t] = 1;
    }
    const uint32_t qbase = 1 + cap_nodes;
    raw.trans[raw.classes['"']] = 1; /* the start reads '"' into the root */
    for (uint32_t t = 0; t < nodes; t++) {
        int32_t *row = raw.trans + (size_t)(1 + t) * k;
        for (uint32_t c = 0; c < k; c++) {
            if (row[c] >= 0) continue; /* a key goes on */
            uint8_t b = rep[c];
            if (b == '"' && is_key[t]) continue;
            int32_t x = any->trans[(size_t)q1 * any->nclasses + any->classes[b]];
            row[c] = x < 0 ? SV_DFA_DEAD : (int32_t)(qbase + (uint32_t)x);
        }
    }
    for (uint32_t q = 0; q < any->nstates; q++) {
        int32_t *row = raw.trans + (size_t)(qbase + q) * k;
        for (uint32_t c = 0; c < k; c++) {
            int32_t x = any->trans[(size_t)q * any->nclasses + any->classes[rep[c]]];
            row[c] = x < 0 ? SV_DFA_DEAD : (int32_t)(qbase + (uint32_t)x);
        }
        raw.accept[qbase + q] = any->accept[q];
    }
    /* The trie's nodes with the same keys below them (the same key or not,
     * the same bytes into equal children) accept the same strings; every
     * other pair differs (a node's residual is any string's but its keys'
     * rests; any string's states are minimal and read no such thing). So
     * children are merged bottom up (a child's id is above its parent's) by
     * that signature, hashed, and the table is then minimal: minimize.c
     * only trims, renumbers and coarsens it. */
    uint32_t *canon = malloc((size_t)nodes * sizeof *canon), tcap = 16;
    while (tcap < 2 * nodes) tcap *= 2;
    uint32_t *slot = malloc((size_t)tcap * sizeof *slot);
    uint64_t *sig = malloc((size_t)nodes * sizeof *sig);
    if (!canon || !slot || !sig) {
        free(canon), free(slot), free(sig), free(is_key);
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building an object's extra keys");
    }
    for (uint32_t i = 0; i < tcap; i++) slot[i] = UINT32_MAX;
    for (uint32_t t = nodes; t-- > 0;) {
        int32_t *row = raw.trans + (size_t)(1 + t) * k;
        uint64_t h = 0x9e3779b97f4a7c15ull ^ is_key[t];
        for (uint32_t c = 0; c < k; c++)
            if (row[c] >= 1 && (uint32_t)row[c] < qbase) {
                row[c] = (int32_t)(1 + canon[row[c] - 1]); /* children first: already merged */
                h = (h ^ ((uint64_t)c << 32 | (uint32_t)row[c])) * 0xff51afd7ed558ccdull;
                h ^= h >> 29;
            }
        sig[t] = h;
        canon[t] = t;
        for (uint32_t i = (uint32_t)h & (tcap - 1);; i = (i + 1) & (tcap - 1)) {
            uint32_t u = slot[i];
            if (u == UINT32_MAX) {
                slot[i] = t;
                break;
            }
            if (sig[u] != h || is_key[u] != is_key[t]) continue;
            const int32_t *urow = raw.trans + (size_t)(1 + u) * k;
            bool same = true;
            for (uint32_t c = 0; c < k && same; c++) {
                bool tc = row[c] >= 1 && (uint32_t)row[c] < qbase, uc = urow[c] >= 1 && (uint32_t)urow[c] < qbase;
                same = tc == uc && (!tc || row[c] == urow[c]);
            }
            if (same) {
                canon[t] = u;
                break;
            }
        }
    }
    free(canon), free(slot), free(sig), free(is_key);
    raw.nstates = (uint32_t)ns;
    raw.start = 0;
    raw.minimal = true;
    st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}
