/* The beanstalkd v7 binlog reader: a byte-at-a-time state machine over the
 * records of one file after another, accumulating the jobs that are alive
 * at the end of the log (beanstalkd_v7.h describes the format and the
 * rules).
 *
 * A record is taken in steps: its namelen, then its tube name and Jobrec
 * together (into a fixed buffer), then, for a full record, its body into a
 * buffer that grows with the bytes that actually arrive. A record changes
 * the job table only once it is complete and checked, so an error leaves
 * exactly the jobs of the records before it. The job table is an open
 * addressing hash that shrinks as jobs are deleted, so memory follows the
 * live jobs, not the length of the log. */
#include "protocol/beanstalkd_v7.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/engine.h"
#include "protocol/parse.h"

/* Jobrec field offsets (x86_64 layout, with its padding). */
enum {
    OFF_ID = 0,
    OFF_PRI = 8,
    OFF_DELAY = 16,
    OFF_TTR = 24,
    OFF_BODY_SIZE = 32,
    OFF_CREATED = 40,
    OFF_DEADLINE = 48,
    OFF_COUNTERS = 56, /* reserve, timeout, release, bury, kick: u32 each */
    OFF_STATE = 76,
};

#define WALVER5 5
#define BODY_MAX ((int64_t)BQ_MAX_JOB_SIZE_LIMIT + 2)
#define SECONDS_MAX ((int64_t)UINT32_MAX * BQ_NS_PER_S + (BQ_NS_PER_S - 1))
#define TABLE_MIN 16
#define BODY_CHUNK 4096

typedef enum phase {
    P_HEADER,  /* the int32 version */
    P_NAMELEN, /* the int32 that starts a record */
    P_RECORD,  /* tube name and Jobrec */
    P_BODY,    /* body of a full record */
    P_TAIL,    /* after a zero id: the rest is ignored */
    P_ZEROS,   /* a file with version 0: must be all zeros (never written) */
} phase_t;

typedef struct jobrec {
    uint64_t id;
    uint32_t pri;
    int64_t delay, ttr;
    int32_t body_size;
    int64_t created_at, deadline_at;
    uint32_t ct[5];
    uint8_t state;
} jobrec_t;

struct bq_v7_reader {
    bq_v7_job_t **slots; /* by id; open addressing, linear probing */
    size_t cap, len;
    uint64_t records, max_id;
    size_t file;
    uint64_t off;     /* bytes of the current file consumed */
    uint64_t rec_off; /* where the current record starts */
    phase_t phase;
    uint8_t buf[BQ_V7_NAME_MAX + BQ_V7_JOBREC_SIZE];
    size_t have, need;
    size_t namelen;
    bq_v7_job_t *pending; /* a full record waiting for its body */
    size_t body_have, body_cap;
    int status; /* 0, or the error that stopped the reader */
    bq_v7_error_t err;
};

/* ---- little-endian fields ---- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void decode_jobrec(const uint8_t *p, jobrec_t *jr)
{
    jr->id = le64(p + OFF_ID);
    jr->pri = le32(p + OFF_PRI);
    jr->delay = (int64_t)le64(p + OFF_DELAY);
    jr->ttr = (int64_t)le64(p + OFF_TTR);
    jr->body_size = (int32_t)le32(p + OFF_BODY_SIZE);
    jr->created_at = (int64_t)le64(p + OFF_CREATED);
    jr->deadline_at = (int64_t)le64(p + OFF_DEADLINE);
    for (int i = 0; i < 5; i++)
        jr->ct[i] = le32(p + OFF_COUNTERS + 4 * i);
    jr->state = p[OFF_STATE];
}

/* ---- errors ---- */

/* Stops the reader with a damage report about the record at offset. */
static void fail(bq_v7_reader_t *r, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(bq_v7_reader_t *r, uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    r->status = BQ_V7_ECORRUPT;
    r->err.file = r->file;
    r->err.offset = offset;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
}

static void fail_nomem(bq_v7_reader_t *r)
{
    fail(r, r->rec_off, "out of memory");
    r->status = BQ_V7_ENOMEM;
}

/* ---- the job table ---- */

static size_t home(const bq_v7_reader_t *r, uint64_t id)
{
    uint64_t h = id * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h ^ h >> 29) & (r->cap - 1);
}

