/* Engine changes as binlog records (proto/binlog.proto), in both directions.
 *
 * Logging: a command first asks the log for room (bq__log_room), then
 * changes state, then logs the result, so that a full disk fails a command
 * cleanly instead of leaving memory and disk disagreeing. A job's records
 * carry its whole durable status, so the latest record of a job says all
 * there is to know and replay never changes a counter by itself.
 *
 * Applying: bq_engine_apply() turns a record back into the same state; it is
 * the one code path for binlog replay and for standbys. */
#include "protocol/engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include "proto/binlog.pb-c.h"

/* Scratch room that records without a room check (checkpoints) may use. */
#define SCRATCH_MIN 4096

static int grow_scratch(bq_engine_t *e, size_t n)
{
    if (n < SCRATCH_MIN)
        n = SCRATCH_MIN;
    if (n <= e->logcap)
        return 0;
    uint8_t *p = realloc(e->logbuf, n);
    if (!p)
        return -1;
    e->logbuf = p;
    e->logcap = n;
    return 0;
}

size_t bq__log_full_max(const bq_job_t *j)
{
    return (size_t)j->body_size + j->tube->name_len + 128;
}

bool bq__log_room(bq_engine_t *e, size_t bytes, bool is_delete)
{
    e->log_refused = false;
    if (!e->logging)
        return true;
    if (grow_scratch(e, bytes) != 0)
        return false;
    bq_room_t r = e->hooks.log_room(e->hooks.arg, bytes, is_delete);
    e->log_refused = r == BQ_ROOM_REFUSED;
    return r == BQ_ROOM_GRANTED;
}

/* Packs r into the scratch buffer and hands it to the log hook. */
static uint32_t emit(bq_engine_t *e, const Bq__Log__Record *r, bq_log_entry_t *entry)
{
    size_t n = bq__log__record__get_packed_size(r);
    if (grow_scratch(e, n) != 0)
        abort(); /* room for n was reserved by bq__log_room or SCRATCH_MIN */
    entry->len = bq__log__record__pack(r, e->logbuf);
    entry->data = e->logbuf;
    return e->hooks.log(e->hooks.arg, entry);
}

static void fill_status(Bq__Log__JobStatus *st, const bq_job_t *j, bq_now_t now)
{
    st->pri = j->pri;
    st->delay = j->delay;
    st->reserves = j->reserves;
    st->timeouts = j->timeouts;
    st->releases = j->releases;
    st->buries = j->buries;
    st->kicks = j->kicks;
    if (j->state == BQ_JOB_DELAYED) {
        st->state = BQ__LOG__JOB_STATE__DELAYED;
        st->deadline_wall = bq__clock_convert(j->key, now.mono, now.wall);
    } else if (j->state == BQ_JOB_BURIED) {
        st->state = BQ__LOG__JOB_STATE__BURIED;
        st->bury_seq = (uint64_t)j->key;
    } else {
        st->state = BQ__LOG__JOB_STATE__READY; /* a reservation is not durable */
    }
}

void bq__log_full(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    if (!e->logging)
        return;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    Bq__Log__JobFull full = BQ__LOG__JOB_FULL__INIT;
    Bq__Log__Record r = BQ__LOG__RECORD__INIT;
    fill_status(&st, j, now);
    full.id = j->id;
    full.tube = j->tube->name;
    full.ttr = j->ttr;
    full.created_wall = j->created_wall;
    full.body.data = (uint8_t *)j->body;
    full.body.len = j->body_size - 2;
    full.status = &st;
    r.kind_case = BQ__LOG__RECORD__KIND_FULL;
    r.full = &full;
    bq_log_entry_t entry = {.job_id = j->id, .prev_file = j->file, .full = true};
    j->file = emit(e, &r, &entry);
    if (j->id >= e->id_used)
        e->id_used = j->id + 1;
}

void bq__log_update(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    if (!e->logging)
        return;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    Bq__Log__JobUpdate up = BQ__LOG__JOB_UPDATE__INIT;
    Bq__Log__Record r = BQ__LOG__RECORD__INIT;
    fill_status(&st, j, now);
    up.id = j->id;
    up.status = &st;
    r.kind_case = BQ__LOG__RECORD__KIND_UPDATE;
    r.update = &up;
    bq_log_entry_t entry = {.job_id = j->id, .prev_file = j->file};
    emit(e, &r, &entry);
}

void bq__log_delete(bq_engine_t *e, bq_job_t *j)
{
    e->live_log_bytes -= bq__log_full_max(j);
    if (!e->logging)
        return;
    Bq__Log__JobDelete del = BQ__LOG__JOB_DELETE__INIT;
    Bq__Log__Record r = BQ__LOG__RECORD__INIT;
    del.id = j->id;
    r.kind_case = BQ__LOG__RECORD__KIND_DELETE;
    r.delete_ = &del;
    bq_log_entry_t entry = {.job_id = j->id, .prev_file = j->file, .gone = true};
    emit(e, &r, &entry);
}

