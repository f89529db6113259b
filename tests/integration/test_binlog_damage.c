/* Damaged binlogs end to end, with the real binary: a segment written by
 * our server (five puts, then SIGTERM, without the clean-stop marker that
 * ends it, so that its last frame is the fifth put) is damaged on disk in
 * the ways a
 * crash or a bad disk damages it, and the restarted process must say what
 * it found and where. A damaged last frame is a torn tail: the server
 * starts, logs the segment and the offset, keeps every earlier job and
 * leaves the bad bytes in bqlog.<seq>.corrupt-<offset>. Damage with valid
 * data after it stops start-up (exit 1) with a message naming the segment,
 * the offset and --binlog-skip-corrupt, and leaves the files alone; with
 * --binlog-skip-corrupt the server starts without the damaged frame.
 * (tests/unit/test_node_replay.c covers the same policy byte by byte on
 * the replay function alone.) */
#define _GNU_SOURCE /* memmem */

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

#define JOBS 5
#define MAX_FRAMES 32
#define FRAME_HEADER 24
#define PREFIX_FIXED 20
#define EXIT_DEADLINE_MS 10000

typedef struct dmg {
    char dir[64];  /* the binlog directory */
    char out[96];  /* output of a run that must fail */
    char seg[128]; /* dir/bqlog.1 */
    bqt_server_t srv;
    uint8_t *img; /* bqlog.1 as the server left it */
    size_t img_len;
    size_t frame[MAX_FRAMES], plen[MAX_FRAMES]; /* frame offsets and payload lengths */
    int nframes;
    int job_frame[JOBS]; /* the frame holding each job's put */
    unsigned long long ids[2 * JOBS];
    char bodies[2 * JOBS][64];
} dmg_t;

/* ---- files ---- */

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    struct stat st;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return buf;
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Walks the frames of t->img (docs/binlog.md: a prefix, then frames until
 * a zero header or the end of the file). */
static void find_frames(dmg_t *t)
{
    size_t off = PREFIX_FIXED + le32(t->img + 12);
    t->nframes = 0;
    while (off + FRAME_HEADER <= t->img_len && le32(t->img + off) != 0) {
        uint32_t len = le32(t->img + off);
        assert_true(off + FRAME_HEADER + len <= t->img_len);
        assert_true(t->nframes < MAX_FRAMES);
        t->frame[t->nframes] = off;
        t->plen[t->nframes++] = len;
        off += FRAME_HEADER + len;
    }
    for (int j = 0; j < JOBS; j++) {
        t->job_frame[j] = -1;
        for (int f = 0; f < t->nframes; f++)
            if (memmem(t->img + t->frame[f] + FRAME_HEADER, t->plen[f], t->bodies[j],
                       strlen(t->bodies[j])))
                t->job_frame[j] = f;
        assert_true(t->job_frame[j] >= 0);
    }
}

static char *read_text(const char *path)
{
    size_t len;
    char *text = (char *)read_file(path, &len);
    text[len] = '\0';
    return text;
}

/* ---- the server ---- */

static void start(dmg_t *t, bool skip)
{
    const char *args[] = {"-b", t->dir, skip ? "--binlog-skip-corrupt" : NULL, NULL};
    assert_int_equal(bqt_server_start(&t->srv, bqt_our_binary(), args), 0);
}

static unsigned long long put(int fd, const char *body)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "put 0 0 100 %zu\r\n%s\r\n", strlen(body), body);
    bqt_sends(fd, cmd);
    char *line = bqt_expect_prefix(fd, "INSERTED ");
    unsigned long long id = strtoull(line + 9, NULL, 10);
    free(line);
    return id;
}

/* Starts a server on the directory, puts jobs [from, to), stops it with
 * SIGTERM. */
static void write_jobs(dmg_t *t, int from, int to)
{
    start(t, false);
    int fd = bqt_client(&t->srv);
    for (int j = from; j < to; j++) {
        snprintf(t->bodies[j], sizeof t->bodies[j], "job-%d-abcdefghijklmnopqrstuvwxyz", j + 1);
        t->ids[j] = put(fd, t->bodies[j]);
    }
    close(fd);
    bqt_server_stop(&t->srv);
}

static int setup(void **state)
{
    dmg_t *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    if (bqt_mkdtemp(t->dir, sizeof t->dir, "bq-damage") != 0) {
        free(t);
        return -1;
    }
    snprintf(t->out, sizeof t->out, "%s.out", t->dir);
    snprintf(t->seg, sizeof t->seg, "%s/bqlog.1", t->dir);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    dmg_t *t = *state;
    bqt_server_stop(&t->srv);
    if (!getenv("BQT_KEEP_DIRS")) {
        clear_dir(t->dir);
        rmdir(t->dir);
        unlink(t->out);
    }
    free(t->img);
    free(t);
    return 0;
}

/* Five jobs in bqlog.1, read into t->img, its last frame the fifth put:
 * the clean-stop marker after it (docs/binlog.md) is cut off. */
