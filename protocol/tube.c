/* Tubes: the registry by name (a chained hash table plus the list that
 * gives list-tubes its order), tube lifetime, watch links between clients
 * and tubes, each tube's set of waiting clients, and the upkeep of every
 * watcher's ready-tube heap when a tube's best job changes.
 *
 * A tube lives while it has jobs, users or watchers; `default` always lives.
 * The tube list and each client's watch list reproduce beanstalkd's
 * multiset order: append, and on removal the last element fills the hole. */
#include "protocol/engine_internal.h"

#include <stdlib.h>
#include <string.h>

static size_t name_hash(const char *name, size_t len)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * UINT64_C(0x100000001b3);
    return (size_t)h;
}

bq_tube_t *bq__tube_find(const bq_engine_t *e, const char *name, size_t len)
{
    bq_tube_t *t = e->tube_hash[name_hash(name, len) & (e->tube_hash_cap - 1)];
    for (; t; t = t->hash_next) {
        if (t->name_len == len && memcmp(t->name, name, len) == 0)
            return t;
    }
    return NULL;
}

static void hash_link(bq_engine_t *e, bq_tube_t *t)
{
    bq_tube_t **b = &e->tube_hash[name_hash(t->name, t->name_len) & (e->tube_hash_cap - 1)];
    t->hash_next = *b;
    *b = t;
}

/* Doubles the bucket array when tubes outnumber buckets; best effort. */
static void hash_grow(bq_engine_t *e)
{
    if (e->ntubes < e->tube_hash_cap)
        return;
    bq_tube_t **nb = calloc(e->tube_hash_cap * 2, sizeof *nb);
    if (!nb)
        return;
    free(e->tube_hash);
    e->tube_hash = nb;
    e->tube_hash_cap *= 2;
    for (size_t i = 0; i < e->ntubes; i++)
        hash_link(e, e->tubes[i]);
}

static bool watch_less(const void *a, const void *b)
{
    const bq_watch_t *wa = a, *wb = b;
    return bq__job_pri_less(wa->tube->ready.items[0], wb->tube->ready.items[0]);
}

static void watch_setpos(void *w, size_t pos)
{
    ((bq_watch_t *)w)->ready_pos = (uint32_t)pos;
}

void bq__client_ready_init(bq_heap_t *h)
{
    bq_heap_init(h, watch_less, watch_setpos);
}

static bq_tube_t *tube_new(const char *name, size_t len)
{
    bq_tube_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    memcpy(t->name, name, len);
    t->name_len = len;
    bq_heap_init(&t->ready, bq__job_pri_less, bq__job_setpos);
    bq_heap_init(&t->delay, bq__job_key_less, bq__job_setpos);
    bq_heap_init(&t->buried, bq__job_key_less, bq__job_setpos);
    t->delay_timer_pos = BQ_HEAP_NOPOS;
    t->pause_timer_pos = BQ_HEAP_NOPOS;
    return t;
}

bq_tube_t *bq__tube_get(bq_engine_t *e, const char *name, size_t len)
{
    bq_tube_t *t = bq__tube_find(e, name, len);
    if (t)
        return t;
    if (e->ntubes == e->captubes) {
        size_t cap = e->captubes ? e->captubes * 2 : 16;
        bq_tube_t **a = realloc(e->tubes, cap * sizeof *a);
        if (!a)
            return NULL;
        e->tubes = a;
        e->captubes = cap;
    }
    if (bq__timers_reserve_tube(e) != 0)
        return NULL;
    t = tube_new(name, len);
    if (!t)
        return NULL;
    t->list_pos = e->ntubes;
    e->tubes[e->ntubes++] = t;
    hash_link(e, t);
    hash_grow(e);
    return t;
}

uint64_t bq__tube_jobs(const bq_tube_t *t)
{
    return t->ready.len + t->delay.len + t->buried.len + t->reserved_ct;
}

bool bq__tube_paused(const bq_tube_t *t)
{
    return t->pause_ns > 0;
}

void bq__tube_destroy(bq_engine_t *e, bq_tube_t *t)
{
    bq_tube_t **b = &e->tube_hash[name_hash(t->name, t->name_len) & (e->tube_hash_cap - 1)];
    while (*b != t)
        b = &(*b)->hash_next;
    *b = t->hash_next;
    bq_tube_t *last = e->tubes[--e->ntubes];
    e->tubes[t->list_pos] = last;
    last->list_pos = t->list_pos;
    if (t->delay_timer_pos != BQ_HEAP_NOPOS)
        bq_heap_remove(&e->delay_timers, t->delay_timer_pos);
    if (t->pause_timer_pos != BQ_HEAP_NOPOS)
        bq_heap_remove(&e->pause_timers, t->pause_timer_pos);
    bq_heap_free(&t->ready);
    bq_heap_free(&t->delay);
    bq_heap_free(&t->buried);
    free(t->watchers);
    free(t->waiting);
    free(t);
}

void bq__tube_release(bq_engine_t *e, bq_tube_t *t)
{
    if (t == e->default_tube || t->using_ct || t->nwatchers || bq__tube_jobs(t))
        return;
    bq__tube_destroy(e, t);
}

