/* fuzz_schema.c — libFuzzer target for the JSON Schema → byte-DFA compiler.
 *
 * The input is schema text: arbitrary bytes, invalid JSON and invalid UTF-8
 * included. It is compiled under tight budgets (so one run stays in the
 * milliseconds), with the whitespace mode, strict_properties and
 * unknown_formats_ok drawn from a hash of the input so that every mode is
 * exercised, and then every property the headers promise is checked against
 * the result. A broken property is a __builtin_trap(), which libFuzzer
 * reports as a crash with the input saved.
 *
 * What is checked, and where the promise comes from:
 *   errors (error.h, schema.h) the returned status is the one in err, and one
 *                              a schema can cause (never ARG, IO or NOMEM);
 *                              the message is set; the offset is -1 or inside
 *                              [0, len], and set only for JSON syntax errors;
 *                              keyword and pointer are NUL-terminated; the
 *                              pointer is "" (the root) or starts with '/',
 *                              is non-empty when a keyword is named, and ends
 *                              in "/keyword" then; '~' in it is an escape
 *                              (~0 or ~1); *out is untouched.
 *   structure (dfa.h)          as in fuzz_regex.c: transitions in range,
 *                              classes exact, BFS numbering, trimmed,
 *                              distances, forced chains, minimality (Moore
 *                              refinement).
 *   sampling                   a sample is accepted, at least distance(start)
 *                              long, at most soft_len + max distance long, and
 *                              exactly distance(start) long with soft_len 0.
 *   JSON (schema.h)            every sample is one JSON text (jansson agrees),
 *                              spelled canonically: whitespace exactly as the
 *                              mode says (canonical: ", " and ": " and nothing
 *                              else; compact: none; flexible: anywhere JSON
 *                              allows), strings with only json.dumps's escapes
 *                              (\" \\ \b \f \n \r \t, \u00xx for the other
 *                              controls, lower-case hex), valid UTF-8, numbers
 *                              as json.dumps writes ints and floats, without
 *                              exponents (no "-0", no trailing zero in a
 *                              fraction but ".0").
 *   root keywords              type, required, const and enum at the root of
 *                              the schema (without a $ref beside them) bind
 *                              every valid value: each sample has an allowed
 *                              type, every required key (compared as spelled),
 *                              and equals the const / one of the enum values.
 *   whitespace (schema.h)      a flexible-mode language is closed under
 *                              respacing: a sample with its whitespace removed,
 *                              or respaced as json.dumps does, is accepted.
 *   modes agree                for a quarter of the inputs (by the hash) the
 *                              schema is compiled again in the other
 *                              whitespace modes with the same options: the
 *                              outcome is the same (or one side ran out of
 *                              budget or time), and each mode accepts the
 *                              others' samples once respaced to its own
 *                              spelling.
 * The checks are linear in the table (states * classes) except minimality,
 * which takes a pass per refinement round; at most 5000 states here.
 *
 * Half of the mutations are structure-aware (LLVMFuzzerCustomMutator at the
 * end of this file): they parse the input and edit the schema tree, which
 * reaches keyword combinations that byte flips, mostly breaking the JSON,
 * rarely do. The other half are libFuzzer's own. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fsm/schema.h"

#define CHECK(cond)                       \
    do {                                  \
        if (!(cond)) __builtin_trap();    \
    } while (0)

/* The checkers are left out of coverage instrumentation: their comparisons
 * would cost more than the compile and only add noise to the feedback. */
#define UNTRACED __attribute__((no_sanitize("coverage"), noinline))

/* A failed check on a sample: the sample goes to stderr, for the report. */
#define CHECK_SAMPLE(cond, s, n)                                                   \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "fuzz_schema: %s fails on the sample (%zu bytes): ", #cond, (size_t)(n)); \
            fwrite((s), 1, (n), stderr);                                          \
            fputc('\n', stderr);                                                  \
            __builtin_trap();                                                     \
        }                                                                         \
    } while (0)

static void options(sv_schema_opts_t *o, uint8_t mode) {
    sv_schema_opts_default(o);
    o->lim.max_nfa_states = 50000;
    o->lim.max_dfa_states = 5000;
    o->lim.max_memory = (size_t)64 << 20;
    o->lim.max_time_us = 300 * 1000;
    o->max_ref_depth = 2;
    o->max_any_depth = 2;
    o->max_string_length = 64;
    o->ws = (sv_ws_mode)((mode & 3) % 3); /* 3: canonical again */
    o->any_calls = false; /* the structure checks are a flat DFA's; programs: calls_check */
    o->strict_properties = (mode >> 2) & 1;
    o->unknown_formats_ok = (mode >> 3) & 1;
    o->any_deep_levels = 1 + ((mode >> 4) & 1); /* deep stacks: objects only, or one array */
    o->any_deep_arrays = (mode >> 5) & 1;
}

/* FNV-1a: a stable function of the input, so a saved input replays in the
 * mode it failed in. */
static UNTRACED uint64_t hash(const uint8_t *data, size_t size) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
    return h;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. Written
 * here rather than borrowed from fsm/ so that it checks fsm/ independently. */
static UNTRACED bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t len;
        uint32_t cp, min;
        if (b < 0x80) { i++; continue; }
        if (b >= 0xC2 && b <= 0xDF) len = 2, cp = b & 0x1F, min = 0x80;
        else if (b >= 0xE0 && b <= 0xEF) len = 3, cp = b & 0x0F, min = 0x800;
        else if (b >= 0xF0 && b <= 0xF4) len = 4, cp = b & 0x07, min = 0x10000;
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* ---- errors ------------------------------------------------------------------ */

static bool terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* Error reporting, for a compile that failed with st. json_ok: the text is
 * JSON (as the compiler reads it). */
