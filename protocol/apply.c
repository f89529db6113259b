/* bq_engine_apply(): a binlog record turned back into engine state. Binlog
 * replay and standbys both come through here, so a record has exactly one
 * meaning. Records are checked like any untrusted input: a record that does
 * not make sense is refused (BQ_EBADRECORD), never half applied.
 *
 * Replay sets state to what the record says: counters are taken as
 * recorded and never bumped (beanstalkd's replay bumped `buries`, upstream
 * issue 668); records about a job that no longer exists (its full record
 * compacted away, or already deleted) are ignored, as in beanstalkd. */
#include "protocol/engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include "proto/binlog.pb-c.h"

/* Ids, id reservations and bury sequence numbers from records must stay
 * below this, so that counting up from them can never wrap. */
#define ID_MAX ((uint64_t)INT64_MAX)

static bool status_valid(const Bq__Log__JobStatus *st)
{
    return st && st->bury_seq <= ID_MAX &&
           (st->state == BQ__LOG__JOB_STATE__READY || st->state == BQ__LOG__JOB_STATE__DELAYED ||
            st->state == BQ__LOG__JOB_STATE__BURIED);
}

/* Pauses t as a pause record said: length pause_ns, ending at unpause_at. */
static void pause_tube(bq_engine_t *e, bq_tube_t *t, int64_t pause_ns, int64_t unpause_at)
{
    bool was_paused = bq__tube_paused(t);
    t->pause_ns = pause_ns;
    t->unpause_at = unpause_at;
    if (!was_paused)
        bq__tube_pause_changed(t);
    bq__tube_timer_update(e, t);
}

/* Finds the pending pause of name[0..len), dropping those that ended. */
static bq_pending_pause_t *pending_pause(bq_engine_t *e, const char *name, size_t len, bq_now_t now)
{
    bq_pending_pause_t *found = NULL;
    for (size_t i = 0; i < e->npending_pauses;) {
        bq_pending_pause_t *p = &e->pending_pauses[i];
        if (p->unpause_at <= now.mono) {
            *p = e->pending_pauses[--e->npending_pauses];
            continue;
        }
        if (p->name_len == len && memcmp(p->name, name, len) == 0)
            found = p;
        i++;
    }
    return found;
}

/* The tube named name for a job being applied: created if needed, then
 * paused if a pause for it was applied before it existed. */
static bq_tube_t *job_tube(bq_engine_t *e, const char *name, bq_now_t now)
{
    size_t len = strlen(name);
    bq_tube_t *t = bq__tube_find(e, name, len);
    if (t)
        return t;
    t = bq__tube_get(e, name, len);
    bq_pending_pause_t *p = t ? pending_pause(e, name, len, now) : NULL;
    if (p) {
        pause_tube(e, t, p->pause_ns, p->unpause_at);
        *p = e->pending_pauses[--e->npending_pauses];
    }
    return t;
}

/* Makes room for j to enter the state st says; 0 or BQ_ENOMEM. */
static int reserve_for(bq_tube_t *t, const Bq__Log__JobStatus *st)
{
    bq_heap_t *h = st->state == BQ__LOG__JOB_STATE__DELAYED  ? &t->delay
                   : st->state == BQ__LOG__JOB_STATE__BURIED ? &t->buried
                                                             : NULL;
    if (h && bq_heap_reserve(h, h->len + 1) != 0)
        return BQ_ENOMEM;
    return 0;
}

/* Sets j's status fields from st and links j into that state. Room was
 * reserved. */
static void link_status(bq_engine_t *e, bq_job_t *j, const Bq__Log__JobStatus *st, bq_now_t now)
{
    j->pri = st->pri;
    j->delay = st->delay;
    j->reserves = st->reserves;
    j->timeouts = st->timeouts;
    j->releases = st->releases;
    j->buries = st->buries;
    j->kicks = st->kicks;
    if (st->state == BQ__LOG__JOB_STATE__DELAYED)
        bq__job_delay_until(e, j, bq__clock_convert(st->deadline_wall, now.wall, now.mono));
    else if (st->state == BQ__LOG__JOB_STATE__BURIED)
        bq__job_bury_at(e, j, st->bury_seq);
    else
        bq__job_ready_insert(e, j);
}

