#include "memacct.h"

#include <stdatomic.h>

static _Thread_local sv_memacct_t *cur;
static _Atomic uint64_t next_id = 1;

bool sv_memacct_begin(sv_memacct_t *a, size_t limit) {
    if (cur) return false;
    *a = (sv_memacct_t){.id = atomic_fetch_add(&next_id, 1), .limit = limit};
    cur = a;
    return true;
}

void sv_memacct_end(sv_memacct_t *a) {
    if (cur == a) cur = NULL;
}

bool sv_memacct_charge(size_t n, uint64_t *id) {
    *id = 0;
    if (!cur) return true;
    if (cur->limit && (n > cur->limit || cur->used > cur->limit - n)) {
        cur->refused = true;
        return false;
    }
    cur->used += n;
    if (cur->used > cur->peak) cur->peak = cur->used;
    *id = cur->id;
    return true;
}

void sv_memacct_release(uint64_t id, size_t n) {
    if (!id || !cur || cur->id != id) return;
    cur->used = n < cur->used ? cur->used - n : 0;
}

size_t sv_memacct_room(size_t limit) {
    if (!cur) return limit;
    return cur->used < limit ? limit - cur->used : 0;
}

bool sv_memacct_refused(void) { return cur && cur->refused; }

size_t sv_memacct_peak(void) { return cur ? cur->peak : 0; }