static void pristine(dmg_t *t)
{
    write_jobs(t, 0, JOBS);
    t->img = read_file(t->seg, &t->img_len);
    find_frames(t);
    assert_int_equal(t->job_frame[JOBS - 1], t->nframes - 2);
    t->img_len = t->frame[--t->nframes];
    write_file(t->seg, t->img, t->img_len);
    /* A truncated header must keep a non-zero byte, or it reads as a clean end. */
    assert_int_not_equal(t->img[t->frame[t->nframes - 1]], 0);
}

/* Runs our binary on the directory until it exits; returns its exit code
 * and leaves its output in t->out. */
static int run_to_exit(dmg_t *t, bool skip)
{
    char port[16];
    snprintf(port, sizeof port, "%d", bqt_free_port());
    const char *args[] = {
        "-l", "127.0.0.1", "-p", port, "-b", t->dir, skip ? "--binlog-skip-corrupt" : NULL, NULL};
    return bqt_run_to_exit(bqt_our_binary(), args, t->out, EXIT_DEADLINE_MS);
}

/* Asserts that text contains want, printing text otherwise. */
static void expect_text(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected \"%s\" in the server's output:\n%s", want, text);
}

/* The log names segment bqlog.1 and the offset off. */
static void expect_location(const char *text, dmg_t *t, size_t off)
{
    char want[256];
    snprintf(want, sizeof want, "segment=\"%s\" offset=%zu ", t->seg, off);
    expect_text(text, want);
}

/* Job j (0-based) is there with its body, or is not. */
static void expect_job(int fd, dmg_t *t, int j, bool present)
{
    char cmd[64], want[160];
    snprintf(cmd, sizeof cmd, "peek %llu\r\n", t->ids[j]);
    if (present)
        snprintf(want, sizeof want, "FOUND %llu %zu\r\n%s\r\n", t->ids[j], strlen(t->bodies[j]),
                 t->bodies[j]);
    else
        snprintf(want, sizeof want, "NOT_FOUND\r\n");
    bqt_sends(fd, cmd);
    bqt_expect(fd, want);
}

/* The copy aside of the bytes damaged at off holds img[off..end). */
static void expect_copy(dmg_t *t, size_t off, const uint8_t *img, size_t end)
{
    char path[160];
    size_t len;
    snprintf(path, sizeof path, "%s.corrupt-%zu", t->seg, off);
    uint8_t *copy = read_file(path, &len);
    assert_int_equal(len, end - off);
    assert_memory_equal(copy, img + off, len);
    free(copy);
}

/* ---- a damaged last frame: a torn tail ---- */

/* Where the non-zero bytes of img[0..len) end. */
static size_t nonzero_end(const uint8_t *img, size_t len)
{
    while (len > 0 && img[len - 1] == 0)
        len--;
    return len;
}

/* Writes img as bqlog.1 (alone in the directory), starts the server and
 * checks the torn-tail policy for damage in the last frame. */
static void expect_torn_tail(dmg_t *t, const uint8_t *img, size_t len, const char *what)
{
    size_t last = t->frame[t->nframes - 1];
    print_message("  %s\n", what);
    clear_dir(t->dir);
    write_file(t->seg, img, len);
    start(t, false);
    int fd = bqt_client(&t->srv);
    for (int j = 0; j < JOBS; j++) /* the first reply also means replay is over */
        expect_job(fd, t, j, t->job_frame[j] != t->nframes - 1);
    assert_true(put(fd, "after") > t->ids[JOBS - 1]);
    close(fd);
    char *log = read_text(t->srv.log_path);
    expect_text(log, "msg=\"torn binlog tail cut off");
    expect_location(log, t, last);
    free(log);
    expect_copy(t, last, img, nonzero_end(img, len));
    struct stat st;
    assert_int_equal(stat(t->seg, &st), 0);
    assert_int_equal(st.st_size, (off_t)last);
    bqt_server_stop(&t->srv);
}

static void truncated_last_frame_is_cut(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    size_t last = t->frame[t->nframes - 1], plen = t->plen[t->nframes - 1];
    size_t cuts[] = {1,
                     4,
                     8,
                     16,
                     FRAME_HEADER - 1,
                     FRAME_HEADER,
                     FRAME_HEADER + plen / 2,
                     FRAME_HEADER + plen - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char what[64];
        snprintf(what, sizeof what, "truncated %zu bytes into the last frame", cuts[i]);
        expect_torn_tail(t, t->img, last + cuts[i], what);
    }
}

/* Flips bit `bit` of byte `at` of the last frame. */
static void flip_last(dmg_t *t, size_t at, int bit, const char *what)
{
    uint8_t *img = malloc(t->img_len);
    assert_non_null(img);
    memcpy(img, t->img, t->img_len);
    img[t->frame[t->nframes - 1] + at] ^= (uint8_t)(1u << bit);
    expect_torn_tail(t, img, t->img_len, what);
    free(img);
}

