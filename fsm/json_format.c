/* json_format.c — the JSON Schema `format` languages, as regexes in our own
 * dialect (regex.h) parsed into the caller's arena.
 *
 * The judge is Python `jsonschema` (Draft202012Validator.FORMAT_CHECKER) with
 * the format-nongpl extras; tests/format/check_formats.py samples every
 * language and validates each string with it. Each language is a subset of
 * what that checker accepts (soundness), chosen to hold the spellings a model
 * would write (usefulness), within a small DFA. What each checker does, and
 * what our language leaves out:
 *
 * date       `^\d{4}-\d{2}-\d{2}$` (ASCII) and datetime.date.fromisoformat.
 *            Ours: YYYY-MM-DD, years 0001-9999, exact Gregorian month
 *            lengths including the leap-year rule (29 February only in years
 *            divisible by 4 and not by 100, or by 400). Exact: nothing is
 *            left out.
 * date-time  rfc3339-validator on the upper-cased string: date "T" hh:mm:ss,
 *            optional "." and 1+ digits, then "Z" or +hh:mm / -hh:mm; hours
 *            00-23, minutes and seconds 00-59 (no leap second), offset hours
 *            00-23; calendar days checked with calendar.monthrange.
 *            Ours: the same, with upper-case "T" and "Z" only. Left out: "t"
 *            and "z" (which many consumers refuse) and a trailing newline
 *            (the checker's regex ends in Python's `$`, which allows one).
 * time       the date-time check on "1970-01-01T" + value: hh:mm:ss[.frac]
 *            followed by a required Z or offset. Ours: that. Left out, as for
 *            date-time: "z" and a trailing newline.
 * duration   isoduration.parse_duration, then the value must end in one of
 *            D M Y W H S. Ours: the ISO 8601 designator form
 *            P[nY][nM][nD][T[nH][nM][nS]] with at least one component (and
 *            at least one after T), or PnW; n is 1+ ASCII digits. Left out:
 *            a leading sign (+P1D, -P1D), fractional or exponent values (P1.5D,
 *            P1,5D, P1E2D), weeks combined with other components (P1WT1H),
 *            and the alternative PYYYY-MM-DDThh:mm:ss form.
 * email      any string containing "@". Ours: an RFC 5322 dot-atom local
 *            part (atext is A-Z a-z 0-9 and !#$%&'*+/=?^_`{|}~-), "@", and a
 *            domain of 2+ dot-separated LDH labels (letters, digits, inner
 *            hyphens). Left out: quoted local parts, address literals
 *            (user@[1.2.3.4]), single-label domains, internationalized
 *            addresses; lengths are not capped (the checker caps nothing).
 * hostname   fqdn.FQDN(min_labels=1): labels of 1-63 of A-Z a-z 0-9 and "-",
 *            not starting or ending with "-", separated by ".", an optional
 *            final ".", total length at most 253. Ours: any number of such
 *            labels, at most 63 characters in all (which keeps every label
 *            within 63 and the name within 253 without counting per label:
 *            185 states, where 8 labels of up to 30 would take 472). Left
 *            out: names longer than 63 characters, the trailing dot, a
 *            trailing newline (fqdn's `$`).
 * ipv4       ipaddress.IPv4Address: four decimal octets 0-255, no leading
 *            zeros. Exact.
 * ipv6       ipaddress.IPv6Address without a scope id: the RFC 4291 text
 *            forms (1-4 hex digits per group, either case, one "::" standing
 *            for at least one group, an optional dotted IPv4 tail). Ours: the
 *            RFC 3986 IPv6address grammar, which is that set. Exact (a "%scope"
 *            suffix is refused by the checker too).
 * uri        rfc3986-validator's URI regex (absolute: a scheme is required).
 *            Ours: that regex transcribed; its IPv4 host alternative is
 *            dropped since reg-name already holds every dotted quad. Exact
 *            but for a trailing newline, which the checker's `$` allows.
 * uri-reference  rfc3986-validator's URI_reference regex: a URI or a
 *            relative reference (the empty string included). Exact but for
 *            the trailing newline.
 * uuid       uuid.UUID plus the checker's rule that positions 8, 13, 18 and
 *            23 are "-": the hyphenated 8-4-4-4-12 hex form (the "{...}" and
 *            "urn:uuid:" wrappings that uuid.UUID takes fail the position
 *            rule). Ours: that, hex digits in either case. Left out: the
 *            strings that pass only through uuid.UUID's leniencies: more
 *            hyphens elsewhere (it deletes every "-" before counting 32
 *            digits), "urn:" or "uuid:" anywhere (deleted too), and what
 *            int(x, 16) forgives (a leading "+" or space, "_" between
 *            digits).
 *
 * Minimal DFA states (sv_dfa_from_ast; test_json_format prints them and
 * holds each within 256): date-time 51, date 32, time 19, duration 15,
 * email 8, hostname 185, ipv4 24, ipv6 151, uri 172, uri-reference 175,
 * uuid 37.
 *
 * The regexes are built from string-literal pieces so that the shared parts
 * (the date, the octet, the IPv6 groups, the URI pieces) are written once;
 * none uses ^ or $, since each language is embedded in a larger one. */
