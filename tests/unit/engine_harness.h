/* A test harness that drives the protocol engine without sockets or clocks.
 *
 * Each fake connection is a bq_session with an input queue (the bytes the
 * session did not consume yet, as the node keeps them) and an output buffer
 * filled by the send hook. The wake hook only counts; after every engine
 * call the harness feeds each connection's kept input again until nothing
 * moves, as the node defers that work. Time is a bq_now_t advanced by
 * hand; h_advance() and h_at() run the timers.
 *
 * h_check() verifies the engine's invariants by recounting everything from
 * the data structures (see protocol/engine_internal.h): counters, heap order
 * and positions, the per-client ready-tube heaps, waiting sets, timer queues
 * and the id table. By default it runs after every command and tick.
 *
 * h_new_logged() turns the engine's binlog hooks on: the fake log grants
 * room on demand and keeps a copy of every record. h_dump() prints the
 * engine's state as text, whole or only its durable part, for comparing two
 * engines or one engine before and after a step.
 *
 * Header-only (static functions) so that tests/unit/CMakeLists.txt, which
 * builds each test_*.c on its own, needs no change. Include after
 * <stdarg.h>, <stddef.h>, <setjmp.h> and <cmocka.h>. */
#ifndef BQ_ENGINE_HARNESS_H
#define BQ_ENGINE_HARNESS_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/engine.h"
#include "protocol/engine_internal.h"
#include "protocol/session.h"

#define H_MAX_CONNS 16
/* Start of the fake clocks: far from 0 so that no deadline is near 0. */
#define H_MONO0 (1000 * BQ_NS_PER_S)
#define H_WALL0 (INT64_C(1700000000) * BQ_NS_PER_S)
#define H_S(n) ((int64_t)(n)*BQ_NS_PER_S)
#define H_MS(n) ((int64_t)(n)*1000000)

typedef struct harness harness_t;

typedef struct h_conn {
    harness_t *h;
    bq_session_t *s; /* NULL when closed */
    char *out;       /* replies, NUL-terminated for assert_string_equal */
    size_t out_len, out_cap;
    char *in; /* input not consumed yet */
    size_t in_len, in_cap;
    unsigned wakes; /* calls of the wake hook */
} h_conn_t;

struct harness {
    bq_engine_t *e;
    bq_now_t now;
    bq_server_info_t info;
    h_conn_t conns[H_MAX_CONNS];
    unsigned ncommands; /* calls of the command hook */
    bq_op_t last_op;
    bool auto_check;   /* run h_check() after every command and tick */
    struct h_log *log; /* binlog hooks (h_new_logged), else NULL */
};

static inline void h_buf_append(char **buf, size_t *len, size_t *cap, const char *d, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 256;
        while (ncap < *len + n + 1)
            ncap *= 2;
        *buf = realloc(*buf, ncap);
        assert_non_null(*buf);
        *cap = ncap;
    }
    if (n)
        memcpy(*buf + *len, d, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static inline void h_hook_send(void *conn, const char *data, size_t len)
{
    h_conn_t *c = conn;
    h_buf_append(&c->out, &c->out_len, &c->out_cap, data, len);
}

static inline void h_hook_wake(void *conn)
{
    h_conn_t *c = conn;
    c->wakes++;
}

static inline void h_hook_info(void *arg, bq_server_info_t *info)
{
    *info = ((harness_t *)arg)->info;
}

static inline void h_hook_command(void *conn, bq_op_t op)
{
    h_conn_t *c = conn;
    c->h->ncommands++;
    c->h->last_op = op;
}

/* A new engine with no connection; max_job_size 0 stands for beanstalkd's
 * default (65535). */
static inline harness_t *h_new(uint32_t max_job_size)
{
    harness_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    bq_engine_hooks_t hooks = {.send = h_hook_send,
                               .wake = h_hook_wake,
                               .server_info = h_hook_info,
                               .command = h_hook_command,
                               .arg = h};
    bq_engine_config_t cfg = {max_job_size ? max_job_size : BQ_MAX_JOB_SIZE_DEFAULT};
    h->e = bq_engine_new(&cfg, &hooks);
    assert_non_null(h->e);
    h->now.mono = H_MONO0;
    h->now.wall = H_WALL0;
    h->auto_check = true;
    for (int i = 0; i < H_MAX_CONNS; i++)
        h->conns[i].h = h;
    return h;
}

/* ---- binlog hooks ---- */

/* One record handed to the log hook, with the entry's flags. */
typedef struct h_record {
    uint8_t *data;
    size_t len;
    uint64_t job_id;
    uint32_t prev_file;
    bool full, gone, sync, meta;
    uint32_t file; /* the segment number the hook returned */
    size_t room;   /* bytes granted by the log_room call before it, 0 if none */
} h_record_t;

/* The fake log of h_new_logged(): log_room grants while `grants` allows,
 * log appends a copy of the record and returns `file`. */
typedef struct h_log {
    h_record_t *recs;
    size_t n, cap;
    long grants;      /* < 0: always grant; else grant this many more times */
    uint32_t file;    /* what the log hook returns */
    unsigned asks;    /* calls of log_room */
    size_t last_room; /* bytes of the latest granted log_room, until a record uses it */
    bool last_is_delete;
    bool refuse_writes; /* a refusal is BQ_ROOM_REFUSED, as a cluster node that began to
                           refuse writes answers; else BQ_ROOM_FULL */
} h_log_t;

static inline bq_room_t h_hook_log_room(void *arg, size_t bytes, bool is_delete)
{
    h_log_t *l = ((harness_t *)arg)->log;
    l->asks++;
    l->last_is_delete = is_delete;
    if (l->grants == 0)
        return l->refuse_writes ? BQ_ROOM_REFUSED : BQ_ROOM_FULL;
    if (l->grants > 0)
        l->grants--;
    l->last_room = bytes;
    return BQ_ROOM_GRANTED;
}

static inline uint32_t h_hook_log(void *arg, const bq_log_entry_t *en)
{
    h_log_t *l = ((harness_t *)arg)->log;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->recs = realloc(l->recs, l->cap * sizeof *l->recs);
        assert_non_null(l->recs);
    }
    h_record_t *r = &l->recs[l->n++];
    r->data = malloc(en->len ? en->len : 1);
    assert_non_null(r->data);
    memcpy(r->data, en->data, en->len);
    r->len = en->len;
    r->job_id = en->job_id;
    r->prev_file = en->prev_file;
    r->full = en->full;
    r->gone = en->gone;
    r->sync = en->sync;
    r->meta = en->meta;
    r->file = l->file;
    r->room = l->last_room;
    l->last_room = 0;
    return l->file;
}