/* Removes an existing job for good (a delete record). */
static void drop_job(bq_engine_t *e, bq_job_t *j)
{
    bq__job_unlink(e, NULL, j);
    e->live_log_bytes -= bq__log_full_max(j);
    bq__job_destroy(e, j);
}

/* A new job from a full record, with room for it everywhere; NULL (nothing
 * changed but possibly a new empty tube, released) when out of memory. */
static bq_job_t *new_job(bq_engine_t *e, const Bq__Log__JobFull *f, bq_now_t now)
{
    bq_tube_t *t = job_tube(e, f->tube, now);
    if (!t)
        return NULL;
    bq_job_t *j = malloc(sizeof *j + f->body.len + 2);
    if (!j || bq__jobtab_reserve(&e->jobs) != 0 ||
        bq_heap_reserve(&t->ready, bq__tube_jobs(t) + 1) != 0 || reserve_for(t, f->status)) {
        free(j);
        bq__tube_release(e, t);
        return NULL;
    }
    memset(j, 0, sizeof *j);
    j->id = f->id;
    j->tube = t;
    j->ttr = f->ttr ? f->ttr : 1;
    j->created_wall = f->created_wall;
    j->body_size = (uint32_t)f->body.len + 2;
    if (f->body.len) /* protobuf-c leaves an empty body's data NULL */
        memcpy(j->body, f->body.data, f->body.len);
    memcpy(j->body + f->body.len, "\r\n", 2);
    return j;
}

static int apply_full(bq_engine_t *e, const Bq__Log__JobFull *f, uint32_t file, bq_now_t now,
                      bq_apply_effect_t *eff)
{
    if (!f->id || f->id > ID_MAX || !f->tube || !bq_tube_name_valid(f->tube, strlen(f->tube)) ||
        !status_valid(f->status) || f->body.len > BQ_MAX_JOB_SIZE_LIMIT)
        return BQ_EBADRECORD;
    bq_job_t *old = bq__jobtab_find(&e->jobs, f->id);
    if (old && old->state == BQ_JOB_RESERVED)
        return BQ_EBADRECORD;
    bq_job_t *j = new_job(e, f, now);
    if (!j)
        return BQ_ENOMEM;
    eff->full = true;
    eff->existed = old != NULL;
    eff->prev_file = old ? old->file : 0;
    if (old) {
        /* Replace the old job without freeing its tube first: the tube and
         * its pause must survive when this was its only job. */
        bq__job_unlink(e, NULL, old);
        bq__jobtab_remove(&e->jobs, old);
        e->live_log_bytes -= bq__log_full_max(old);
    }
    j->file = file;
    bq__jobtab_insert(&e->jobs, j);
    if (j->id >= e->next_id)
        e->next_id = j->id + 1;
    if (j->id >= e->id_used)
        e->id_used = j->id + 1;
    e->live_log_bytes += bq__log_full_max(j);
    link_status(e, j, f->status, now);
    if (old) {
        bq_tube_t *ot = old->tube;
        free(old);
        bq__tube_release(e, ot);
    }
    return 0;
}

static int apply_update(bq_engine_t *e, const Bq__Log__JobUpdate *u, bq_now_t now)
{
    if (!u->id || !status_valid(u->status))
        return BQ_EBADRECORD;
    bq_job_t *j = bq__jobtab_find(&e->jobs, u->id);
    if (!j)
        return 0; /* its full record was compacted away, or it is deleted */
    if (j->state == BQ_JOB_RESERVED)
        return BQ_EBADRECORD;
    if (reserve_for(j->tube, u->status) != 0)
        return BQ_ENOMEM;
    bq__job_unlink(e, NULL, j);
    link_status(e, j, u->status, now);
    return 0;
}

static int apply_delete(bq_engine_t *e, const Bq__Log__JobDelete *d, bq_apply_effect_t *eff)
{
    if (!d->id)
        return BQ_EBADRECORD;
    bq_job_t *j = bq__jobtab_find(&e->jobs, d->id);
    if (j && j->state == BQ_JOB_RESERVED)
        return BQ_EBADRECORD;
    if (j) {
        eff->gone = eff->existed = true;
        eff->prev_file = j->file;
        drop_job(e, j);
    }
    return 0;
}

