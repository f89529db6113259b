/* Unit tests of the engine's binlog side: the records that commands emit
 * (protocol/record.c and the logging in commands.c and put.c) and
 * bq_engine_apply() (protocol/apply.c), driven by the harness with its fake
 * log (h_new_logged: room granted or refused on demand, every record kept).
 *
 * Covered: which records each durable command emits, with which entry flags
 * and contents; that non-durable changes emit nothing; that a refused log
 * room answers OUT_OF_MEMORY with the engine unchanged; that applying the
 * collected records to a fresh engine reproduces the durable state, also
 * after a restart and when applied twice; that apply refuses nonsense
 * without changing anything; and the compaction helpers (checkpoint, relog,
 * segment scan, live bytes).
 *
 * The harness checks the engine's invariants after every command and tick;
 * these tests call h_check() after every apply. Tests that show a bug are
 * kept but skipped with a "BUG: ..." message; set BQ_RUN_KNOWN_BUGS=1 to
 * run them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_harness.h"
#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"

typedef Bq__Log__Record rec_t;

#define READY BQ__LOG__JOB_STATE__READY
#define DELAYED BQ__LOG__JOB_STATE__DELAYED
#define BURIED BQ__LOG__JOB_STATE__BURIED

/* ---- reading the fake log ---- */

/* Record i of h's log, decoded; free with rec_free(). */
static rec_t *rec_at(const harness_t *h, size_t i)
{
    assert_true(i < h->log->n);
    const h_record_t *r = &h->log->recs[i];
    rec_t *x = bq__log__record__unpack(NULL, r->len, r->data);
    assert_non_null(x);
    return x;
}

static void rec_free(rec_t *x)
{
    bq__log__record__free_unpacked(x, NULL);
}

/* What every collected record must satisfy: it decodes, its entry flags
 * match its kind, and it fits in the room granted just before it (records
 * logged without asking, checkpoints, have room 0). */
static void check_entries(const harness_t *h)
{
    for (size_t i = 0; i < h->log->n; i++) {
        const h_record_t *r = &h->log->recs[i];
        rec_t *x = rec_at(h, i);
        if (r->room)
            assert_true(r->len <= r->room);
        switch (x->kind_case) {
        case BQ__LOG__RECORD__KIND_FULL:
            assert_true(r->full && !r->gone && !r->sync && r->job_id == x->full->id);
            assert_false(r->meta);
            break;
        case BQ__LOG__RECORD__KIND_UPDATE:
            assert_true(!r->full && !r->gone && !r->sync && r->job_id == x->update->id);
            assert_false(r->meta);
            break;
        case BQ__LOG__RECORD__KIND_DELETE:
            assert_true(!r->full && r->gone && !r->sync && r->job_id == x->delete_->id);
            assert_false(r->meta);
            break;
        case BQ__LOG__RECORD__KIND_PAUSE:
        case BQ__LOG__RECORD__KIND_IDS:
            assert_true(!r->full && !r->gone && r->job_id == 0 && r->prev_file == 0);
            assert_true(!r->sync || x->kind_case == BQ__LOG__RECORD__KIND_IDS);
            /* an id reservation is always the log's own bookkeeping */
            assert_true(r->meta || x->kind_case == BQ__LOG__RECORD__KIND_PAUSE);
            break;
        default:
            fail_msg("record %zu has no kind", i);
        }
        rec_free(x);
    }
}

/* Asserts a logged status: state, priority, delay, then the counters. */
static void expect_status(const Bq__Log__JobStatus *s, int state, uint32_t pri, uint32_t delay,
                          uint32_t reserves, uint32_t timeouts, uint32_t releases, uint32_t buries,
                          uint32_t kicks)
{
    assert_non_null(s);
    assert_int_equal(s->state, state);
    assert_int_equal(s->pri, pri);
    assert_int_equal(s->delay, delay);
    assert_int_equal(s->reserves, reserves);
    assert_int_equal(s->timeouts, timeouts);
    assert_int_equal(s->releases, releases);
    assert_int_equal(s->buries, buries);
    assert_int_equal(s->kicks, kicks);
}

/* Record i, which must be an update of job id; free with rec_free(). */
static rec_t *update_at(const harness_t *h, size_t i, uint64_t id)
{
    rec_t *x = rec_at(h, i);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_UPDATE);
    assert_true(x->update->id == id);
    return x;
}

/* ---- building records by hand ---- */

typedef struct blob {
    uint8_t *data;
    size_t len;
} blob_t;

static blob_t pack_rec(const rec_t *r)
{
    blob_t b;
    b.len = bq__log__record__get_packed_size(r);
    b.data = malloc(b.len ? b.len : 1);
    assert_non_null(b.data);
    assert_int_equal(bq__log__record__pack(r, b.data), b.len);
    return b;
}

static blob_t full_blob_st(uint64_t id, const char *tube, const char *body, Bq__Log__JobStatus *st)
{
    Bq__Log__JobFull f = BQ__LOG__JOB_FULL__INIT;
    f.id = id;
    f.tube = (char *)tube;
    f.ttr = 10;
    f.created_wall = H_WALL0 - H_S(5);
    f.body.data = (uint8_t *)body;
    f.body.len = strlen(body);
    f.status = st;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_FULL;
    r.full = &f;
    return pack_rec(&r);
}

/* A full record of a job in `state` (a delayed one due 60 s after H_WALL0,
 * a buried one at FIFO position id). */
static blob_t full_blob(uint64_t id, const char *tube, int state, uint32_t pri, const char *body)
{
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = state;
    st.pri = pri;
    if (state == DELAYED)
        st.deadline_wall = H_WALL0 + H_S(60);
    if (state == BURIED)
        st.bury_seq = id;
    return full_blob_st(id, tube, body, &st);
}

static blob_t update_blob(uint64_t id, Bq__Log__JobStatus *st)
{
    Bq__Log__JobUpdate u = BQ__LOG__JOB_UPDATE__INIT;
    u.id = id;
    u.status = st;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_UPDATE;
    r.update = &u;
    return pack_rec(&r);
}

static blob_t delete_blob(uint64_t id)
{
    Bq__Log__JobDelete d = BQ__LOG__JOB_DELETE__INIT;
    d.id = id;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_DELETE;
    r.delete_ = &d;
    return pack_rec(&r);
}

static blob_t pause_blob(const char *tube, int64_t pause_ns, int64_t unpause_wall)
{
    Bq__Log__TubePause p = BQ__LOG__TUBE_PAUSE__INIT;
    p.tube = (char *)tube;
    p.pause_ns = pause_ns;
    p.unpause_wall = unpause_wall;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_PAUSE;
    r.pause = &p;
    return pack_rec(&r);
}

/* An id reservation with the fields a single node adds. */
static blob_t ids_blob_full(uint64_t next, uint64_t used, bool durable, bool clean_stop)
{
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    ids.next = next;
    ids.used = used;
    ids.durable = durable;
    ids.clean_stop = clean_stop;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_IDS;
    r.ids = &ids;
    return pack_rec(&r);
}

static blob_t ids_blob(uint64_t next)
{
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    ids.next = next;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_IDS;
    r.ids = &ids;
    return pack_rec(&r);
}

static blob_t raw_blob(const void *p, size_t n)
{
    blob_t b = {malloc(n ? n : 1), n};
    assert_non_null(b.data);
    memcpy(b.data, p, n);
    return b;
}

/* Applies b (then frees it) from segment `file`; asserts the result and the
 * engine's invariants. */
static void apply_at(harness_t *h, blob_t b, uint32_t file, int expect, const char *where, int line)
{
    size_t logged = h->log ? h->log->n : 0;
    int rc = bq_engine_apply(h->e, b.data, b.len, file, h->now);
    free(b.data);
    if (rc != expect)
        fail_msg("%s:%d: apply returned %d, expected %d", where, line, rc, expect);
    h_check(h);
    if (h->log)
        assert_int_equal(h->log->n, logged); /* applying logs nothing */
}
#define apply_ok(h, b, file) apply_at((h), (b), (file), 0, __FILE__, __LINE__)

/* Applies b and asserts that it is refused with nothing changed. */
static void apply_bad_at(harness_t *h, blob_t b, const char *where, int line)
{
    char *before = h_dump(h, 0);
    apply_at(h, b, 9, BQ_EBADRECORD, where, line);
    char *after = h_dump(h, 0);
    if (strcmp(before, after) != 0)
        fail_msg("%s:%d: a refused record changed the engine:\n%s---\n%s", where, line, before,
                 after);
    free(before);
    free(after);
}
#define apply_bad(h, b) apply_bad_at((h), (b), __FILE__, __LINE__)

/* A fresh logged engine at `now` with every record of src's log applied in
 * order (from the segment the log hook returned for it), then one tick. */
static harness_t *replay(const harness_t *src, bq_now_t now)
{
    harness_t *r = h_new_logged(0);
    r->now = now;
    for (size_t i = 0; i < src->log->n; i++) {
        const h_record_t *x = &src->log->recs[i];
        apply_ok(r, raw_blob(x->data, x->len), x->file);
    }
    h_tick(r);
    return r;
}

/* Asserts that two engines have the same dump with these flags. */
static void same_state(const harness_t *a, const harness_t *b, int flags)
{
    char *da = h_dump(a, flags), *db = h_dump(b, flags);
    if (strcmp(da, db) != 0)
        fail_msg("states differ:\n%s---\n%s", da, db);
    free(da);
    free(db);
}

/* ---- what commands log ---- */