/* Forgets every collected record. */
static inline void h_log_clear(h_log_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->recs[i].data);
    l->n = 0;
}

/* A new engine like h_new() with the log hooks on (binlog enabled): every
 * room request is granted and records go to segment 1 until the test
 * changes h->log->grants or h->log->file. */
static inline harness_t *h_new_logged(uint32_t max_job_size)
{
    harness_t *h = h_new(max_job_size);
    bq_engine_free(h->e);
    h->log = calloc(1, sizeof *h->log);
    assert_non_null(h->log);
    h->log->grants = -1;
    h->log->file = 1;
    bq_engine_hooks_t hooks = {.send = h_hook_send,
                               .wake = h_hook_wake,
                               .server_info = h_hook_info,
                               .command = h_hook_command,
                               .log_room = h_hook_log_room,
                               .log = h_hook_log,
                               .arg = h};
    bq_engine_config_t cfg = {max_job_size ? max_job_size : BQ_MAX_JOB_SIZE_DEFAULT};
    h->e = bq_engine_new(&cfg, &hooks);
    assert_non_null(h->e);
    return h;
}

/* ---- state dumps ---- */

#define H_DUMP_DURABLE 1     /* what replay must reproduce (see h_dump) */
#define H_DUMP_NO_RESERVES 2 /* leave out reserves and timeouts, changed without a record */
#define H_DUMP_NO_IDS 4      /* leave out next_id and id_limit */

static inline int h_cmp_job_id(const void *a, const void *b)
{
    const bq_job_t *ja = *(const bq_job_t *const *)a, *jb = *(const bq_job_t *const *)b;
    return (ja->id > jb->id) - (ja->id < jb->id);
}

static inline int h_cmp_job_key(const void *a, const void *b)
{
    const bq_job_t *ja = *(const bq_job_t *const *)a, *jb = *(const bq_job_t *const *)b;
    return bq__job_key_less(ja, jb) ? -1 : bq__job_key_less(jb, ja);
}

static inline int h_cmp_tube_name(const void *a, const void *b)
{
    return strcmp((*(const bq_tube_t *const *)a)->name, (*(const bq_tube_t *const *)b)->name);
}

__attribute__((format(printf, 4, 5))) static inline void h_dumpf(char **buf, size_t *len,
                                                                 size_t *cap, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof line);
    h_buf_append(buf, len, cap, line, (size_t)n);
}

/* The wall-clock time of mono time t at h's now, wrapping instead of
 * overflowing (a fuzzed record may carry any time). */
static inline int64_t h_wall_of(const harness_t *h, int64_t t)
{
    return (int64_t)((uint64_t)h->now.wall + ((uint64_t)t - (uint64_t)h->now.mono));
}

