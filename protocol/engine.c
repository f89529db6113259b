/* Engine lifetime and settings: creation with the `default` tube, teardown
 * of everything still alive, a reset to that first state, drain mode and
 * the job size limit. The
 * commands live in commands.c and put.c, the timers in timers.c. */
#include "protocol/engine_internal.h"

#include <stdlib.h>

#define TUBE_HASH_CAP 64

bq_engine_t *bq_engine_new(const bq_engine_config_t *cfg, const bq_engine_hooks_t *hooks)
{
    bq_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->hooks = *hooks;
    e->logging = hooks->log && hooks->log_room;
    e->max_job_size = cfg->max_job_size;
    e->next_id = e->id_used = 1;
    bq__timers_init(e);
    e->tube_hash_cap = TUBE_HASH_CAP;
    e->tube_hash = calloc(e->tube_hash_cap, sizeof *e->tube_hash);
    if (e->tube_hash)
        e->default_tube = bq__tube_get(e, "default", 7);
    if (!e->default_tube) {
        bq_engine_free(e);
        return NULL;
    }
    return e;
}

/* Frees every job of heap h without touching counters (teardown only). */
static void free_jobs(bq_heap_t *h)
{
    for (size_t i = 0; i < h->len; i++)
        free(h->items[i]);
    h->len = 0;
}

/* Frees everything e holds, not e itself. */
static void free_contents(bq_engine_t *e)
{
    /* With every client closed, no job is reserved and no tube is watched:
     * each job sits in one heap of its tube. */
    while (e->ntubes) {
        bq_tube_t *t = e->tubes[e->ntubes - 1];
        free_jobs(&t->ready);
        free_jobs(&t->delay);
        free_jobs(&t->buried);
        bq__tube_destroy(e, t);
    }
    bq__jobtab_free(&e->jobs);
    free(e->logbuf);
    free(e->pending_pauses);
    bq_heap_free(&e->delay_timers);
    bq_heap_free(&e->pause_timers);
    bq_heap_free(&e->client_timers);
    free(e->tube_hash);
    free(e->tubes);
}

void bq_engine_free(bq_engine_t *e)
{
    if (!e)
        return;
    free_contents(e);
    free(e);
}

int bq_engine_reset(bq_engine_t *e)
{
    bq_engine_config_t cfg = {.max_job_size = e->max_job_size};
    bq_engine_t *fresh = bq_engine_new(&cfg, &e->hooks);
    if (!fresh)
        return -1;
    bool draining = e->draining, paused = e->writes_paused;
    free_contents(e);
    *e = *fresh; /* nothing inside points back at the engine */
    free(fresh);
    e->draining = draining;
    e->writes_paused = paused;
    return 0;
}

void bq_engine_set_draining(bq_engine_t *e, bool draining)
{
    e->draining = draining;
}

bool bq_engine_draining(const bq_engine_t *e)
{
    return e->draining;
}

void bq_engine_set_writes_paused(bq_engine_t *e, bool paused)
{
    e->writes_paused = paused;
}

bool bq_engine_writes_paused(const bq_engine_t *e)
{
    return e->writes_paused;
}

uint32_t bq_engine_max_job_size(const bq_engine_t *e)
{
    return e->max_job_size;
}
