/* The engine's timers, as three queues: tubes with delayed jobs keyed by
 * their soonest (deadline, id), paused tubes keyed by the end of the pause,
 * and clients keyed by their next reservation deadline (one safety margin
 * earlier while they wait, for DEADLINE_SOON) or reserve timeout.
 *
 * bq_engine_tick() runs what is due in beanstalkd's order: pauses that ended
 * first, then delayed jobs in deadline order, each followed by a hand-out of
 * the best ready jobs to waiters across the affected tubes (its
 * process_queue), then clients. Nothing here scans all tubes or clients. */
#include "protocol/engine_internal.h"

static const bq_job_t *delay_top(const void *t)
{
    return bq_heap_top(&((const bq_tube_t *)t)->delay);
}

static bool delay_timer_less(const void *a, const void *b)
{
    return bq__job_key_less(delay_top(a), delay_top(b));
}

static void delay_timer_setpos(void *t, size_t pos)
{
    ((bq_tube_t *)t)->delay_timer_pos = pos;
}

static bool pause_timer_less(const void *a, const void *b)
{
    return ((const bq_tube_t *)a)->unpause_at < ((const bq_tube_t *)b)->unpause_at;
}

static void pause_timer_setpos(void *t, size_t pos)
{
    ((bq_tube_t *)t)->pause_timer_pos = pos;
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
    bq_heap_init(&e->delay_timers, delay_timer_less, delay_timer_setpos);
    bq_heap_init(&e->pause_timers, pause_timer_less, pause_timer_setpos);
    bq_heap_init(&e->client_timers, client_timer_less, client_timer_setpos);
}

int bq__timers_reserve_tube(bq_engine_t *e)
{
    if (bq_heap_reserve(&e->delay_timers, e->ntubes + 1) != 0)
        return -1;
    return bq_heap_reserve(&e->pause_timers, e->ntubes + 1);
}

/* Puts item in heap h (or re-sifts it) when want, else takes it out.
 * Inserts never allocate: room is reserved per tube and per client. */
static void place(bq_heap_t *h, void *item, size_t pos, bool want)
{
    if (!want) {
        if (pos != BQ_HEAP_NOPOS)
            bq_heap_remove(h, pos);
    } else if (pos != BQ_HEAP_NOPOS) {
        bq_heap_fix(h, pos);
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
    place(&e->delay_timers, t, t->delay_timer_pos, t->delay.len > 0);
    place(&e->pause_timers, t, t->pause_timer_pos, bq__tube_paused(t));
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
    c->timer_key = k;
    place(&e->client_timers, c, c->timer_pos, k != BQ_NEVER);
}

/* Ends every pause due at now; returns those tubes, linked by
 * unpaused_next. */
static bq_tube_t *end_pauses(bq_engine_t *e, bq_now_t now)
{
    bq_tube_t *list = NULL, *t;
    while ((t = bq_heap_top(&e->pause_timers)) && t->unpause_at <= now.mono) {
        t->pause_ns = 0;
        bq__tube_pause_changed(t);
        bq__tube_timer_update(e, t);
        t->unpaused_next = list;
        list = t;
    }
    return list;
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
    const bq_tube_t *t = bq_heap_top(&e->delay_timers);
    if (t)
        k = delay_top(t)->key;
    if ((t = bq_heap_top(&e->pause_timers)))
        k = min64(k, t->unpause_at);
    const bq_client_t *c = bq_heap_top(&e->client_timers);
    if (c)
        k = min64(k, c->timer_key);
    return k;
}

int64_t bq_engine_tick(bq_engine_t *e, bq_now_t now)
{
    bq_tube_t *unpaused = end_pauses(e, now), *t;
    while ((t = bq_heap_top(&e->delay_timers)) && delay_top(t)->key <= now.mono) {
        bq_job_t *j = bq_heap_top(&t->delay);
        bq__job_unlink(e, NULL, j);
        bq__job_ready_insert(e, j);
        bq__dispatch(e, unpaused, t, now);
    }
    bq__dispatch(e, unpaused, NULL, now);
    bq_client_t *c;
    while ((c = bq_heap_top(&e->client_timers)) && c->timer_key <= now.mono)
        client_due(e, c, now);
    return bq_engine_next_due(e);
}
