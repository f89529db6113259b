/* Unit tests of node/binlog/resync.c, a standby's full resync. Each test makes a
 * binlog directory holding an "old" log (four segments of IdReservation
 * records whose reservations are far above the download's), downloads three
 * segments of real frames (bq_frame_header around packed bq.log.Record
 * messages) with bq_resync_*, and checks what bq_resync_install leaves:
 * exactly the downloaded log, which bq_replay applies into a fresh engine
 * (last LSN, record count, and the id reservation it restores), or the old
 * log untouched when the download was unfinished.
 *
 * Covered: a plain install; an unfinished download (a child process that
 * exits mid-download, and one whose COMPLETE marker is missing) removed with
 * the old log intact; installs interrupted at every step (states made by
 * performing the steps partially: old segments half or wholly deleted,
 * INSTALLING written, half or all of the segments moved, COMPLETE removed,
 * only an empty directory left) ending with exactly the downloaded log;
 * abort; begin over an earlier download; the error returns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_harness.h"
#include "node/binlog/replay.h"
#include "node/binlog/resync.h"
#include "node/binlog/segment.h"
#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"

#define DL_SEGMENTS 3
#define DL_FRAMES 5      /* per downloaded segment */
#define DL_FIRST_LSN 100 /* LSN of the download's first frame */
#define DL_LAST_LSN (DL_FIRST_LSN + DL_SEGMENTS * DL_FRAMES - 1)
#define OLD_SEGMENTS 4
#define OLD_FRAMES 3
#define OLD_ID_BASE 900000 /* the old log reserves ids from here */
#define PATH_MAX_LEN 512

/* A file's bytes. */
typedef struct image {
    uint8_t *data;
    size_t len;
} image_t;

typedef struct fixture {
    char dir[PATH_MAX_LEN];
    char rdir[PATH_MAX_LEN];
    image_t old[OLD_SEGMENTS + 1]; /* [seq], the old log as written */
    image_t dl[DL_SEGMENTS + 1];   /* [n], the download as finished */
} fixture_t;

/* ---- files ---- */

static char *path_in(const char *dir, const char *name)
{
    static char path[4][PATH_MAX_LEN];
    static int k;
    k = (k + 1) % 4;
    assert_true((size_t)snprintf(path[k], sizeof path[k], "%s/%s", dir, name) < sizeof path[k]);
    return path[k];
}