#include "fsm/internal/json_format.h"

#include <string.h>

#include "regex.h"

/* ---- dates and times ----------------------------------------------------- */

/* Years 0001-9999 (year 0 is not a date). */
#define YEAR_ANY "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
/* Leap years: divisible by 4 and not by 100 (last two digits a nonzero
 * multiple of 4), or divisible by 400 (a century divisible by 4, not 00). */
#define YEAR_LEAP "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
/* Month and day of every date but 29 February. */
#define MONTH_DAY                                      \
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])" \
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"           \
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
#define FULL_DATE "(?:" YEAR_ANY "-" MONTH_DAY "|" YEAR_LEAP "-02-29)"

#define HOUR "(?:[01][0-9]|2[0-3])"
#define MINSEC "[0-5][0-9]"
#define FULL_TIME HOUR ":" MINSEC ":" MINSEC "(?:\\.[0-9]+)?(?:Z|[+-]" HOUR ":" MINSEC ")"

/* ---- durations ----------------------------------------------------------- */

/* RFC 3339 appendix A: a unit may only be skipped from the end (no P1Y2D,
 * no PT1H2S), which is also what the JSON-Schema-Test-Suite checks. */
#define DUR_TIME "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
#define DUR_DATE "(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
#define DURATION "P(?:" DUR_DATE "(?:" DUR_TIME ")?|" DUR_TIME "|[0-9]+W)"

/* ---- names and addresses ------------------------------------------------- */

#define ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
#define LDH_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
#define EMAIL ATEXT "+(?:\\." ATEXT "+)*@" LDH_LABEL "(?:\\." LDH_LABEL ")+"

/* Hostnames are LDH labels intersected with a length cap: at most 63
 * characters in all, which also keeps each label within 63 and the name
 * within 253 (see capped_ast). The cap's class only bounds the length:
 * the product keeps the label characters. */
/* Host labels never hold "--": that keeps out A-labels ("xn--..."), whose
 * Punycode and IDNA rules are not regular in any practical size. */
#define HOST_LABEL "[A-Za-z0-9](?:-?[A-Za-z0-9])*"
#define HOSTNAME HOST_LABEL "(?:\\." HOST_LABEL ")*"
#define HOSTNAME_MAX_LEN "63"
#define HOSTNAME_CAP "[\\x21-\\x7e]{1," HOSTNAME_MAX_LEN "}"

/* Decimal octets: ipaddress refuses leading zeros; rfc3986-validator's IPv6
 * (inside URI hosts) allows them. */
#define OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define OCTET_3986 "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
#define IPV4_OF(oct) oct "(?:\\." oct "){3}"

/* RFC 3986 IPv6address, with the octet spelling of its IPv4 tail. */
#define H16 "[0-9A-Fa-f]{1,4}"
#define IPV6_OF(oct)                                                  \
    "(?:(?:" H16 ":){6}(?:" H16 ":" H16 "|" IPV4_OF(oct) ")"          \
    "|::(?:" H16 ":){5}(?:" H16 ":" H16 "|" IPV4_OF(oct) ")"          \
    "|(?:" H16 ")?::(?:" H16 ":){4}(?:" H16 ":" H16 "|" IPV4_OF(oct) ")" \
    "|(?:(?:" H16 ":){0,1}" H16 ")?::(?:" H16 ":){3}(?:" H16 ":" H16 "|" IPV4_OF(oct) ")" \
    "|(?:(?:" H16 ":){0,2}" H16 ")?::(?:" H16 ":){2}(?:" H16 ":" H16 "|" IPV4_OF(oct) ")" \
    "|(?:(?:" H16 ":){0,3}" H16 ")?::" H16 ":(?:" H16 ":" H16 "|" IPV4_OF(oct) ")" \
    "|(?:(?:" H16 ":){0,4}" H16 ")?::(?:" H16 ":" H16 "|" IPV4_OF(oct) ")" \
    "|(?:(?:" H16 ":){0,5}" H16 ")?::" H16                            \
    "|(?:(?:" H16 ":){0,6}" H16 ")?::)"

#define UUID_HEX "[0-9A-Fa-f]"
#define UUID UUID_HEX "{8}-" UUID_HEX "{4}-" UUID_HEX "{4}-" UUID_HEX "{4}-" UUID_HEX "{12}"

/* ---- URIs (rfc3986-validator's regexes, piece by piece) ------------------- */