static inline uint64_t h_fnv(const char *p, size_t n)
{
    uint64_t x = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++)
        x = (x ^ (unsigned char)p[i]) * UINT64_C(0x100000001b3);
    return x;
}

static inline void h_dump_job(const harness_t *h, const bq_job_t *j, int flags, char **b,
                              size_t *len, size_t *cap)
{
    static const char *const names[] = {"new", "ready", "reserved", "buried", "delayed"};
    bool durable = flags & H_DUMP_DURABLE;
    int st = durable && j->state == BQ_JOB_RESERVED ? BQ_JOB_READY : (int)j->state;
    h_dumpf(b, len, cap,
            "job %" PRIu64 " %s %s pri=%" PRIu32 " delay=%" PRIu32 " ttr=%" PRIu32
            " created=%" PRId64 " body=%" PRIu32 ":%016" PRIx64,
            j->id, j->tube->name, names[st], j->pri, j->delay, j->ttr, j->created_wall,
            j->body_size, h_fnv(j->body, j->body_size));
    if (!(flags & H_DUMP_NO_RESERVES))
        h_dumpf(b, len, cap, " reserves=%" PRIu32 " timeouts=%" PRIu32, j->reserves, j->timeouts);
    h_dumpf(b, len, cap, " releases=%" PRIu32 " buries=%" PRIu32 " kicks=%" PRIu32, j->releases,
            j->buries, j->kicks);
    if (j->state == BQ_JOB_DELAYED) /* as a wall-clock time: comparable across restarts */
        h_dumpf(b, len, cap, " deadline_wall=%" PRId64, h_wall_of(h, j->key));
    if (!durable)
        h_dumpf(b, len, cap, " key=%" PRId64 " file=%u", j->key, (unsigned)j->file);
    h_buf_append(b, len, cap, "\n", 1);
}

static inline void h_dump_tube(const harness_t *h, const bq_tube_t *t, int flags, char **b,
                               size_t *len, size_t *cap)
{
    bool durable = flags & H_DUMP_DURABLE;
    if (durable && !bq__tube_paused(t) && !t->buried.len)
        return;
    h_dumpf(b, len, cap, "tube %s", t->name);
    if (bq__tube_paused(t))
        h_dumpf(b, len, cap, " paused=%" PRId64 " unpause_wall=%" PRId64, t->pause_ns,
                h_wall_of(h, t->unpause_at));
    if (!durable)
        h_dumpf(b, len, cap,
                " total=%" PRIu64 " deleted=%" PRIu64 " pauses=%" PRIu64 " urgent=%" PRIu64
                " reserved=%" PRIu64 " using=%" PRIu32 " watchers=%zu waiting=%zu",
                t->total_jobs_ct, t->delete_ct, t->pause_ct, t->urgent_ct, t->reserved_ct,
                t->using_ct, t->nwatchers, t->nwaiting);
    /* the buried FIFO, in kick order */
    const bq_job_t **bj = malloc((t->buried.len + 1) * sizeof *bj);
    assert_non_null(bj);
    if (t->buried.len) {
        memcpy(bj, t->buried.items, t->buried.len * sizeof *bj);
        qsort(bj, t->buried.len, sizeof *bj, h_cmp_job_key);
        h_buf_append(b, len, cap, " buried:", 8);
    }
    for (size_t i = 0; i < t->buried.len; i++)
        h_dumpf(b, len, cap, " %" PRIu64, bj[i]->id);
    free(bj);
    h_buf_append(b, len, cap, "\n", 1);
}

/* The engine's state as text (malloc'd; free it): one line per job in id
 * order, one per tube in name order, then the engine's counters. With
 * H_DUMP_DURABLE only what a replay must reproduce: reserved jobs show as
 * ready, no heap keys, segments or tube and engine counters, and only tubes
 * that are paused or hold buried jobs. Otherwise everything but command
 * counts and clients, tubes also in list order. Delayed deadlines and pause
 * ends are shown in wall-clock time at h->now. */