/* The slot holding id, or the empty slot where it would go (cap > 0). */
static size_t slot_of(const bq_v7_reader_t *r, uint64_t id)
{
    size_t i = home(r, id);
    while (r->slots[i] && r->slots[i]->id != id)
        i = (i + 1) & (r->cap - 1);
    return i;
}

/* Moves every job into a table of cap slots; 0, or -1 (table unchanged). */
static int rehash(bq_v7_reader_t *r, size_t cap)
{
    bq_v7_job_t **old = r->slots;
    size_t oldcap = r->cap;
    bq_v7_job_t **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    r->slots = slots;
    r->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i])
            r->slots[slot_of(r, old[i]->id)] = old[i];
    free(old);
    return 0;
}

static void job_free(bq_v7_job_t *j)
{
    if (j)
        free(j->body);
    free(j);
}

/* Removes the job in slot i and frees it, shifting its followers back so
 * that no probe chain breaks. */
static void table_remove(bq_v7_reader_t *r, size_t i)
{
    size_t mask = r->cap - 1;
    job_free(r->slots[i]);
    r->slots[i] = NULL;
    r->len--;
    for (size_t j = (i + 1) & mask; r->slots[j]; j = (j + 1) & mask) {
        size_t k = home(r, r->slots[j]->id);
        /* The job at j may move to i unless its home lies in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            r->slots[i] = r->slots[j];
            r->slots[j] = NULL;
            i = j;
        }
    }
    if (r->cap > TABLE_MIN && r->len * 8 < r->cap)
        rehash(r, r->cap / 4 < TABLE_MIN ? TABLE_MIN : r->cap / 4); /* best effort */
}

/* Inserts j, or replaces the job with its id (freeing it); 0 or -1. */
static int table_put(bq_v7_reader_t *r, bq_v7_job_t *j)
{
    if ((r->len + 1) * 2 > r->cap && rehash(r, r->cap ? r->cap * 2 : TABLE_MIN) != 0)
        return -1;
    size_t i = slot_of(r, j->id);
    if (r->slots[i])
        job_free(r->slots[i]);
    else
        r->len++;
    r->slots[i] = j;
    return 0;
}

/* ---- records ---- */

/* Checks the Jobrec fields that a live job keeps. */
static bool check_fields(bq_v7_reader_t *r, const jobrec_t *jr)
{
    if (jr->ttr < 0 || jr->ttr > SECONDS_MAX) {
        fail(r, r->rec_off, "job %" PRIu64 ": ttr %" PRId64 " ns out of range", jr->id, jr->ttr);
        return false;
    }
    if (jr->delay < 0 || jr->delay > SECONDS_MAX) {
        fail(r, r->rec_off, "job %" PRIu64 ": delay %" PRId64 " ns out of range", jr->id,
             jr->delay);
        return false;
    }
    /* Wall-clock times before 1970: never written by beanstalkd, and times
     * our engine could not compute with. */
    if (jr->created_at < 0) {
        fail(r, r->rec_off, "job %" PRIu64 ": creation time %" PRId64 " ns out of range", jr->id,
             jr->created_at);
        return false;
    }
    if (jr->state == BQ_V7_DELAYED && jr->deadline_at < 0) {
        fail(r, r->rec_off, "job %" PRIu64 ": deadline %" PRId64 " ns out of range", jr->id,
             jr->deadline_at);
        return false;
    }
    return true;
}

/* Copies the Jobrec's status into j; record number seq buried it if j was
 * not buried before. */
static void set_status(bq_v7_job_t *j, const jobrec_t *jr, bool was_buried, uint64_t seq)
{
    j->pri = jr->pri;
    j->delay_ns = jr->delay;
    j->ttr_ns = jr->ttr;
    j->created_at = jr->created_at;
    j->deadline_at = jr->deadline_at;
    j->reserves = jr->ct[0];
    j->timeouts = jr->ct[1];
    j->releases = jr->ct[2];
    j->buries = jr->ct[3];
    j->kicks = jr->ct[4];
    j->state = jr->state;
    if (jr->state == BQ_V7_BURIED && !was_buried)
        j->bury_seq = seq;
}

/* Record number r->records + 1, about job id, is taken. */
static void accepted(bq_v7_reader_t *r, uint64_t id)
{
    r->records++;
    if (id > r->max_id)
        r->max_id = id;
    r->phase = P_NAMELEN;
}

static void short_record(bq_v7_reader_t *r, const jobrec_t *jr)
{
    size_t i = r->cap ? slot_of(r, jr->id) : 0;
    bq_v7_job_t *j = r->cap ? r->slots[i] : NULL;
    if (j && jr->state == BQ_V7_INVALID) {
        table_remove(r, i);
    } else if (j) {
        if (jr->body_size < 0 || (uint32_t)jr->body_size != j->body_size) {
            fail(r, r->rec_off, "job %" PRIu64 ": body size %" PRId32 " differs from %" PRIu32,
                 jr->id, jr->body_size, j->body_size);
            return;
        }
        if (!check_fields(r, jr))
            return;
        set_status(j, jr, j->state == BQ_V7_BURIED, r->records + 1);
    }
    /* A short record about an unknown job is ignored: its full record was
     * in a file beanstalkd has removed. Its id was handed out all the same. */
    accepted(r, jr->id);
}

/* Checks a full record's header and sets up r->pending for its body. */
static void full_record(bq_v7_reader_t *r, const jobrec_t *jr)
{
    const char *name = (const char *)r->buf;
    if (!bq_tube_name_valid(name, r->namelen)) {
        fail(r, r->rec_off, "job %" PRIu64 ": invalid tube name", jr->id);
        return;
    }
    if (jr->body_size < 2 || jr->body_size > BODY_MAX) {
        fail(r, r->rec_off, "job %" PRIu64 ": body size %" PRId32 " out of range", jr->id,
             jr->body_size);
        return;
    }
    if (!check_fields(r, jr))
        return;
    const bq_v7_job_t *old = bq_v7_find(r, jr->id);
    if (old && (old->body_size != (uint32_t)jr->body_size || strlen(old->tube) != r->namelen ||
                memcmp(old->tube, name, r->namelen) != 0)) {
        fail(r, r->rec_off, "job %" PRIu64 ": full record differs in tube or size from before",
             jr->id);
        return;
    }
    bq_v7_job_t *j = calloc(1, sizeof *j + r->namelen + 1);
    if (!j) {
        fail_nomem(r);
        return;
    }
    j->id = jr->id;
    j->body_size = (uint32_t)jr->body_size;
    memcpy(j->tube, name, r->namelen);
    bool was_buried = old && old->state == BQ_V7_BURIED;
    set_status(j, jr, was_buried, r->records + 1);
    if (was_buried && jr->state == BQ_V7_BURIED)
        j->bury_seq = old->bury_seq;
    r->pending = j;
    r->body_have = r->body_cap = 0;
    r->phase = P_BODY;
}

/* Tube name and Jobrec are in r->buf. */
static void record_header(bq_v7_reader_t *r)
{
    jobrec_t jr;
    decode_jobrec(r->buf + r->namelen, &jr);
    if (jr.id == 0) {
        r->phase = P_TAIL; /* preallocated zeros: the end of this file's log */
        return;
    }
    if (jr.state > BQ_V7_DELAYED) {
        fail(r, r->rec_off, "job %" PRIu64 ": state %u is not a job state", jr.id, jr.state);
        return;
    }
    if (jr.id > (uint64_t)INT64_MAX) {
        fail(r, r->rec_off, "job id %" PRIu64 " out of range", jr.id);
        return;
    }
    if (r->namelen)
        full_record(r, &jr);
    else
        short_record(r, &jr);
}

/* The body of r->pending is complete. */
static void body_done(bq_v7_reader_t *r)
{
    bq_v7_job_t *j = r->pending;
    uint64_t id = j->id;
    r->pending = NULL;
    if (memcmp(j->body + j->body_size - 2, "\r\n", 2) != 0) {
        fail(r, r->rec_off, "job %" PRIu64 ": body does not end in CRLF", j->id);
        job_free(j);
        return;
    }
    if (j->state == BQ_V7_INVALID) {
        size_t i = r->cap ? slot_of(r, j->id) : 0;
        if (r->cap && r->slots[i])
            table_remove(r, i);
        job_free(j);
    } else if (table_put(r, j) != 0) {
        job_free(j);
        fail_nomem(r);
        return;
    }
    accepted(r, id);
}

/* A fixed-size field in r->buf is complete. */
static void field_done(bq_v7_reader_t *r)
{
    switch (r->phase) {
    case P_HEADER: {
        int32_t v = (int32_t)le32(r->buf);
        if (v == BQ_V7_VERSION)
            r->phase = P_NAMELEN;
        else if (v == 0)
            r->phase = P_ZEROS;
        else if (v == WALVER5)
            fail(r, 0, "version 5 (beanstalkd 1.4) is not supported");
        else
            fail(r, 0, "unknown version %" PRId32, v);
        break;
    }
    case P_NAMELEN: {
        int32_t n = (int32_t)le32(r->buf);
        if (n < 0 || n > BQ_V7_NAME_MAX) {
            fail(r, r->rec_off, "namelen %" PRId32 " out of range 0..%d", n, BQ_V7_NAME_MAX);
            return;
        }
        r->namelen = (size_t)n;
        r->phase = P_RECORD;
        break;
    }
    default:
        record_header(r);
        break;
    }
}

static size_t field_need(const bq_v7_reader_t *r)
{
    return r->phase == P_RECORD ? r->namelen + BQ_V7_JOBREC_SIZE : 4;
}

/* Takes bytes of a fixed-size field; returns how many. */
static size_t take_field(bq_v7_reader_t *r, const uint8_t *data, size_t len)
{
    if (r->phase == P_NAMELEN && r->have == 0)
        r->rec_off = r->off;
    size_t need = field_need(r);
    size_t n = need - r->have < len ? need - r->have : len;
    memcpy(r->buf + r->have, data, n);
    r->have += n;
    if (r->have == need) {
        r->have = 0;
        field_done(r);
    }
    return n;
}

/* Takes bytes of a body; returns how many. */
static size_t take_body(bq_v7_reader_t *r, const uint8_t *data, size_t len)
{
    bq_v7_job_t *j = r->pending;
    size_t left = j->body_size - r->body_have;
    size_t n = left < len ? left : len;
    if (r->body_have + n > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap * 2 : BODY_CHUNK;
        while (cap < r->body_have + n)
            cap *= 2;
        if (cap > j->body_size)
            cap = j->body_size;
        uint8_t *p = realloc(j->body, cap);
        if (!p) {
            fail_nomem(r);
            return 0;
        }
        j->body = p;
        r->body_cap = cap;
    }
    memcpy(j->body + r->body_have, data, n);
    r->body_have += n;
    if (r->body_have == j->body_size)
        body_done(r);
    return n;
}

/* Checks the bytes of a version-0 file; returns how many. */
static size_t take_zeros(bq_v7_reader_t *r, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (data[i] != 0) {
            fail(r, 0, "unknown version 0 (byte %" PRIu64 " is not zero)", r->off + i);
            return i;
        }
    return len;
}

/* ---- public ---- */

bq_v7_reader_t *bq_v7_reader_new(void)
{
    return calloc(1, sizeof(bq_v7_reader_t));
}

void bq_v7_reader_free(bq_v7_reader_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->cap; i++)
        job_free(r->slots[i]);
    free(r->slots);
    job_free(r->pending);
    free(r);
}

