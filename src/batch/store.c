/* store.c — uploaded files in a directory and SQLite (see store.h). */
#define _GNU_SOURCE
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sv_store {
    sqlite3 *db;
    char *dir;
    char *files_dir;
};

static sv_status db_error(sv_store_t *s, sv_error_t *err, const char *what) {
    return sv_error_set(err, SV_ERR_IO, -1, "%s: %s", what, s->db ? sqlite3_errmsg(s->db) : "no database");
}

static int mkdir_p(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static bool id_ok(const char *id) {
    /* Our own ids only: "file-" and hex digits (never a path). */
    if (strncmp(id, "file-", 5)) return false;
    size_t n = strlen(id);
    if (n < 6 || n > 37) return false;
    for (size_t i = 5; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
    return true;
}

/* Removes bytes with no row and files a crash left half-written. */
static void sweep(sv_store_t *s) {
    DIR *d = opendir(s->files_dir);
    if (!d) return;
    struct dirent *e;
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(s->db, "SELECT 1 FROM files WHERE id = ?", -1, &q, NULL);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        bool keep = false;
        if (id_ok(e->d_name) && q) {
            sqlite3_reset(q);
            sqlite3_bind_text(q, 1, e->d_name, -1, SQLITE_STATIC);
            keep = sqlite3_step(q) == SQLITE_ROW;
        }
        if (!keep) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", s->files_dir, e->d_name);
            unlink(p);
        }
    }
    sqlite3_finalize(q);
    closedir(d);
}

sv_status sv_store_open(const char *dir, sv_store_t **out, sv_error_t *err) {
    *out = NULL;
    sv_store_t *s = calloc(1, sizeof *s);
    if (!s) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    size_t n = strlen(dir);
    s->dir = strdup(dir);
    s->files_dir = malloc(n + 8);
    if (!s->dir || !s->files_dir) {
        sv_store_close(s);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    snprintf(s->files_dir, n + 8, "%s/files", dir);
    if (mkdir_p(s->files_dir)) {
        sv_status st = sv_error_set(err, SV_ERR_IO, -1, "cannot create %s: %s", s->files_dir, strerror(errno));
        sv_store_close(s);
        return st;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/sieve.db", dir);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        sv_status st = db_error(s, err, path);
        sv_store_close(s);
        return st;
    }
    sqlite3_busy_timeout(s->db, 5000);
    static const char *const schema =
        "PRAGMA journal_mode = WAL;"
        "PRAGMA synchronous = FULL;"
        "CREATE TABLE IF NOT EXISTS files ("
        "  id TEXT PRIMARY KEY, purpose TEXT NOT NULL, filename TEXT NOT NULL,"
        "  bytes INTEGER NOT NULL, created_at INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS batches ("
        "  id TEXT PRIMARY KEY, status TEXT NOT NULL, obj TEXT NOT NULL, cancel_at INTEGER NOT NULL DEFAULT 0);";
    if (sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
        sv_status st = db_error(s, err, path);
        sv_store_close(s);
        return st;
    }
    sweep(s);
    *out = s;
    return SV_OK;
}

void sv_store_close(sv_store_t *s) {
    if (!s) return;
    if (s->db) sqlite3_close(s->db);
    free(s->dir);
    free(s->files_dir);
    free(s);
}

static void new_id(char id[40]) {
    uint8_t r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
        for (size_t i = 0; i < sizeof r; i++) r[i] = (uint8_t)(t >> (i % 8 * 8)) ^ (uint8_t)(i * 131);
    }
    int k = snprintf(id, 40, "file-");
    for (size_t i = 0; i < sizeof r; i++) k += snprintf(id + k, (size_t)(40 - k), "%02x", r[i]);
}

static void row_to_file(sqlite3_stmt *q, sv_file_t *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->id, sizeof f->id, "%s", (const char *)sqlite3_column_text(q, 0));
    snprintf(f->purpose, sizeof f->purpose, "%s", (const char *)sqlite3_column_text(q, 1));
    snprintf(f->filename, sizeof f->filename, "%s", (const char *)sqlite3_column_text(q, 2));
    f->bytes = (uint64_t)sqlite3_column_int64(q, 3);
    f->created_at = sqlite3_column_int64(q, 4);
}

static sv_status insert_file_row(sv_store_t *s, const sv_file_t *f, sv_error_t *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "INSERT INTO files VALUES (?, ?, ?, ?, ?)", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the file table");
    sqlite3_bind_text(q, 1, f->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, f->purpose, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, f->filename, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, (sqlite3_int64)f->bytes);
    sqlite3_bind_int64(q, 5, f->created_at);
    sv_status st = sqlite3_step(q) == SQLITE_DONE ? SV_OK : db_error(s, err, "the file table");
    sqlite3_finalize(q);
    return st;
}

/* The rowid of id in table (files or batches): listings continue below it. */
static sv_status rowid_of(sv_store_t *s, const char *table, const char *id, sqlite3_int64 *rowid, sv_error_t *err) {
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT rowid FROM %s WHERE id = ?", table);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return db_error(s, err, table);
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *rowid = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    if (rc == SQLITE_ROW) return SV_OK;
    return sv_error_set(err, SV_ERR_NOT_FOUND, -1, "no such %s: %s", strcmp(table, "files") ? "batch" : "file", id);
}

