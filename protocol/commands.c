/* The beanstalk commands other than put: one small handler per command,
 * dispatched through a table. Arguments were validated by the parser, so
 * each handler counts its command first (beanstalkd counts a command once its
 * arguments parse) and then follows beanstalkd 1.13's reply rules, without
 * the reference's known bugs: a failed release or bury leaves the job
 * reserved instead of orphaning it. */
#include "protocol/engine_internal.h"

#include <inttypes.h>

typedef void handler_fn(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now);

static void set_worker(bq_engine_t *e, bq_client_t *c)
{
    if (!c->worker) {
        c->worker = true;
        e->workers++;
    }
}

static void send_found(bq_engine_t *e, bq_client_t *c, const bq_job_t *j)
{
    if (j)
        bq__send_job(e, c, "FOUND", j);
    else
        BQ_SEND(e, c, "NOT_FOUND\r\n");
}

static void cmd_peek(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)now;
    send_found(e, c, bq__jobtab_find(&e->jobs, cmd->id));
}

static void cmd_peek_ready(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    send_found(e, c, bq_heap_top(&c->use->ready));
}

static void cmd_peek_delayed(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    send_found(e, c, bq_heap_top(&c->use->delay));
}

static void cmd_peek_buried(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    send_found(e, c, bq_heap_top(&c->use->buried));
}

static void cmd_reserve(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    set_worker(e, c);
    /* The reference's pre-check ignores pause: any watched ready job, even in
     * a paused tube, means "wait" rather than DEADLINE_SOON. */
    if (bq__client_deadline_soon(c, now.mono) && c->ready_tubes == 0) {
        BQ_SEND(e, c, "DEADLINE_SOON\r\n");
        return;
    }
    if (bq_heap_reserve(&c->reserved, c->reserved.len + 1) != 0) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq_watch_t *w = bq_heap_top(&c->ready);
    if (w) {
        bq_job_t *j = bq_heap_top(&w->tube->ready);
        /* beanstalkd briefly makes c the tube's only waiter and takes it,
         * which leaves the tube's take cursor at 1. */
        w->tube->wait_last = 1;
        bq__job_unlink(e, NULL, j);
        bq__job_reserve(e, c, j, now);
    } else if (c->halfclosed) {
        BQ_SEND(e, c, "TIMED_OUT\r\n");
    } else {
        int64_t deadline = BQ_NEVER;
        if (cmd->timeout >= 0)
            deadline = now.mono + (int64_t)cmd->timeout * BQ_NS_PER_S;
        bq__client_wait(e, c, deadline);
    }
}

static void cmd_reserve_job(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = bq__jobtab_find(&e->jobs, cmd->id);
    if (!j || j->state == BQ_JOB_RESERVED) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if (bq_heap_reserve(&c->reserved, c->reserved.len + 1) != 0) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__job_unlink(e, NULL, j);
    set_worker(e, c);
    bq__job_reserve(e, c, j, now);
}

/* The job id if c may act on it as its reserver, else NULL. */
static bq_job_t *find_reserved(bq_engine_t *e, bq_client_t *c, uint64_t id)
{
    bq_job_t *j = bq__jobtab_find(&e->jobs, id);
    return j && bq__job_reserved_by(j, c) ? j : NULL;
}

static void cmd_delete(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)now;
    bq_job_t *j = bq__jobtab_find(&e->jobs, cmd->id);
    if (!j || (j->state == BQ_JOB_RESERVED && !bq__job_reserved_by(j, c))) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if (!bq__log_room(e, BQ_LOG_DELETE_MAX, true)) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__job_unlink(e, c, j);
    j->tube->delete_ct++;
    bq__log_delete(e, j);
    bq__job_destroy(e, j);
    BQ_SEND(e, c, "DELETED\r\n");
}

