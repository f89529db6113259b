/* The binlog writer. Records logged by the engine during a loop turn are
 * framed into one batch buffer; at the end of the turn the batch goes to the
 * current segment with one pwrite (to the page cache, on the loop thread),
 * and the fsync policy runs:
 *
 *   -f 0   an fdatasync on the libuv threadpool covers everything written so
 *          far; replies wait for it. Records written while it runs are
 *          covered by the next one, started at once: group commit.
 *   -f MS  a timer armed at the first write no fsync covers starts the
 *          fsync at most MS ms later; replies wait only for the write.
 *          While the node waits for its own durable LSN to release replies
 *          (bq_binlog_sync_eagerly: a cluster primary whose copy is one of
 *          those a reply needs), writes start the fsync at once instead.
 *   -F     no fsync; replies wait only for the write.
 *
 * Every fdatasync is timed around the call, on the thread that makes it,
 * into a histogram for /metrics (bq_binlog_fsync_histogram).
 *
 * In every mode an id reservation (entry.sync) is fsynced before any reply
 * after it leaves. The node asks bq_binlog_release_lsn() which replies may
 * leave and is told through the release callback when that advances.
 *
 * Space: segments are preallocated, and every record but a delete must leave
 * room for one delete per live job, so deletes keep working on a full disk.
 * Write and fsync errors keep the batch and retry with backoff; meanwhile
 * only deletes are taken. Rotation happens at the end of a turn once a
 * segment holds -s bytes; compaction removes the oldest segment once no live
 * job's full record is in it, moving live jobs forward when the log is more
 * than twice the size it needs. policy.c holds these decisions. */
#include "node/binlog/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "node/base/log.h"
#include "node/binlog/replay.h"
#include "node/binlog/resync.h"
#include "node/binlog/segment.h"

/* The engine keeps 29 bits of a segment number per job. */
#define FILE_MASK ((1u << 29) - 1)
/* Compaction work per loop turn. */
#define MIGRATE_JOBS 256
#define MIGRATE_BYTES ((size_t)64 * 1024)
#define MIGRATE_SCAN 32
/* Backoff between retries of a failed write or fsync. */
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000
#define ROTATE_RETRY_MS 1000
/* A batch buffer larger than this is freed after its turn. */
#define BATCH_KEEP ((size_t)1 << 20)
/* Room for the clean-stop marker's payload (an id reservation). */
#define CLEAN_STOP_MAX 64

static void start_sync(bq_binlog_t *b);
static void on_synced(void *arg, int res, int64_t ns);

static bool failing(const bq_binlog_t *b)
{
    return b->write_failed || b->sync_failed;
}

bool bq_binlog_failing(const bq_binlog_t *b)
{
    return failing(b);
}

/* The segment whose number the engine stored as `file`, or NULL. */
/* The segment numbered file: a binary search (segments are oldest first,
 * their numbers rising), then a scan should the numbers have wrapped past
 * FILE_MASK. */
static seg_t *find_seg(bq_binlog_t *b, uint32_t file)
{
    uint32_t want = file & FILE_MASK;
    size_t lo = 0, hi = b->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t at = (uint32_t)(b->segs[mid].seq & FILE_MASK);
        if (at == want)
            return &b->segs[mid];
        if (at < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = b->nsegs; i-- > 0;)
        if ((b->segs[i].seq & FILE_MASK) == want)
            return &b->segs[i];
    return NULL;
}

static int grow_segs(bq_binlog_t *b)
{
    if (b->nsegs < b->segcap)
        return 0;
    size_t cap = b->segcap ? b->segcap * 2 : 16;
    seg_t *p = realloc(b->segs, cap * sizeof *p);
    if (!p)
        return -1;
    b->segs = p;
    b->segcap = cap;
    return 0;
}

/* Preallocation goes through here for the BQ_FAULT_FALLOCATE_FAIL_AFTER seam:
 * every preallocation after the first N fails with ENOSPC. */
static bool fault_now(bq_binlog_t *b)
{
    return b->fault_after >= 0 && b->fallocs++ >= b->fault_after;
}

static int preallocate(bq_binlog_t *b, uint64_t size)
{
    return fault_now(b) ? -ENOSPC : bq_segment_preallocate(b->fd, size);
}

static void update_release(bq_binlog_t *b)
{
    uint64_t r = bq_binlog_lsns_release(&b->lsns, b->cfg.sync);
    bool more = r > b->release || b->lsns.synced > b->synced_told;
    if (r > b->release)
        b->release = r;
    b->synced_told = b->lsns.synced;
    if (more && b->released)
        b->released(b->released_arg);
}

/* ---- start-up ---- */