/* Grows an array of watch links to hold n; 0 or -1. */
static int grow_links(bq_watch_t ***a, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 4;
    while (ncap < n)
        ncap *= 2;
    bq_watch_t **na = realloc(*a, ncap * sizeof *na);
    if (!na)
        return -1;
    *a = na;
    *cap = ncap;
    return 0;
}

int bq__watch_add(bq_engine_t *e, bq_client_t *c, bq_tube_t *t)
{
    (void)e;
    /* waiting holds at most every watcher, so adding waiters never allocates */
    if (grow_links(&c->watch, &c->capwatch, c->nwatch + 1) != 0 ||
        grow_links(&t->watchers, &t->capwatchers, t->nwatchers + 1) != 0 ||
        grow_links(&t->waiting, &t->capwaiting, t->nwatchers + 1) != 0 ||
        bq_heap_reserve(&c->ready, c->nwatch + 1) != 0)
        return -1;
    bq_watch_t *w = malloc(sizeof *w);
    if (!w)
        return -1;
    *w = (bq_watch_t){c, t, (uint32_t)c->nwatch, (uint32_t)t->nwatchers, BQ_NOPOS, BQ_NOPOS};
    c->watch[c->nwatch++] = w;
    t->watchers[t->nwatchers++] = w;
    if (t->ready.len) {
        c->ready_tubes++;
        if (!bq__tube_paused(t))
            bq_heap_insert(&c->ready, w);
    }
    return 0;
}

void bq__watch_remove(bq_engine_t *e, bq_watch_t *w)
{
    (void)e;
    bq_client_t *c = w->client;
    bq_tube_t *t = w->tube;
    bq__tube_remove_waiter(w);
    if (w->ready_pos != BQ_NOPOS)
        bq_heap_remove(&c->ready, w->ready_pos);
    if (t->ready.len)
        c->ready_tubes--;
    bq_watch_t *last = c->watch[--c->nwatch];
    c->watch[w->client_pos] = last;
    last->client_pos = w->client_pos;
    last = t->watchers[--t->nwatchers];
    t->watchers[w->tube_pos] = last;
    last->tube_pos = w->tube_pos;
    free(w);
}

bq_watch_t *bq__watch_find(const bq_client_t *c, const bq_tube_t *t)
{
    if (c->nwatch <= t->nwatchers) {
        for (size_t i = 0; i < c->nwatch; i++) {
            if (c->watch[i]->tube == t)
                return c->watch[i];
        }
    } else {
        for (size_t i = 0; i < t->nwatchers; i++) {
            if (t->watchers[i]->client == c)
                return t->watchers[i];
        }
    }
    return NULL;
}

void bq__tube_ready_changed(bq_tube_t *t, bool was_empty, bool top_changed)
{
    bool empty = t->ready.len == 0;
    for (size_t i = 0; i < t->nwatchers; i++) {
        bq_watch_t *w = t->watchers[i];
        bq_client_t *c = w->client;
        if (was_empty && !empty) {
            c->ready_tubes++;
            if (!bq__tube_paused(t))
                bq_heap_insert(&c->ready, w); /* room reserved by bq__watch_add */
        } else if (!was_empty && empty) {
            c->ready_tubes--;
            if (w->ready_pos != BQ_NOPOS)
                bq_heap_remove(&c->ready, w->ready_pos);
        } else if (top_changed && w->ready_pos != BQ_NOPOS) {
            bq_heap_fix(&c->ready, w->ready_pos);
        }
    }
}

void bq__tube_pause_changed(bq_tube_t *t)
{
    bool paused = bq__tube_paused(t);
    for (size_t i = 0; i < t->nwatchers; i++) {
        bq_watch_t *w = t->watchers[i];
        if (paused && w->ready_pos != BQ_NOPOS)
            bq_heap_remove(&w->client->ready, w->ready_pos);
        else if (!paused && t->ready.len && w->ready_pos == BQ_NOPOS)
            bq_heap_insert(&w->client->ready, w);
    }
}

/* Removes the waiting entry at pos; the last entry fills the hole. */
static void waiting_delete(bq_tube_t *t, size_t pos)
{
    bq_watch_t *w = t->waiting[pos];
    bq_watch_t *last = t->waiting[--t->nwaiting];
    t->waiting[pos] = last;
    last->wait_pos = (uint32_t)pos;
    w->wait_pos = BQ_NOPOS;
}

void bq__tube_add_waiter(bq_watch_t *w)
{
    bq_tube_t *t = w->tube;
    w->wait_pos = (uint32_t)t->nwaiting;
    t->waiting[t->nwaiting++] = w; /* room reserved by bq__watch_add */
}

void bq__tube_remove_waiter(bq_watch_t *w)
{
    if (w->wait_pos != BQ_NOPOS)
        waiting_delete(w->tube, w->wait_pos);
}

bq_client_t *bq__tube_take_waiter(bq_tube_t *t)
{
    /* beanstalkd's ms_take: "mostly oldest first" with a rotating cursor. */
    size_t pos = t->wait_last % t->nwaiting;
    bq_client_t *c = t->waiting[pos]->client;
    waiting_delete(t, pos);
    t->wait_last = pos + 1;
    return c;
}
