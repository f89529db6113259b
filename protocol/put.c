/* The put command in two halves around its body: bq_engine_put_begin() runs
 * the checks that beanstalkd makes on the command line, in its order, and
 * allocates the job (taking its id, as beanstalkd does); bq_engine_put_finish()
 * runs the checks on the completed body and stores the job. */
#include "protocol/engine_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

bq_put_start_t bq_engine_put_begin(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd,
                                   bq_now_t now, bq_job_t **job)
{
    e->op_ct[BQ_OP_PUT]++;
    *job = NULL;
    if (cmd->bytes > e->max_job_size)
        return BQ_PUT_TOO_BIG;
    if (cmd->put_trailing) {
        BQ_SEND(e, c, "BAD_FORMAT\r\n");
        return BQ_PUT_BAD_FORMAT;
    }
    if (!c->producer) {
        c->producer = true;
        e->producers++;
    }
    bq_job_t *j = malloc(sizeof *j + (size_t)cmd->bytes + 2);
    if (!j)
        return BQ_PUT_NO_MEMORY;
    memset(j, 0, sizeof *j);
    j->id = bq__take_id(e);
    if (!j->id) {
        free(j);
        /* The log refused the id reservation because the node refuses
         * writes (a cluster primary fenced since the last feed, or one
         * just in office): the reply drain mode gives, as put_finish. */
        return e->log_refused ? BQ_PUT_DRAINING : BQ_PUT_NO_MEMORY;
    }
    j->created_wall = now.wall;
    j->pri = cmd->pri;
    j->delay = cmd->delay;
    j->ttr = cmd->ttr ? cmd->ttr : 1;
    j->body_size = cmd->bytes + 2;
    j->heap_index = BQ_NOPOS;
    j->state = BQ_JOB_NEW;
    *job = j;
    return BQ_PUT_READ_BODY;
}

char *bq_job_body(bq_job_t *j)
{
    return j->body;
}

size_t bq_job_body_size(const bq_job_t *j)
{
    return j->body_size;
}

void bq_engine_put_abort(bq_engine_t *e, bq_job_t *job)
{
    (void)e;
    free(job);
}

/* Makes room for j in the id table, its tube's heaps and the log; 0 or -1. */
static int reserve_room(bq_engine_t *e, bq_tube_t *t, const bq_job_t *j)
{
    if (bq__jobtab_reserve(&e->jobs) != 0)
        return -1;
    if (bq_heap_reserve(&t->ready, bq__tube_jobs(t) + 1) != 0)
        return -1;
    if (j->delay && bq_heap_reserve(&t->delay, t->delay.len + 1) != 0)
        return -1;
    return bq__log_room(e, bq__log_full_max(j), false) ? 0 : -1;
}

void bq_engine_put_finish(bq_engine_t *e, bq_client_t *c, bq_job_t *j, bq_now_t now)
{
    if (memcmp(j->body + j->body_size - 2, "\r\n", 2) != 0) {
        free(j);
        BQ_SEND(e, c, "EXPECTED_CRLF\r\n");
        return;
    }
    if (e->draining) {
        free(j);
        BQ_SEND(e, c, "DRAINING\r\n");
        return;
    }
    bq_tube_t *t = c->use;
    j->tube = t;
    if (reserve_room(e, t, j) != 0) {
        free(j);
        /* The log may refuse because the node just began to refuse writes
         * (a cluster primary fenced meanwhile): the client gets the reply
         * it would have got had draining been set already. */
        if (e->log_refused)
            BQ_SEND(e, c, "DRAINING\r\n");
        else
            BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__jobtab_insert(&e->jobs, j);
    e->total_jobs_ct++;
    t->total_jobs_ct++;
    e->live_log_bytes += bq__log_full_max(j);
    uint64_t id = j->id;
    if (j->delay) {
        bq__job_delay(e, j, now); /* cannot fail: room reserved */
        bq__log_full(e, j, now);
    } else {
        /* Logged (as ready) before a waiting client may be handed the job. */
        bq__log_full(e, j, now);
        bq__job_ready(e, j, now);
    }
    bq__sendf(e, c, "INSERTED %" PRIu64 "\r\n", id);
}