static inline char *h_dump(const harness_t *h, int flags)
{
    const bq_engine_t *e = h->e;
    char *b = NULL;
    size_t len = 0, cap = 0;
    h_buf_append(&b, &len, &cap, "", 0);
    const bq_job_t **jobs = malloc((e->jobs.len + 1) * sizeof *jobs);
    assert_non_null(jobs);
    size_t n = 0;
    for (size_t i = 0; i < e->jobs.cap; i++) {
        if (e->jobs.slots[i])
            jobs[n++] = e->jobs.slots[i];
    }
    assert_int_equal(n, e->jobs.len);
    qsort(jobs, n, sizeof *jobs, h_cmp_job_id);
    for (size_t i = 0; i < n; i++)
        h_dump_job(h, jobs[i], flags, &b, &len, &cap);
    free(jobs);
    const bq_tube_t **tubes = malloc((e->ntubes + 1) * sizeof *tubes);
    assert_non_null(tubes);
    memcpy(tubes, e->tubes, e->ntubes * sizeof *tubes);
    qsort(tubes, e->ntubes, sizeof *tubes, h_cmp_tube_name);
    for (size_t i = 0; i < e->ntubes; i++)
        h_dump_tube(h, tubes[i], flags, &b, &len, &cap);
    free(tubes);
    if (flags & H_DUMP_DURABLE)
        return b;
    h_buf_append(&b, &len, &cap, "list-tubes:", 11);
    for (size_t i = 0; i < e->ntubes; i++)
        h_dumpf(&b, &len, &cap, " %s", e->tubes[i]->name);
    if (!(flags & H_DUMP_NO_IDS))
        h_dumpf(&b, &len, &cap, "\nnext_id=%" PRIu64 " id_limit=%" PRIu64, e->next_id, e->id_limit);
    h_dumpf(&b, &len, &cap,
            "\nbury_seq=%" PRIu64 " live_log_bytes=%" PRIu64 " ready=%" PRIu64 " urgent=%" PRIu64
            " reserved=%" PRIu64 " delayed=%" PRIu64 " buried=%" PRIu64 " timeouts=%" PRIu64
            " total_jobs=%" PRIu64 " draining=%d\n",
            e->bury_seq, e->live_log_bytes, e->ready_ct, e->urgent_ct, e->reserved_ct,
            e->delayed_ct, e->buried_ct, e->timeout_ct, e->total_jobs_ct, e->draining);
    return b;
}

/* ---- invariants ---- */

/* Asserts heap order and, for job heaps, heap_index == position. */
static inline void h_check_heap(const bq_heap_t *hp, bool jobs)
{
    assert_true(hp->len <= hp->cap);
    for (size_t i = 0; i < hp->len; i++) {
        if (i > 0)
            assert_false(hp->less(hp->items[i], hp->items[(i - 1) / 2]));
        if (jobs)
            assert_int_equal(((const bq_job_t *)hp->items[i])->heap_index, i);
    }
}

/* Asserts every job of heap hp is in state st, of tube t (unless NULL), and
 * is what the id table returns for its id. */
static inline void h_check_jobs(const bq_engine_t *e, const bq_heap_t *hp, int st,
                                const bq_tube_t *t)
{
    h_check_heap(hp, true);
    for (size_t i = 0; i < hp->len; i++) {
        const bq_job_t *j = hp->items[i];
        assert_int_equal(j->state, st);
        if (t)
            assert_ptr_equal(j->tube, t);
        assert_ptr_equal(bq__jobtab_find(&e->jobs, j->id), j);
        assert_true(j->id < e->next_id);
        assert_true(j->ttr >= 1);
    }
}

static inline int64_t h_min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

typedef struct h_totals {
    uint64_t ready, urgent, reserved, delayed, buried, waiting, producers, workers, jobs;
    bq_client_t *clients[H_MAX_CONNS + 1];
    size_t nclients;
} h_totals_t;

static inline void h_check_tube(const bq_engine_t *e, const bq_tube_t *t, size_t k, h_totals_t *tot)
{
    assert_ptr_equal(e->tubes[k], t);
    assert_int_equal(t->list_pos, k);
    assert_int_equal(strlen(t->name), t->name_len);
    assert_ptr_equal(bq__tube_find(e, t->name, t->name_len), t);
    h_check_jobs(e, &t->ready, BQ_JOB_READY, t);
    h_check_jobs(e, &t->delay, BQ_JOB_DELAYED, t);
    h_check_jobs(e, &t->buried, BQ_JOB_BURIED, t);
    uint64_t urgent = 0;
    for (size_t i = 0; i < t->ready.len; i++)
        urgent += ((const bq_job_t *)t->ready.items[i])->pri < BQ_URGENT_THRESHOLD;
    assert_int_equal(t->urgent_ct, urgent);
    assert_true(t->ready.cap >= bq__tube_jobs(t));
    tot->ready += t->ready.len;
    tot->urgent += urgent;
    tot->delayed += t->delay.len;
    tot->buried += t->buried.len;
    tot->jobs += t->ready.len + t->delay.len + t->buried.len;
    /* its timers: queued for delays while it has delayed jobs, and for the
     * end of its pause while paused */
    if (t->delay.len)
        assert_ptr_equal(e->delay_timers.items[t->delay_timer_pos], t);
    else
        assert_true(t->delay_timer_pos == BQ_HEAP_NOPOS);
    if (bq__tube_paused(t))
        assert_ptr_equal(e->pause_timers.items[t->pause_timer_pos], t);
    else
        assert_true(t->pause_timer_pos == BQ_HEAP_NOPOS);
    /* watch links and the waiting set */
    size_t waiting = 0;
    for (size_t i = 0; i < t->nwatchers; i++) {
        const bq_watch_t *w = t->watchers[i];
        assert_ptr_equal(w->tube, t);
        assert_int_equal(w->tube_pos, i);
        assert_ptr_equal(w->client->watch[w->client_pos], w);
        waiting += w->client->waiting;
    }
    assert_int_equal(t->nwaiting, waiting);
    assert_true(t->capwaiting >= t->nwatchers);
    for (size_t i = 0; i < t->nwaiting; i++) {
        const bq_watch_t *w = t->waiting[i];
        assert_ptr_equal(w->tube, t);
        assert_int_equal(w->wait_pos, i);
        assert_true(w->client->waiting);
    }
    /* an unpaused tube with waiters has no ready job: they would have it */
    if (t->nwaiting && !bq__tube_paused(t))
        assert_int_equal(t->ready.len, 0);
    /* a tube lives while it has jobs, users or watchers; default always */
    assert_true(t == e->default_tube || t->using_ct || t->nwatchers || bq__tube_jobs(t));
}