static void record_put_logs_id_reservation_then_full_job(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h->log->file = 3;
    assert_int_equal(h_put(h, a, 5, 0, 10, "hello"), 1);
    assert_int_equal(h->log->n, 2);
    /* the first id needs a reservation, made durable (sync) first */
    rec_t *x = rec_at(h, 0);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_IDS);
    assert_true(x->ids->next == 1 + BQ_ID_BLOCK);
    assert_true(h->log->recs[0].sync);
    rec_free(x);
    x = rec_at(h, 1);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_FULL);
    assert_true(x->full->id == 1);
    assert_string_equal(x->full->tube, "default");
    assert_int_equal(x->full->ttr, 10);
    assert_true(x->full->created_wall == H_WALL0);
    assert_int_equal(x->full->body.len, 5);
    assert_memory_equal(x->full->body.data, "hello", 5);
    expect_status(x->full->status, READY, 5, 0, 0, 0, 0, 0, 0);
    rec_free(x);
    const h_record_t *r = &h->log->recs[1];
    assert_true(r->full && !r->sync && r->prev_file == 0 && r->job_id == 1);
    assert_false(h->log->last_is_delete);
    /* the job's full record is in the segment the log returned */
    assert_int_equal(h_job(h, 1)->file, 3);
    assert_int_equal(h_job_stat_int(h, a, 1, "file"), 3);
    /* later ids are covered by the reservation */
    assert_int_equal(h_put(h, a, 6, 0, 1, ""), 2);
    assert_int_equal(h->log->n, 3);
    x = rec_at(h, 2);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_FULL);
    assert_int_equal(x->full->body.len, 0);
    assert_int_equal(x->full->ttr, 1);
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_put_delayed_logs_wall_clock_deadline(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_cmd(h, a, "use jobs.q\r\n", "USING jobs.q\r\n");
    h_advance(h, H_S(2));
    assert_int_equal(h_put(h, a, 700, 30, 60, "later"), 1);
    rec_t *x = rec_at(h, 1);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_FULL);
    assert_string_equal(x->full->tube, "jobs.q");
    assert_true(x->full->created_wall == h->now.wall);
    expect_status(x->full->status, DELAYED, 700, 30, 0, 0, 0, 0, 0);
    assert_true(x->full->status->deadline_wall == h->now.wall + H_S(30));
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_new_id_block_is_reserved_before_use(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    assert_int_equal(h_put(h, a, 1, 0, 1, "a"), 1);
    /* jump to the last id of the block */
    h->e->next_id = BQ_ID_BLOCK;
    h_log_clear(h->log);
    assert_int_equal(h_put(h, a, 1, 0, 1, "b"), BQ_ID_BLOCK);
    assert_int_equal(h->log->n, 1);
    uint64_t id = h_put(h, a, 1, 0, 1, "c");
    assert_int_equal(id, BQ_ID_BLOCK + 1);
    assert_int_equal(h->log->n, 3);
    rec_t *x = rec_at(h, 1);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_IDS);
    assert_true(x->ids->next == BQ_ID_BLOCK + 1 + BQ_ID_BLOCK);
    assert_true(h->log->recs[1].sync);
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_delete_in_every_state(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h->log->file = 4;
    h_put(h, a, 1, 0, 10, "ready");    /* 1 */
    h_put(h, a, 2, 0, 10, "reserved"); /* 2 */
    h_put(h, a, 3, 50, 10, "delayed"); /* 3 */
    h->log->file = 7;
    h_put(h, a, 0, 0, 10, "buried"); /* 4 */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 4, "buried"));
    h_cmd(h, a, "bury 4 9\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve-job 2\r\n", h_job_reply("RESERVED", 2, "reserved"));
    h_log_clear(h->log);
    static const uint64_t ids[] = {4, 3, 2, 1};
    static const uint32_t files[] = {7, 4, 4, 4};
    for (size_t i = 0; i < 4; i++) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", ids[i]);
        h_cmd(h, a, cmd, "DELETED\r\n");
        assert_true(h->log->last_is_delete);
        assert_int_equal(h->log->n, i + 1);
        rec_t *x = rec_at(h, i);
        assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_DELETE);
        assert_true(x->delete_->id == ids[i]);
        rec_free(x);
        const h_record_t *r = &h->log->recs[i];
        assert_true(r->gone && r->job_id == ids[i]);
        assert_int_equal(r->prev_file, files[i]);
    }
    assert_int_equal(bq_engine_live_log_bytes(h->e), 0);
    check_entries(h);
    h_done(h);
}

static void record_release_keeps_new_priority_and_delay(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h->log->file = 2;
    h_put(h, a, 5, 0, 10, "job");
    h_log_clear(h->log);
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "job"));
    assert_int_equal(h->log->n, 0);
    /* delay 0 with a new priority: beanstalkd's binlog lost it (issue 597) */
    h_cmd(h, a, "release 1 9 0\r\n", "RELEASED\r\n");
    assert_int_equal(h->log->n, 1);
    rec_t *x = update_at(h, 0, 1);
    expect_status(x->update->status, READY, 9, 0, 1, 0, 1, 0, 0);
    rec_free(x);
    assert_int_equal(h->log->recs[0].prev_file, 2);
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "job"));
    h_cmd(h, a, "release 1 3 20\r\n", "RELEASED\r\n");
    x = update_at(h, 1, 1);
    expect_status(x->update->status, DELAYED, 3, 20, 2, 0, 2, 0, 0);
    assert_true(x->update->status->deadline_wall == h->now.wall + H_S(20));
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_bury_logs_fifo_position(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "first");
    h_put(h, a, 2, 0, 10, "second");
    h_log_clear(h->log);
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "first"));
    h_cmd(h, a, "bury 1 40\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 2, "second"));
    h_cmd(h, a, "bury 2 30\r\n", "BURIED\r\n");
    assert_int_equal(h->log->n, 2);
    rec_t *x = update_at(h, 0, 1), *y = update_at(h, 1, 2);
    expect_status(x->update->status, BURIED, 40, 0, 1, 0, 0, 1, 0);
    expect_status(y->update->status, BURIED, 30, 0, 1, 0, 0, 1, 0);
    assert_true(x->update->status->bury_seq < y->update->status->bury_seq);
    rec_free(x);
    rec_free(y);
    check_entries(h);
    h_done(h);
}

static void record_kick_of_buried_and_of_delayed_jobs(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    for (int i = 0; i < 3; i++)
        h_put(h, a, 5, 0, 10, "b");
    for (uint64_t id = 3; id >= 2; id--) { /* bury 3 then 2: FIFO 3, 2 */
        char cmd[32];
        snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", id);
        h_cmd(h, a, cmd, h_job_reply("RESERVED", id, "b"));
        snprintf(cmd, sizeof cmd, "bury %" PRIu64 " 6\r\n", id);
        h_cmd(h, a, cmd, "BURIED\r\n");
    }
    h_put(h, a, 7, 40, 10, "d"); /* 4 */
    h_put(h, a, 8, 20, 10, "d"); /* 5: due first */
    h_log_clear(h->log);
    /* buried jobs first, in FIFO order, and no more than there are */
    h_cmd(h, a, "kick 10\r\n", "KICKED 2\r\n");
    assert_int_equal(h->log->n, 2);
    rec_t *x = update_at(h, 0, 3), *y = update_at(h, 1, 2);
    expect_status(x->update->status, READY, 6, 0, 1, 0, 0, 1, 1);
    expect_status(y->update->status, READY, 6, 0, 1, 0, 0, 1, 1);
    rec_free(x);
    rec_free(y);
    /* then delayed jobs by deadline; their delay stays as put */
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    assert_int_equal(h->log->n, 3);
    x = update_at(h, 2, 5);
    expect_status(x->update->status, READY, 8, 20, 0, 0, 0, 0, 1);
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_kick_job_of_buried_and_of_delayed_job(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "b");  /* 1 */
    h_put(h, a, 6, 30, 10, "d"); /* 2 */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "b"));
    h_cmd(h, a, "bury 1 5\r\n", "BURIED\r\n");
    h_log_clear(h->log);
    h_cmd(h, a, "kick-job 2\r\n", "KICKED\r\n");
    h_cmd(h, a, "kick-job 1\r\n", "KICKED\r\n");
    h_cmd(h, a, "kick-job 1\r\n", "NOT_FOUND\r\n");
    assert_int_equal(h->log->n, 2);
    rec_t *x = update_at(h, 0, 2), *y = update_at(h, 1, 1);
    expect_status(x->update->status, READY, 6, 30, 0, 0, 0, 0, 1);
    expect_status(y->update->status, READY, 5, 0, 1, 0, 0, 1, 1);
    rec_free(x);
    rec_free(y);
    check_entries(h);
    h_done(h);
}

static void record_pause_tube(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_cmd(h, a, "use feed\r\n", "USING feed\r\n");
    h_log_clear(h->log);
    h_cmd(h, a, "pause-tube feed 30\r\n", "PAUSED\r\n");
    h_cmd(h, a, "pause-tube nosuch 30\r\n", "NOT_FOUND\r\n");
    assert_int_equal(h->log->n, 1);
    rec_t *x = rec_at(h, 0);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_PAUSE);
    assert_string_equal(x->pause->tube, "feed");
    assert_true(x->pause->pause_ns == H_S(30));
    assert_true(x->pause->unpause_wall == h->now.wall + H_S(30));
    rec_free(x);
    assert_false(h->log->recs[0].meta); /* a command's record, not bookkeeping */
    /* a zero delay pauses for 1 ns */
    h_cmd(h, a, "pause-tube feed 0\r\n", "PAUSED\r\n");
    x = rec_at(h, 1);
    assert_true(x->pause->pause_ns == 1 && x->pause->unpause_wall == h->now.wall + 1);
    rec_free(x);
    check_entries(h);
    h_done(h);
}

