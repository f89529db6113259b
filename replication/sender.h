/* Streams the primary's binlog to one standby: reads frames from the
 * segment files (never from a queue in memory, so a slow or far behind
 * standby costs the primary no memory beyond one read buffer) and sends
 * them, unchanged, in Frames messages, each segment announced by a
 * SegmentStart. Sending pauses while the link has more than
 * BQ_LINK_HIGH_WATER bytes queued and resumes on the next pump. */
#ifndef BQ_REPL_SENDER_H
#define BQ_REPL_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replication/link.h"
#include "replication/repl.h"

typedef struct bq_sender {
    const bq_repl_log_t *log;
    bq_link_t *link;
    int fd;            /* the segment being read */
    bq_repl_seg_t seg; /* its description when opened */
    uint64_t off;      /* next byte to read in it */
    bool announced;    /* its SegmentStart was sent */
    uint64_t next_lsn; /* the next frame to send */
    uint64_t sent_bytes;
    uint8_t *buf;
    size_t cap;
} bq_sender_t;

/* Positions s on log (borrowed) at frame start_lsn, inside the segment with
 * index seg, to send on link (borrowed). 0, or -1 with a message in err
 * (the segment cannot be read or does not hold start_lsn). */
int bq_sender_init(bq_sender_t *s, const bq_repl_log_t *log, bq_link_t *link, size_t seg,
                   uint64_t start_lsn, char *err, size_t errlen);

/* Sends what the files hold beyond what was sent, until caught up or the
 * link is full. 0, or -1 with a message in err (a local read error or a
 * damaged frame: the caller closes the link). */
int bq_sender_pump(bq_sender_t *s, char *err, size_t errlen);

/* Frees what s holds. */
void bq_sender_free(bq_sender_t *s);

#endif
