/* Clients: opening and closing the engine's view of a connection, and the
 * waiting state of a blocked reserve (registered in every watched tube's
 * waiting set, so that a job arriving in any of them finds the client). */
#include "protocol/engine_internal.h"

#include <stdlib.h>

bq_client_t *bq_engine_client_open(bq_engine_t *e, void *conn)
{
    if (bq_heap_reserve(&e->client_timers, e->nclients + 1) != 0)
        return NULL;
    bq_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->conn = conn;
    bq__client_ready_init(&c->ready);
    bq_heap_init(&c->reserved, bq__job_key_less, bq__job_setpos);
    c->wait_deadline = BQ_NEVER;
    c->timer_key = BQ_NEVER;
    c->timer_pos = BQ_HEAP_NOPOS;
    if (bq__watch_add(e, c, e->default_tube) != 0) {
        bq_heap_free(&c->ready);
        free(c->watch);
        free(c);
        return NULL;
    }
    c->use = e->default_tube;
    c->use->using_ct++;
    e->nclients++;
    e->total_conns++;
    return c;
}

void bq_engine_client_close(bq_engine_t *e, bq_client_t *c, bq_now_t now)
{
    bq__client_unwait(e, c);
    bq__client_return_jobs(e, c, now);
    if (c->timer_pos != BQ_HEAP_NOPOS)
        bq_heap_remove(&e->client_timers, c->timer_pos);
    while (c->nwatch) {
        bq_tube_t *t = c->watch[c->nwatch - 1]->tube;
        bq__watch_remove(e, c->watch[c->nwatch - 1]);
        bq__tube_release(e, t);
    }
    c->use->using_ct--;
    bq__tube_release(e, c->use);
    if (c->producer)
        e->producers--;
    if (c->worker)
        e->workers--;
    e->nclients--;
    bq_heap_free(&c->ready);
    bq_heap_free(&c->reserved);
    free(c->watch);
    free(c);
}

void bq_engine_client_halfclose(bq_engine_t *e, bq_client_t *c, bq_now_t now)
{
    (void)now;
    c->halfclosed = true;
    if (c->waiting) {
        bq__client_unwait(e, c);
        BQ_SEND(e, c, "TIMED_OUT\r\n");
    }
}

bool bq_engine_client_waiting(const bq_client_t *c)
{
    return c->waiting;
}

int64_t bq_engine_client_wait_deadline(const bq_client_t *c)
{
    return c->wait_deadline;
}

const char *bq_engine_client_use(const bq_client_t *c)
{
    return c->use->name;
}

size_t bq_engine_client_nwatch(const bq_client_t *c)
{
    return c->nwatch;
}

const char *bq_engine_client_watch(const bq_client_t *c, size_t i)
{
    return c->watch[i]->tube->name;
}

void bq_engine_client_send(bq_engine_t *e, bq_client_t *c, const char *data, size_t len)
{
    e->hooks.send(c->conn, data, len);
}

void bq__client_wait(bq_engine_t *e, bq_client_t *c, int64_t deadline)
{
    c->waiting = true;
    c->wait_deadline = deadline;
    e->waiting_ct++;
    for (size_t i = 0; i < c->nwatch; i++)
        bq__tube_add_waiter(c->watch[i]);
    bq__client_timer_update(e, c);
}

void bq__client_unwait(bq_engine_t *e, bq_client_t *c)
{
    if (!c->waiting)
        return;
    c->waiting = false;
    c->wait_deadline = BQ_NEVER;
    e->waiting_ct--;
    for (size_t i = 0; i < c->nwatch; i++)
        bq__tube_remove_waiter(c->watch[i]);
    bq__client_timer_update(e, c);
}

bool bq__client_deadline_soon(const bq_client_t *c, int64_t now)
{
    const bq_job_t *j = bq_heap_top(&c->reserved);
    return j && now >= j->key - BQ_SAFETY_MARGIN;
}