int bq_binlog_open(bq_binlog_t **out, uv_loop_t *loop, const bq_binlog_config_t *cfg)
{
    char err[256];
    uint64_t *seqs = NULL;
    size_t n = 0;
    bool foreign = false;

    if (bq_segment_lock_dir(cfg->dir, err, sizeof err) != 0) {
        bq_log(BQ_LOG_ERROR, "cannot use the binlog directory", "dir=\"%s\" err=\"%s\"", cfg->dir,
               err);
        return BQ_BINLOG_EDIR;
    }
    /* A standby's completed resync replaces the log before anything reads it. */
    if (bq_resync_install(cfg->dir) != 0)
        return BQ_BINLOG_EDIR;
    int r = bq_segment_list(cfg->dir, &seqs, &n, &foreign);
    free(seqs);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot list the binlog directory", "dir=\"%s\" err=\"%s\"", cfg->dir,
               strerror(-r));
        return BQ_BINLOG_EDIR;
    }
    if (foreign) {
        bq_log(BQ_LOG_ERROR,
               "the binlog directory holds beanstalkd binlog files (binlog.N), which are not read "
               "in place; move them to another directory SRC_DIR and import them with "
               "--import-beanstalkd SRC_DIR",
               "dir=\"%s\"", cfg->dir);
        return BQ_BINLOG_EDIR;
    }
    bq_binlog_t *b = calloc(1, sizeof *b);
    if (!b)
        return BQ_BINLOG_ENOMEM;
    b->loop = loop;
    b->cfg = *cfg;
    /* A standby's acks say "durable": it syncs what it receives at once.
     * The -f mode given returns when it becomes the primary. */
    b->primary_sync = cfg->sync;
    if (cfg->follower && cfg->sync == BQ_BINLOG_SYNC_TIMED)
        b->cfg.sync = BQ_BINLOG_SYNC_ALWAYS;
    b->fd = b->sync_fd = -1;
    b->dirty_since = -1;
    b->fault_after = -1;
#ifdef BQ_TEST_HOOKS /* only with -DBQ_TEST_HOOKS=ON (CMakeLists.txt) */
    const char *fault = getenv("BQ_FAULT_FALLOCATE_FAIL_AFTER");
    if (fault && *fault)
        b->fault_after = strtol(fault, NULL, 10);
    if (b->fault_after >= 0)
        bq_logm(BQ_LOG_WARN, "binlog test hooks are on (BQ_FAULT_*): tests only");
#endif
    r = bq_fsync_thread_init(&b->syncer, loop, on_synced, b);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot start the binlog's fsync thread", "err=\"%s\"",
               uv_strerror(r));
        free(b);
        return BQ_BINLOG_ENOMEM;
    }
    uv_timer_init(loop, &b->sync_timer);
    uv_timer_init(loop, &b->retry_timer);
    b->sync_timer.data = b->retry_timer.data = b;
    *out = b;
    return 0;
}

void bq_binlog_on_release(bq_binlog_t *b, void (*released)(void *arg), void *arg)
{
    b->released = released;
    b->released_arg = arg;
}

/* A segment left after replay, described by its header; one whose header
 * cannot be read (replay skipped its damage) counts as empty. */
static seg_t load_meta(const char *path, uint64_t seq, uint64_t size)
{
    seg_t sg = {.seq = seq, .size = size, .data_start = size};
    bq_segment_meta_t m;
    uint64_t start;
    char err[160];
    int fd = bq_segment_open_file(path, O_RDONLY, 0);
    if (fd >= 0 && bq_segment_read_meta(fd, &m, &start, err, sizeof err) == 0) {
        sg.first_lsn = m.first_lsn;
        sg.epoch = m.epoch;
        sg.created_wall = m.created_wall;
        sg.data_start = start;
        sg.checkpoint = m.checkpoint;
    }
    if (fd >= 0)
        close(fd);
    return sg;
}

/* Lists the segments left after replay with their sizes. */
static int load_segments(bq_binlog_t *b)
{
    uint64_t *seqs = NULL;
    size_t n = 0;
    bool foreign = false;
    int r = bq_segment_list(b->cfg.dir, &seqs, &n, &foreign);
    for (size_t i = 0; r == 0 && i < n; i++) {
        char path[PATH_MAX];
        struct stat st;
        bq_segment_path(path, sizeof path, b->cfg.dir, seqs[i]);
        if (stat(path, &st) != 0)
            r = -errno;
        else if (grow_segs(b) != 0)
            r = -ENOMEM;
        else
            b->segs[b->nsegs++] = load_meta(path, seqs[i], (uint64_t)st.st_size);
        if (r == 0)
            b->total += (uint64_t)st.st_size;
    }
    free(seqs);
    return r;
}

void bq__binlog_count_job(void *arg, uint32_t file)
{
    bq_binlog_t *b = arg;
    seg_t *sg = find_seg(b, file);
    if (sg)
        sg->jobs++;
    b->live_jobs++;
}

/* Trims the last segment of the previous run to where replay found its
 * data ends (unless damage was skipped in it: then it stays as it is) and
 * syncs it, so that everything before the new segment is on disk. */