static void record_nothing_for_changes_that_are_not_durable(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h), b = h_open(h);
    h_put(h, a, 5, 0, 2, "one");    /* 1, ttr 2 */
    h_put(h, a, 6, 0, 10, "two");   /* 2 */
    h_put(h, a, 7, 3, 10, "three"); /* 3, delayed 3 s */
    h_put(h, a, 8, 0, 10, "four");  /* 4 */
    h_cmd(h, a, "reserve-job 4\r\n", h_job_reply("RESERVED", 4, "four"));
    h_cmd(h, a, "bury 4 8\r\n", "BURIED\r\n");
    size_t n = h->log->n;
    unsigned asks = h->log->asks;
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 1, "one"));
    h_cmd(h, b, "reserve-with-timeout 0\r\n", h_job_reply("RESERVED", 2, "two"));
    h_cmd(h, b, "touch 2\r\n", "TOUCHED\r\n");
    h_cmd(h, b, "reserve-job 4\r\n", h_job_reply("RESERVED", 4, "four")); /* buried */
    h_cmd(h, a, "peek 1\r\n", h_job_reply("FOUND", 1, "one"));
    h_yaml(h, a, "stats-job 1\r\n");
    h_yaml(h, a, "stats\r\n");
    h_yaml(h, a, "list-tubes\r\n");
    h_send(h, a, "use x\r\nwatch y\r\nignore y\r\npeek-ready\r\n");
    h_clear(h, a);
    h_advance(h, H_S(3)); /* TTR of job 1 runs out, job 3 becomes ready */
    assert_int_equal(h_job(h, 1)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, 3)->state, BQ_JOB_READY);
    h_cmd(h, a, "reserve-job 3\r\n", h_job_reply("RESERVED", 3, "three"));
    h_close(h, b); /* jobs 2 and 4 go back to ready */
    h_close(h, a);
    assert_int_equal(h_job(h, 4)->state, BQ_JOB_READY);
    assert_int_equal(h->log->n, n);
    assert_int_equal(h->log->asks, asks);
    h_done(h);
}

/* ---- a refused log room ---- */

/* Sends cmd with log room refused: asserts the reply, that room was asked
 * and no record written, and that h_dump(flags) did not change. */
static void refused_at(harness_t *h, int c, const char *cmd, const char *reply, int flags,
                       const char *file, int line)
{
    char *before = h_dump(h, flags);
    size_t n = h->log->n;
    unsigned asks = h->log->asks;
    h->log->grants = 0;
    h_cmd_at(h, c, cmd, reply, file, line);
    h->log->grants = -1;
    _assert_int_equal(h->log->n, n, file, line);
    _assert_true(h->log->asks > asks, "asked for room", file, line);
    char *after = h_dump(h, flags);
    if (strcmp(before, after) != 0)
        fail_msg("%s:%d: refused command changed the engine:\n%s---\n%s", file, line, before,
                 after);
    free(before);
    free(after);
}
#define refused(h, c, cmd, reply, flags)                                                           \
    refused_at((h), (c), (cmd), (reply), (flags), __FILE__, __LINE__)

static void refused_room_put(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    /* no room for the first id reservation: nothing changes, not even ids */
    refused(h, a, "put 1 0 10 3\r\nabc\r\n", "OUT_OF_MEMORY\r\n", 0);
    assert_int_equal(h->e->next_id, 1);
    assert_int_equal(h->e->id_limit, 0);
    assert_int_equal(h_put(h, a, 1, 0, 10, "abc"), 1);
    /* no room for the job: its id is used up (beanstalkd takes it with the
     * command line), nothing else changes */
    refused(h, a, "put 1 0 10 3\r\nabc\r\n", "OUT_OF_MEMORY\r\n", H_DUMP_NO_IDS);
    refused(h, a, "put 1 5 10 3\r\nabc\r\n", "OUT_OF_MEMORY\r\n", H_DUMP_NO_IDS);
    assert_int_equal(h->e->next_id, 4);
    assert_int_equal(h_put(h, a, 1, 0, 10, "abc"), 4);
    assert_int_equal(h_stat(h, a, "stats\r\n", "current-jobs-ready"), 2);
    check_entries(h);
    h_done(h);
}

/* A log hook that refuses because the node just began to refuse writes
 * (BQ_ROOM_REFUSED) makes the put answer DRAINING, not OUT_OF_MEMORY,
 * without the engine's drain state being touched from inside the hook;
 * other changes answer OUT_OF_MEMORY; with room again, puts go on (the id
 * the refused put took is not reused). */
static void refused_room_put_while_starting_to_drain(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    assert_int_equal(h_put(h, a, 1, 0, 10, "abc"), 1);
    h->log->refuse_writes = true;
    h->log->grants = 0;
    size_t n = h->log->n;
    h_cmd(h, a, "put 1 0 10 3\r\nabc\r\n", "DRAINING\r\n");
    h_cmd(h, a, "kick-job 1\r\n", "NOT_FOUND\r\n"); /* ready: nothing to log */
    h_cmd(h, a, "pause-tube default 1\r\n", "OUT_OF_MEMORY\r\n");
    assert_int_equal(h->log->n, n);
    assert_false(bq_engine_draining(h->e));
    assert_int_equal(h_stat(h, a, "stats\r\n", "current-jobs-ready"), 1);
    h->log->grants = -1;
    h->log->refuse_writes = false;
    assert_int_equal(h_put(h, a, 1, 0, 10, "abc"), 3);
    h_done(h);
}

/* The same when the put needs a new id reservation first (a primary just
 * in office, fenced before its first put): the reservation is refused, the
 * body is read and dropped, and the put answers DRAINING. */
static void refused_id_reservation_put_answers_draining(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h->log->refuse_writes = true;
    h->log->grants = 0;
    h_cmd(h, a, "put 1 0 10 3\r\nabc\r\n", "DRAINING\r\n");
    assert_int_equal(h->log->n, 0);
    h_cmd(h, a, "list-tube-used\r\n", "USING default\r\n"); /* in step after the body */
    h->log->grants = -1;
    h->log->refuse_writes = false;
    assert_true(h_put(h, a, 1, 0, 10, "abc") > 0);
    h_done(h);
}

static void refused_room_delete_in_every_state(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "ready");
    h_put(h, a, 2, 0, 10, "reserved");
    h_put(h, a, 3, 50, 10, "delayed");
    h_put(h, a, 0, 0, 10, "buried");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 4, "buried"));
    h_cmd(h, a, "bury 4 9\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve-job 2\r\n", h_job_reply("RESERVED", 2, "reserved"));
    for (uint64_t id = 1; id <= 4; id++) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", id);
        refused(h, a, cmd, "OUT_OF_MEMORY\r\n", 0);
        assert_true(h->log->last_is_delete);
    }
    /* once there is room again, everything works */
    for (uint64_t id = 1; id <= 4; id++) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", id);
        h_cmd(h, a, cmd, "DELETED\r\n");
    }
    check_entries(h);
    h_done(h);
}

static void refused_room_release_bury_kick_job_pause(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "r");
    h_put(h, a, 2, 30, 10, "d");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "r"));
    refused(h, a, "release 1 7 0\r\n", "OUT_OF_MEMORY\r\n", 0);
    refused(h, a, "release 1 7 10\r\n", "OUT_OF_MEMORY\r\n", 0);
    refused(h, a, "bury 1 7\r\n", "OUT_OF_MEMORY\r\n", 0);
    refused(h, a, "kick-job 2\r\n", "OUT_OF_MEMORY\r\n", 0);
    refused(h, a, "pause-tube default 10\r\n", "OUT_OF_MEMORY\r\n", 0);
    h_cmd(h, a, "pause-tube default 10\r\n", "PAUSED\r\n");
    refused(h, a, "pause-tube default 20\r\n", "OUT_OF_MEMORY\r\n", 0);
    /* the job is still reserved by a, and everything works again */
    h_cmd(h, a, "bury 1 7\r\n", "BURIED\r\n");
    h_cmd(h, a, "kick-job 1\r\n", "KICKED\r\n");
    h_cmd(h, a, "kick-job 2\r\n", "KICKED\r\n");
    assert_int_equal(h_job(h, 1)->kicks, 1);
    check_entries(h);
    h_done(h);
}

static void refused_room_kick_counts_only_kicked_jobs(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    for (int i = 0; i < 5; i++) {
        uint64_t id = h_put(h, a, 5, 0, 10, "b");
        char cmd[32];
        snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", id);
        h_cmd(h, a, cmd, h_job_reply("RESERVED", id, "b"));
        snprintf(cmd, sizeof cmd, "bury %" PRIu64 " 5\r\n", id);
        h_cmd(h, a, cmd, "BURIED\r\n");
    }
    refused(h, a, "kick 5\r\n", "OUT_OF_MEMORY\r\n", 0); /* not KICKED 0: refused */
    size_t n = h->log->n;
    h->log->grants = 2;
    h_cmd(h, a, "kick 5\r\n", "KICKED 2\r\n");
    h->log->grants = -1;
    assert_int_equal(h->log->n, n + 2);
    assert_int_equal(h->e->buried_ct, 3);
    assert_int_equal(h->e->ready_ct, 2);
    /* the FIFO's first two went, with one record each */
    assert_int_equal(h_job(h, 1)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, 2)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, 3)->state, BQ_JOB_BURIED);
    assert_int_equal(h_job_stat_int(h, a, 1, "kicks"), 1);
    assert_int_equal(h_job_stat_int(h, a, 3, "kicks"), 0);
    assert_int_equal(h_stat(h, a, "stats-tube default\r\n", "current-jobs-buried"), 3);
    check_entries(h);
    h_done(h);
}

/* ---- replay ---- */

/* Drives h (logged) through every logged command and some that are not;
 * see the comments for the state at the end. */