static void check_error(sv_status st, const sv_error_t *err, size_t len, bool json_ok) {
    CHECK(st > SV_OK && st <= SV_ERR_ARG);
    CHECK(err->code == st);
    /* What a schema can cause. NOMEM: nothing under these budgets should run
     * the process out of memory; ARG and IO: the arguments are valid and
     * nothing is read (ARG is also the compiler's "internal" error). */
    CHECK(st == SV_ERR_SYNTAX || st == SV_ERR_UNSUPPORTED || st == SV_ERR_EMPTY || st == SV_ERR_BUDGET ||
          st == SV_ERR_TIMEOUT);
    CHECK(terminated(err->message, sizeof err->message));
    CHECK(err->message[0] != '\0');
    CHECK(terminated(err->keyword, sizeof err->keyword));
    CHECK(terminated(err->pointer, sizeof err->pointer));
    /* A byte offset only locates JSON syntax errors. */
    if (!json_ok) {
        CHECK(st == SV_ERR_SYNTAX);
        CHECK(err->offset >= 0 && (size_t)err->offset <= len);
        CHECK(err->keyword[0] == '\0' && err->pointer[0] == '\0');
        return;
    }
    CHECK(err->offset == -1);
    /* The pointer: "" for the root, else "/..." ; with a keyword, it ends in
     * "/keyword" (unless either was cut to fit its buffer). */
    size_t pl = strlen(err->pointer), kl = strlen(err->keyword);
    CHECK(pl == 0 || err->pointer[0] == '/');
    if (kl) {
        CHECK(pl >= kl + 1);
        bool cut = kl + 1 >= sizeof err->keyword || pl + 1 >= sizeof err->pointer;
        if (!cut) CHECK(err->pointer[pl - kl - 1] == '/' && memcmp(err->pointer + pl - kl, err->keyword, kl) == 0);
    }
    /* RFC 6901: '~' only as ~0 or ~1 (a pointer cut to fit may end in '~'). */
    for (size_t i = 0; i < pl; i++)
        if (err->pointer[i] == '~') CHECK(i + 1 == pl || err->pointer[i + 1] == '0' || err->pointer[i + 1] == '1');
}

/* ---- structure (as fuzz_regex.c) ----------------------------------------------- */

/* The checks below run on a private copy of the transition table, read once
 * through sv_dfa_next (schema DFAs are bigger than regex ones: up to 5000
 * states here). */
/* Whole-DFA checks; n = states, k = classes. Scratch is malloc'd per call:
 * the fuzzer's leak check would catch a missing free. Returns the largest
 * distance. */
static UNTRACED uint32_t check_structure(const sv_dfa_t *d) {
    uint32_t n = sv_dfa_num_states(d), k = sv_dfa_num_classes(d);
    const uint8_t *cls = sv_dfa_byte_classes(d);
    CHECK(n >= 1 && k >= 1 && k <= 256);

    /* Classes: every class is used (sv_dfa_next goes through the class map,
     * so the class of b decides every transition on b by construction). */
    int first_byte[256];
    uint32_t csize[256] = {0};
    for (int c = 0; c < 256; c++) first_byte[c] = -1;
    uint32_t used = 0;
    for (int b = 0; b < 256; b++) {
        CHECK(cls[b] < k);
        if (first_byte[cls[b]] < 0) first_byte[cls[b]] = b, used++;
        csize[cls[b]]++;
    }
    CHECK(used == k);
    int32_t *T = malloc((size_t)n * k * sizeof *T);
    uint8_t *acc = malloc(n);
    uint32_t *dist = malloc((size_t)n * sizeof *dist);
    CHECK(T && acc && dist);
    for (uint32_t s = 0; s < n; s++) {
        acc[s] = sv_dfa_is_accepting(d, (int32_t)s);
        dist[s] = sv_dfa_distance(d, (int32_t)s);
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c]);
            CHECK(t == SV_DFA_DEAD || (t >= 0 && (uint32_t)t < n));
            T[(size_t)s * k + c] = t;
        }
    }
#define TR(s, c) T[(size_t)(s) * k + (c)]

    /* Distinct classes have distinct columns: hash each column, compare on
     * equal hashes. */
    uint64_t h[256];
    for (uint32_t c = 0; c < k; c++) {
        h[c] = 1469598103934665603ull;
        for (uint32_t s = 0; s < n; s++) h[c] = (h[c] ^ (uint32_t)TR(s, c)) * 1099511628211ull;
    }
    for (uint32_t a = 0; a < k; a++)
        for (uint32_t c = a + 1; c < k; c++) {
            if (h[a] != h[c]) continue;
            uint32_t s = 0;
            while (s < n && TR(s, a) == TR(s, c)) s++;
            CHECK(s < n); /* two classes no state tells apart */
        }

    /* BFS numbering: a breadth-first walk from 0, bytes in increasing order,
     * meets the states as 0, 1, 2, ... and reaches all of them. */
    uint32_t seen = 1;
    for (uint32_t q = 0; q < seen; q++)
        for (int b = 0; b < 256; b++) {
            int32_t t = TR(q, cls[b]);
            if (t < 0) continue;
            CHECK((uint32_t)t <= seen);
            if ((uint32_t)t == seen) seen++;
        }
    CHECK(seen == n);

    /* Distances: finite everywhere (trimmed), 0 exactly at acceptance, and
     * the Bellman equation elsewhere. */
    uint32_t maxdist = 0;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t ds = dist[s];
        CHECK(ds < n);
        if (ds > maxdist) maxdist = ds;
        if (acc[s]) {
            CHECK(ds == 0);
            continue;
        }
        uint32_t best = UINT32_MAX;
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = TR(s, c);
            if (t >= 0 && dist[t] < best) best = dist[t];
        }
        CHECK(best != UINT32_MAX && ds == best + 1);
    }

    /* Forced chains: a forced state is non-accepting with one live byte; its
     * chain is that byte and the successor's chain, and walking it lowers the
     * distance by its length. */
    uint32_t nforced = 0;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t live = 0;
        int only = -1;
        for (uint32_t c = 0; c < k; c++)
            if (TR(s, c) >= 0) live += csize[c], only = first_byte[c];
        bool forced = !acc[s] && live == 1;
        uint32_t len;
        const uint8_t *fb = sv_dfa_forced(d, (int32_t)s, &len);
        CHECK(forced == (len > 0));
        if (!forced) continue;
        nforced++;
        CHECK(fb != NULL && fb[0] == (uint8_t)only);
        int32_t t = TR(s, cls[fb[0]]);
        uint32_t tlen;
        const uint8_t *tb = sv_dfa_forced(d, t, &tlen);
        CHECK(tlen == len - 1);
        CHECK(tlen == 0 || memcmp(tb, fb + 1, tlen) == 0);
        int32_t q = (int32_t)s;
        for (uint32_t i = 0; i < len; i++) {
            q = TR(q, cls[fb[i]]);
            CHECK(q >= 0);
        }
        uint32_t qlen;
        (void)sv_dfa_forced(d, q, &qlen);
        CHECK(qlen == 0);
        CHECK(dist[q] + len == dist[s]);
    }
    CHECK(nforced == sv_dfa_num_forced_states(d));

    /* Minimality: Moore refinement from {accepting, not}; a minimal DFA ends
     * with one block per state. Each round maps (block, successor blocks) to
     * a new block id through a hash table; rounds stop when no block splits.
     * The dead state is block n (successors are DEAD -> n). */
    uint32_t *blk = malloc((n + 1) * sizeof *blk), *nblk = malloc((n + 1) * sizeof *nblk);
    uint32_t tcap = 1;
    while (tcap < 2 * (n + 1)) tcap <<= 1;
    uint32_t *table = malloc(tcap * sizeof *table); /* state + 1, 0 = empty */
    CHECK(blk && nblk && table);
    for (uint32_t s = 0; s < n; s++) blk[s] = acc[s] ? 1 : 0;
    blk[n] = 2;
    uint32_t nblocks = 0;
    for (;;) {
        memset(table, 0, tcap * sizeof *table);
        uint32_t count = 0;
        for (uint32_t s = 0; s <= n; s++) {
            uint64_t hh = 0x9e3779b97f4a7c15ull ^ blk[s];
            for (uint32_t c = 0; c < k && s < n; c++) {
                int32_t t = TR(s, c);
                hh = (hh ^ blk[t < 0 ? n : (uint32_t)t]) * 0x100000001b3ull;
            }
            uint32_t i = (uint32_t)(hh ^ (hh >> 31)) & (tcap - 1);
            for (;; i = (i + 1) & (tcap - 1)) {
                if (!table[i]) {
                    table[i] = s + 1;
                    nblk[s] = count++;
                    break;
                }
                uint32_t r = table[i] - 1; /* same signature as s? */
                bool same = blk[r] == blk[s] && (r < n) == (s < n);
                for (uint32_t c = 0; same && c < k && s < n; c++) {
                    int32_t a = TR(s, c), b = TR(r, c);
                    same = blk[a < 0 ? n : (uint32_t)a] == blk[b < 0 ? n : (uint32_t)b];
                }
                if (same) {
                    nblk[s] = nblk[r];
                    break;
                }
            }
        }
        memcpy(blk, nblk, (n + 1) * sizeof *blk);
        if (count == nblocks) break;
        nblocks = count;
    }
