/* A history of client-observed operations and a checker for it, shared by
 * the binlog crash tests and the cluster fault suites (tests/support/
 * workload.h). The rules it checks, what each problem kind means, what is
 * allowed, what a fault is and the job-state model are described in ONE
 * place: docs/testing.md, "The history checker". In short:
 *
 * Workers record each operation once it is over, with the monotonic times
 * at which the command was sent and its reply arrived (or the dead
 * connection was noticed): puts (body unique per put; tube, priority and
 * delay with bqh_put_job), deletes, reserves, and the commands that change
 * a job's state (bury, release, kick-job, touch, kick, pause-tube). Tests
 * record every fault they inject with bqh_fault (in effect until the next
 * bqh_settled). After a run, a snapshot reads every job the server holds
 * with its stats-job, and bqh_check compares it with the history. An
 * UNKNOWN outcome excuses something only when the operation was in flight
 * at a fault; a REFUSED one (any reply but success or NOT_FOUND) is a
 * known failure and excuses nothing. Problems: lost, resurrected,
 * duplicate, unexpected, mismatch, id reuse, unexplained (an outcome left
 * unknown with no fault in effect), reappeared (a job its own worker was
 * told NOT_FOUND about, seen again), state (tube, priority, state or delay
 * that no history allows; a delayed job seen ready once its deadline may
 * have passed, BQH_DELAY_MARGIN_NS early at most, is the one leniency). */
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
/* A delayed job may show as ready this long before its earliest deadline
 * (the server's clock and ours, the seconds it rounds delays to). */
#define BQH_DELAY_MARGIN_NS 1000000000ull
/* Distinct tubes one history can name. */
#define BQH_MAX_TUBES 250
/* Longest tube name the history keeps. */
#define BQH_TUBE_LEN 64

typedef struct bqh_history bqh_history_t;
typedef struct bqh_snapshot bqh_snapshot_t;

typedef enum bqh_outcome {
    BQH_ACKED,     /* INSERTED (or BURIED) id, DELETED, RELEASED, BURIED, KICKED, TOUCHED, PAUSED */
    BQH_NOT_FOUND, /* NOT_FOUND */
    BQH_REFUSED,   /* any other reply (OUT_OF_MEMORY, DRAINING...): nothing done, excuses nothing */
    BQH_UNKNOWN,   /* the connection died before the reply */
} bqh_outcome_t;

/* A job's state as stats-job names it (reserved: not durable, checked as
 * ready). */
/* True for a refusal a fault explains, nothing done: DRAINING or
 * OUT_OF_MEMORY (a draining, fenced or refusing primary) and
 * INTERNAL_ERROR (a standby that held the command past its hold bound with
 * no primary: never sent to one). line: the whole reply line. */
bool bqh_known_refusal(const char *line);

typedef enum bqh_state { BQH_READY, BQH_DELAYED, BQH_BURIED, BQH_RESERVED } bqh_state_t;

/* A job's attributes: what a put gives it (tube, pri, delay), or what a
 * snapshot read with stats-job (all four). */
typedef struct bqh_job {
    const char *tube; /* NULL in a put: not recorded, the job's state goes unchecked */
    uint32_t pri;
    uint32_t delay; /* seconds */
    bqh_state_t state;
} bqh_job_t;

/* The commands on one job besides put, reserve and delete. */
typedef enum bqh_cmd {
    BQH_BURY,     /* bury <id> <pri>: of a job the worker reserved */
    BQH_RELEASE,  /* release <id> <pri> <delay>: of a job the worker reserved */
    BQH_KICK_JOB, /* kick-job <id>: buried or delayed -> ready (NOT_FOUND otherwise) */
    BQH_TOUCH,    /* touch <id>: no durable change */
} bqh_cmd_t;

/* What bqh_check may accept. Acknowledgements received at or after
 * promised_before, and before promised_after (0: for ever after), may have
 * been undone (a power loss under -f MS, a second failure while a cluster
 * was degraded): a job lost or resurrected because of them, or a NOT_FOUND
 * in the window followed by the job, is counted as allowed, and they are
 * treated as unknown by later checks. */
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
    BQH_UNEXPLAINED, /* an outcome unknown while no fault was in effect */
    BQH_REAPPEARED,  /* NOT_FOUND to its own worker, then seen again */
    BQH_STATE,       /* tube, pri, state or delay that no history allows */
    BQH_PROBLEMS     /* count */
} bqh_problem_t;

