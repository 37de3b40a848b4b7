/* main.c — `sieve VERB [options]`: dispatch to the verbs. */
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli.h"
#include "verbs.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} verb_t;

static const verb_t verbs[] = {
    {"compile", sv_cmd_compile, "compile a constraint and print its statistics (or its error)"},
    {"match", sv_cmd_match, "check strings (JSON string literals on stdin) against a constraint"},
    {"sample", sv_cmd_sample, "print random strings that a constraint accepts"},
    {"maskbench", sv_cmd_maskbench, "run the MaskBench method (token masks) on MaskBench files"},
    {"generate", sv_cmd_generate, "generate a completion with a model on the CPU (optionally constrained)"},
    {"serve", sv_cmd_serve, "serve the OpenAI API (chat, completions, structured outputs, tools) over HTTP"},
    {"batch", sv_cmd_batch, "run a file of OpenAI batch requests (resumable, each answer written durably)"},
};

static void usage(FILE *f) {
    fprintf(f,
            "sieve — structured generation: constraints compiled to byte-level DFAs\n"
            "\n"
            "Usage: sieve VERB [options]   (sieve VERB --help for each verb)\n"
            "\n"
            "Verbs:\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) fprintf(f, "  %-9s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f,
            "\n"
            "Exit codes: 0 success, 1 runtime failure, 2 constraint does not compile,\n"
            "64 usage error.\n");
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
    /* Big tables (automata, subset construction, masks) get pages of their
     * own, given back when freed: with glibc's default the mmap threshold
     * rises after frees, and a compile's freed tables stay resident as heap,
     * which put peak RSS up to 18% past the compile's memory budget
     * (tests/reliability/compile_bounds.py; BENCHMARKS.md). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
    if (argc < 2) {
        usage(stderr);
        return SV_EXIT_USAGE;
    }
    const char *v = argv[1];
    if (strcmp(v, "--help") == 0 || strcmp(v, "-h") == 0 || strcmp(v, "help") == 0) {
        usage(stdout);
        return SV_EXIT_OK;
    }
    if (strcmp(v, "--version") == 0) {
        printf("sieve 0.1.0\n");
        return SV_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(v, verbs[i].name) == 0) return verbs[i].run(argc - 1, argv + 1);
    return sv_cli_usage_error(NULL, "unknown verb '%s' (verbs: compile, match, sample, maskbench, generate, serve, batch)", v);
}
