/* Unit tests of node/cluster/election_store.c: save and load round trips (empty
 * state, a vote, a full history of longest names), atomic replacement (a
 * leftover or torn DIR/election.tmp never wins and is removed, a failed
 * save leaves no tmp), damage (every truncation and every single-bit flip
 * of a saved file, and hand-made frames that break each rule), I/O errors,
 * and the history rules of bq_estore_add_epoch and bq_estore_epoch_end.
 * Each test works in its own mkdtemp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/cluster/election_store.h"
#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"

typedef struct fixture {
    char dir[64];
    bq_election_state_t *a; /* what a test saves */
    bq_election_state_t *b; /* what it loads */
} fixture_t;

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    strcpy(fx->dir, "/tmp/bq-estore-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    fx->a = calloc(1, sizeof *fx->a);
    fx->b = calloc(1, sizeof *fx->b);
    assert_non_null(fx->a);
    assert_non_null(fx->b);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx->a);
    free(fx->b);
    free(fx);
    return 0;
}

static void path_in(char *buf, size_t cap, const char *dir, const char *name)
{
    assert_true((size_t)snprintf(buf, cap, "%s/%s", dir, name) < cap);
}

static void put_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[256];
    path_in(path, sizeof path, dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* Reads DIR/name into a new buffer (free it); *len its size. */
static uint8_t *get_file(const char *dir, const char *name, size_t *len)
{
    char path[256];
    path_in(path, sizeof path, dir, name);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    uint8_t *buf = malloc((size_t)sb.st_size + 1);
    assert_non_null(buf);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, (size_t)sb.st_size), (ssize_t)sb.st_size);
    close(fd);
    *len = (size_t)sb.st_size;
    return buf;
}

static int exists(const char *dir, const char *name)
{
    char path[256];
    path_in(path, sizeof path, dir, name);
    return access(path, F_OK) == 0;
}

static void assert_same_state(const bq_election_state_t *x, const bq_election_state_t *y)
{
    assert_int_equal(x->epoch, y->epoch);
    assert_string_equal(x->voted_for, y->voted_for);
    assert_int_equal(x->nhist, y->nhist);
    for (size_t i = 0; i < x->nhist; i++) {
        assert_int_equal(x->hist[i].epoch, y->hist[i].epoch);
        assert_int_equal(x->hist[i].first_lsn, y->hist[i].first_lsn);
        assert_string_equal(x->hist[i].node, y->hist[i].node);
    }
}

static void assert_empty(const bq_election_state_t *st)
{
    assert_int_equal(st->epoch, 0);
    assert_string_equal(st->voted_for, "");
    assert_int_equal(st->nhist, 0);
}

/* Fills *st with garbage, so that a load must overwrite all of it. */
static void scribble(bq_election_state_t *st)
{
    memset(st, 0x5a, sizeof *st);
    st->nhist = 3;
}

/* A state with a vote and three epochs. */
static void small_state(bq_election_state_t *st)
{
    memset(st, 0, sizeof *st);
    st->epoch = 7;
    strcpy(st->voted_for, "node-b");
    assert_int_equal(bq_estore_add_epoch(st, 1, 1, "node-a"), 1);
    assert_int_equal(bq_estore_add_epoch(st, 4, 120, "node-b"), 1);
    assert_int_equal(bq_estore_add_epoch(st, 7, 4000, ""), 1);
}

/* Writes DIR/election as one frame (lsn, epoch) around payload[0..len). */
static void put_frame(const char *dir, uint64_t lsn, uint64_t epoch, const void *payload,
                      size_t len)
{
    uint8_t *buf = malloc(BQ_FRAME_HEADER + len);
    assert_non_null(buf);
    bq_frame_header(buf, lsn, epoch, payload, (uint32_t)len);
    memcpy(buf + BQ_FRAME_HEADER, payload, len);
    put_file(dir, "election", buf, BQ_FRAME_HEADER + len);
    free(buf);
}

/* Packs m into a new buffer (free it); *len its size. */
static uint8_t *pack(const Bq__Log__ElectionState *m, size_t *len)
{
    *len = bq__log__election_state__get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(bq__log__election_state__pack(m, buf), *len);
    return buf;
}