void bq_v7_begin_file(bq_v7_reader_t *r, size_t file)
{
    r->file = file;
    r->off = r->rec_off = 0;
    r->phase = P_HEADER;
    r->have = 0;
}

int bq_v7_feed(bq_v7_reader_t *r, const uint8_t *data, size_t len)
{
    while (len > 0 && r->status == 0 && r->phase != P_TAIL) {
        size_t n;
        if (r->phase == P_BODY)
            n = take_body(r, data, len);
        else if (r->phase == P_ZEROS)
            n = take_zeros(r, data, len);
        else
            n = take_field(r, data, len);
        r->off += n;
        data += n;
        len -= n;
    }
    return r->status;
}

bool bq_v7_file_done(const bq_v7_reader_t *r)
{
    return r->phase == P_TAIL;
}

/* True when every byte of the current record so far is zero: a zero tail
 * that the end of the file cut short of a whole record. */
static bool zeros_so_far(const bq_v7_reader_t *r)
{
    if (r->phase == P_RECORD && r->namelen > 0)
        return false;
    for (size_t i = 0; i < r->have; i++)
        if (r->buf[i] != 0)
            return false;
    return true;
}

int bq_v7_end_file(bq_v7_reader_t *r)
{
    if (r->status)
        return r->status;
    if (r->phase == P_HEADER) {
        for (size_t i = 0; i < r->have; i++)
            if (r->buf[i] != 0)
                fail(r, 0, "file ends inside its header (%" PRIu64 " bytes)", r->off);
    } else if (r->phase == P_BODY) {
        fail(r, r->rec_off,
             "file ends inside the body of job %" PRIu64 " (%zu of %" PRIu32 " bytes)",
             r->pending->id, r->body_have, r->pending->body_size);
        job_free(r->pending);
        r->pending = NULL;
    } else if ((r->phase == P_RECORD || r->phase == P_NAMELEN) && !zeros_so_far(r)) {
        fail(r, r->rec_off, "file ends inside a record (%" PRIu64 " bytes)", r->off - r->rec_off);
    }
    return r->status;
}

