/* Unit tests of the standby's stream checks (replication/follow.c):
 * Welcomes that fit the hello or not, segment starts (the first of a stream
 * inside the segment, later ones exactly at the next LSN), and Frames
 * messages: good streams, a cut frame, a flipped bit, a zero header, an LSN
 * gap, an old epoch, an epoch above the primary's, frames before any
 * segment start. A rejected Frames message must leave the state unchanged.
 *
 * Frames are checked in heap copies of exactly their bytes, so an ASan
 * build reports any read past the end of a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "replication/follow.h"

/* A Frames message under construction. */
typedef struct stream {
    uint8_t buf[4096];
    size_t len;
} stream_t;

/* Appends a frame of plen payload bytes (a pattern from lsn). */
static void add_frame(stream_t *s, uint64_t lsn, uint64_t epoch, uint32_t plen)
{
    uint8_t payload[256];
    assert_true(plen <= sizeof(payload));
    assert_true(s->len + BQ_FRAME_HEADER + plen <= sizeof(s->buf));
    for (uint32_t i = 0; i < plen; i++)
        payload[i] = (uint8_t)(lsn * 31 + i);
    bq_frame_header(s->buf + s->len, lsn, epoch, payload, plen);
    memcpy(s->buf + s->len + BQ_FRAME_HEADER, payload, plen);
    s->len += BQ_FRAME_HEADER + plen;
}

/* bq_follow_frames on an exact-size heap copy of data[0..len). */
static bq_follow_status_t frames(bq_follow_t *f, const uint8_t *data, size_t len, uint64_t *last,
                                 uint64_t *bad)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len)
        memcpy(copy, data, len);
    *last = *bad = UINT64_MAX;
    bq_follow_status_t st = bq_follow_frames(f, copy, len, last, bad);
    free(copy);
    return st;
}

/* Expects status want at bad LSN bad_lsn and f unchanged. */
static void assert_rejected(bq_follow_t *f, const stream_t *s, bq_follow_status_t want,
                            uint64_t bad_lsn)
{
    bq_follow_t before = *f;
    uint64_t last, bad;
    assert_int_equal(frames(f, s->buf, s->len, &last, &bad), want);
    assert_int_equal(bad, bad_lsn);
    assert_memory_equal(&before, f, sizeof(before));
}

static Bq__Repl__Welcome welcome(Bq__Repl__Start start, uint64_t epoch, uint64_t start_lsn)
{
    Bq__Repl__Welcome w = BQ__REPL__WELCOME__INIT;
    w.node_id = (char *)"n1";
    w.epoch = epoch;
    w.last_lsn = start_lsn + 100;
    w.start = start;
    w.start_lsn = start_lsn;
    return w;
}

static bq_follow_status_t segment(bq_follow_t *f, uint64_t first_lsn, uint64_t epoch,
                                  bool *checkpoint)
{
    Bq__Repl__SegmentStart s = BQ__REPL__SEGMENT_START__INIT;
    s.first_lsn = first_lsn;
    s.epoch = epoch;
    return bq_follow_segment(f, &s, checkpoint);
}

/* A follower after a RESUME welcome (standby at last_lsn in last_epoch,
 * primary in primary_epoch) and a first segment starting at seg_lsn. */
static bq_follow_t resumed(uint64_t last_epoch, uint64_t last_lsn, uint64_t primary_epoch,
                           uint64_t seg_lsn, uint64_t seg_epoch)
{
    bq_follow_t f;
    bool cp;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESUME, primary_epoch, last_lsn + 1);
    assert_int_equal(bq_follow_welcome(&f, last_epoch, last_lsn, &w), BQ_FOLLOW_OK);
    assert_int_equal(segment(&f, seg_lsn, seg_epoch, &cp), BQ_FOLLOW_OK);
    return f;
}

static void test_welcome_resume(void **state)
{
    (void)state;
    bq_follow_t f;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESUME, 3, 11);
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 11);
    assert_int_equal(f.epoch, 2);
    assert_int_equal(f.primary_epoch, 3);
    assert_false(f.segment_open);
    /* The primary's epoch may equal the standby's. */
    w.epoch = 2;
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_OK);
    /* From nothing. */
    w = welcome(BQ__REPL__START__RESUME, 1, 1);
    assert_int_equal(bq_follow_welcome(&f, 0, 0, &w), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 1);
}

