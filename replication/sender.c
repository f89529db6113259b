/* The sender of one standby: frames are read back from the binlog's segment
 * files with pread (the page cache usually still has them) and sent whole.
 * A segment the primary has since compacted away stays readable through the
 * descriptor already open; a zero header or the end of its file ends it. */
#include "replication/sender.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocol/frame.h"

/* Bytes read per pread (a larger frame gets a buffer of its own size). */
#define CHUNK ((size_t)256 * 1024)

static int grow(bq_sender_t *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    uint8_t *p = realloc(s->buf, need);
    if (!p)
        return -1;
    s->buf = p;
    s->cap = need;
    return 0;
}

/* Finds segment seq in the log now; false when it is no longer listed. */
static bool find_seg(const bq_repl_log_t *log, uint64_t seq, bq_repl_seg_t *out)
{
    size_t n = log->nsegs(log->arg);
    for (size_t i = 0; i < n; i++) {
        log->seg(log->arg, i, out);
        if (out->seq == seq)
            return true;
    }
    return false;
}

static int open_seg(bq_sender_t *s, const bq_repl_seg_t *seg, char *err, size_t errlen)
{
    char path[PATH_MAX];
    s->log->path(s->log->arg, seg->seq, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (s->fd >= 0)
        close(s->fd);
    s->fd = fd;
    s->seg = *seg;
    s->off = seg->data_start;
    s->announced = false;
    return 0;
}

/* Moves s->off to frame lsn of the open segment. */
static int seek_lsn(bq_sender_t *s, uint64_t lsn, char *err, size_t errlen)
{
    uint8_t h[BQ_FRAME_HEADER];
    bq_frame_t f;
    while (s->off < s->seg.data_end) {
        ssize_t n = pread(s->fd, h, sizeof h, (off_t)s->off);
        if (n != (ssize_t)sizeof h)
            break;
        bq_frame_read_header(h, &f);
        if (f.len == 0 || f.lsn >= lsn) {
            if (f.lsn == lsn)
                return 0;
            break;
        }
        s->off += BQ_FRAME_HEADER + (uint64_t)f.len;
    }
    if (s->off == s->seg.data_end && lsn == s->log->written_lsn(s->log->arg) + 1)
        return 0; /* caught up exactly at the end */
    snprintf(err, errlen, "segment %llu does not hold LSN %llu", (unsigned long long)s->seg.seq,
             (unsigned long long)lsn);
    return -1;
}

int bq_sender_init(bq_sender_t *s, const bq_repl_log_t *log, bq_link_t *link, size_t seg,
                   uint64_t start_lsn, char *err, size_t errlen)
{
    bq_repl_seg_t info;
    memset(s, 0, sizeof *s);
    s->log = log;
    s->link = link;
    s->fd = -1;
    s->next_lsn = start_lsn;
    log->seg(log->arg, seg, &info);
    if (open_seg(s, &info, err, errlen) != 0)
        return -1;
    return seek_lsn(s, start_lsn, err, errlen);
}

static int send_segment_start(bq_sender_t *s)
{
    Bq__Repl__SegmentStart ss = BQ__REPL__SEGMENT_START__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    ss.first_lsn = s->seg.first_lsn;
    ss.epoch = s->seg.epoch;
    ss.created_wall = s->seg.created_wall;
    m.body_case = BQ__REPL__MESSAGE__BODY_SEGMENT;
    m.segment = &ss;
    s->announced = true;
    return bq_link_send(s->link, &m);
}

/* Reads and sends the next whole frames below end. Returns 1 when some
 * were sent, 0 at the end of the segment's data, -1 on an error. */
static int send_chunk(bq_sender_t *s, uint64_t end, char *err, size_t errlen)
{
    size_t want = end - s->off < CHUNK ? (size_t)(end - s->off) : CHUNK;
    for (;;) {
        if (grow(s, want) != 0) {
            snprintf(err, errlen, "out of memory reading the binlog");
            return -1;
        }
        ssize_t n = pread(s->fd, s->buf, want, (off_t)s->off);
        if (n < 0) {
            snprintf(err, errlen, "cannot read segment %llu: %s", (unsigned long long)s->seg.seq,
                     strerror(errno));
            return -1;
        }
        size_t used = 0;
        uint64_t last = 0;
        bq_frame_t f;
        bq_frame_status_t st = BQ_FRAME_SHORT;
        /* The standby checks every CRC; here only the frames' extents. */
        while (used < (size_t)n &&
               (st = bq_frame_span(s->buf + used, (size_t)n - used, &f)) == BQ_FRAME_OK) {
            used += BQ_FRAME_HEADER + f.len;
            last = f.lsn;
        }
        if (used > 0) {
            Bq__Repl__Frames fr = BQ__REPL__FRAMES__INIT;
            Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
            fr.data.data = s->buf;
            fr.data.len = used;
            m.body_case = BQ__REPL__MESSAGE__BODY_FRAMES;
            m.frames = &fr;
            s->off += used;
            s->next_lsn = last + 1;
            s->sent_bytes += used;
            return bq_link_send(s->link, &m) == 0 ? 1 : -1;
        }
        if (n == 0 || st == BQ_FRAME_END)
            return 0;
        if (st != BQ_FRAME_SHORT || (size_t)n < want || (size_t)n < BQ_FRAME_HEADER) {
            snprintf(err, errlen, "damaged frame in segment %llu at offset %llu (%s)",
                     (unsigned long long)s->seg.seq, (unsigned long long)s->off,
                     bq_frame_status_name(st));
            return -1;
        }
        bq_frame_read_header(s->buf, &f);
        want = BQ_FRAME_HEADER + (size_t)f.len;
    }
}

/* The segment after the open one, if the log lists one. */
static bool next_seg(const bq_sender_t *s, bq_repl_seg_t *out)
{
    size_t n = s->log->nsegs(s->log->arg);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        bq_repl_seg_t sg;
        s->log->seg(s->log->arg, i, &sg);
        if (sg.seq > s->seg.seq && (!found || sg.seq < out->seq)) {
            *out = sg;
            found = true;
        }
    }
    return found;
}

int bq_sender_pump(bq_sender_t *s, char *err, size_t errlen)
{
    while (bq_link_queued(s->link) < BQ_LINK_HIGH_WATER) {
        bq_repl_seg_t now;
        bool listed = find_seg(s->log, s->seg.seq, &now);
        uint64_t end = listed ? now.data_end : UINT64_MAX;
        if (!s->announced && send_segment_start(s) != 0)
            return -1;
        int r = s->off < end ? send_chunk(s, end, err, errlen) : 0;
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (listed && now.current)
            return 0; /* caught up */
        bq_repl_seg_t next;
        if (!next_seg(s, &next))
            return 0; /* the next segment is being created */
        if (open_seg(s, &next, err, errlen) != 0)
            return -1;
    }
    return 0;
}

void bq_sender_free(bq_sender_t *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}