static void cmd_release(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = find_reserved(e, c, cmd->id);
    if (!j) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if ((cmd->delay && bq_heap_reserve(&j->tube->delay, j->tube->delay.len + 1) != 0) ||
        !bq__log_room(e, BQ_LOG_UPDATE_MAX, false)) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__job_unlink(e, c, j);
    j->pri = cmd->pri;
    j->delay = cmd->delay;
    j->releases++;
    if (cmd->delay) {
        bq__job_delay(e, j, now); /* cannot fail: room reserved */
        bq__log_update(e, j, now);
    } else {
        bq__log_update(e, j, now); /* as ready, before a waiter may get it */
        bq__job_ready(e, j, now);
    }
    BQ_SEND(e, c, "RELEASED\r\n");
}

static void cmd_bury(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = find_reserved(e, c, cmd->id);
    if (!j) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if (bq_heap_reserve(&j->tube->buried, j->tube->buried.len + 1) != 0 ||
        !bq__log_room(e, BQ_LOG_UPDATE_MAX, false)) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__job_unlink(e, c, j);
    j->pri = cmd->pri;
    j->buries++;
    bq__job_bury(e, j); /* cannot fail: room reserved */
    bq__log_update(e, j, now);
    BQ_SEND(e, c, "BURIED\r\n");
}

static void cmd_touch(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = find_reserved(e, c, cmd->id);
    if (!j) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    j->key = now.mono + (int64_t)j->ttr * BQ_NS_PER_S;
    bq_heap_fix(&c->reserved, j->heap_index);
    bq__client_timer_update(e, c);
    BQ_SEND(e, c, "TOUCHED\r\n");
}

static void kick_one(bq_engine_t *e, bq_job_t *j, bq_now_t now)
{
    bq__job_unlink(e, NULL, j);
    j->kicks++;
    j->state = BQ_JOB_READY; /* logged as ready before a waiter may get it */
    bq__log_update(e, j, now);
    bq__job_ready(e, j, now);
}

static void cmd_kick(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_tube_t *t = c->use;
    /* Buried jobs first (FIFO); only when there are none, delayed jobs by
     * deadline. */
    bq_heap_t *from = t->buried.len ? &t->buried : &t->delay;
    uint32_t i = 0;
    /* Counts jobs really kicked: beanstalkd counted attempts on a full disk. */
    while (i < cmd->count && from->len && bq__log_room(e, BQ_LOG_UPDATE_MAX, false)) {
        kick_one(e, bq_heap_top(from), now);
        i++;
    }
    /* None kicked although some wait: the log refused (a full disk, writes
     * refused), which KICKED 0 would hide as "nothing to kick". */
    if (i == 0 && cmd->count > 0 && from->len) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__sendf(e, c, "KICKED %" PRIu32 "\r\n", i);
}

static void cmd_kick_job(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = bq__jobtab_find(&e->jobs, cmd->id);
    if (!j || (j->state != BQ_JOB_BURIED && j->state != BQ_JOB_DELAYED)) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if (!bq__log_room(e, BQ_LOG_UPDATE_MAX, false)) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    kick_one(e, j, now);
    BQ_SEND(e, c, "KICKED\r\n");
}

static void cmd_stats(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd;
    bq__stats_server(e, c, now);
}

static void cmd_stats_job(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *j = bq__jobtab_find(&e->jobs, cmd->id);
    if (j)
        bq__stats_job(e, c, j, now);
    else
        BQ_SEND(e, c, "NOT_FOUND\r\n");
}

static void cmd_stats_tube(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_tube_t *t = bq__tube_find(e, cmd->name, cmd->name_len);
    if (t)
        bq__stats_tube(e, c, t, now);
    else
        BQ_SEND(e, c, "NOT_FOUND\r\n");
}

static void cmd_use(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)now;
    bq_tube_t *t = bq__tube_get(e, cmd->name, cmd->name_len);
    if (!t) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq_tube_t *old = c->use;
    c->use = t;
    t->using_ct++;
    old->using_ct--;
    bq__tube_release(e, old);
    bq__sendf(e, c, "USING %s\r\n", t->name);
}

static void cmd_watch(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)now;
    bq_tube_t *t = bq__tube_get(e, cmd->name, cmd->name_len);
    if (!t || (!bq__watch_find(c, t) && bq__watch_add(e, c, t) != 0)) {
        if (t)
            bq__tube_release(e, t);
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bq__sendf(e, c, "WATCHING %zu\r\n", c->nwatch);
}

