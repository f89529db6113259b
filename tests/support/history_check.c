/* The checker of history.h (its rules: docs/testing.md, "The history
 * checker"). It works on sorted index arrays built per check (by body, by
 * id, deletes by id, sightings by time and by id), so a check costs
 * O(n log n) in the length of the whole history. The job-state model is in
 * history_model.c. */
#define _GNU_SOURCE /* vasprintf */

#include "tests/support/history_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bqh__cmp_ref(const void *a, const void *b)
{
    const ref_t *x = a, *y = b;
    if (x->k != y->k)
        return (x->k > y->k) - (x->k < y->k);
    return (x->op > y->op) - (x->op < y->op);
}

int bqh__cmp_body_len(const op_t *x, const char *body, size_t len)
{
    size_t n = x->len < len ? x->len : len;
    int c = memcmp(x->body, body, n);
    return c ? c : (x->len > len) - (x->len < len);
}

static int cmp_put_body(const void *a, const void *b, void *ops)
{
    const op_t *x = (const op_t *)ops + *(const size_t *)a,
               *y = (const op_t *)ops + *(const size_t *)b;
    return bqh__cmp_body_len(x, y->body, y->len);
}

/* The put op with this body, or SIZE_MAX. */
static size_t put_by_body(const check_t *c, const char *body, size_t len)
{
    size_t lo = 0, hi = c->nputs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = bqh__cmp_body_len(&c->h->ops[c->by_body[mid]], body, len);
        if (r == 0)
            return c->by_body[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

/* Index of the first key >= k in keys[0..n) (sorted by bqh__cmp_ref). */
static size_t lower_bound(const ref_t *keys, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (keys[mid].k < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t bqh__put_by_id(const check_t *c, uint64_t id)
{
    size_t i = lower_bound(c->by_id, c->nids, id);
    return i < c->nids && c->by_id[i].k == id ? c->by_id[i].op : SIZE_MAX;
}

double bqh__rel(const bqh_history_t *h, uint64_t t)
{
    return t >= h->t0 ? (double)(t - h->t0) / 1e9 : -(double)(h->t0 - t) / 1e9;
}

void bqh__flag(check_t *c, bqh_problem_t kind, uint64_t id, const char *fmt, ...)
{
    for (size_t i = 0; id && i < c->nflags; i++)
        if (c->flags[i].k == id && c->flags[i].op == (size_t)kind)
            return;
    if (c->nflags == c->flagcap) {
        size_t cap = c->flagcap ? c->flagcap * 2 : 64;
        ref_t *p = realloc(c->flags, cap * sizeof *p);
        if (!p)
            abort();
        c->flags = p;
        c->flagcap = cap;
    }
    c->flags[c->nflags++] = (ref_t){id, (size_t)kind};
    c->rep->problems[kind]++;
    if (c->rep->nbad < BQH_REPORT_IDS && c->rep->problems[kind] <= BQH_REPORT_IDS / 4) {
        va_list ap;
        va_start(ap, fmt);
        c->rep->bad[c->rep->nbad].id = id;
        c->rep->bad[c->rep->nbad].kind = kind;
        vsnprintf(c->rep->bad[c->rep->nbad].why, sizeof c->rep->bad[0].why, fmt, ap);
        va_end(ap);
        c->rep->nbad++;
    }
}

/* Adds the snapshot's jobs to the history as observations. */
static void add_snapshot(check_t *c)
{
    for (size_t i = 0; c->snap && i < c->snap->n; i++) {
        const snap_job_t *j = &c->snap->jobs[i];
        op_t o = {.sent = j->at,
                  .reply = j->at,
                  .id = j->id,
                  .worker = BQH_VERIFIER,
                  .kind = OP_SEEN,
                  .out = BQH_ACKED,
                  .check = c->number,
                  .body = bqh__copy_bytes(j->body, j->len),
                  .len = j->len,
                  .tube = j->has_job ? bqh__tube_locked(c->h, j->tube) : 0,
                  .pri = j->pri,
                  .delay = j->delay,
                  .state = j->state};
        if (!o.body)
            abort();
        bqh__append_locked(c->h, &o);
    }
}

/* Builds the sorted indexes. 0 or -1 (out of memory). */
static int build_indexes(check_t *c)
{
    const bqh_history_t *h = c->h;
    c->by_body = malloc((h->n + 1) * sizeof *c->by_body);
    c->by_id = malloc((h->n + 1) * sizeof *c->by_id);
    c->dels = malloc((h->n + 1) * sizeof *c->dels);
    c->seen = malloc((h->n + 1) * sizeof *c->seen);
    c->sights = malloc((h->n + 1) * sizeof *c->sights);
    c->faults = malloc((h->n + 1) * sizeof *c->faults);
    c->eff_id = calloc(h->n + 1, sizeof *c->eff_id);
    c->acked_at = calloc(h->n + 1, sizeof *c->acked_at);
    if (!c->by_body || !c->by_id || !c->dels || !c->seen || !c->sights || !c->faults ||
        !c->eff_id || !c->acked_at)
        return -1;
    for (size_t i = 0; i < h->n; i++) {
        const op_t *o = &h->ops[i];
        if (o->kind == OP_PUT)
            c->by_body[c->nputs++] = i;
        else if (o->kind == OP_DELETE)
            c->dels[c->ndels++] = (ref_t){o->id, i};
        else if (o->kind == OP_RESERVE || o->kind == OP_SEEN)
            c->seen[c->nseen++] = (ref_t){o->reply, i};
    }
    for (size_t i = 0; i < c->nseen; i++)
        c->sights[i] = (ref_t){h->ops[c->seen[i].op].id, c->seen[i].op};
    qsort_r(c->by_body, c->nputs, sizeof *c->by_body, cmp_put_body, h->ops);
    qsort(c->seen, c->nseen, sizeof *c->seen, bqh__cmp_ref);
    qsort(c->sights, c->nseen, sizeof *c->sights, bqh__cmp_ref);
    qsort(c->dels, c->ndels, sizeof *c->dels, bqh__cmp_ref);
    return 0;
}

/* The faults: each OP_FAULT is in effect until the next OP_SETTLED (marks
 * are recorded in time order). */
static void collect_faults(check_t *c)
{
    size_t open = 0; /* faults not settled yet: the last `open` ones */
    for (size_t i = 0; i < c->h->n; i++) {
        const op_t *o = &c->h->ops[i];
        if (o->kind == OP_FAULT) {
            c->faults[c->nfaults++] = (span_t){o->sent, UINT64_MAX};
            open++;
        } else if (o->kind == OP_SETTLED) {
            for (; open > 0; open--)
                c->faults[c->nfaults - open].end = o->sent;
        }
    }
    c->rep->faults = c->nfaults;
}

bool bqh__in_flight(const check_t *c, const op_t *o)
{
    for (size_t i = 0; i < c->nfaults; i++)
        if (o->sent <= c->faults[i].end && o->reply >= c->faults[i].begin)
            return true;
    return false;
}

bool bqh__unpromised(const check_t *c, uint64_t t)
{
    return t >= c->promised && (c->promised_again == 0 || t < c->promised_again);
}

/* Effective ids: an acknowledged put's id, else the first id its body was
 * seen under; promised from its acknowledgement or the first snapshot that
 * showed it. A worker's RESERVED promises nothing: a server hands out a job
 * before its put is durable or committed (a put waiting for its fsync or
 * its standbys, one on a primary cut off from the others), and a job whose
 * put nobody acknowledged may vanish with it. */
static void resolve_puts(check_t *c)
{
    op_t *ops = c->h->ops;
    for (size_t i = 0; i < c->nputs; i++) {
        size_t p = c->by_body[i];
        if (i > 0 && cmp_put_body(&c->by_body[i - 1], &c->by_body[i], ops) == 0)
            bqh__flag(c, BQH_DUPLICATE, ops[p].id,
                      "two puts sent the same body \"%.40s\" (test bug)", ops[p].body);
        if (ops[p].out == BQH_ACKED) {
            c->eff_id[p] = ops[p].id;
            c->acked_at[p] = ops[p].reply;
        }
    }
    for (size_t i = 0; i < c->nseen; i++) {
        const op_t *o = &ops[c->seen[i].op];
        size_t p = put_by_body(c, o->body, o->len);
        if (p == SIZE_MAX || ops[p].out == BQH_REFUSED)
            continue;
        if (!c->eff_id[p])
            c->eff_id[p] = o->id;
        if (c->eff_id[p] == o->id && o->kind == OP_SEEN &&
            (!c->acked_at[p] || o->reply < c->acked_at[p]))
            c->acked_at[p] = o->reply;
    }
    for (size_t i = 0; i < c->nputs; i++) {
        size_t p = c->by_body[i];
        if (ops[p].voided)
            c->acked_at[p] = 0;
        if (c->eff_id[p])
            c->by_id[c->nids++] = (ref_t){c->eff_id[p], p};
    }
    qsort(c->by_id, c->nids, sizeof *c->by_id, bqh__cmp_ref);
    for (size_t i = 1; i < c->nids; i++)
        if (c->by_id[i].k == c->by_id[i - 1].k)
            bqh__flag(c, BQH_ID_REUSE, c->by_id[i].k, "id given to two puts (\"%.40s\", \"%.40s\")",
                      ops[c->by_id[i - 1].op].body, ops[c->by_id[i].op].body);
}

/* Identity of one sighting: its id must carry the body it was put with. */
static void check_identity(check_t *c, const op_t *o)
{
    const op_t *ops = c->h->ops;
    size_t q = bqh__put_by_id(c, o->id);
    const char *who = o->kind == OP_SEEN ? "snapshot" : "RESERVED";
    if (q != SIZE_MAX) {
        if (bqh__cmp_body_len(&ops[q], o->body, o->len) != 0)
            bqh__flag(c, BQH_MISMATCH, o->id, "put with \"%.40s\", %s shows \"%.40s\"", ops[q].body,
                      who, o->body);
        else if (ops[q].out == BQH_UNKNOWN && !bqh__in_flight(c, &ops[q]))
            bqh__flag(c, BQH_UNEXPECTED, o->id,
                      "%s shows \"%.40s\", whose put's outcome is unknown with no fault in "
                      "effect",
                      who, o->body);
        return;
    }
    size_t p = put_by_body(c, o->body, o->len);
    if (p == SIZE_MAX)
        bqh__flag(c, BQH_UNEXPECTED, o->id, "%s shows a body nobody put: \"%.40s\"", who, o->body);
    else if (ops[p].out == BQH_REFUSED)
        bqh__flag(c, BQH_UNEXPECTED, o->id, "%s shows \"%.40s\", whose put was refused", who,
                  o->body);
    else
        bqh__flag(c, BQH_DUPLICATE, o->id, "%s shows \"%.40s\", which is job %" PRIu64, who,
                  o->body, c->eff_id[p]);
}

/* A sighting after an acknowledged delete of its id: a resurrection,
 * allowed (the delete is voided) when the delete was not promised and this
 * check's snapshot is what shows the job. */
static void check_resurrection(check_t *c, const op_t *o)
{
    op_t *ops = c->h->ops;
    for (size_t i = lower_bound(c->dels, c->ndels, o->id); i < c->ndels && c->dels[i].k == o->id;
         i++) {
        op_t *d = &ops[c->dels[i].op];
        if (d->out != BQH_ACKED || d->voided || d->reply >= o->sent)
            continue;
        if (o->kind == OP_SEEN && o->check == c->number && bqh__unpromised(c, d->reply)) {
            d->voided = true;
            c->rep->allowed_resurrected++;
            continue;
        }
        bqh__flag(c, BQH_RESURRECTED, o->id, "%s at %+.6f s, after DELETED at %+.6f s (worker %d)",
                  o->kind == OP_SEEN ? "snapshot" : "RESERVED", bqh__rel(c->h, o->sent),
                  bqh__rel(c->h, d->reply), d->worker);
    }
}

/* Two acknowledged deletes of one id, one sent after the other's reply:
 * the job was back in between. */
static void check_double_deletes(check_t *c)
{
    const op_t *ops = c->h->ops;
    for (size_t i = 0; i < c->ndels; i++) {
        const op_t *a = &ops[c->dels[i].op];
        if (a->out != BQH_ACKED || a->voided)
            continue;
        for (size_t j = i + 1; j < c->ndels && c->dels[j].k == a->id; j++) {
            const op_t *b = &ops[c->dels[j].op];
            if (b->out == BQH_ACKED && !b->voided && (b->sent > a->reply || a->sent > b->reply))
                bqh__flag(c, BQH_RESURRECTED, a->id,
                          "DELETED twice (replies at %+.6f s and %+.6f s)",
                          bqh__rel(c->h, a->reply), bqh__rel(c->h, b->reply));
        }
    }
}

/* True when id has a delete that may have removed it: acknowledged, or
 * unknown and in flight at a fault (refused, NOT_FOUND: never). */
static bool delete_excuses(const check_t *c, uint64_t id)
{
    const op_t *ops = c->h->ops;
    for (size_t i = lower_bound(c->dels, c->ndels, id); i < c->ndels && c->dels[i].k == id; i++) {
        const op_t *d = &ops[c->dels[i].op];
        if ((d->out == BQH_ACKED && !d->voided) || (d->out == BQH_UNKNOWN && bqh__in_flight(c, d)))
            return true;
    }
    return false;
}

/* Every outcome left unknown must have been in flight at a fault: a
 * connection does not die for no reason. */
static void check_unknowns(check_t *c)
{
    static const char *const what[] = {"put", "delete", "", "", "command", "kick", "pause-tube"};
    const op_t *ops = c->h->ops;
    for (size_t i = 0; i < c->h->n; i++) {
        const op_t *o = &ops[i];
        if (bqh__is_mark(o) || o->out != BQH_UNKNOWN)
            continue;
        if (bqh__in_flight(c, o)) {
            c->rep->unknown_excused++;
            continue;
        }
        uint64_t id = o->kind == OP_PUT ? c->eff_id[i] : o->id;
        bqh__flag(c, BQH_UNEXPLAINED, id,
                  "worker %d's %s sent at %+.6f s: connection found dead at %+.6f s, with no "
                  "fault in effect",
                  o->worker, what[o->kind], bqh__rel(c->h, o->sent), bqh__rel(c->h, o->reply));
    }
}

/* When delete d (NOT_FOUND) was of a job its own worker had put (and seen
 * acknowledged) or reserved before sending it, the time of that
 * acknowledgement; else 0. */
static uint64_t owned_since(const check_t *c, const op_t *d)
{
    const op_t *ops = c->h->ops;
    size_t p = bqh__put_by_id(c, d->id);
    if (p != SIZE_MAX && ops[p].worker == d->worker && ops[p].out == BQH_ACKED && !ops[p].voided &&
        ops[p].reply <= d->sent)
        return ops[p].reply;
    for (size_t i = lower_bound(c->sights, c->nseen, d->id);
         i < c->nseen && c->sights[i].k == d->id; i++) {
        const op_t *o = &ops[c->sights[i].op];
        if (o->kind == OP_RESERVE && o->worker == d->worker && o->reply <= d->sent)
            return o->reply;
    }
    return 0;
}

/* The first sighting of d's id sent after d's reply, or NULL. */
static const op_t *seen_after(const check_t *c, const op_t *d)
{
    const op_t *ops = c->h->ops;
    for (size_t i = lower_bound(c->sights, c->nseen, d->id);
         i < c->nseen && c->sights[i].k == d->id; i++)
        if (ops[c->sights[i].op].sent >= d->reply)
            return &ops[c->sights[i].op];
    return NULL;
}

/* A worker told NOT_FOUND when deleting its own job, which is seen again
 * later: the job had vanished for a while. Allowed when the NOT_FOUND or
 * the acknowledgement that made the job the worker's was not promised. */
static void check_reappeared(check_t *c)
{
    const op_t *ops = c->h->ops;
    for (size_t i = 0; i < c->ndels; i++) {
        const op_t *d = &ops[c->dels[i].op], *o;
        uint64_t own = d->out == BQH_NOT_FOUND && d->worker >= 0 ? owned_since(c, d) : 0;
        if (!own || !(o = seen_after(c, d)))
            continue;
        if (bqh__unpromised(c, d->reply) || bqh__unpromised(c, own)) {
            c->rep->allowed_not_found++;
            continue;
        }
        bqh__flag(c, BQH_REAPPEARED, d->id,
                  "worker %d (its job since %+.6f s) got NOT_FOUND at %+.6f s; %s at %+.6f s",
                  d->worker, bqh__rel(c->h, own), bqh__rel(c->h, d->reply),
                  o->kind == OP_SEEN ? "snapshot shows it" : "RESERVED", bqh__rel(c->h, o->sent));
    }
}

/* Promised puts absent from the snapshot with no delete to explain it. */
static void check_lost(check_t *c)
{
    op_t *ops = c->h->ops;
    size_t n = c->snap->n;
    uint64_t *present = malloc((n + 1) * sizeof *present);
    if (!present)
        abort();
    for (size_t i = 0; i < n; i++)
        present[i] = c->snap->jobs[i].id;
    qsort(present, n, sizeof *present, bqh__cmp_u64);
    for (size_t i = 0; i < c->nputs; i++) {
        size_t p = c->by_body[i];
        uint64_t id = c->eff_id[p];
        if (!id || !c->acked_at[p] || bsearch(&id, present, n, sizeof *present, bqh__cmp_u64) ||
            delete_excuses(c, id))
            continue;
        if (bqh__unpromised(c, c->acked_at[p])) {
            ops[p].voided = true;
            c->rep->allowed_lost++;
            continue;
        }
        bqh__flag(c, BQH_LOST, id, "acknowledged at %+.6f s (worker %d), never deleted, absent",
                  bqh__rel(c->h, c->acked_at[p]), ops[p].worker);
    }
    free(present);
    c->rep->hidden = c->snap->hidden;
    c->rep->problems[BQH_UNEXPECTED] += c->snap->hidden;
}

/* Every acknowledged put's id must be above every id acknowledged or seen
 * before it was sent. */
static void check_id_order(check_t *c)
{
    const op_t *ops = c->h->ops;
    size_t n = 0;
    ref_t *t = malloc((c->h->n + 1) * sizeof *t);
    size_t *best = malloc((c->h->n + 1) * sizeof *best);
    if (!t || !best)
        abort();
    for (size_t i = 0; i < c->h->n; i++)
        if ((ops[i].kind == OP_PUT && ops[i].out == BQH_ACKED) || ops[i].kind == OP_RESERVE ||
            ops[i].kind == OP_SEEN)
            t[n++] = (ref_t){ops[i].reply, i};
    qsort(t, n, sizeof *t, bqh__cmp_ref);
    for (size_t i = 0; i < n; i++) /* best[i]: the op with the highest id in t[0..i] */
        best[i] = i > 0 && ops[best[i - 1]].id >= ops[t[i].op].id ? best[i - 1] : t[i].op;
    for (size_t i = 0; i < c->h->n; i++) {
        const op_t *b = &ops[i];
        if (b->kind != OP_PUT || b->out != BQH_ACKED)
            continue;
        size_t k = lower_bound(t, n, b->sent);
        if (k > 0 && ops[best[k - 1]].id >= b->id)
            bqh__flag(c, BQH_ID_REUSE, b->id,
                      "put sent at %+.6f s got id %" PRIu64 ", but id %" PRIu64
                      " was seen at %+.6f s",
                      bqh__rel(c->h, b->sent), b->id, ops[best[k - 1]].id,
                      bqh__rel(c->h, ops[best[k - 1]].reply));
    }
    free(t);
    free(best);
}

static void count_figures(const bqh_history_t *h, const bqh_snapshot_t *s, bqh_report_t *rep)
{
    for (size_t i = 0; i < h->n; i++) {
        const op_t *o = &h->ops[i];
        if (o->kind == OP_PUT) {
            rep->puts_acked += o->out == BQH_ACKED;
            rep->puts_unknown += o->out == BQH_UNKNOWN;
            rep->puts_refused += o->out == BQH_REFUSED;
        } else if (o->kind == OP_DELETE) {
            rep->deletes_acked += o->out == BQH_ACKED;
            rep->deletes_unknown += o->out == BQH_UNKNOWN;
            rep->deletes_not_found += o->out == BQH_NOT_FOUND;
            rep->deletes_refused += o->out == BQH_REFUSED;
        } else if (o->kind == OP_RESERVE) {
            rep->reserves++;
        } else if (o->kind == OP_CMD || o->kind == OP_KICK || o->kind == OP_PAUSE) {
            rep->commands++;
        }
    }
    rep->present = s ? s->n : 0;
}

static void free_check(check_t *c)
{
    free(c->by_body);
    free(c->by_id);
    free(c->dels);
    free(c->seen);
    free(c->sights);
    free(c->faults);
    free(c->eff_id);
    free(c->acked_at);
    free(c->flags);
}

size_t bqh_check(bqh_history_t *h, const bqh_snapshot_t *snap, const bqh_rules_t *rules,
                 bqh_report_t *rep)
{
    check_t c = {.h = h,
                 .snap = snap,
                 .rep = rep,
                 .promised = rules ? rules->promised_before : BQH_ALL_PROMISED,
                 .promised_again = rules ? rules->promised_after : 0};
    memset(rep, 0, sizeof *rep);
    pthread_mutex_lock(&h->lock);
    c.number = ++h->checks;
    add_snapshot(&c);
    if (build_indexes(&c) != 0)
        abort();
    collect_faults(&c);
    resolve_puts(&c);
    check_unknowns(&c);
    for (size_t i = 0; i < c.nseen; i++) {
        const op_t *o = &h->ops[c.seen[i].op];
        check_identity(&c, o);
        check_resurrection(&c, o);
    }
    check_double_deletes(&c);
    check_reappeared(&c);
    if (snap)
        check_lost(&c);
    check_id_order(&c);
    bqh__check_states(&c);
    count_figures(h, snap, rep);
    pthread_mutex_unlock(&h->lock);
    free_check(&c);
    size_t total = 0;
    for (int k = 0; k < BQH_PROBLEMS; k++)
        total += rep->problems[k];
    return total;
}

const char *bqh_problem_name(bqh_problem_t p)
{
    static const char *const names[] = {"lost",        "resurrected", "duplicate",
                                        "unexpected",  "mismatch",    "id reuse",
                                        "unexplained", "reappeared",  "state"};
    return p < BQH_PROBLEMS ? names[p] : "?";
}
