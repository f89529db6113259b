/* Data structures shared by the engine's files. Not part of the public API.
 *
 * Every job sits in exactly one heap at a time, which is why one heap_index
 * suffices: its tube's ready heap (pri, id), delay heap (deadline, id) or
 * buried heap (bury sequence = FIFO), or its reserver's reservation heap
 * (deadline, id).
 *
 * Reserve must not scan tubes: each client keeps a heap of its watched tubes
 * that are unpaused and hold ready jobs, ordered by each tube's best job, so
 * the best job across all watched tubes is the top of that heap. A tube keeps
 * the list of its watch links so that a change of its best job re-sifts only
 * the heaps of its own watchers.
 *
 * Allocation happens only where a reply can carry the failure: a tube's
 * ready heap always has room for every job of the tube, a client's ready-tube
 * heap for every watched tube, and the timer heaps for every tube and client,
 * so timers, TTR expiry and closing a connection never need memory (closing
 * frees the reservation heap it sorts in place). */
#ifndef BQ_ENGINE_INTERNAL_H
#define BQ_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/engine.h"
#include "protocol/heap.h"

/* A uint32_t position outside any heap or set (BQ_HEAP_NOPOS truncated). */
#define BQ_NOPOS UINT32_MAX

typedef struct bq_tube bq_tube_t;
typedef struct bq_watch bq_watch_t;

typedef enum bq_job_state {
    BQ_JOB_NEW = 0, /* allocated by put, body not complete yet */
    BQ_JOB_READY,
    BQ_JOB_RESERVED,
    BQ_JOB_BURIED,
    BQ_JOB_DELAYED,
} bq_job_state_t;

struct bq_job {
    uint64_t id;
    int64_t created_wall; /* ns since the epoch */
    int64_t key;          /* delayed/reserved: deadline (mono ns); buried: bury sequence */
    bq_tube_t *tube;
    uint32_t pri;
    uint32_t delay;     /* seconds, as last put or released */
    uint32_t ttr;       /* seconds, >= 1 */
    uint32_t body_size; /* bytes + 2: the body includes its CRLF */
    uint32_t heap_index;
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t state : 3;   /* bq_job_state_t */
    uint32_t file : 29;   /* binlog segment of its latest full record, 0 if none */
    uint32_t reserve_seq; /* reserved: order among the reserver's jobs (wraps) */
    char body[];
};

struct bq_tube {
    bq_tube_t *hash_next; /* name table chain */
    size_t list_pos;      /* position in the engine's tube list */
    bq_heap_t ready;      /* (pri, id); capacity >= number of jobs of the tube */
    bq_heap_t delay;      /* (deadline, id) */
    bq_heap_t buried;     /* bury sequence: FIFO */
    uint64_t reserved_ct, urgent_ct;
    uint64_t total_jobs_ct, delete_ct, pause_ct;
    uint32_t using_ct;
    bq_watch_t **watchers; /* every watch link of this tube */
    size_t nwatchers, capwatchers;
    bq_watch_t **waiting; /* waiting watchers, beanstalkd multiset order */
    size_t nwaiting, capwaiting;
    size_t wait_last;         /* the multiset's take cursor */
    int64_t pause_ns;         /* length of the current pause; 0 when not paused */
    int64_t unpause_at;       /* mono ns */
    size_t delay_timer_pos;   /* in e->delay_timers while it has delayed jobs */
    size_t pause_timer_pos;   /* in e->pause_timers while paused */
    bq_tube_t *unpaused_next; /* bq_engine_tick: tubes whose pause just ended */
    size_t name_len;
    char name[BQ_NAME_MAX + 1];
};

/* The link between a client and a tube it watches. */
struct bq_watch {
    bq_client_t *client;
    bq_tube_t *tube;
    uint32_t client_pos; /* in client->watch */
    uint32_t tube_pos;   /* in tube->watchers */
    uint32_t wait_pos;   /* in tube->waiting, or BQ_NOPOS */
    uint32_t ready_pos;  /* in client->ready, or BQ_NOPOS */
};

