/* Fuzz target of the beanstalkd v7 binlog reader (protocol/beanstalkd_v7.h):
 * the input is one or more binlog files separated by the 8 bytes
 * "NEXTFILE" (a real binlog file is a valid input as it is).
 *
 * Checked for every input:
 * - feeding each file at once and feeding it in chunks of 1 to 97 bytes
 *   (the size taken from the input's length) give the same result: the same
 *   error (file, offset, message) or none, and the same jobs, field by field;
 * - every live job is well formed: a non-zero id no larger than INT64_MAX
 *   and no larger than bq_v7_max_id(), a live state, a valid tube name, a
 *   body of at least 2 bytes ending in CRLF, ttr and delay in whole seconds
 *   that fit 32 bits, wall-clock times (creation, a delayed job's deadline)
 *   not before 1970; bq_v7_jobs() lists each once, in increasing id order,
 *   and bq_v7_find() finds each;
 * - the error, if any, names a file that exists and an offset inside it,
 *   and the files cut at that offset read without error to the same jobs
 *   (the kept jobs are exactly those of the valid prefix);
 * - each job, converted with bq_v7_job_to_record() and packed, is accepted
 *   by bq_engine_apply() on a fresh engine. */
#include <string.h>

#include "fuzz.h"
#include "protocol/beanstalkd_v7.h"
#include "protocol/engine.h"
#include "protocol/parse.h"

#define SEP "NEXTFILE"
#define SEP_LEN 8
#define MAX_FILES 16

typedef struct file {
    const uint8_t *p;
    size_t len;
} file_t;

static size_t split(const uint8_t *data, size_t size, file_t *files)
{
    size_t n = 0, start = 0;
    for (size_t i = 0; i + SEP_LEN <= size && n + 1 < MAX_FILES; i++)
        if (memcmp(data + i, SEP, SEP_LEN) == 0) {
            files[n++] = (file_t){data + start, i - start};
            start = i + SEP_LEN;
            i += SEP_LEN - 1;
        }
    files[n++] = (file_t){data + start, size - start};
    return n;
}

/* Reads files[0..n) in chunks of `chunk` bytes (0: whole files); the last
 * file is cut at `cut` bytes when cut != SIZE_MAX. */
static bq_v7_reader_t *read_all(const file_t *files, size_t n, size_t chunk, size_t cut)
{
    bq_v7_reader_t *r = bq_v7_reader_new();
    BQF_CHECK(r != NULL, "out of memory");
    for (size_t f = 0; f < n; f++) {
        size_t len = f + 1 == n && cut != SIZE_MAX ? cut : files[f].len;
        size_t step = chunk ? chunk : (len ? len : 1);
        bq_v7_begin_file(r, f);
        int rc = 0;
        for (size_t off = 0; off < len && rc == 0 && !bq_v7_file_done(r); off += step)
            rc = bq_v7_feed(r, files[f].p + off, len - off < step ? len - off : step);
        if (rc == 0)
            rc = bq_v7_end_file(r);
        BQF_CHECK(rc == 0 || rc == BQ_V7_ECORRUPT, "unexpected result %d", rc);
        BQF_CHECK((rc != 0) == (bq_v7_error(r) != NULL), "result and error disagree");
        if (rc)
            break;
    }
    return r;
}

static void check_job(const bq_v7_reader_t *r, const bq_v7_job_t *j)
{
    BQF_CHECK(j->id != 0 && j->id <= (uint64_t)INT64_MAX, "bad id %llu", (unsigned long long)j->id);
    BQF_CHECK(j->id <= bq_v7_max_id(r), "id above max_id");
    BQF_CHECK(j->state >= BQ_V7_READY && j->state <= BQ_V7_DELAYED, "bad state %u", j->state);
    BQF_CHECK(bq_tube_name_valid(j->tube, strlen(j->tube)), "bad tube name");
    BQF_CHECK(j->body_size >= 2 && j->body[j->body_size - 2] == '\r' &&
                  j->body[j->body_size - 1] == '\n',
              "body without CRLF");
    BQF_CHECK(j->ttr_ns >= 0 && j->ttr_ns / 1000000000 <= UINT32_MAX, "bad ttr");
    BQF_CHECK(j->delay_ns >= 0 && j->delay_ns / 1000000000 <= UINT32_MAX, "bad delay");
    BQF_CHECK(j->created_at >= 0, "creation before 1970");
    BQF_CHECK(j->state != BQ_V7_DELAYED || j->deadline_at >= 0, "deadline before 1970");
    BQF_CHECK(bq_v7_find(r, j->id) == j, "find disagrees");
}

/* Checks r's jobs and returns its sorted job list. */
static const bq_v7_job_t **check_jobs(const bq_v7_reader_t *r)
{
    const bq_v7_job_t **v = bq_v7_jobs(r);
    BQF_CHECK(v != NULL, "out of memory");
    for (size_t i = 0; i < bq_v7_count(r); i++) {
        check_job(r, v[i]);
        BQF_CHECK(i == 0 || v[i - 1]->id < v[i]->id, "jobs not in id order");
    }
    return v;
}