static void scenario(harness_t *h, int a, int b)
{
    h_put(h, a, 10, 0, 30, "one");  /* 1: default, ready */
    h_put(h, a, 20, 60, 30, "two"); /* 2: default, delayed, kicked below */
    h_cmd(h, a, "use t1\r\n", "USING t1\r\n");
    h->log->file = 2;
    h_put(h, a, 5, 0, 30, "three"); /* 3: buried */
    h_put(h, a, 6, 0, 30, "four");  /* 4: released twice, delayed */
    h_put(h, a, 7, 0, 30, "five");  /* 5: deleted */
    h_put(h, a, 8, 0, 2, "six");    /* 6: TTR runs out, released */
    h_put(h, a, 9, 0, 30, "seven"); /* 7: ready */
    h_put(h, a, 1, 0, 30, "eight"); /* 8: buried, kicked */
    h_cmd(h, b, "watch t1\r\n", "WATCHING 2\r\n");
    h_cmd(h, b, "ignore default\r\n", "WATCHING 1\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 8, "eight"));
    h_cmd(h, b, "bury 8 100\r\n", "BURIED\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 3, "three"));
    h_cmd(h, b, "bury 3 50\r\n", "BURIED\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 4, "four"));
    h_cmd(h, b, "release 4 2 0\r\n", "RELEASED\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 4, "four"));
    h_cmd(h, b, "release 4 3 45\r\n", "RELEASED\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 5, "five"));
    h_cmd(h, b, "delete 5\r\n", "DELETED\r\n");
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 6, "six"));
    h_advance(h, H_S(3));
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 6, "six"));
    h_cmd(h, b, "release 6 8 0\r\n", "RELEASED\r\n");
    h_cmd(h, a, "kick-job 2\r\n", "KICKED\r\n");
    h->log->file = 3;
    h_put(h, a, 4, 100, 30, "nine"); /* 9: t1, delayed */
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    h_cmd(h, a, "pause-tube t1 120\r\n", "PAUSED\r\n");
    h_put(h, a, 0, 0, 30, "ten"); /* 10: reserved at the end (durably ready) */
    h_cmd(h, b, "reserve-job 10\r\n", h_job_reply("RESERVED", 10, "ten"));
    h_cmd(h, b, "touch 10\r\n", "TOUCHED\r\n");
    h_cmd(h, a, "use t2\r\n", "USING t2\r\n");
    h_put(h, a, 0, 0, 5, "eleven"); /* 11: deleted */
    h_cmd(h, a, "delete 11\r\n", "DELETED\r\n");
    h_cmd(h, a, "use t3\r\n", "USING t3\r\n");
    h_put(h, a, 3, 0, 30, "twelve");    /* 12: ready */
    h_put(h, a, 2, 50, 30, "thirteen"); /* 13: delayed, kicked */
    h_put(h, a, 2, 70, 30, "fourteen"); /* 14: delayed */
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    h_cmd(h, a, "pause-tube t3 5\r\n", "PAUSED\r\n");
    h_advance(h, H_S(6)); /* the pause of t3 ends */
    assert_int_equal(h_job(h, 13)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, 14)->state, BQ_JOB_DELAYED);
    assert_int_equal(h_job(h, 10)->state, BQ_JOB_RESERVED);
    check_entries(h);
}

/* The latest record about job id in l, decoded (NULL if none); its status
 * in *st. */
static rec_t *latest_record(const harness_t *h, uint64_t id, Bq__Log__JobStatus **st)
{
    for (size_t i = h->log->n; i-- > 0;) {
        if (h->log->recs[i].job_id != id)
            continue;
        rec_t *x = rec_at(h, i);
        *st = x->kind_case == BQ__LOG__RECORD__KIND_FULL     ? x->full->status
              : x->kind_case == BQ__LOG__RECORD__KIND_UPDATE ? x->update->status
                                                             : NULL;
        return x;
    }
    return NULL;
}

/* Every job of r has the priority, delay and counters of the latest record
 * about it in src's log. */
static void check_counters_as_logged(const harness_t *r, const harness_t *src)
{
    for (size_t i = 0; i < r->e->jobs.cap; i++) {
        const bq_job_t *j = r->e->jobs.slots[i];
        if (!j)
            continue;
        Bq__Log__JobStatus *st = NULL;
        rec_t *x = latest_record(src, j->id, &st);
        assert_non_null(x);
        assert_non_null(st);
        assert_int_equal(j->pri, st->pri);
        assert_int_equal(j->delay, st->delay);
        assert_int_equal(j->reserves, st->reserves);
        assert_int_equal(j->timeouts, st->timeouts);
        assert_int_equal(j->releases, st->releases);
        assert_int_equal(j->buries, st->buries);
        assert_int_equal(j->kicks, st->kicks);
        rec_free(x);
    }
}

static void replay_reproduces_durable_state(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h), b = h_open(h);
    scenario(h, a, b);
    harness_t *r = replay(h, h->now);
    /* the same jobs, tubes, states (reserved as ready), priorities, delays,
     * bodies, creation times, deadlines, buried FIFO, pauses and counters,
     * except the two that change without a record */
    same_state(h, r, H_DUMP_DURABLE | H_DUMP_NO_RESERVES);
    check_counters_as_logged(r, h);
    /* those two are as last logged */
    assert_int_equal(h_job(h, 10)->reserves, 1);
    assert_int_equal(h_job(r, 10)->reserves, 0);
    assert_int_equal(h_job(r, 6)->timeouts, 1);
    assert_int_equal(h_job(r, 6)->reserves, 2);
    assert_int_equal(h_job(r, 4)->pri, 3);
    assert_int_equal(h_job(r, 10)->state, BQ_JOB_READY);
    assert_null(h_job(r, 5));
    assert_null(h_job(r, 11));
    /* jobs remember the segment of their full record */
    assert_int_equal(h_job(r, 1)->file, 1);
    assert_int_equal(h_job(r, 3)->file, 2);
    assert_int_equal(h_job(r, 9)->file, 3);
    assert_int_equal(bq_engine_live_log_bytes(r->e), bq_engine_live_log_bytes(h->e));
    /* a put gets an id beyond every reserved one, and reserves a new block */
    int c = h_open(r);
    h_log_clear(r->log);
    uint64_t id = h_put(r, c, 1, 0, 1, "new");
    assert_int_equal(id, 1 + BQ_ID_BLOCK);
    rec_t *x = rec_at(r, 0);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_IDS);
    assert_true(x->ids->next > id);
    rec_free(x);
    /* a job buried now comes after the replayed ones in the FIFO */
    h_cmd(r, c, "use t1\r\n", "USING t1\r\n");
    id = h_put(r, c, 1, 0, 1, "late");
    char cmd[64];
    snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", id);
    h_cmd(r, c, cmd, h_job_reply("RESERVED", id, "late"));
    snprintf(cmd, sizeof cmd, "bury %" PRIu64 " 1\r\n", id);
    h_cmd(r, c, cmd, "BURIED\r\n");
    h_cmd(r, c, "kick 1\r\n", "KICKED 1\r\n");
    assert_int_equal(h_job(r, 3)->state, BQ_JOB_READY);
    assert_int_equal(h_job(r, id)->state, BQ_JOB_BURIED);
    h_done(r);
    h_done(h);
}

static void replay_after_restart_keeps_wall_clock_times(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h), b = h_open(h);
    scenario(h, a, b);
    h_close(h, b);
    h_advance(h, H_S(10));
    /* restart 10 s later: a new monotonic clock, the same wall clock */
    bq_now_t later = {.mono = H_S(50), .wall = h->now.wall};
    harness_t *r = replay(h, later);
    same_state(h, r, H_DUMP_DURABLE | H_DUMP_NO_RESERVES);
    /* job 4 is due 45 s after its release, 19 s ago */
    assert_true(h_job(r, 4)->key == later.mono + H_S(45 - 19));
    assert_true(h_wall_of(r, h_job(r, 4)->key) == h_wall_of(h, h_job(h, 4)->key));
    /* and becomes ready then */
    h_at(r, later.mono + H_S(26) - 1);
    assert_int_equal(h_job(r, 4)->state, BQ_JOB_DELAYED);
    h_at(r, later.mono + H_S(26));
    assert_int_equal(h_job(r, 4)->state, BQ_JOB_READY);
    h_done(r);
    h_done(h);
}

static void replay_twice_is_idempotent(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h), b = h_open(h);
    scenario(h, a, b);
    harness_t *once = replay(h, h->now);
    harness_t *twice = replay(h, h->now);
    for (size_t i = 0; i < h->log->n; i++) {
        const h_record_t *x = &h->log->recs[i];
        apply_ok(twice, raw_blob(x->data, x->len), x->file);
    }
    h_tick(twice);
    same_state(once, twice, H_DUMP_DURABLE);
    assert_int_equal(twice->e->next_id, once->e->next_id);
    assert_int_equal(bq_engine_live_log_bytes(twice->e), bq_engine_live_log_bytes(once->e));
    assert_int_equal(twice->e->jobs.len, once->e->jobs.len);
    h_done(once);
    h_done(twice);
    h_done(h);
}

static void replay_reserve_job_of_buried_job_is_buried_again(void **state)
{
    (void)state;
    /* documented in docs/binlog.md: reserve-job is not logged */
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "x");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "x"));
    h_cmd(h, a, "bury 1 1\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", 1, "x"));
    harness_t *r = replay(h, h->now);
    assert_int_equal(h_job(r, 1)->state, BQ_JOB_BURIED);
    assert_int_equal(h_job(r, 1)->buries, 1);
    h_done(r);
    h_done(h);
}

static void replay_of_a_pause_that_ended_is_ignored(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "x");
    h_cmd(h, a, "pause-tube default 5\r\n", "PAUSED\r\n");
    bq_now_t later = {.mono = H_S(1), .wall = h->now.wall + H_S(5)};
    harness_t *r = replay(h, later);
    assert_false(bq__tube_paused(r->e->default_tube));
    later.wall -= 1;
    harness_t *r2 = replay(h, later);
    assert_true(bq__tube_paused(r2->e->default_tube));
    assert_true(r2->e->default_tube->unpause_at == later.mono + 1);
    assert_true(r2->e->default_tube->pause_ns == H_S(5));
    h_done(r2);
    h_done(r);
    h_done(h);
}