static void cmd_ignore(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)now;
    bq_tube_t *t = bq__tube_find(e, cmd->name, cmd->name_len);
    bq_watch_t *w = t ? bq__watch_find(c, t) : NULL;
    if (w && c->nwatch < 2) {
        BQ_SEND(e, c, "NOT_IGNORED\r\n");
        return;
    }
    if (w) {
        bq__watch_remove(e, w);
        bq__tube_release(e, t);
    }
    bq__sendf(e, c, "WATCHING %zu\r\n", c->nwatch);
}

static void cmd_list_tubes(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    bq__stats_list_tubes(e, c);
}

static void cmd_list_tube_used(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    bq__sendf(e, c, "USING %s\r\n", c->use->name);
}

static void cmd_list_watched(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    (void)cmd, (void)now;
    bq__stats_list_watched(e, c);
}

static void cmd_pause_tube(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    if (!bq_tube_name_valid(cmd->name, cmd->name_len)) {
        BQ_SEND(e, c, "BAD_FORMAT\r\n");
        return;
    }
    bq_tube_t *t = bq__tube_find(e, cmd->name, cmd->name_len);
    if (!t) {
        BQ_SEND(e, c, "NOT_FOUND\r\n");
        return;
    }
    if (!bq__log_room(e, t->name_len + 64, false)) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    bool was_paused = bq__tube_paused(t);
    /* A zero delay still pauses for 1 ns, so waiters wake at the next tick. */
    int64_t d = cmd->delay ? (int64_t)cmd->delay * BQ_NS_PER_S : 1;
    t->pause_ns = d;
    t->unpause_at = now.mono + d;
    t->pause_ct++;
    if (!was_paused)
        bq__tube_pause_changed(t);
    bq__tube_timer_update(e, t);
    bq__log_pause(e, t, now);
    BQ_SEND(e, c, "PAUSED\r\n");
}

static handler_fn *const handlers[BQ_OP_COUNT] = {
    [BQ_OP_PEEK] = cmd_peek,
    [BQ_OP_PEEK_READY] = cmd_peek_ready,
    [BQ_OP_PEEK_DELAYED] = cmd_peek_delayed,
    [BQ_OP_PEEK_BURIED] = cmd_peek_buried,
    [BQ_OP_RESERVE] = cmd_reserve,
    [BQ_OP_RESERVE_TIMEOUT] = cmd_reserve,
    [BQ_OP_RESERVE_JOB] = cmd_reserve_job,
    [BQ_OP_DELETE] = cmd_delete,
    [BQ_OP_RELEASE] = cmd_release,
    [BQ_OP_BURY] = cmd_bury,
    [BQ_OP_KICK] = cmd_kick,
    [BQ_OP_KICK_JOB] = cmd_kick_job,
    [BQ_OP_TOUCH] = cmd_touch,
    [BQ_OP_STATS] = cmd_stats,
    [BQ_OP_STATS_JOB] = cmd_stats_job,
    [BQ_OP_STATS_TUBE] = cmd_stats_tube,
    [BQ_OP_USE] = cmd_use,
    [BQ_OP_WATCH] = cmd_watch,
    [BQ_OP_IGNORE] = cmd_ignore,
    [BQ_OP_LIST_TUBES] = cmd_list_tubes,
    [BQ_OP_LIST_TUBE_USED] = cmd_list_tube_used,
    [BQ_OP_LIST_TUBES_WATCHED] = cmd_list_watched,
    [BQ_OP_PAUSE_TUBE] = cmd_pause_tube,
};

void bq_engine_exec(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now)
{
    handler_fn *h = cmd->op < BQ_OP_COUNT ? handlers[cmd->op] : NULL;
    if (!h) {
        BQ_SEND(e, c, "UNKNOWN_COMMAND\r\n");
        return;
    }
    e->op_ct[cmd->op]++;
    h(e, c, cmd, now);
}