/* Logs t's pause; meta for a checkpoint's restatement. */
static void log_pause(bq_engine_t *e, const bq_tube_t *t, bq_now_t now, bool meta)
{
    Bq__Log__TubePause p = BQ__LOG__TUBE_PAUSE__INIT;
    Bq__Log__Record r = BQ__LOG__RECORD__INIT;
    p.tube = (char *)t->name;
    p.pause_ns = t->pause_ns;
    p.unpause_wall = bq__clock_convert(t->unpause_at, now.mono, now.wall);
    r.kind_case = BQ__LOG__RECORD__KIND_PAUSE;
    r.pause = &p;
    bq_log_entry_t entry = {.meta = meta};
    emit(e, &r, &entry);
}

void bq__log_pause(bq_engine_t *e, const bq_tube_t *t, bq_now_t now)
{
    if (e->logging)
        log_pause(e, t, now, false);
}

/* Logs an id reservation up to next (see IdReservation in binlog.proto). */
static void log_ids(bq_engine_t *e, uint64_t next, bool sync, bool clean_stop)
{
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    Bq__Log__Record r = BQ__LOG__RECORD__INIT;
    ids.next = next;
    ids.used = e->id_used;
    ids.durable = e->ids_durable;
    ids.clean_stop = clean_stop;
    r.kind_case = BQ__LOG__RECORD__KIND_IDS;
    r.ids = &ids;
    bq_log_entry_t entry = {.sync = sync, .meta = true};
    emit(e, &r, &entry);
}

/* The end of the ids that may have been handed out. */
static uint64_t ids_end(const bq_engine_t *e)
{
    return e->id_limit > e->next_id ? e->id_limit : e->next_id;
}

uint64_t bq__take_id(bq_engine_t *e)
{
    if (e->logging && e->next_id >= e->id_limit) {
        /* The reservation must be on disk before any reply shows one of
         * its ids, so that no id is handed out twice after a crash. */
        if (!bq__log_room(e, BQ_LOG_IDS_MAX, false))
            return 0;
        e->id_limit = e->next_id + BQ_ID_BLOCK;
        log_ids(e, e->id_limit, true, false);
    }
    return e->next_id++;
}

void bq_engine_skip_id_block(bq_engine_t *e)
{
    e->next_id += BQ_ID_BLOCK;
    e->id_used = e->next_id;
}

void bq_engine_resume_ids(bq_engine_t *e, bool may_continue)
{
    if (may_continue && e->ids_settled)
        e->next_id = e->id_used;
    else if (e->id_used > e->next_id)
        e->next_id = e->id_used;
    e->id_used = e->next_id;
    /* The next id handed out logs a reservation first, as on a fresh
     * engine (one that was a primary before may hold an older limit). */
    e->id_limit = 0;
}

bool bq_engine_ids_settled(const bq_engine_t *e)
{
    return e->ids_settled;
}

void bq_engine_set_ids_durable(bq_engine_t *e, bool durable)
{
    e->ids_durable = durable;
}

void bq_engine_log_checkpoint(bq_engine_t *e, bq_now_t now)
{
    if (!e->logging)
        return;
    log_ids(e, ids_end(e), false, false);
    for (size_t i = 0; i < e->ntubes; i++) {
        if (bq__tube_paused(e->tubes[i]))
            log_pause(e, e->tubes[i], now, true);
    }
}

void bq_engine_log_clean_stop(bq_engine_t *e)
{
    if (e->logging)
        log_ids(e, ids_end(e), false, true);
}

int bq_engine_relog_job(bq_engine_t *e, uint64_t id, bq_now_t now)
{
    bq_job_t *j = bq__jobtab_find(&e->jobs, id);
    if (!j || !bq__log_room(e, bq__log_full_max(j), false))
        return -1;
    bq__log_full(e, j, now);
    return 0;
}

size_t bq_engine_file_jobs(const bq_engine_t *e, uint32_t file, size_t *cursor, uint64_t *ids,
                           size_t max)
{
    size_t n = 0;
    if (*cursor >= e->jobs.cap) { /* the table shrank since the last call */
        *cursor = e->jobs.cap;
        return 0;
    }
    size_t end =
        e->jobs.cap - *cursor > BQ_FILE_SCAN_SLOTS ? *cursor + BQ_FILE_SCAN_SLOTS : e->jobs.cap;
    for (; *cursor < end && n < max; ++*cursor) {
        const bq_job_t *j = e->jobs.slots[*cursor];
        if (j && j->file == (file & ((1u << 29) - 1)))
            ids[n++] = j->id;
    }
    return n;
}

size_t bq_engine_scan_end(const bq_engine_t *e)
{
    return e->jobs.cap;
}

void bq_engine_each_job_file(const bq_engine_t *e, void (*fn)(void *arg, uint32_t file), void *arg)
{
    for (size_t i = 0; i < e->jobs.cap; i++) {
        if (e->jobs.slots[i])
            fn(arg, e->jobs.slots[i]->file);
    }
}

uint64_t bq_engine_live_log_bytes(const bq_engine_t *e)
{
    return e->live_log_bytes;
}