sv_status sv_store_file_put(sv_store_t *s, const char *purpose, const char *filename, const void *data, size_t n,
                            sv_file_t *out, sv_error_t *err) {
    memset(out, 0, sizeof *out);
    new_id(out->id);
    snprintf(out->purpose, sizeof out->purpose, "%s", purpose);
    snprintf(out->filename, sizeof out->filename, "%s", filename);
    out->bytes = n;
    out->created_at = (int64_t)time(NULL);
    char tmp[4112], final[4096];
    snprintf(final, sizeof final, "%s/%s", s->files_dir, out->id);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return sv_error_set(err, SV_ERR_IO, -1, "cannot write the file: %s", strerror(errno));
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        p += k;
        left -= (size_t)k;
    }
    int e = left ? errno : 0;
    if (!e && fsync(fd)) e = errno;
    close(fd);
    if (!e && rename(tmp, final)) e = errno;
    if (!e && fsync_dir(s->files_dir)) e = errno;
    if (e) {
        unlink(tmp);
        unlink(final);
        return sv_error_set(err, SV_ERR_IO, -1, "cannot write the file: %s", strerror(e ? e : EIO));
    }
    sv_status st = insert_file_row(s, out, err);
    if (st) unlink(final);
    return st;
}

sv_status sv_store_file_get(sv_store_t *s, const char *id, sv_file_t *out, sv_error_t *err) {
    if (!id_ok(id)) return sv_error_set(err, SV_ERR_NOT_FOUND, -1, "no such file: %s", id);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT id, purpose, filename, bytes, created_at FROM files WHERE id = ?", -1, &q,
                           NULL) != SQLITE_OK)
        return db_error(s, err, "the file table");
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sv_status st = SV_OK;
    if (rc == SQLITE_ROW) row_to_file(q, out);
    else if (rc == SQLITE_DONE) st = sv_error_set(err, SV_ERR_NOT_FOUND, -1, "no such file: %s", id);
    else st = db_error(s, err, "the file table");
    sqlite3_finalize(q);
    return st;
}

sv_status sv_store_file_path(sv_store_t *s, const char *id, char *buf, size_t cap, sv_error_t *err) {
    sv_file_t f;
    sv_status st = sv_store_file_get(s, id, &f, err);
    if (st) return st;
    snprintf(buf, cap, "%s/%s", s->files_dir, f.id);
    return SV_OK;
}

sv_status sv_store_file_delete(sv_store_t *s, const char *id, sv_error_t *err) {
    sv_file_t f;
    sv_status st = sv_store_file_get(s, id, &f, err);
    if (st) return st;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM files WHERE id = ?", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the file table");
    sqlite3_bind_text(q, 1, f.id, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) st = db_error(s, err, "the file table");
    sqlite3_finalize(q);
    if (!st) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", s->files_dir, f.id);
        unlink(p); /* a crash before this leaves bytes with no row: swept at the next open */
    }
    return st;
}

sv_status sv_store_file_list(sv_store_t *s, const char *after, uint32_t limit, const char *purpose, sv_file_t **out,
                             size_t *n, bool *more, sv_error_t *err) {
    *out = NULL;
    *n = 0;
    *more = false;
    sqlite3_int64 before = INT64_MAX;
    if (after) {
        sv_status st = rowid_of(s, "files", after, &before, err);
        if (st) return st;
    }
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, purpose, filename, bytes, created_at FROM files WHERE rowid < ?1 AND "
                           "(?2 IS NULL OR purpose = ?2) ORDER BY rowid DESC LIMIT ?3",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the file table");
    sqlite3_bind_int64(q, 1, before);
    if (purpose) sqlite3_bind_text(q, 2, purpose, -1, SQLITE_STATIC);
    else sqlite3_bind_null(q, 2);
    sqlite3_bind_int64(q, 3, (sqlite3_int64)limit + 1);
    sv_file_t *v = calloc((size_t)limit + 1, sizeof *v);
    if (!v) {
        sqlite3_finalize(q);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) row_to_file(q, &v[(*n)++]);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        free(v);
        *n = 0;
        return db_error(s, err, "the file table");
    }
    if (*n > limit) {
        *more = true;
        *n = limit;
    }
    *out = v;
    return SV_OK;
}

const char *sv_store_dir(const sv_store_t *s) { return s->dir; }

sv_status sv_store_file_adopt(sv_store_t *s, const char *purpose, const char *filename, const char *src,
                              sv_file_t *out, sv_error_t *err) {
    struct stat sb;
    if (stat(src, &sb)) return sv_error_set(err, SV_ERR_IO, -1, "cannot read %s: %s", src, strerror(errno));
    memset(out, 0, sizeof *out);
    new_id(out->id);
    snprintf(out->purpose, sizeof out->purpose, "%s", purpose);
    snprintf(out->filename, sizeof out->filename, "%s", filename);
    out->bytes = (uint64_t)sb.st_size;
    out->created_at = (int64_t)time(NULL);
    char final[4096];
    snprintf(final, sizeof final, "%s/%s", s->files_dir, out->id);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    int e = fd < 0 || fsync(fd) ? errno : 0;
    if (fd >= 0) close(fd);
    if (!e && rename(src, final)) e = errno;
    if (!e && fsync_dir(s->files_dir)) e = errno;
    if (e) return sv_error_set(err, SV_ERR_IO, -1, "cannot keep %s: %s", src, strerror(e));
    sv_status st = insert_file_row(s, out, err);
    if (st) rename(final, src); /* back where it was, for the next try */
    return st;
}

