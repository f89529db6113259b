/* A history of client-observed operations and a checker for it, shared by
 * the binlog crash tests and the failover suite.
 *
 * Workers (threads or not) record each operation once it is over, with the
 * monotonic times at which the command was sent and its reply arrived: put
 * (its body, which must be unique per put, and the id from INSERTED), delete
 * (DELETED, NOT_FOUND) and reserve (id and body from RESERVED). An outcome is
 * BQH_UNKNOWN when the connection died before the reply. After a run, a
 * snapshot reads every job the server holds (whichever node is primary) and
 * bqh_check compares it with the history:
 *
 *   lost         an acknowledged put, no acknowledged or unknown delete of
 *                its id, and the job is absent
 *   resurrected  a job seen (snapshot or RESERVED) after a DELETED reply for
 *                its id had arrived, or deleted twice
 *   duplicate    one body under two ids
 *   unexpected   a job nobody put (unknown body), or whose put was refused
 *   mismatch     a job whose body is not the one its id was acknowledged with
 *   id reuse     a put whose id is not above every id acknowledged or seen
 *                before it was sent (ids are never reused, even after loss)
 *
 * A job seen in a RESERVED reply or a snapshot counts as acknowledged from
 * then on (the server sends no reply before the records logged ahead of it
 * are durable). Unknown outcomes are allowed either way. */
#ifndef BQ_TEST_HISTORY_H
#define BQ_TEST_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The worker number of entries added by a snapshot. */
#define BQH_VERIFIER (-1)
/* bqh_rules_t.promised_before: every acknowledgement is promised. */
#define BQH_ALL_PROMISED UINT64_MAX
/* Bad ids kept in a report with their reasons. */
#define BQH_REPORT_IDS 16

typedef struct bqh_history bqh_history_t;
typedef struct bqh_snapshot bqh_snapshot_t;

typedef enum bqh_outcome {
    BQH_ACKED,     /* INSERTED (or BURIED) id, DELETED */
    BQH_NOT_FOUND, /* delete: NOT_FOUND */
    BQH_REFUSED,   /* put: any other reply (OUT_OF_MEMORY, DRAINING...): nothing stored */
    BQH_UNKNOWN,   /* the connection died before the reply */
} bqh_outcome_t;

/* What bqh_check may accept. Acknowledgements received at or after
 * promised_before, and before promised_after (0: for ever after), may have
 * been undone (a power loss under -f MS, a second failure while a cluster
 * was degraded): a job lost or resurrected because of them is counted as
 * allowed, and they are treated as unknown by later checks. */
typedef struct bqh_rules {
    uint64_t promised_before; /* monotonic ns, or BQH_ALL_PROMISED */
    uint64_t promised_after;  /* monotonic ns, or 0 */
} bqh_rules_t;

typedef enum bqh_problem {
    BQH_LOST,
    BQH_RESURRECTED,
    BQH_DUPLICATE,
    BQH_UNEXPECTED,
    BQH_MISMATCH,
    BQH_ID_REUSE,
    BQH_PROBLEMS /* count */
} bqh_problem_t;

typedef struct bqh_report {
    size_t problems[BQH_PROBLEMS]; /* failures, by kind */
    size_t allowed_lost, allowed_resurrected;
    size_t hidden; /* jobs the snapshot counted but could not name (in problems too) */
    /* The figures of the history, for the summary line. */
    size_t puts_acked, puts_unknown, puts_refused;
    size_t deletes_acked, deletes_unknown, deletes_not_found, reserves, present;
    /* The first bad ids (at most a quarter of them of one kind), with their
     * problem and a short reason. */
    size_t nbad;
    struct {
        uint64_t id;
        bqh_problem_t kind;
        char why[120];
    } bad[BQH_REPORT_IDS];
} bqh_report_t;

/* Monotonic clock in nanoseconds (the time base of every record). */
uint64_t bqh_now_ns(void);

/* Returns a new, empty history; free with bqh_free. */
bqh_history_t *bqh_new(void);

/* Frees h and everything recorded in it. NULL is a no-op. */
void bqh_free(bqh_history_t *h);

/* Records a put of body[0..len) (copied) sent at sent_ns by worker, whose
 * reply arrived at reply_ns (for BQH_UNKNOWN: when the connection was found
 * dead); id is the id from INSERTED when out is BQH_ACKED. Thread-safe. */
void bqh_put(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
             uint64_t id, const char *body, size_t len);

/* Records a delete of id (out: BQH_ACKED for DELETED, BQH_NOT_FOUND or
 * BQH_UNKNOWN). Thread-safe. */
void bqh_delete(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                bqh_outcome_t out, uint64_t id);

/* Records a RESERVED id reply with body[0..len) (copied). Replies without a
 * job (TIMED_OUT, a dead connection) need no record. Thread-safe. */
void bqh_reserve(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, uint64_t id,
                 const char *body, size_t len);

/* Adds a timestamped note to the history ("round 3: kill -9"), printed with
 * the operations around a bad id. Thread-safe. */
void bqh_mark(bqh_history_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Tells h that n jobs on the server are not its own (filled by the test in
 * another tube, for size): a snapshot does not count them. Thread-safe. */
void bqh_foreign_jobs(bqh_history_t *h, uint64_t n);

/* Reads every job of the server connected on fd into a new snapshot (*out;
 * free with bqh_snapshot_free): reserves every ready job of tube (NULL:
 * "default") with reserve-with-timeout 0, then, if the server's stats count
 * more jobs, peeks every id h knows that was not found that way. Take it
 * while no other client changes the server, and close fd afterwards: that
 * releases the jobs it reserved. 0, or -1 with a message in err (I/O error,
 * unexpected reply or timeout_ms passed). */
int bqh_snapshot_take(bqh_history_t *h, int fd, const char *tube, int timeout_ms,
                      bqh_snapshot_t **out, char *err, size_t errlen);

/* Jobs in the snapshot. */
size_t bqh_snapshot_count(const bqh_snapshot_t *s);

/* Monotonic ns at which the snapshot's first reply arrived: the server was
 * up (a restarted one had replayed its log) by then. */
uint64_t bqh_snapshot_time(const bqh_snapshot_t *s);

/* Frees s. NULL is a no-op. */
void bqh_snapshot_free(bqh_snapshot_t *s);

/* Checks the whole history against snap (borrowed; NULL checks only what
 * the history itself shows: duplicates, mismatches, resurrections seen by
 * workers, id reuse) under rules (NULL: every acknowledgement promised) and
 * fills *rep. Adds the snapshot's jobs to the history as observations and
 * marks undone acknowledgements (rules) as unknown. Not concurrently with
 * recording. Returns the number of failures (0: the history is sound). */
size_t bqh_check(bqh_history_t *h, const bqh_snapshot_t *snap, const bqh_rules_t *rules,
                 bqh_report_t *rep);

/* The name of a problem ("lost", ...). */
const char *bqh_problem_name(bqh_problem_t p);

/* Prints the report's summary and, for each bad id it names, the history of
 * that id and of its bodies (operations and marks, times relative to the
 * history's creation) to f. */
void bqh_report_print(FILE *f, const bqh_history_t *h, const bqh_report_t *rep);

/* Prints the one-line summary of rep (counts) to f. */
void bqh_report_summary(FILE *f, const bqh_report_t *rep);

#endif
