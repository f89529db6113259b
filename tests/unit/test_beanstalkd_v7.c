/* Unit tests of protocol/beanstalkd_v7.c, the reader of beanstalkd's v7
 * binlog files, on byte streams built here record by record in the x86_64
 * layout (with non-zero padding, which the reader must ignore).
 *
 * Covered: every job state, later records winning within and across files,
 * deletion by an Invalid record (short or full), short records about
 * unknown jobs, the zero tail, empty and all-zero files, every kind of
 * damage (with the file index and record offset it is reported at and the
 * jobs of the records before it kept), truncation at every byte of the last
 * record, feeding in chunks of every size, the bury order, the conversion
 * to our JobFull record, a random workload against a model, and the job
 * table shrinking as jobs are deleted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/beanstalkd_v7.h"

#define NS INT64_C(1000000000)

typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
} bytes_t;

/* A Jobrec; body_size 0 means "the body's length + 2". */
typedef struct rec {
    uint64_t id;
    uint32_t pri;
    int64_t delay, ttr;
    int32_t body_size;
    int64_t created, deadline;
    uint32_t ct[5];
    uint8_t state;
} rec_t;

static void put_bytes(bytes_t *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put_le(bytes_t *b, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put_bytes(b, &c, 1);
    }
}

/* n padding bytes: non-zero, to prove the reader never looks at them. */
static void put_pad(bytes_t *b, size_t n)
{
    put_le(b, UINT64_C(0xA5A5A5A5A5A5A5A5), n);
}

static void put_jobrec(bytes_t *b, const rec_t *r)
{
    size_t start = b->len;
    put_le(b, r->id, 8);
    put_le(b, r->pri, 4);
    put_pad(b, 4);
    put_le(b, (uint64_t)r->delay, 8);
    put_le(b, (uint64_t)r->ttr, 8);
    put_le(b, (uint32_t)r->body_size, 4);
    put_pad(b, 4);
    put_le(b, (uint64_t)r->created, 8);
    put_le(b, (uint64_t)r->deadline, 8);
    for (int i = 0; i < 5; i++)
        put_le(b, r->ct[i], 4);
    put_le(b, r->state, 1);
    put_pad(b, 3);
    assert_int_equal(b->len - start, BQ_V7_JOBREC_SIZE);
}

static void start_file(bytes_t *b)
{
    put_le(b, BQ_V7_VERSION, 4);
}

/* A full record with tube name[0..namelen) whose body is body[0..len)
 * followed by CRLF. */
static void put_full_name(bytes_t *b, const char *name, size_t namelen, rec_t r, const void *body,
                          size_t len)
{
    if (r.body_size == 0)
        r.body_size = (int32_t)len + 2;
    put_le(b, namelen, 4);
    put_bytes(b, name, namelen);
    put_jobrec(b, &r);
    put_bytes(b, body, len);
    put_bytes(b, "\r\n", 2);
}

static void put_full(bytes_t *b, const char *tube, rec_t r, const void *body, size_t len)
{
    put_full_name(b, tube, strlen(tube), r, body, len);
}

static void put_short(bytes_t *b, rec_t r)
{
    put_le(b, 0, 4);
    put_jobrec(b, &r);
}

/* A ready job as beanstalkd's put writes it. */
static rec_t ready(uint64_t id, int32_t body_size)
{
    return (rec_t){.id = id,
                   .pri = 1024,
                   .ttr = 60 * NS,
                   .body_size = body_size,
                   .created = INT64_C(1700000000) * NS + (int64_t)id,
                   .state = BQ_V7_READY};
}

/* Feeds files[0..n) in chunks of `chunk` bytes (0: each file at once);
 * returns the first error or 0. */
static int read_files(bq_v7_reader_t *r, const bytes_t *files, size_t n, size_t chunk)
{
    for (size_t f = 0; f < n; f++) {
        bq_v7_begin_file(r, f);
        size_t step = chunk ? chunk : files[f].len;
        for (size_t off = 0; off < files[f].len; off += step) {
            size_t len = files[f].len - off < step ? files[f].len - off : step;
            int rc = bq_v7_feed(r, files[f].p + off, len);
            if (rc)
                return rc;
        }
        int rc = bq_v7_end_file(r);
        if (rc)
            return rc;
    }
    return 0;
}

