/* nfc.c — Normalization Form C (UAX #15): full canonical decomposition,
 * canonical ordering of combining marks, then canonical composition.
 *
 * Most text is already in NFC: sv_nfc_quick_check looks for any character
 * that could change (a decomposable one, a combining mark, or one that
 * composes with its predecessor) and callers skip the work when there is
 * none. The full path works on an array of code points: decomposition can
 * grow a character into at most 4 (UTF-8 output is at most 3x the input in
 * bytes, the bound the Unicode FAQ gives for NFC). Hangul syllables are
 * decomposed and composed arithmetically (Unicode 3.12), everything else
 * through the generated tables, binary-searched. */
#include "nfc.h"

#include "nfc_tables.h"
#include "util/utf8.h"

enum {
    HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
    HANGUL_LN = 19, HANGUL_VN = 21, HANGUL_TN = 28,
    HANGUL_NN = HANGUL_VN * HANGUL_TN, HANGUL_SN = HANGUL_LN * HANGUL_NN,
};

static bool unstable(uint32_t cp) {
    if (cp < 0x300)
        return false;
    unsigned lo = 0, hi = sv_nfc_unstable_n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (cp < sv_nfc_unstable[mid].lo) hi = mid;
        else if (cp > sv_nfc_unstable[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

uint8_t sv_nfc_ccc(uint32_t cp) {
    if (cp < 0x300)
        return 0;
    unsigned lo = 0, hi = sv_nfc_ccc_runs_n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (cp < sv_nfc_ccc_runs[mid].lo) hi = mid;
        else if (cp > sv_nfc_ccc_runs[mid].hi) lo = mid + 1;
        else return sv_nfc_ccc_runs[mid].ccc;
    }
    return 0;
}

static const sv_nfc_decomp_t *find_decomp(uint32_t cp) {
    unsigned lo = 0, hi = sv_nfc_decomp_n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (cp < sv_nfc_decomp[mid].cp) hi = mid;
        else if (cp > sv_nfc_decomp[mid].cp) lo = mid + 1;
        else return &sv_nfc_decomp[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0 when there is none. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LN && b >= HANGUL_V && b < HANGUL_V + HANGUL_VN)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VN + (b - HANGUL_V)) * HANGUL_TN;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SN && (a - HANGUL_S) % HANGUL_TN == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_TN)
        return a + (b - HANGUL_T);
    unsigned lo = 0, hi = sv_nfc_pairs_n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        const sv_nfc_pair_t *p = &sv_nfc_pairs[mid];
        if (a < p->first || (a == p->first && b < p->second)) hi = mid;
        else if (a > p->first || b > p->second) lo = mid + 1;
        else return p->composite;
    }
    return 0;
}

bool sv_nfc_quick_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0xCC) {  /* lead bytes below 0xCC encode code points below U+0300 */
            i++;
            continue;
        }
        uint32_t cp;
        int k = sv_utf8_decode(s + i, n - i, &cp);
        if (!k)
            return false;
        if (unstable(cp))
            return false;
        i += (size_t)k;
    }
    return true;
}

sv_status sv_nfc_append(const uint8_t *s, size_t n, sv_bytes_t *out, sv_bytes_t *scratch) {
    /* Decompose into scratch as an array of code points. */
    scratch->n = 0;
    if (n > SIZE_MAX / 16)
        return SV_ERR_NOMEM;
    sv_status st = sv_bytes_reserve(scratch, 4 * n * sizeof(uint32_t) + sizeof(uint32_t));
    if (st)
        return st;
    uint32_t *cps = (uint32_t *)(void *)scratch->p;  /* realloc'd memory: aligned */
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = sv_utf8_decode(s + i, n - i, &cp);
        if (!k)
            return SV_ERR_ARG;
        i += (size_t)k;
        if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SN) {
            uint32_t si = cp - HANGUL_S;
            cps[m++] = HANGUL_L + si / HANGUL_NN;
            cps[m++] = HANGUL_V + (si % HANGUL_NN) / HANGUL_TN;
            if (si % HANGUL_TN)
                cps[m++] = HANGUL_T + si % HANGUL_TN;
            continue;
        }
        const sv_nfc_decomp_t *d = cp >= 0xC0 ? find_decomp(cp) : NULL;
        if (d) {
            for (unsigned j = 0; j < d->len; j++)
                cps[m++] = sv_nfc_decomp_pool[d->off + j];
        } else {
            cps[m++] = cp;
        }
    }

    /* Canonical ordering: a stable insertion sort of each run of
     * non-starters by combining class. */
    for (size_t i = 1; i < m; i++) {
        uint8_t c = sv_nfc_ccc(cps[i]);
        if (c == 0)
            continue;
        size_t j = i;
        uint32_t cp = cps[i];
        while (j > 0) {
            uint8_t pc = sv_nfc_ccc(cps[j - 1]);
            if (pc == 0 || pc <= c)
                break;
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = cp;
    }

    /* Canonical composition: a character composes with the last starter
     * unless a character between them is a starter or has a class at least
     * as high as its own (it is "blocked"). */
    if (m) {
        size_t starter = 0, w = 1;
        int last_class = sv_nfc_ccc(cps[0]) ? 256 : 0;
        for (size_t i = 1; i < m; i++) {
            uint32_t cp = cps[i];
            int c = sv_nfc_ccc(cp);
            uint32_t comp = 256 > last_class && (last_class < c || last_class == 0)
                                ? compose(cps[starter], cp) : 0;
            if (comp) {
                cps[starter] = comp;
                continue;
            }
            if (c == 0)
                starter = w;
            last_class = c;
            cps[w++] = cp;
        }
        m = w;
    }

    st = sv_bytes_reserve(out, 4 * m);
    if (st)
        return st;
    for (size_t i = 0; i < m; i++)
        out->n += (size_t)sv_utf8_encode(cps[i], out->p + out->n);
    return SV_OK;
}