static void test_welcome_resync(void **state)
{
    (void)state;
    bq_follow_t f;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESYNC, 3, 21);
    assert_int_equal(bq_follow_welcome(&f, 2, 40, &w), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 21);
    assert_int_equal(f.epoch, 0); /* the log is replaced */
    assert_int_equal(f.primary_epoch, 3);
    assert_false(f.segment_open);
    w.start_lsn = 1;
    assert_int_equal(bq_follow_welcome(&f, 0, 0, &w), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 1);
}

static void test_welcome_cut(void **state)
{
    (void)state;
    bq_follow_t f;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__CUT, 3, 8);
    w.cut_after = 7;
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 8);
    assert_int_equal(f.primary_epoch, 3);
    /* The fork point must be below our last record, the stream right after it. */
    w.cut_after = 10;
    w.start_lsn = 11;
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_BAD_WELCOME);
    w.cut_after = 7;
    w.start_lsn = 9;
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_BAD_WELCOME);
}

static void test_bad_welcomes(void **state)
{
    (void)state;
    bq_follow_t f, before;
    memset(&f, 0x5A, sizeof(f));
    before = f;
    Bq__Repl__Welcome bad[] = {
        welcome(BQ__REPL__START__RESUME, 3, 12),            /* not last + 1 */
        welcome(BQ__REPL__START__RESUME, 3, 10),            /* not last + 1 */
        welcome(BQ__REPL__START__RESUME, 1, 11),            /* primary epoch below ours */
        welcome(BQ__REPL__START__RESYNC, 3, 0),             /* LSNs start at 1 */
        welcome(BQ__REPL__START__RESYNC, 1, 5),             /* primary epoch below ours */
        welcome(BQ__REPL__START__START_UNSPECIFIED, 3, 11), /* no start */
        welcome((Bq__Repl__Start)4, 3, 11),                 /* unknown start */
        welcome(BQ__REPL__START__CUT, 3, 11),               /* cut after 0: not start - 1 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(bq_follow_welcome(&f, 2, 10, &bad[i]), BQ_FOLLOW_BAD_WELCOME);
        assert_memory_equal(&before, &f, sizeof(f));
    }
}

static void test_segment_first_of_stream(void **state)
{
    (void)state;
    bq_follow_t f;
    bool cp = true;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESUME, 3, 16);
    assert_int_equal(bq_follow_welcome(&f, 2, 15, &w), BQ_FOLLOW_OK);
    /* The stream resumes inside a segment that began at 11. */
    assert_int_equal(segment(&f, 17, 2, &cp), BQ_FOLLOW_BAD_SEGMENT);
    assert_int_equal(segment(&f, 0, 2, &cp), BQ_FOLLOW_BAD_SEGMENT);
    assert_false(f.segment_open);
    assert_int_equal(segment(&f, 11, 2, &cp), BQ_FOLLOW_OK);
    assert_false(cp);
    assert_true(f.segment_open);
    assert_int_equal(f.next_lsn, 16);
    /* A resync starts exactly at its first segment: a checkpoint. */
    w = welcome(BQ__REPL__START__RESYNC, 3, 21);
    assert_int_equal(bq_follow_welcome(&f, 2, 15, &w), BQ_FOLLOW_OK);
    assert_false(f.segment_open);
    assert_int_equal(segment(&f, 21, 3, &cp), BQ_FOLLOW_OK);
    assert_true(cp);
    assert_int_equal(f.epoch, 3);
}

static void test_segment_epochs(void **state)
{
    (void)state;
    bq_follow_t f;
    bool cp;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESUME, 3, 11);
    assert_int_equal(bq_follow_welcome(&f, 2, 10, &w), BQ_FOLLOW_OK);
    assert_int_equal(segment(&f, 11, 1, &cp), BQ_FOLLOW_OLD_EPOCH);
    assert_int_equal(segment(&f, 11, 4, &cp), BQ_FOLLOW_NEW_EPOCH);
    assert_false(f.segment_open);
    assert_int_equal(segment(&f, 11, 2, &cp), BQ_FOLLOW_OK);
    assert_int_equal(f.epoch, 2);
    assert_int_equal(segment(&f, 11, 3, &cp), BQ_FOLLOW_OK); /* an empty segment before */
    assert_int_equal(f.epoch, 3);
    assert_int_equal(segment(&f, 11, 2, &cp), BQ_FOLLOW_OLD_EPOCH);
}

