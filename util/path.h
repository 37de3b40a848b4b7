/* path.h — what sieve asks of a path. */
#ifndef SV_UTIL_PATH_H
#define SV_UTIL_PATH_H

#include <stdbool.h>
#include <sys/stat.h>

/* Whether path names a directory (a Hugging Face model folder rather than
 * a GGUF file, for the model and tokenizer loaders). */
static inline bool sv_path_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Whether path names something that exists. */
static inline bool sv_path_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

#endif