/* Remembers a pause of a tube that does not exist (yet); 0 or BQ_ENOMEM. */
static int add_pending_pause(bq_engine_t *e, const char *name, size_t len, int64_t pause_ns,
                             int64_t unpause_at, bq_now_t now)
{
    bq_pending_pause_t *p = pending_pause(e, name, len, now);
    if (!p) {
        p = realloc(e->pending_pauses, (e->npending_pauses + 1) * sizeof *p);
        if (!p)
            return BQ_ENOMEM;
        e->pending_pauses = p;
        p += e->npending_pauses++;
        memcpy(p->name, name, len);
        p->name[len] = '\0';
        p->name_len = len;
    }
    p->pause_ns = pause_ns;
    p->unpause_at = unpause_at;
    return 0;
}

static int apply_pause(bq_engine_t *e, const Bq__Log__TubePause *p, bq_now_t now)
{
    size_t len = p->tube ? strlen(p->tube) : 0;
    if (!p->tube || !bq_tube_name_valid(p->tube, len) || p->pause_ns <= 0)
        return BQ_EBADRECORD;
    bq_tube_t *t = bq__tube_find(e, p->tube, len);
    if (p->unpause_wall <= now.wall) {
        /* The pause is over, and so is any earlier one it replaced: an
         * unpause (pause-tube 0, a pause of 1 ns) must not leave a longer
         * pause running here. The tube unpauses at the next tick. */
        bq_pending_pause_t *pending = t ? NULL : pending_pause(e, p->tube, len, now);
        if (pending)
            *pending = e->pending_pauses[--e->npending_pauses];
        if (t && bq__tube_paused(t))
            pause_tube(e, t, p->pause_ns, now.mono);
        return 0;
    }
    int64_t unpause_at = bq__clock_convert(p->unpause_wall, now.wall, now.mono);
    if (!t) /* its jobs may follow (moved by compaction after the checkpoint) */
        return add_pending_pause(e, p->tube, len, p->pause_ns, unpause_at, now);
    pause_tube(e, t, p->pause_ns, unpause_at);
    return 0;
}

/* An id reservation: ids below next may have been handed out, ids below
 * used shown; its flags say whether ids may go on after used. */
static int apply_ids(bq_engine_t *e, const Bq__Log__IdReservation *ids)
{
    if (ids->next > ID_MAX || ids->used > ID_MAX)
        return BQ_EBADRECORD;
    if (ids->next > e->next_id)
        e->next_id = ids->next;
    if (ids->used > e->id_used)
        e->id_used = ids->used;
    e->ids_settled = ids->durable || ids->clean_stop;
    return 0;
}

int bq_engine_apply(bq_engine_t *e, const uint8_t *data, size_t len, uint32_t file, bq_now_t now)
{
    bq_apply_effect_t eff;
    return bq_engine_apply_ex(e, data, len, file, now, &eff);
}

int bq_engine_apply_ex(bq_engine_t *e, const uint8_t *data, size_t len, uint32_t file, bq_now_t now,
                       bq_apply_effect_t *eff)
{
    memset(eff, 0, sizeof *eff);
    Bq__Log__Record *r = bq__log__record__unpack(NULL, len, data);
    if (!r)
        return BQ_EBADRECORD;
    int rc;
    switch (r->kind_case) {
    case BQ__LOG__RECORD__KIND_FULL:
        rc = apply_full(e, r->full, file, now, eff);
        break;
    case BQ__LOG__RECORD__KIND_UPDATE:
        rc = apply_update(e, r->update, now);
        break;
    case BQ__LOG__RECORD__KIND_DELETE:
        rc = apply_delete(e, r->delete_, eff);
        break;
    case BQ__LOG__RECORD__KIND_PAUSE:
        rc = apply_pause(e, r->pause, now);
        break;
    case BQ__LOG__RECORD__KIND_IDS:
        rc = apply_ids(e, r->ids);
        break;
    default:
        rc = BQ_EBADRECORD; /* no kind, or one this version does not know */
        break;
    }
    bq__log__record__free_unpacked(r, NULL);
    return rc;
}
