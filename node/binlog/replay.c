/* Binlog replay at start-up (replay.h has the damage policy). Each segment
 * is mapped read-only, so frames of any size are checked and handed to
 * bq_engine_apply() straight from the page cache, with no copy.
 *
 * Damage is classified by looking forward from it: when no frame with a
 * valid checksum and a later LSN follows in the segment, and every later
 * segment is empty, the damage is a torn tail (copied aside, then cut off);
 * otherwise data after it would be lost, so start-up stops unless the
 * operator asked to skip it. The forward search checks the LSN field of a
 * candidate against the range any real frame can have before paying for
 * its checksum, so it stays linear on arbitrary bytes. */
#include "node/binlog/replay.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/base/log.h"
#include "protocol/frame.h"
#include "node/binlog/segment.h"

#define PATH_BYTES 4096
#define WHY_BYTES 200
#define NONE SIZE_MAX
/* The smallest possible frame: its header and one payload byte. */
#define MIN_FRAME (BQ_FRAME_HEADER + 1)
#define SECTOR 512 /* the unit a disk writes whole or not at all */
#define SKIP_HINT                                                                                  \
    "check the disk; --binlog-skip-corrupt skips the damage, but jobs may be lost and deleted "    \
    "jobs may come back"
#define SKIP_WARNING "SKIPPING DAMAGED BINLOG DATA: jobs may be lost and deleted jobs may come back"

typedef struct seg {
    uint64_t seq;
    int fd;
    const uint8_t *data; /* the file as it was opened, mapped; NULL when empty */
    size_t map_len;
    size_t size; /* bytes of data that count (less after a torn tail is cut) */
    size_t end;  /* where its frames end */
    bool clean;  /* no damage was skipped in it: frames may be appended at end */
    bool moved;  /* moved aside as a whole */
    char path[PATH_BYTES];
} seg_t;

typedef struct replay {
    const char *dir;
    bq_engine_t *e;
    bq_now_t now;
    bool skip_corrupt;
    bq_replay_result_t *res;
    uint64_t *seqs;
    size_t nseqs;
    size_t idx;         /* the segment being replayed */
    uint64_t last;      /* LSN of the last applied frame, 0 before the first */
    bool resync;        /* damage was skipped: the next frame's LSN may jump */
    uint64_t max_first; /* highest first_lsn among the headers replayed */
    uint64_t max_epoch; /* the epoch of that header */
    bool surveyed;      /* all_first and all_bytes are known */
    uint64_t all_first; /* highest first_lsn of every segment's header */
    uint64_t all_bytes; /* size of every segment together */
} replay_t;

/* Maps the open segment s as a whole. 0, or -1 with errno set. */
static int seg_map(seg_t *s)
{
    struct stat st;
    if (fstat(s->fd, &st) != 0)
        return -1;
    if ((uint64_t)st.st_size > SIZE_MAX / 2) { /* only possible on a 32-bit host */
        errno = EFBIG;
        return -1;
    }
    s->map_len = s->size = (size_t)st.st_size;
    if (s->size == 0)
        return 0;
    void *p = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
    if (p == MAP_FAILED)
        return -1;
    posix_madvise(p, s->size, POSIX_MADV_SEQUENTIAL);
    s->data = p;
    return 0;
}

/* Opens and maps segment seq of dir. 0, or -1 (logged). */
static int seg_open(const char *dir, uint64_t seq, seg_t *s)
{
    memset(s, 0, sizeof *s);
    s->seq = seq;
    s->clean = true;
    bq_segment_path(s->path, sizeof s->path, dir, seq);
    s->fd = bq_segment_open_file(s->path, O_RDWR, 0);
    if (s->fd >= 0 && seg_map(s) == 0)
        return 0;
    bq_log(BQ_LOG_ERROR, "cannot read binlog segment", "segment=\"%s\" err=\"%s\"", s->path,
           strerror(errno));
    if (s->fd >= 0)
        close(s->fd);
    return -1;
}

