/* The engine's timers: a queue of tubes keyed by their next delay deadline or
 * pause end, and a queue of clients keyed by their next reservation deadline
 * (one safety margin earlier while they wait, for DEADLINE_SOON) or reserve
 * timeout. bq_engine_tick() runs whatever is due; nothing here scans all
 * tubes or all clients. */
#include "engine_internal.h"

static bool tube_timer_less(const void *a, const void *b)
{
    return ((const bq_tube_t *)a)->timer_key < ((const bq_tube_t *)b)->timer_key;
}

static void tube_timer_setpos(void *t, size_t pos)
{
    ((bq_tube_t *)t)->timer_pos = pos;
}

static bool client_timer_less(const void *a, const void *b)
{
    return ((const bq_client_t *)a)->timer_key < ((const bq_client_t *)b)->timer_key;
}

static void client_timer_setpos(void *c, size_t pos)
{
    ((bq_client_t *)c)->timer_pos = pos;
}

void bq__timers_init(bq_engine_t *e)
{
    bq_heap_init(&e->tube_timers, tube_timer_less, tube_timer_setpos);
    bq_heap_init(&e->client_timers, client_timer_less, client_timer_setpos);
}

/* Sets an item's key in heap h: removed when BQ_NEVER, else inserted or
 * re-sifted. Inserts never allocate (room is reserved per tube/client). */
static void set_key(bq_heap_t *h, void *item, int64_t *key, size_t *pos, int64_t k)
{
    *key = k;
    if (k == BQ_NEVER) {
        if (*pos != BQ_HEAP_NOPOS)
            bq_heap_remove(h, *pos);
    } else if (*pos != BQ_HEAP_NOPOS) {
        bq_heap_fix(h, *pos);
    } else {
        bq_heap_insert(h, item);
    }
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

void bq__tube_timer_update(bq_engine_t *e, bq_tube_t *t)
{
    int64_t k = BQ_NEVER;
    if (t->delay.len)
        k = ((bq_job_t *)bq_heap_top(&t->delay))->key;
    if (bq__tube_paused(t))
        k = min64(k, t->unpause_at);
    set_key(&e->tube_timers, t, &t->timer_key, &t->timer_pos, k);
}

void bq__client_timer_update(bq_engine_t *e, bq_client_t *c)
{
    int64_t k = BQ_NEVER;
    if (c->reserved.len) {
        k = ((bq_job_t *)bq_heap_top(&c->reserved))->key;
        if (c->waiting)
            k -= BQ_SAFETY_MARGIN;
    }
    if (c->waiting)
        k = min64(k, c->wait_deadline);
    set_key(&e->client_timers, c, &c->timer_key, &c->timer_pos, k);
}

/* Runs one due event of tube t: a delayed job becoming ready, or the end of
 * its pause. */
static void tube_due(bq_engine_t *e, bq_tube_t *t, bq_now_t now)
{
    bq_job_t *j = bq_heap_top(&t->delay);
    if (j && j->key <= now.mono) {
        bq__job_unlink(e, NULL, j);
        bq__job_ready(e, j, now);
    } else if (bq__tube_paused(t) && t->unpause_at <= now.mono) {
        t->pause_ns = 0;
        bq__tube_pause_changed(t);
        bq__tube_dispatch(e, t, now);
    }
    bq__tube_timer_update(e, t);
}

/* Runs c's due events: expired reservations go back to ready; a waiting
 * reserve answers DEADLINE_SOON or TIMED_OUT. */
static void client_due(bq_engine_t *e, bq_client_t *c, bq_now_t now)
{
    bool soon = c->waiting && bq__client_deadline_soon(c, now.mono);
    bq_job_t *j;
    while ((j = bq_heap_top(&c->reserved)) && j->key <= now.mono) {
        bq__job_unlink(e, c, j);
        e->timeout_ct++;
        j->timeouts++;
        bq__job_ready(e, j, now);
    }
    if (soon && c->waiting) {
        bq__client_unwait(e, c);
        BQ_SEND(e, c, "DEADLINE_SOON\r\n");
        e->hooks.wake(c->conn);
    } else if (c->waiting && c->wait_deadline <= now.mono) {
        bq__client_unwait(e, c);
        BQ_SEND(e, c, "TIMED_OUT\r\n");
        e->hooks.wake(c->conn);
    }
    bq__client_timer_update(e, c);
}

int64_t bq_engine_next_due(const bq_engine_t *e)
{
    int64_t k = BQ_NEVER;
    const bq_tube_t *t = bq_heap_top(&e->tube_timers);
    const bq_client_t *c = bq_heap_top(&e->client_timers);
    if (t)
        k = t->timer_key;
    if (c)
        k = min64(k, c->timer_key);
    return k;
}

int64_t bq_engine_tick(bq_engine_t *e, bq_now_t now)
{
    bq_tube_t *t;
    bq_client_t *c;
    while ((t = bq_heap_top(&e->tube_timers)) && t->timer_key <= now.mono)
        tube_due(e, t, now);
    while ((c = bq_heap_top(&e->client_timers)) && c->timer_key <= now.mono)
        client_due(e, c, now);
    return bq_engine_next_due(e);
}
