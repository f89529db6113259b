/* The checker of history.h. It works on sorted index arrays built per
 * check (by body, by id, deletes by id, sightings by time), so a check costs
 * O(n log n) in the length of the whole history. */
#define _GNU_SOURCE /* vasprintf */

#include "tests/support/history_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



typedef struct check {
    bqh_history_t *h;
    const bqh_snapshot_t *snap;
    uint64_t promised, promised_again; /* the window of bqh_rules_t */
    uint32_t number; /* of this check */
    bqh_report_t *rep;
    size_t *by_body, nputs; /* put ops, sorted by body */
    ref_t *by_id;           /* puts by effective id */
    size_t nids;
    ref_t *dels; /* deletes by id, then in recording order */
    size_t ndels;
    ref_t *seen; /* reserves and snapshot jobs, by reply time */
    size_t nseen;
    uint64_t *eff_id, *acked_at; /* per op: a put's id and when it was first promised */
    ref_t *flags;                /* (id, problem) already counted */
    size_t nflags, flagcap;
} check_t;

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

/* The put whose effective id is id, or SIZE_MAX. */
static size_t put_by_id(const check_t *c, uint64_t id)
{
    size_t i = lower_bound(c->by_id, c->nids, id);
    return i < c->nids && c->by_id[i].k == id ? c->by_id[i].op : SIZE_MAX;
}

double bqh__rel(const bqh_history_t *h, uint64_t t)
{
    return t >= h->t0 ? (double)(t - h->t0) / 1e9 : -(double)(h->t0 - t) / 1e9;
}

/* Counts problem kind for id once per check; keeps the reasons of the
 * first few of each kind. */
static void flag(check_t *c, bqh_problem_t kind, uint64_t id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void flag(check_t *c, bqh_problem_t kind, uint64_t id, const char *fmt, ...)
{
    for (size_t i = 0; i < c->nflags; i++)
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
                  .len = j->len};
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
    c->eff_id = calloc(h->n + 1, sizeof *c->eff_id);
    c->acked_at = calloc(h->n + 1, sizeof *c->acked_at);
    if (!c->by_body || !c->by_id || !c->dels || !c->seen || !c->eff_id || !c->acked_at)
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
    qsort_r(c->by_body, c->nputs, sizeof *c->by_body, cmp_put_body, h->ops);
    qsort(c->seen, c->nseen, sizeof *c->seen, bqh__cmp_ref);
    qsort(c->dels, c->ndels, sizeof *c->dels, bqh__cmp_ref);
    return 0;
}

/* True when an acknowledgement received at t may have been undone. */
static bool unpromised(const check_t *c, uint64_t t)
{
    return t >= c->promised && (c->promised_again == 0 || t < c->promised_again);
}

/* Effective ids: an acknowledged put's id, else the first id its body was
 * seen under; promised from the first acknowledgement or sighting. */
static void resolve_puts(check_t *c)
{
    op_t *ops = c->h->ops;
    for (size_t i = 0; i < c->nputs; i++) {
        size_t p = c->by_body[i];
        if (i > 0 && cmp_put_body(&c->by_body[i - 1], &c->by_body[i], ops) == 0)
            flag(c, BQH_DUPLICATE, ops[p].id, "two puts sent the same body \"%.40s\" (test bug)",
                 ops[p].body);
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
        if (c->eff_id[p] == o->id && (!c->acked_at[p] || o->reply < c->acked_at[p]))
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
            flag(c, BQH_ID_REUSE, c->by_id[i].k, "id given to two puts (\"%.40s\", \"%.40s\")",
                 ops[c->by_id[i - 1].op].body, ops[c->by_id[i].op].body);
}

/* Identity of one sighting: its id must carry the body it was put with. */
static void check_identity(check_t *c, const op_t *o)
{
    const op_t *ops = c->h->ops;
    size_t q = put_by_id(c, o->id);
    const char *who = o->kind == OP_SEEN ? "snapshot" : "RESERVED";
    if (q != SIZE_MAX) {
        if (bqh__cmp_body_len(&ops[q], o->body, o->len) != 0)
            flag(c, BQH_MISMATCH, o->id, "put with \"%.40s\", %s shows \"%.40s\"", ops[q].body, who,
                 o->body);
        return;
    }
    size_t p = put_by_body(c, o->body, o->len);
    if (p == SIZE_MAX)
        flag(c, BQH_UNEXPECTED, o->id, "%s shows a body nobody put: \"%.40s\"", who, o->body);
    else if (ops[p].out == BQH_REFUSED)
        flag(c, BQH_UNEXPECTED, o->id, "%s shows \"%.40s\", whose put was refused", who, o->body);
    else
        flag(c, BQH_DUPLICATE, o->id, "%s shows \"%.40s\", which is job %" PRIu64, who, o->body,
             c->eff_id[p]);
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
        if (o->kind == OP_SEEN && o->check == c->number && unpromised(c, d->reply)) {
            d->voided = true;
            c->rep->allowed_resurrected++;
            continue;
        }
        flag(c, BQH_RESURRECTED, o->id, "%s at +%.6f s, after DELETED at +%.6f s (worker %d)",
             o->kind == OP_SEEN ? "snapshot" : "RESERVED", bqh__rel(c->h, o->sent), bqh__rel(c->h, d->reply),
             d->worker);
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
                flag(c, BQH_RESURRECTED, a->id, "DELETED twice (replies at +%.6f s and +%.6f s)",
                     bqh__rel(c->h, a->reply), bqh__rel(c->h, b->reply));
        }
    }
}

/* True when id has a delete that may have removed it. */
static bool delete_excuses(const check_t *c, uint64_t id)
{
    const op_t *ops = c->h->ops;
    for (size_t i = lower_bound(c->dels, c->ndels, id); i < c->ndels && c->dels[i].k == id; i++) {
        const op_t *d = &ops[c->dels[i].op];
        if ((d->out == BQH_ACKED && !d->voided) || d->out == BQH_UNKNOWN)
            return true;
    }
    return false;
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
        if (unpromised(c, c->acked_at[p])) {
            ops[p].voided = true;
            c->rep->allowed_lost++;
            continue;
        }
        flag(c, BQH_LOST, id, "acknowledged at +%.6f s (worker %d), never deleted, absent",
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
            flag(c, BQH_ID_REUSE, b->id,
                 "put sent at +%.6f s got id %" PRIu64 ", but id %" PRIu64 " was seen at +%.6f s",
                 bqh__rel(c->h, b->sent), b->id, ops[best[k - 1]].id, bqh__rel(c->h, ops[best[k - 1]].reply));
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
        } else if (o->kind == OP_RESERVE) {
            rep->reserves++;
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
    resolve_puts(&c);
    for (size_t i = 0; i < c.nseen; i++) {
        const op_t *o = &h->ops[c.seen[i].op];
        check_identity(&c, o);
        check_resurrection(&c, o);
    }
    check_double_deletes(&c);
    if (snap)
        check_lost(&c);
    check_id_order(&c);
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
    static const char *const names[] = {"lost",       "resurrected", "duplicate",
                                        "unexpected", "mismatch",    "id reuse"};
    return p < BQH_PROBLEMS ? names[p] : "?";
}