static void test_later_segments(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 2, 1, 1);
    stream_t s = {.len = 0};
    uint64_t last, bad;
    bool cp = false;
    add_frame(&s, 6, 1, 10);
    add_frame(&s, 7, 1, 10);
    assert_int_equal(frames(&f, s.buf, s.len, &last, &bad), BQ_FOLLOW_OK);
    assert_int_equal(f.next_lsn, 8);
    /* A second segment start must be exactly at the next LSN. */
    assert_int_equal(segment(&f, 7, 2, &cp), BQ_FOLLOW_BAD_SEGMENT);
    assert_int_equal(segment(&f, 1, 2, &cp), BQ_FOLLOW_BAD_SEGMENT);
    assert_int_equal(segment(&f, 9, 2, &cp), BQ_FOLLOW_BAD_SEGMENT);
    assert_int_equal(f.epoch, 1);
    assert_int_equal(segment(&f, 8, 2, &cp), BQ_FOLLOW_OK);
    assert_true(cp);
    assert_int_equal(f.epoch, 2);
    s.len = 0;
    add_frame(&s, 8, 1, 3); /* the new segment's epoch is followed */
    assert_rejected(&f, &s, BQ_FOLLOW_OLD_EPOCH, 8);
    s.len = 0;
    add_frame(&s, 8, 2, 3);
    assert_int_equal(frames(&f, s.buf, s.len, &last, &bad), BQ_FOLLOW_OK);
    assert_int_equal(last, 8);
}

static void test_good_stream(void **state)
{
    (void)state;
    bq_follow_t f;
    bool cp;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESYNC, 3, 1);
    assert_int_equal(bq_follow_welcome(&f, 3, 40, &w), BQ_FOLLOW_OK);
    assert_int_equal(segment(&f, 1, 1, &cp), BQ_FOLLOW_OK);
    stream_t s = {.len = 0};
    uint64_t last, bad;
    add_frame(&s, 1, 1, 1);
    add_frame(&s, 2, 1, 200);
    add_frame(&s, 3, 2, 17); /* epochs may rise up to the primary's */
    assert_int_equal(frames(&f, s.buf, s.len, &last, &bad), BQ_FOLLOW_OK);
    assert_int_equal(last, 3);
    assert_int_equal(f.next_lsn, 4);
    assert_int_equal(f.epoch, 2);
    s.len = 0;
    add_frame(&s, 4, 3, 5);
    assert_int_equal(frames(&f, s.buf, s.len, &last, &bad), BQ_FOLLOW_OK);
    assert_int_equal(last, 4);
    assert_int_equal(f.epoch, 3);
    assert_int_equal(f.next_lsn, 5);
}

static void test_frames_before_segment(void **state)
{
    (void)state;
    bq_follow_t f;
    Bq__Repl__Welcome w = welcome(BQ__REPL__START__RESUME, 1, 6);
    assert_int_equal(bq_follow_welcome(&f, 1, 5, &w), BQ_FOLLOW_OK);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 8);
    assert_rejected(&f, &s, BQ_FOLLOW_BAD_SEGMENT, 6);
}

static void test_empty_frames(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 1, 1, 1);
    stream_t s = {.len = 0};
    assert_rejected(&f, &s, BQ_FOLLOW_BAD_FRAME, 6);
}

static void test_cut_frame(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 1, 1, 1);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 20);
    add_frame(&s, 7, 1, 20);
    size_t whole = s.len;
    /* Cut anywhere in the second frame: its payload or its header. */
    for (size_t cut = 1; cut < BQ_FRAME_HEADER + 20; cut++) {
        s.len = whole - cut;
        assert_rejected(&f, &s, BQ_FOLLOW_BAD_FRAME, 7);
    }
    assert_rejected(&f, &(stream_t){.len = 10}, BQ_FOLLOW_BAD_FRAME, 6);
}