struct bq_client {
    void *conn;
    bq_tube_t *use;
    bq_watch_t **watch; /* watched tubes, beanstalkd multiset order */
    size_t nwatch, capwatch;
    bq_heap_t ready;       /* watch links of unpaused tubes with ready jobs, by best job */
    size_t ready_tubes;    /* watched tubes with ready jobs, paused or not */
    bq_heap_t reserved;    /* reserved jobs by (deadline, id) */
    int64_t wait_deadline; /* mono ns when waiting with a timeout, else BQ_NEVER */
    int64_t timer_key;
    size_t timer_pos; /* in the engine's client timer heap, or BQ_HEAP_NOPOS */
    bool producer, worker, waiting, halfclosed;
};

/* A pause replayed before its tube exists (a segment's checkpoint comes
 * before the jobs that compaction moved into it): applied when the tube
 * appears, dropped once it would have ended. */
typedef struct bq_pending_pause {
    int64_t pause_ns;
    int64_t unpause_at; /* mono ns */
    size_t name_len;
    char name[BQ_NAME_MAX + 1];
} bq_pending_pause_t;

typedef struct bq_jobtab {
    bq_job_t **slots; /* open addressing, linear probing, power-of-two size */
    size_t cap, len;
} bq_jobtab_t;

struct bq_engine {
    bq_engine_hooks_t hooks;
    uint32_t max_job_size;
    bool draining;
    bool writes_paused; /* sessions hold writing commands (bq_engine_set_writes_paused) */
    bool log_refused;   /* the last log_room answer was BQ_ROOM_REFUSED */
    bool logging;       /* the log hooks are set */
    uint64_t next_id;
    uint64_t id_limit; /* logging: ids below this are covered by a logged reservation */
    uint64_t id_used;  /* ids below this may have been shown: past every id logged or
                          applied in a full record, restated in reservations */
    bool ids_durable;  /* logging: no id is shown before its full record is durable */
    bool ids_settled;  /* apply: the last reservation applied lets ids go on after
                          id_used (a clean stop, or a writer with ids_durable) */
    uint64_t live_log_bytes;
    uint8_t *logbuf; /* scratch for packing records */
    size_t logcap;
    bq_pending_pause_t *pending_pauses; /* apply: pauses of tubes not there yet */
    size_t npending_pauses;
    uint64_t bury_seq;
    bq_jobtab_t jobs;
    bq_tube_t **tube_hash; /* chained by name */
    size_t tube_hash_cap;
    bq_tube_t **tubes; /* list order of list-tubes */
    size_t ntubes, captubes;
    bq_tube_t *default_tube;
    bq_heap_t delay_timers;  /* tubes with delayed jobs, by their soonest (deadline, id) */
    bq_heap_t pause_timers;  /* paused tubes, by the end of their pause */
    bq_heap_t client_timers; /* clients with a timer, by timer_key */
    uint32_t reserve_seq;
    size_t nclients;
    /* stats */
    uint64_t op_ct[BQ_OP_COUNT];
    uint64_t ready_ct, urgent_ct, reserved_ct, delayed_ct, buried_ct;
    uint64_t timeout_ct, total_jobs_ct;
    uint64_t total_conns, producers, workers, waiting_ct;
};

/* a + b and a - b, clamped to the int64_t range: times from records and
 * clocks are untrusted, and converting between clocks must not overflow. */
static inline int64_t bq__add_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
static inline int64_t bq__sub_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}
/* Converts a time on one clock to another: to_now + (t - from_now). */
static inline int64_t bq__clock_convert(int64_t t, int64_t from_now, int64_t to_now)
{
    return bq__add_sat(to_now, bq__sub_sat(t, from_now));
}

/* ---- jobtab.c: jobs by id ---- */

/* Finds the live job with this id, or NULL. */
bq_job_t *bq__jobtab_find(const bq_jobtab_t *t, uint64_t id);
/* Ensures room for one more job; 0, or -1 when out of memory. */
int bq__jobtab_reserve(bq_jobtab_t *t);
/* Inserts j (room must have been reserved). */
void bq__jobtab_insert(bq_jobtab_t *t, bq_job_t *j);
/* Removes j, shrinking the table when it gets sparse. */
void bq__jobtab_remove(bq_jobtab_t *t, bq_job_t *j);
/* Frees the table (not the jobs). */
void bq__jobtab_free(bq_jobtab_t *t);

/* ---- tube.c: tube registry, watch links, waiting sets ---- */