/* An unpause (pause-tube 0) replayed after its pause ended must end the
 * longer pause before it: a standby that applied both, or a replay soon
 * after, would otherwise keep the tube paused (found by the console's
 * browser test: the new primary showed an unpaused tube paused). */
static void replay_of_an_unpause_ends_the_pause_before_it(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "x");
    h_cmd(h, a, "pause-tube default 60\r\n", "PAUSED\r\n");
    h_cmd(h, a, "pause-tube default 0\r\n", "PAUSED\r\n");
    bq_now_t later = {.mono = H_S(1), .wall = h->now.wall + H_S(1)};
    harness_t *r = replay(h, later);
    bq_engine_tick(r->e, later);
    assert_false(bq__tube_paused(r->e->default_tube));
    h_done(r);
    /* the same for a tube whose pause waits for its jobs (pending) */
    apply_ok(h, pause_blob("t9", H_S(60), H_WALL0 + H_S(60)), 1);
    apply_ok(h, pause_blob("t9", 1, H_WALL0 - 1), 1);
    assert_int_equal(h->e->npending_pauses, 0);
    h_done(h);
}

static void replay_pause_logged_before_its_jobs_keeps_the_pause(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_cmd(h, a, "use t1\r\n", "USING t1\r\n");
    h_put(h, a, 1, 0, 10, "x");
    h_put(h, a, 1, 0, 10, "y");
    h_cmd(h, a, "pause-tube t1 60\r\n", "PAUSED\r\n");
    /* a new segment: checkpoint first, then compaction moves the jobs */
    h_log_clear(h->log);
    h->log->file = 2;
    bq_engine_log_checkpoint(h->e, h->now);
    assert_int_equal(bq_engine_relog_job(h->e, 1, h->now), 0);
    assert_int_equal(bq_engine_relog_job(h->e, 2, h->now), 0);
    harness_t *r = replay(h, h->now);
    same_state(h, r, H_DUMP_DURABLE);
    h_done(r);
    h_done(h);
}

static void replay_full_record_of_the_only_job_keeps_the_pause(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_cmd(h, a, "use t1\r\n", "USING t1\r\n");
    h_put(h, a, 1, 0, 10, "x");
    h_cmd(h, a, "pause-tube t1 60\r\n", "PAUSED\r\n");
    /* compaction relogs the job; the old segment is still there at replay */
    h->log->file = 2;
    assert_int_equal(bq_engine_relog_job(h->e, 1, h->now), 0);
    harness_t *r = replay(h, h->now);
    same_state(h, r, H_DUMP_DURABLE);
    h_done(r);
    h_done(h);
}

/* ---- apply: refusals, unknown fields, unknown ids ---- */

/* An engine with jobs 1 (ready, tube q), 2 (buried) and 3 (reserved by a
 * connection), made by apply. */
static harness_t *applied_engine(void)
{
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(1, "q", READY, 5, "one"), 1);
    apply_ok(h, full_blob(2, "q", BURIED, 5, "two"), 1);
    apply_ok(h, full_blob(3, "q", READY, 1, "three"), 1);
    int a = h_open(h);
    h_cmd(h, a, "watch q\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "reserve-job 3\r\n", h_job_reply("RESERVED", 3, "three"));
    return h;
}

static void apply_refuses_garbage(void **state)
{
    (void)state;
    harness_t *h = applied_engine();
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"", 0},                 /* no kind */
        {"\x08", 1},             /* a varint without its value */
        {"\x0a\x05\x08\x01", 4}, /* a message longer than the data */
        {"\x0f", 1},             /* wire type 7 */
        {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11},
        {"\x0a\x02\x08", 3},     /* truncated inside a full record */
        {"\x32\x02\x08\x01", 4}, /* a kind this version does not know */
        {"\xa0\x06\x2a", 3},     /* only an unknown field */
        {"\x2a\x00\x2a\x00", 4}, /* two empty id records are fine... */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] - 1; i++)
        apply_bad(h, raw_blob(bad[i].bytes, bad[i].len));
    apply_ok(h, raw_blob(bad[8].bytes, bad[8].len), 1); /* ...and change nothing */
    /* random bytes never crash and never break an invariant */
    uint64_t x = 42;
    uint8_t buf[64];
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(x % sizeof buf);
        for (size_t i = 0; i < n; i++) {
            x = x * UINT64_C(6364136223846793005) + 1442695040888963407u;
            buf[i] = (uint8_t)(x >> 56);
        }
        int rc = bq_engine_apply(h->e, buf, n, 1, h->now);
        assert_true(rc == 0 || rc == BQ_EBADRECORD);
        h_check(h);
    }
    h_done(h);
}

static void apply_refuses_nonsense_records(void **state)
{
    (void)state;
    harness_t *h = applied_engine();
    static const char *const bad_names[] = {"", "-x", "a b", "tube\n", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        apply_bad(h, full_blob(9, bad_names[i], READY, 1, "x"));
        apply_bad(h, pause_blob(bad_names[i], H_S(10), H_WALL0 + H_S(10)));
    }
    char longname[202];
    memset(longname, 'n', 201);
    longname[201] = '\0';
    apply_bad(h, full_blob(9, longname, READY, 1, "x"));
    longname[200] = '\0';
    apply_ok(h, full_blob(9, longname, READY, 1, "x"), 1); /* 200 is the limit */
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    apply_bad(h, full_blob_st(10, "q", "x", &st));  /* state 0 */
    apply_bad(h, full_blob_st(10, "q", "x", NULL)); /* no status */
    st.state = 4;
    apply_bad(h, full_blob_st(10, "q", "x", &st));  /* not a state */
    apply_bad(h, full_blob(0, "q", READY, 1, "x")); /* id 0 */
    st.state = 0;
    apply_bad(h, update_blob(1, &st));
    apply_bad(h, update_blob(1, NULL));
    st.state = READY;
    apply_bad(h, update_blob(0, &st));
    apply_bad(h, delete_blob(0));
    apply_bad(h, pause_blob("q", 0, H_WALL0 + H_S(10)));
    apply_bad(h, pause_blob("q", -5, H_WALL0 + H_S(10)));
    /* the records about the reserved job 3 */
    apply_bad(h, full_blob(3, "q", READY, 1, "x"));
    apply_bad(h, update_blob(3, &st));
    apply_bad(h, delete_blob(3));
    h_done(h);
}

/* A packed submessage with an unknown field (number 100) appended, wrapped
 * as field `field` of its parent: tag, length, bytes. */
static size_t wrap_with_unknown(uint8_t *out, int field, const uint8_t *msg, size_t len)
{
    static const uint8_t unknown[] = {0xa0, 0x06, 0x2a, 0xa2, 0x06, 0x02, 'h', 'i'};
    size_t inner = len + sizeof unknown;
    assert_true(inner < 128);
    out[0] = (uint8_t)(field << 3 | 2);
    out[1] = (uint8_t)inner;
    memcpy(out + 2, msg, len);
    memcpy(out + 2 + len, unknown, sizeof unknown);
    return 2 + inner;
}

/* A full record of job 12 (buried, tube u) with unknown fields in its
 * status, in the full record and in the record, into out (160 bytes). */
static size_t unknown_fields_record(uint8_t *out)
{
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = BURIED;
    st.pri = 77;
    st.bury_seq = 4;
    st.kicks = 2;
    uint8_t sbuf[64], tmp[128];
    size_t sn = bq__log__job_status__pack(&st, tmp);
    sn = wrap_with_unknown(sbuf, 6, tmp, sn);
    Bq__Log__JobFull f = BQ__LOG__JOB_FULL__INIT;
    f.id = 12;
    f.tube = "u";
    f.ttr = 3;
    f.body.data = (uint8_t *)"body";
    f.body.len = 4;
    size_t fn = bq__log__job_full__pack(&f, tmp);
    memcpy(tmp + fn, sbuf, sn);
    size_t rn = wrap_with_unknown(out, 1, tmp, fn + sn);
    memcpy(out + rn, "\xa0\x06\x01", 3);
    return rn + 3;
}

static void apply_ignores_unknown_fields(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    uint8_t rec[160];
    apply_ok(h, raw_blob(rec, unknown_fields_record(rec)), 5);
    bq_job_t *j = h_job(h, 12);
    assert_non_null(j);
    assert_int_equal(j->state, BQ_JOB_BURIED);
    assert_int_equal(j->pri, 77);
    assert_int_equal(j->kicks, 2);
    assert_int_equal(j->ttr, 3);
    assert_int_equal(j->file, 5);
    assert_memory_equal(j->body, "body\r\n", 6);
    assert_string_equal(j->tube->name, "u");
    h_done(h);
}

static void apply_update_or_delete_of_unknown_id_is_ignored(void **state)
{
    (void)state;
    harness_t *h = applied_engine();
    char *before = h_dump(h, 0);
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = BURIED;
    apply_ok(h, update_blob(99, &st), 1);
    apply_ok(h, delete_blob(99), 1);
    char *after = h_dump(h, 0);
    assert_string_equal(after, before);
    free(before);
    free(after);
    h_done(h);
}