#undef TR
    CHECK(nblocks == n + 1); /* every state, and the dead state, alone */
    free(blk);
    free(nblk);
    free(table);
    free(T);
    free(acc);
    free(dist);
    return maxdist;
}

/* ---- JSON spelling ------------------------------------------------------------ */

/* A recursive-descent reader of one JSON text that accepts exactly the
 * spellings schema.h promises for the mode: it fails (returns false) on
 * anything else. */
typedef struct {
    const uint8_t *s;
    size_t n, i;
    sv_ws_mode ws;
    unsigned depth;
    /* The spellings of the top-level object's keys (quotes included), when
     * keys is set: offsets into s, at most maxkeys of them. */
    size_t *keys, *klens;
    uint32_t nkeys, maxkeys;
} rd_t;

static UNTRACED bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

/* Optional whitespace where JSON allows it: only flexible mode has any, except
 * after ',' and ':' (see punct). */
static UNTRACED void rd_ws(rd_t *r) {
    if (r->ws == SV_WS_FLEXIBLE)
        while (r->i < r->n && is_ws(r->s[r->i])) r->i++;
}

/* After ',' or ':': canonical mode needs exactly one space there. */
static UNTRACED bool rd_punct(rd_t *r, uint8_t p) {
    rd_ws(r);
    if (r->i >= r->n || r->s[r->i] != p) return false;
    r->i++;
    if (r->ws == SV_WS_CANONICAL) {
        if (r->i >= r->n || r->s[r->i] != ' ') return false;
        r->i++;
    }
    rd_ws(r);
    return true;
}

static UNTRACED bool rd_lit(rd_t *r, const char *w) {
    size_t k = strlen(w);
    if (r->n - r->i < k || memcmp(r->s + r->i, w, k) != 0) return false;
    r->i += k;
    return true;
}

static UNTRACED int hexv(uint8_t x) {
    return x >= '0' && x <= '9' ? x - '0' : x >= 'a' && x <= 'f' ? x - 'a' + 10 : x >= 'A' && x <= 'F' ? x - 'A' + 10 : -1;
}