static bq_v7_reader_t *read_one(const bytes_t *file, int expect_rc)
{
    bq_v7_reader_t *r = bq_v7_reader_new();
    assert_non_null(r);
    assert_int_equal(read_files(r, file, 1, 0), expect_rc);
    return r;
}

static void free_bytes(bytes_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void assert_error(const bq_v7_reader_t *r, size_t file, uint64_t offset, const char *part)
{
    const bq_v7_error_t *e = bq_v7_error(r);
    assert_non_null(e);
    assert_int_equal(e->file, file);
    assert_int_equal(e->offset, offset);
    if (!strstr(e->msg, part))
        fail_msg("error \"%s\" does not mention \"%s\"", e->msg, part);
}

/* ---- records and states ---- */

static void v7_full_record_gives_every_field(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    rec_t r = {.id = 7,
               .pri = 4294967295u,
               .delay = 30 * NS,
               .ttr = 120 * NS,
               .created = INT64_C(1700000000123456789),
               .deadline = INT64_C(1700000030123456789),
               .ct = {1, 2, 3, 4, 5},
               .state = BQ_V7_DELAYED};
    put_full(&b, "emails", r, "a\0b\r\nc", 6);
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_int_equal(bq_v7_records(rd), 1);
    assert_int_equal(bq_v7_max_id(rd), 7);
    const bq_v7_job_t *j = bq_v7_find(rd, 7);
    assert_non_null(j);
    assert_string_equal(j->tube, "emails");
    assert_int_equal(j->pri, 4294967295u);
    assert_int_equal(j->delay_ns, 30 * NS);
    assert_int_equal(j->ttr_ns, 120 * NS);
    assert_int_equal(j->created_at, INT64_C(1700000000123456789));
    assert_int_equal(j->deadline_at, INT64_C(1700000030123456789));
    assert_int_equal(j->reserves, 1);
    assert_int_equal(j->timeouts, 2);
    assert_int_equal(j->releases, 3);
    assert_int_equal(j->buries, 4);
    assert_int_equal(j->kicks, 5);
    assert_int_equal(j->state, BQ_V7_DELAYED);
    assert_int_equal(j->body_size, 8);
    assert_memory_equal(j->body, "a\0b\r\nc\r\n", 8);
    assert_null(bq_v7_find(rd, 8));
    assert_null(bq_v7_error(rd));
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_every_live_state_is_kept(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    for (uint8_t s = BQ_V7_READY; s <= BQ_V7_DELAYED; s++) {
        rec_t r = ready(s, 3);
        r.state = s;
        put_full(&b, "default", r, "x", 1);
    }
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 4);
    for (uint8_t s = BQ_V7_READY; s <= BQ_V7_DELAYED; s++)
        assert_int_equal(bq_v7_find(rd, s)->state, s);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_later_short_record_wins(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 4), "ab", 2);
    rec_t r = ready(1, 4);
    r.pri = 50;
    r.delay = 600 * NS;
    r.deadline = INT64_C(1700000600) * NS;
    r.ct[0] = 1;
    r.ct[2] = 1;
    r.state = BQ_V7_DELAYED;
    put_short(&b, r);
    r.state = BQ_V7_READY;
    r.ct[4] = 1;
    put_short(&b, r);
    bq_v7_reader_t *rd = read_one(&b, 0);
    const bq_v7_job_t *j = bq_v7_find(rd, 1);
    assert_non_null(j);
    assert_int_equal(j->state, BQ_V7_READY);
    assert_int_equal(j->pri, 50);
    assert_int_equal(j->delay_ns, 600 * NS);
    assert_int_equal(j->reserves, 1);
    assert_int_equal(j->releases, 1);
    assert_int_equal(j->kicks, 1);
    assert_memory_equal(j->body, "ab\r\n", 4);
    assert_int_equal(bq_v7_records(rd), 3);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_invalid_short_record_deletes(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    put_full(&b, "default", ready(2, 3), "b", 1);
    rec_t del = ready(1, 3);
    del.state = BQ_V7_INVALID;
    put_short(&b, del);
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_null(bq_v7_find(rd, 1));
    assert_non_null(bq_v7_find(rd, 2));
    assert_int_equal(bq_v7_max_id(rd), 2);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_invalid_full_record_deletes_and_reads_its_body(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    rec_t del = ready(1, 3);
    del.state = BQ_V7_INVALID;
    put_full(&b, "default", del, "a", 1);
    rec_t gone = ready(9, 3);
    gone.state = BQ_V7_INVALID;
    put_full(&b, "default", gone, "z", 1);
    put_full(&b, "default", ready(2, 3), "b", 1);
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_non_null(bq_v7_find(rd, 2));
    assert_int_equal(bq_v7_max_id(rd), 9);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_short_record_for_unknown_job_is_ignored(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    rec_t r = ready(40, 3);
    r.state = BQ_V7_BURIED;
    put_short(&b, r);
    r.state = BQ_V7_INVALID;
    put_short(&b, r);
    put_full(&b, "default", ready(41, 3), "a", 1);
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_null(bq_v7_find(rd, 40));
    assert_int_equal(bq_v7_records(rd), 3);
    assert_int_equal(bq_v7_max_id(rd), 41);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

static void v7_zero_tail_ends_the_file(void **state)
{
    (void)state;
    bytes_t f[2] = {{0}, {0}};
    start_file(&f[0]);
    put_full(&f[0], "default", ready(1, 3), "a", 1);
    uint8_t zeros[200] = {0};
    put_bytes(&f[0], zeros, 84);
    put_bytes(&f[0], "\x07garbage after the tail", 23);
    start_file(&f[1]);
    put_full(&f[1], "default", ready(2, 3), "b", 1);
    put_bytes(&f[1], zeros, 40); /* fewer zeros than a record: still a tail */
    bq_v7_reader_t *rd = bq_v7_reader_new();
    bq_v7_begin_file(rd, 0);
    assert_int_equal(bq_v7_feed(rd, f[0].p, f[0].len), 0);
    assert_true(bq_v7_file_done(rd));
    assert_int_equal(bq_v7_end_file(rd), 0);
    bq_v7_begin_file(rd, 1);
    assert_false(bq_v7_file_done(rd));
    assert_int_equal(bq_v7_feed(rd, f[1].p, f[1].len), 0);
    assert_int_equal(bq_v7_end_file(rd), 0);
    assert_int_equal(bq_v7_count(rd), 2);
    bq_v7_reader_free(rd);

    /* A short record cut after its id: not zeros, so damage. */
    f[1].p[f[1].len - 40 + 4] = 2;
    rd = bq_v7_reader_new();
    assert_int_equal(read_files(rd, f, 2, 0), BQ_V7_ECORRUPT);
    assert_error(rd, 1, 4 + 4 + 7 + 80 + 3, "inside a record");
    bq_v7_reader_free(rd);

    /* A torn full record: namelen and name written, Jobrec still zeros. */
    free_bytes(&f[1]);
    start_file(&f[1]);
    put_le(&f[1], 7, 4);
    put_bytes(&f[1], zeros, 7 + 80 + 5);
    rd = bq_v7_reader_new();
    assert_int_equal(read_files(rd, f, 2, 0), 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_non_null(bq_v7_find(rd, 1));
    bq_v7_reader_free(rd);
    free_bytes(&f[0]);
    free_bytes(&f[1]);
}

static void v7_empty_and_all_zero_files_hold_nothing(void **state)
{
    (void)state;
    bytes_t f[4] = {{0}, {0}, {0}, {0}};
    uint8_t zeros[4096] = {0};
    put_bytes(&f[1], zeros, sizeof zeros); /* preallocated, header never written */
    put_bytes(&f[2], zeros, 2);
    start_file(&f[3]);
    put_full(&f[3], "default", ready(3, 3), "c", 1);
    bq_v7_reader_t *rd = bq_v7_reader_new();
    assert_int_equal(read_files(rd, f, 4, 0), 0);
    assert_int_equal(bq_v7_count(rd), 1);
    bq_v7_reader_free(rd);

    f[1].p[4000] = 1;
    rd = bq_v7_reader_new();
    assert_int_equal(read_files(rd, f, 4, 100), BQ_V7_ECORRUPT);
    assert_error(rd, 1, 0, "version 0");
    bq_v7_reader_free(rd);
    for (int i = 0; i < 4; i++)
        free_bytes(&f[i]);
}

static void v7_records_accumulate_across_files(void **state)
{
    (void)state;
    bytes_t f[3] = {{0}, {0}, {0}};
    start_file(&f[0]);
    put_full(&f[0], "a", ready(1, 3), "1", 1);
    put_full(&f[0], "b", ready(2, 3), "2", 1);
    start_file(&f[1]);
    rec_t r = ready(1, 3);
    r.state = BQ_V7_BURIED;
    r.ct[3] = 1;
    put_short(&f[1], r);
    put_full(&f[1], "c", ready(3, 3), "3", 1);
    start_file(&f[2]);
    rec_t del = ready(2, 3);
    del.state = BQ_V7_INVALID;
    put_short(&f[2], del);
    bq_v7_reader_t *rd = bq_v7_reader_new();
    assert_int_equal(read_files(rd, f, 3, 0), 0);
    assert_int_equal(bq_v7_count(rd), 2);
    assert_int_equal(bq_v7_find(rd, 1)->state, BQ_V7_BURIED);
    assert_int_equal(bq_v7_find(rd, 1)->buries, 1);
    assert_string_equal(bq_v7_find(rd, 3)->tube, "c");
    assert_null(bq_v7_find(rd, 2));
    const bq_v7_job_t **v = bq_v7_jobs(rd);
    assert_non_null(v);
    assert_int_equal(v[0]->id, 1);
    assert_int_equal(v[1]->id, 3);
    free(v);
    bq_v7_reader_free(rd);
    for (int i = 0; i < 3; i++)
        free_bytes(&f[i]);
}

static void v7_full_record_again_replaces_the_job(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    rec_t r = ready(1, 3);
    r.state = BQ_V7_DELAYED;
    r.ct[2] = 2;
    put_full(&b, "default", r, "a", 1); /* compaction moved it */
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), 1);
    assert_int_equal(bq_v7_find(rd, 1)->state, BQ_V7_DELAYED);
    assert_int_equal(bq_v7_find(rd, 1)->releases, 2);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

/* ---- bury order ---- */

static void v7_bury_seq_follows_the_last_bury(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    for (uint64_t id = 1; id <= 3; id++)
        put_full(&b, "default", ready(id, 3), "x", 1);
    rec_t r2 = ready(2, 3), r1 = ready(1, 3), r3 = ready(3, 3);
    r2.state = r1.state = r3.state = BQ_V7_BURIED;
    put_short(&b, r2); /* record 4 */
    put_short(&b, r1); /* record 5 */
    put_short(&b, r3); /* record 6 */
    r3.state = BQ_V7_READY;
    put_short(&b, r3); /* 7: kicked */
    r3.state = BQ_V7_BURIED;
    put_short(&b, r3);                   /* 8: buried again */
    put_full(&b, "default", r2, "x", 1); /* 9: moved by compaction, still buried */
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_find(rd, 2)->bury_seq, 4);
    assert_int_equal(bq_v7_find(rd, 1)->bury_seq, 5);
    assert_int_equal(bq_v7_find(rd, 3)->bury_seq, 8);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

/* ---- damage ---- */

typedef void (*damage_fn)(bytes_t *b);

/* Builds a file of one good job followed by the damaged record from fn;
 * asserts the error is at offset `at` (the damaged record's start unless
 * it is in the header) and that the good job survives. */
static void check_damage(damage_fn fn, uint64_t at, const char *part)
{
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    fn(&b);
    for (size_t chunk = 0; chunk <= 7; chunk += 7) {
        bq_v7_reader_t *rd = bq_v7_reader_new();
        assert_int_equal(read_files(rd, &b, 1, chunk), BQ_V7_ECORRUPT);
        assert_error(rd, 0, at, part);
        assert_int_equal(bq_v7_count(rd), 1);
        assert_non_null(bq_v7_find(rd, 1));
        assert_int_equal(bq_v7_feed(rd, (const uint8_t *)"\0", 1), BQ_V7_ECORRUPT);
        bq_v7_reader_free(rd);
    }
    free_bytes(&b);
}

#define REC2 (4 + 4 + 7 + 80 + 3) /* offset of the second record */

static void d_namelen_big(bytes_t *b)
{
    put_le(b, 201, 4);
}
static void d_namelen_negative(bytes_t *b)
{
    put_le(b, 0xFFFFFFFFu, 4);
}
static void d_name_dash(bytes_t *b)
{
    put_full(b, "-x", ready(2, 3), "b", 1);
}
static void d_name_space(bytes_t *b)
{
    put_full(b, "a b", ready(2, 3), "b", 1);
}
static void d_name_nul(bytes_t *b)
{
    put_full_name(b, "ab\0", 3, ready(2, 3), "b", 1);
}

static void d_state(bytes_t *b)
{
    rec_t r = ready(2, 3);
    r.state = 5;
    put_full(b, "default", r, "b", 1);
}

static void d_state_short(bytes_t *b)
{
    rec_t r = ready(1, 3);
    r.state = 255;
    put_short(b, r);
}

static void d_body_size_small(bytes_t *b)
{
    put_full(b, "default", ready(2, 1), "", 0);
}

static void d_body_size_negative(bytes_t *b)
{
    put_full(b, "default", ready(2, -5), "", 0);
}

static void d_body_size_huge(bytes_t *b)
{
    put_full(b, "default", ready(2, 1073741827), "", 0);
}

static void d_body_no_crlf(bytes_t *b)
{
    put_full(b, "default", ready(2, 5), "bb\0", 3); /* body "bb\0\r\n" */
    b->p[b->len - 2] = 0;                           /* now "bb\0\0\n" */
}

static void d_ttr_negative(bytes_t *b)
{
    rec_t r = ready(2, 3);
    r.ttr = -1;
    put_full(b, "default", r, "b", 1);
}

static void d_delay_huge(bytes_t *b)
{
    rec_t r = ready(2, 3);
    r.delay = INT64_C(4294967296) * NS;
    put_full(b, "default", r, "b", 1);
}

static void d_created_negative(bytes_t *b)
{
    rec_t r = ready(2, 3);
    r.created = -1;
    put_full(b, "default", r, "b", 1);
}

static void d_deadline_negative(bytes_t *b)
{
    rec_t r = ready(1, 3);
    r.state = BQ_V7_DELAYED;
    r.deadline = INT64_MIN;
    put_short(b, r);
}

static void d_id_huge(bytes_t *b)
{
    put_full(b, "default", ready(UINT64_C(1) << 63, 3), "b", 1);
}

static void d_short_size_differs(bytes_t *b)
{
    rec_t r = ready(1, 4);
    r.state = BQ_V7_BURIED;
    put_short(b, r);
}

static void d_short_ttr_bad(bytes_t *b)
{
    rec_t r = ready(1, 3);
    r.ttr = INT64_MIN;
    put_short(b, r);
}

static void d_full_other_tube(bytes_t *b)
{
    put_full(b, "other", ready(1, 3), "a", 1);
}

static void d_full_other_size(bytes_t *b)
{
    put_full(b, "default", ready(1, 4), "aa", 2);
}

static void v7_damage_is_reported_at_its_record(void **state)
{
    (void)state;
    check_damage(d_namelen_big, REC2, "namelen 201");
    check_damage(d_namelen_negative, REC2, "namelen -1");
    check_damage(d_name_dash, REC2, "tube name");
    check_damage(d_name_space, REC2, "tube name");
    check_damage(d_name_nul, REC2, "tube name");
    check_damage(d_state, REC2, "state 5");
    check_damage(d_state_short, REC2, "state 255");
    check_damage(d_body_size_small, REC2, "body size 1");
    check_damage(d_body_size_negative, REC2, "body size -5");
    check_damage(d_body_size_huge, REC2, "body size 1073741827");
    check_damage(d_body_no_crlf, REC2, "CRLF");
    check_damage(d_ttr_negative, REC2, "ttr -1");
    check_damage(d_delay_huge, REC2, "delay");
    check_damage(d_created_negative, REC2, "creation time -1");
    check_damage(d_deadline_negative, REC2, "deadline");
    check_damage(d_id_huge, REC2, "out of range");
    check_damage(d_short_size_differs, REC2, "body size 4 differs");
    check_damage(d_short_ttr_bad, REC2, "ttr");
    check_damage(d_full_other_tube, REC2, "differs");
    check_damage(d_full_other_size, REC2, "differs");
}

static void v7_bad_versions_are_refused(void **state)
{
    (void)state;
    const int32_t versions[] = {99, 5, 6, 8, -7};
    const char *parts[] = {"unknown version 99", "version 5", "version 6", "version 8",
                           "version -7"};
    for (size_t i = 0; i < 5; i++) {
        bytes_t f[2] = {{0}, {0}};
        start_file(&f[0]);
        put_full(&f[0], "default", ready(1, 3), "a", 1);
        put_le(&f[1], (uint32_t)versions[i], 4);
        put_full(&f[1], "default", ready(2, 3), "b", 1);
        bq_v7_reader_t *rd = bq_v7_reader_new();
        assert_int_equal(read_files(rd, f, 2, 0), BQ_V7_ECORRUPT);
        assert_error(rd, 1, 0, parts[i]);
        assert_int_equal(bq_v7_count(rd), 1);
        bq_v7_reader_free(rd);
        free_bytes(&f[0]);
        free_bytes(&f[1]);
    }
    bytes_t h = {0};
    put_bytes(&h, "\x07\x00", 2);
    bq_v7_reader_t *rd = read_one(&h, BQ_V7_ECORRUPT);
    assert_error(rd, 0, 0, "header");
    bq_v7_reader_free(rd);
    free_bytes(&h);
}

/* Cuts the file at every byte inside its last record. */
static void check_every_cut(const bytes_t *b, size_t last, uint64_t last_id)
{
    for (size_t cut = last; cut <= b->len; cut++) {
        bytes_t c = {.p = b->p, .len = cut};
        bq_v7_reader_t *rd = bq_v7_reader_new();
        int rc = read_files(rd, &c, 1, 0);
        if (cut == last || cut == b->len) {
            assert_int_equal(rc, 0);
            assert_int_equal(bq_v7_find(rd, last_id) != NULL, cut == b->len);
        } else {
            assert_int_equal(rc, BQ_V7_ECORRUPT);
            assert_error(rd, 0, last, "file ends inside");
            assert_null(bq_v7_find(rd, last_id));
        }
        assert_non_null(bq_v7_find(rd, 1));
        bq_v7_reader_free(rd);
    }
}

static void v7_truncation_at_every_byte_of_the_last_record(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    size_t last = b.len;
    put_full(&b, "tube-2", ready(2, 7), "hello", 5);
    check_every_cut(&b, last, 2);
    free_bytes(&b);

    start_file(&b);
    put_full(&b, "default", ready(1, 3), "a", 1);
    put_full(&b, "default", ready(3, 3), "c", 1);
    last = b.len;
    rec_t del = ready(3, 3);
    del.state = BQ_V7_BURIED;
    put_short(&b, del);
    /* Cut inside the short record: the bury is not taken. Its first four
     * bytes (namelen 0) alone look like the start of a zero tail. */
    for (size_t cut = last + 1; cut < b.len; cut++) {
        bytes_t c = {.p = b.p, .len = cut};
        bq_v7_reader_t *rd = read_one(&c, cut <= last + 4 ? 0 : BQ_V7_ECORRUPT);
        if (cut > last + 4)
            assert_error(rd, 0, last, "file ends inside a record");
        assert_int_equal(bq_v7_find(rd, 3)->state, BQ_V7_READY);
        bq_v7_reader_free(rd);
    }
    free_bytes(&b);
}

/* ---- streaming ---- */

static void v7_any_chunking_gives_the_same_jobs(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    static uint8_t big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7);
    put_full(&b, "default", ready(1, 3), "a", 1);
    put_full(&b, "big", ready(2, 0), big, sizeof big);
    rec_t r = ready(1, 3);
    r.state = BQ_V7_BURIED;
    put_short(&b, r);
    uint8_t zeros[100] = {0};
    put_bytes(&b, zeros, sizeof zeros);
    const size_t chunks[] = {1, 2, 3, 5, 83, 84, 85, 4096, 65536};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        bq_v7_reader_t *rd = bq_v7_reader_new();
        assert_int_equal(read_files(rd, &b, 1, chunks[i]), 0);
        assert_int_equal(bq_v7_count(rd), 2);
        assert_int_equal(bq_v7_find(rd, 1)->state, BQ_V7_BURIED);
        const bq_v7_job_t *j = bq_v7_find(rd, 2);
        assert_int_equal(j->body_size, sizeof big + 2);
        assert_memory_equal(j->body, big, sizeof big);
        assert_true(bq_v7_file_done(rd));
        bq_v7_reader_free(rd);
    }
    free_bytes(&b);
}

/* ---- conversion ---- */

static void v7_job_to_record_converts_units(void **state)
{
    (void)state;
    bytes_t b = {0};
    start_file(&b);
    rec_t r = ready(5, 4);
    r.ttr = 0;
    r.state = BQ_V7_RESERVED;
    r.deadline = 99;
    put_full(&b, "t", r, "hi", 2);
    r = ready(6, 3);
    r.ttr = 2 * NS + NS / 2;
    r.delay = 7 * NS + 1;
    r.deadline = INT64_C(1800000000) * NS;
    r.ct[0] = 9;
    r.state = BQ_V7_DELAYED;
    put_full(&b, "t", r, "d", 1);
    r = ready(7, 3);
    r.state = BQ_V7_BURIED;
    r.ct[3] = 1;
    put_full(&b, "t", r, "b", 1);
    bq_v7_reader_t *rd = read_one(&b, 0);

    Bq__Log__JobFull full = BQ__LOG__JOB_FULL__INIT;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    bq_v7_job_to_record(bq_v7_find(rd, 5), &full, &st);
    assert_int_equal(full.id, 5);
    assert_string_equal(full.tube, "t");
    assert_int_equal(full.ttr, 1);
    assert_int_equal(full.created_wall, INT64_C(1700000000) * NS + 5);
    assert_int_equal(full.body.len, 2);
    assert_memory_equal(full.body.data, "hi", 2);
    assert_ptr_equal(full.status, &st);
    assert_int_equal(st.state, BQ__LOG__JOB_STATE__READY);
    assert_int_equal(st.pri, 1024);
    assert_int_equal(st.deadline_wall, 0);
    assert_int_equal(st.bury_seq, 0);

    bq_v7_job_to_record(bq_v7_find(rd, 6), &full, &st);
    assert_int_equal(full.ttr, 2);
    assert_int_equal(st.state, BQ__LOG__JOB_STATE__DELAYED);
    assert_int_equal(st.delay, 7);
    assert_int_equal(st.deadline_wall, INT64_C(1800000000) * NS);
    assert_int_equal(st.reserves, 9);

    bq_v7_job_to_record(bq_v7_find(rd, 7), &full, &st);
    assert_int_equal(st.state, BQ__LOG__JOB_STATE__BURIED);
    assert_int_equal(st.bury_seq, 3);
    assert_int_equal(st.buries, 1);
    assert_int_equal(st.deadline_wall, 0);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

/* ---- many jobs ---- */

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Du;
}

static void v7_random_workload_matches_a_model(void **state)
{
    (void)state;
    enum { N = 20000 };
    static uint8_t model[N + 1]; /* 0 absent, else state */
    memset(model, 0, sizeof model);
    bytes_t b = {0};
    start_file(&b);
    uint64_t next = 1;
    for (int op = 0; op < 60000; op++) {
        uint64_t id = 1 + rnd() % (next < 2 ? 1 : next - 1);
        if (next <= N && (rnd() % 3 == 0 || next == 1)) {
            put_full(&b, "default", ready(next, 3), "x", 1);
            model[next++] = BQ_V7_READY;
        } else if (rnd() % 2) {
            rec_t r = ready(id, 3);
            r.state = BQ_V7_INVALID;
            put_short(&b, r);
            model[id] = 0;
        } else {
            rec_t r = ready(id, 3);
            r.state = (uint8_t)(1 + rnd() % 4);
            put_short(&b, r);
            if (model[id])
                model[id] = r.state;
        }
    }
    bq_v7_reader_t *rd = read_one(&b, 0);
    size_t live = 0;
    for (uint64_t id = 1; id <= N; id++) {
        const bq_v7_job_t *j = bq_v7_find(rd, id);
        assert_int_equal(j ? j->state : 0, model[id]);
        live += model[id] != 0;
    }
    assert_int_equal(bq_v7_count(rd), live);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

/* Deleting nearly every job shrinks the table; the rest stay findable. */
static void v7_table_shrinks_and_keeps_the_rest(void **state)
{
    (void)state;
    enum { N = 5000 };
    bytes_t b = {0};
    start_file(&b);
    for (uint64_t id = 1; id <= N; id++)
        put_full(&b, "default", ready(id * 7919, 3), "x", 1); /* spread-out ids */
    for (uint64_t id = 1; id <= N; id++) {
        if (id % 500 == 0)
            continue;
        rec_t del = ready(id * 7919, 3);
        del.state = BQ_V7_INVALID;
        put_short(&b, del);
    }
    bq_v7_reader_t *rd = read_one(&b, 0);
    assert_int_equal(bq_v7_count(rd), N / 500);
    for (uint64_t id = 1; id <= N; id++)
        assert_int_equal(bq_v7_find(rd, id * 7919) != NULL, id % 500 == 0);
    bq_v7_reader_free(rd);
    free_bytes(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(v7_full_record_gives_every_field),
        cmocka_unit_test(v7_every_live_state_is_kept),
        cmocka_unit_test(v7_later_short_record_wins),
        cmocka_unit_test(v7_invalid_short_record_deletes),
        cmocka_unit_test(v7_invalid_full_record_deletes_and_reads_its_body),
        cmocka_unit_test(v7_short_record_for_unknown_job_is_ignored),
        cmocka_unit_test(v7_zero_tail_ends_the_file),
        cmocka_unit_test(v7_empty_and_all_zero_files_hold_nothing),
        cmocka_unit_test(v7_records_accumulate_across_files),
        cmocka_unit_test(v7_full_record_again_replaces_the_job),
        cmocka_unit_test(v7_bury_seq_follows_the_last_bury),
        cmocka_unit_test(v7_damage_is_reported_at_its_record),
        cmocka_unit_test(v7_bad_versions_are_refused),
        cmocka_unit_test(v7_truncation_at_every_byte_of_the_last_record),
        cmocka_unit_test(v7_any_chunking_gives_the_same_jobs),
        cmocka_unit_test(v7_job_to_record_converts_units),
        cmocka_unit_test(v7_random_workload_matches_a_model),
        cmocka_unit_test(v7_table_shrinks_and_keeps_the_rest),
    };
    return cmocka_run_group_tests_name("beanstalkd_v7", tests, NULL, NULL);
}