static void bit_flip_in_last_body_is_cut(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    int f = t->nframes - 1;
    const char *body = t->bodies[JOBS - 1];
    uint8_t *p = memmem(t->img + t->frame[f] + FRAME_HEADER, t->plen[f], body, strlen(body));
    assert_non_null(p);
    size_t at = (size_t)(p - (t->img + t->frame[f])) + strlen(body) / 2;
    flip_last(t, at, 3, "a bit flipped in the last job's body");
}

static void bit_flip_in_last_header_is_cut(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    flip_last(t, 0, 0, "a bit flipped in the length");
    flip_last(t, 1, 2, "a length grown past the end of the file");
    flip_last(t, 5, 4, "a bit flipped in the checksum");
    flip_last(t, 8, 1, "a bit flipped in the LSN");
    flip_last(t, 16, 0, "a bit flipped in the epoch");
}

/* Zeroes the last frame from `at` and adds a preallocated-looking tail. */
static void zero_last(dmg_t *t, size_t at, const char *what)
{
    size_t len = t->img_len + 4096;
    uint8_t *img = calloc(1, len);
    assert_non_null(img);
    memcpy(img, t->img, t->frame[t->nframes - 1] + at);
    expect_torn_tail(t, img, len, what);
    free(img);
}

static void zero_filled_tail_is_cut(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    zero_last(t, 4, "zeros from the checksum on");
    zero_last(t, FRAME_HEADER, "zeros from the payload on");
    zero_last(t, FRAME_HEADER + t->plen[t->nframes - 1] / 2, "zeros from the middle of the body");
}

/* ---- damage with data after it ---- */

/* Start-up stops with exit 1, names seg/offset and the option, and leaves
 * the directory as it was. */
static void expect_refusal(dmg_t *t, const char *seg_path, size_t off)
{
    size_t before, after;
    uint8_t *was = read_file(seg_path, &before);
    assert_int_equal(run_to_exit(t, false), 1);
    char *out = read_text(t->out), want[256];
    expect_text(out, "msg=\"binlog damaged before its end; not starting\"");
    snprintf(want, sizeof want, "segment=\"%s\" offset=%zu ", seg_path, off);
    expect_text(out, want);
    expect_text(out, "--binlog-skip-corrupt");
    free(out);
    uint8_t *now = read_file(seg_path, &after);
    assert_int_equal(after, before);
    assert_memory_equal(now, was, before);
    free(was);
    free(now);
    char copy[160];
    snprintf(copy, sizeof copy, "%s.corrupt-%zu", seg_path, off);
    assert_int_equal(access(copy, F_OK), -1);
}

/* A bit flipped in the third job's frame, two valid frames after it. */
static void damage_in_the_middle_stops_startup(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    int f = t->job_frame[2];
    size_t off = t->frame[f];
    uint8_t *img = malloc(t->img_len);
    assert_non_null(img);
    memcpy(img, t->img, t->img_len);
    img[off + FRAME_HEADER + t->plen[f] - 1] ^= 0x10;
    write_file(t->seg, img, t->img_len);
    expect_refusal(t, t->seg, off);
    start(t, true);
    int fd = bqt_client(&t->srv);
    for (int j = 0; j < JOBS; j++)
        expect_job(fd, t, j, j != 2);
    close(fd);
    char *log = read_text(t->srv.log_path);
    expect_text(log, "msg=\"SKIPPING DAMAGED BINLOG DATA");
    expect_location(log, t, off);
    free(log);
    expect_copy(t, off, img, t->frame[f + 1]); /* exactly the damaged frame */
    free(img);
}

/* A torn last frame in bqlog.1 is not a tail when bqlog.2 holds data. */
static void damage_before_a_later_segment_stops_startup(void **state)
{
    dmg_t *t = *state;
    pristine(t);
    write_jobs(t, JOBS, 2 * JOBS); /* a second run: bqlog.2 */
    size_t len;
    uint8_t *again = read_file(t->seg, &len);
    assert_int_equal(len, t->img_len);
    assert_memory_equal(again, t->img, len);
    free(again);
    size_t last = t->frame[t->nframes - 1], cut = last + FRAME_HEADER + 2;
    assert_int_equal(truncate(t->seg, (off_t)cut), 0);
    expect_refusal(t, t->seg, last);
    start(t, true);
    int fd = bqt_client(&t->srv);
    for (int j = 0; j < 2 * JOBS; j++)
        expect_job(fd, t, j, j != JOBS - 1);
    assert_true(put(fd, "after") > t->ids[2 * JOBS - 1]);
    close(fd);
    char *log = read_text(t->srv.log_path);
    expect_text(log, "msg=\"SKIPPING DAMAGED BINLOG DATA");
    expect_location(log, t, last);
    free(log);
    expect_copy(t, last, t->img, nonzero_end(t->img, cut));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(truncated_last_frame_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(bit_flip_in_last_body_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(bit_flip_in_last_header_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(zero_filled_tail_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(damage_in_the_middle_stops_startup, setup, teardown),
        cmocka_unit_test_setup_teardown(damage_before_a_later_segment_stops_startup, setup,
                                        teardown),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("binlog_damage", tests, NULL, NULL);
}
