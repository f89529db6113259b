/* Internals shared by the history recorder (history.c), its snapshot client
 * (history_snapshot.c) and its checker (history_check.c). Not for tests. */
#ifndef BQ_TEST_HISTORY_INTERNAL_H
#define BQ_TEST_HISTORY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/support/history.h"


typedef enum { OP_PUT, OP_DELETE, OP_RESERVE, OP_SEEN, OP_MARK } op_kind_t;

typedef struct op {
    uint64_t sent, reply; /* monotonic ns */
    uint64_t id;
    char *body; /* put, reserve, seen: the job body; mark: the note */
    size_t len;
    int worker;
    uint8_t kind, out;
    bool voided;    /* an acknowledgement undone under the rules */
    uint32_t check; /* seen: the check that added it (from 1) */
} op_t;

struct bqh_history {
    pthread_mutex_t lock;
    op_t *ops;
    size_t n, cap;
    uint64_t t0;
    uint32_t checks;
    uint64_t foreign; /* jobs on the server that are not the history's */
};

typedef struct snap_job {
    uint64_t id, at;
    char *body;
    size_t len;
} snap_job_t;

struct bqh_snapshot {
    snap_job_t *jobs;
    size_t n, cap;
    uint64_t first; /* first reply */
    size_t hidden;  /* counted by stats, not found */
};

/* A sort key (an id or a time) and the index of its operation. */
typedef struct ref {
    uint64_t k; /* id, or time */
    size_t op;
} ref_t;

/* A malloc'd copy of p[0..len) with a NUL after it; aborts when out of memory. */
char *bqh__copy_bytes(const char *p, size_t len);
/* Appends o to h; the caller holds h->lock. */
void bqh__append_locked(bqh_history_t *h, const op_t *o);
/* Orders op x's body against body[0..len). */
int bqh__cmp_body_len(const op_t *x, const char *body, size_t len);
/* qsort order of uint64_t. */
int bqh__cmp_u64(const void *a, const void *b);
/* qsort order of ref_t: by key, then by operation. */
int bqh__cmp_ref(const void *a, const void *b);
/* Seconds from the start of h to t, for reports. */
double bqh__rel(const bqh_history_t *h, uint64_t t);

#endif
