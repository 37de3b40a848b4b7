/* generate.h — what the two halves of `sieve generate` share: the sequential
 * loop (cmd_generate.c) and the engine-driven batch mode
 * (cmd_generate_batch.c, `--batch FILE.jsonl`). */
#ifndef SV_CLI_GENERATE_H
#define SV_CLI_GENERATE_H

#include <stdint.h>

#include "../engine/chat.h"
#include "../engine/tokens.h"
#include "../util/error.h"

/* The model's chat template: GGUF tokenizer.chat_template, or
 * tokenizer_config.json's chat_template in a Hugging Face directory. */
sv_status sv_generate_load_template(const char *model, sv_chat_template_t *t, sv_error_t *err);
/* The model's tokenizer (the GGUF's own, or the directory's tokenizer.json
 * and tokenizer_config.json), with masks n_vocab bits wide. Caller frees
 * *out with sv_tokens_destroy. */
sv_status sv_generate_load_tokens(const char *model, int32_t n_vocab, sv_tokens_t **out, sv_error_t *err);
/* `sieve generate --batch ...`: argv as the verb gets it. */
int sv_cmd_generate_batch(int argc, char **argv);

#endif
