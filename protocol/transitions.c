/* Job state transitions: linking a job into the structure of its state
 * (ready heap, delay heap, buried queue, a client's reservations), unlinking
 * it, handing a newly ready job to a waiting client, and freeing it. Every
 * counter that `stats` reports about job states is kept here. */
#include "protocol/engine_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool bq__job_pri_less(const void *a, const void *b)
{
    const bq_job_t *ja = a, *jb = b;
    if (ja->pri != jb->pri)
        return ja->pri < jb->pri;
    return ja->id < jb->id;
}

bool bq__job_key_less(const void *a, const void *b)
{
    const bq_job_t *ja = a, *jb = b;
    if (ja->key != jb->key)
        return ja->key < jb->key;
    return ja->id < jb->id;
}

void bq__job_setpos(void *j, size_t pos)
{
    ((bq_job_t *)j)->heap_index = (uint32_t)pos;
}

bool bq__job_reserved_by(const bq_job_t *j, const bq_client_t *c)
{
    return j->state == BQ_JOB_RESERVED && j->heap_index < c->reserved.len &&
           c->reserved.items[j->heap_index] == j;
}

void bq__job_ready_insert(bq_engine_t *e, bq_job_t *j)
{
    bq_tube_t *t = j->tube;
    bool was_empty = t->ready.len == 0;
    j->state = BQ_JOB_READY;
    bq_heap_insert(&t->ready, j); /* room: capacity >= jobs of the tube */
    e->ready_ct++;
    if (j->pri < BQ_URGENT_THRESHOLD) {
        e->urgent_ct++;
        t->urgent_ct++;
    }
    bq__tube_ready_changed(t, was_empty, j->heap_index == 0);
}

static void ready_remove(bq_engine_t *e, bq_job_t *j)
{
    bq_tube_t *t = j->tube;
    bool was_top = j->heap_index == 0;
    bq_heap_remove(&t->ready, j->heap_index);
    e->ready_ct--;
    if (j->pri < BQ_URGENT_THRESHOLD) {
        e->urgent_ct--;
        t->urgent_ct--;
    }
    bq__tube_ready_changed(t, false, was_top);
}

void bq__job_unlink(bq_engine_t *e, bq_client_t *reserver, bq_job_t *j)
{
    bq_tube_t *t = j->tube;
    bool was_top = j->heap_index == 0;
    switch (j->state) {
    case BQ_JOB_READY:
        ready_remove(e, j);
        break;
    case BQ_JOB_DELAYED:
        bq_heap_remove(&t->delay, j->heap_index);
        e->delayed_ct--;
        if (was_top)
            bq__tube_timer_update(e, t);
        break;
    case BQ_JOB_BURIED:
        bq_heap_remove(&t->buried, j->heap_index);
        e->buried_ct--;
        break;
    case BQ_JOB_RESERVED:
        bq_heap_remove(&reserver->reserved, j->heap_index);
        e->reserved_ct--;
        t->reserved_ct--;
        if (was_top)
            bq__client_timer_update(e, reserver);
        break;
    default:
        break;
    }
}

void bq__job_reserve(bq_engine_t *e, bq_client_t *c, bq_job_t *j, bq_now_t now)
{
    j->state = BQ_JOB_RESERVED;
    j->reserve_seq = e->reserve_seq++;
    j->key = now.mono + (int64_t)j->ttr * BQ_NS_PER_S;
    j->reserves++;
    j->tube->reserved_ct++;
    e->reserved_ct++;
    bq_heap_insert(&c->reserved, j); /* room reserved by the caller */
    bq__client_timer_update(e, c);
    bq__send_job(e, c, "RESERVED", j);
}

/* Gives j to the next waiting client of its tube and wakes that client. */
static void hand_to_waiter(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    bq_client_t *c = bq__tube_take_waiter(j->tube);
    bq__client_unwait(e, c);
    bq__job_reserve(e, c, j, now);
    e->hooks.wake(c->conn);
}

void bq__job_ready(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    bq_tube_t *t = j->tube;
    /* An unpaused tube with waiters has no ready job (they would have taken
     * it), so j is the best job for them: hand it over directly. */
    if (t->nwaiting && !bq__tube_paused(t)) {
        hand_to_waiter(e, j, now);
        return;
    }
    bq__job_ready_insert(e, j);
}