/* Writes a well-framed message with n history entries (epoch i+1, LSN
 * 10*i) and the given frame epoch; the caller then damages the message. */
static void put_message(const char *dir, Bq__Log__ElectionState *m, Bq__Log__EpochStart *items,
                        Bq__Log__EpochStart **ptrs, size_t n, uint64_t frame_epoch)
{
    for (size_t i = 0; i < n; i++) {
        bq__log__epoch_start__init(&items[i]);
        items[i].epoch = i + 1;
        items[i].first_lsn = 10 * i;
        ptrs[i] = &items[i];
    }
    m->n_history = n;
    m->history = ptrs;
    size_t len;
    uint8_t *buf = pack(m, &len);
    put_frame(dir, 0, frame_epoch, buf, len);
    free(buf);
}

static void load_is_damaged(const fixture_t *fx)
{
    scribble(fx->b);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_DAMAGED);
    assert_empty(fx->b);
}

static void round_trip_empty(void **state)
{
    fixture_t *fx = *state;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    assert_true(exists(fx->dir, "election"));
    assert_false(exists(fx->dir, "election.tmp"));
    scribble(fx->b);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_empty(fx->b);
}

static void round_trip_vote(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    scribble(fx->b);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);

    /* A second save replaces the first. */
    fx->a->epoch = 8;
    fx->a->voted_for[0] = '\0';
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);
}

static void round_trip_full_history(void **state)
{
    fixture_t *fx = *state;
    char name[BQ_ESTORE_NAME_MAX];
    for (uint64_t e = 1; e <= BQ_ESTORE_HISTORY_MAX; e++) {
        memset(name, 'a' + (int)(e % 26), sizeof name - 1);
        name[sizeof name - 1] = '\0';
        assert_int_equal(bq_estore_add_epoch(fx->a, e * 1000003, e * 0x10000000000ull, name), 1);
    }
    fx->a->epoch = BQ_EPOCH_MAX;
    fx->a->floor_epoch = BQ_EPOCH_MAX;
    fx->a->floor_lsn = UINT64_MAX;
    memset(fx->a->voted_for, 'v', BQ_ESTORE_NAME_MAX - 1);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    size_t len;
    free(get_file(fx->dir, "election", &len));
    assert_true(len < 200 * 1024);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);
    assert_true(fx->b->floor_lsn == UINT64_MAX);
}

/* An epoch above BQ_EPOCH_MAX (never reachable: a version before the bound,
 * or a hand-edited file) is refused on save and reported damaged on load. */
static void epoch_above_the_limit_is_damage(void **state)
{
    fixture_t *fx = *state;
    fx->a->epoch = BQ_EPOCH_MAX + 1;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    fx->a->epoch = 3;
    fx->a->floor_epoch = UINT64_MAX;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    fx->a->floor_epoch = 0;
    assert_int_equal(bq_estore_add_epoch(fx->a, UINT64_MAX, 5, "n1"), 1);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    /* Written by an older version: the file decodes, the state is refused. */
    Bq__Log__ElectionState m = BQ__LOG__ELECTION_STATE__INIT;
    m.epoch = UINT64_MAX;
    m.voted_for = (char *)"";
    uint8_t buf[BQ_FRAME_HEADER + 64];
    size_t n = bq__log__election_state__pack(&m, buf + BQ_FRAME_HEADER);
    bq_frame_header(buf, 0, UINT64_MAX, buf + BQ_FRAME_HEADER, (uint32_t)n);
    put_file(fx->dir, "election", buf, BQ_FRAME_HEADER + n);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_DAMAGED);
}

static void load_absent(void **state)
{
    fixture_t *fx = *state;
    scribble(fx->b);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_ABSENT);
    assert_empty(fx->b);

    /* A leftover tmp alone is not a state either, and is removed. */
    put_file(fx->dir, "election.tmp", "junk", 4);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_ABSENT);
    assert_false(exists(fx->dir, "election.tmp"));
}

static void leftover_tmp_ignored_and_removed(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    put_file(fx->dir, "election.tmp", "junk", 4);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);
    assert_false(exists(fx->dir, "election.tmp"));
}