static int close_last(bq_binlog_t *b, uint64_t end)
{
    seg_t *sg = bq__binlog_current(b);
    char path[PATH_MAX];
    bq_segment_path(path, sizeof path, b->cfg.dir, sg->seq);
    int fd = bq_segment_open_file(path, O_RDWR, 0);
    int r = fd < 0 ? -errno : 0;
    if (r == 0 && end > 0 && end < sg->size && ftruncate(fd, (off_t)end) != 0)
        r = -errno;
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    if (fd >= 0)
        close(fd);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot close the last binlog segment", "file=\"%s\" err=\"%s\"", path,
               strerror(-r));
        return r;
    }
    if (end > 0 && end < sg->size) {
        b->total = b->total - sg->size + end;
        sg->size = end;
    }
    return 0;
}

/* Creates segment seq, starting at the next LSN, as the current one. */
int bq__binlog_create_segment(bq_binlog_t *b, uint64_t seq, bool checkpoint, bq_now_t now)
{
    bq_segment_meta_t meta = {.seq = seq,
                              .first_lsn = b->lsns.last + 1,
                              .epoch = b->epoch,
                              .created_wall = now.wall,
                              .checkpoint = checkpoint};
    snprintf(meta.node_id, sizeof meta.node_id, "%s", b->cfg.node_id ? b->cfg.node_id : "");
    snprintf(meta.cluster_id, sizeof meta.cluster_id, "%s",
             b->cfg.cluster_id ? b->cfg.cluster_id : "");
    uint64_t size = bq_binlog_segment_alloc(b->cfg.seg_size, b->live_jobs), start = 0;
    if (grow_segs(b) != 0)
        return -ENOMEM;
    int fd = fault_now(b) ? -ENOSPC : bq_segment_create(b->cfg.dir, &meta, size, &start);
    if (fd < 0)
        return fd;
    b->segs[b->nsegs++] = (seg_t){.seq = seq,
                                  .first_lsn = meta.first_lsn,
                                  .epoch = meta.epoch,
                                  .created_wall = meta.created_wall,
                                  .data_start = start,
                                  .checkpoint = checkpoint,
                                  .size = size};
    b->total += size;
    b->fd = fd;
    b->data_end = start;
    b->prealloc = size;
    return 0;
}

int bq__binlog_open_segment(bq_binlog_t *b, uint64_t seq, bq_now_t now)
{
    int r = bq__binlog_create_segment(b, seq, true, now);
    if (r != 0)
        return r;
    b->fresh = b->in_checkpoint = true;
    bq_engine_log_checkpoint(b->engine, now);
    b->in_checkpoint = false;
    return 0;
}

/* Sets where job ids go on after replay (docs/binlog.md, "Job ids after a
 * restart"), and what the new segment's reservations will say of them. */
static void resume_ids(bq_binlog_t *b, bq_engine_t *e, const bq_replay_result_t *res)
{
    bool may = bq_binlog_ids_may_continue(b->cfg.standalone, res->last_epoch, res->skipped);
    bq_engine_resume_ids(e, may);
    /* A new epoch after another: ids its primary may have handed out from a
     * block this log never got are skipped. */
    if (b->cfg.new_epoch && res->last_epoch > 0)
        bq_engine_skip_id_block(e);
    bq_engine_set_ids_durable(e, bq_binlog_ids_durable(b));
}