static inline void h_check_client(const bq_engine_t *e, const bq_client_t *c, h_totals_t *tot)
{
    assert_true(c->nwatch >= 1);
    assert_ptr_equal(bq__tube_find(e, c->use->name, c->use->name_len), c->use);
    size_t ready_tubes = 0, heap_tubes = 0;
    for (size_t i = 0; i < c->nwatch; i++) {
        const bq_watch_t *w = c->watch[i];
        assert_ptr_equal(w->client, c);
        assert_int_equal(w->client_pos, i);
        assert_ptr_equal(w->tube->watchers[w->tube_pos], w);
        bool want = w->tube->ready.len && !bq__tube_paused(w->tube);
        ready_tubes += w->tube->ready.len > 0;
        heap_tubes += want;
        if (want)
            assert_ptr_equal(c->ready.items[w->ready_pos], w);
        else
            assert_int_equal(w->ready_pos, BQ_NOPOS);
        if (c->waiting)
            assert_ptr_equal(w->tube->waiting[w->wait_pos], w);
        else
            assert_int_equal(w->wait_pos, BQ_NOPOS);
    }
    /* the ready-tube heap holds exactly the watched unpaused tubes with
     * ready jobs, ordered by each tube's best job */
    assert_int_equal(c->ready.len, heap_tubes);
    assert_int_equal(c->ready_tubes, ready_tubes);
    assert_true(c->ready.cap >= c->nwatch);
    h_check_heap(&c->ready, false);
    for (size_t i = 0; i < c->ready.len; i++)
        assert_int_equal(((const bq_watch_t *)c->ready.items[i])->ready_pos, i);
    /* a waiting client has no job it could take */
    if (c->waiting)
        assert_int_equal(c->ready.len, 0);
    else
        assert_true(c->wait_deadline == BQ_NEVER);
    h_check_jobs(e, &c->reserved, BQ_JOB_RESERVED, NULL);
    for (size_t i = 0; i < c->reserved.len; i++)
        assert_true(bq__job_reserved_by(c->reserved.items[i], c));
    int64_t key = BQ_NEVER;
    if (c->reserved.len) {
        key = ((const bq_job_t *)c->reserved.items[0])->key;
        if (c->waiting)
            key -= BQ_SAFETY_MARGIN;
    }
    if (c->waiting)
        key = h_min64(key, c->wait_deadline);
    assert_int_equal(c->timer_key, key);
    if (key == BQ_NEVER)
        assert_true(c->timer_pos == BQ_HEAP_NOPOS);
    else
        assert_ptr_equal(e->client_timers.items[c->timer_pos], c);
    tot->reserved += c->reserved.len;
    tot->jobs += c->reserved.len;
    tot->waiting += c->waiting;
    tot->producers += c->producer;
    tot->workers += c->worker;
}

/* Every client, found through the watch links (each client watches a tube). */
static inline void h_collect_clients(const bq_engine_t *e, h_totals_t *tot)
{
    for (size_t k = 0; k < e->ntubes; k++) {
        const bq_tube_t *t = e->tubes[k];
        for (size_t i = 0; i < t->nwatchers; i++) {
            bq_client_t *c = t->watchers[i]->client;
            size_t n = 0;
            while (n < tot->nclients && tot->clients[n] != c)
                n++;
            if (n == tot->nclients) {
                assert_true(tot->nclients < H_MAX_CONNS);
                tot->clients[tot->nclients++] = c;
            }
        }
    }
}