/* A save of the new state torn before its rename: the tmp holds a prefix
 * of the new file, DIR/election the old state, which load returns. */
static void torn_tmp_keeps_old_state(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    size_t old_len;
    uint8_t *old = get_file(fx->dir, "election", &old_len);

    bq_election_state_t *newer = calloc(1, sizeof *newer);
    assert_non_null(newer);
    small_state(newer);
    newer->epoch = 9;
    assert_int_equal(bq_estore_add_epoch(newer, 9, 5000, "node-c"), 1);
    assert_int_equal(bq_estore_save(fx->dir, newer), BQ_ESTORE_OK);
    size_t new_len;
    uint8_t *next = get_file(fx->dir, "election", &new_len);
    put_file(fx->dir, "election", old, old_len);
    put_file(fx->dir, "election.tmp", next, new_len / 2);

    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);
    assert_false(exists(fx->dir, "election.tmp"));
    free(old);
    free(next);
    free(newer);
}

static void every_truncation_damaged(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    size_t len;
    uint8_t *whole = get_file(fx->dir, "election", &len);
    for (size_t n = 0; n < len; n++) {
        put_file(fx->dir, "election", whole, n);
        load_is_damaged(fx);
    }
    free(whole);
}

static void every_bit_flip_damaged(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    size_t len;
    uint8_t *whole = get_file(fx->dir, "election", &len);
    for (size_t bit = 0; bit < len * 8; bit++) {
        whole[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        put_file(fx->dir, "election", whole, len);
        load_is_damaged(fx);
        whole[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    /* The unflipped bytes still load: the damage came from the flips. */
    put_file(fx->dir, "election", whole, len);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_same_state(fx->a, fx->b);
    free(whole);
}

static void trailing_bytes_damaged(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_OK);
    size_t len;
    uint8_t *whole = get_file(fx->dir, "election", &len);
    uint8_t *more = calloc(1, len + 1);
    assert_non_null(more);
    memcpy(more, whole, len);
    put_file(fx->dir, "election", more, len + 1); /* one zero byte more */
    load_is_damaged(fx);
    free(more);
    free(whole);
}

/* Frames with valid checksums whose content breaks a rule. */
static void bad_frames_damaged(void **state)
{
    fixture_t *fx = *state;
    static const uint8_t not_proto[] = {0xff, 0xff, 0xff};
    put_frame(fx->dir, 0, 0, not_proto, sizeof not_proto);
    load_is_damaged(fx);

    Bq__Log__ElectionState m = BQ__LOG__ELECTION_STATE__INIT;
    m.epoch = 5;
    Bq__Log__EpochStart items[3];
    Bq__Log__EpochStart *ptrs[3];
    put_message(fx->dir, &m, items, ptrs, 3, 5);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK); /* the control */
    assert_int_equal(fx->b->nhist, 3);

    put_message(fx->dir, &m, items, ptrs, 3, 4); /* frame epoch != message epoch */
    load_is_damaged(fx);

    size_t len;
    uint8_t *buf = pack(&m, &len);
    put_frame(fx->dir, 1, 5, buf, len); /* LSN not 0 */
    free(buf);
    load_is_damaged(fx);

    items[2].epoch = 2; /* epochs 1, 2, 2: not ascending */
    buf = pack(&m, &len);
    put_frame(fx->dir, 0, 5, buf, len);
    free(buf);
    load_is_damaged(fx);

    put_message(fx->dir, &m, items, ptrs, 3, 5);
    items[2].first_lsn = 5; /* LSNs 0, 10, 5: going back */
    buf = pack(&m, &len);
    put_frame(fx->dir, 0, 5, buf, len);
    free(buf);
    load_is_damaged(fx);
}

static void long_names_damaged(void **state)
{
    fixture_t *fx = *state;
    char longest[BQ_ESTORE_NAME_MAX], too_long[BQ_ESTORE_NAME_MAX + 1];
    memset(longest, 'n', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    memset(too_long, 'n', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';

    Bq__Log__ElectionState m = BQ__LOG__ELECTION_STATE__INIT;
    Bq__Log__EpochStart item;
    Bq__Log__EpochStart *ptr;
    m.voted_for = longest;
    put_message(fx->dir, &m, &item, &ptr, 1, 0);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK); /* the control */
    assert_string_equal(fx->b->voted_for, longest);

    m.voted_for = too_long;
    put_message(fx->dir, &m, &item, &ptr, 1, 0);
    load_is_damaged(fx);

    m.voted_for = longest;
    put_message(fx->dir, &m, &item, &ptr, 1, 0);
    item.node_id = too_long;
    size_t len;
    uint8_t *buf = pack(&m, &len);
    put_frame(fx->dir, 0, 0, buf, len);
    free(buf);
    load_is_damaged(fx);
}

static void history_over_max_damaged(void **state)
{
    fixture_t *fx = *state;
    size_t n = BQ_ESTORE_HISTORY_MAX + 1;
    Bq__Log__EpochStart *items = calloc(n, sizeof *items);
    Bq__Log__EpochStart **ptrs = calloc(n, sizeof *ptrs);
    assert_non_null(items);
    assert_non_null(ptrs);
    Bq__Log__ElectionState m = BQ__LOG__ELECTION_STATE__INIT;
    put_message(fx->dir, &m, items, ptrs, n - 1, 0);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK); /* the control */
    assert_int_equal(fx->b->nhist, BQ_ESTORE_HISTORY_MAX);
    put_message(fx->dir, &m, items, ptrs, n, 0);
    load_is_damaged(fx);
    free(items);
    free(ptrs);
}

/* Writes a valid DIR/election of exactly total bytes: a message with
 * epoch 3 and an unknown field (number 15) padding it out. */
static void put_padded(const char *dir, size_t total)
{
    size_t pad = total - BQ_FRAME_HEADER - 6;       /* epoch 2 bytes, tag 1, length 3 */
    assert_true(pad >= 1u << 14 && pad < 1u << 21); /* a 3-byte varint length */
    uint8_t *buf = calloc(1, total);
    assert_non_null(buf);
    buf[0] = 0x08; /* field 1 (epoch), varint */
    buf[1] = 3;
    buf[2] = (15 << 3) | 2; /* field 15, length-delimited */
    buf[3] = (uint8_t)(0x80 | (pad & 0x7f));
    buf[4] = (uint8_t)(0x80 | ((pad >> 7) & 0x7f));
    buf[5] = (uint8_t)(pad >> 14);
    put_frame(dir, 0, 3, buf, total - BQ_FRAME_HEADER);
    free(buf);
}

static void file_over_limit_damaged(void **state)
{
    fixture_t *fx = *state;
    put_padded(fx->dir, 1024 * 1024); /* 1 MiB: loads */
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_OK);
    assert_int_equal(fx->b->epoch, 3);
    put_padded(fx->dir, 1024 * 1024 + 1);
    load_is_damaged(fx);
    put_padded(fx->dir, 2 * 1024 * 1024 - 1);
    load_is_damaged(fx);
}

