/* test_cpset.c — code-point sets, UTF-8 encode/decode, and the translation of
 * sets to UTF-8 byte-range sequences, checked exhaustively over all of
 * Unicode for a handful of sets. */
#include <string.h>

#include "fsm/cpset.h"
#include "util/rng.h"
#include "test.h"

typedef struct { sv_utf8_seq_t seq[4096]; int n; } seqs_t;

static sv_status collect(void *ctx, const sv_utf8_seq_t *s) {
    seqs_t *q = ctx;
    if (q->n == 4096) return SV_ERR_BUDGET;
    q->seq[q->n++] = *s;
    return SV_OK;
}

static int count_matching(const seqs_t *q, const uint8_t *b, int len) {
    int m = 0;
    for (int i = 0; i < q->n; i++) {
        if (q->seq[i].len != len) continue;
        int ok = 1;
        for (int j = 0; j < len && ok; j++) ok = b[j] >= q->seq[i].lo[j] && b[j] <= q->seq[i].hi[j];
        m += ok;
    }
    return m;
}

/* Every scalar value's encoding matches exactly one sequence iff it is in
 * the set; and no sequence matches a non-scalar (checked via decode). */
static void check_exhaustive(const char *name, sv_cpset_t *s) {
    static seqs_t q;
    q.n = 0;
    CHECK(sv_cpset_utf8_sequences(s, collect, &q) == SV_OK, "%s: sequences", name);
    int bad = 0;
    for (uint32_t cp = 0; cp <= SV_CP_MAX; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        uint8_t b[4];
        int len = sv_utf8_encode(cp, b);
        int m = count_matching(&q, b, len);
        int want = sv_cpset_contains(s, cp);
        if (m != want && bad++ < 5) CHECK(m == want, "%s: U+%04X matched by %d sequences, member=%d", name, cp, m, want);
    }
    CHECK(bad == 0, "%s: %d code points disagree", name, bad);
    /* Each sequence's corner strings decode to members. */
    for (int i = 0; i < q.n; i++) {
        uint32_t a = 0, z = 0; /* sv_utf8_decode leaves them alone when it fails */
        int la = sv_utf8_decode(q.seq[i].lo, q.seq[i].len, &a), lz = sv_utf8_decode(q.seq[i].hi, q.seq[i].len, &z);
        CHECK(la == q.seq[i].len && lz == q.seq[i].len && sv_cpset_contains(s, a) && sv_cpset_contains(s, z),
              "%s: sequence %d corners are not members", name, i);
    }
    printf("  %-28s %5u ranges -> %4d UTF-8 sequences, exhaustive over U+0000..U+10FFFF\n", name, s->n, q.n);
}

