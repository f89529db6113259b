/* Cutting a follower's log back to a fork point (docs/replication.md,
 * "Rejoining"). A node whose log went on past the point where it agrees
 * with the new primary's (an old primary's unacknowledged tail) keeps
 * everything up to that point and moves the rest aside, never deleting it:
 * a segment wholly after the point is renamed <segment>.forked-<offset>,
 * and the tail of the segment that holds the point is copied to such a
 * file (synced) before the segment is truncated. The engine then holds
 * records that are gone, so it is emptied and the log replayed into it
 * (the one case where a rejoin replays: only a node with a divergent tail
 * pays it). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/binlog/internal.h"
#include "node/binlog/segment.h"
#include "protocol/frame.h"

/* A free name for the bytes of segment path from offset off. 0 or -1. */
static int forked_name(const char *path, uint64_t off, char *out, size_t cap)
{
    for (unsigned n = 0; n < 1000; n++) {
        int k = n == 0 ? snprintf(out, cap, "%s.forked-%llu", path, (unsigned long long)off)
                       : snprintf(out, cap, "%s.forked-%llu.%u", path, (unsigned long long)off, n);
        if (k < 0 || (size_t)k >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        struct stat st;
        if (lstat(out, &st) != 0 && errno == ENOENT)
            return 0;
    }
    errno = EEXIST;
    return -1;
}

/* The offset just after frame lsn in the segment open as fd (frames from
 * start to size); 0 when the segment does not hold it. */
static uint64_t end_of_frame(int fd, uint64_t start, uint64_t size, uint64_t lsn)
{
    uint8_t hdr[BQ_FRAME_HEADER];
    for (uint64_t off = start; off + BQ_FRAME_HEADER <= size;) {
        if (pread(fd, hdr, sizeof hdr, (off_t)off) != (ssize_t)sizeof hdr)
            return 0;
        bq_frame_t f;
        bq_frame_read_header(hdr, &f);
        if (f.len == 0 || f.lsn > lsn)
            return 0;
        off += BQ_FRAME_HEADER + (uint64_t)f.len;
        if (f.lsn == lsn)
            return off <= size ? off : 0;
    }
    return 0;
}

/* Copies fd[from, to) to a new file at path and syncs it. 0 or -errno. */
static int copy_range(int fd, uint64_t from, uint64_t to, const char *path)
{
    int out = bq_segment_open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (out < 0)
        return -errno;
    static uint8_t buf[65536];
    int r = 0;
    for (uint64_t off = from; off < to && r == 0;) {
        size_t want = to - off < sizeof buf ? (size_t)(to - off) : sizeof buf;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n <= 0) {
            r = n < 0 ? -errno : -EIO;
            break;
        }
        for (ssize_t w = 0; w < n && r == 0;) {
            ssize_t k = write(out, buf + w, (size_t)(n - w));
            if (k < 0 && errno != EINTR)
                r = -errno;
            else if (k > 0)
                w += k;
        }
        off += (uint64_t)n;
    }
    if (r == 0 && fsync(out) != 0)
        r = -errno;
    close(out);
    if (r != 0)
        unlink(path);
    return r;
}

/* Moves the part of segment sg after lsn aside: the whole file when it
 * starts after lsn, else its bytes after frame lsn. Adds the bytes moved to
 * *bytes. 0 or -errno (logged). */
static int move_after(bq_binlog_t *b, seg_t *sg, uint64_t lsn, uint64_t *bytes)
{
    char path[PATH_MAX], aside[PATH_MAX + 32];
    bq_segment_path(path, sizeof path, b->cfg.dir, sg->seq);
    int r = 0;
    if (sg->first_lsn > lsn) {
        if (forked_name(path, sg->data_start, aside, sizeof aside) != 0 || rename(path, aside) != 0)
            r = -errno;
        else
            *bytes += sg->size > sg->data_start ? sg->size - sg->data_start : 0;
    } else {
        int fd = bq_segment_open_file(path, O_RDWR, 0);
        uint64_t end = fd < 0 ? 0 : end_of_frame(fd, sg->data_start, sg->size, lsn);
        if (fd < 0)
            r = -errno;
        else if (end == 0)
            r = -ENOENT; /* the fork point is not in the segment that should hold it */
        else if (end < sg->size && (forked_name(path, end, aside, sizeof aside) != 0 ||
                                    (r = copy_range(fd, end, sg->size, aside)) != 0 ||
                                    ftruncate(fd, (off_t)end) != 0 || fsync(fd) != 0))
            r = r ? r : -errno;
        if (r == 0 && end < sg->size)
            *bytes += sg->size - end;
        if (fd >= 0)
            close(fd);
    }
    if (r != 0)
        bq_log(BQ_LOG_ERROR, "cannot move a forked binlog tail aside", "segment=\"%s\" err=\"%s\"",
               path, strerror(-r));
    return r;
}

int bq_binlog_cut_after(bq_binlog_t *b, uint64_t lsn, bq_now_t now, bq_binlog_cut_t *out)
{
    memset(out, 0, sizeof *out);
    if (!b->cfg.follower || lsn >= b->lsns.last || b->nsegs == 0)
        return -EINVAL;
    int r = bq__binlog_close_current(b);
    if (r != 0)
        return r;
    out->records = b->lsns.last - lsn;
    for (size_t i = b->nsegs; i-- > 0 && r == 0;) {
        r = move_after(b, &b->segs[i], lsn, &out->bytes);
        if (b->segs[i].first_lsn <= lsn)
            break;
        out->segments++;
    }
    if (r == 0)
        r = bq_segment_sync_dir(b->cfg.dir);
    if (r != 0)
        return r;
    r = bq__binlog_replay_again(b, now);
    if (r == 0 && b->lsns.last != lsn)
        r = -EIO; /* replay did not end at the fork point */
    if (r != 0)
        return r;
    bq_log(BQ_LOG_WARN, "binlog: forked tail moved aside",
           "dir=\"%s\" cut_after=%llu records=%llu bytes=%llu segments=%llu epoch=%llu", b->cfg.dir,
           (unsigned long long)lsn, (unsigned long long)out->records,
           (unsigned long long)out->bytes, (unsigned long long)out->segments,
           (unsigned long long)b->epoch);
    return 0;
}