static void save_into_missing_dir_fails(void **state)
{
    fixture_t *fx = *state;
    char missing[128];
    path_in(missing, sizeof missing, fx->dir, "nope");
    errno = 0;
    assert_int_equal(bq_estore_save(missing, fx->a), BQ_ESTORE_IO);
    assert_int_equal(errno, ENOENT);
}

/* The rename fails (DIR/election is a non-empty directory): the error is
 * kept and the tmp removed. Loading it is a read error. */
static void failed_save_removes_tmp(void **state)
{
    fixture_t *fx = *state;
    char sub[128];
    path_in(sub, sizeof sub, fx->dir, "election");
    assert_int_equal(mkdir(sub, 0700), 0);
    put_file(sub, "x", "x", 1);
    small_state(fx->a);
    errno = 0;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    assert_true(errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST);
    assert_false(exists(fx->dir, "election.tmp"));

    errno = 0;
    scribble(fx->b);
    assert_int_equal(bq_estore_load(fx->dir, fx->b), BQ_ESTORE_IO);
    assert_int_equal(errno, EINVAL); /* not a regular file: refused before reading */
    assert_empty(fx->b);
}

static void save_refuses_invalid_state(void **state)
{
    fixture_t *fx = *state;
    small_state(fx->a);
    fx->a->hist[1].epoch = 9; /* epochs 1, 9, 7 */
    errno = 0;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    assert_int_equal(errno, EINVAL);
    small_state(fx->a);
    memset(fx->a->voted_for, 'x', BQ_ESTORE_NAME_MAX); /* no terminator */
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    small_state(fx->a);
    fx->a->nhist = BQ_ESTORE_HISTORY_MAX + 1;
    assert_int_equal(bq_estore_save(fx->dir, fx->a), BQ_ESTORE_IO);
    assert_false(exists(fx->dir, "election"));
    assert_false(exists(fx->dir, "election.tmp"));
}