static void apply_full_replaces_an_existing_job(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(7, "old", BURIED, 5, "first"), 1);
    uint64_t bytes = bq_engine_live_log_bytes(h->e);
    apply_ok(h, full_blob(7, "new.tube", DELAYED, 6, "second body"), 4);
    bq_job_t *j = h_job(h, 7);
    assert_non_null(j);
    assert_int_equal(h->e->jobs.len, 1);
    assert_string_equal(j->tube->name, "new.tube");
    assert_int_equal(j->state, BQ_JOB_DELAYED);
    assert_int_equal(j->pri, 6);
    assert_int_equal(j->file, 4);
    assert_memory_equal(j->body, "second body\r\n", 13);
    assert_int_equal(h->e->buried_ct, 0);
    assert_null(bq__tube_find(h->e, "old", 3));                      /* nothing keeps it */
    assert_int_equal(bq_engine_live_log_bytes(h->e), bytes + 6 + 5); /* body and name */
    assert_true(h_wall_of(h, j->key) == H_WALL0 + H_S(60));
    /* the id counter moves past applied ids */
    assert_int_equal(h->e->next_id, 8);
    apply_ok(h, ids_blob(5), 1);
    assert_int_equal(h->e->next_id, 8);
    apply_ok(h, ids_blob(500), 1);
    assert_int_equal(h->e->next_id, 500);
    h_done(h);
}

/* Applies b to an engine holding job 1, then puts three jobs: every new id
 * must be above every id in use. */
static void huge_id_case(blob_t b)
{
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(1, "q", READY, 5, "one"), 1);
    int rc = bq_engine_apply(h->e, b.data, b.len, 1, h->now);
    free(b.data);
    assert_true(rc == 0 || rc == BQ_EBADRECORD);
    h_check(h); /* every job id is below next_id */
    int a = h_open(h);
    for (int i = 0; i < 3; i++) {
        uint64_t max = 0;
        for (size_t k = 0; k < h->e->jobs.cap; k++) {
            const bq_job_t *j = h->e->jobs.slots[k];
            max = j && j->id > max ? j->id : max;
        }
        h_clear(h, a);
        h_send(h, a, "put 1 0 10 1\r\nx\r\n");
        if (strncmp(h_out(h, a), "INSERTED ", 9) == 0)
            assert_true(strtoull(h_out(h, a) + 9, NULL, 10) > max);
        else
            assert_string_equal(h_out(h, a), "OUT_OF_MEMORY\r\n");
    }
    h_done(h);
}

static void apply_full_record_with_empty_body(void **state)
{
    (void)state;
    /* Seen only under UBSan (the Asan build type), where it aborts. */
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(3, "q", READY, 1, ""), 1);
    assert_int_equal(h_job(h, 3)->body_size, 2);
    assert_memory_equal(h_job(h, 3)->body, "\r\n", 2);
    h_done(h);
}

static void apply_huge_ids_never_lead_to_a_reused_id(void **state)
{
    (void)state;
    huge_id_case(full_blob(UINT64_MAX, "q", READY, 5, "max"));
    huge_id_case(ids_blob(UINT64_MAX));
}

static void apply_times_far_from_now_stay_in_range(void **state)
{
    (void)state;
    /* Clock conversions saturate: a deadline far in the past is due at
     * once, one far in the future never, and ages do not overflow. */
    harness_t *h = h_new_logged(0);
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = DELAYED;
    st.deadline_wall = INT64_MIN;
    apply_ok(h, full_blob_st(1, "q", "past", &st), 1);
    st.deadline_wall = INT64_MAX;
    apply_ok(h, full_blob_st(2, "q", "future", &st), 1);
    h_tick(h);
    assert_int_equal(h_job(h, 1)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, 2)->state, BQ_JOB_DELAYED);
    assert_true(h_job(h, 2)->key > h->now.mono + H_S(1000000000));
    apply_ok(h, pause_blob("q", H_S(1), INT64_MAX), 1);
    assert_true(bq__tube_paused(bq__tube_find(h->e, "q", 1)));
    Bq__Log__JobFull f = BQ__LOG__JOB_FULL__INIT;
    Bq__Log__JobStatus ready = BQ__LOG__JOB_STATUS__INIT;
    ready.state = READY;
    f.id = 3;
    f.tube = "q";
    f.body.data = (uint8_t *)"old";
    f.body.len = 3;
    f.created_wall = INT64_MIN;
    f.status = &ready;
    rec_t r = BQ__LOG__RECORD__INIT;
    r.kind_case = BQ__LOG__RECORD__KIND_FULL;
    r.full = &f;
    apply_ok(h, pack_rec(&r), 1);
    int a = h_open(h);
    assert_true(h_job_stat_int(h, a, 3, "age") > 0);
    assert_true(h_job_stat_int(h, a, 2, "time-left") > 0);
    assert_true(h_stat(h, a, "stats-tube q\r\n", "pause-time-left") > 0);
    /* logged again and replayed, the far deadline stays far */
    h_log_clear(h->log);
    assert_int_equal(bq_engine_relog_job(h->e, 2, h->now), 0);
    harness_t *x = replay(h, h->now);
    assert_int_equal(h_job(x, 2)->state, BQ_JOB_DELAYED);
    assert_true(h_job(x, 2)->key > h->now.mono + H_S(1000000000));
    h_done(x);
    h_done(h);
}

/* ---- checkpoints and compaction helpers ---- */

/* ---- job ids after a restart (docs/binlog.md) ---- */

/* Record i, which must be an id reservation; free with rec_free(). */
static rec_t *ids_at(const harness_t *h, size_t i)
{
    rec_t *x = rec_at(h, i);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_IDS);
    assert_true(h->log->recs[i].meta);
    return x;
}

static void ids_reservations_say_used_durable_and_clean_stop(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "one");
    rec_t *x = ids_at(h, 0); /* before the first job: nothing used yet */
    assert_true(x->ids->next == 1 + BQ_ID_BLOCK && x->ids->used == 1);
    assert_false(x->ids->durable || x->ids->clean_stop);
    rec_free(x);
    h_put(h, a, 1, 0, 10, "two");
    h_cmd(h, a, "delete 2\r\n", "DELETED\r\n");
    /* an id whose put failed was never shown: not used */
    h_cmd(h, a, "put 1 0 10 3\r\nabcX\r\n", "EXPECTED_CRLF\r\n");
    assert_int_equal(h->e->next_id, 4);
    bq_engine_set_ids_durable(h->e, true);
    h_log_clear(h->log);
    bq_engine_log_checkpoint(h->e, h->now);
    x = ids_at(h, 0);
    assert_true(x->ids->next == 1 + BQ_ID_BLOCK && x->ids->used == 3 && x->ids->durable);
    assert_false(x->ids->clean_stop || h->log->recs[0].sync);
    rec_free(x);
    bq_engine_log_clean_stop(h->e);
    x = ids_at(h, 1);
    assert_true(x->ids->next == 1 + BQ_ID_BLOCK && x->ids->used == 3 && x->ids->clean_stop);
    assert_false(h->log->recs[1].sync);
    rec_free(x);
    check_entries(h);
    h_done(h);
}

/* The next id a fresh engine gives after replaying src's log and resuming
 * with may_continue. */
static uint64_t next_after(const harness_t *src, bool may_continue)
{
    harness_t *r = replay(src, src->now);
    bq_engine_resume_ids(r->e, may_continue);
    int c = h_open(r);
    uint64_t id = h_put(r, c, 1, 0, 10, "next");
    h_done(r);
    return id;
}

static void ids_continue_after_a_clean_stop(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    for (int i = 0; i < 3; i++)
        h_put(h, a, 1, 0, 10, "job");
    h_cmd(h, a, "delete 3\r\n", "DELETED\r\n");
    h_cmd(h, a, "put 1 0 10 1\r\nxy\r\n", "EXPECTED_CRLF\r\n"); /* takes id 4 */
    /* a crash (no marker): past the reservation */
    assert_int_equal(next_after(h, true), 1 + BQ_ID_BLOCK);
    bq_engine_log_clean_stop(h->e);
    /* a clean stop: after the highest logged id, as beanstalkd (4 was never shown) */
    assert_int_equal(next_after(h, true), 4);
    /* unless the node may not continue (a cluster, skipped damage) */
    assert_int_equal(next_after(h, false), 1 + BQ_ID_BLOCK);
    h_done(h);
}

static void ids_continue_after_a_crash_of_a_durable_writer(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    bq_engine_set_ids_durable(h->e, true);
    bq_engine_log_checkpoint(h->e, h->now);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "one");
    h_put(h, a, 1, 0, 10, "two");
    assert_int_equal(next_after(h, true), 3);
    assert_int_equal(next_after(h, false), 1 + BQ_ID_BLOCK);
    h_done(h);
}

/* Only the last reservation applied decides, and a jump is never undone:
 * the ids it skipped count as shown. */
static void ids_last_reservation_decides_and_jumps_stay(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(1, "q", READY, 5, "one"), 1);
    apply_ok(h, ids_blob_full(1 + BQ_ID_BLOCK, 2, false, true), 1);
    assert_true(bq_engine_ids_settled(h->e));
    /* a later run's opening reservation, not durable, then it crashed */
    apply_ok(h, ids_blob_full(2, 2, false, false), 2);
    assert_false(bq_engine_ids_settled(h->e));
    bq_engine_resume_ids(h->e, true);
    assert_int_equal(h->e->next_id, 1 + BQ_ID_BLOCK);
    /* that run now stops cleanly without a put: it must not go back to 2 */
    h_log_clear(h->log);
    bq_engine_log_checkpoint(h->e, h->now);
    bq_engine_log_clean_stop(h->e);
    harness_t *r = replay(h, h->now);
    bq_engine_resume_ids(r->e, true);
    assert_int_equal(r->e->next_id, 1 + BQ_ID_BLOCK);
    /* a reservation of an older version (no used, no flags) never settles */
    apply_ok(r, ids_blob(1 + BQ_ID_BLOCK), 3);
    assert_false(bq_engine_ids_settled(r->e));
    h_done(r);
    h_done(h);
}

/* Ids an import declares used (beanstalkd showed them) stay used. */
static void ids_declared_used_stay_used(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    apply_ok(h, full_blob(3, "q", READY, 5, "three"), 1);
    apply_ok(h, ids_blob_full(10, 10, false, true), 1);
    bq_engine_resume_ids(h->e, true);
    int a = h_open(h);
    assert_int_equal(h_put(h, a, 1, 0, 10, "next"), 10);
    apply_bad(h, ids_blob_full(5, (uint64_t)INT64_MAX + 1, false, false));
    h_done(h);
}