sv_status sv_store_batch_put(sv_store_t *s, const char *id, const char *status, const char *obj, sv_error_t *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO batches (id, status, obj) VALUES (?1, ?2, ?3) "
                           "ON CONFLICT(id) DO UPDATE SET status = excluded.status, obj = excluded.obj",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, status, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, obj, -1, SQLITE_STATIC);
    sv_status st = sqlite3_step(q) == SQLITE_DONE ? SV_OK : db_error(s, err, "the batch table");
    sqlite3_finalize(q);
    return st;
}

sv_status sv_store_batch_get(sv_store_t *s, const char *id, char **obj, int64_t *cancel_at, sv_error_t *err) {
    *obj = NULL;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT obj, cancel_at FROM batches WHERE id = ?", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sv_status st = SV_OK;
    if (rc == SQLITE_ROW) {
        *obj = strdup((const char *)sqlite3_column_text(q, 0));
        if (cancel_at) *cancel_at = sqlite3_column_int64(q, 1);
        if (!*obj) st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    } else if (rc == SQLITE_DONE) {
        st = sv_error_set(err, SV_ERR_NOT_FOUND, -1, "no such batch: %s", id);
    } else {
        st = db_error(s, err, "the batch table");
    }
    sqlite3_finalize(q);
    return st;
}

sv_status sv_store_batch_cancel(sv_store_t *s, const char *id, int64_t at, sv_error_t *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "UPDATE batches SET cancel_at = ?1 WHERE id = ?2 AND cancel_at = 0", -1, &q,
                           NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    sqlite3_bind_int64(q, 1, at);
    sqlite3_bind_text(q, 2, id, -1, SQLITE_STATIC);
    sv_status st = sqlite3_step(q) == SQLITE_DONE ? SV_OK : db_error(s, err, "the batch table");
    sqlite3_finalize(q);
    return st;
}

sv_status sv_store_batch_list(sv_store_t *s, const char *after, uint32_t limit, char ***objs, int64_t **cancel_at,
                              size_t *n, bool *more, sv_error_t *err) {
    *objs = NULL;
    *cancel_at = NULL;
    *n = 0;
    *more = false;
    sqlite3_int64 before = INT64_MAX;
    if (after) {
        sv_status st = rowid_of(s, "batches", after, &before, err);
        if (st) return st;
    }
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT obj, cancel_at FROM batches WHERE rowid < ?1 ORDER BY rowid DESC LIMIT ?2",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    sqlite3_bind_int64(q, 1, before);
    sqlite3_bind_int64(q, 2, (sqlite3_int64)limit + 1);
    char **v = calloc((size_t)limit + 1, sizeof *v);
    int64_t *c = calloc((size_t)limit + 1, sizeof *c);
    sv_status st = SV_OK;
    if (!v || !c) st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    int rc = SQLITE_DONE;
    while (!st && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        c[*n] = sqlite3_column_int64(q, 1);
        if (!(v[(*n)++] = strdup((const char *)sqlite3_column_text(q, 0))))
            st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    sqlite3_finalize(q);
    if (!st && rc != SQLITE_DONE) st = db_error(s, err, "the batch table");
    if (st) {
        for (size_t i = 0; v && i < *n; i++) free(v[i]);
        free(v);
        free(c);
        *n = 0;
        return st;
    }
    if (*n > limit) {
        *more = true;
        free(v[limit]);
        *n = limit;
    }
    *objs = v;
    *cancel_at = c;
    return SV_OK;
}

sv_status sv_store_batch_next(sv_store_t *s, char id[64], sv_error_t *err) {
    id[0] = 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id FROM batches WHERE status IN ('validating', 'in_progress', 'finalizing') "
                           "ORDER BY rowid LIMIT 1",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) snprintf(id, 64, "%s", (const char *)sqlite3_column_text(q, 0));
    sv_status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? SV_OK : db_error(s, err, "the batch table");
    sqlite3_finalize(q);
    return st;
}

sv_status sv_store_batch_counts(sv_store_t *s, const char *const *names, size_t n, uint64_t *counts,
                                sv_error_t *err) {
    memset(counts, 0, n * sizeof *counts);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT status, COUNT(*) FROM batches GROUP BY status", -1, &q, NULL) != SQLITE_OK)
        return db_error(s, err, "the batch table");
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        for (size_t i = 0; i < n; i++)
            if (!strcmp((const char *)sqlite3_column_text(q, 0), names[i])) counts[i] = (uint64_t)sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SV_OK : db_error(s, err, "the batch table");
}