/* The tube named name[0..len), or NULL. */
bq_tube_t *bq__tube_find(const bq_engine_t *e, const char *name, size_t len);
/* Finds or creates the tube; NULL when out of memory. */
bq_tube_t *bq__tube_get(bq_engine_t *e, const char *name, size_t len);
/* Frees t if nothing refers to it any more (jobs, users, watchers). */
void bq__tube_release(bq_engine_t *e, bq_tube_t *t);
/* Frees t unconditionally (engine teardown). */
void bq__tube_destroy(bq_engine_t *e, bq_tube_t *t);
/* Number of jobs of t in any state. */
uint64_t bq__tube_jobs(const bq_tube_t *t);
/* True while t is paused at now. */
bool bq__tube_paused(const bq_tube_t *t);
/* Links client c to tube t; 0, or -1 when out of memory. */
int bq__watch_add(bq_engine_t *e, bq_client_t *c, bq_tube_t *t);
/* Removes c's watch link w (does not free the tube). */
void bq__watch_remove(bq_engine_t *e, bq_watch_t *w);
/* c's link to t, or NULL. */
bq_watch_t *bq__watch_find(const bq_client_t *c, const bq_tube_t *t);
/* Tells t's watchers that its ready heap went from empty to not, or back,
 * or that its best job changed. Call after every change of t->ready. */
void bq__tube_ready_changed(bq_tube_t *t, bool was_empty, bool top_changed);
/* Adds t's watch links to (paused=false) or removes them from their
 * clients' ready-tube heaps when t's pause starts or ends. */
void bq__tube_pause_changed(bq_tube_t *t);
/* Takes one waiting client from t in beanstalkd's multiset order. */
bq_client_t *bq__tube_take_waiter(bq_tube_t *t);
/* Appends w to its tube's waiting set (room reserved by bq__watch_add). */
void bq__tube_add_waiter(bq_watch_t *w);
/* Removes w from its tube's waiting set if it is there. */
void bq__tube_remove_waiter(bq_watch_t *w);
/* Initialises a client's ready-tube heap (ordered by each tube's best job). */
void bq__client_ready_init(bq_heap_t *h);

/* ---- client.c: waiting and reservations ---- */

/* Registers c as waiting in every watched tube. */
void bq__client_wait(bq_engine_t *e, bq_client_t *c, int64_t deadline);
/* Stops c waiting (no reply). */
void bq__client_unwait(bq_engine_t *e, bq_client_t *c);
/* True when c holds a reservation due within the safety margin at now. */
bool bq__client_deadline_soon(const bq_client_t *c, int64_t now);

/* ---- transitions.c: moving jobs between states ---- */

/* Removes j from the structure of its current state (ready, delayed,
 * buried, or reserver's heap when reserved) and fixes the counters; j->state
 * is left as it was. */
void bq__job_unlink(bq_engine_t *e, bq_client_t *reserver, bq_job_t *j);
/* Makes j ready in its tube, or hands it to a waiting client. Never fails:
 * the ready heap has room for every job of the tube. */
void bq__job_ready(bq_engine_t *e, bq_job_t *j, bq_now_t now);
/* Puts j in its tube's ready heap without handing it to a waiter. */
void bq__job_ready_insert(bq_engine_t *e, bq_job_t *j);
/* beanstalkd's process_queue over the tubes of the unpaused_next list and
 * extra (may be NULL): while one of them has both waiters and ready jobs,
 * hands the best such job to a waiter of its tube. */
void bq__dispatch(bq_engine_t *e, bq_tube_t *list, bq_tube_t *extra, bq_now_t now);
/* Returns every job c holds to ready, in the order c reserved them, without
 * counting releases (connection close). */
void bq__client_return_jobs(bq_engine_t *e, bq_client_t *c, bq_now_t now);
/* Makes j delayed for j->delay seconds from now; 0, or -1 when out of memory
 * (j unchanged). */