/* Reserved jobs of each tube, recounted from the clients' heaps. */
static inline void h_check_reserved_per_tube(const bq_engine_t *e, const h_totals_t *tot)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < e->ntubes; k++)
        sum += e->tubes[k]->reserved_ct;
    assert_int_equal(sum, tot->reserved);
    for (size_t n = 0; n < tot->nclients; n++) {
        const bq_heap_t *r = &tot->clients[n]->reserved;
        for (size_t i = 0; i < r->len; i++) {
            const bq_tube_t *t = ((const bq_job_t *)r->items[i])->tube;
            uint64_t count = 0;
            for (size_t m = 0; m < tot->nclients; m++) {
                const bq_heap_t *r2 = &tot->clients[m]->reserved;
                for (size_t x = 0; x < r2->len; x++)
                    count += ((const bq_job_t *)r2->items[x])->tube == t;
            }
            assert_int_equal(t->reserved_ct, count);
        }
    }
}

/* The id table holds exactly the jobs found in the structures. */
static inline void h_check_jobtab(const bq_engine_t *e, const h_totals_t *tot)
{
    const bq_jobtab_t *jt = &e->jobs;
    size_t n = 0;
    for (size_t i = 0; i < jt->cap; i++) {
        const bq_job_t *j = jt->slots[i];
        if (!j)
            continue;
        n++;
        assert_ptr_equal(bq__jobtab_find(jt, j->id), j);
        switch (j->state) {
        case BQ_JOB_READY:
            assert_ptr_equal(j->tube->ready.items[j->heap_index], j);
            break;
        case BQ_JOB_DELAYED:
            assert_ptr_equal(j->tube->delay.items[j->heap_index], j);
            break;
        case BQ_JOB_BURIED:
            assert_ptr_equal(j->tube->buried.items[j->heap_index], j);
            break;
        case BQ_JOB_RESERVED:
            break; /* checked per client by bq__job_reserved_by */
        default:
            fail_msg("job %" PRIu64 " in state %d in the id table", j->id, j->state);
        }
    }
    assert_int_equal(n, jt->len);
    assert_int_equal(n, tot->jobs);
}

/* Recounts everything and compares with the engine's structures. */
static inline void h_check(const harness_t *h)
{
    const bq_engine_t *e = h->e;
    h_totals_t tot;
    memset(&tot, 0, sizeof tot);
    assert_ptr_equal(bq__tube_find(e, "default", 7), e->default_tube);
    assert_true(e->delay_timers.cap >= e->ntubes);
    assert_true(e->pause_timers.cap >= e->ntubes);
    assert_true(e->client_timers.cap >= e->nclients);
    h_check_heap(&e->delay_timers, false);
    h_check_heap(&e->pause_timers, false);
    h_check_heap(&e->client_timers, false);
    for (size_t k = 0; k < e->ntubes; k++)
        h_check_tube(e, e->tubes[k], k, &tot);
    for (size_t i = 0; i < e->delay_timers.len; i++)
        assert_int_equal(((const bq_tube_t *)e->delay_timers.items[i])->delay_timer_pos, i);
    for (size_t i = 0; i < e->pause_timers.len; i++)
        assert_int_equal(((const bq_tube_t *)e->pause_timers.items[i])->pause_timer_pos, i);
    for (size_t i = 0; i < e->client_timers.len; i++)
        assert_int_equal(((const bq_client_t *)e->client_timers.items[i])->timer_pos, i);
    h_collect_clients(e, &tot);
    for (size_t n = 0; n < tot.nclients; n++)
        h_check_client(e, tot.clients[n], &tot);
    h_check_reserved_per_tube(e, &tot);
    h_check_jobtab(e, &tot);
    size_t open = 0;
    for (int i = 0; i < H_MAX_CONNS; i++)
        open += h->conns[i].s != NULL;
    assert_int_equal(tot.nclients, open);
    assert_int_equal(e->nclients, open);
    assert_int_equal(e->ready_ct, tot.ready);
    assert_int_equal(e->urgent_ct, tot.urgent);
    assert_int_equal(e->reserved_ct, tot.reserved);
    assert_int_equal(e->delayed_ct, tot.delayed);
    assert_int_equal(e->buried_ct, tot.buried);
    assert_int_equal(e->waiting_ct, tot.waiting);
    assert_int_equal(e->producers, tot.producers);
    assert_int_equal(e->workers, tot.workers);
}

/* ---- driving ---- */

/* Feeds every connection's kept input while it can take it, like the node:
 * a session consumes everything unless it waits in reserve or quit. */