static void checkpoint_logs_ids_and_every_paused_tube(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    bq_engine_log_checkpoint(h->e, h->now);
    assert_int_equal(h->log->n, 1);
    rec_t *x = rec_at(h, 0);
    assert_true(x->kind_case == BQ__LOG__RECORD__KIND_IDS && x->ids->next == 1);
    rec_free(x);
    int a = h_open(h);
    h_put(h, a, 1, 0, 10, "x");
    h_cmd(h, a, "use p1\r\n", "USING p1\r\n");
    h_cmd(h, a, "watch p2\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "watch p3\r\n", "WATCHING 3\r\n");
    h_cmd(h, a, "pause-tube p1 30\r\n", "PAUSED\r\n");
    h_advance(h, H_S(1));
    h_cmd(h, a, "pause-tube p2 40\r\n", "PAUSED\r\n");
    h_cmd(h, a, "pause-tube p3 1\r\n", "PAUSED\r\n");
    h_advance(h, H_S(2)); /* p3's pause is over */
    h_log_clear(h->log);
    bq_engine_log_checkpoint(h->e, h->now);
    assert_int_equal(h->log->n, 3);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < h->log->n; i++) {
        assert_false(h->log->recs[i].sync);
        x = rec_at(h, i);
        if (i == 0) {
            assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_IDS);
            assert_true(x->ids->next == h->e->id_limit && x->ids->next == 1 + BQ_ID_BLOCK);
        } else {
            assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_PAUSE);
            assert_true(h->log->recs[i].meta); /* restated, not a command's */
            int k = strcmp(x->pause->tube, "p1") == 0 ? 0 : 1;
            assert_false(seen[k]);
            seen[k] = true;
            const bq_tube_t *t = bq__tube_find(h->e, x->pause->tube, strlen(x->pause->tube));
            assert_non_null(t);
            assert_true(x->pause->pause_ns == t->pause_ns);
            assert_true(x->pause->unpause_wall == h_wall_of(h, t->unpause_at));
            assert_true(x->pause->pause_ns == H_S(k ? 40 : 30));
        }
        rec_free(x);
    }
    assert_true(seen[0] && seen[1]);
    check_entries(h);
    h_done(h);
}

static void relog_job_logs_full_record_with_prev_file(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_put(h, a, 3, 0, 10, "moved"); /* file 1 */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "moved"));
    h_log_clear(h->log);
    h->log->file = 6;
    assert_int_equal(bq_engine_relog_job(h->e, 1, h->now), 0);
    assert_int_equal(h->log->n, 1);
    const h_record_t *r = &h->log->recs[0];
    assert_true(r->full && r->job_id == 1 && r->prev_file == 1 && r->room >= r->len);
    rec_t *x = rec_at(h, 0);
    assert_int_equal(x->kind_case, BQ__LOG__RECORD__KIND_FULL);
    assert_memory_equal(x->full->body.data, "moved", 5);
    expect_status(x->full->status, READY, 3, 0, 1, 0, 0, 0, 0); /* reserved: ready */
    rec_free(x);
    assert_int_equal(h_job(h, 1)->file, 6);
    /* later records of the job name its new segment */
    h->log->file = 7;
    h_cmd(h, a, "release 1 3 0\r\n", "RELEASED\r\n");
    assert_int_equal(h->log->recs[1].prev_file, 6);
    assert_int_equal(h_job(h, 1)->file, 6);
    /* unknown job, and no room: nothing logged */
    assert_int_equal(bq_engine_relog_job(h->e, 2, h->now), -1);
    h->log->grants = 0;
    assert_int_equal(bq_engine_relog_job(h->e, 1, h->now), -1);
    h->log->grants = -1;
    assert_int_equal(h->log->n, 2);
    assert_int_equal(h_job(h, 1)->file, 6);
    check_entries(h);
    h_done(h);
}

static void count_file(void *arg, uint32_t file)
{
    unsigned *counts = arg;
    assert_true(file < 8);
    counts[file]++;
}

static void file_jobs_finds_the_jobs_of_a_segment(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    uint32_t expect[41] = {0};
    for (uint64_t id = 1; id <= 40; id++) {
        h->log->file = 1 + (uint32_t)(id % 3);
        assert_int_equal(h_put(h, a, 1, 0, 10, "j"), id);
        expect[id] = h->log->file;
    }
    h_cmd(h, a, "delete 4\r\n", "DELETED\r\n");
    h_cmd(h, a, "delete 5\r\n", "DELETED\r\n");
    expect[4] = expect[5] = 0;
    h->log->file = 4;
    for (uint64_t id = 10; id <= 12; id++) {
        assert_int_equal(bq_engine_relog_job(h->e, id, h->now), 0);
        expect[id] = 4;
    }
    unsigned counts[8] = {0};
    bq_engine_each_job_file(h->e, count_file, counts);
    for (uint32_t file = 1; file <= 5; file++) {
        bool found[41] = {false};
        unsigned n = 0;
        size_t cursor = 0;
        uint64_t ids[3];
        while (cursor < bq_engine_scan_end(h->e)) {
            size_t got = bq_engine_file_jobs(h->e, file, &cursor, ids, 3);
            assert_true(got <= 3);
            for (size_t k = 0; k < got; k++) {
                assert_true(ids[k] >= 1 && ids[k] <= 40);
                assert_int_equal(expect[ids[k]], file);
                assert_false(found[ids[k]]);
                found[ids[k]] = true;
                n++;
            }
        }
        unsigned want = 0;
        for (int id = 1; id <= 40; id++)
            want += expect[id] == file;
        assert_int_equal(n, want);
        assert_int_equal(counts[file], want);
    }
    h_done(h);
}

static void live_log_bytes_goes_back_to_zero(void **state)
{
    (void)state;
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    assert_int_equal(bq_engine_live_log_bytes(h->e), 0);
    h_put(h, a, 1, 0, 10, "12345");
    h_cmd(h, a, "use longer-name\r\n", "USING longer-name\r\n");
    h_put(h, a, 1, 5, 10, "x");
    uint64_t live = bq_engine_live_log_bytes(h->e);
    assert_int_equal(live, (5 + 2 + 7 + 128) + (1 + 2 + 11 + 128));
    assert_int_equal(bq_engine_relog_job(h->e, 1, h->now), 0);
    assert_int_equal(bq_engine_live_log_bytes(h->e), live);
    /* the same on a replayed engine, and both drop to 0 */
    harness_t *r = replay(h, h->now);
    assert_int_equal(bq_engine_live_log_bytes(r->e), live);
    h_cmd(h, a, "delete 1\r\n", "DELETED\r\n");
    h_cmd(h, a, "delete 2\r\n", "DELETED\r\n");
    assert_int_equal(bq_engine_live_log_bytes(h->e), 0);
    apply_ok(r, raw_blob(h->log->recs[h->log->n - 2].data, h->log->recs[h->log->n - 2].len), 1);
    apply_ok(r, raw_blob(h->log->recs[h->log->n - 1].data, h->log->recs[h->log->n - 1].len), 1);
    assert_int_equal(bq_engine_live_log_bytes(r->e), 0);
    assert_int_equal(r->e->jobs.len, 0);
    h_done(r);
    h_done(h);
}

/* ---- the seed corpus of tests/fuzz/fuzz_binlog.c ---- */

/* With BQ_BINLOG_SEED_DIR set, main() writes fuzz_binlog's seed corpus into
 * that directory instead of running the tests: segments of the records that
 * real commands emit (every kind), single records, records that apply must
 * refuse (with valid frames), and damaged segments. */

#define SEED_MAX 4000
#define SEED_FRAMES 128

typedef struct seed {
    uint8_t buf[SEED_MAX];
    size_t len;
    size_t at[SEED_FRAMES]; /* offset of each frame */
    size_t nframes;
} seed_t;

static void seed_frame(seed_t *s, const uint8_t *p, size_t n)
{
    assert_true(s->len + BQ_FRAME_HEADER + n <= SEED_MAX && s->nframes < SEED_FRAMES);
    s->at[s->nframes++] = s->len;
    memcpy(s->buf + s->len + BQ_FRAME_HEADER, p, n);
    bq_frame_header(s->buf + s->len, 100 + s->nframes, 0, p, (uint32_t)n);
    s->len += BQ_FRAME_HEADER + n;
}

/* Starts s with a segment prefix (or nothing). */
static void seed_start(seed_t *s, bool prefix)
{
    memset(s, 0, sizeof *s);
    if (!prefix)
        return;
    Bq__Log__SegmentHeader sh = BQ__LOG__SEGMENT_HEADER__INIT;
    sh.seq = 1;
    sh.first_lsn = 101;
    sh.node_id = "seed";
    sh.created_wall = H_WALL0;
    uint8_t hdr[128];
    size_t n = bq__log__segment_header__pack(&sh, hdr);
    s->len = bq_segment_prefix(s->buf, hdr, (uint32_t)n);
}

/* A segment of every record in h's log, then a zero tail. */
static void seed_of(seed_t *s, const harness_t *h, bool prefix)
{
    seed_start(s, prefix);
    for (size_t i = 0; i < h->log->n; i++)
        seed_frame(s, h->log->recs[i].data, h->log->recs[i].len);
    s->len += s->len + BQ_FRAME_HEADER <= SEED_MAX ? BQ_FRAME_HEADER : 0;
}