static UNTRACED bool rd_string(rd_t *r) {
    if (r->i >= r->n || r->s[r->i] != '"') return false;
    size_t start = ++r->i;
    for (;;) {
        if (r->i >= r->n) return false;
        uint8_t b = r->s[r->i];
        if (b == '"') break;
        if (b < 0x20) return false; /* JSON: controls are escaped */
        if (b != '\\') { r->i++; continue; }
        if (r->n - r->i < 2) return false;
        uint8_t e = r->s[r->i + 1];
        if (strchr("\"\\bfnrt", e) && e) { r->i += 2; continue; }
        /* json.dumps never writes "\/", and writes \u only for the controls
         * without a short escape, as \u00xx in lower case. */
        if (e != 'u' || r->n - r->i < 6) return false;
        const uint8_t *u = r->s + r->i + 2;
        for (int k = 0; k < 4; k++)
            if (hexv(u[k]) < 0 || (u[k] >= 'A' && u[k] <= 'F')) return false;
        int v = hexv(u[0]) << 12 | hexv(u[1]) << 8 | hexv(u[2]) << 4 | hexv(u[3]);
        if (v >= 0x20 || v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t') return false;
        r->i += 6;
    }
    bool ok = valid_utf8(r->s + start, r->i - start);
    r->i++;
    return ok;
}

static UNTRACED bool digit(rd_t *r) { return r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9'; }

/* JSON numbers as json.dumps writes ints and floats, without an exponent: no
 * "-0" (an int zero is "0", a float one "-0.0"), and no trailing zero in a
 * fraction other than ".0" ("10.0" and "0.5", never "0.50"). */
static UNTRACED bool rd_number(rd_t *r) {
    size_t start = r->i;
    if (r->i < r->n && r->s[r->i] == '-') r->i++;
    if (!digit(r)) return false;
    if (r->s[r->i] == '0') r->i++;
    else while (digit(r)) r->i++;
    if (r->i < r->n && r->s[r->i] == '.') {
        size_t frac = ++r->i;
        if (!digit(r)) return false;
        while (digit(r)) r->i++;
        if (r->i - frac > 1 && r->s[r->i - 1] == '0') return false;
    } else if (r->i - start == 2 && r->s[start] == '-' && r->s[start + 1] == '0') {
        return false; /* "-0" */
    }
    /* Python's float exponent form, which typed numbers also accept
     * (1e-05, 1.5e+16): 'e', a sign, two or more digits, no leading zero
     * beyond two digits. */
    if (r->i < r->n && r->s[r->i] == 'e') {
        r->i++;
        if (r->i >= r->n || (r->s[r->i] != '+' && r->s[r->i] != '-')) return false;
        size_t e0 = ++r->i;
        while (digit(r)) r->i++;
        size_t nd = r->i - e0;
        if (nd < 2 || (nd > 2 && r->s[e0] == '0')) return false;
    }
    return !(r->i < r->n && r->s[r->i] == 'E');
}

static UNTRACED bool rd_value(rd_t *r) {
    if (r->i >= r->n || ++r->depth > 4000) return false;
    bool ok;
    uint8_t b = r->s[r->i];
    if (b == '{' || b == '[') {
        uint8_t close = b == '{' ? '}' : ']';
        r->i++;
        rd_ws(r);
        if (r->i < r->n && r->s[r->i] == close) {
            r->i++;
            ok = true;
        } else {
            for (;;) {
                if (b == '{') {
                    rd_ws(r);
                    size_t k = r->i;
                    if (!rd_string(r)) { ok = false; break; }
                    size_t kend = r->i;
                    if (!rd_punct(r, ':')) { ok = false; break; }
                    if (r->depth == 1 && r->keys && r->nkeys < r->maxkeys)
                        r->keys[r->nkeys] = k, r->klens[r->nkeys++] = kend - k;
                }
                rd_ws(r);
                if (!rd_value(r)) { ok = false; break; }
                rd_ws(r);
                if (r->i < r->n && r->s[r->i] == close) {
                    r->i++;
                    ok = true;
                    break;
                }
                if (!rd_punct(r, ',')) { ok = false; break; }
            }
        }
    } else if (b == '"') {
        ok = rd_string(r);
    } else if (b == '-' || (b >= '0' && b <= '9')) {
        ok = rd_number(r);
    } else {
        ok = rd_lit(r, "true") || rd_lit(r, "false") || rd_lit(r, "null");
    }
    r->depth--;
    return ok;
}

static UNTRACED bool canonical_json(const uint8_t *s, size_t n, sv_ws_mode ws) {
    rd_t r = {.s = s, .n = n, .ws = ws};
    rd_ws(&r);
    if (!rd_value(&r)) return false;
    rd_ws(&r);
    return r.i == n;
}

/* jansson as a second, independent JSON reader. It refuses a few valid texts
 * for its own limits: integers beyond 64 bits (retried as reals, as
 * schema.c does), reals beyond double range, "\u0000" in object keys and
 * nesting beyond 2048; those are left to canonical_json. */
static bool jansson_limit(const char *why) {
    return strstr(why, "overflow") || strstr(why, "too big") || strstr(why, "NUL byte in object key") ||
           strstr(why, "depth");
}

static void check_jansson(const uint8_t *s, size_t n) {
    json_error_t je;
    size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL;
    json_t *v = json_loadb((const char *)s, n, flags, &je);
    if (!v && strstr(je.text, "too big")) v = json_loadb((const char *)s, n, flags | JSON_DECODE_INT_AS_REAL, &je);
    if (!v) {
        if (!jansson_limit(je.text)) fprintf(stderr, "fuzz_schema: jansson: %s (at byte %d)\n", je.text, je.position);
        CHECK_SAMPLE(jansson_limit(je.text), s, n);
        return;
    }
    json_decref(v);
}

/* s respaced to another mode's spelling: whitespace outside strings removed,
 * then (canonical) one space after each ',' and ':'. Caller frees. */
static UNTRACED uint8_t *respace(const uint8_t *s, size_t n, sv_ws_mode to, size_t *out_len) {
    uint8_t *t = malloc(2 * n + 1);
    CHECK(t);
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = s[i];
        if (in_str) {
            t[o++] = b;
            if (b == '\\') t[o++] = s[++i]; /* a sample never ends inside an escape */
            else if (b == '"') in_str = false;
            continue;
        }
        if (is_ws(b)) continue;
        t[o++] = b;
        if (b == '"') in_str = true;
        if ((b == ',' || b == ':') && to == SV_WS_CANONICAL) t[o++] = ' ';
    }
    *out_len = o;
    return t;
}

/* ---- what the root schema says about every value -----------------------------
 * Some keywords at the root bind every valid value whatever else the schema
 * says, being conjuncts there: type, required, const and enum. Unless a $ref
 * sits beside them (up to draft 7 it overrides its siblings), every sample
 * must satisfy them: a small semantic oracle, independent of fsm/. */
enum { K_NULL = 1, K_BOOL = 2, K_OBJ = 4, K_ARR = 8, K_STR = 16, K_NUM = 32, K_INT = 64 };

typedef struct {
    int types;          /* allowed kinds; 0: no type constraint */
    json_t *required;   /* an array of strings, or NULL */
    json_t *cnst, *enm; /* borrowed from the document, or NULL */
    json_t *props;      /* the root's properties object, or NULL */
} root_t;

static root_t g_root; /* the current input's (one input at a time) */

static int kind_bit(json_t *t) {
    static const struct { const char *n; int b; } map[] = {
        {"null", K_NULL}, {"boolean", K_BOOL}, {"object", K_OBJ}, {"array", K_ARR},
        {"string", K_STR}, {"number", K_NUM | K_INT}, {"integer", K_INT},
    };
    if (!json_is_string(t)) return 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (json_string_length(t) == strlen(map[i].n) && strcmp(json_string_value(t), map[i].n) == 0) return map[i].b;
    return 0;
}

static void root_open(root_t *rt, json_t *doc) {
    memset(rt, 0, sizeof *rt);
    if (!json_is_object(doc) || json_object_get(doc, "$ref")) return;
    json_t *t = json_object_get(doc, "type");
    if (json_is_string(t)) {
        rt->types = kind_bit(t);
    } else if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            int b = kind_bit(json_array_get(t, i));
            if (!b) { rt->types = 0; break; } /* a bad type array: the compiler refuses it */
            rt->types |= b;
        }
    }
    if (rt->types && json_is_true(json_object_get(doc, "nullable"))) rt->types |= K_NULL;
    json_t *req = json_object_get(doc, "required");
    bool strings = json_is_array(req);
    for (size_t i = 0; strings && i < json_array_size(req); i++) strings = json_is_string(json_array_get(req, i));
    rt->required = strings ? req : NULL;
    rt->props = json_is_object(json_object_get(doc, "properties")) ? json_object_get(doc, "properties") : NULL;
    rt->cnst = json_object_get(doc, "const");
    rt->enm = json_is_array(json_object_get(doc, "enum")) ? json_object_get(doc, "enum") : NULL;
}