int bq_binlog_start(bq_binlog_t *b, bq_engine_t *e, bq_now_t now)
{
    bq_replay_result_t res;
    b->engine = e;
    if (bq_replay(b->cfg.dir, e, now, b->cfg.skip_corrupt, &res) != 0)
        return BQ_BINLOG_EREPLAY;
    int r = load_segments(b);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot read the binlog directory", "dir=\"%s\" err=\"%s\"",
               b->cfg.dir, strerror(-r));
        return BQ_BINLOG_EDIR;
    }
    bq_engine_each_job_file(e, bq__binlog_count_job, b);
    uint64_t end = b->nsegs > 0 && bq__binlog_current(b)->seq == res.last_seq ? res.end_offset : 0;
    if (b->nsegs > 0 && close_last(b, end) != 0)
        return BQ_BINLOG_EDIR;
    b->lsns.last = b->lsns.written = b->lsns.synced = b->release = res.last_lsn;
    b->synced_told = res.last_lsn;
    b->epoch = res.last_epoch;
    if (b->cfg.new_epoch && (res.last_epoch >= BQ_EPOCH_MAX || b->cfg.min_epoch > BQ_EPOCH_MAX)) {
        bq_log(BQ_LOG_ERROR, "the binlog's epoch is at the limit: no new epoch can follow",
               "dir=\"%s\" epoch=%llu (docs/failover.md)", b->cfg.dir,
               (unsigned long long)res.last_epoch);
        return BQ_BINLOG_EREPLAY;
    }
    if (b->cfg.new_epoch)
        b->epoch = res.last_epoch + 1 > b->cfg.min_epoch ? res.last_epoch + 1 : b->cfg.min_epoch;
    if (b->cfg.follower) {
        bq_log(BQ_LOG_INFO, "binlog open (standby)",
               "dir=\"%s\" jobs=%llu last_lsn=%llu epoch=%llu", b->cfg.dir,
               (unsigned long long)b->live_jobs, (unsigned long long)res.last_lsn,
               (unsigned long long)b->epoch);
        return 0;
    }
    resume_ids(b, e, &res);
    /* Past every number replay saw, even one it moved aside. */
    uint64_t seq =
        (b->nsegs > 0 && bq__binlog_current(b)->seq > res.last_seq ? bq__binlog_current(b)->seq
                                                                   : res.last_seq) +
        1;
    r = bq__binlog_open_segment(b, seq, now);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot create a binlog segment", "dir=\"%s\" seq=%llu err=\"%s\"",
               b->cfg.dir, (unsigned long long)seq, strerror(-r));
        return BQ_BINLOG_EDIR;
    }
    bq_log(BQ_LOG_INFO, "binlog open", "dir=\"%s\" segment=%llu jobs=%llu next_lsn=%llu epoch=%llu",
           b->cfg.dir, (unsigned long long)seq, (unsigned long long)b->live_jobs,
           (unsigned long long)(res.last_lsn + 1), (unsigned long long)b->epoch);
    return 0;
}

int bq__binlog_replay_again(bq_binlog_t *b, bq_now_t now)
{
    bq_replay_result_t res;
    if (bq_engine_reset(b->engine) != 0)
        return -ENOMEM;
    if (bq_replay(b->cfg.dir, b->engine, now, b->cfg.skip_corrupt, &res) != 0)
        return -EIO;
    b->nsegs = 0;
    b->total = 0;
    b->live_jobs = 0;
    int r = load_segments(b);
    if (r != 0)
        return r;
    bq_engine_each_job_file(b->engine, bq__binlog_count_job, b);
    b->lsns.last = b->lsns.written = b->lsns.synced = b->release = res.last_lsn;
    b->synced_told = res.last_lsn;
    b->epoch = res.last_epoch;
    return 0;
}

int bq__binlog_close_current(bq_binlog_t *b)
{
    bq__binlog_flush(b);
    if (b->batch_len > 0)
        return -EAGAIN; /* the write failed; it is being retried */
    if (b->fd < 0)
        return 0;
    if (bq__binlog_sync_before_rotation(b) != 0)
        return -EIO;
    bq__binlog_retire(b, bq__binlog_current(b), b->fd, b->data_end, b->prealloc);
    b->fd = -1;
    return 0;
}

/* ---- appending ---- */

int bq__binlog_ensure_batch(bq_binlog_t *b, size_t need)
{
    if (need <= b->batch_cap)
        return 0;
    size_t cap = b->batch_cap ? b->batch_cap : 64 * 1024;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(b->batch, cap);
    if (!p)
        return -1;
    b->batch = p;
    b->batch_cap = cap;
    return 0;
}

bq_room_t bq_binlog_room(void *arg, size_t bytes, bool is_delete)
{
    bq_binlog_t *b = arg;
    bq_binlog_space_t sp = {
        .used = b->data_end + b->batch_len,
        .prealloc = b->prealloc,
        .live_jobs = b->live_jobs,
        .seg_size = b->cfg.seg_size,
        .failing = failing(b),
    };
    uint64_t grow_to = 0;

    /* The batch has room too, so the log hook need not allocate. */
    if (bq__binlog_ensure_batch(b, b->batch_len + BQ_FRAME_HEADER + bytes) != 0)
        return BQ_ROOM_FULL;
    switch (bq_binlog_room_decide(&sp, bytes, is_delete, &grow_to)) {
    case BQ_BINLOG_ROOM_GRANT:
        return BQ_ROOM_GRANTED;
    case BQ_BINLOG_ROOM_REFUSE:
        bq_log_limited(&b->room_warn, BQ_LOG_WARN, "binlog is failing; refusing a change",
                       "dir=\"%s\"", b->cfg.dir);
        return BQ_ROOM_FULL;
    case BQ_BINLOG_ROOM_GROW:
        break;
    }
    int r = preallocate(b, grow_to);
    if (r != 0) {
        bq_log_limited(&b->room_warn, BQ_LOG_WARN, "binlog cannot grow; refusing a change",
                       "dir=\"%s\" size=%llu err=\"%s\"", b->cfg.dir, (unsigned long long)grow_to,
                       strerror(-r));
        return BQ_ROOM_FULL;
    }
    b->total += grow_to - b->prealloc;
    bq__binlog_current(b)->size = grow_to;
    b->prealloc = grow_to;
    return BQ_ROOM_GRANTED;
}