static void seed_save(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Saves s's first n bytes with byte `at` XORed with x (no change for x 0). */
static void seed_save_damaged(const char *dir, const char *name, seed_t *s, size_t n, size_t at,
                              uint8_t x)
{
    s->buf[at] ^= x;
    seed_save(dir, name, s->buf, n);
    s->buf[at] ^= x;
}

/* Every record kind from commands, in one short history. */
static harness_t *seed_lifecycle(void)
{
    harness_t *h = h_new_logged(0);
    int a = h_open(h);
    h_cmd(h, a, "use life\r\n", "USING life\r\n");
    h_put(h, a, 5, 0, 10, "ready");
    h_put(h, a, 6, 30, 10, "delayed");
    h_put(h, a, 7, 0, 10, "to bury");
    h_cmd(h, a, "reserve-job 3\r\n", h_job_reply("RESERVED", 3, "to bury"));
    h_cmd(h, a, "bury 3 70\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", 1, "ready"));
    h_cmd(h, a, "release 1 4 0\r\n", "RELEASED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", 1, "ready"));
    h_cmd(h, a, "release 1 4 20\r\n", "RELEASED\r\n");
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    h_cmd(h, a, "kick-job 2\r\n", "KICKED\r\n");
    h_cmd(h, a, "pause-tube life 60\r\n", "PAUSED\r\n");
    h_cmd(h, a, "delete 3\r\n", "DELETED\r\n");
    h_put(h, a, 8, 0, 10, "last");
    return h;
}

static void seed_commands(const char *dir)
{
    seed_t s;
    harness_t *h = h_new_logged(0);
    int a = h_open(h), b = h_open(h);
    h_put(h, a, 5, 0, 10, "hello");
    seed_of(&s, h, true);
    seed_save(dir, "put.seg", s.buf, s.len);
    h_done(h);
    h = h_new_logged(0);
    a = h_open(h);
    b = h_open(h);
    scenario(h, a, b);
    seed_of(&s, h, true);
    seed_save(dir, "scenario.seg", s.buf, s.len);
    h->log->file = 9;
    h_log_clear(h->log);
    bq_engine_log_checkpoint(h->e, h->now);
    for (uint64_t id = 1; id <= 14; id++)
        bq_engine_relog_job(h->e, id, h->now);
    seed_of(&s, h, true);
    seed_save(dir, "checkpoint-relog.seg", s.buf, s.len);
    h_done(h);
    h = seed_lifecycle();
    seed_of(&s, h, false);
    seed_save(dir, "lifecycle.body", s.buf, s.len);
    seed_of(&s, h, true);
    seed_save(dir, "lifecycle.seg", s.buf, s.len);
    size_t mid = s.at[s.nframes / 2], last = s.at[s.nframes - 1];
    size_t end = s.len - BQ_FRAME_HEADER;
    seed_save(dir, "torn-payload.seg", s.buf, end - 3);
    seed_save(dir, "torn-header.seg", s.buf, last + 10);
    seed_save_damaged(dir, "crc-flip.seg", &s, s.len, mid + BQ_FRAME_HEADER + 2, 0x10);
    seed_save_damaged(dir, "lsn-flip.seg", &s, s.len, mid + 9, 0x01);
    seed_save_damaged(dir, "len-huge.seg", &s, s.len, mid + 3, 0xF0);
    seed_save_damaged(dir, "len-plus-one.seg", &s, s.len, mid, 0x01);
    memset(s.buf + mid, 0, 4);
    seed_save(dir, "len-zero.seg", s.buf, s.len);
    memset(s.buf + mid, 0, BQ_FRAME_HEADER);
    seed_save(dir, "zero-middle.seg", s.buf, s.len);
    seed_of(&s, h, true);
    seed_save_damaged(dir, "bad-magic.seg", &s, s.len, 2, 0x20);
    seed_save_damaged(dir, "bad-version.seg", &s, s.len, 8, 0x02);
    seed_save_damaged(dir, "bad-header-len.seg", &s, s.len, 13, 0x10);
    seed_save_damaged(dir, "bad-header-crc.seg", &s, s.len, BQ_SEGMENT_PREFIX_FIXED + 1, 0x04);
    seed_save(dir, "short-prefix.seg", s.buf, 15);
    seed_save(dir, "short-header.seg", s.buf, BQ_SEGMENT_PREFIX_FIXED + 5);
    h_done(h);
}

/* Frames of records that apply must refuse, then one it must accept. */
static void seed_refused(const char *dir)
{
    blob_t bad[13];
    size_t n = 0;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    bad[n++] = full_blob_st(20, "q", "state 0", &st);
    bad[n++] = full_blob(0, "q", READY, 1, "id 0");
    bad[n++] = full_blob(21, "-x", READY, 1, "bad tube");
    st.state = 4;
    bad[n++] = update_blob(20, &st);
    bad[n++] = delete_blob(0);
    bad[n++] = pause_blob("q", 0, H_WALL0 + H_S(60));
    bad[n++] = delete_blob(5); /* fuzz_binlog's reserved job */
    bad[n++] = full_blob(5, "q", BURIED, 1, "reserved");
    st.state = READY;
    bad[n++] = update_blob(5, &st);
    bad[n++] = raw_blob("\x32\x02\x08\x01", 4); /* unknown kind */
    bad[n++] = raw_blob("\x0a\x05\x08\x01", 4); /* not protobuf */
    bad[n++] = full_blob(22, "q", DELAYED, 3, "accepted");
    bad[n++] = pause_blob("q", H_S(60), H_WALL0 + H_S(60));
    seed_t s;
    seed_start(&s, true);
    for (size_t i = 0; i < n; i++) {
        seed_frame(&s, bad[i].data, bad[i].len);
        free(bad[i].data);
    }
    seed_save(dir, "refused.seg", s.buf, s.len);
}

/* Single records, for the whole input applied as one record. */
static void seed_records(const char *dir)
{
    uint8_t rec[160];
    seed_save(dir, "unknown-fields.rec", rec, unknown_fields_record(rec));
    seed_t s;
    seed_start(&s, false);
    seed_frame(&s, rec, unknown_fields_record(rec));
    seed_save(dir, "unknown-fields.body", s.buf, s.len);
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = BURIED;
    st.bury_seq = 3;
    st.buries = 1;
    blob_t b[] = {full_blob(9, "raw", DELAYED, 3, "raw record"), update_blob(9, &st),
                  delete_blob(9), pause_blob("raw", H_S(30), H_WALL0 + H_S(30)), ids_blob(77)};
    static const char *const names[] = {"full.rec", "update.rec", "delete.rec", "pause.rec",
                                        "ids.rec"};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        seed_save(dir, names[i], b[i].data, b[i].len);
        free(b[i].data);
    }
    uint8_t zeros[100] = {0};
    seed_save(dir, "zeros", zeros, sizeof zeros);
}

static int write_seeds(const char *dir)
{
    seed_commands(dir);
    seed_refused(dir);
    seed_records(dir);
    printf("seeds written to %s\n", dir);
    return 0;
}

int main(void)
{
    if (getenv("BQ_BINLOG_SEED_DIR"))
        return write_seeds(getenv("BQ_BINLOG_SEED_DIR"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(record_put_logs_id_reservation_then_full_job),
        cmocka_unit_test(record_put_delayed_logs_wall_clock_deadline),
        cmocka_unit_test(record_new_id_block_is_reserved_before_use),
        cmocka_unit_test(record_delete_in_every_state),
        cmocka_unit_test(record_release_keeps_new_priority_and_delay),
        cmocka_unit_test(record_bury_logs_fifo_position),
        cmocka_unit_test(record_kick_of_buried_and_of_delayed_jobs),
        cmocka_unit_test(record_kick_job_of_buried_and_of_delayed_job),
        cmocka_unit_test(record_pause_tube),
        cmocka_unit_test(record_nothing_for_changes_that_are_not_durable),
        cmocka_unit_test(refused_room_put),
        cmocka_unit_test(refused_room_put_while_starting_to_drain),
        cmocka_unit_test(refused_id_reservation_put_answers_draining),
        cmocka_unit_test(refused_room_delete_in_every_state),
        cmocka_unit_test(refused_room_release_bury_kick_job_pause),
        cmocka_unit_test(refused_room_kick_counts_only_kicked_jobs),
        cmocka_unit_test(replay_reproduces_durable_state),
        cmocka_unit_test(replay_after_restart_keeps_wall_clock_times),
        cmocka_unit_test(replay_twice_is_idempotent),
        cmocka_unit_test(replay_reserve_job_of_buried_job_is_buried_again),
        cmocka_unit_test(replay_of_a_pause_that_ended_is_ignored),
        cmocka_unit_test(replay_of_an_unpause_ends_the_pause_before_it),
        cmocka_unit_test(replay_pause_logged_before_its_jobs_keeps_the_pause),
        cmocka_unit_test(replay_full_record_of_the_only_job_keeps_the_pause),
        cmocka_unit_test(apply_refuses_garbage),
        cmocka_unit_test(apply_refuses_nonsense_records),
        cmocka_unit_test(apply_ignores_unknown_fields),
        cmocka_unit_test(apply_update_or_delete_of_unknown_id_is_ignored),
        cmocka_unit_test(apply_full_replaces_an_existing_job),
        cmocka_unit_test(apply_full_record_with_empty_body),
        cmocka_unit_test(apply_huge_ids_never_lead_to_a_reused_id),
        cmocka_unit_test(apply_times_far_from_now_stay_in_range),
        cmocka_unit_test(ids_reservations_say_used_durable_and_clean_stop),
        cmocka_unit_test(ids_continue_after_a_clean_stop),
        cmocka_unit_test(ids_continue_after_a_crash_of_a_durable_writer),
        cmocka_unit_test(ids_last_reservation_decides_and_jumps_stay),
        cmocka_unit_test(ids_declared_used_stay_used),
        cmocka_unit_test(checkpoint_logs_ids_and_every_paused_tube),
        cmocka_unit_test(relog_job_logs_full_record_with_prev_file),
        cmocka_unit_test(file_jobs_finds_the_jobs_of_a_segment),
        cmocka_unit_test(live_log_bytes_goes_back_to_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
