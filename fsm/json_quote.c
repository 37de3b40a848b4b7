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
 * states per content state, made only where q moves on an escaped byte.
 * Minimization then merges the escape states of states that move alike
 * and gives the same canonical table as the NFA route, which
 * tests/fsm_test.c checks on random contents. */
#include <stdlib.h>
#include <string.h>

#include "../src/util/memacct.h"
#include "dfa_internal.h"

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
     * then escape states as they are made. */
    int32_t *esc = malloc(((size_t)n * E_N + 1) * sizeof *esc);
    if (!esc) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory quoting a string content");
    for (size_t i = 0; i < (size_t)n * E_N; i++) esc[i] = -1;
    uint32_t ns = 2 + n;
    for (uint32_t q = 0; q < n; q++) {
        bool any = false, u = false, lo = false, hi = false;
        for (uint32_t b = 0; b < 0x20 + 0x60; b++) {
            if (!escaped(b) || sv_dfa_next(content, (int32_t)q, (uint8_t)b) < 0) continue;
            any = true;
            if (!short_escape(b)) u = true, (b < 0x10 ? (lo = true) : (hi = true));
        }
        if (!any) continue;
        int32_t *e = esc + (size_t)q * E_N;
        e[E_BS] = (int32_t)ns++;
        if (u) {
            e[E_U] = (int32_t)ns++;
            e[E_U0] = (int32_t)ns++;
            e[E_U00] = (int32_t)ns++;
            if (lo) e[E_H0] = (int32_t)ns++;
            if (hi) e[E_H1] = (int32_t)ns++;
        }
    }
    if (lim->max_dfa_states && ns > lim->max_dfa_states) {
        free(esc);
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the quoted string needs more than %u DFA states",
                            lim->max_dfa_states);
    }
    size_t cells = (size_t)ns * k, bytes = cells * sizeof *raw.trans + ns;
    if (!sv_memacct_fits(bytes, lim->max_memory)) {
        free(esc);
        return sv_error_set(err, SV_ERR_BUDGET, -1, "quoting a string content needs about %zu bytes, more than is left "
                            "of the compile's memory budget of %zu bytes", bytes, lim->max_memory);
    }
    raw.nstates = ns;
    raw.start = 0;
    raw.trans = malloc((cells ? cells : 1) * sizeof *raw.trans);
    raw.accept = calloc(ns, 1);
    if (!raw.trans || !raw.accept) {
        free(esc);
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory quoting a string content");
    }
    for (size_t i = 0; i < cells; i++) raw.trans[i] = -1;
#define SET(s, b, t) (raw.trans[(size_t)(s) * k + raw.classes[(uint8_t)(b)]] = (int32_t)(t))
    SET(0, '"', 2);
    raw.accept[1] = 1;
    for (uint32_t q = 0; q < n; q++) {
        uint32_t s = 2 + q;
        const int32_t *e = esc + (size_t)q * E_N;
        /* Raw bytes: one class at a time (a class never mixes escaped and
         * unescaped bytes, nor bytes of different content classes). */
        const int32_t *row = content->trans + (size_t)q * content->nclasses;
        for (uint32_t j = 0; j < k; j++) {
            if (escaped(rep[j])) continue;
            int32_t t = row[content->classes[rep[j]]];
            if (t >= 0) raw.trans[(size_t)s * k + j] = 2 + t;
        }
        if (content->accept[q]) SET(s, '"', 1);
        if (e[E_BS] < 0) continue;
        SET(s, '\\', e[E_BS]);
        for (uint32_t b = 0; b < 0x60; b++) {
            if (!escaped(b)) continue;
            int32_t t = sv_dfa_next(content, (int32_t)q, (uint8_t)b);
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
    free(esc);
    sv_status st = sv_dfa_minimize_budget(&raw, bytes, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}