/* JSON equality as JSON Schema has it (1 == 1.0); numbers beyond 2^53 are
 * taken as equal rather than misjudged through doubles. */
static UNTRACED bool json_eq(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) == json_integer_value(b);
        double x = json_number_value(a), y = json_number_value(b);
        if (x > 9007199254740992.0 || x < -9007199254740992.0 || y > 9007199254740992.0 || y < -9007199254740992.0)
            return true;
        return x == y;
    }
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_eq(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !json_eq(v, w)) return false;
        }
        return true;
    }
    default:
        return true; /* true, false, null: same type */
    }
}

/* The json.dumps(ensure_ascii=False) spelling of a string, quotes included,
 * into buf (6 * n + 2 bytes); returns its length. */
static UNTRACED size_t spell_string(const char *p, size_t n, char *buf) {
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)p[i];
        const char *e = x == '"' ? "\\\"" : x == '\\' ? "\\\\" : x == '\n' ? "\\n" : x == '\r' ? "\\r"
                      : x == '\t' ? "\\t" : x == '\b' ? "\\b" : x == '\f' ? "\\f" : NULL;
        if (e) buf[o++] = e[0], buf[o++] = e[1];
        else if (x < 0x20) o += (size_t)snprintf(buf + o, 7, "\\u%04x", x);
        else buf[o++] = (char)x;
    }
    buf[o++] = '"';
    return o;
}

/* How many times the key name[0..len) is among the keys r read. */
static UNTRACED uint32_t key_count(const rd_t *r, const char *name, size_t len) {
    char *want = malloc(6 * len + 2);
    CHECK(want);
    size_t wl = spell_string(name, len, want);
    uint32_t seen = 0;
    for (uint32_t k = 0; k < r->nkeys; k++) seen += r->klens[k] == wl && memcmp(r->s + r->keys[k], want, wl) == 0;
    free(want);
    return seen;
}