typedef struct bqh_report {
    size_t problems[BQH_PROBLEMS]; /* failures, by kind */
    size_t allowed_lost, allowed_resurrected, allowed_not_found;
    size_t hidden; /* jobs the snapshot counted but could not name (in problems too) */
    /* The figures of the history, for the summary line. */
    size_t puts_acked, puts_unknown, puts_refused;
    size_t deletes_acked, deletes_unknown, deletes_not_found, deletes_refused, reserves;
    size_t commands;        /* bury, release, kick-job, touch, kick, pause-tube */
    size_t faults;          /* recorded with bqh_fault */
    size_t unknown_excused; /* unknown outcomes in flight at a fault */
    size_t present;
    size_t states_checked, states_lenient; /* snapshot jobs whose state was compared; of them
                                              delayed ones seen ready past their deadline */
    /* The first bad ids (at most a quarter of them of one kind), with their
     * problem and a short reason. */
    size_t nbad;
    struct {
        uint64_t id;
        bqh_problem_t kind;
        char why[160];
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
 * dead); id is the id from INSERTED when out is BQH_ACKED. Its tube,
 * priority and delay are not recorded (see bqh_put_job). Thread-safe. */
void bqh_put(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
             uint64_t id, const char *body, size_t len);

/* bqh_put, with the job's tube (copied; BQH_MAX_TUBES distinct ones at
 * most, more abort), priority and delay from job (its state is ignored):
 * the checker then checks the job's state. Thread-safe. */
void bqh_put_job(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                 bqh_outcome_t out, uint64_t id, const char *body, size_t len,
                 const bqh_job_t *job);

/* Records a delete of id (out: BQH_ACKED for DELETED, BQH_NOT_FOUND,
 * BQH_REFUSED for any other reply, BQH_UNKNOWN). Thread-safe. */
void bqh_delete(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                bqh_outcome_t out, uint64_t id);

/* Records a RESERVED id reply with body[0..len) (copied). Replies without a
 * job (TIMED_OUT, a dead connection) need no record. Thread-safe. */
void bqh_reserve(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, uint64_t id,
                 const char *body, size_t len);

/* Records cmd on job id: pri for bury and release, delay (seconds) for
 * release, both ignored otherwise; out as for bqh_delete (BQH_ACKED:
 * BURIED, RELEASED, KICKED, TOUCHED). Thread-safe. */
void bqh_job_cmd(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                 bqh_outcome_t out, bqh_cmd_t cmd, uint64_t id, uint32_t pri, uint32_t delay);

/* Records `kick bound` on tube (copied), answered KICKED kicked when out is
 * BQH_ACKED. Thread-safe. */
void bqh_kick(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
              const char *tube, uint32_t bound, uint64_t kicked);

/* Records `pause-tube tube secs` (no durable change; kept for the
 * printed history). Thread-safe. */
void bqh_pause(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
               const char *tube, uint32_t secs);

/* Adds a timestamped note to the history ("round 3: traffic"), printed with
 * the operations around a bad id. Not a fault. Thread-safe. */
void bqh_mark(bqh_history_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a fault the test injects from now on (kill -9, SIGSTOP, a power
 * loss, links cut, a restart in a new role...): a mark that is also a
 * fault, in effect until the next bqh_settled (or for ever). Call it before
 * the fault takes effect. Operations with an unknown outcome sent before
 * the fault ended and found dead after it began were in flight at it.
 * Thread-safe. */
void bqh_fault(bqh_history_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ends every fault in effect: from now on no connection may die for them
 * (the killed process is reaped, the cluster is whole again). A mark.
 * Thread-safe. */
void bqh_settled(bqh_history_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Tells h that n jobs on the server are not its own (filled by the test in
 * another tube, for size): a snapshot does not count them. Thread-safe. */
void bqh_foreign_jobs(bqh_history_t *h, uint64_t n);

/* Reads every job of the server connected on fd into a new snapshot (*out;
 * free with bqh_snapshot_free): reserves every ready job of tube (NULL:
 * "default") and of every tube named "<tube>-..." with reserve-with-timeout
 * 0, then, if the server's stats count more jobs, peeks every id h knows
 * that was not found that way, then reads each job's stats-job. Take it
 * while no other client changes the server, and close fd afterwards: that
 * releases the jobs it reserved (recorded as ready). 0, or -1 with a
 * message in err (I/O error, unexpected reply or timeout_ms passed). */
int bqh_snapshot_take(bqh_history_t *h, int fd, const char *tube, int timeout_ms,
                      bqh_snapshot_t **out, char *err, size_t errlen);

/* Returns a new, empty snapshot taken at at_ns, to fill by hand with
 * bqh_snapshot_add (tests of the checker); NULL when out of memory. */
bqh_snapshot_t *bqh_snapshot_new(uint64_t at_ns);

/* Adds job id with body[0..len) (copied) and, unless job is NULL, its
 * tube (copied), pri, delay and state to s, read at at_ns. 0, or -1 when
 * out of memory. */
int bqh_snapshot_add(bqh_snapshot_t *s, uint64_t at_ns, uint64_t id, const char *body, size_t len,
                     const bqh_job_t *job);

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