static void add_epoch_rules(void **state)
{
    fixture_t *fx = *state;
    bq_election_state_t *st = fx->a;
    assert_int_equal(bq_estore_add_epoch(st, 3, 10, "a"), 1);
    assert_int_equal(bq_estore_add_epoch(st, 5, 10, NULL), 1); /* an epoch with no frame */
    assert_int_equal(bq_estore_add_epoch(st, 6, 42, "b"), 1);
    assert_int_equal(st->nhist, 3);
    assert_int_equal(st->hist[1].epoch, 5);
    assert_string_equal(st->hist[1].node, "");
    assert_int_equal(st->hist[2].first_lsn, 42);
    assert_string_equal(st->hist[2].node, "b");

    assert_int_equal(bq_estore_add_epoch(st, 6, 42, "b"), 0); /* already there */
    assert_int_equal(bq_estore_add_epoch(st, 6, 50, "c"), 0); /* the first record stands */
    assert_int_equal(bq_estore_add_epoch(st, 3, 10, "a"), 0); /* an older one, also there */
    assert_int_equal(st->hist[2].first_lsn, 42);
    assert_int_equal(st->nhist, 3);

    assert_int_equal(bq_estore_add_epoch(st, 4, 60, "a"), -1); /* below the last */
    assert_int_equal(bq_estore_add_epoch(st, 1, 1, "a"), -1);
    assert_int_equal(bq_estore_add_epoch(st, 7, 41, "a"), -1); /* LSN going back */
    char too_long[BQ_ESTORE_NAME_MAX + 1];
    memset(too_long, 'x', BQ_ESTORE_NAME_MAX);
    too_long[BQ_ESTORE_NAME_MAX] = '\0';
    assert_int_equal(bq_estore_add_epoch(st, 7, 43, too_long), -1);
    assert_int_equal(st->nhist, 3);
    assert_int_equal(bq_estore_add_epoch(st, 7, 42, "c"), 1);
    assert_int_equal(st->nhist, 4);
}

static void add_epoch_full_drops_oldest(void **state)
{
    fixture_t *fx = *state;
    bq_election_state_t *st = fx->a;
    for (uint64_t e = 1; e <= BQ_ESTORE_HISTORY_MAX; e++)
        assert_int_equal(bq_estore_add_epoch(st, e, e * 10, "n"), 1);
    assert_int_equal(st->nhist, BQ_ESTORE_HISTORY_MAX);
    assert_int_equal(bq_estore_add_epoch(st, BQ_ESTORE_HISTORY_MAX, 1, "n"), 0);
    assert_int_equal(bq_estore_add_epoch(st, BQ_ESTORE_HISTORY_MAX + 5, 99999, "z"), 1);
    assert_int_equal(st->nhist, BQ_ESTORE_HISTORY_MAX);
    assert_int_equal(st->hist[0].epoch, 2);
    assert_int_equal(st->hist[0].first_lsn, 20);
    assert_int_equal(st->hist[BQ_ESTORE_HISTORY_MAX - 2].epoch, BQ_ESTORE_HISTORY_MAX);
    assert_int_equal(st->hist[BQ_ESTORE_HISTORY_MAX - 1].epoch, BQ_ESTORE_HISTORY_MAX + 5);
    assert_int_equal(st->hist[BQ_ESTORE_HISTORY_MAX - 1].first_lsn, 99999);
    assert_string_equal(st->hist[BQ_ESTORE_HISTORY_MAX - 1].node, "z");
    /* The dropped epoch 1 is now below the history: refused. */
    assert_int_equal(bq_estore_add_epoch(st, 1, 10, "n"), -1);
}