int bq__job_delay(bq_engine_t *e, bq_job_t *j, bq_now_t now);
/* Makes j delayed until deadline (mono ns); 0, or -1 when out of memory. */
int bq__job_delay_until(bq_engine_t *e, bq_job_t *j, int64_t deadline);
/* Appends j to its tube's buried queue; 0, or -1 when out of memory. */
int bq__job_bury(bq_engine_t *e, bq_job_t *j);
/* Buries j at position seq of the FIFO (replay); 0, or -1 when out of memory. */
int bq__job_bury_at(bq_engine_t *e, bq_job_t *j, uint64_t seq);
/* Reserves j for c (room in c->reserved must be reserved) and replies
 * RESERVED to c. */
void bq__job_reserve(bq_engine_t *e, bq_client_t *c, bq_job_t *j, bq_now_t now);
/* True when j is reserved by c. */
bool bq__job_reserved_by(const bq_job_t *j, const bq_client_t *c);
/* Frees an unlinked job, drops it from the id table and maybe its tube. */
void bq__job_destroy(bq_engine_t *e, bq_job_t *j);
/* Heap callbacks. */
bool bq__job_pri_less(const void *a, const void *b);
bool bq__job_key_less(const void *a, const void *b);
void bq__job_setpos(void *j, size_t pos);

/* ---- timers.c ---- */

/* Initialises the engine's timer queues. */
void bq__timers_init(bq_engine_t *e);
/* Reserves room in the tube timer queues for one more tube; 0 or -1. */
int bq__timers_reserve_tube(bq_engine_t *e);
/* Puts t in or out of the delay and pause timer queues after a change of
 * its soonest delayed job or its pause. */
void bq__tube_timer_update(bq_engine_t *e, bq_tube_t *t);
/* Recomputes c's timer (TTR, DEADLINE_SOON, reserve timeout). */
void bq__client_timer_update(bq_engine_t *e, bq_client_t *c);

/* ---- replies ---- */

/* Sends a constant reply, e.g. BQ_SEND(e, c, "DELETED\r\n"). */
#define BQ_SEND(e, c, lit) bq_engine_client_send((e), (c), (lit), sizeof(lit) - 1)
/* Sends "<word> <id> <bytes>\r\n<body>\r\n" (RESERVED, FOUND). */
void bq__send_job(bq_engine_t *e, bq_client_t *c, const char *word, const bq_job_t *j);
/* Sends printf-formatted text (a single reply line). */
void bq__sendf(bq_engine_t *e, bq_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- record.c: the binlog records of engine changes ---- */

/* How many ids one reservation record covers. */
#define BQ_ID_BLOCK 100000
/* Upper bounds of packed records (payload only), for log_room. */
#define BQ_LOG_UPDATE_MAX 96
#define BQ_LOG_IDS_MAX 32
/* Bound of j's full record. */
size_t bq__log_full_max(const bq_job_t *j);
/* True when logging is off or the log has room for bytes. */
bool bq__log_room(bq_engine_t *e, size_t bytes, bool is_delete);
/* Logs j in full (put, compaction); sets j->file. */
void bq__log_full(bq_engine_t *e, bq_job_t *j, bq_now_t now);
/* Logs j's new status (release, bury, kick). */
void bq__log_update(bq_engine_t *e, bq_job_t *j, bq_now_t now);
/* Logs that j is gone (call before freeing it). */
void bq__log_delete(bq_engine_t *e, bq_job_t *j);
/* Logs t's pause. */
void bq__log_pause(bq_engine_t *e, const bq_tube_t *t, bq_now_t now);
/* Takes the next job id, logging a new id reservation first when needed.
 * 0 when the log has no room for the reservation. */
uint64_t bq__take_id(bq_engine_t *e);

/* ---- stats.c: YAML bodies ---- */

/* Replies with the `stats` body. */
void bq__stats_server(bq_engine_t *e, bq_client_t *c, bq_now_t now);
/* Replies with the `stats-tube` body of t. */
void bq__stats_tube(bq_engine_t *e, bq_client_t *c, const bq_tube_t *t, bq_now_t now);
/* Replies with the `stats-job` body of j. */
void bq__stats_job(bq_engine_t *e, bq_client_t *c, const bq_job_t *j, bq_now_t now);
/* Replies with the `list-tubes` body. */
void bq__stats_list_tubes(bq_engine_t *e, bq_client_t *c);
/* Replies with the `list-tubes-watched` body of c. */
void bq__stats_list_watched(bq_engine_t *e, bq_client_t *c);

#endif
