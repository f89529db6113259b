/* Unit tests of node/binlog/replay.c, binlog replay at start-up. Segments are
 * built in a mkdtemp directory from real engine records: an engine with the
 * harness's fake log (h_new_logged) runs commands, and every collected
 * record becomes a frame (bq_frame_header) in the segment numbered by the
 * `file` the log hook returned, in segments made by bq_segment_create.
 * Replay then goes into a fresh engine whose durable state (h_dump) must
 * match.
 *
 * Covered: every record kind, several segments (with gaps in their numbers
 * and an empty one), LSN gaps and missing segments, truncation at every
 * byte of the last frame with and without a zero tail, every bit flip in
 * the last frame (torn tail: cut off and copied aside) and in a middle
 * frame (start-up stops; with skip_corrupt the bytes are copied aside and
 * replay goes on), zeroed frames, damaged segment prefixes, records with a
 * valid checksum that the engine refuses, other format versions, and
 * beanstalkd's files. replay_benchmark runs only with BQ_REPLAY_BENCH=1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_harness.h"
#include "engine_history.h"
#include "node/binlog/replay.h"
#include "node/binlog/segment.h"
#include "protocol/frame.h"

#define SEG_SIZE 65536
#define MAX_FRAMES 256

/* Where write_log put each frame. */
typedef struct layout {
    size_t n;
    uint64_t seq[MAX_FRAMES];
    size_t off[MAX_FRAMES];
    size_t len[MAX_FRAMES]; /* header and payload */
} layout_t;

/* A file's bytes. */
typedef struct image {
    uint8_t *data;
    size_t len;
} image_t;

/* ---- directories and files ---- */

/* A new empty directory: in /dev/shm when there is one, because replay
 * fsyncs every copy it makes and these tests make thousands. */
static char *make_dir(void)
{
    struct stat st;
    bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
    char tmpl[64];
    snprintf(tmpl, sizeof tmpl, "%s/bq-replay-XXXXXX", shm ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(tmpl));
    char *d = strdup(tmpl);
    assert_non_null(d);
    return d;
}

/* Removes every file of dir. */
static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        assert_int_equal(unlink(path), 0);
    }
    closedir(d);
}

