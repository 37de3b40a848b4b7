/* generate.h — what the two halves of `sieve generate` share: the sequential
 * loop (cmd_generate.c) and the engine-driven batch mode
 * (cmd_generate_batch.c, `--batch FILE.jsonl`). */
#ifndef SV_CLI_GENERATE_H
#define SV_CLI_GENERATE_H

#include <stdint.h>

#include "util/error.h"

/* `sieve generate --batch ...`: argv as the verb gets it. */
int sv_cmd_generate_batch(int argc, char **argv);

#endif