static bool same_job(const bq_v7_job_t *a, const bq_v7_job_t *b)
{
    return a->id == b->id && a->bury_seq == b->bury_seq && a->delay_ns == b->delay_ns &&
           a->ttr_ns == b->ttr_ns && a->created_at == b->created_at &&
           a->deadline_at == b->deadline_at && a->pri == b->pri && a->reserves == b->reserves &&
           a->timeouts == b->timeouts && a->releases == b->releases && a->buries == b->buries &&
           a->kicks == b->kicks && a->body_size == b->body_size && a->state == b->state &&
           strcmp(a->tube, b->tube) == 0 && memcmp(a->body, b->body, a->body_size) == 0;
}

/* Asserts that a and b hold the same jobs; with_error: and the same error. */
static void check_same(const bq_v7_reader_t *a, const bq_v7_reader_t *b, bool with_error)
{
    BQF_CHECK(bq_v7_count(a) == bq_v7_count(b), "job counts differ: %zu, %zu", bq_v7_count(a),
              bq_v7_count(b));
    BQF_CHECK(bq_v7_records(a) == bq_v7_records(b), "record counts differ");
    BQF_CHECK(bq_v7_max_id(a) == bq_v7_max_id(b), "max ids differ");
    const bq_v7_job_t **va = check_jobs(a), **vb = check_jobs(b);
    for (size_t i = 0; i < bq_v7_count(a); i++)
        BQF_CHECK(same_job(va[i], vb[i]), "job %llu differs", (unsigned long long)va[i]->id);
    free(va);
    free(vb);
    if (!with_error)
        return;
    const bq_v7_error_t *ea = bq_v7_error(a), *eb = bq_v7_error(b);
    BQF_CHECK((ea == NULL) == (eb == NULL), "one reading failed, the other did not");
    if (ea)
        BQF_CHECK(ea->file == eb->file && ea->offset == eb->offset && strcmp(ea->msg, eb->msg) == 0,
                  "errors differ: %zu@%llu %s / %zu@%llu %s", ea->file,
                  (unsigned long long)ea->offset, ea->msg, eb->file, (unsigned long long)eb->offset,
                  eb->msg);
}

/* ---- the engine check ---- */

static void on_send(void *conn, const char *data, size_t len)
{
    (void)conn, (void)data, (void)len;
}

static void on_wake(void *conn)
{
    (void)conn;
}

static void on_server_info(void *arg, bq_server_info_t *info)
{
    (void)arg, (void)info;
}

static void check_apply(const bq_v7_reader_t *r)
{
    static const bq_engine_hooks_t hooks = {
        .send = on_send, .wake = on_wake, .server_info = on_server_info};
    bq_engine_config_t cfg = {.max_job_size = BQ_MAX_JOB_SIZE_DEFAULT};
    bq_engine_t *e = bq_engine_new(&cfg, &hooks);
    BQF_CHECK(e != NULL, "out of memory");
    bq_now_t now = {.mono = INT64_C(1000) * BQ_NS_PER_S, .wall = INT64_C(1700000000) * BQ_NS_PER_S};
    const bq_v7_job_t **v = bq_v7_jobs(r);
    BQF_CHECK(v != NULL, "out of memory");
    for (size_t i = 0; i < bq_v7_count(r); i++) {
        Bq__Log__JobFull full = BQ__LOG__JOB_FULL__INIT;
        Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
        Bq__Log__Record rec = BQ__LOG__RECORD__INIT;
        bq_v7_job_to_record(v[i], &full, &st);
        rec.kind_case = BQ__LOG__RECORD__KIND_FULL;
        rec.full = &full;
        size_t n = bq__log__record__get_packed_size(&rec);
        uint8_t *buf = malloc(n);
        BQF_CHECK(buf != NULL, "out of memory");
        BQF_CHECK(bq__log__record__pack(&rec, buf) == n, "pack size");
        int rc = bq_engine_apply(e, buf, n, 0, now);
        BQF_CHECK(rc == 0, "engine refused job %llu: %d", (unsigned long long)v[i]->id, rc);
        free(buf);
    }
    free(v);
    bq_engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    file_t files[MAX_FILES];
    size_t n = split(data, size, files);
    bq_v7_reader_t *whole = read_all(files, n, 0, SIZE_MAX);
    bq_v7_reader_t *chunked = read_all(files, n, size % 97 + 1, SIZE_MAX);
    check_same(whole, chunked, true);
    const bq_v7_error_t *err = bq_v7_error(whole);
    if (err) {
        BQF_CHECK(err->file < n && err->offset <= files[err->file].len, "error out of place");
        bq_v7_reader_t *prefix = read_all(files, err->file + 1, 0, (size_t)err->offset);
        BQF_CHECK(bq_v7_error(prefix) == NULL, "the valid prefix fails: %s",
                  bq_v7_error(prefix)->msg);
        check_same(whole, prefix, false);
        bq_v7_reader_free(prefix);
    }
    check_apply(whole);
    bq_v7_reader_free(whole);
    bq_v7_reader_free(chunked);
    return 0;
}