static inline void h_pump(harness_t *h)
{
    bool progress = true;
    while (progress) {
        progress = false;
        for (int i = 0; i < H_MAX_CONNS; i++) {
            h_conn_t *c = &h->conns[i];
            if (!c->s || !c->in_len || bq_session_blocked(c->s) || bq_session_quit(c->s))
                continue;
            size_t n = bq_session_feed(c->s, c->in, c->in_len, h->now);
            assert_true(n <= c->in_len);
            if (n < c->in_len)
                assert_true(bq_session_blocked(c->s) || bq_session_quit(c->s));
            memmove(c->in, c->in + n, c->in_len - n);
            c->in_len -= n;
            progress |= n > 0;
            if (h->auto_check)
                h_check(h);
        }
    }
}

/* Opens a connection; returns its index. */
static inline int h_open(harness_t *h)
{
    for (int i = 0; i < H_MAX_CONNS; i++) {
        h_conn_t *c = &h->conns[i];
        if (!c->s) {
            c->s = bq_session_new(h->e, c);
            assert_non_null(c->s);
            c->out_len = c->in_len = 0;
            c->wakes = 0;
            if (c->out)
                c->out[0] = '\0';
            if (h->auto_check)
                h_check(h);
            return i;
        }
    }
    fail_msg("too many connections");
    return -1;
}

/* Closes connection i (reserved jobs go back to ready). */
static inline void h_close(harness_t *h, int i)
{
    h_conn_t *c = &h->conns[i];
    assert_non_null(c->s);
    bq_session_free(c->s, h->now);
    c->s = NULL;
    c->in_len = 0;
    if (h->auto_check)
        h_check(h);
    h_pump(h);
}

/* Queues n input bytes on connection i and feeds what can be fed. */
static inline void h_sendn(harness_t *h, int i, const char *data, size_t n)
{
    h_conn_t *c = &h->conns[i];
    assert_non_null(c->s);
    h_buf_append(&c->in, &c->in_len, &c->in_cap, data, n);
    h_pump(h);
}

static inline void h_send(harness_t *h, int i, const char *text)
{
    h_sendn(h, i, text, strlen(text));
}

/* printf-style h_send. */
__attribute__((format(printf, 3, 4))) static inline void h_sendf(harness_t *h, int i,
                                                                 const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof buf);
    h_sendn(h, i, buf, (size_t)n);
}

/* Runs the timers at the current time, then feeds what the wake-ups allow. */
static inline int64_t h_tick(harness_t *h)
{
    int64_t next = bq_engine_tick(h->e, h->now);
    if (h->auto_check)
        h_check(h);
    h_pump(h);
    return next;
}

/* Sets the clocks to mono (absolute, ns; the wall clock moves as much) and
 * runs the timers. */
static inline int64_t h_at(harness_t *h, int64_t mono)
{
    assert_true(mono >= h->now.mono);
    h->now.wall += mono - h->now.mono;
    h->now.mono = mono;
    return h_tick(h);
}

/* Advances both clocks by ns and runs the timers. */
static inline int64_t h_advance(harness_t *h, int64_t ns)
{
    return h_at(h, h->now.mono + ns);
}

/* The output of connection i so far (NUL-terminated). */
static inline const char *h_out(harness_t *h, int i)
{
    h_conn_t *c = &h->conns[i];
    return c->out ? c->out : "";
}

static inline void h_clear(harness_t *h, int i)
{
    h_conn_t *c = &h->conns[i];
    c->out_len = 0;
    if (c->out)
        c->out[0] = '\0';
}

/* Asserts connection i's output is exactly `expected`, then clears it;
 * a mismatch is reported at the caller's line. */
static inline void h_expect_at(harness_t *h, int i, const char *expected, const char *file,
                               int line)
{
    _assert_string_equal(h_out(h, i), expected, file, line);
    _assert_int_equal(h->conns[i].out_len, strlen(expected), file, line);
    h_clear(h, i);
}
#define h_expect(h, i, expected) h_expect_at((h), (i), (expected), __FILE__, __LINE__)

/* Sends cmd and asserts the reply is exactly `reply` (caller's line). */
static inline void h_cmd_at(harness_t *h, int i, const char *cmd, const char *reply,
                            const char *file, int line)
{
    h_clear(h, i);
    h_send(h, i, cmd);
    h_expect_at(h, i, reply, file, line);
}
#define h_cmd(h, i, cmd, reply) h_cmd_at((h), (i), (cmd), (reply), __FILE__, __LINE__)

/* Sends "put <pri> <delay> <ttr> <len>\r\n<body>\r\n"; returns the new id. */
static inline uint64_t h_put(harness_t *h, int i, uint32_t pri, uint32_t delay, uint32_t ttr,
                             const char *body)
{
    h_clear(h, i);
    h_sendf(h, i, "put %" PRIu32 " %" PRIu32 " %" PRIu32 " %zu\r\n%s\r\n", pri, delay, ttr,
            strlen(body), body);
    const char *out = h_out(h, i);
    char *end = NULL;
    uint64_t id = 0;
    if (strncmp(out, "INSERTED ", 9) == 0)
        id = strtoull(out + 9, &end, 10);
    if (!end || end == out + 9 || strcmp(end, "\r\n") != 0)
        fail_msg("put: unexpected reply \"%s\"", out);
    h_clear(h, i);
    return id;
}