static void seg_close(seg_t *s)
{
    if (s->data)
        munmap((void *)s->data, s->map_len);
    close(s->fd);
}

/* The offset just after the last non-zero byte of d[from..size), or from
 * when there is none. */
static size_t nonzero_end(const uint8_t *d, size_t from, size_t size)
{
    static const uint8_t zero[4096];
    size_t end = size;
    while (end - from >= sizeof zero && memcmp(d + end - sizeof zero, zero, sizeof zero) == 0)
        end -= sizeof zero;
    while (end > from && d[end - 1] == 0)
        end--;
    return end;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The LSN field of a would-be frame header at p (the layout of frame.h). */
static uint64_t peek_lsn(const uint8_t *p)
{
    return (uint64_t)le32(p + 8) | (uint64_t)le32(p + 12) << 32;
}

/* An LSN that no frame in the directory can exceed: LSNs grow by one per
 * frame of at least MIN_FRAME bytes from a segment's first_lsn. UINT64_MAX
 * when nothing anchors it. */
static uint64_t lsn_ceiling(replay_t *r)
{
    for (size_t i = 0; !r->surveyed && i < r->nseqs; i++) {
        char path[PATH_BYTES], err[WHY_BYTES];
        bq_segment_path(path, sizeof path, r->dir, r->seqs[i]);
        int fd = bq_segment_open_file(path, O_RDONLY, 0);
        struct stat st;
        bq_segment_meta_t m;
        uint64_t ds;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0)
            r->all_bytes += (uint64_t)st.st_size;
        if (bq_segment_read_meta(fd, &m, &ds, err, sizeof err) == 0 && m.first_lsn > r->all_first)
            r->all_first = m.first_lsn;
        close(fd);
    }
    r->surveyed = true;
    uint64_t base = r->all_first > r->last ? r->all_first : r->last;
    uint64_t span = r->all_bytes / MIN_FRAME + 1;
    if (base == 0 || base > UINT64_MAX - span)
        return UINT64_MAX;
    return base + span;
}

/* The offset of the first frame at or after from in s that decodes with a
 * valid checksum and an LSN in [lo, hi], or NONE. */
static size_t next_valid(const seg_t *s, size_t from, uint64_t lo, uint64_t hi)
{
    for (size_t p = from; p < s->size && s->size - p >= MIN_FRAME; p++) {
        uint64_t lsn = peek_lsn(s->data + p);
        bq_frame_t f;
        const uint8_t *payload;
        if (lsn >= lo && lsn <= hi &&
            bq_frame_decode(s->data + p, s->size - p, &f, &payload) == BQ_FRAME_OK)
            return p;
    }
    return NONE;
}

/* True when every segment after the current one holds no data: it ends
 * inside its prefix, or has only zeros after a valid one. */
static bool later_empty(const replay_t *r)
{
    for (size_t i = r->idx + 1; i < r->nseqs; i++) {
        seg_t s;
        bq_segment_meta_t m;
        uint64_t ds;
        char err[WHY_BYTES];
        if (seg_open(r->dir, r->seqs[i], &s) != 0)
            return false;
        bq_segment_status_t st = bq_segment_decode_meta(s.data, s.size, &m, &ds, err, sizeof err);
        bool empty = st == BQ_SEGMENT_SHORT ||
                     (st == BQ_SEGMENT_OK && nonzero_end(s.data, (size_t)ds, s.size) == ds);
        seg_close(&s);
        if (!empty)
            return false;
    }
    return true;
}

/* True when the file at path holds exactly data[0..len). */
static bool same_file(const char *path, const uint8_t *data, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    bool same = fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size == len;
    uint8_t buf[65536];
    for (size_t off = 0; same && off < len;) {
        size_t want = len - off < sizeof buf ? len - off : sizeof buf;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        same = n > 0 && memcmp(buf, data + off, (size_t)n) == 0;
        off += n > 0 ? (size_t)n : 0;
    }
    if (fd >= 0)
        close(fd);
    return same;
}

