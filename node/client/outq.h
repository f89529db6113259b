/* A connection's output queue: reply bytes in a list of chunks, waiting to be
 * written. Small replies are coalesced (a chunk grows to 16 KiB); a large
 * reply gets a chunk of its own. Chunks handed to a write leave the queue
 * and belong to that write until it completes.
 *
 * With the binlog on, bytes carry the LSN of the last log record they may
 * depend on: marks (offset, lsn) say from which byte on the output must
 * wait until that LSN is released (as durable as the -f mode promises). */
#ifndef BQ_NODE_OUTQ_H
#define BQ_NODE_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Chunk size that small replies are coalesced into. */
#define BQ_OUTQ_CHUNK ((size_t)16 * 1024)

/* Marks kept per queue; more are merged into the last one. */
#define BQ_OUTQ_MARKS 4

typedef struct bq_chunk bq_chunk_t;

typedef struct bq_outq_mark {
    uint64_t off; /* bytes from this offset (counted by `appended`) on ... */
    uint64_t lsn; /* ... wait until this LSN is released */
} bq_outq_mark_t;

typedef struct bq_outq {
    bq_chunk_t *head, *tail;
    size_t head_off;   /* bytes of head already written */
    size_t bytes;      /* unwritten bytes in the queue */
    uint64_t appended; /* bytes ever appended */
    bq_outq_mark_t marks[BQ_OUTQ_MARKS];
    unsigned mark_head, nmarks;
} bq_outq_t;

/* Makes q empty. */
void bq_outq_init(bq_outq_t *q);

/* Appends a copy of data[0..len). Returns 0, or -1 when out of memory. */
int bq_outq_append(bq_outq_t *q, const char *data, size_t len);

/* Points up to max bufs at the first `limit` unwritten bytes, in order;
 * returns how many. */
size_t bq_outq_peek(const bq_outq_t *q, uv_buf_t *bufs, size_t max, size_t limit);

/* Makes byte `at` of the unwritten bytes start a chunk (copying the rest of
 * its chunk into a new one), so whole chunks can be detached up to it.
 * Returns 0, or -1 when out of memory. */
int bq_outq_split(bq_outq_t *q, size_t at);

/* Marks the bytes appended from offset `off` (a value of q->appended) on
 * as waiting for `lsn`. Marks must come in increasing off and lsn. */
void bq_outq_tag(bq_outq_t *q, uint64_t off, uint64_t lsn);

/* How many unwritten bytes may be written once LSNs up to `release` are
 * released; drops the marks that no longer hold anything back. */
size_t bq_outq_releasable(bq_outq_t *q, uint64_t release);

/* Drops the first n unwritten bytes (n <= q->bytes), freeing spent chunks. */
void bq_outq_consume(bq_outq_t *q, size_t n);

/* Removes the first nchunks chunks (as described by bq_outq_peek) from q
 * and returns them as a list; the caller owns it: free with
 * bq_outq_free_chunks. */
bq_chunk_t *bq_outq_detach(bq_outq_t *q, size_t nchunks);

/* Frees a chunk list from bq_outq_detach. */
void bq_outq_free_chunks(bq_chunk_t *list);

/* Frees every chunk of q and leaves it empty. */
void bq_outq_clear(bq_outq_t *q);

#endif