/* A job's latest full record left segment `file` at lsn. */
static void job_left(bq_binlog_t *b, uint32_t file, uint64_t lsn)
{
    seg_t *sg = find_seg(b, file);
    if (sg) {
        if (sg->jobs > 0)
            sg->jobs--;
        sg->moved_lsn = lsn;
    }
}

void bq__binlog_count_change(bq_binlog_t *b, bool full, bool gone, uint32_t prev_file, uint64_t lsn)
{
    seg_t *cur = bq__binlog_current(b);
    if (full) {
        cur->jobs++;
        if (prev_file)
            job_left(b, prev_file, lsn);
        else
            b->live_jobs++;
    } else if (gone) {
        if (prev_file)
            job_left(b, prev_file, lsn);
        if (b->live_jobs > 0)
            b->live_jobs--;
    }
}

uint32_t bq_binlog_log(void *arg, const bq_log_entry_t *en)
{
    bq_binlog_t *b = arg;
    size_t need = b->batch_len + BQ_FRAME_HEADER + en->len;

    if (bq__binlog_ensure_batch(b, need) != 0) {
        /* Only records logged without a room check (a segment's opening
         * records) can get here; the log must not lose a record. */
        bq_logm(BQ_LOG_ERROR, "out of memory in the binlog batch");
        abort();
    }
    uint64_t lsn = ++b->lsns.last;
    uint8_t *p = b->batch + b->batch_len;
    bq_frame_header(p, lsn, b->epoch, en->data, (uint32_t)en->len);
    memcpy(p + BQ_FRAME_HEADER, en->data, en->len);
    b->batch_len = need;
    seg_t *cur = bq__binlog_current(b);
    bq__binlog_count_change(b, en->full, en->gone, en->prev_file, lsn);
    if (en->sync)
        bq_binlog_lsns_need_sync(&b->lsns, lsn);
    if (!b->in_checkpoint)
        b->fresh = false;
    b->written_ct++;
    if (!en->meta)
        b->counted_ct++;
    return (uint32_t)cur->seq;
}

/* Writes the batch at the data end; on an error keeps what is unwritten.
 * 0 or -errno. */
