/* Internals shared by the history recorder (history.c), its snapshot client
 * (history_snapshot.c) and its checker (history_check.c). Not for tests. */
#ifndef BQ_TEST_HISTORY_INTERNAL_H
#define BQ_TEST_HISTORY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/support/history.h"

typedef enum {
    OP_PUT,
    OP_DELETE,
    OP_RESERVE,
    OP_SEEN,
    OP_CMD,   /* bqh_cmd_t in cmd */
    OP_KICK,  /* kick on tube: bound in pri, KICKED count in arg */
    OP_PAUSE, /* pause-tube on tube: seconds in delay */
    OP_MARK,  /* the marks, last: a note, */
    OP_FAULT, /* a fault (in effect until the next OP_SETTLED), */
    OP_SETTLED
} op_kind_t;

typedef struct op {
    uint64_t sent, reply; /* monotonic ns */
    uint64_t id;
    uint64_t arg; /* kick: the KICKED count */
    char *body;   /* put, reserve, seen: the job body; marks: the note */
    size_t len;
    int worker;
    uint32_t pri, delay; /* put, bury, release, seen; kick: the bound */
    uint8_t kind, out;
    uint8_t cmd;    /* OP_CMD: a bqh_cmd_t */
    uint8_t tube;   /* put, seen, kick, pause: index in the history's tubes + 1; 0: none */
    uint8_t state;  /* seen: a bqh_state_t */
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
    char tubes[BQH_MAX_TUBES][BQH_TUBE_LEN];
    size_t ntubes;
};

typedef struct snap_job {
    uint64_t id, at;
    char *body;
    size_t len;
    bool has_job; /* tube, pri, delay and state read */
    bool by_gap;  /* found by peeking an id nobody was told (an unknown put's) */
    char tube[BQH_TUBE_LEN];
    uint32_t pri, delay;
    uint8_t state;
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

/* A fault in effect from begin to end (UINT64_MAX: never settled). */
typedef struct span {
    uint64_t begin, end;
} span_t;

/* One bqh_check: the history, its sorted indexes and the report. */
typedef struct check {
    bqh_history_t *h;
    const bqh_snapshot_t *snap;
    uint64_t promised, promised_again; /* the window of bqh_rules_t */
    uint32_t number;                   /* of this check */
    bqh_report_t *rep;
    size_t *by_body, nputs; /* put ops, sorted by body */
    ref_t *by_id;           /* puts by effective id */
    size_t nids;
    ref_t *dels; /* deletes by id, then in recording order */
    size_t ndels;
    ref_t *seen; /* reserves and snapshot jobs, by reply time */
    size_t nseen;
    ref_t *sights;               /* reserves and snapshot jobs, by id then reply time */
    uint64_t *eff_id, *acked_at; /* per op: a put's id and when it was first promised */
    span_t *faults;
    size_t nfaults;
    ref_t *flags; /* (id, problem) already counted */
    size_t nflags, flagcap;
} check_t;

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
/* True for the marks (notes, faults, settled). */
bool bqh__is_mark(const op_t *o);
/* The index + 1 of tube in h's tubes, added if new; the caller holds
 * h->lock. 0 for NULL; aborts past BQH_MAX_TUBES. */
uint8_t bqh__tube_locked(bqh_history_t *h, const char *tube);
/* Adds job (borrowed) to s, read at at_ns; takes body. 0 or -1. */
int bqh__snap_add(bqh_snapshot_t *s, uint64_t at_ns, uint64_t id, char *body, size_t len,
                  const bqh_job_t *job);
/* Counts problem kind for id (once per check unless id is 0) with a
 * reason; the caller holds h->lock. */
void bqh__flag(check_t *c, bqh_problem_t kind, uint64_t id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The put whose effective id is id, or SIZE_MAX. */
size_t bqh__put_by_id(const check_t *c, uint64_t id);
/* True when an acknowledgement received at t may have been undone. */
bool bqh__unpromised(const check_t *c, uint64_t t);
/* True when op o (outcome unknown) was in flight at a fault. */
bool bqh__in_flight(const check_t *c, const op_t *o);
/* Checks the state (tube, pri, delay, ready/delayed/buried) of every job
 * this check's snapshot shows against what the history allows
 * (history_model.c). */
void bqh__check_states(check_t *c);
/* Seconds from the start of h to t, for reports. */
double bqh__rel(const bqh_history_t *h, uint64_t t);

#endif