static char *seg_path(const char *dir, uint64_t seq)
{
    static char path[4][PATH_MAX_LEN];
    static int k;
    k = (k + 1) % 4;
    bq_segment_path(path[k], sizeof path[k], dir, seq);
    return path[k];
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The whole file at path (it must exist). */
static image_t read_image(const char *path)
{
    image_t im = {NULL, 0};
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("%s: %s", path, strerror(errno));
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    im.len = (size_t)st.st_size;
    im.data = malloc(im.len + 1);
    assert_non_null(im.data);
    assert_int_equal(pread(fd, im.data, im.len, 0), (ssize_t)im.len);
    close(fd);
    return im;
}

static void assert_file_is(const char *path, const image_t *want)
{
    image_t im = read_image(path);
    assert_int_equal(im.len, want->len);
    assert_memory_equal(im.data, want->data, want->len);
    free(im.data);
}

/* The names in dir, sorted, joined by spaces (static buffer). */
static const char *listing(const char *dir)
{
    static char out[4096];
    char names[32][64];
    size_t n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        assert_true(n < 32);
        assert_true((size_t)snprintf(names[n++], sizeof names[0], "%s", de->d_name) <
                    sizeof names[0]);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
    return out;
}

/* Removes dir and the files and directories in it. */
static void remove_all(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *p = path_in(dir, de->d_name);
        char copy[PATH_MAX_LEN];
        assert_true((size_t)snprintf(copy, sizeof copy, "%s", p) < sizeof copy);
        if (unlink(copy) != 0)
            remove_all(copy);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
}

/* ---- records and frames ---- */

/* Writes a frame (header and packed IdReservation{next}) into out; returns
 * its length. */
static size_t make_frame(uint8_t *out, size_t cap, uint64_t lsn, uint64_t next)
{
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    Bq__Log__Record rec = BQ__LOG__RECORD__INIT;
    ids.next = next;
    rec.kind_case = BQ__LOG__RECORD__KIND_IDS;
    rec.ids = &ids;
    size_t n = bq__log__record__get_packed_size(&rec);
    assert_true(BQ_FRAME_HEADER + n <= cap);
    bq__log__record__pack(&rec, out + BQ_FRAME_HEADER);
    bq_frame_header(out, lsn, 1, out + BQ_FRAME_HEADER, (uint32_t)n);
    return BQ_FRAME_HEADER + n;
}

/* The reservation the download's frame lsn carries. */
static uint64_t dl_next(uint64_t lsn)
{
    return lsn * 10;
}

/* Writes the old log: OLD_SEGMENTS segments in dir, LSNs from 1. */
static void write_old_log(fixture_t *f)
{
    uint64_t lsn = 1;
    for (uint64_t seq = 1; seq <= OLD_SEGMENTS; seq++) {
        bq_segment_meta_t m;
        memset(&m, 0, sizeof m);
        m.seq = seq;
        m.first_lsn = lsn;
        m.checkpoint = true;
        strcpy(m.node_id, "old");
        uint64_t off;
        int fd = bq_segment_create(f->dir, &m, 4096, &off);
        assert_true(fd >= 0);
        for (int i = 0; i < OLD_FRAMES; i++, lsn++) {
            uint8_t fr[128];
            size_t n = make_frame(fr, sizeof fr, lsn, OLD_ID_BASE + lsn);
            assert_int_equal(pwrite(fd, fr, n, (off_t)off), (ssize_t)n);
            off += n;
        }
        close(fd);
        f->old[seq] = read_image(seg_path(f->dir, seq));
    }
}

/* Downloads `segments` segments of DL_FRAMES frames (LSNs from
 * DL_FIRST_LSN), frames handed over in pieces of one or two. */
static void download(bq_resync_t *r, int segments)
{
    uint64_t lsn = DL_FIRST_LSN, expect = bq_resync_bytes(r);
    for (int s = 0; s < segments; s++) {
        assert_int_equal(bq_resync_segment(r, lsn, 1, 1700000000, s == 0), 0);
        assert_true(bq_resync_bytes(r) > expect);
        expect = bq_resync_bytes(r);
        for (int i = 0; i < DL_FRAMES; i += 2) {
            uint8_t fr[256];
            size_t n = make_frame(fr, sizeof fr, lsn, dl_next(lsn));
            lsn++;
            if (i + 1 < DL_FRAMES) {
                n += make_frame(fr + n, sizeof fr - n, lsn, dl_next(lsn));
                lsn++;
            }
            assert_int_equal(bq_resync_frames(r, fr, n), 0);
            expect += n;
            assert_int_equal(bq_resync_bytes(r), expect);
        }
    }
}

/* A finished download in f->rdir, its files kept in f->dl. */
static void finished_download(fixture_t *f)
{
    bq_resync_t *r = NULL;
    assert_int_equal(bq_resync_begin(&r, f->dir, "standby-1", "cluster-a"), 0);
    download(r, DL_SEGMENTS);
    uint64_t bytes = bq_resync_bytes(r);
    assert_int_equal(bq_resync_finish(r), 0);
    assert_string_equal(listing(f->rdir), "COMPLETE bqlog.1 bqlog.2 bqlog.3");
    uint64_t total = 0;
    for (uint64_t n = 1; n <= DL_SEGMENTS; n++) {
        f->dl[n] = read_image(seg_path(f->rdir, n));
        total += f->dl[n].len;
    }
    assert_int_equal(total, bytes); /* trimmed to the data: no preallocated tail */
}

/* ---- checks ---- */

/* Replays f->dir into a fresh engine: returns the id a new put gets. */
static uint64_t replay_dir(const fixture_t *f, bq_replay_result_t *res)
{
    harness_t *h = h_new(0);
    assert_int_equal(bq_replay(f->dir, h->e, h->now, false, res), 0);
    int c = h_open(h);
    uint64_t id = h_put(h, c, 0, 0, 10, "x");
    h_done(h);
    return id;
}

/* Asserts that f->dir holds exactly the downloaded log (and the files
 * install must leave alone), and that it replays to its last LSN. */
static void expect_installed(const fixture_t *f)
{
    assert_false(exists(f->rdir));
    assert_string_equal(listing(f->dir), "bqlog.1 bqlog.1.corrupt-40 bqlog.2 bqlog.3 lock");
    for (uint64_t n = 1; n <= DL_SEGMENTS; n++)
        assert_file_is(seg_path(f->dir, n), &f->dl[n]);
    bq_replay_result_t res;
    uint64_t id = replay_dir(f, &res);
    assert_int_equal(res.first_seq, 1);
    assert_int_equal(res.last_seq, DL_SEGMENTS);
    assert_int_equal(res.last_lsn, DL_LAST_LSN);
    assert_int_equal(res.records, DL_SEGMENTS * DL_FRAMES);
    assert_int_equal(res.damaged, 0);
    assert_int_equal(id, dl_next(DL_LAST_LSN));
}

/* Asserts that f->dir holds the old log as written and no download. */
static void expect_old_log(const fixture_t *f)
{
    assert_false(exists(f->rdir));
    assert_string_equal(listing(f->dir), "bqlog.1 bqlog.1.corrupt-40 bqlog.2 bqlog.3 bqlog.4 lock");
    for (uint64_t n = 1; n <= OLD_SEGMENTS; n++)
        assert_file_is(seg_path(f->dir, n), &f->old[n]);
    bq_replay_result_t res;
    uint64_t id = replay_dir(f, &res);
    assert_int_equal(res.last_lsn, OLD_SEGMENTS * OLD_FRAMES);
    assert_int_equal(id, OLD_ID_BASE + OLD_SEGMENTS * OLD_FRAMES);
}

/* ---- fixture ---- */

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    struct stat st;
    bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
    snprintf(f->dir, sizeof f->dir, "%s/bq-resync-XXXXXX", shm ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    assert_true((size_t)snprintf(f->rdir, sizeof f->rdir, "%s/resync", f->dir) < sizeof f->rdir);
    write_old_log(f);
    /* Files that are not the old log's segments: install leaves them. */
    int fd = open(path_in(f->dir, "bqlog.1.corrupt-40"), O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "evidence", 8), 8);
    close(fd);
    fd = open(path_in(f->dir, "lock"), O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    remove_all(f->dir);
    for (int i = 0; i <= OLD_SEGMENTS; i++)
        free(f->old[i].data);
    for (int i = 0; i <= DL_SEGMENTS; i++)
        free(f->dl[i].data);
    free(f);
    return 0;
}

/* ---- tests ---- */

static void install_replaces_the_log(void **state)
{
    fixture_t *f = *state;
    expect_old_log(f);
    finished_download(f);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_installed(f);
    /* Nothing left to do: a second install changes nothing. */
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_installed(f);
}

static void install_without_download_does_nothing(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
}

/* A process that dies in the middle of a download leaves no COMPLETE. */
static void unfinished_download_is_removed(void **state)
{
    fixture_t *f = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bq_resync_t *r = NULL;
        if (bq_resync_begin(&r, f->dir, "standby-1", "") != 0 ||
            bq_resync_segment(r, 1, 1, 0, true) != 0)
            _exit(1);
        uint8_t fr[128];
        size_t n = make_frame(fr, sizeof fr, 1, 10);
        _exit(bq_resync_frames(r, fr, n) == 0 ? 0 : 1); /* dies without finishing */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal(listing(f->rdir), "bqlog.1");
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
}

/* Every segment downloaded and synced, but the marker never written. */
static void download_without_marker_is_removed(void **state)
{
    fixture_t *f = *state;
    finished_download(f);
    assert_int_equal(unlink(path_in(f->rdir, "COMPLETE")), 0);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
}

/* How far an interrupted install got before the crash. */
typedef enum step {
    OLD_HALF_DELETED,  /* COMPLETE; some old segments deleted */
    OLD_DELETED,       /* COMPLETE; every old segment deleted */
    MARKED_INSTALLING, /* COMPLETE and INSTALLING; nothing moved */
    HALF_MOVED,        /* ...and some segments moved in */
    ALL_MOVED,         /* ...and every segment moved in */
    COMPLETE_REMOVED,  /* INSTALLING only */
    MARKERS_REMOVED,   /* an empty DIR/resync */
    STEPS
} step_t;

/* Performs the install steps up to `upto` by hand. */
static void partial_install(fixture_t *f, step_t upto)
{
    for (uint64_t n = 1; n <= (upto == OLD_HALF_DELETED ? 2 : OLD_SEGMENTS); n++)
        assert_int_equal(unlink(seg_path(f->dir, n)), 0);
    if (upto >= MARKED_INSTALLING) {
        int fd = open(path_in(f->rdir, "INSTALLING"), O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    uint64_t moved = upto >= ALL_MOVED ? DL_SEGMENTS : upto == HALF_MOVED ? 2 : 0;
    for (uint64_t n = 1; n <= moved; n++) {
        char from[PATH_MAX_LEN];
        assert_true((size_t)snprintf(from, sizeof from, "%s", seg_path(f->rdir, n)) < sizeof from);
        assert_int_equal(rename(from, seg_path(f->dir, n)), 0);
    }
    if (upto >= COMPLETE_REMOVED)
        assert_int_equal(unlink(path_in(f->rdir, "COMPLETE")), 0);
    if (upto >= MARKERS_REMOVED)
        assert_int_equal(unlink(path_in(f->rdir, "INSTALLING")), 0);
}

static void interrupted_install_finishes(void **state)
{
    fixture_t *f = *state;
    for (step_t s = OLD_HALF_DELETED; s < STEPS; s++) {
        if (s > OLD_HALF_DELETED) { /* back to the old log */
            teardown(state);
            setup(state);
            f = *state;
        }
        finished_download(f);
        partial_install(f, s);
        print_message("interrupted after step %d: %s\n", (int)s, listing(f->rdir));
        assert_int_equal(bq_resync_install(f->dir), 0);
        expect_installed(f);
    }
}

/* Install itself fails part-way (an old segment cannot be deleted); the
 * next install, once the obstacle is gone, finishes the job. */
static void failed_install_is_resumed(void **state)
{
    fixture_t *f = *state;
    finished_download(f);
    /* A directory in place of old segment 3 makes its unlink fail. */
    assert_int_equal(unlink(seg_path(f->dir, 3)), 0);
    assert_int_equal(mkdir(seg_path(f->dir, 3), 0700), 0);
    assert_int_equal(bq_resync_install(f->dir), -1);
    assert_string_equal(listing(f->rdir), "COMPLETE bqlog.1 bqlog.2 bqlog.3");
    assert_string_equal(listing(f->dir), "bqlog.1.corrupt-40 bqlog.3 bqlog.4 lock resync");
    assert_int_equal(rmdir(seg_path(f->dir, 3)), 0);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_installed(f);
}

static void abort_removes_the_download(void **state)
{
    fixture_t *f = *state;
    bq_resync_t *r = NULL;
    assert_int_equal(bq_resync_begin(&r, f->dir, "standby-1", "cluster-a"), 0);
    download(r, 2);
    assert_string_equal(listing(f->rdir), "bqlog.1 bqlog.2");
    bq_resync_abort(r);
    assert_false(exists(f->rdir));
    bq_resync_abort(NULL);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
}

/* begin throws away an earlier download, even a complete one. */
static void begin_replaces_an_earlier_download(void **state)
{
    fixture_t *f = *state;
    finished_download(f);
    bq_resync_t *r = NULL;
    assert_int_equal(bq_resync_begin(&r, f->dir, "standby-1", "cluster-a"), 0);
    assert_string_equal(listing(f->rdir), "");
    assert_int_equal(bq_resync_bytes(r), 0);
    download(r, DL_SEGMENTS);
    assert_int_equal(bq_resync_finish(r), 0);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_installed(f);
}

static void segment_headers_carry_the_ids(void **state)
{
    fixture_t *f = *state;
    finished_download(f);
    for (uint64_t n = 1; n <= DL_SEGMENTS; n++) {
        int fd = open(seg_path(f->rdir, n), O_RDONLY);
        assert_true(fd >= 0);
        bq_segment_meta_t m;
        uint64_t ds;
        char err[128];
        assert_int_equal(bq_segment_read_meta(fd, &m, &ds, err, sizeof err), 0);
        close(fd);
        assert_int_equal(m.seq, n);
        assert_int_equal(m.first_lsn, DL_FIRST_LSN + (n - 1) * DL_FRAMES);
        assert_int_equal(m.epoch, 1);
        assert_int_equal(m.created_wall, 1700000000);
        assert_int_equal(m.checkpoint, n == 1);
        assert_string_equal(m.node_id, "standby-1");
        assert_string_equal(m.cluster_id, "cluster-a");
    }
}

static void errors(void **state)
{
    fixture_t *f = *state;
    bq_resync_t *r = NULL;
    char long_id[80];
    memset(long_id, 'n', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    assert_int_equal(bq_resync_begin(&r, f->dir, long_id, ""), -EINVAL);
    assert_int_equal(bq_resync_begin(&r, path_in(f->dir, "missing/dir"), "n", ""), -ENOENT);
    assert_int_equal(bq_resync_begin(&r, f->dir, "standby-1", ""), 0);
    uint8_t fr[128];
    size_t n = make_frame(fr, sizeof fr, 1, 10);
    assert_int_equal(bq_resync_frames(r, fr, n), -EINVAL); /* no segment yet */
    assert_int_equal(bq_resync_finish(r), -EINVAL);        /* frees r: nothing to install */
    assert_false(exists(path_in(f->rdir, "COMPLETE")));
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
    /* A COMPLETE marker over no segment never deletes the old log. */
    assert_int_equal(mkdir(f->rdir, 0700), 0);
    int fd = open(path_in(f->rdir, "COMPLETE"), O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(bq_resync_install(f->dir), -1);
    assert_int_equal(unlink(path_in(f->rdir, "COMPLETE")), 0);
    assert_int_equal(bq_resync_install(f->dir), 0);
    expect_old_log(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(install_replaces_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(install_without_download_does_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(unfinished_download_is_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(download_without_marker_is_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(interrupted_install_finishes, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_install_is_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(abort_removes_the_download, setup, teardown),
        cmocka_unit_test_setup_teardown(begin_replaces_an_earlier_download, setup, teardown),
        cmocka_unit_test_setup_teardown(segment_headers_carry_the_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
