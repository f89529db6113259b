/* Fuzz target of the binlog decoders: what replay and standbys read from a
 * disk or a peer, and turn into engine state.
 *
 * The input is the content of a segment file. bq_segment_prefix_decode()
 * runs on it first; when the prefix is valid, frames start after it, else at
 * offset 0 (a bare segment body). Frames are decoded one after another with
 * bq_frame_decode() until it stops, and every OK frame's payload goes to
 * bq_engine_apply() on a real engine (binlog hooks on, as at start-up). Then
 * the whole input is applied once more as a single record. A second engine
 * then gets the payloads of the same frames cut by their length fields alone,
 * checksums ignored, so that mutated inputs reach sequences of records. All
 * decoding reads an exact-size heap copy, so ASan reports any read past the
 * end.
 *
 * The engine starts with one applied job (id 5, tube `default`) that a
 * client connection holds reserved, so records about a reserved job are
 * reached; engine_harness.h (tests/unit) drives it and checks invariants.
 *
 * Invariants (abort on violation):
 * - the segment prefix and every frame status agree with an independent
 *   decoder (bitwise CRC-32C), a valid prefix or frame re-encodes to the
 *   same bytes, and decoding never reads past the buffer;
 * - bq_engine_apply() accepts exactly the records an independent check of
 *   the schema's rules accepts (a kind; ids not 0; tube names valid; a
 *   status with a known state; a pause longer than 0; no record about a
 *   reserved job), refuses the rest with BQ_EBADRECORD and then leaves the
 *   engine exactly as it was (h_dump), and never logs anything;
 * - an accepted record has its documented effect (the job, its status and
 *   body, deletion, the pause, the id counter), and nothing else happens to
 *   updates or deletes of unknown jobs or to pauses that are over;
 * - after each apply the engine's invariants hold (h_check);
 * - at the end, every job logged again (bq_engine_relog_job) plus a
 *   checkpoint, applied to a fresh engine, reproduces the durable state;
 *   stats-job answers for every job; a put gets an id above every job and
 *   every applied id reservation; the timers run; deleting every job leaves
 *   no job and bq_engine_live_log_bytes() at 0; nothing leaks.
 *
 */
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"