/* Expected "RESERVED <id> <len>\r\n<body>\r\n" (or FOUND) as a string. */
static inline const char *h_job_reply(const char *word, uint64_t id, const char *body)
{
    static char buf[8192];
    int n = snprintf(buf, sizeof buf, "%s %" PRIu64 " %zu\r\n%s\r\n", word, id, strlen(body), body);
    assert_true(n > 0 && (size_t)n < sizeof buf);
    return buf;
}

/* Sends a stats command and returns its YAML body (static buffer), after
 * checking the "OK <n>\r\n<body>\r\n" framing. */
static inline const char *h_yaml(harness_t *h, int i, const char *cmd)
{
    static char body[1 << 17];
    h_clear(h, i);
    h_send(h, i, cmd);
    const char *out = h_out(h, i);
    size_t n = 0;
    int used = 0;
    if (sscanf(out, "OK %zu\r\n%n", &n, &used) != 1 || used == 0)
        fail_msg("%s: unexpected reply \"%s\"", cmd, out);
    assert_int_equal(h->conns[i].out_len, (size_t)used + n + 2);
    assert_memory_equal(out + used + n, "\r\n", 2);
    assert_true(n < sizeof body);
    memcpy(body, out + used, n);
    body[n] = '\0';
    h_clear(h, i);
    return body;
}

/* The value of key in a YAML body (static buffer), or NULL. */
static inline const char *h_yaml_value(const char *yaml, const char *key)
{
    static char val[512];
    size_t klen = strlen(key);
    for (const char *p = yaml; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':' && p[klen + 1] == ' ') {
            const char *v = p + klen + 2;
            size_t n = strcspn(v, "\n");
            assert_true(n < sizeof val);
            memcpy(val, v, n);
            val[n] = '\0';
            return val;
        }
    }
    return NULL;
}

/* Sends cmd and returns the integer value of key in its YAML body. */
static inline long long h_stat(harness_t *h, int i, const char *cmd, const char *key)
{
    const char *v = h_yaml_value(h_yaml(h, i, cmd), key);
    if (!v)
        fail_msg("%s: no key %s", cmd, key);
    return strtoll(v, NULL, 10);
}

/* The value of key in "stats-job <id>" (string, static buffer). */
static inline const char *h_job_stat(harness_t *h, int i, uint64_t id, const char *key)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "stats-job %" PRIu64 "\r\n", id);
    const char *v = h_yaml_value(h_yaml(h, i, cmd), key);
    if (!v)
        fail_msg("stats-job: no key %s", key);
    return v;
}

static inline long long h_job_stat_int(harness_t *h, int i, uint64_t id, const char *key)
{
    return strtoll(h_job_stat(h, i, id, key), NULL, 10);
}

/* The engine's client of connection i. */
static inline bq_client_t *h_client(harness_t *h, int i)
{
    const bq_engine_t *e = h->e;
    for (size_t k = 0; k < e->ntubes; k++) {
        const bq_tube_t *t = e->tubes[k];
        for (size_t n = 0; n < t->nwatchers; n++) {
            if (t->watchers[n]->client->conn == &h->conns[i])
                return t->watchers[n]->client;
        }
    }
    fail_msg("no client for connection %d", i);
    return NULL;
}

/* The live job with this id, or NULL. */
static inline bq_job_t *h_job(harness_t *h, uint64_t id)
{
    return bq__jobtab_find(&h->e->jobs, id);
}

static inline bool h_blocked(harness_t *h, int i)
{
    return bq_session_blocked(h->conns[i].s);
}

/* Checks the invariants, closes every connection (checking again after
 * each) and frees everything. */
static inline void h_done(harness_t *h)
{
    h_check(h);
    for (int i = 0; i < H_MAX_CONNS; i++) {
        if (h->conns[i].s) {
            bq_session_free(h->conns[i].s, h->now);
            h->conns[i].s = NULL;
            h_check(h);
        }
    }
    assert_int_equal(h->e->nclients, 0);
    assert_int_equal(h->e->reserved_ct, 0);
    bq_engine_free(h->e);
    for (int i = 0; i < H_MAX_CONNS; i++) {
        free(h->conns[i].out);
        free(h->conns[i].in);
    }
    if (h->log) {
        h_log_clear(h->log);
        free(h->log->recs);
        free(h->log);
    }
    free(h);
}

#endif