static void epoch_end_cases(void **state)
{
    fixture_t *fx = *state;
    bq_election_state_t *st = fx->a;
    assert_int_equal(bq_estore_epoch_end(st, 3, 500), 0); /* no history */

    assert_int_equal(bq_estore_add_epoch(st, 2, 1, "a"), 1);
    assert_int_equal(bq_estore_add_epoch(st, 4, 100, "b"), 1);
    assert_int_equal(bq_estore_add_epoch(st, 5, 100, "c"), 1); /* empty epoch 4 */
    assert_int_equal(bq_estore_add_epoch(st, 9, 250, "d"), 1);

    assert_int_equal(bq_estore_epoch_end(st, 2, 500), 99);  /* first */
    assert_int_equal(bq_estore_epoch_end(st, 4, 500), 99);  /* empty: ends before it starts */
    assert_int_equal(bq_estore_epoch_end(st, 5, 500), 249); /* middle */
    assert_int_equal(bq_estore_epoch_end(st, 9, 500), 500); /* last */
    assert_int_equal(bq_estore_epoch_end(st, 3, 500), 99);  /* between 2 and 4: 2's end */
    assert_int_equal(bq_estore_epoch_end(st, 7, 500), 249); /* between 5 and 9: 5's end */
    assert_int_equal(bq_estore_epoch_end(st, 1, 500), 0);   /* below all */
    assert_int_equal(bq_estore_epoch_end(st, 0, 500), 0);
    assert_int_equal(bq_estore_epoch_end(st, 10, 500), 500); /* above all: the last's end */
    assert_int_equal(bq_estore_epoch_end(st, UINT64_MAX, 777), 777);
    /* The epoch of a frame: empty epoch 4 holds none (5 has LSN 100). */
    assert_int_equal(bq_estore_epoch_of(st, 1), 2);
    assert_int_equal(bq_estore_epoch_of(st, 99), 2);
    assert_int_equal(bq_estore_epoch_of(st, 100), 5);
    assert_int_equal(bq_estore_epoch_of(st, 249), 5);
    assert_int_equal(bq_estore_epoch_of(st, 250), 9);
    assert_int_equal(bq_estore_epoch_of(st, 9999), 9);
    assert_int_equal(bq_estore_epoch_of(st, 0), 0);
    bq_election_state_t *late = fx->b;
    assert_int_equal(bq_estore_add_epoch(late, 7, 40, "e"), 1);
    assert_int_equal(bq_estore_epoch_of(late, 39), 0); /* before the history: unknown */
}

static void status_names(void **state)
{
    (void)state;
    assert_string_equal(bq_estore_status_name(BQ_ESTORE_OK), "ok");
    assert_string_equal(bq_estore_status_name(BQ_ESTORE_ABSENT), "absent");
    assert_string_equal(bq_estore_status_name(BQ_ESTORE_DAMAGED), "damaged");
    assert_string_equal(bq_estore_status_name(BQ_ESTORE_IO), "i/o error");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(round_trip_empty),
        T(round_trip_vote),
        T(round_trip_full_history),
        T(epoch_above_the_limit_is_damage),
        T(load_absent),
        T(leftover_tmp_ignored_and_removed),
        T(torn_tmp_keeps_old_state),
        T(every_truncation_damaged),
        T(every_bit_flip_damaged),
        T(trailing_bytes_damaged),
        T(bad_frames_damaged),
        T(long_names_damaged),
        T(history_over_max_damaged),
        T(file_over_limit_damaged),
        T(save_into_missing_dir_fails),
        T(failed_save_removes_tmp),
        T(save_refuses_invalid_state),
        T(add_epoch_rules),
        T(add_epoch_full_drops_oldest),
        T(epoch_end_cases),
        T(status_names),
    };
    return cmocka_run_group_tests_name("node_election_store", tests, NULL, NULL);
}
