/* test_json_format.c — the JSON Schema format languages (fsm/internal/json_format.h):
 * each compiles to a small DFA, accepts hand-picked valid values and refuses
 * invalid ones (the verdicts of Python jsonschema's FormatChecker, which
 * tests/format/check_formats.py consults directly), refuses the spellings it
 * leaves out on purpose, embeds in a larger AST, and unknown formats are
 * refused by name. */
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/json_format.h"
#include "fsm/regex.h"
#include "test.h"

/* Schemas embed format languages often: keep every DFA within this. */
#define MAX_FORMAT_STATES 256

typedef struct {
    const char *format;
    const char *valid[16];    /* NULL-terminated */
    const char *invalid[20];  /* NULL-terminated: the checker refuses these */
    const char *left_out[8];  /* NULL-terminated: the checker accepts these, our language does not */
} format_case_t;

static const format_case_t cases[] = {
    {"date-time",
     {"2024-01-31T12:34:56Z", "2024-01-31T12:34:56.789Z", "2024-01-31T12:34:56+02:00", "2024-01-31T12:34:56.5-05:30",
      "1999-12-31T23:59:59Z", "2024-02-29T00:00:00Z", "2000-02-29T08:00:00+00:00", "0001-01-01T00:00:00Z",
      "9999-12-31T23:59:59.999999999Z", NULL},
     {"2024-01-31 12:34:56Z", "2024-01-31T12:34:56", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
      "2024-13-01T00:00:00Z", "2024-01-31T24:00:00Z", "2024-01-31T12:60:00Z", "2024-01-31T12:34:60Z",
      "0000-01-01T00:00:00Z", "2024-01-31T12:34:56+24:00", "2024-01-31T12:34:56.Z", "2024-01-31T12:34Z",
      "2024-01-31T12:34:56+0200", NULL},
     {"2024-01-31t12:34:56z", "2024-01-31T12:34:56z", NULL}},
    {"date",
     {"2024-01-31", "2024-02-29", "2000-02-29", "1600-02-29", "2023-02-28", "1970-01-01", "0001-01-01", "9999-12-31",
      "2023-04-30", "0004-02-29", NULL},
     {"2023-02-29", "1900-02-29", "2100-02-29", "0000-02-29", "2024-02-30", "2024-04-31", "2024-13-01", "2024-00-10",
      "2024-01-00", "0000-01-01", "2024-1-01", "2024/01/01", "20240131", "", "2024-01-31T00:00:00Z", NULL},
     {NULL}},
    {"time",
     {"12:34:56Z", "00:00:00Z", "23:59:59Z", "12:34:56.789Z", "12:34:56+02:00", "08:15:00-05:00",
      "23:59:59.999999+14:00", "00:00:00.0-00:00", NULL},
     {"12:34:56", "24:00:00Z", "12:60:00Z", "12:34:60Z", "12:34Z", "1:02:03Z", "12:34:56+2:00", "12:34:56.Z",
      "12:34:56+24:00", "T12:34:56Z", NULL},
     {"12:34:56z", NULL}},
    {"duration",
     {"P1D", "PT1H", "P3Y6M4DT12H30M5S", "PT30M", "P2W", "P1Y", "P1M", "PT0S", "P0D", "PT36H",
      NULL},
     {"P", "PT", "1D", "P1", "P1DT", "PT1H2", "P1D2W", "P1Y1Y", "PT1S1H", "P1M1Y", "PT1D", "P1DT1D", "p1d", NULL},
     {"P1.5D", "-P1D", "+P1D", "P1E2D", "P1WT1H", "P1Y2D", "PT1H5S", NULL}},
    {"email",
     {"user@example.com", "john.doe@example.co.uk", "first.last+tag@sub.example.org", "a@b.co",
      "x_y-z@mail-server.example.com", "USER@EXAMPLE.COM", "o'brien@example.ie", "support123@company.io", NULL},
     {"", "user", "user.example.com", "userexample.com", "user(at)example.com", "user at example.com",
      "user%40example.com", "\"user\"", NULL},
     {"@", "user@example", "@example.com", "user@", ".user@example.com", "us..er@example.com", "user@-example.com",
      NULL}},
    {"hostname",
     {"example.com", "localhost", "www.example.com", "api.v2.example.co.uk", "my-host", "a",
      "EXAMPLE.COM", "db-01.prod.us-east-1.example.internal", "123.example",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL},
     {"", "-example.com", "example-.com", "ex_ample.com", "example..com", ".example.com", "exa mple.com",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a.-b", NULL},
     {"example.com.", "xn--bcher-kva.example", "a--b.example", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example",
      "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g", NULL}},
    {"ipv4",
     {"192.168.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.1", "127.0.0.1", "8.8.8.8", "172.16.254.3",
      "249.250.251.252", NULL},
     {"01.2.3.4", "1.2.3.04", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1.2.3.", "1..2.3", "a.b.c.d", "1.2.3.4 ",
      "00.0.0.0", "1.2.3.256", NULL},
     {NULL}},
    {"ipv6",
     {"::1", "::", "2001:db8::1", "fe80::1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "::ffff:192.168.0.1",
      "1:2:3:4:5:6:7:8", "1::", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "FE80::ABCD", "1:2:3:4:5:6:1.2.3.4", NULL},
     {"", ":", ":::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1::2::3", "12345::", "g::1", "1:2:3:4:5:6:7:8::",
      "::1.2.3.04", "fe80::1%eth0", "1::2:3:4:5:6:7:8", ":1::", "::1.2.3", NULL},
     {NULL}},
    {"uri",
     {"https://example.com", "https://example.com/path/to/page?query=1&b=2#section",
      "http://user:pass@example.com:8080/", "mailto:user@example.com", "urn:isbn:0451450523", "http://[::1]:8080/",
      "file:///etc/hosts", "https://example.com/a%20b", "a:", NULL},
     {"", "example.com", "/path", "//example.com", "1http://x", "http://a b", "http://[::1/", "http://x/%zz",
      "http://x/<>", "://x", NULL},
     {NULL}},
    {"uri-reference",
     {"https://example.com/x", "/path/to/resource", "../parent", "page.html#top", "?q=1", "#frag", "",
      "//cdn.example.com/lib.js", "a/b/c", NULL},
     {"http://a b", "a b", "%zz", "http://[::1/", "a:b c", "<x>", "x#a#b", "\\", NULL},
     {NULL}},
    {"uuid",
     {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
      "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "550e8400-e29b-41d4-a716-446655440000",
      "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "f47ac10b-58cc-4372-a567-0e02b2c3d479",
      "A987FBC9-4BED-3078-CF07-9141BA07C9F3", "01890a5d-ac96-774b-bcce-b302099a8057", NULL},
     {"", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
      "123e4567-e89b-12d3-a456-4266141740000", "g23e4567-e89b-12d3-a456-426614174000",
      "{123e4567-e89b-12d3-a456-426614174000}", "urn:uuid:123e4567-e89b-12d3-a456-426614174000",
      "123e4567e-89b-12d3-a456-426614174000", NULL},
     {"12345678-1234-1234-1234-1234-5678-9abc", "+2345678-1234-1234-1234-123456789abc", NULL}},
};
#define NCASES (sizeof cases / sizeof cases[0])

static sv_dfa_t *compile_format(const char *format) {
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *ast = NULL;
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_json_format(a, format, &ast, &e);
    CHECK(st == SV_OK, "%s: %s", format, e.message);
    if (!st) {
        st = sv_dfa_from_ast(ast, NULL, &d, &e);
        CHECK(st == SV_OK, "%s: %s", format, e.message);
    }
    sv_arena_destroy(a);
    return d;
}

static int count(const char *const *v) {
    int n = 0;
    while (v[n]) n++;
    return n;
}

/* The format inside quotes, as a schema would embed it: the embedded
 * language must come through a larger AST intact. */
static void check_embedding(const format_case_t *c) {
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *fa = NULL, *quoted = NULL;
    sv_dfa_t *d = NULL;
    sv_error_t e;
    if (sv_json_format(a, c->format, &fa, &e) == SV_OK) {
        sv_ast_t *q = sv_ast_codepoint(a, '<');
        sv_ast_t *r = sv_ast_codepoint(a, '>');
        sv_ast_t *k[3] = {q, fa, r};
        quoted = sv_ast_cat(a, k, 3);
    }
    CHECK(quoted && sv_dfa_from_ast(quoted, NULL, &d, &e) == SV_OK, "%s embedded", c->format);
    for (int i = 0; d && c->valid[i]; i++) {
        char buf[256];
        int n = snprintf(buf, sizeof buf, "<%s>", c->valid[i]);
        CHECK(sv_dfa_matches(d, (const uint8_t *)buf, (size_t)n), "%s embedded: %s", c->format, buf);
        CHECK(!sv_dfa_matches(d, (const uint8_t *)c->valid[i], strlen(c->valid[i])), "%s embedded, no brackets: %s",
              c->format, c->valid[i]);
    }
    for (int i = 0; d && c->invalid[i]; i++) {
        char buf[256];
        int n = snprintf(buf, sizeof buf, "<%s>", c->invalid[i]);
        CHECK(!sv_dfa_matches(d, (const uint8_t *)buf, (size_t)n), "%s embedded: %s", c->format, buf);
    }
    sv_dfa_destroy(d);
    sv_arena_destroy(a);
}

static void check_unknown(void) {
    static const char *unknown[] = {"iri", "idn-email", "regex", "json-pointer", "Date", "date ", "", "uri-template"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        sv_arena_t *a = sv_arena_create(0);
        sv_ast_t *ast = NULL;
        sv_error_t e;
        sv_error_clear(&e);
        sv_status st = sv_json_format(a, unknown[i], &ast, &e);
        char quoted[80];
        snprintf(quoted, sizeof quoted, "\"%s\"", unknown[i]);
        CHECK(st == SV_ERR_UNSUPPORTED && e.code == SV_ERR_UNSUPPORTED, "format \"%s\": status %s", unknown[i],
              sv_status_name(st));
        CHECK(strstr(e.message, quoted) != NULL, "the message names the format %s: %s", quoted, e.message);
        CHECK(ast == NULL, "no AST for an unknown format");
        CHECK(!sv_json_format_known(unknown[i]), "known(\"%s\") is false", unknown[i]);
        sv_arena_destroy(a);
    }
    CHECK(!sv_json_format_known(NULL), "known(NULL) is false");
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *ast;
    sv_error_t e;
    CHECK(sv_json_format(a, NULL, &ast, &e) == SV_ERR_ARG, "NULL format");
    sv_arena_destroy(a);
}

int main(void) {
    printf("test_json_format: format languages compile, accept and refuse hand-picked values, embed\n");
    printf("  %-14s %6s %6s %6s\n", "format", "states", "valid", "invalid");
    for (size_t i = 0; i < NCASES; i++) {
        const format_case_t *c = &cases[i];
        CHECK(sv_json_format_known(c->format), "known(\"%s\")", c->format);
        CHECK(count(c->valid) >= 8 && count(c->invalid) >= 8, "%s: at least 8 cases of each kind", c->format);
        sv_dfa_t *d = compile_format(c->format);
        if (!d) continue;
        uint32_t ns = sv_dfa_num_states(d);
        printf("  %-14s %6u %6d %6d\n", c->format, ns, count(c->valid), count(c->invalid));
        CHECK(ns <= MAX_FORMAT_STATES, "%s: %u states", c->format, ns);
        for (int k = 0; c->valid[k]; k++)
            CHECK(sv_dfa_matches(d, (const uint8_t *)c->valid[k], strlen(c->valid[k])), "%s accepts \"%s\"",
                  c->format, c->valid[k]);
        for (int k = 0; c->invalid[k]; k++)
            CHECK(!sv_dfa_matches(d, (const uint8_t *)c->invalid[k], strlen(c->invalid[k])), "%s refuses \"%s\"",
                  c->format, c->invalid[k]);
        for (int k = 0; c->left_out[k]; k++)
            CHECK(!sv_dfa_matches(d, (const uint8_t *)c->left_out[k], strlen(c->left_out[k])),
                  "%s leaves out \"%s\"", c->format, c->left_out[k]);
        sv_dfa_destroy(d);
        check_embedding(c);
    }
    CHECK(NCASES == 11, "every supported format has cases");
    check_unknown();
    return test_summary("test_json_format");
}