static UNTRACED void check_root(const root_t *rt, const uint8_t *s, size_t n, sv_ws_mode ws) {
    size_t i = 0;
    while (i < n && is_ws(s[i])) i++;
    CHECK(i < n);
    int kind;
    switch (s[i]) {
    case '{': kind = K_OBJ; break;
    case '[': kind = K_ARR; break;
    case '"': kind = K_STR; break;
    case 't': case 'f': kind = K_BOOL; break;
    case 'n': kind = K_NULL; break;
    default: { /* a number: integral when its fraction is all zeros */
        size_t j = i;
        while (j < n && s[j] != '.' && !is_ws(s[j])) j++;
        bool integral = true;
        for (j = j < n && s[j] == '.' ? j + 1 : j; j < n && s[j] >= '0' && s[j] <= '9'; j++) integral &= s[j] == '0';
        kind = integral ? K_INT : K_NUM;
    }
    }
    if (rt->types) CHECK_SAMPLE((rt->types & kind) != 0, s, n);
    if ((rt->props || rt->required) && kind == K_OBJ) {
        /* The root object's keys, as written. */
        size_t cap = n / 4 + 1;
        rd_t r = {.s = s, .n = n, .ws = ws, .keys = malloc(cap * sizeof(size_t)), .klens = malloc(cap * sizeof(size_t)),
                  .maxkeys = (uint32_t)cap};
        CHECK(r.keys && r.klens);
        rd_ws(&r);
        CHECK(rd_value(&r));
        /* A key the root declares is written at most once, in either key
         * order mode (extra keys, which no automaton can tell apart, may
         * repeat); a required key is there. */
        const char *name;
        json_t *x;
        if (rt->props) json_object_foreach(rt->props, name, x) {
            uint32_t seen = key_count(&r, name, strlen(name));
            if (seen > 1) fprintf(stderr, "fuzz_schema: the declared key \"%s\" is written %u times\n", name, seen);
            CHECK_SAMPLE(seen <= 1, s, n);
        }
        for (size_t q = 0; rt->required && q < json_array_size(rt->required); q++) {
            json_t *req = json_array_get(rt->required, q);
            bool found = key_count(&r, json_string_value(req), json_string_length(req)) > 0;
            if (!found) fprintf(stderr, "fuzz_schema: the required key \"%s\" is missing\n", json_string_value(req));
            CHECK_SAMPLE(found, s, n);
        }
        free(r.keys);
        free(r.klens);
    }
    if (rt->cnst || rt->enm) {
        json_error_t je;
        json_t *v = json_loadb((const char *)s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
        if (!v) return; /* past jansson's limits: see check_jansson */
        bool ok = true;
        if (rt->cnst) ok = json_eq(v, rt->cnst);
        if (ok && rt->enm) {
            ok = false;
            for (size_t q = 0; q < json_array_size(rt->enm) && !ok; q++) ok = json_eq(v, json_array_get(rt->enm, q));
        }
        json_decref(v);
        CHECK_SAMPLE(ok, s, n);
    }
}

/* ---- sampling ------------------------------------------------------------------ */

/* Returns the sample (caller frees) and its length in *out_len. */
static uint8_t *check_sample(const sv_dfa_t *d, sv_ws_mode ws, uint64_t seed, uint32_t soft_len, uint32_t maxdist,
                             size_t *out_len) {
    size_t cap = (size_t)soft_len + maxdist + 1;
    uint8_t *buf = malloc(cap);
    CHECK(buf);
    sv_rng_t rng;
    sv_rng_seed(&rng, seed);
    size_t len = (size_t)-1;
    sv_status st = sv_dfa_sample(d, &rng, soft_len, buf, cap, &len);
    CHECK(st == SV_OK); /* dfa.h bounds the length */
    CHECK(len <= (size_t)soft_len + maxdist);
    CHECK_SAMPLE(sv_dfa_matches(d, buf, len), buf, len);
    CHECK_SAMPLE(len >= sv_dfa_distance(d, 0), buf, len);
    if (soft_len == 0) CHECK_SAMPLE(len == sv_dfa_distance(d, 0), buf, len);
    CHECK_SAMPLE(canonical_json(buf, len, ws), buf, len);
    check_jansson(buf, len);
    check_root(&g_root, buf, len, ws);
    if (ws == SV_WS_FLEXIBLE) {
        /* The same value in the other two spellings is in the language. */
        for (int to = SV_WS_CANONICAL; to <= SV_WS_COMPACT; to++) {
            size_t m;
            uint8_t *t = respace(buf, len, (sv_ws_mode)to, &m);
            CHECK_SAMPLE(sv_dfa_matches(d, t, m), t, m);
            free(t);
        }
    }
    *out_len = len;
    return buf;
}

static const uint32_t soft[] = {0, 4, 8, 16, 32, 64, 128, 256};
#define NSAMPLES (sizeof soft / sizeof soft[0])

/* Sample s (spelled in mode wa), respaced to mode wb, is in b. */
static void check_in(const uint8_t *s, size_t n, const sv_dfa_t *b, sv_ws_mode wb) {
    size_t m;
    uint8_t *t = wb == SV_WS_FLEXIBLE ? (m = n, (uint8_t *)s) : respace(s, n, wb, &m);
    CHECK_SAMPLE(sv_dfa_matches(b, t, m), t, m);
    if (t != s) free(t);
}

/* ---- the target ------------------------------------------------------------------ */

static bool is_limit(sv_status st) { return st == SV_ERR_BUDGET || st == SV_ERR_TIMEOUT; }

typedef struct {
    sv_status st;
    sv_dfa_t *d;
    uint32_t maxdist;
    sv_ws_mode ws;
    uint32_t narrowed; /* what was dropped for a budget (info.narrowed_by_budget) */
} result_t;

static result_t compile(const uint8_t *data, size_t size, uint8_t mode, bool json_ok) {
    sv_schema_opts_t o;
    options(&o, mode);
    sv_dfa_t *const untouched = (sv_dfa_t *)(uintptr_t)0x5e5e5e5e;
    result_t r = {.d = untouched, .ws = o.ws};
    sv_error_t err;
    memset(&err, 0x5a, sizeof err); /* the compiler must clear it */
    sv_schema_info_t info;
    memset(&info, 0x5a, sizeof info);
    r.st = sv_schema_compile((const char *)data, size, &o, &r.d, &info, &err);
    /* The info record is always reset, then filled within its bounds. */
    uint32_t nig = info.nignored < SV_SCHEMA_MAX_IGNORED ? info.nignored : SV_SCHEMA_MAX_IGNORED;
    for (uint32_t i = 0; i < nig; i++) CHECK(terminated(info.ignored[i], sizeof info.ignored[i]));
    if (r.st != SV_OK) {
        check_error(r.st, &err, size, json_ok);
        CHECK(r.d == untouched);
        r.d = NULL;
        return r;
    }
    CHECK(json_ok);
    CHECK(r.d != NULL && r.d != untouched);
    r.maxdist = check_structure(r.d);
    r.narrowed = info.narrowed_by_budget;
    return r;
}

/* The same schema compiled as a program (fsm/program.c: free-form values,
 * recursive and big $refs, counted items and wide objects' values as
 * parts): it compiles whenever the flat one does (or hits a budget), and
 * its samples pass the checks flat samples pass (accepted, canonical JSON
 * in the mode's spelling, valid at the root as check_root checks), with
 * keys in schema order (with or without the extra orders) or, for half
 * the modes, in any order. Its
 * language is not a superset of the flat one: a union's branches keep
 * their own key orders there. */
static void calls_check(const uint8_t *data, size_t size, uint8_t mode) {
    sv_schema_opts_t o;
    options(&o, mode);
    o.any_calls = true;
    /* half the time with keys in any order (schema_container.c key sets) */
    o.key_order = (mode >> 6) & 1 ? SV_KEY_ORDER_ANY : SV_KEY_ORDER_SCHEMA;
    /* and for half of those, in the definition order alone, as tool calls
       compile (fsm/schema.h extra_key_orders) */
    o.extra_key_orders = !((mode >> 7) & 1);
    sv_dfa_t *d = NULL;
    sv_schema_info_t info;
    sv_error_t err;
    sv_status st = sv_schema_compile((const char *)data, size, &o, &d, &info, &err);
    if (st != SV_OK) {
        /* only a budget can fail where the flat one compiled */
        if (!is_limit(st)) {
            fprintf(stderr, "calls_check: status %d (%s) where the flat compile succeeded: %s\n", (int)st,
                    sv_status_name(st), err.message);
            __builtin_trap();
        }
        return;
    }
    sv_rng_t rng;
    sv_rng_seed(&rng, size);
    static uint8_t buf[1 << 16];
    for (int i = 0; i < 4; i++) {
        size_t n;
        if (sv_dfa_sample(d, &rng, 48, buf, sizeof buf, &n) != SV_OK) continue;
        CHECK_SAMPLE(sv_dfa_matches(d, buf, n), buf, n);
        CHECK_SAMPLE(canonical_json(buf, n, o.ws), buf, n);
        check_jansson(buf, n);
        check_root(&g_root, buf, n, o.ws);
    }
    sv_dfa_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t h = hash(data, size);
    uint8_t mode = (uint8_t)(h >> 56);
    bool cross = ((h >> 48) & 3) == 0;

    /* Whether the text is JSON at all, as the compiler reads it (duplicate
     * keys refused, numbers beyond 64 bits read as reals). */
    json_error_t je;
    size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    json_t *doc = json_loadb((const char *)data, size, flags, &je);
    if (!doc && strstr(je.text, "too big")) doc = json_loadb((const char *)data, size, flags | JSON_DECODE_INT_AS_REAL, &je);
    bool json_ok = doc != NULL;
    root_open(&g_root, doc);

    result_t r = compile(data, size, mode, json_ok);
    uint8_t *smp[NSAMPLES] = {0};
    size_t len[NSAMPLES] = {0};
    if (r.st == SV_OK) {
        CHECK(sv_dfa_matches(r.d, (const uint8_t *)"", 0) == false); /* no JSON text is empty */
        for (uint32_t i = 0; i < NSAMPLES; i++) smp[i] = check_sample(r.d, r.ws, 1 + i, soft[i], r.maxdist, &len[i]);
        calls_check(data, size, mode);
    }

    /* The same schema in the other two whitespace modes. */
    if (cross && json_ok) {
        for (int k = 1; k <= 2; k++) {
            uint8_t m2 = (uint8_t)((mode & ~3u) | (((mode & 3) % 3 + k) % 3)); /* same flags, other ws */
            result_t r2 = compile(data, size, m2, json_ok);
            /* A compile that dropped its extra key orders (or depth) for a
             * budget has a narrower language; the automata of the three
             * whitespace modes differ in size, so one mode may keep what
             * another drops: only equal narrowing makes the languages equal. */
            if (r.st == SV_OK && r2.st == SV_OK && r.narrowed == r2.narrowed) {
                for (uint32_t i = 0; i < NSAMPLES; i++) {
                    check_in(smp[i], len[i], r2.d, r2.ws);
                    size_t n;
                    uint8_t *t = check_sample(r2.d, r2.ws, 1 + i, soft[i], r2.maxdist, &n);
                    check_in(t, n, r.d, r.ws);
                    free(t);
                }
            } else if (!is_limit(r.st) && !is_limit(r2.st)) {
                CHECK(r.st == r2.st); /* whitespace never decides validity */
            }
            sv_dfa_destroy(r2.d);
        }
    }
    for (uint32_t i = 0; i < NSAMPLES; i++) free(smp[i]);
    sv_dfa_destroy(r.d);
    json_decref(doc);
    return 0;
}

/* ---- structure-aware mutation -------------------------------------------------
 * Byte-level mutations of schema text mostly break the JSON, so half of the
 * mutations parse the input and edit the tree instead: set a keyword to a
 * value of a fitting shape, delete a key, wrap a subschema in not/anyOf/
 * allOf, copy a subtree elsewhere, or nudge a number. The other half (and
 * every input that is not JSON) goes to libFuzzer's own mutator. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static const char *const m_keywords[] = {
    "type", "enum", "const", "nullable", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "contains", "minContains", "maxContains", "uniqueItems",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$defs", "definitions", "$id",
    "$anchor", "$schema", "unevaluatedProperties", "unevaluatedItems", "title", "default",
};
static const char *const m_types[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
static const char *const m_names[] = {"a", "b", "c", "ab", "x-1", "", "a/b", "~", "\xc3\xa9", "\"", "0"};
static const char *const m_patterns[] = {"^a", "a", "^[a-z]{1,3}$", "[0-9]$", ".", "^$", "\\\\d+", "^(ab)*$", "\\p{L}", "[^a]"};
static const char *const m_formats[] = {"date-time", "date", "time", "duration", "email", "hostname", "ipv4",
                                        "ipv6", "uri", "uri-reference", "uuid", "regex"};
static const char *const m_refs[] = {"#", "#/$defs/a", "#/definitions/a", "#/properties/a", "#a", "#/items",
                                     "#/$defs/b", "b.json", "#/allOf/0"};
static const char *const m_drafts[] = {"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#",
                                       "https://json-schema.org/draft/2019-09/schema",
                                       "https://json-schema.org/draft/2020-12/schema"};
static const double m_numbers[] = {0, 1, 2, 3, -1, 0.5, 0.1, 2.5, 7, 10, 100, -2.75, 1e-7, 1e20, 1e300, 4294967296.0, 0.01};

#define PICK(r, a) ((a)[sv_rng_below((r), sizeof(a) / sizeof((a)[0]))])

static UNTRACED json_t *m_number(sv_rng_t *r) {
    double x = PICK(r, m_numbers);
    if (x > -1e18 && x < 1e18 && x == (double)(long long)x && sv_rng_below(r, 2)) return json_integer((json_int_t)x);
    return json_real(x);
}

/* A name as a JSON string value; now and then one with a NUL inside, which
 * JSON allows in values (jansson refuses it only in object keys). */
static UNTRACED json_t *m_name(sv_rng_t *r) {
    if (sv_rng_below(r, 8) == 0) return json_stringn("a\0b", 3);
    return json_string(PICK(r, m_names));
}

static UNTRACED json_t *m_scalar(sv_rng_t *r) {
    switch (sv_rng_below(r, 6)) {
    case 0: return json_null();
    case 1: return json_boolean(sv_rng_below(r, 2));
    case 2: case 3: return m_number(r);
    default: return m_name(r);
    }
}

static UNTRACED json_t *m_schema(sv_rng_t *r, int depth);

/* A value of the shape keyword k takes (or, rarely, of another shape). */
static UNTRACED json_t *m_value(sv_rng_t *r, const char *k, int depth) {
    if (sv_rng_below(r, 16) == 0) return sv_rng_below(r, 2) ? m_scalar(r) : m_schema(r, depth + 1);
    if (!strcmp(k, "type")) {
        if (sv_rng_below(r, 3)) return json_string(PICK(r, m_types));
        return json_pack("[ss]", PICK(r, m_types), PICK(r, m_types));
    }
    if (!strcmp(k, "enum") || !strcmp(k, "const") || !strcmp(k, "default")) {
        json_t *a = json_array();
        uint32_t n = 1 + sv_rng_below(r, 3);
        for (uint32_t i = 0; i < n; i++) {
            json_t *x = m_scalar(r);
            if (sv_rng_below(r, 4) == 0) x = json_pack("{so}", PICK(r, m_names), x);
            else if (sv_rng_below(r, 4) == 0) x = json_pack("[o]", x);
            json_array_append_new(a, x);
        }
        if (strcmp(k, "enum") == 0) return a;
        json_t *x = json_incref(json_array_get(a, 0));
        json_decref(a);
        return x;
    }
    if (!strcmp(k, "properties") || !strcmp(k, "patternProperties") || !strcmp(k, "$defs") ||
        !strcmp(k, "definitions") || !strcmp(k, "dependentSchemas")) {
        json_t *o = json_object();
        uint32_t n = 1 + sv_rng_below(r, 2);
        for (uint32_t i = 0; i < n; i++)
            json_object_set_new(o, !strcmp(k, "patternProperties") ? PICK(r, m_patterns) : PICK(r, m_names),
                                m_schema(r, depth + 1));
        return o;
    }
    if (!strcmp(k, "required")) return json_pack("[oo]", m_name(r), m_name(r));
    if (!strcmp(k, "dependentRequired") || !strcmp(k, "dependencies"))
        return json_pack("{s[o]}", PICK(r, m_names), m_name(r));
    if (!strcmp(k, "allOf") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf") || !strcmp(k, "prefixItems")) {
        json_t *a = json_array();
        uint32_t n = 1 + sv_rng_below(r, 3);
        for (uint32_t i = 0; i < n; i++) json_array_append_new(a, m_schema(r, depth + 1));
        return a;
    }
    if (!strcmp(k, "pattern")) return json_string(PICK(r, m_patterns));
    if (!strcmp(k, "format")) return json_string(PICK(r, m_formats));
    if (!strcmp(k, "$ref")) return json_string(PICK(r, m_refs));
    if (!strcmp(k, "$schema")) return json_string(PICK(r, m_drafts));
    if (!strcmp(k, "$id") || !strcmp(k, "$anchor") || !strcmp(k, "title")) return m_name(r);
    if (!strcmp(k, "uniqueItems") || !strcmp(k, "nullable")) return json_boolean(sv_rng_below(r, 2));
    if (!strncmp(k, "min", 3) || !strncmp(k, "max", 3) || !strncmp(k, "exclusive", 9) || !strcmp(k, "multipleOf")) {
        if (strstr(k, "imum") || !strcmp(k, "multipleOf")) return m_number(r);
        return json_integer(sv_rng_below(r, 2) ? sv_rng_below(r, 4) : sv_rng_below(r, 80));
    }
    return m_schema(r, depth + 1); /* the subschema keywords */
}

static UNTRACED json_t *m_schema(sv_rng_t *r, int depth) {
    if (depth > 2 || sv_rng_below(r, 6) == 0) return sv_rng_below(r, 3) ? json_object() : json_boolean(sv_rng_below(r, 2));
    json_t *o = json_object();
    uint32_t n = 1 + sv_rng_below(r, 2);
    for (uint32_t i = 0; i < n; i++) {
        const char *k = PICK(r, m_keywords);
        json_object_set_new(o, k, m_value(r, k, depth));
    }
    return o;
}

/* Every array and object of the tree (at most cap of them), depth first. */
static UNTRACED void m_nodes(json_t *x, json_t **v, uint32_t *n, uint32_t cap) {
    if (*n >= cap || !(json_is_object(x) || json_is_array(x))) return;
    v[(*n)++] = x;
    if (json_is_object(x)) {
        const char *k;
        json_t *y;
        json_object_foreach(x, k, y) m_nodes(y, v, n, cap);
    } else {
        for (size_t i = 0; i < json_array_size(x); i++) m_nodes(json_array_get(x, i), v, n, cap);
    }
}

/* The i-th key of an object (insertion order). */
static UNTRACED const char *m_key(json_t *o, size_t i) {
    const char *k;
    json_t *y;
    json_object_foreach(o, k, y) if (i-- == 0) return k;
    return NULL;
}

static UNTRACED json_t *m_nudge(sv_rng_t *r, json_t *x) {
    double v = json_number_value(x);
    switch (sv_rng_below(r, 6)) {
    case 0: v += 1; break;
    case 1: v -= 1; break;
    case 2: v = -v; break;
    case 3: v *= 10; break;
    case 4: v /= 10; break;
    default: return m_number(r);
    }
    if (json_is_integer(x) && v > -1e18 && v < 1e18 && v == (double)(long long)v) return json_integer((json_int_t)v);
    return json_real(v);
}

/* One edit somewhere in the tree; false when nothing applied. */
static UNTRACED bool m_edit(sv_rng_t *r, json_t *root) {
    json_t *nodes[256];
    uint32_t n = 0;
    m_nodes(root, nodes, &n, 256);
    if (n == 0) return false;
    json_t *c = nodes[sv_rng_below(r, n)];
    size_t size = json_is_object(c) ? json_object_size(c) : json_array_size(c);
    uint32_t op = sv_rng_below(r, 7);
    if (json_is_array(c)) {
        if (op < 2 && size) return json_array_remove(c, sv_rng_below(r, (uint32_t)size)) == 0;
        if (op < 4) return json_array_append_new(c, m_schema(r, 1)) == 0;
        if (op < 5 && size > 1) { /* swap two items */
            size_t i = sv_rng_below(r, (uint32_t)size), j = sv_rng_below(r, (uint32_t)size);
            json_t *a = json_incref(json_array_get(c, i)), *b = json_incref(json_array_get(c, j));
            json_array_set_new(c, i, b);
            json_array_set_new(c, j, a);
            return true;
        }
        json_t *copy = json_deep_copy(nodes[sv_rng_below(r, n)]);
        return copy && json_array_append_new(c, copy) == 0;
    }
    const char *k = size ? m_key(c, sv_rng_below(r, (uint32_t)size)) : NULL;
    json_t *v = k ? json_object_get(c, k) : NULL;
    switch (op) {
    case 0: case 1: { /* set a keyword */
        const char *nk = PICK(r, m_keywords);
        return json_object_set_new(c, nk, m_value(r, nk, 1)) == 0;
    }
    case 2: /* delete a key */
        return k && json_object_del(c, k) == 0;
    case 3: /* replace a value */
        if (!k) return false;
        if (json_is_number(v)) return json_object_set_new(c, k, m_nudge(r, v)) == 0;
        return json_object_set_new(c, k, m_value(r, k, 1)) == 0;
    case 4: { /* wrap a subschema */
        if (!k || !(json_is_object(v) || json_is_boolean(v))) return false;
        static const char *const wraps[] = {"not", "anyOf", "allOf", "oneOf", "if"};
        const char *w = PICK(r, wraps);
        json_t *x = !strcmp(w, "not") || !strcmp(w, "if") ? json_pack("{sO}", w, v)
                                                          : json_pack("{s[Oo]}", w, v, m_schema(r, 1));
        if (x && !strcmp(w, "if")) json_object_set_new(x, sv_rng_below(r, 2) ? "then" : "else", m_schema(r, 1));
        return x && json_object_set_new(c, k, x) == 0;
    }
    case 5: { /* copy a subtree under a key */
        json_t *copy = json_deep_copy(nodes[sv_rng_below(r, n)]);
        const char *nk = sv_rng_below(r, 2) && k ? k : PICK(r, m_keywords);
        return copy && json_object_set_new(c, nk, copy) == 0;
    }
    default: /* rename a key */
        if (!k) return false;
        json_incref(v);
        json_object_del(c, k);
        return json_object_set_new(c, sv_rng_below(r, 2) ? PICK(r, m_keywords) : PICK(r, m_names), v) == 0;
    }
}

UNTRACED size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    sv_rng_t r;
    sv_rng_seed(&r, seed);
    if (sv_rng_below(&r, 2)) return LLVMFuzzerMutate(data, size, max_size);
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!root) return LLVMFuzzerMutate(data, size, max_size);
    if (!json_is_object(root)) { /* a boolean schema or a stray value: start a schema */
        json_decref(root);
        root = m_schema(&r, 0);
    }
    uint32_t edits = 1 + sv_rng_below(&r, 3);
    for (uint32_t i = 0; i < edits; i++) (void)m_edit(&r, root);
    char *txt = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(root);
    size_t n = txt ? strlen(txt) : 0;
    if (!txt || n > max_size) {
        free(txt);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    memcpy(data, txt, n);
    free(txt);
    return n;
}
