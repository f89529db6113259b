/* Synchronous replication accounting on the primary: which LSN replies may
 * be released up to (the commit point), given the local binlog's release
 * point and the standbys' acknowledgements, and what happens when too few
 * standbys are in sync (--sync-fallback). Pure: time is passed in (ns,
 * monotonic).
 *
 *   commit = min(local release, the need-th highest flushed LSN among the
 *            standbys)                           while sync is in force
 *   commit = local release                       without sync standbys, or
 *                                                while degraded to async
 *
 * A standby is "in sync" once, connected, it has flushed everything the
 * primary had logged when it connected (its catch-up target). Sync fails
 * in two ways: fewer than `need` standbys are in sync (one disconnected),
 * or they are connected but the commit point has been held back by them,
 * without moving, for the timeout (a standby that died without closing its
 * connection, or whose disk hangs). Either way, after the timeout the
 * fallback comes into force: ASYNC (the default, "degraded") releases
 * replies without the standbys, and every reply that was waiting gets it;
 * REFUSE (strict) makes the node refuse writes (put answers DRAINING, other
 * changes OUT_OF_MEMORY) while replies already waiting keep waiting for a
 * standby. A stalled standby loses its "in sync" and must catch up again,
 * to everything logged when it was dropped. Once `need` standbys are in
 * sync, sync is back by itself. The commit point never goes backwards.
 *
 * With self_counts (automatic failover: voters elect the most up-to-date
 * node, and a vote is as good as the voter's durable log), the primary is
 * one of the copies only up to what it has made durable itself:
 *
 *   commit = min(local release, the (need + 1)-th highest of the primary's
 *            durable LSN and the standbys' flushed LSNs)
 *
 * so that need + 1 nodes hold every acknowledged record on disk even when
 * the primary syncs its binlog lazily (-f MS) and loses power; and degraded
 * never means "on the primary alone": it falls back to Raft's own rule,
 *
 *   commit = min(local release, the majority-th highest of the primary's
 *            durable LSN, the standbys' flushed LSNs and the witnesses'
 *            floors)
 *
 * where a witness's floor is the position it has durably promised never to
 * vote below (it holds no log). So with two data nodes and a witness, a
 * primary that lost its standby acknowledges what it and the witness hold,
 * and no election can then make a node without those records primary. */
#ifndef BQ_REPL_COMMIT_H
#define BQ_REPL_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_COMMIT_MAX_STANDBYS 8

typedef enum bq_fallback {
    BQ_FALLBACK_REFUSE = 0,
    BQ_FALLBACK_ASYNC,
} bq_fallback_t;

typedef enum bq_sync_state {
    BQ_SYNC_OFF = 0,  /* no sync standbys wanted (need 0): async */
    BQ_SYNC_ON,       /* enough standbys in sync */
    BQ_SYNC_WAITING,  /* too few, for less than the timeout: replies wait */
    BQ_SYNC_DEGRADED, /* fallback async in force: replies do not wait */
    BQ_SYNC_REFUSING, /* fallback refuse in force: writes are refused */
} bq_sync_state_t;

typedef struct bq_commit_standby {
    bool connected;
    bool in_sync;
    bool witness;    /* a voter without a log: only its floor counts */
    uint64_t target; /* catch-up target: the primary's last LSN at connect or drop */
    uint64_t written, flushed, applied;
    uint64_t floor;   /* witness: the floor it holds durably in this epoch */
    int64_t acked_at; /* when its last ack arrived (ns) */
} bq_commit_standby_t;

typedef struct bq_commit {
    unsigned need;          /* --sync-standbys */
    bq_fallback_t fallback; /* --sync-fallback */
    int64_t timeout_ns;     /* --sync-timeout */
    bq_sync_state_t state;
    int64_t short_since;   /* when too few standbys became in sync; -1 when enough */
    int64_t held_since;    /* since when the standbys hold replies back without the
                              commit point moving; -1 when they hold nothing */
    uint64_t commit;       /* the commit point */
    uint64_t last_lsn;     /* the primary's last logged LSN */
    bool self_counts;      /* the primary's durable LSN is one of the copies */
    size_t majority;       /* self_counts: voters (itself included) of the degraded rule */
    uint64_t self_durable; /* the primary's durable LSN */
    size_t n;
    bq_commit_standby_t sb[BQ_COMMIT_MAX_STANDBYS];
} bq_commit_t;

/* Sets up accounting for n standbys (n <= BQ_COMMIT_MAX_STANDBYS) of which
 * need must acknowledge, with the commit point at lsn, at now. */
void bq_commit_init(bq_commit_t *c, size_t n, unsigned need, bq_fallback_t fallback,
                    int64_t timeout_ns, uint64_t lsn, int64_t now);

/* The primary made its binlog durable up to lsn (self_counts). */
void bq_commit_self_durable(bq_commit_t *c, uint64_t lsn);

/* The primary logged up to lsn. */
void bq_commit_logged(bq_commit_t *c, uint64_t lsn);

/* Standby i connected; durable_lsn is what its hello said it holds (an
 * earlier, higher flushed LSN of it is forgotten: it may have lost data). */
void bq_commit_connected(bq_commit_t *c, size_t i, uint64_t durable_lsn, int64_t now);

/* Peer i is a witness that connected: it never counts as a standby in
 * sync, only its floor counts (degraded, self_counts); its floor starts at
 * 0 until it acknowledges one. */
void bq_commit_witness(bq_commit_t *c, size_t i);

/* Witness i acknowledged holding the floor lsn (of the current epoch)
 * durably; floors never go backwards. */
void bq_commit_floor(bq_commit_t *c, size_t i, uint64_t lsn);

/* Standby i disconnected. */
void bq_commit_disconnected(bq_commit_t *c, size_t i, int64_t now);

/* Standby i acknowledged; positions never go backwards. */
void bq_commit_ack(bq_commit_t *c, size_t i, uint64_t written, uint64_t flushed, uint64_t applied,
                   int64_t now);

/* Recomputes the state and the commit point from the local release point at
 * now, and returns the commit point. */
uint64_t bq_commit_update(bq_commit_t *c, uint64_t local_release, int64_t now);

/* When the state will change by time alone (the end of WAITING, or of the
 * time replies may be held back), or INT64_MAX. */
int64_t bq_commit_next_deadline(const bq_commit_t *c);

/* True when the primary's own durable LSN is one of the copies a reply
 * waits for (self_counts, sync not off): its fsync must then start at once
 * (group commit) rather than on the -f timer, so that a reply waits for the
 * fastest need + 1 of the copies, and with a standby down for no timer. */
bool bq_commit_wants_self_durable(const bq_commit_t *c);

/* The floor voters must not vote below, at the commit point's epoch: the
 * commit point while sync is in force (it is on the sync standbys), the
 * primary's durable LSN while degraded with self_counts (the witnesses
 * are asked to promise it), else 0 (none). */
uint64_t bq_commit_floor_lsn(const bq_commit_t *c);

/* Standbys connected and in sync. */
size_t bq_commit_in_sync(const bq_commit_t *c);

/* The state's name ("off", "sync", "waiting", "degraded", "refusing"). */
const char *bq_commit_state_name(bq_sync_state_t st);

#endif
