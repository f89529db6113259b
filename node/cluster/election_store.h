/* The durable part of elections, in DIR/election beside the binlog: the
 * node's current epoch, whom it voted for in that epoch, and the epoch
 * history (every epoch the node's log has seen, with the LSN of its first
 * frame and the node that opened it), and, for a witness, the floor: the
 * log position it promised a primary never to vote below. One binlog frame (LSN 0, the current
 * epoch) holding a bq.binlog.ElectionState message; replaced atomically
 * (write a temporary file, fsync it, rename it over, fsync the directory),
 * so a crash leaves the old state or the new one, never a mix. */
#ifndef BQ_NODE_ELECTION_STORE_H
#define BQ_NODE_ELECTION_STORE_H

#include <stddef.h>
#include <stdint.h>

#define BQ_ESTORE_NAME_MAX 64      /* node ids are shorter (flags.c checks) */
#define BQ_ESTORE_HISTORY_MAX 1024 /* older epochs are dropped first */

typedef struct bq_epoch_start {
    uint64_t epoch;
    uint64_t first_lsn;            /* its first frame */
    char node[BQ_ESTORE_NAME_MAX]; /* who opened it ("" when unknown) */
} bq_epoch_start_t;

typedef struct bq_election_state {
    uint64_t epoch;                     /* 0: never saw one */
    char voted_for[BQ_ESTORE_NAME_MAX]; /* "" when no vote in epoch */
    size_t nhist;                       /* epochs ascending, first_lsn non-decreasing */
    uint64_t floor_epoch, floor_lsn;    /* a witness never votes below this position */
    bq_epoch_start_t hist[BQ_ESTORE_HISTORY_MAX];
} bq_election_state_t;

typedef enum bq_estore_status {
    BQ_ESTORE_OK = 0,
    BQ_ESTORE_ABSENT,  /* no file: *st is the empty state */
    BQ_ESTORE_DAMAGED, /* a file that does not decode: *st is the empty state */
    BQ_ESTORE_IO,      /* a read or write failed (errno kept) */
} bq_estore_status_t;

/* Reads DIR/election into *st (caller-owned, may be large: allocate it).
 * A leftover DIR/election.tmp is removed. */
bq_estore_status_t bq_estore_load(const char *dir, bq_election_state_t *st);

/* Durably replaces DIR/election with *st (borrowed). */
bq_estore_status_t bq_estore_save(const char *dir, const bq_election_state_t *st);

/* Records that epoch starts at first_lsn, opened by node: appended when above
 * the last epoch in the history, ignored when already there; when the
 * history is full the oldest entry is dropped. Returns 1 when *st changed,
 * 0 when not, -1 when epoch is below the last one recorded or first_lsn
 * below its first_lsn (the history only grows). */
int bq_estore_add_epoch(bq_election_state_t *st, uint64_t epoch, uint64_t first_lsn,
                        const char *node);

/* The last LSN that epoch can hold in a log with history *st and last frame
 * last_lsn: the next recorded epoch's first_lsn - 1, or last_lsn for the
 * last epoch. For an epoch the history does not hold, the end of the
 * highest recorded epoch below it (0 when none): a log that lacks epoch E
 * agrees with a log of E at most up to there. */
uint64_t bq_estore_epoch_end(const bq_election_state_t *st, uint64_t epoch, uint64_t last_lsn);

/* The epoch of frame lsn in a log with history *st: the last recorded
 * epoch whose first_lsn is at most lsn (of epochs that share a first_lsn,
 * the later: the earlier holds no frame); 0 when the history starts after
 * lsn or is empty. The caller knows lsn is in the log. */
uint64_t bq_estore_epoch_of(const bq_election_state_t *st, uint64_t lsn);

/* The status's name ("ok", "absent", "damaged", "i/o error"). */
const char *bq_estore_status_name(bq_estore_status_t s);

#endif