const bq_v7_error_t *bq_v7_error(const bq_v7_reader_t *r)
{
    return r->status ? &r->err : NULL;
}

size_t bq_v7_count(const bq_v7_reader_t *r)
{
    return r->len;
}

uint64_t bq_v7_records(const bq_v7_reader_t *r)
{
    return r->records;
}

uint64_t bq_v7_max_id(const bq_v7_reader_t *r)
{
    return r->max_id;
}

const bq_v7_job_t *bq_v7_find(const bq_v7_reader_t *r, uint64_t id)
{
    return r->cap ? r->slots[slot_of(r, id)] : NULL;
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = (*(const bq_v7_job_t *const *)a)->id;
    uint64_t y = (*(const bq_v7_job_t *const *)b)->id;
    return (x > y) - (x < y);
}

const bq_v7_job_t **bq_v7_jobs(const bq_v7_reader_t *r)
{
    const bq_v7_job_t **v = malloc((r->len ? r->len : 1) * sizeof *v);
    if (!v)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < r->cap; i++)
        if (r->slots[i])
            v[n++] = r->slots[i];
    qsort(v, n, sizeof *v, cmp_id);
    return v;
}

void bq_v7_job_to_record(const bq_v7_job_t *j, Bq__Log__JobFull *full, Bq__Log__JobStatus *st)
{
    st->state = j->state == BQ_V7_DELAYED  ? BQ__LOG__JOB_STATE__DELAYED
                : j->state == BQ_V7_BURIED ? BQ__LOG__JOB_STATE__BURIED
                                           : BQ__LOG__JOB_STATE__READY;
    st->pri = j->pri;
    st->delay = (uint32_t)(j->delay_ns / BQ_NS_PER_S);
    st->deadline_wall = j->state == BQ_V7_DELAYED ? j->deadline_at : 0;
    st->bury_seq = j->state == BQ_V7_BURIED ? j->bury_seq : 0;
    st->reserves = j->reserves;
    st->timeouts = j->timeouts;
    st->releases = j->releases;
    st->buries = j->buries;
    st->kicks = j->kicks;
    full->id = j->id;
    full->tube = (char *)j->tube;
    full->ttr = j->ttr_ns < BQ_NS_PER_S ? 1 : (uint32_t)(j->ttr_ns / BQ_NS_PER_S);
    full->created_wall = j->created_at;
    full->body.data = j->body;
    full->body.len = j->body_size - 2;
    full->status = st;
}