/* Picks the name for the damaged bytes of s at off: <segment>.corrupt-<off>,
 * or with .1, .2, ... when taken. 0: the name is free; 1: it already holds
 * exactly data[0..len) (a previous start copied them; data NULL never
 * matches); -1: no free name. */
static int aside_name(const seg_t *s, size_t off, const uint8_t *data, size_t len, char *path,
                      size_t cap)
{
    for (unsigned n = 0; n < 1000; n++) {
        int k = n == 0 ? snprintf(path, cap, "%s.corrupt-%zu", s->path, off)
                       : snprintf(path, cap, "%s.corrupt-%zu.%u", s->path, off, n);
        if (k < 0 || (size_t)k >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        struct stat st;
        if (lstat(path, &st) != 0 && errno == ENOENT)
            return 0;
        if (data && same_file(path, data, len))
            return 1;
    }
    errno = EEXIST;
    return -1;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Copies s->data[off..end) to a new file beside s and syncs it, so that
 * damaged bytes are never lost; its name goes to path. 0, or -1 (logged). */
static int copy_aside(const replay_t *r, const seg_t *s, size_t off, size_t end, char *path,
                      size_t cap)
{
    int named = aside_name(s, off, s->data + off, end - off, path, cap);
    if (named == 1)
        return 0;
    int fd = -1, err = 0;
    if (named < 0)
        err = errno;
    else if ((fd = bq_segment_open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0)
        err = errno;
    else if (write_all(fd, s->data + off, end - off) != 0 || fsync(fd) != 0)
        err = errno;
    if (fd >= 0 && close(fd) != 0 && !err)
        err = errno;
    if (!err)
        err = -bq_segment_sync_dir(r->dir);
    if (!err)
        return 0;
    if (fd >= 0)
        unlink(path);
    bq_log(BQ_LOG_ERROR, "cannot copy damaged binlog bytes aside; not starting",
           "segment=\"%s\" offset=%zu bytes=%zu copy=\"%s\" err=\"%s\"", s->path, off, end - off,
           path, strerror(err));
    return -1;
}

/* Moves segment s aside as a whole: its prefix is damaged and nothing valid
 * follows. 0, or -1 (logged). */
static int move_aside(replay_t *r, seg_t *s, const char *why)
{
    char path[PATH_BYTES];
    if (aside_name(s, 0, NULL, 0, path, sizeof path) != 0 || rename(s->path, path) != 0 ||
        bq_segment_sync_dir(r->dir) != 0) {
        bq_log(BQ_LOG_ERROR, "cannot move a damaged binlog segment aside; not starting",
               "segment=\"%s\" reason=\"%s\" err=\"%s\"", s->path, why, strerror(errno));
        return -1;
    }
    bq_log(BQ_LOG_WARN, "binlog segment with a damaged prefix and no frames moved aside",
           "segment=\"%s\" bytes=%zu reason=\"%s\" moved_to=\"%s\"", s->path, s->size, why, path);
    s->moved = true;
    s->clean = false;
    r->res->damaged++;
    return 0;
}

/* A torn tail at off: copies the damaged bytes aside, then cuts them off the
 * segment. 0, or -1 (logged). */
static int cut_tail(replay_t *r, seg_t *s, size_t off, const char *why)
{
    if (off == 0)
        return move_aside(r, s, why);
    size_t end = nonzero_end(s->data, off, s->size);
    char path[PATH_BYTES] = "none (only zeros)";
    if (end > off && copy_aside(r, s, off, end, path, sizeof path) != 0)
        return -1;
    if (ftruncate(s->fd, (off_t)off) != 0 || fsync(s->fd) != 0) {
        bq_log(BQ_LOG_ERROR, "cannot truncate a torn binlog tail; not starting",
               "segment=\"%s\" offset=%zu err=\"%s\"", s->path, off, strerror(errno));
        return -1;
    }
    bq_log(BQ_LOG_WARN, "torn binlog tail cut off (its bytes are kept in the copy)",
           "segment=\"%s\" offset=%zu bytes=%zu reason=\"%s\" copy=\"%s\"", s->path, off, end - off,
           why, path);
    s->size = off;
    r->res->damaged++;
    return 0;
}

/* Skipped damage (skip_corrupt) at off: copies the bytes up to next (the
 * next valid frame, or NONE) aside and lets the next LSN jump. */
static int skip_damage(replay_t *r, seg_t *s, size_t off, size_t next, const char *why)
{
    size_t end = next == NONE ? nonzero_end(s->data, off, s->size) : next;
    char path[PATH_BYTES] = "none (only zeros)";
    if (end > off && copy_aside(r, s, off, end, path, sizeof path) != 0)
        return -1;
    bq_log(BQ_LOG_WARN, SKIP_WARNING,
           "segment=\"%s\" offset=%zu bytes=%zu reason=\"%s\" copy=\"%s\" resumes_at=%s", s->path,
           off, end - off, why, path, next == NONE ? "next-segment" : "next-frame");
    s->clean = false;
    r->resync = true;
    r->res->damaged++;
    r->res->skipped++;
    return 0;
}

/* Whether the damage at s->data[off], where a frame should start, up to
 * the next valid frame at end, shows a block the page cache never wrote
 * back: a whole sector-aligned 512-byte sector of zeros (segments are
 * preallocated, so unwritten blocks read as zeros), or zeros from off to
 * the end of its sector (the sector as the last fsync left it, when that
 * fsync ended inside it). */
static bool unwritten_sector_in(const seg_t *s, size_t off, size_t end)
{
    static const uint8_t zero[SECTOR];
    size_t first = (off + SECTOR - 1) / SECTOR * SECTOR;
    if (first > off && first <= end && memcmp(s->data + off, zero, first - off) == 0)
        return true;
    for (size_t p = first; p + SECTOR <= end; p += SECTOR)
        if (memcmp(s->data + p, zero, SECTOR) == 0)
            return true;
    return false;
}

/* Deals with damage at s->data[off] (replay.h): sets *next to where replay
 * goes on in s (s->size when nothing more of s can be used). 0, or -1 when
 * start-up must stop. */
static int damage(replay_t *r, seg_t *s, size_t off, const char *why, size_t *next)
{
    size_t valid = next_valid(s, off + 1, r->last + 1, lsn_ceiling(r));
    if (valid == NONE && later_empty(r)) {
        int rc = cut_tail(r, s, off, why);
        *next = s->size;
        return rc;
    }
    /* In the last segment, a hole of unwritten sectors followed by valid
     * frames is what a power loss leaves when the page cache wrote the
     * unsynced tail back out of order: every frame after the hole is
     * unsynced too (an fsync covering it would have covered the hole), so
     * nothing there was promised beyond what -f allows; it is a torn tail. */
    if (valid != NONE && later_empty(r) && unwritten_sector_in(s, off, valid)) {
        char what[WHY_BYTES + 64];
        snprintf(what, sizeof what, "%s; unwritten sectors, then frames never synced", why);
        int rc = cut_tail(r, s, off, what);
        *next = s->size;
        return rc;
    }
    if (!r->skip_corrupt) {
        bq_log(BQ_LOG_ERROR, "binlog damaged before its end; not starting",
               "segment=\"%s\" offset=%zu reason=\"%s\" data_after=\"%s\" hint=\"%s\"", s->path,
               off, why, valid == NONE ? "in later segments" : "valid frames follow", SKIP_HINT);
        return -1;
    }
    *next = valid == NONE ? s->size : valid;
    return skip_damage(r, s, off, valid, why);
}

/* The valid frame f at off has an LSN beyond the next one: frames are
 * missing. 0 to go on (skip_corrupt), or -1. */
static int lsn_gap(replay_t *r, const seg_t *s, size_t off, uint64_t lsn)
{
    uint64_t missing = lsn - r->last - 1;
    if (!r->skip_corrupt) {
        bq_log(BQ_LOG_ERROR, "binlog frames are missing; not starting",
               "segment=\"%s\" offset=%zu expected_lsn=%" PRIu64 " found_lsn=%" PRIu64
               " missing=%" PRIu64 " hint=\"%s\"",
               s->path, off, r->last + 1, lsn, missing, SKIP_HINT);
        return -1;
    }
    bq_log(BQ_LOG_WARN, SKIP_WARNING,
           "segment=\"%s\" offset=%zu reason=\"LSN gap\" expected_lsn=%" PRIu64
           " found_lsn=%" PRIu64 " missing=%" PRIu64,
           s->path, off, r->last + 1, lsn, missing);
    r->res->damaged++;
    r->res->skipped++;
    return 0;
}

enum { LSN_OK, LSN_BAD, LSN_GAP };

/* Whether valid frame f may be applied next (first: its segment header's
 * first_lsn when f is the segment's first frame, else NULL). */
static int check_lsn(const replay_t *r, const bq_frame_t *f, const uint64_t *first, char *why)
{
    if (first && f->lsn != *first) {
        snprintf(why, WHY_BYTES,
                 "first frame has LSN %" PRIu64 ", its segment header says %" PRIu64, f->lsn,
                 *first);
        return LSN_BAD;
    }
    if (f->lsn <= r->last) {
        snprintf(why, WHY_BYTES, "LSN %" PRIu64 " is not after the last applied LSN %" PRIu64,
                 f->lsn, r->last);
        return LSN_BAD;
    }
    if (r->last && f->lsn != r->last + 1 && !r->resync)
        return LSN_GAP;
    return LSN_OK;
}

/* Applies the frames of s from pos. 0, or -1 when start-up must stop. */
static int replay_frames(replay_t *r, seg_t *s, size_t pos, const uint64_t *first)
{
    char why[WHY_BYTES];
    while (pos < s->size) {
        bq_frame_t f;
        const uint8_t *payload;
        bq_frame_status_t st = bq_frame_decode(s->data + pos, s->size - pos, &f, &payload);
        int v = LSN_BAD;
        if (st == BQ_FRAME_END && nonzero_end(s->data, pos, s->size) == pos)
            break;
        if (st == BQ_FRAME_END)
            snprintf(why, sizeof why, "non-zero bytes after the end-of-data marker");
        else if (st != BQ_FRAME_OK)
            snprintf(why, sizeof why, "%s", bq_frame_status_name(st));
        else
            v = check_lsn(r, &f, first, why);
        if (v == LSN_GAP && lsn_gap(r, s, pos, f.lsn) != 0)
            return -1;
        if (v != LSN_BAD) {
            int rc = bq_engine_apply(r->e, payload, f.len, (uint32_t)s->seq, r->now);
            if (rc == BQ_ENOMEM) {
                bq_log(BQ_LOG_ERROR, "out of memory replaying the binlog; not starting",
                       "segment=\"%s\" offset=%zu", s->path, pos);
                return -1;
            }
            if (rc == 0) {
                r->last = f.lsn;
                r->res->last_epoch = f.epoch;
                r->res->records++;
                r->resync = false;
                first = NULL;
                pos += BQ_FRAME_HEADER + (size_t)f.len;
                continue;
            }
            snprintf(why, sizeof why,
                     "a record this version cannot apply (its checksum is valid: written by a "
                     "newer version?)");
        }
        first = NULL;
        if (damage(r, s, pos, why, &pos) != 0)
            return -1;
    }
    s->end = pos < s->size ? pos : s->size;
    return 0;
}

/* Replays segment r->seqs[i]. 0, or -1 when start-up must stop. */
static int replay_segment(replay_t *r, size_t i)
{
    seg_t s;
    if (seg_open(r->dir, r->seqs[i], &s) != 0)
        return -1;
    r->idx = i;
    bq_segment_meta_t m;
    uint64_t ds;
    char why[WHY_BYTES];
    bq_segment_status_t st = bq_segment_decode_meta(s.data, s.size, &m, &ds, why, sizeof why);
    if (st == BQ_SEGMENT_BAD_VERSION) {
        bq_log(BQ_LOG_ERROR, "binlog segment of a format version this build cannot read",
               "segment=\"%s\" version=%" PRIu32 " supported=%u", s.path, le32(s.data + 8),
               BQ_SEGMENT_VERSION);
        seg_close(&s);
        return -1;
    }
    if (st == BQ_SEGMENT_OK && m.seq != s.seq) {
        snprintf(why, sizeof why, "segment header names segment %" PRIu64, m.seq);
        st = BQ_SEGMENT_BAD_HEADER;
    }
    int rc;
    if (st == BQ_SEGMENT_OK) {
        if (m.first_lsn > r->max_first) {
            r->max_first = m.first_lsn;
            r->max_epoch = m.epoch;
        }
        rc = replay_frames(r, &s, (size_t)ds, &m.first_lsn);
    } else {
        size_t next;
        s.clean = false;
        rc = damage(r, &s, 0, why, &next);
        if (rc == 0 && !s.moved)
            rc = replay_frames(r, &s, next, NULL);
    }
    if (i + 1 == r->nseqs)
        r->res->end_offset = s.clean ? s.end : 0;
    seg_close(&s);
    return rc;
}

/* Lists the segments of r->dir into r. 0, or -1 (logged). */
static int list_segments(replay_t *r)
{
    bool beanstalkd;
    int rc = bq_segment_list(r->dir, &r->seqs, &r->nseqs, &beanstalkd);
    if (rc != 0) {
        bq_log(BQ_LOG_ERROR, "cannot list the binlog directory", "dir=\"%s\" err=\"%s\"", r->dir,
               strerror(-rc));
        return -1;
    }
    if (beanstalkd && r->nseqs == 0) {
        bq_log(BQ_LOG_ERROR,
               "the binlog directory holds beanstalkd binlog files (binlog.N) and no "
               "beanstalkd-ha segment; starting would drop their jobs",
               "dir=\"%s\" hint=\"import them into another directory with "
               "--import-beanstalkd (docs/import-from-beanstalkd.md)\"",
               r->dir);
        return -1;
    }
    if (beanstalkd)
        bq_log(BQ_LOG_WARN, "the binlog directory also holds beanstalkd binlog files; ignored",
               "dir=\"%s\"", r->dir);
    return 0;
}

int bq_replay(const char *dir, bq_engine_t *e, bq_now_t now, bool skip_corrupt,
              bq_replay_result_t *res)
{
    memset(res, 0, sizeof *res);
    replay_t r = {.dir = dir, .e = e, .now = now, .skip_corrupt = skip_corrupt, .res = res};
    if (list_segments(&r) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < r.nseqs && rc == 0; i++)
        rc = replay_segment(&r, i);
    if (r.nseqs) {
        res->first_seq = r.seqs[0];
        res->last_seq = r.seqs[r.nseqs - 1];
    }
    if (!r.last && r.max_first) {
        res->last_lsn = r.max_first - 1;
        res->last_epoch = r.max_epoch;
    } else {
        res->last_lsn = r.last;
    }
    free(r.seqs);
    if (rc == 0)
        bq_log(BQ_LOG_INFO, "binlog replayed",
               "dir=\"%s\" segments=%zu records=%" PRIu64 " last_lsn=%" PRIu64 " damaged=%" PRIu64,
               dir, r.nseqs, res->records, res->last_lsn, res->damaged);
    return rc;
}