/* The cmocka assertions engine_harness.h uses, as invariant checks. */
#define assert_true(c) BQF_CHECK((c), "%s", #c)
#define assert_false(c) BQF_CHECK(!(c), "!(%s)", #c)
#define assert_non_null(p) BQF_CHECK((p) != NULL, "%s is NULL", #p)
#define assert_null(p) BQF_CHECK((p) == NULL, "%s is not NULL", #p)
#define assert_int_equal(a, b)                                                                     \
    bqf_int_equal((uintmax_t)(a), (uintmax_t)(b), #a, #b, __FILE__, __LINE__)
#define _assert_int_equal(a, b, file, line)                                                        \
    bqf_int_equal((uintmax_t)(a), (uintmax_t)(b), #a, #b, file, line)
#define assert_ptr_equal(a, b) BQF_CHECK((const void *)(a) == (const void *)(b), "%s != %s", #a, #b)
#define assert_memory_equal(a, b, n) BQF_CHECK(memcmp((a), (b), (n)) == 0, "%s != %s", #a, #b)
#define assert_string_equal(a, b) BQF_CHECK(strcmp((a), (b)) == 0, "%s != %s", #a, #b)
#define _assert_string_equal(a, b, file, line)                                                     \
    do {                                                                                           \
        if (strcmp((a), (b)) != 0)                                                                 \
            bqf_fail(file, line, "\"%s\" != \"%s\"", (a), (b));                                    \
    } while (0)
#define fail_msg(...) bqf_fail(__FILE__, __LINE__, __VA_ARGS__)
#define print_message(...) fprintf(stderr, __VA_ARGS__)
#define skip() abort()

static inline void bqf_int_equal(uintmax_t a, uintmax_t b, const char *sa, const char *sb,
                                 const char *file, int line)
{
    if (a != b)
        bqf_fail(file, line, "%s == %s: %ju != %ju", sa, sb, a, b);
}

#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"
#include "tests/support/frame_oracle.h"
#include "tests/unit/engine_harness.h"

#define SEGMENT 3                    /* the segment number applied records come from */
#define RESERVED_ID 5                /* the job the client holds */
#define FINAL_STATS_JOBS 64          /* stats-job for at most this many jobs */
#define ID_MAX ((uint64_t)INT64_MAX) /* larger ids, reservations, bury seqs are refused */
#define TIME_SANE (INT64_C(1) << 62) /* a saturated time is farther than this */

typedef Bq__Log__Record rec_t;

/* ---- an independent decoder of the byte layout ---- */

static bq_segment_status_t ref_prefix(const uint8_t *p, size_t n)
{
    if (n < BQ_SEGMENT_PREFIX_FIXED)
        return BQ_SEGMENT_SHORT;
    if (memcmp(p, BQ_SEGMENT_MAGIC, 8) != 0)
        return BQ_SEGMENT_BAD_MAGIC;
    if (oracle_le32(p + 8) != BQ_SEGMENT_VERSION)
        return BQ_SEGMENT_BAD_VERSION;
    uint32_t len = oracle_le32(p + 12);
    if (len > BQ_SEGMENT_HEADER_MAX)
        return BQ_SEGMENT_BAD_HEADER;
    if (n - BQ_SEGMENT_PREFIX_FIXED < len)
        return BQ_SEGMENT_SHORT;
    if (oracle_crc32c(0, p + BQ_SEGMENT_PREFIX_FIXED, len) != oracle_le32(p + 16))
        return BQ_SEGMENT_BAD_HEADER;
    return BQ_SEGMENT_OK;
}

static bq_frame_status_t ref_frame(const uint8_t *p, size_t n)
{
    size_t zeros = 0;
    while (zeros < n && zeros < BQ_FRAME_HEADER && p[zeros] == 0)
        zeros++;
    if (n > 0 && zeros == (n < BQ_FRAME_HEADER ? n : BQ_FRAME_HEADER))
        return BQ_FRAME_END;
    if (n < BQ_FRAME_HEADER)
        return BQ_FRAME_SHORT;
    uint32_t len = oracle_le32(p);
    if (len == 0 || len > BQ_FRAME_MAX_PAYLOAD)
        return BQ_FRAME_BAD_LEN;
    if (n - BQ_FRAME_HEADER < len)
        return BQ_FRAME_SHORT;
    uint32_t crc = oracle_crc32c(0, p, 4);
    crc = oracle_crc32c(crc, p + 8, 16);
    crc = oracle_crc32c(crc, p + BQ_FRAME_HEADER, len);
    return crc == oracle_le32(p + 4) ? BQ_FRAME_OK : BQ_FRAME_BAD_CRC;
}

/* Decodes the prefix of buf[0..n) (an exact-size copy); returns where the
 * frames start. */
static size_t check_prefix(const uint8_t *buf, size_t n)
{
    const uint8_t *hdr = NULL;
    uint32_t hdr_len = 0;
    size_t prefix_len = 0;
    bq_segment_status_t st = bq_segment_prefix_decode(buf, n, &hdr, &hdr_len, &prefix_len);
    BQF_CHECK(st == ref_prefix(buf, n), "segment prefix: %s, expected %s",
              bq_segment_status_name(st), bq_segment_status_name(ref_prefix(buf, n)));
    if (st != BQ_SEGMENT_OK)
        return 0;
    BQF_CHECK(hdr == buf + BQ_SEGMENT_PREFIX_FIXED && hdr_len == oracle_le32(buf + 12) &&
                  prefix_len == BQ_SEGMENT_PREFIX_FIXED + (size_t)hdr_len && prefix_len <= n,
              "segment prefix: wrong header position or length");
    uint8_t *again = malloc(prefix_len);
    BQF_CHECK(again != NULL, "out of memory");
    BQF_CHECK(bq_segment_prefix(again, hdr, hdr_len) == prefix_len &&
                  memcmp(again, buf, prefix_len) == 0,
              "segment prefix does not re-encode to the same bytes");
    free(again);
    Bq__Log__SegmentHeader *sh = bq__log__segment_header__unpack(NULL, hdr_len, hdr);
    if (sh)
        bq__log__segment_header__free_unpacked(sh, NULL);
    return prefix_len;
}

/* ---- what bq_engine_apply must accept ---- */

static bool name_ok(const char *s)
{
    static const char extra[] = "-+/;.$_()";
    size_t n = strlen(s);
    if (n < 1 || n > 200 || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !memchr(extra, c, sizeof extra - 1))
            return false;
    }
    return true;
}

static bool status_ok(const Bq__Log__JobStatus *st)
{
    return st && st->bury_seq <= ID_MAX && st->state >= BQ__LOG__JOB_STATE__READY &&
           st->state <= BQ__LOG__JOB_STATE__BURIED;
}

static bool is_reserved(const harness_t *h, uint64_t id)
{
    const bq_job_t *j = bq__jobtab_find(&h->e->jobs, id);
    return j && j->state == BQ_JOB_RESERVED;
}

/* True when apply must accept r (NULL: it did not decode). */
static bool acceptable(const harness_t *h, const rec_t *r)
{
    if (!r)
        return false;
    switch (r->kind_case) {
    case BQ__LOG__RECORD__KIND_FULL:
        return r->full->id && r->full->id <= ID_MAX && r->full->tube && name_ok(r->full->tube) &&
               status_ok(r->full->status) && r->full->body.len <= BQ_MAX_JOB_SIZE_LIMIT &&
               !is_reserved(h, r->full->id);
    case BQ__LOG__RECORD__KIND_UPDATE:
        return r->update->id && status_ok(r->update->status) && !is_reserved(h, r->update->id);
    case BQ__LOG__RECORD__KIND_DELETE:
        return r->delete_->id && !is_reserved(h, r->delete_->id);
    case BQ__LOG__RECORD__KIND_PAUSE:
        return r->pause->tube && name_ok(r->pause->tube) && r->pause->pause_ns > 0;
    case BQ__LOG__RECORD__KIND_IDS:
        return r->ids->next <= ID_MAX;
    default:
        return false;
    }
}

/* True when `mono` is what converting wall-clock time `wall` at `now` may
 * give: exactly now.mono + (wall - now.wall) when that fits in int64, else
 * saturated to a time more than 2^62 ns (146 years) away on the same side. */
static bool converts_to(bq_now_t now, int64_t wall, int64_t mono)
{
    __int128 exact = (__int128)now.mono + wall - now.wall;
    if (exact > INT64_MAX)
        return mono > now.mono + TIME_SANE;
    if (exact < INT64_MIN)
        return mono < now.mono - TIME_SANE;
    return mono == (int64_t)exact;
}

/* ---- the effect of an accepted record ---- */

static void check_status(const harness_t *h, const bq_job_t *j, const Bq__Log__JobStatus *st)
{
    BQF_CHECK(j->pri == st->pri && j->delay == st->delay && j->reserves == st->reserves &&
                  j->timeouts == st->timeouts && j->releases == st->releases &&
                  j->buries == st->buries && j->kicks == st->kicks,
              "job %" PRIu64 ": priority, delay or counters not as recorded", j->id);
    switch (st->state) {
    case BQ__LOG__JOB_STATE__READY:
        BQF_CHECK(j->state == BQ_JOB_READY, "job %" PRIu64 " not ready", j->id);
        break;
    case BQ__LOG__JOB_STATE__DELAYED:
        BQF_CHECK(j->state == BQ_JOB_DELAYED && converts_to(h->now, st->deadline_wall, j->key),
                  "job %" PRIu64 " not delayed until its recorded deadline", j->id);
        break;
    default:
        BQF_CHECK(j->state == BQ_JOB_BURIED && j->key == (int64_t)st->bury_seq,
                  "job %" PRIu64 " not buried at its recorded position", j->id);
        break;
    }
}

static void check_full(const harness_t *h, const Bq__Log__JobFull *f)
{
    const bq_job_t *j = bq__jobtab_find(&h->e->jobs, f->id);
    BQF_CHECK(j != NULL, "full record: job %" PRIu64 " missing", f->id);
    BQF_CHECK(strcmp(j->tube->name, f->tube) == 0, "full record: wrong tube");
    BQF_CHECK(j->body_size == f->body.len + 2 && memcmp(j->body, f->body.data, f->body.len) == 0 &&
                  memcmp(j->body + f->body.len, "\r\n", 2) == 0,
              "full record: wrong body");
    BQF_CHECK(j->ttr == (f->ttr ? f->ttr : 1) && j->created_wall == f->created_wall &&
                  j->file == SEGMENT,
              "full record: wrong ttr, creation time or segment");
    BQF_CHECK(h->e->next_id > f->id, "full record: next id %" PRIu64 " not above %" PRIu64,
              h->e->next_id, f->id);
    check_status(h, j, f->status);
}

static bool dump_equal(const harness_t *h, const char *before)
{
    char *after = h_dump(h, 0);
    bool same = strcmp(before, after) == 0;
    if (!same)
        fprintf(stderr, "before:\n%s\nafter:\n%s\n", before, after);
    free(after);
    return same;
}

typedef struct before {
    char *dump;
    uint64_t next_id;
    size_t jobs;
    bool job_existed;  /* the record's job */
    bool tube_existed; /* a pause record's tube */
} before_t;

static void check_effect(const harness_t *h, const rec_t *r, const before_t *b)
{
    const bq_engine_t *e = h->e;
    switch (r->kind_case) {
    case BQ__LOG__RECORD__KIND_FULL:
        check_full(h, r->full);
        BQF_CHECK(e->jobs.len == b->jobs + !b->job_existed, "full record: job count");
        break;
    case BQ__LOG__RECORD__KIND_UPDATE: {
        const bq_job_t *j = bq__jobtab_find(&e->jobs, r->update->id);
        if (b->job_existed)
            check_status(h, j, r->update->status);
        else
            BQF_CHECK(dump_equal(h, b->dump), "update of an unknown job changed the engine");
        break;
    }
    case BQ__LOG__RECORD__KIND_DELETE:
        BQF_CHECK(!bq__jobtab_find(&e->jobs, r->delete_->id), "deleted job still there");
        BQF_CHECK(e->jobs.len == b->jobs - b->job_existed, "delete: job count");
        if (!b->job_existed)
            BQF_CHECK(dump_equal(h, b->dump), "delete of an unknown job changed the engine");
        break;
    case BQ__LOG__RECORD__KIND_PAUSE: {
        const Bq__Log__TubePause *p = r->pause;
        const bq_tube_t *t = bq__tube_find(e, p->tube, strlen(p->tube));
        BQF_CHECK((t != NULL) == b->tube_existed, "a pause created or removed a tube");
        if (p->unpause_wall <= h->now.wall)
            BQF_CHECK(dump_equal(h, b->dump), "a pause that is over changed the engine");
        else if (t)
            BQF_CHECK(t->pause_ns == p->pause_ns &&
                          converts_to(h->now, p->unpause_wall, t->unpause_at),
                      "tube %s not paused as recorded", p->tube);
        break;
    }
    default: /* ids */
        BQF_CHECK(e->next_id == (r->ids->next > b->next_id ? r->ids->next : b->next_id),
                  "id reservation: next id %" PRIu64, e->next_id);
        break;
    }
}

/* ---- applying ---- */

typedef struct world {
    harness_t *h;
    int conn;              /* the client holding job RESERVED_ID */
    uint64_t max_reserved; /* the highest id reservation applied */
} world_t;

static uint64_t record_job_id(const rec_t *r)
{
    switch (r->kind_case) {
    case BQ__LOG__RECORD__KIND_FULL:
        return r->full->id;
    case BQ__LOG__RECORD__KIND_UPDATE:
        return r->update->id;
    case BQ__LOG__RECORD__KIND_DELETE:
        return r->delete_->id;
    default:
        return 0;
    }
}

/* Applies data[0..len) (an exact-size copy) and checks the result. */
static void apply_checked(world_t *w, const uint8_t *data, size_t len)
{
    harness_t *h = w->h;
    rec_t *r = bq__log__record__unpack(NULL, len, data);
    before_t b = {h_dump(h, 0), h->e->next_id, h->e->jobs.len, false, false};
    if (r && record_job_id(r))
        b.job_existed = bq__jobtab_find(&h->e->jobs, record_job_id(r)) != NULL;
    if (r && r->kind_case == BQ__LOG__RECORD__KIND_PAUSE)
        b.tube_existed = bq__tube_find(h->e, r->pause->tube, strlen(r->pause->tube)) != NULL;
    bool ok = acceptable(h, r);
    int rc = bq_engine_apply(h->e, data, len, SEGMENT, h->now);
    h_check(h);
    BQF_CHECK(h->log->n == 0, "bq_engine_apply logged a record");
    BQF_CHECK(rc == (ok ? 0 : BQ_EBADRECORD), "apply returned %d, expected %d", rc,
              ok ? 0 : BQ_EBADRECORD);
    if (rc == 0)
        check_effect(h, r, &b);
    else
        BQF_CHECK(dump_equal(h, b.dump), "a refused record changed the engine");
    if (rc == 0 && r->kind_case == BQ__LOG__RECORD__KIND_IDS && r->ids->next > w->max_reserved)
        w->max_reserved = r->ids->next;
    free(b.dump);
    if (r)
        bq__log__record__free_unpacked(r, NULL);
}

/* Decodes frames from buf[pos..n) (an exact-size copy) and applies each. */
static void apply_frames(world_t *w, const uint8_t *buf, size_t n, size_t pos)
{
    for (;;) {
        bq_frame_t f;
        const uint8_t *payload = NULL;
        bq_frame_status_t st = bq_frame_decode(buf + pos, n - pos, &f, &payload);
        bq_frame_status_t ref = ref_frame(buf + pos, n - pos);
        BQF_CHECK(st == ref, "frame at %zu: %s, expected %s", pos, bq_frame_status_name(st),
                  bq_frame_status_name(ref));
        if (st != BQ_FRAME_OK)
            return;
        const uint8_t *p = buf + pos;
        BQF_CHECK(payload == p + BQ_FRAME_HEADER && f.len == oracle_le32(p) &&
                      f.crc == oracle_le32(p + 4) && f.lsn == oracle_le64(p + 8) &&
                      f.epoch == oracle_le64(p + 16),
                  "frame at %zu decoded wrong fields", pos);
        uint8_t hdr[BQ_FRAME_HEADER];
        bq_frame_header(hdr, f.lsn, f.epoch, payload, f.len);
        BQF_CHECK(memcmp(hdr, p, BQ_FRAME_HEADER) == 0, "frame at %zu does not re-encode", pos);
        apply_checked(w, payload, f.len);
        pos += BQ_FRAME_HEADER + (size_t)f.len;
    }
}

/* Applies the payloads of buf[pos..n) split by the frames' length fields,
 * whatever their checksums say: mutated inputs reach sequences of records
 * without fixing every CRC. */
static void apply_unchecked(world_t *w, const uint8_t *buf, size_t n, size_t pos)
{
    while (n - pos >= BQ_FRAME_HEADER) {
        uint32_t len = oracle_le32(buf + pos);
        if (len == 0 || len > n - pos - BQ_FRAME_HEADER)
            return;
        apply_checked(w, buf + pos + BQ_FRAME_HEADER, len);
        pos += BQ_FRAME_HEADER + (size_t)len;
    }
}

/* ---- the end of a run ---- */

/* Logs every job again plus a checkpoint, applies that to a fresh engine,
 * and compares the durable state. */
static void check_relog_round_trip(world_t *w)
{
    harness_t *h = w->h;
    h_log_clear(h->log);
    /* In the order of a new segment: its checkpoint first, then the jobs
     * compaction moves into it. */
    bq_engine_log_checkpoint(h->e, h->now);
    for (size_t i = 0; i < h->e->jobs.cap; i++) {
        const bq_job_t *j = h->e->jobs.slots[i];
        if (j)
            BQF_CHECK(bq_engine_relog_job(h->e, j->id, h->now) == 0, "relog failed");
    }
    harness_t *r = h_new_logged(0);
    r->now = h->now;
    for (size_t i = 0; i < h->log->n; i++) {
        const h_record_t *x = &h->log->recs[i];
        BQF_CHECK(x->room == 0 || x->len <= x->room, "record larger than the room asked");
        uint8_t *copy = malloc(x->len ? x->len : 1);
        BQF_CHECK(copy != NULL, "out of memory");
        memcpy(copy, x->data, x->len);
        int rc = bq_engine_apply(r->e, copy, x->len, x->file, r->now);
        free(copy);
        BQF_CHECK(rc == 0, "a relogged record was refused: %d", rc);
        h_check(r);
    }
    char *a = h_dump(h, H_DUMP_DURABLE), *b = h_dump(r, H_DUMP_DURABLE);
    if (strcmp(a, b) != 0)
        bqf_fail(__FILE__, __LINE__, "relogged state differs:\n%s---\n%s", a, b);
    BQF_CHECK(r->e->next_id >= h->e->next_id, "relogged ids below the engine's");
    free(a);
    free(b);
    h_done(r);
    h_log_clear(h->log);
}

static void final_checks(world_t *w)
{
    harness_t *h = w->h;
    check_relog_round_trip(w);
    size_t asked = 0;
    uint64_t max_id = 0;
    for (size_t i = 0; i < h->e->jobs.cap; i++) {
        const bq_job_t *j = h->e->jobs.slots[i];
        if (!j)
            continue;
        max_id = j->id > max_id ? j->id : max_id;
        if (asked++ < FINAL_STATS_JOBS)
            (void)h_job_stat_int(h, w->conn, j->id, "reserves");
    }
    uint64_t id = h_put(h, w->conn, 1, 0, 1, "x");
    BQF_CHECK(id > max_id && id >= w->max_reserved, "put got id %" PRIu64, id);
    h_advance(h, H_S(3600));
    for (;;) {
        const bq_job_t *j = NULL;
        for (size_t i = 0; i < h->e->jobs.cap && !j; i++)
            j = h->e->jobs.slots[i];
        if (!j)
            break;
        char cmd[64];
        snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", j->id);
        h_cmd(h, w->conn, cmd, "DELETED\r\n");
    }
    BQF_CHECK(bq_engine_live_log_bytes(h->e) == 0, "live log bytes %" PRIu64 " with no job",
              bq_engine_live_log_bytes(h->e));
}

/* A logged engine with job RESERVED_ID reserved by a client. */
static void world_init(world_t *w)
{
    w->h = h_new_logged(0);
    w->max_reserved = 0;
    harness_t *h = w->h;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    Bq__Log__JobFull f = BQ__LOG__JOB_FULL__INIT;
    rec_t r = BQ__LOG__RECORD__INIT;
    st.state = BQ__LOG__JOB_STATE__READY;
    f.id = RESERVED_ID;
    f.tube = "default";
    f.ttr = 100;
    f.created_wall = h->now.wall;
    f.body.data = (uint8_t *)"r";
    f.body.len = 1;
    f.status = &st;
    r.kind_case = BQ__LOG__RECORD__KIND_FULL;
    r.full = &f;
    uint8_t buf[64];
    size_t n = bq__log__record__pack(&r, buf);
    BQF_CHECK(bq_engine_apply(h->e, buf, n, 1, h->now) == 0, "cannot apply the first job");
    w->conn = h_open(h);
    char cmd[64], reply[64];
    snprintf(cmd, sizeof cmd, "reserve-job %d\r\n", RESERVED_ID);
    snprintf(reply, sizeof reply, "RESERVED %d 1\r\nr\r\n", RESERVED_ID);
    h_cmd(h, w->conn, cmd, reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    BQF_CHECK(buf != NULL, "out of memory");
    if (size)
        memcpy(buf, data, size);
    world_t w;
    world_init(&w);
    size_t start = check_prefix(buf, size);
    apply_frames(&w, buf, size, start);
    apply_checked(&w, buf, size);
    final_checks(&w);
    h_done(w.h);
    world_init(&w);
    apply_unchecked(&w, buf, size, start);
    final_checks(&w);
    h_done(w.h);
    free(buf);
    return 0;
}