static void remove_dir(char *dir)
{
    clear_dir(dir);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

/* Number of files in dir. */
static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static char *path_of(const char *dir, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static char *seg_path(const char *dir, uint64_t seq)
{
    static char path[512];
    bq_segment_path(path, sizeof path, dir, seq);
    return path;
}

/* The whole file at path, or data NULL when it does not exist. */
static image_t read_image(const char *path)
{
    image_t im = {NULL, 0};
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return im;
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    im.len = (size_t)st.st_size;
    im.data = malloc(im.len + 1);
    assert_non_null(im.data);
    assert_int_equal(pread(fd, im.data, im.len, 0), (ssize_t)im.len);
    close(fd);
    return im;
}

/* Writes data[0..len) to path, then zeros up to `size` when size > len. */
static void write_image(const char *path, const uint8_t *data, size_t len, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    if (size > len)
        assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

/* Asserts that the file at path holds exactly data[0..len). */
static void assert_file_is(const char *path, const uint8_t *data, size_t len)
{
    image_t im = read_image(path);
    if (!im.data)
        fail_msg("%s does not exist", path);
    assert_int_equal(im.len, len);
    assert_memory_equal(im.data, data, len);
    free(im.data);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- writing segments ---- */

static int seg_begin_sized(const char *dir, uint64_t seq, uint64_t first_lsn, uint64_t size,
                           size_t *off)
{
    bq_segment_meta_t m;
    memset(&m, 0, sizeof m);
    m.seq = seq;
    m.first_lsn = first_lsn;
    strcpy(m.node_id, "test");
    uint64_t ds;
    int fd = bq_segment_create(dir, &m, size, &ds);
    assert_true(fd >= 0);
    *off = (size_t)ds;
    return fd;
}

static int seg_begin(const char *dir, uint64_t seq, uint64_t first_lsn, size_t *off)
{
    return seg_begin_sized(dir, seq, first_lsn, SEG_SIZE, off);
}

static void put_frame(int fd, size_t *off, uint64_t lsn, const uint8_t *p, size_t len)
{
    uint8_t hdr[BQ_FRAME_HEADER];
    bq_frame_header(hdr, lsn, 0, p, (uint32_t)len);
    assert_int_equal(pwrite(fd, hdr, sizeof hdr, (off_t)*off), (ssize_t)sizeof hdr);
    assert_int_equal(pwrite(fd, p, len, (off_t)(*off + sizeof hdr)), (ssize_t)len);
    *off += sizeof hdr + len;
}

/* Writes h's records as frames with LSNs from first_lsn, each in the
 * segment its log hook returned, leaving out record `skip` (SIZE_MAX: none).
 * Fills *lay when not NULL. */
static void write_log_skip(const char *dir, const harness_t *h, uint64_t first_lsn, size_t skip,
                           layout_t *lay)
{
    int fd = -1;
    size_t off = 0, n = 0;
    uint64_t lsn = first_lsn, seq = 0;
    for (size_t i = 0; i < h->log->n; i++) {
        const h_record_t *r = &h->log->recs[i];
        if (i == skip)
            continue;
        if (fd < 0 || r->file != seq) {
            if (fd >= 0)
                close(fd);
            seq = r->file;
            fd = seg_begin(dir, seq, lsn, &off);
        }
        assert_true(n < MAX_FRAMES);
        if (lay) {
            lay->seq[n] = seq;
            lay->off[n] = off;
            lay->len[n] = BQ_FRAME_HEADER + r->len;
        }
        n++;
        put_frame(fd, &off, lsn++, r->data, r->len);
    }
    if (fd >= 0)
        close(fd);
    if (lay)
        lay->n = n;
}

static void write_log(const char *dir, const harness_t *h, layout_t *lay)
{
    write_log_skip(dir, h, 1, SIZE_MAX, lay);
}

/* ---- replaying and comparing ---- */

/* What the last replay logged (node/base/log.c writes to stderr). */
static char logged[1 << 16];

/* Replays dir into a fresh engine at like's time, capturing its log lines
 * in `logged`; asserts the return code. */
static harness_t *replay_at(const char *dir, const harness_t *like, bool skip, int rc,
                            bq_replay_result_t *res, const char *file, int line)
{
    harness_t *r = h_new(0);
    r->now = like->now;
    bq_replay_result_t local;
    FILE *cap = tmpfile();
    assert_non_null(cap);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0 && dup2(fileno(cap), STDERR_FILENO) >= 0);
    int got = bq_replay(dir, r->e, r->now, skip, res ? res : &local);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    size_t n = (size_t)pread(fileno(cap), logged, sizeof logged - 1, 0);
    logged[n < sizeof logged ? n : 0] = '\0';
    fclose(cap);
    if (got != rc)
        fail_msg("%s:%d: bq_replay returned %d, expected %d; it logged:\n%s", file, line, got, rc,
                 logged);
    h_check(r);
    return r;
}

/* Asserts that the last replay logged a line containing every given
 * fragment (a NULL-terminated list). */
static void expect_log_at(const char *file, int line, ...)
{
    va_list ap;
    va_start(ap, line);
    const char *start = logged;
    for (const char *l = logged; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        size_t len = strcspn(l, "\n");
        bool all = true;
        va_list frag;
        va_copy(frag, ap);
        for (const char *f = va_arg(frag, const char *); f && all; f = va_arg(frag, const char *)) {
            const char *hit = strstr(l, f);
            all = hit && hit < l + len;
        }
        va_end(frag);
        if (all) {
            va_end(ap);
            return;
        }
    }
    va_end(ap);
    fail_msg("%s:%d: no such line logged:\n%s", file, line, start);
}
#define expect_log(...) expect_log_at(__FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)

/* "offset=<n>" */
static const char *at_offset(size_t n)
{
    static char buf[4][48];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "offset=%zu ", n);
    return buf[k];
}
#define replay(dir, like, skip, rc, res)                                                           \
    replay_at((dir), (like), (skip), (rc), (res), __FILE__, __LINE__)

static void same_state_at(const harness_t *a, const harness_t *b, int flags, const char *file,
                          int line)
{
    char *da = h_dump(a, flags | H_DUMP_DURABLE), *db = h_dump(b, flags | H_DUMP_DURABLE);
    if (strcmp(da, db) != 0)
        fail_msg("%s:%d: states differ:\n%s---\n%s", file, line, da, db);
    free(da);
    free(db);
}
#define same_state(a, b) same_state_at((a), (b), 0, __FILE__, __LINE__)

/* Replays dir and asserts the result matches `want` in state and counts. */
static void replay_matches(const char *dir, const harness_t *want, uint64_t records,
                           uint64_t damaged)
{
    bq_replay_result_t res;
    harness_t *r = replay(dir, want, false, 0, &res);
    assert_int_equal(res.records, records);
    assert_int_equal(res.damaged, damaged);
    same_state(want, r);
    h_done(r);
}

/* An engine with n puts of short bodies; job i has body "job-<i>". */
static harness_t *with_puts(int n)
{
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    for (int i = 1; i <= n; i++) {
        char body[32];
        snprintf(body, sizeof body, "job-%d", i);
        assert_int_equal(h_put(h, c, (uint32_t)i, 0, 60, body), (uint64_t)i);
    }
    h_close(h, c);
    return h;
}

/* The engine after applying only the first n records of h (as a replay
 * of a log cut there would). */
static harness_t *first_records(const harness_t *h, size_t n)
{
    harness_t *r = h_new(0);
    r->now = h->now;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(bq_engine_apply(r->e, h->log->recs[i].data, h->log->recs[i].len,
                                         h->log->recs[i].file, r->now),
                         0);
    return r;
}

/* The engine after applying every record of h but `skip`. */
static harness_t *all_records_but(const harness_t *h, size_t skip)
{
    harness_t *r = h_new(0);
    r->now = h->now;
    for (size_t i = 0; i < h->log->n; i++) {
        if (i != skip)
            assert_int_equal(bq_engine_apply(r->e, h->log->recs[i].data, h->log->recs[i].len,
                                             h->log->recs[i].file, r->now),
                             0);
    }
    return r;
}

/* ---- every record kind, several segments ---- */

static void replay_every_record_kind(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = every_kind();
    layout_t lay;
    write_log(dir, h, &lay);
    bq_replay_result_t res;
    harness_t *r = replay(dir, h, false, 0, &res);
    same_state(h, r);
    assert_int_equal(res.first_seq, 1);
    assert_int_equal(res.last_seq, 1);
    assert_int_equal(res.records, h->log->n);
    assert_int_equal(res.last_lsn, h->log->n);
    assert_int_equal(res.last_epoch, 0);
    assert_int_equal(res.damaged, 0);
    assert_int_equal(res.end_offset, lay.off[lay.n - 1] + lay.len[lay.n - 1]);
    /* stats-job says the same of every job, file and counters included */
    int a = h_open(h), b = h_open(r);
    for (uint64_t id = 1; id <= 9; id++) {
        char cmd[64];
        if (id == 5)
            continue; /* deleted */
        snprintf(cmd, sizeof cmd, "stats-job %" PRIu64 "\r\n", id);
        char *want = strdup(h_yaml(h, a, cmd));
        assert_string_equal(h_yaml(r, b, cmd), want);
        free(want);
    }
    h_cmd(h, a, "stats-job 5\r\n", "NOT_FOUND\r\n");
    h_cmd(r, b, "stats-job 5\r\n", "NOT_FOUND\r\n");
    assert_string_equal(h_job_stat(r, b, 4, "state"), "buried");
    assert_int_equal(h_job_stat_int(r, b, 4, "buries"), 1);
    assert_string_equal(h_job_stat(r, b, 6, "state"), "delayed");
    assert_int_equal(h_job_stat_int(r, b, 6, "delay"), 45);
    assert_string_equal(h_job_stat(r, b, 7, "state"), "ready");
    assert_int_equal(h_job_stat_int(r, b, 7, "kicks"), 1);
    assert_int_equal(h_job_stat_int(r, b, 1, "pri"), 20);
    assert_int_equal(h_job_stat_int(r, b, 1, "releases"), 1);
    /* ids are never reused: the next id is past the logged reservation */
    uint64_t id = h_put(r, b, 1, 0, 1, "new");
    assert_true(id >= h->e->id_limit);
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

/* The next id after replaying dir and resuming with may_continue. */
static uint64_t next_id_after(const char *dir, const harness_t *h, bool may_continue,
                              bq_replay_result_t *res)
{
    harness_t *r = replay(dir, h, false, 0, res);
    bq_engine_resume_ids(r->e, may_continue);
    int c = h_open(r);
    uint64_t id = h_put(r, c, 1, 0, 1, "next");
    h_done(r);
    return id;
}

/* A log that ends with the clean-stop marker lets ids go on after the
 * highest logged one; the same log with the marker torn off does not. */
static void replay_clean_stop_marker_lets_ids_continue(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    bq_engine_log_clean_stop(h->e);
    layout_t lay;
    write_log(dir, h, &lay);
    bq_replay_result_t res;
    assert_int_equal(next_id_after(dir, h, true, &res), 4);
    assert_int_equal(res.skipped, 0);
    assert_int_equal(next_id_after(dir, h, false, &res), 1 + BQ_ID_BLOCK);
    /* the marker's frame cut short: a torn tail, cut off; nothing skipped */
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1];
    write_image(seg_path(dir, 1), im.data, x + lay.len[lay.n - 1] - 1, 0);
    assert_int_equal(next_id_after(dir, h, true, &res), 1 + BQ_ID_BLOCK);
    assert_int_equal(res.damaged, 1);
    assert_int_equal(res.skipped, 0);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_reserved_job_comes_back_ready(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    int c = h_open(h);
    take(h, c, 2, "job-2");
    write_log(dir, h, NULL);
    harness_t *r = replay(dir, h, false, 0, NULL);
    same_state_at(h, r, H_DUMP_NO_RESERVES, __FILE__, __LINE__);
    int b = h_open(r);
    assert_string_equal(h_job_stat(r, b, 2, "state"), "ready");
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_several_segments(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    h->log->file = 1;
    for (int i = 0; i < 5; i++)
        h_put(h, c, 1, 0, 60, "one");
    h->log->file = 2; /* deletes and updates of jobs whose full record is in 1 */
    h_cmd(h, c, "delete 1\r\n", "DELETED\r\n");
    take(h, c, 2, "one");
    h_cmd(h, c, "bury 2 3\r\n", "BURIED\r\n");
    h_put(h, c, 1, 0, 60, "two");
    h->log->file = 5; /* numbers need not be consecutive */
    h_cmd(h, c, "kick 1\r\n", "KICKED 1\r\n");
    h_put(h, c, 1, 0, 60, "five");
    h_cmd(h, c, "delete 6\r\n", "DELETED\r\n");
    h_close(h, c);
    layout_t lay;
    write_log(dir, h, &lay);
    /* an empty segment between 2 and 5 changes nothing */
    size_t off;
    close(seg_begin(dir, 3, lay.n + 1, &off));

    bq_replay_result_t res;
    harness_t *r = replay(dir, h, false, 0, &res);
    same_state(h, r);
    assert_int_equal(res.first_seq, 1);
    assert_int_equal(res.last_seq, 5);
    assert_int_equal(res.records, lay.n);
    assert_int_equal(res.last_lsn, lay.n);
    assert_int_equal(h_job(r, 3)->file, 1);
    assert_int_equal(h_job(r, 7)->file, 5);
    assert_null(h_job(r, 6));
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_empty_directory_and_later_first_lsn(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    bq_replay_result_t res;
    harness_t *r = replay(dir, h, false, 0, &res);
    assert_int_equal(res.first_seq, 0);
    assert_int_equal(res.records, 0);
    assert_int_equal(res.last_lsn, 0);
    assert_int_equal(r->e->jobs.len, 0);
    h_done(r);

    /* older segments compacted away: the log starts at a later LSN */
    write_log_skip(dir, h, 1000, SIZE_MAX, NULL);
    r = replay(dir, h, false, 0, &res);
    same_state(h, r);
    assert_int_equal(res.last_lsn, 1000 + h->log->n - 1);
    h_done(r);

    /* a lone empty segment says where LSNs continue */
    clear_dir(dir);
    size_t off;
    close(seg_begin(dir, 4, 77, &off));
    r = replay(dir, h, false, 0, &res);
    assert_int_equal(res.records, 0);
    assert_int_equal(res.last_lsn, 76);
    assert_int_equal(res.end_offset, off);
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_large_frame(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(4 << 20);
    int c = h_open(h);
    size_t n = (size_t)3 << 20; /* far beyond the preallocated segment */
    char *body = malloc(n + 1);
    assert_non_null(body);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)('a' + i % 26);
    body[n] = '\0';
    put_body(h, c, 1, 0, body);
    h_put(h, c, 1, 0, 60, "after");
    free(body);
    h_close(h, c);
    write_log(dir, h, NULL);
    replay_matches(dir, h, h->log->n, 0);
    h_done(h);
    remove_dir(dir);
}

/* ---- LSNs ---- */

static void replay_lsn_gap_stops_unless_skipped(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(6);
    /* frames 1..4, then 6.. : one frame missing in the middle */
    size_t off;
    int fd = seg_begin(dir, 1, 1, &off);
    for (size_t i = 0; i < h->log->n; i++)
        put_frame(fd, &off, i < 4 ? i + 1 : i + 2, h->log->recs[i].data, h->log->recs[i].len);
    close(fd);
    image_t before = read_image(seg_path(dir, 1));
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    expect_log("level=error", "frames are missing", "missing=1", "--binlog-skip-corrupt");
    assert_file_is(seg_path(dir, 1), before.data, before.len);
    assert_int_equal(count_files(dir), 1);

    bq_replay_result_t res;
    r = replay(dir, h, true, 0, &res);
    same_state(h, r); /* nothing was lost: only the numbering jumped */
    assert_int_equal(res.records, h->log->n);
    assert_int_equal(res.damaged, 1);
    assert_int_equal(res.skipped, 1); /* ids may not go on after the highest logged */
    assert_int_equal(res.last_lsn, h->log->n + 1);
    h_done(r);
    free(before.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_missing_segment_stops_unless_skipped(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    for (uint32_t s = 1; s <= 3; s++) {
        h->log->file = s;
        h_put(h, c, s, 0, 60, "x");
        h_put(h, c, s, 0, 60, "y");
    }
    h_close(h, c);
    layout_t lay;
    write_log(dir, h, &lay);
    assert_int_equal(unlink(seg_path(dir, 2)), 0);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    bq_replay_result_t res;
    r = replay(dir, h, true, 0, &res);
    assert_int_equal(res.records, h->log->n - 2);
    assert_int_equal(res.damaged, 1);
    assert_int_equal(res.skipped, 1);
    assert_non_null(h_job(r, 1));
    assert_null(h_job(r, 3)); /* its segment is gone */
    assert_non_null(h_job(r, 5));
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_lsn_going_back_is_damage(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(4);
    size_t off;
    int fd = seg_begin(dir, 1, 1, &off);
    size_t dup_at = 0, dup_len = 0;
    for (size_t i = 0; i < h->log->n; i++) {
        put_frame(fd, &off, i + 1, h->log->recs[i].data, h->log->recs[i].len);
        if (i == 2) { /* frame 3 again, with its LSN */
            dup_at = off;
            put_frame(fd, &off, i + 1, h->log->recs[i].data, h->log->recs[i].len);
            dup_len = off - dup_at;
        }
    }
    close(fd);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    image_t im = read_image(seg_path(dir, 1));
    bq_replay_result_t res;
    r = replay(dir, h, true, 0, &res);
    same_state(h, r);
    assert_int_equal(res.records, h->log->n);
    assert_int_equal(res.damaged, 1);
    char name[64];
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", dup_at);
    assert_file_is(path_of(dir, name), im.data + dup_at, dup_len);
    free(im.data);
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_first_frame_must_match_header(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    size_t off;
    int fd = seg_begin(dir, 1, 5, &off); /* the header says 5, frames say 1.. */
    for (size_t i = 0; i < h->log->n; i++)
        put_frame(fd, &off, i + 1, h->log->recs[i].data, h->log->recs[i].len);
    close(fd);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

/* ---- torn and corrupt tails ---- */

/* Expects the tail damage at off of segment 1 (image im) to be cut off: a
 * copy of its non-zero bytes exists, the segment ends at off. */
static void expect_cut(const char *dir, const image_t *im, size_t off)
{
    size_t end = im->len;
    while (end > off && im->data[end - 1] == 0)
        end--;
    char name[64];
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", off);
    assert_file_is(path_of(dir, name), im->data + off, end - off);
    image_t now = read_image(seg_path(dir, 1));
    assert_int_equal(now.len, off);
    assert_memory_equal(now.data, im->data, off);
    free(now.data);
}

static void replay_truncated_at_every_byte_of_last_frame(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = every_kind();
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1], flen = lay.len[lay.n - 1];
    harness_t *want = first_records(h, h->log->n - 1);
    for (size_t cut = x; cut < x + flen; cut++) {
        for (int zeros = 0; zeros < 2; zeros++) {
            clear_dir(dir);
            write_image(seg_path(dir, 1), im.data, cut, zeros ? im.len : 0);
            size_t nz = cut;
            while (nz > x && im.data[nz - 1] == 0)
                nz--;
            bq_replay_result_t res;
            harness_t *r = replay(dir, h, false, 0, &res);
            same_state(want, r);
            assert_int_equal(res.records, h->log->n - 1);
            assert_int_equal(res.last_lsn, h->log->n - 1);
            assert_int_equal(res.end_offset, x);
            image_t part = {im.data, cut};
            if (nz == x) { /* only zeros were written: a clean end */
                assert_int_equal(res.damaged, 0);
                assert_int_equal(count_files(dir), 1);
            } else {
                assert_int_equal(res.damaged, 1);
                expect_cut(dir, &part, x);
                assert_int_equal(count_files(dir), 2);
            }
            h_done(r);
        }
    }
    h_done(want);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_bit_flips_in_last_frame_are_a_torn_tail(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(5);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1], flen = lay.len[lay.n - 1];
    harness_t *want = first_records(h, h->log->n - 1);
    for (size_t bit = 0; bit < flen * 8; bit++) {
        clear_dir(dir);
        im.data[x + bit / 8] ^= (uint8_t)(1u << bit % 8);
        write_image(seg_path(dir, 1), im.data, im.len, 0);
        bq_replay_result_t res;
        harness_t *r = replay(dir, h, false, 0, &res);
        same_state(want, r);
        assert_int_equal(res.records, h->log->n - 1);
        assert_int_equal(res.damaged, 1);
        expect_cut(dir, &im, x);
        expect_log("level=warn", "torn binlog tail", seg_path(dir, 1), at_offset(x),
                   "bytes=", "copy=");
        h_done(r);
        im.data[x + bit / 8] ^= (uint8_t)(1u << bit % 8);
    }
    h_done(want);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_zeroed_tails(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(4);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1], flen = lay.len[lay.n - 1];
    harness_t *want = first_records(h, h->log->n - 1);
    uint8_t *copy = malloc(im.len);
    assert_non_null(copy);

    /* the whole last frame zero: its write never happened; a clean end */
    memcpy(copy, im.data, im.len);
    memset(copy + x, 0, flen);
    clear_dir(dir);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    replay_matches(dir, want, h->log->n - 1, 0);
    assert_int_equal(count_files(dir), 1);

    /* the second half of the frame zero: a bad checksum */
    memcpy(copy, im.data, im.len);
    memset(copy + x + flen / 2, 0, flen - flen / 2);
    clear_dir(dir);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    replay_matches(dir, want, h->log->n - 1, 1);
    image_t damaged = {copy, im.len};
    expect_cut(dir, &damaged, x);

    /* the header zero, the payload written: an end marker with data after */
    memcpy(copy, im.data, im.len);
    memset(copy + x, 0, BQ_FRAME_HEADER);
    clear_dir(dir);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    replay_matches(dir, want, h->log->n - 1, 1);
    expect_cut(dir, &damaged, x);

    /* stray bytes far after the clean end */
    memcpy(copy, im.data, im.len);
    copy[im.len - 100] = 0x5a;
    clear_dir(dir);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    replay_matches(dir, h, h->log->n, 1);
    expect_cut(dir, &damaged, x + flen);

    free(copy);
    h_done(want);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

/* Megabytes of random bytes after the damage: the forward search for valid
 * frames checks LSNs before checksums, so it stays linear (a plain search
 * checksums up to the end of the file at about one offset in 2000: here
 * 2 GB of CRC, quadratic in the size of the garbage). */
static void replay_random_garbage_tail(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    layout_t lay;
    write_log(dir, h, &lay);
    size_t x = lay.off[lay.n - 1] + lay.len[lay.n - 1], len = (size_t)4 << 20;
    uint8_t *junk = malloc(len);
    assert_non_null(junk);
    uint64_t v = 88172645463325252u;
    for (size_t i = 0; i < len; i++) {
        v ^= v << 13, v ^= v >> 7, v ^= v << 17;
        junk[i] = (uint8_t)(v >> 24);
    }
    junk[len - 1] |= 1; /* the copy ends at the last non-zero byte */
    int fd = open(seg_path(dir, 1), O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, len, (off_t)x), (ssize_t)len);
    close(fd);
    replay_matches(dir, h, h->log->n, 1);
    char name[64];
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", x);
    assert_file_is(path_of(dir, name), junk, len);
    free(junk);
    h_done(h);
    remove_dir(dir);
}

static void replay_torn_tail_before_empty_segment(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(4);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1];
    im.data[x + lay.len[lay.n - 1] / 2] ^= 1;
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    /* the next segment was created (its header synced) but holds nothing */
    size_t off;
    close(seg_begin(dir, 2, lay.n + 1, &off));
    harness_t *want = first_records(h, h->log->n - 1);
    bq_replay_result_t res;
    harness_t *r = replay(dir, h, false, 0, &res);
    same_state(want, r);
    assert_int_equal(res.damaged, 1);
    assert_int_equal(res.last_seq, 2);
    assert_int_equal(res.last_lsn, h->log->n - 1);
    expect_cut(dir, &im, x);
    h_done(r);

    /* when the next segment holds data, the damage is in the middle */
    clear_dir(dir);
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    int fd = seg_begin(dir, 2, lay.n + 1, &off);
    put_frame(fd, &off, lay.n + 1, h->log->recs[1].data, h->log->recs[1].len);
    close(fd);
    r = replay(dir, h, false, -1, NULL);
    h_done(r);
    assert_int_equal(count_files(dir), 2);

    h_done(want);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_copy_aside_never_overwrites(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[lay.n - 1];
    im.data[x + 5] ^= 0x80;
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    char name[64];
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", x);
    write_image(path_of(dir, name), (const uint8_t *)"older", 5, 0);
    harness_t *r = replay(dir, h, false, 0, NULL);
    h_done(r);
    assert_file_is(path_of(dir, name), (const uint8_t *)"older", 5);
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu.1", x);
    size_t end = im.len;
    while (im.data[end - 1] == 0)
        end--;
    assert_file_is(path_of(dir, name), im.data + x, end - x);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

/* ---- damage in the middle ---- */

static void replay_bit_flips_in_middle_frame(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(5);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t m = 3; /* the put of job 3 (record 0 is the id reservation) */
    size_t x = lay.off[m], flen = lay.len[m];
    harness_t *want = all_records_but(h, m);
    for (size_t bit = 0; bit < flen * 8; bit++) {
        im.data[x + bit / 8] ^= (uint8_t)(1u << bit % 8);
        clear_dir(dir);
        write_image(seg_path(dir, 1), im.data, im.len, 0);
        harness_t *r = replay(dir, h, false, -1, NULL);
        h_done(r);
        expect_log("level=error", "not starting", seg_path(dir, 1), at_offset(x),
                   "valid frames follow", "--binlog-skip-corrupt");
        assert_int_equal(count_files(dir), 1); /* nothing touched */
        assert_file_is(seg_path(dir, 1), im.data, im.len);

        bq_replay_result_t res;
        r = replay(dir, h, true, 0, &res);
        same_state(want, r);
        assert_int_equal(res.records, h->log->n - 1);
        assert_int_equal(res.damaged, 1);
        assert_int_equal(res.skipped, 1);
        assert_int_equal(res.last_lsn, h->log->n);
        char name[64];
        snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", x);
        assert_file_is(path_of(dir, name), im.data + x, flen);
        assert_file_is(seg_path(dir, 1), im.data, im.len); /* left as it was */
        expect_log("level=warn", "jobs may be lost and deleted jobs may come back", at_offset(x),
                   "bytes=", "copy=");
        h_done(r);
        im.data[x + bit / 8] ^= (uint8_t)(1u << bit % 8);
    }
    /* a second start with the same damage reuses the same copy */
    im.data[x + 2] ^= 4;
    clear_dir(dir);
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    for (int i = 0; i < 2; i++) {
        harness_t *r = replay(dir, h, true, 0, NULL);
        h_done(r);
        assert_int_equal(count_files(dir), 2);
    }
    h_done(want);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

/* A power loss with writeback out of order: in the last segment, a whole
 * sector of zeros inside a frame, valid frames after it. Nothing after the
 * hole was synced, so it is a torn tail: cut off (its bytes copied aside),
 * and start-up goes on. The same hole with data in a later segment, or
 * damage without a zero sector (bit rot), still stops start-up. */
static void replay_unwritten_sectors_in_last_segment(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    char body[1601];
    for (int i = 1; i <= 6; i++) {
        memset(body, 'a' + i, 1600);
        body[1600] = '\0';
        put_body(h, c, 1, 0, body);
    }
    h_close(h, c);
    layout_t lay;
    write_log(dir, h, &lay);
    image_t im = read_image(seg_path(dir, 1));
    size_t m = 3, x = lay.off[m], flen = lay.len[m];
    size_t hole = (x + 511) / 512 * 512 + 512; /* a whole sector inside frame m */
    assert_true(hole + 512 <= x + flen);
    uint8_t *copy = malloc(im.len);
    assert_non_null(copy);
    memcpy(copy, im.data, im.len);
    memset(copy + hole, 0, 512);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    harness_t *want = first_records(h, m);
    replay_matches(dir, want, m, 1);
    expect_log("level=warn", "torn binlog tail cut off", at_offset(x), "unwritten sectors");
    image_t damaged = {copy, im.len};
    expect_cut(dir, &damaged, x);

    /* zeros from where a frame should start to the end of its sector (the
     * sector as an fsync ending inside it left it): a torn tail too */
    clear_dir(dir);
    memcpy(copy, im.data, im.len);
    size_t first = (x + 511) / 512 * 512;
    assert_true(first > x);
    memset(copy + x, 0, first - x);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    replay_matches(dir, want, m, 1);
    expect_log("level=warn", "torn binlog tail cut off", at_offset(x), "unwritten sectors");
    expect_cut(dir, &damaged, x);

    /* a zero run that is not a whole aligned sector: damage in the middle */
    clear_dir(dir);
    memcpy(copy, im.data, im.len);
    memset(copy + hole + 1, 0, 510);
    write_image(seg_path(dir, 1), copy, im.len, 0);
    h_done(replay(dir, h, false, -1, NULL));
    expect_log("level=error", "not starting", at_offset(x), "valid frames follow");

    /* the hole in an earlier segment, data after it in a later one */
    clear_dir(dir);
    h_done(want);
    want = h_new_logged(0);
    c = h_open(want);
    want->log->file = 1;
    for (int i = 1; i <= 4; i++) {
        memset(body, 'a' + i, 1600);
        put_body(want, c, 1, 0, body);
    }
    want->log->file = 2;
    put_body(want, c, 1, 0, "later");
    h_close(want, c);
    write_log(dir, want, &lay);
    image_t im1 = read_image(seg_path(dir, 1));
    x = lay.off[m];
    hole = (x + 511) / 512 * 512 + 512;
    memset(im1.data + hole, 0, 512);
    write_image(seg_path(dir, 1), im1.data, im1.len, 0);
    h_done(replay(dir, want, false, -1, NULL));
    expect_log("level=error", "not starting", at_offset(x));

    free(im1.data);
    free(copy);
    free(im.data);
    h_done(want);
    h_done(h);
    remove_dir(dir);
}

static void replay_damage_in_earlier_segment(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    h->log->file = 1;
    h_put(h, c, 1, 0, 60, "a");
    h_put(h, c, 1, 0, 60, "b");
    h->log->file = 2;
    h_put(h, c, 1, 0, 60, "c");
    h_close(h, c);
    layout_t lay;
    write_log(dir, h, &lay);
    /* the last frame of segment 1 is damaged: later data exists */
    image_t im = read_image(seg_path(dir, 1));
    size_t x = lay.off[2];
    im.data[x + BQ_FRAME_HEADER] ^= 1;
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    bq_replay_result_t res;
    r = replay(dir, h, true, 0, &res);
    assert_int_equal(res.records, h->log->n - 1);
    assert_int_equal(res.damaged, 1);
    assert_null(h_job(r, 2));
    assert_non_null(h_job(r, 3)); /* the LSN jump into segment 2 is accepted */
    char name[64];
    snprintf(name, sizeof name, "bqlog.1.corrupt-%zu", x);
    assert_file_is(path_of(dir, name), im.data + x, lay.len[2]);
    h_done(r);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

/* A frame with a valid checksum around payload p[0..len). */
static void frame_bytes(uint8_t *out, uint64_t lsn, const void *p, size_t len)
{
    bq_frame_header(out, lsn, 0, p, (uint32_t)len);
    memcpy(out + BQ_FRAME_HEADER, p, len);
}

static void replay_refused_record_with_valid_checksum(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    /* a record of a kind this version does not know (field 15), and bytes
     * that are no record at all */
    static const uint8_t unknown[] = {0x78, 0x01}, garbage[] = {0xff, 0xff, 0xff};
    const uint8_t *bad[] = {unknown, garbage};
    size_t badlen[] = {sizeof unknown, sizeof garbage};
    for (int k = 0; k < 2; k++) {
        clear_dir(dir);
        layout_t lay;
        write_log(dir, h, &lay);
        size_t off = lay.off[lay.n - 1] + lay.len[lay.n - 1];
        uint8_t fr[64];
        size_t flen = BQ_FRAME_HEADER + badlen[k];
        frame_bytes(fr, lay.n + 1, bad[k], badlen[k]);
        int fd = open(seg_path(dir, 1), O_RDWR);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, fr, flen, (off_t)off), (ssize_t)flen);
        close(fd);
        image_t im = read_image(seg_path(dir, 1));
        /* at the end: a torn tail, cut off and kept */
        replay_matches(dir, h, h->log->n, 1);
        expect_log("torn binlog tail", "cannot apply", "newer version", at_offset(off));
        expect_cut(dir, &im, off);
        free(im.data);

        /* followed by a valid frame: start-up stops */
        clear_dir(dir);
        write_log(dir, h, &lay);
        fd = open(seg_path(dir, 1), O_RDWR);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, fr, flen, (off_t)off), (ssize_t)flen);
        size_t next = off + flen;
        put_frame(fd, &next, lay.n + 2, h->log->recs[1].data, h->log->recs[1].len);
        close(fd);
        harness_t *r = replay(dir, h, false, -1, NULL);
        h_done(r);
        bq_replay_result_t res;
        r = replay(dir, h, true, 0, &res);
        assert_int_equal(res.records, h->log->n + 1);
        assert_int_equal(res.damaged, 1);
        h_done(r);
    }
    h_done(h);
    remove_dir(dir);
}

/* ---- segment prefixes ---- */

static void replay_damaged_prefix_of_last_empty_segment(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(3);
    layout_t lay;
    write_log(dir, h, &lay);
    size_t off;
    close(seg_begin(dir, 2, lay.n + 1, &off));
    image_t seg2 = read_image(seg_path(dir, 2));
    const char *corrupt = "bqlog.2.corrupt-0";
    for (int k = 0; k < 4; k++) {
        /* a flipped magic byte, a flipped header byte, a file cut inside
         * its prefix, an empty file: a crash while creating it */
        size_t len = k == 2 ? 10 : k == 3 ? 0 : seg2.len;
        if (k < 2)
            seg2.data[k == 0 ? 3 : off - 2] ^= 0x20;
        write_image(seg_path(dir, 2), seg2.data, len, 0);
        bq_replay_result_t res;
        harness_t *r = replay(dir, h, false, 0, &res);
        same_state(h, r);
        assert_int_equal(res.records, h->log->n);
        assert_int_equal(res.damaged, 1);
        assert_int_equal(res.last_seq, 2);
        assert_int_equal(res.end_offset, 0);
        assert_false(exists(seg_path(dir, 2)));
        assert_file_is(path_of(dir, corrupt), seg2.data, len);
        expect_log("level=warn", "moved aside", seg_path(dir, 2), "reason=\"segment prefix: ");
        assert_int_equal(unlink(path_of(dir, corrupt)), 0);
        h_done(r);
        if (k < 2)
            seg2.data[k == 0 ? 3 : off - 2] ^= 0x20;
    }
    free(seg2.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_damaged_prefix_with_frames(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    h->log->file = 1;
    h_put(h, c, 1, 0, 60, "a");
    h->log->file = 2;
    h_put(h, c, 1, 0, 60, "b");
    h_close(h, c);
    layout_t lay;
    write_log(dir, h, &lay);
    for (uint64_t seq = 1; seq <= 2; seq++) { /* in a middle and in the last segment */
        image_t im = read_image(seg_path(dir, seq));
        im.data[BQ_SEGMENT_PREFIX_FIXED + 1] ^= 1;
        write_image(seg_path(dir, seq), im.data, im.len, 0);
        harness_t *r = replay(dir, h, false, -1, NULL);
        h_done(r);
        bq_replay_result_t res;
        r = replay(dir, h, true, 0, &res);
        same_state(h, r); /* only the prefix was lost */
        assert_int_equal(res.records, h->log->n);
        assert_int_equal(res.damaged, 1);
        size_t ds = lay.off[seq == 1 ? 0 : lay.n - 1];
        assert_file_is(path_of(dir, seq == 1 ? "bqlog.1.corrupt-0" : "bqlog.2.corrupt-0"), im.data,
                       ds);
        h_done(r);
        im.data[BQ_SEGMENT_PREFIX_FIXED + 1] ^= 1;
        write_image(seg_path(dir, seq), im.data, im.len, 0);
        free(im.data);
    }
    h_done(h);
    remove_dir(dir);
}

static void replay_header_naming_another_segment(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(2);
    write_log(dir, h, NULL);
    assert_int_equal(rename(seg_path(dir, 1), path_of(dir, "bqlog.3")), 0);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    h_done(h);
    remove_dir(dir);
}

static void replay_other_format_version_always_stops(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(2);
    write_log(dir, h, NULL);
    image_t im = read_image(seg_path(dir, 1));
    im.data[8] = 2;
    write_image(seg_path(dir, 1), im.data, im.len, 0);
    harness_t *r = replay(dir, h, true, -1, NULL);
    h_done(r);
    expect_log("level=error", "format version", "version=2 supported=1");
    assert_int_equal(count_files(dir), 1);
    free(im.data);
    h_done(h);
    remove_dir(dir);
}

static void replay_beanstalkd_files(void **state)
{
    (void)state;
    char *dir = make_dir();
    harness_t *h = with_puts(2);
    write_image(path_of(dir, "binlog.1"), (const uint8_t *)"\x07\0\0\0", 4, 0);
    harness_t *r = replay(dir, h, false, -1, NULL);
    h_done(r);
    expect_log("level=error", "beanstalkd binlog files", dir);
    write_log(dir, h, NULL); /* with segments of ours, they are ignored */
    replay_matches(dir, h, h->log->n, 0);
    h_done(h);
    remove_dir(dir);
}

/* ---- benchmark (by hand) ---- */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1,000,000 puts of 100 bytes in 10 MiB segments, then a timed replay.
 * Runs only with BQ_REPLAY_BENCH=1 (BQ_REPLAY_BENCH_DIR picks the
 * directory). */
static void replay_benchmark(void **state)
{
    (void)state;
    if (!getenv("BQ_REPLAY_BENCH"))
        skip();
    const char *where = getenv("BQ_REPLAY_BENCH_DIR");
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "%s/bq-replay-bench-XXXXXX", where ? where : "/tmp");
    assert_non_null(mkdtemp(tmpl));
    char *dir = strdup(tmpl);
    harness_t *h = h_new_logged(0);
    h->auto_check = false;
    int c = h_open(h);
    char body[101];
    memset(body, 'b', 100);
    body[100] = '\0';
    uint64_t seq = 1, lsn = 1;
    size_t off;
    int fd = seg_begin_sized(dir, seq, lsn, 10 << 20, &off);
    const int jobs = 1000000;
    for (int i = 0; i < jobs; i++) {
        h_put(h, c, 1024, 0, 60, body);
        for (size_t k = 0; k < h->log->n; k++) {
            if (off + BQ_FRAME_HEADER + h->log->recs[k].len > (size_t)10 << 20) {
                close(fd);
                fd = seg_begin_sized(dir, ++seq, lsn, 10 << 20, &off);
            }
            put_frame(fd, &off, lsn++, h->log->recs[k].data, h->log->recs[k].len);
        }
        h_log_clear(h->log);
    }
    close(fd);
    h_close(h, c);
    h_done(h);

    harness_t *r = h_new(0);
    bq_replay_result_t res;
    double t0 = seconds();
    assert_int_equal(bq_replay(dir, r->e, r->now, false, &res), 0);
    double t1 = seconds();
    assert_int_equal(r->e->jobs.len, jobs);
    print_message("replay: %d jobs, %" PRIu64 " frames in %" PRIu64 " segments: %.3f s\n", jobs,
                  res.records, res.last_seq, t1 - t0);
    h_done(r);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replay_every_record_kind),
        cmocka_unit_test(replay_clean_stop_marker_lets_ids_continue),
        cmocka_unit_test(replay_reserved_job_comes_back_ready),
        cmocka_unit_test(replay_several_segments),
        cmocka_unit_test(replay_empty_directory_and_later_first_lsn),
        cmocka_unit_test(replay_large_frame),
        cmocka_unit_test(replay_lsn_gap_stops_unless_skipped),
        cmocka_unit_test(replay_missing_segment_stops_unless_skipped),
        cmocka_unit_test(replay_lsn_going_back_is_damage),
        cmocka_unit_test(replay_first_frame_must_match_header),
        cmocka_unit_test(replay_truncated_at_every_byte_of_last_frame),
        cmocka_unit_test(replay_bit_flips_in_last_frame_are_a_torn_tail),
        cmocka_unit_test(replay_zeroed_tails),
        cmocka_unit_test(replay_random_garbage_tail),
        cmocka_unit_test(replay_torn_tail_before_empty_segment),
        cmocka_unit_test(replay_copy_aside_never_overwrites),
        cmocka_unit_test(replay_bit_flips_in_middle_frame),
        cmocka_unit_test(replay_unwritten_sectors_in_last_segment),
        cmocka_unit_test(replay_damage_in_earlier_segment),
        cmocka_unit_test(replay_refused_record_with_valid_checksum),
        cmocka_unit_test(replay_damaged_prefix_of_last_empty_segment),
        cmocka_unit_test(replay_damaged_prefix_with_frames),
        cmocka_unit_test(replay_header_naming_another_segment),
        cmocka_unit_test(replay_other_format_version_always_stops),
        cmocka_unit_test(replay_beanstalkd_files),
        cmocka_unit_test(replay_benchmark),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