static int write_batch(bq_binlog_t *b)
{
    size_t off = 0;
    int r = 0;
    while (off < b->batch_len) {
        ssize_t n = pwrite(b->fd, b->batch + off, b->batch_len - off, (off_t)(b->data_end + off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : -EIO;
            break;
        }
        off += (size_t)n;
    }
    b->data_end += off;
    b->bytes_out += off;
    b->batch_len -= off;
    if (b->batch_len > 0)
        memmove(b->batch, b->batch + off, b->batch_len);
    else
        b->lsns.written = b->lsns.last;
    return r;
}

static void on_retry(uv_timer_t *t);

static void schedule_retry(bq_binlog_t *b)
{
    if (b->stopping)
        return;
    b->backoff_ms = b->backoff_ms ? b->backoff_ms * 2 : RETRY_MIN_MS;
    if (b->backoff_ms > RETRY_MAX_MS)
        b->backoff_ms = RETRY_MAX_MS;
    uv_timer_start(&b->retry_timer, on_retry, b->backoff_ms, 0);
}

static void recovered(bq_binlog_t *b)
{
    if (b->backoff_ms == 0 || failing(b))
        return;
    b->backoff_ms = 0;
    bq_log(BQ_LOG_INFO, "binlog writes succeed again", "dir=\"%s\"", b->cfg.dir);
}

static void on_sync_timer(uv_timer_t *t)
{
    start_sync(t->data);
}

static void arm_sync_timer(bq_binlog_t *b)
{
    if (b->stopping || b->syncing || uv_is_active((uv_handle_t *)&b->sync_timer))
        return;
    int64_t due = b->dirty_since + (int64_t)b->cfg.fsync_ms - (int64_t)uv_now(b->loop);
    uv_timer_start(&b->sync_timer, on_sync_timer, due > 0 ? (uint64_t)due : 0, 0);
}

/* Whether written data must be fsynced at once rather than on a timer. */
static bool sync_now(const bq_binlog_t *b)
{
    return b->cfg.sync == BQ_BINLOG_SYNC_ALWAYS || bq_binlog_lsns_sync_urgent(&b->lsns) ||
           (b->eager && b->cfg.sync == BQ_BINLOG_SYNC_TIMED);
}

void bq_binlog_sync_eagerly(bq_binlog_t *b, bool on)
{
    b->eager = on;
    if (on && b->cfg.sync == BQ_BINLOG_SYNC_TIMED && b->lsns.written > b->lsns.synced)
        start_sync(b);
}

/* Applies the fsync policy after new data reached the file. */
static void after_write(bq_binlog_t *b)
{
    if (b->dirty_since < 0)
        b->dirty_since = (int64_t)uv_now(b->loop);
    if (sync_now(b))
        start_sync(b);
    else if (b->cfg.sync == BQ_BINLOG_SYNC_TIMED)
        arm_sync_timer(b);
    update_release(b);
}

/* Writes the pending batch, if the log is not failing. */
void bq__binlog_flush(bq_binlog_t *b)
{
    if (b->batch_len == 0 || b->write_failed)
        return;
    int r = write_batch(b);
    if (r != 0) {
        b->write_failed = true;
        bq_log(BQ_LOG_ERROR, "binlog write failed; retrying", "dir=\"%s\" err=\"%s\"", b->cfg.dir,
               strerror(-r));
        schedule_retry(b);
        return;
    }
    recovered(b);
    after_write(b);
    if (b->written)
        b->written(b->written_arg);
}

/* ---- fsync ---- */

/* The result of start_sync's fdatasync (fsync_thread.h), on the loop. */
static void on_synced(void *arg, int res, int64_t ns)
{
    bq_binlog_t *b = arg;

    bq_histogram_observe(&b->fsync_hist, ns);
    b->syncing = false;
    if (b->sync_fd != b->fd)
        close(b->sync_fd); /* retired by a rotation while this ran */
    if (res < 0) {
        b->sync_failed = b->sync_ever_failed = true;
        bq_log(BQ_LOG_ERROR, "binlog fsync failed; retrying", "dir=\"%s\" err=\"%s\"", b->cfg.dir,
               uv_strerror(res));
        schedule_retry(b);
        return;
    }
    bq_binlog_lsns_synced(&b->lsns, b->sync_lsn);
    recovered(b);
    update_release(b);
    if (b->lsns.written > b->lsns.synced) {
        if (b->sync_again || sync_now(b))
            start_sync(b);
        else if (b->cfg.sync == BQ_BINLOG_SYNC_TIMED)
            arm_sync_timer(b);
    }
}

/* Starts an fdatasync covering everything written so far; if one is
 * running, another starts as soon as it completes. */
static void start_sync(bq_binlog_t *b)
{
    if (b->syncing) {
        b->sync_again = true;
        return;
    }
    if (b->lsns.written <= b->lsns.synced || b->sync_failed || b->stopping)
        return;
    uv_timer_stop(&b->sync_timer);
    b->syncing = true;
    b->sync_again = false;
    b->sync_lsn = b->lsns.written;
    b->sync_fd = b->fd;
    b->dirty_since = -1;
    int r = bq_fsync_thread_start(&b->syncer, b->sync_fd);
    if (r != 0) {
        b->syncing = false;
        b->sync_failed = true;
        bq_log(BQ_LOG_ERROR, "cannot start a binlog fsync; retrying", "err=\"%s\"", uv_strerror(r));
        schedule_retry(b);
    }
}

static void on_retry(uv_timer_t *t)
{
    bq_binlog_t *b = t->data;
    b->write_failed = false;
    bq__binlog_flush(b);
    if (b->sync_failed && !b->write_failed) {
        b->sync_failed = false;
        start_sync(b);
    }
}

uint64_t bq_binlog_records_written(const bq_binlog_t *b)
{
    return b->written_ct;
}

uint64_t bq_binlog_disk_bytes(const bq_binlog_t *b)
{
    return b->total;
}

const bq_histogram_t *bq_binlog_fsync_histogram(const bq_binlog_t *b)
{
    return &b->fsync_hist;
}

uint64_t bq_binlog_last_lsn(const bq_binlog_t *b)
{
    return b->lsns.last;
}

uint64_t bq_binlog_release_lsn(const bq_binlog_t *b)
{
    return b->release;
}

/* ---- rotation ---- */

/* Before a rotation, in every mode (-F too): fsyncs the current segment on
 * the loop thread, so no later segment can exist on disk while this one
 * misses frames (a gap replay would refuse), and so that "synced" (which
 * compaction trusts before removing a segment) never covers a finished
 * segment that was not. Rare: once per -s bytes. 0 or -1. */
int bq__binlog_sync_before_rotation(bq_binlog_t *b)
{
    if (b->lsns.synced >= b->lsns.written)
        return 0;
    int64_t ns;
    int res = bq_fdatasync_timed(b->fd, &ns);
    bq_histogram_observe(&b->fsync_hist, ns);
    if (res != 0) {
        b->sync_failed = b->sync_ever_failed = true;
        bq_log(BQ_LOG_ERROR, "binlog fsync failed; retrying", "dir=\"%s\" err=\"%s\"", b->cfg.dir,
               strerror(-res));
        schedule_retry(b);
        return -1;
    }
    bq_binlog_lsns_synced(&b->lsns, b->lsns.written);
    b->dirty_since = -1;
    update_release(b);
    return 0;
}

static void maybe_rotate(bq_binlog_t *b, bq_now_t now)
{
    int64_t ms = (int64_t)uv_now(b->loop);
    if (failing(b) ||
        !bq_binlog_rotate_due(b->data_end, b->cfg.seg_size, b->fresh, ms, b->rotate_retry_at) ||
        bq__binlog_sync_before_rotation(b) != 0)
        return;
    int old_fd = b->fd;
    uint64_t old_end = b->data_end, old_prealloc = b->prealloc;
    uint64_t old_seq = bq__binlog_current(b)->seq;
    int r = bq__binlog_open_segment(b, old_seq + 1, now);
    if (r != 0) {
        b->rotate_retry_at = ms + ROTATE_RETRY_MS;
        bq_log_limited(&b->rotate_warn, BQ_LOG_WARN,
                       "cannot create the next binlog segment; appending to the current one",
                       "seq=%llu err=\"%s\"", (unsigned long long)(old_seq + 1), strerror(-r));
        return;
    }
    b->rotate_retry_at = 0;
    bq__binlog_retire(b, &b->segs[b->nsegs - 2], old_fd, old_end, old_prealloc);
}

void bq__binlog_retire(bq_binlog_t *b, seg_t *old, int fd, uint64_t end, uint64_t prealloc)
{
    old->size = end;
    if (prealloc > end)
        b->total -= prealloc - end;
    /* Only the zero tail goes: losing this to a crash is harmless. */
    if (prealloc > end && ftruncate(fd, (off_t)end) != 0)
        bq_log(BQ_LOG_WARN, "cannot trim a binlog segment", "seq=%llu err=\"%s\"",
               (unsigned long long)old->seq, strerror(errno));
    if (!(b->syncing && b->sync_fd == fd))
        close(fd); /* else on_synced closes it */
}

/* ---- compaction ---- */

void bq__binlog_unlink_oldest(bq_binlog_t *b)
{
    char path[PATH_MAX];
    bq_segment_path(path, sizeof path, b->cfg.dir, b->segs[0].seq);
    if (unlink(path) != 0 && errno != ENOENT)
        bq_log(BQ_LOG_WARN, "cannot remove a binlog segment", "file=\"%s\" err=\"%s\"", path,
               strerror(errno));
    /* Removals reach the disk oldest first, so no older segment can come
     * back after a newer one is gone. */
    bq_segment_sync_dir(b->cfg.dir);
    bq_log(BQ_LOG_DEBUG, "binlog segment removed", "seq=%llu", (unsigned long long)b->segs[0].seq);
    b->total -= b->segs[0].size;
    memmove(b->segs, b->segs + 1, (b->nsegs - 1) * sizeof *b->segs);
    b->nsegs--;
}

/* Rewrites up to a turn's budget of the oldest segment's live jobs into the
 * current one. Returns true when there is more to do. */
static bool migrate(bq_binlog_t *b, bq_now_t now)
{
    seg_t *old = &b->segs[0];
    size_t start_len = b->batch_len, moved = 0;
    uint64_t ids[MIGRATE_SCAN];

    if (b->mig_seq != old->seq) {
        b->mig_seq = old->seq;
        b->mig_cursor = 0;
        b->mig_hit = false;
    }
    while (old->jobs > 0 && moved < MIGRATE_JOBS && b->batch_len - start_len < MIGRATE_BYTES) {
        if (b->mig_cursor >= bq_engine_scan_end(b->engine)) {
            if (!b->mig_hit) {
                bq_log(BQ_LOG_WARN, "binlog job count was wrong; corrected", "seq=%llu jobs=%llu",
                       (unsigned long long)old->seq, (unsigned long long)old->jobs);
                old->jobs = 0;
            }
            b->mig_cursor = 0;
            b->mig_hit = false;
            return true;
        }
        size_t n =
            bq_engine_file_jobs(b->engine, (uint32_t)old->seq, &b->mig_cursor, ids, MIGRATE_SCAN);
        for (size_t i = 0; i < n; i++) {
            if (bq_engine_relog_job(b->engine, ids[i], now) != 0)
                return false; /* no room; a later pass finds the rest */
            b->mig_hit = true;
            b->migrated_ct++;
            moved++;
        }
    }
    return old->jobs > 0;
}

bool bq__binlog_may_unlink_oldest(bq_binlog_t *b)
{
    seg_t *old = &b->segs[0];
    if (old->gone_after == 0)
        old->gone_after = b->lsns.written > old->moved_lsn ? b->lsns.written : old->moved_lsn;
    if (b->lsns.synced >= old->gone_after)
        return true;
    start_sync(b);
    return false;
}

void bq_binlog_keep_from(bq_binlog_t *b, uint64_t lsn)
{
    b->keep_from = lsn;
}

/* Removes or migrates old segments; true when more work is left. */
static bool compact(bq_binlog_t *b, bq_now_t now)
{
    for (;;) {
        /* The oldest segment ends just before the next one's first frame. */
        if (b->keep_from && b->nsegs >= 2 && b->segs[1].first_lsn > b->keep_from)
            return false;
        uint64_t live = bq_engine_live_log_bytes(b->engine);
        uint64_t jobs = b->segs[0].jobs;
        switch (bq_binlog_compact_decide(b->nsegs, b->total, live, b->cfg.seg_size, jobs)) {
        case BQ_BINLOG_COMPACT_NONE:
            return false;
        case BQ_BINLOG_COMPACT_UNLINK:
            if (!bq__binlog_may_unlink_oldest(b))
                return false; /* the fsync's completion brings us back */
            bq__binlog_unlink_oldest(b);
            break;
        case BQ_BINLOG_COMPACT_MIGRATE:
            return failing(b) ? false : migrate(b, now);
        }
    }
}

/* ---- the loop turn, stats, shutdown ---- */

bool bq_binlog_turn(bq_binlog_t *b, bq_now_t now)
{
    bq__binlog_flush(b);
    if (b->cfg.follower)
        return false; /* the primary's stream rotates, compaction follows it */
    maybe_rotate(b, now);
    bool more = compact(b, now);
    bq__binlog_flush(b);
    if (b->batch_len == 0 && b->batch_cap > BATCH_KEEP) {
        free(b->batch);
        b->batch = NULL;
        b->batch_cap = 0;
    }
    return more;
}

/* The oldest segment a live job still needs (or the current one): older
 * ones are removed at the end of the loop turn, once what replaced them is
 * durable, while beanstalkd removes a file the moment its last job goes. A
 * standby counts jobs per segment only now and then: its oldest on disk. */
static uint64_t oldest_needed(const bq_binlog_t *b)
{
    size_t i = 0;
    while (!b->cfg.follower && i + 1 < b->nsegs && b->segs[i].jobs == 0)
        i++;
    return b->nsegs ? b->segs[i].seq : 0;
}

void bq_binlog_fill_info(const bq_binlog_t *b, bq_server_info_t *info)
{
    info->binlog_oldest_index = oldest_needed(b);
    info->binlog_current_index = b->nsegs ? b->segs[b->nsegs - 1].seq : 0;
    /* As beanstalkd counts: the records of commands and compaction, not the
     * log's own bookkeeping (a standby counts what it receives). */
    info->binlog_records_written = b->cfg.follower ? b->written_ct : b->counted_ct;
    info->binlog_records_migrated = b->migrated_ct;
}

bool bq_binlog_ids_durable(const bq_binlog_t *b)
{
    return b->cfg.standalone && !b->cfg.follower && b->cfg.sync == BQ_BINLOG_SYNC_ALWAYS;
}

static void close_timer(uv_timer_t *t)
{
    if (!uv_is_closing((uv_handle_t *)t))
        uv_close((uv_handle_t *)t, NULL);
}

void bq_binlog_stop(bq_binlog_t *b)
{
    if (!b || b->stopping)
        return;
    b->stopping = true;
    bq_fsync_thread_stop(&b->syncer); /* an fsync in flight ends first */
    close_timer(&b->sync_timer);
    close_timer(&b->retry_timer);
}

/* A single node's clean stop, once every record before it is written and
 * fsynced (no fsync ever failed, which could have dropped written pages):
 * logs the clean-stop marker into the batch. */
static void mark_clean_stop(bq_binlog_t *b)
{
    if (!b->cfg.standalone || b->cfg.follower || b->epoch != 0 || !b->engine ||
        b->sync_ever_failed || bq__binlog_ensure_batch(b, BQ_FRAME_HEADER + CLEAN_STOP_MAX) != 0)
        return;
    if (fdatasync(b->fd) != 0) {
        bq_log(BQ_LOG_ERROR, "cannot sync the binlog segment at shutdown", "err=\"%s\"",
               strerror(errno));
        return;
    }
    bq_engine_log_clean_stop(b->engine);
}

void bq_binlog_free(bq_binlog_t *b)
{
    if (!b)
        return;
    bq_fsync_thread_join(&b->syncer);
    if (b->fd >= 0) {
        int r = write_batch(b);
        if (r == 0)
            mark_clean_stop(b);
        if (r == 0)
            r = write_batch(b);
        if (r != 0)
            bq_log(BQ_LOG_ERROR, "binlog records lost at shutdown", "bytes=%zu err=\"%s\"",
                   b->batch_len, strerror(-r));
        if (ftruncate(b->fd, (off_t)b->data_end) != 0 || fsync(b->fd) != 0)
            bq_log(BQ_LOG_ERROR, "cannot close the binlog segment", "err=\"%s\"", strerror(errno));
        else
            close(b->fd);
    }
    free(b->segs);
    free(b->batch);
    free(b);
}
