/* cmd_batch.h — `sieve batch` (src/cli/cmd_batch.c), run by cmd_serve.c once
 * it has parsed the serve options and built the engine. */
#ifndef SV_CLI_CMD_BATCH_H
#define SV_CLI_CMD_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "src/server/server.h"
#include "cli.h"

typedef struct sv_batch_cli {
    const char *input;       /* -i; "-": standard input */
    const char *output;      /* -o */
    const char *errors;      /* --errors: lines with an error status go there; NULL: to the output */
    const char *errors_json; /* --input-errors: the bad input lines as a JSON array */
    bool resume;
    bool quiet;
    bool name_given;         /* --served-model-name was given */
    uint32_t concurrency;    /* requests in flight */
} sv_batch_cli_t;

/* Runs the batch on the engine deps holds (served as sc says); returns the
 * exit code. *loop_taken says whether the server took deps->loop (and so
 * stopped it); otherwise the caller stops it. */
int sv_batch_main(const sv_batch_cli_t *o, sv_server_config_t *sc, sv_server_deps_t *deps, bool *loop_taken);

#endif