#define PCT "%[0-9A-Fa-f]{2}"
#define USERINFO "(?:(?:[a-zA-Z0-9_.~!$&'()*+,;=:-]|" PCT ")*@)?"
#define URI_HOST                                                                    \
    "(?:\\[(?:" IPV6_OF(OCTET) "|v[0-9A-Fa-f]+\\.[a-zA-Z0-9_.~!$&'()*+,;=:-]+)\\]" \
    "|(?:[a-zA-Z0-9_.~!$&'()*+,;=-]|" PCT ")*)"
#define AUTHORITY USERINFO URI_HOST "(?::[0-9]*)?"
#define PCHAR "(?:[a-zA-Z0-9_.~!$&'()*+,;=:@-]|" PCT ")"
#define QUERY "(?:[a-zA-Z0-9_.~!$&'()*+,;=:@/?-]|" PCT ")*"
#define QUERY_FRAGMENT "(?:\\?" QUERY ")?(?:#" QUERY ")?"
#define PATH_ABEMPTY "(?:/" PCHAR "*)*"
#define PATH_ABSOLUTE "/(?:" PCHAR "+" PATH_ABEMPTY ")?"
#define URI                                                                          \
    "[a-zA-Z][a-zA-Z0-9+.-]*:"                                                       \
    "(?://" AUTHORITY PATH_ABEMPTY "|" PATH_ABSOLUTE "|" PCHAR "+" PATH_ABEMPTY ")?" \
    QUERY_FRAGMENT
#define RELATIVE_REF                                                                       \
    "(?://" AUTHORITY PATH_ABEMPTY "|" PATH_ABSOLUTE                                       \
    "|(?:[a-zA-Z0-9_.~!$&'()*+,;=@-]|" PCT ")+" PATH_ABEMPTY ")?" QUERY_FRAGMENT

/* A format's language: the regex, intersected with `cap` when there is one
 * (a length bound that a regex alone would spell with many more states). */
typedef struct {
    const char *name;
    const char *regex;
    const char *cap;
} format_def_t;

static const format_def_t formats[] = {
    {"date-time", FULL_DATE "T" FULL_TIME, NULL},
    {"date", FULL_DATE, NULL},
    {"time", FULL_TIME, NULL},
    {"duration", DURATION, NULL},
    {"email", EMAIL, NULL},
    {"hostname", HOSTNAME, HOSTNAME_CAP},
    {"ipv4", IPV4_OF(OCTET), NULL},
    {"ipv6", IPV6_OF(OCTET), NULL},
    {"uri", URI, NULL},
    {"uri-reference", "(?:" URI ")|(?:" RELATIVE_REF ")", NULL},
    {"uuid", UUID, NULL},
};

static const format_def_t *find(const char *format) {
    if (!format) return NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(formats[i].name, format) == 0) return &formats[i];
    return NULL;
}

bool sv_json_format_known(const char *format) { return find(format) != NULL; }

bool sv_json_format_exact(const char *format) {
    return format && (strcmp(format, "date") == 0 || strcmp(format, "ipv4") == 0);
}

static void destroy_dfa(void *d) { sv_dfa_destroy(d); }

/* regex ∩ cap, compiled now and embedded as a DFA node that dies with the
 * arena. */
static sv_status capped_ast(sv_arena_t *a, const format_def_t *f, sv_ast_t **out, sv_error_t *err) {
    sv_dfa_t *lang = NULL, *cap = NULL, *both = NULL;
    sv_status st = sv_regex_compile(f->regex, strlen(f->regex), NULL, &lang, err);
    if (!st) st = sv_regex_compile(f->cap, strlen(f->cap), NULL, &cap, err);
    if (!st) st = sv_dfa_product(lang, cap, SV_DFA_AND, NULL, &both, err);
    sv_dfa_destroy(lang);
    sv_dfa_destroy(cap);
    if (st) return st;
    if (!sv_arena_defer(a, destroy_dfa, both)) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    *out = sv_ast_dfa(a, both, false);
    return *out ? SV_OK : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
}

sv_status sv_json_format(sv_arena_t *a, const char *format, sv_ast_t **out, sv_error_t *err) {
    if (!a || !format || !out) return sv_error_set(err, SV_ERR_ARG, -1, "sv_json_format: NULL argument");
    const format_def_t *f = find(format);
    if (!f)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "format \"%.100s\" is not supported (supported: date-time, date, time, duration, "
                            "email, hostname, ipv4, ipv6, uri, uri-reference, uuid)",
                            format);
    sv_status st = f->cap ? capped_ast(a, f, out, err) : sv_regex_parse(f->regex, strlen(f->regex), a, out, err);
    /* The regexes are fixed and tested, so only running out of memory (or
     * time) can fail here; say which format was being built either way. */
    if (st && err) {
        char inner[sizeof err->message];
        memcpy(inner, err->message, sizeof inner);
        sv_error_set(err, st, -1, "format \"%s\": %.400s", f->name, inner);
    }
    return st;
}