static void test_bit_flip(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 1, 1, 1);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 12);
    size_t first = s.len;
    add_frame(&s, 7, 1, 12);
    /* Every bit after the length field of the second frame is covered by
     * its CRC (a flip in the length makes it cut or oversized). */
    for (size_t at = first + 4; at < s.len; at++) {
        for (int bit = 0; bit < 8; bit++) {
            stream_t bad = s;
            bad.buf[at] ^= (uint8_t)(1u << bit);
            assert_rejected(&f, &bad, BQ_FOLLOW_BAD_FRAME, 7);
        }
    }
    stream_t bad = s;
    bad.buf[first] ^= 1; /* length 12 -> 13: cut */
    assert_rejected(&f, &bad, BQ_FOLLOW_BAD_FRAME, 7);
}

static void test_zero_and_bad_length(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 1, 1, 1);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 4);
    size_t first = s.len;
    memset(s.buf + s.len, 0, BQ_FRAME_HEADER); /* a clean end mark */
    s.len += BQ_FRAME_HEADER;
    assert_rejected(&f, &s, BQ_FOLLOW_BAD_FRAME, 7);
    s.len = first + 10; /* a short run of zeros */
    assert_rejected(&f, &s, BQ_FOLLOW_BAD_FRAME, 7);
    s.len = first;
    add_frame(&s, 7, 1, 4);
    memset(s.buf + first, 0, 4); /* length 0 with a non-zero header */
    assert_rejected(&f, &s, BQ_FOLLOW_BAD_FRAME, 7);
}

static void test_gap(void **state)
{
    (void)state;
    bq_follow_t f = resumed(1, 5, 1, 1, 1);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 4);
    add_frame(&s, 8, 1, 4); /* 7 missing: nothing of the message counts */
    assert_rejected(&f, &s, BQ_FOLLOW_GAP, 8);
    s.len = 0;
    add_frame(&s, 6, 1, 4);
    add_frame(&s, 6, 1, 4); /* repeated */
    assert_rejected(&f, &s, BQ_FOLLOW_GAP, 6);
    s.len = 0;
    add_frame(&s, 5, 1, 4); /* already held */
    assert_rejected(&f, &s, BQ_FOLLOW_GAP, 5);
}

static void test_old_epoch(void **state)
{
    (void)state;
    bq_follow_t f = resumed(2, 5, 3, 1, 2);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 1, 4);
    assert_rejected(&f, &s, BQ_FOLLOW_OLD_EPOCH, 6);
    s.len = 0;
    add_frame(&s, 6, 3, 4);
    add_frame(&s, 7, 2, 4); /* back below an epoch of the same message */
    assert_rejected(&f, &s, BQ_FOLLOW_OLD_EPOCH, 7);
}

static void test_epoch_above_primary(void **state)
{
    (void)state;
    bq_follow_t f = resumed(2, 5, 3, 1, 2);
    stream_t s = {.len = 0};
    add_frame(&s, 6, 2, 4);
    add_frame(&s, 7, 4, 4);
    assert_rejected(&f, &s, BQ_FOLLOW_NEW_EPOCH, 7);
}

static void test_status_names(void **state)
{
    (void)state;
    for (int st = BQ_FOLLOW_OK; st <= BQ_FOLLOW_BAD_SEGMENT; st++) {
        const char *name = bq_follow_status_name((bq_follow_status_t)st);
        assert_true(strlen(name) > 0);
        assert_string_not_equal(name, "unknown");
    }
    assert_string_equal(bq_follow_status_name(BQ_FOLLOW_OK), "ok");
    assert_string_equal(bq_follow_status_name((bq_follow_status_t)42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_welcome_resume),
        cmocka_unit_test(test_welcome_resync),
        cmocka_unit_test(test_welcome_cut),
        cmocka_unit_test(test_bad_welcomes),
        cmocka_unit_test(test_segment_first_of_stream),
        cmocka_unit_test(test_segment_epochs),
        cmocka_unit_test(test_later_segments),
        cmocka_unit_test(test_good_stream),
        cmocka_unit_test(test_frames_before_segment),
        cmocka_unit_test(test_empty_frames),
        cmocka_unit_test(test_cut_frame),
        cmocka_unit_test(test_bit_flip),
        cmocka_unit_test(test_zero_and_bad_length),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_old_epoch),
        cmocka_unit_test(test_epoch_above_primary),
        cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