int main(void) {
    printf("test_cpset: UTF-8 codec, set algebra, sets to byte sequences\n");
    /* UTF-8 codec round trip over every scalar value, and rejections. */
    int rt_bad = 0;
    for (uint32_t cp = 0; cp <= SV_CP_MAX; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        uint8_t b[4];
        uint32_t back;
        int len = sv_utf8_encode(cp, b);
        if (sv_utf8_decode(b, (size_t)len, &back) != len || back != cp) rt_bad++;
    }
    CHECK(rt_bad == 0, "%d code points fail the encode/decode round trip", rt_bad);
    static const struct { const char *b; size_t n; } invalid[] = {
        {"\xC0\x80", 2}, {"\xC1\xBF", 2}, {"\xE0\x80\x80", 3}, {"\xED\xA0\x80", 3}, {"\xF4\x90\x80\x80", 4},
        {"\xF8\x88\x80\x80\x80", 5}, {"\x80", 1}, {"\xBF", 1}, {"\xE2\x82", 2}, {"\xFF", 1}, {"\xC3", 1},
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        uint32_t cp;
        CHECK(sv_utf8_decode((const uint8_t *)invalid[i].b, invalid[i].n, &cp) == 0, "invalid sequence %zu decoded", i);
    }

    sv_cpset_t s;
    /* Normalization merges, sorts and drops surrogates. */
    sv_cpset_init(&s);
    sv_cpset_add(&s, 'c', 'f');
    sv_cpset_add(&s, 'a', 'b');
    sv_cpset_add(&s, 0xD000, 0xE100);
    sv_cpset_add(&s, 'x', 'x');
    sv_cpset_normalize(&s);
    CHECK(s.n == 4 && s.r[0].lo == 'a' && s.r[0].hi == 'f' && s.r[2].hi == 0xD7FF && s.r[3].lo == 0xE000,
          "normalize: got %u ranges", s.n);
    check_exhaustive("[a-fx\\uD000-\\uE100]", &s);
    CHECK(sv_cpset_negate(&s) == SV_OK && !sv_cpset_contains(&s, 'a') && sv_cpset_contains(&s, 'g') &&
              !sv_cpset_contains(&s, 0xD800) && sv_cpset_contains(&s, 0x10FFFF),
          "negate");
    check_exhaustive("complement of the above", &s);
    sv_cpset_free(&s);

    /* Boundary-straddling ranges. */
    static const uint32_t ranges[][2] = {
        {0x7F, 0x80}, {0x7FF, 0x800}, {0xFFFF, 0x10000}, {0x0, 0x10FFFF}, {0x41, 0x10FFFF},
        {0x800, 0x800}, {0x1000, 0x1FFF}, {0x10000, 0x3FFFF}, {0xE000, 0xFFFD}, {0x80, 0xFFFF},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "[U+%04X-U+%04X]", ranges[i][0], ranges[i][1]);
        sv_cpset_init(&s);
        sv_cpset_add(&s, ranges[i][0], ranges[i][1]);
        sv_cpset_normalize(&s);
        check_exhaustive(name, &s);
        sv_cpset_free(&s);
    }
    /* Random sets. */
    sv_rng_t rng;
    sv_rng_seed(&rng, 7);
    for (int t = 0; t < 4; t++) {
        sv_cpset_init(&s);
        for (int i = 0; i < 40; i++) {
            uint32_t lo = sv_rng_below(&rng, 0x110000), w = sv_rng_below(&rng, t & 1 ? 300 : 70000);
            sv_cpset_add(&s, lo, lo + w);
        }
        sv_cpset_normalize(&s);
        char name[32];
        snprintf(name, sizeof name, "random set %d", t);
        check_exhaustive(name, &s);
        sv_cpset_free(&s);
    }
    /* Named classes (ECMA-262 meanings) and Unicode properties. */
    sv_cpset_init(&s);
    sv_cpset_add_class(&s, SV_CLASS_SPACE, false);
    sv_cpset_normalize(&s);
    CHECK(sv_cpset_contains(&s, 0xFEFF) && sv_cpset_contains(&s, 0x3000) && sv_cpset_contains(&s, 0x2028) &&
              sv_cpset_contains(&s, '\v') && !sv_cpset_contains(&s, 0x200B) && !sv_cpset_contains(&s, 0x85),
          "\\s is ECMA-262 WhiteSpace + LineTerminator (U+0085 and U+200B are not in it)");
    sv_cpset_free(&s);
    sv_cpset_init(&s);
    sv_cpset_add_class(&s, SV_CLASS_DOT, false);
    sv_cpset_normalize(&s);
    CHECK(!sv_cpset_contains(&s, '\n') && !sv_cpset_contains(&s, '\r') && !sv_cpset_contains(&s, 0x2029) &&
              sv_cpset_contains(&s, 0x85) && sv_cpset_contains(&s, 0),
          "`.` excludes exactly the ECMA-262 line terminators");
    check_exhaustive(".", &s);
    sv_cpset_free(&s);
    sv_cpset_init(&s);
    CHECK(sv_cpset_add_property(&s, "Lu", 2, false) == SV_OK, "\\p{Lu}");
    sv_cpset_normalize(&s);
    CHECK(sv_cpset_contains(&s, 'A') && !sv_cpset_contains(&s, 'a') && sv_cpset_contains(&s, 0x0391) &&
              !sv_cpset_contains(&s, '1'),
          "\\p{Lu} membership");
    check_exhaustive("\\p{Lu}", &s);
    sv_cpset_free(&s);
    sv_cpset_init(&s);
    CHECK(sv_cpset_add_property(&s, "Letter", 6, true) == SV_OK, "\\P{Letter}");
    sv_cpset_normalize(&s);
    CHECK(!sv_cpset_contains(&s, 'z') && sv_cpset_contains(&s, '7') && !sv_cpset_contains(&s, 0x4E2D),
          "\\P{Letter} membership");
    sv_cpset_free(&s);
    sv_cpset_init(&s);
    CHECK(sv_cpset_add_property(&s, "gc=Nd", 5, false) == SV_OK, "\\p{gc=Nd}");
    sv_cpset_normalize(&s);
    CHECK(sv_cpset_contains(&s, '5') && sv_cpset_contains(&s, 0x0665) && !sv_cpset_contains(&s, 0x00B2),
          "\\p{Nd}: Arabic-Indic five is Nd, superscript two is No");
    sv_cpset_free(&s);
    sv_cpset_init(&s);
    CHECK(sv_cpset_add_property(&s, "Greek", 5, false) == SV_ERR_UNSUPPORTED, "scripts are refused");
    CHECK(sv_cpset_add_property(&s, "L&", 2, false) == SV_OK, "\\p{L&}");
    sv_cpset_normalize(&s);
    CHECK(sv_cpset_contains(&s, 'q') && !sv_cpset_contains(&s, 0x4E2D), "\\p{L&} is cased letters only");
    sv_cpset_free(&s);
    return test_summary("test_cpset: codec round trip over all scalar values, 18 sets exhaustively");
}
