/* test.h — a minimal check harness for the C unit tests.
 * CHECK records a failure (with file, line and a message) and goes on, so
 * one run reports every broken case; test_summary prints the closing
 * "N passed, N failed" line that ctest logs show. */
#ifndef SV_TEST_H
#define SV_TEST_H

#include <stdio.h>

static int test_pass, test_fail;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) {                                                       \
            test_pass++;                                                  \
        } else {                                                          \
            test_fail++;                                                  \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static inline int test_summary(const char *what) {
    printf("%s\n%d passed, %d failed\n", what, test_pass, test_fail);
    return test_fail ? 1 : 0;
}

#endif