/* t if it can hand a job to a waiter and its best job beats best's. */
static bq_tube_t *better(bq_tube_t *t, bq_tube_t *best)
{
    if (!t || !t->nwaiting || !t->ready.len || bq__tube_paused(t))
        return best;
    if (best && !bq__job_pri_less(bq_heap_top(&t->ready), bq_heap_top(&best->ready)))
        return best;
    return t;
}

void bq__dispatch(bq_engine_t *e, bq_tube_t *list, bq_tube_t *extra, bq_now_t now)
{
    for (;;) {
        bq_tube_t *best = better(extra, NULL);
        for (bq_tube_t *t = list; t; t = t->unpaused_next)
            best = better(t, best);
        if (!best)
            return;
        bq_job_t *j = bq_heap_top(&best->ready);
        ready_remove(e, j);
        hand_to_waiter(e, j, now);
    }
}

static int by_reserve_seq(const void *a, const void *b)
{
    const bq_job_t *ja = *(bq_job_t *const *)a, *jb = *(bq_job_t *const *)b;
    int32_t d = (int32_t)(ja->reserve_seq - jb->reserve_seq); /* wrap-safe */
    return (d > 0) - (d < 0);
}

void bq__client_return_jobs(bq_engine_t *e, bq_client_t *c, bq_now_t now)
{
    /* Take the reservation heap's array and sort it in place: beanstalkd
     * returns a closing connection's jobs in the order it reserved them. */
    bq_job_t **jobs = (bq_job_t **)c->reserved.items;
    size_t n = c->reserved.len;
    c->reserved.items = NULL;
    c->reserved.len = c->reserved.cap = 0;
    bq__client_timer_update(e, c);
    if (n > 1)
        qsort(jobs, n, sizeof *jobs, by_reserve_seq);
    for (size_t i = 0; i < n; i++) {
        e->reserved_ct--;
        jobs[i]->tube->reserved_ct--;
        bq__job_ready(e, jobs[i], now);
    }
    free(jobs);
}

int bq__job_delay(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    return bq__job_delay_until(e, j, now.mono + (int64_t)j->delay * BQ_NS_PER_S);
}

int bq__job_delay_until(bq_engine_t *e, bq_job_t *j, int64_t deadline)
{
    int64_t old_key = j->key;
    j->key = deadline;
    if (bq_heap_insert(&j->tube->delay, j) != 0) {
        j->key = old_key;
        return -1;
    }
    j->state = BQ_JOB_DELAYED;
    e->delayed_ct++;
    if (j->heap_index == 0)
        bq__tube_timer_update(e, j->tube);
    return 0;
}

int bq__job_bury(bq_engine_t *e, bq_job_t *j)
{
    return bq__job_bury_at(e, j, e->bury_seq + 1);
}

int bq__job_bury_at(bq_engine_t *e, bq_job_t *j, uint64_t seq)
{
    int64_t old_key = j->key;
    j->key = (int64_t)seq;
    if (bq_heap_insert(&j->tube->buried, j) != 0) {
        j->key = old_key;
        return -1;
    }
    if (seq > e->bury_seq)
        e->bury_seq = seq;
    j->state = BQ_JOB_BURIED;
    e->buried_ct++;
    return 0;
}

void bq__job_destroy(bq_engine_t *e, bq_job_t *j)
{
    bq_tube_t *t = j->tube;
    bq__jobtab_remove(&e->jobs, j);
    free(j);
    bq__tube_release(e, t);
}

void bq__send_job(bq_engine_t *e, bq_client_t *c, const char *word, const bq_job_t *j)
{
    bq__sendf(e, c, "%s %" PRIu64 " %" PRIu32 "\r\n", word, j->id, j->body_size - 2);
    bq_engine_client_send(e, c, j->body, j->body_size);
}

void bq__sendf(bq_engine_t *e, bq_client_t *c, const char *fmt, ...)
{
    char line[BQ_LINE_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) {
        BQ_SEND(e, c, "INTERNAL_ERROR\r\n");
        return;
    }
    bq_engine_client_send(e, c, line, (size_t)n);
}
