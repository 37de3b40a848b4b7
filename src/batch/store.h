/* store.h — uploaded files, durable: the OpenAI Files API's storage.
 *
 * A store is a directory (`sieve serve --data-dir`, default ./sieve-data):
 *
 *     DIR/sieve.db        SQLite (WAL, synchronous FULL): one row a file
 *     DIR/files/FILE_ID   the bytes
 *
 * A file is written to DIR/files/FILE_ID.tmp, fsync'ed, renamed and its
 * directory fsync'ed before its row is inserted, so that after a crash a row
 * always has its bytes (a .tmp left by a crash is removed at the next open;
 * bytes without a row are removed too). Deleting removes the row first,
 * then the bytes.
 *
 * Ids are "file-" and 24 random hex digits. Not thread-safe: one thread
 * (the server's HTTP thread) uses a store. */
#ifndef SV_BATCH_STORE_H
#define SV_BATCH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct sv_store sv_store_t;

typedef struct sv_file {
    char id[40];
    char purpose[24];      /* batch, batch_output, user_data */
    char filename[256];
    uint64_t bytes;
    int64_t created_at;    /* Unix seconds */
} sv_file_t;

/* Opens (creating) the store at dir. SV_ERR_IO with the reason when the
 * directory or the database cannot be made or opened. */
sv_status sv_store_open(const char *dir, sv_store_t **out, sv_error_t *err);
void sv_store_close(sv_store_t *s);

/* A new file holding data[0..n). SV_ERR_IO (disk full, unwritable) leaves
 * nothing behind. */
sv_status sv_store_file_put(sv_store_t *s, const char *purpose, const char *filename, const void *data, size_t n,
                            sv_file_t *out, sv_error_t *err);
/* SV_ERR_NOT_FOUND when there is no such file. */
sv_status sv_store_file_get(sv_store_t *s, const char *id, sv_file_t *out, sv_error_t *err);
/* The path of a file's bytes (for reading), in buf. */
sv_status sv_store_file_path(sv_store_t *s, const char *id, char *buf, size_t cap, sv_error_t *err);
sv_status sv_store_file_delete(sv_store_t *s, const char *id, sv_error_t *err);
/* Files newest first: after the file `after` (NULL: from the newest), at
 * most limit, only of purpose (NULL: any). *out: caller frees; *more says
 * whether more follow. */
sv_status sv_store_file_list(sv_store_t *s, const char *after, uint32_t limit, const char *purpose, sv_file_t **out,
                             size_t *n, bool *more, sv_error_t *err);

/* The path of the store's directory. */
const char *sv_store_dir(const sv_store_t *s);
/* Moves the file at src (on the store's file system) into the store as a
 * new file; its bytes and row as sv_store_file_put. */
sv_status sv_store_file_adopt(sv_store_t *s, const char *purpose, const char *filename, const char *src,
                              sv_file_t *out, sv_error_t *err);

/* ---- batches (the server's Batch API: src/server/batches.c) ----------------
 * A batch is its OpenAI batch object (JSON text), written by the batch
 * worker only, plus the time a cancel was asked (0: none), written by the
 * HTTP thread only, so that neither overwrites the other. */
sv_status sv_store_batch_put(sv_store_t *s, const char *id, const char *status, const char *obj, sv_error_t *err);
/* *obj: caller frees. SV_ERR_NOT_FOUND when there is no such batch. */
sv_status sv_store_batch_get(sv_store_t *s, const char *id, char **obj, int64_t *cancel_at, sv_error_t *err);
/* Records a cancel request (the first one's time is kept). */
sv_status sv_store_batch_cancel(sv_store_t *s, const char *id, int64_t at, sv_error_t *err);
/* Batches newest first, after `after` (NULL: from the newest), at most
 * limit: objs[i] and cancel_at[i] (both caller frees, each obj too). */
sv_status sv_store_batch_list(sv_store_t *s, const char *after, uint32_t limit, char ***objs, int64_t **cancel_at,
                              size_t *n, bool *more, sv_error_t *err);
/* The oldest batch still to work on (validating, in_progress, finalizing),
 * or id[0] == 0. */
sv_status sv_store_batch_next(sv_store_t *s, char id[64], sv_error_t *err);
/* Batches by status: counts[i] for names[i]. */
sv_status sv_store_batch_counts(sv_store_t *s, const char *const *names, size_t n, uint64_t *counts,
                                sv_error_t *err);

#endif
