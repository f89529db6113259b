/* The primary's commit point under synchronous replication. Each standby
 * has its acknowledged positions and an "in sync" flag (connected and caught
 * up with what the primary had logged when it connected); the sync state
 * follows from how many are in sync and for how long too few have been, and
 * the commit point from the local release point and the need-th highest
 * flushed LSN. A flushed LSN counts even after its standby disconnected: it
 * is durable there. Only a new hello lowers it (the standby may have lost
 * data). Pure: every function takes the time it runs at. */
#include "replication/commit.h"

#include <string.h>

void bq_commit_init(bq_commit_t *c, size_t n, unsigned need, bq_fallback_t fallback,
                    int64_t timeout_ns, uint64_t lsn, int64_t now)
{
    memset(c, 0, sizeof(*c));
    c->n = n < BQ_COMMIT_MAX_STANDBYS ? n : BQ_COMMIT_MAX_STANDBYS;
    c->need = need;
    c->fallback = fallback;
    c->timeout_ns = timeout_ns;
    c->short_since = -1;
    c->commit = lsn;
    c->last_lsn = lsn;
    for (size_t i = 0; i < c->n; i++)
        c->sb[i].acked_at = -1;
    bq_commit_update(c, lsn, now);
}

void bq_commit_logged(bq_commit_t *c, uint64_t lsn)
{
    if (lsn > c->last_lsn)
        c->last_lsn = lsn;
}

void bq_commit_connected(bq_commit_t *c, size_t i, uint64_t durable_lsn, int64_t now)
{
    bq_commit_standby_t *s;

    if (i >= c->n)
        return;
    s = &c->sb[i];
    s->connected = true;
    s->target = c->last_lsn;
    s->written = s->flushed = s->applied = durable_lsn;
    s->in_sync = s->flushed >= s->target;
    s->acked_at = now;
}

void bq_commit_disconnected(bq_commit_t *c, size_t i, int64_t now)
{
    (void)now;
    if (i >= c->n)
        return;
    c->sb[i].connected = false;
    c->sb[i].in_sync = false;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

void bq_commit_ack(bq_commit_t *c, size_t i, uint64_t written, uint64_t flushed,
                   uint64_t applied, int64_t now)
{
    bq_commit_standby_t *s;

    if (i >= c->n)
        return;
    s = &c->sb[i];
    s->written = max_u64(s->written, written);
    s->flushed = max_u64(s->flushed, flushed);
    s->applied = max_u64(s->applied, applied);
    s->acked_at = now;
    if (s->connected && s->flushed >= s->target)
        s->in_sync = true;
}

void bq_commit_self_durable(bq_commit_t *c, uint64_t lsn)
{
    c->self_durable = max_u64(c->self_durable, lsn);
}

/* The need-th highest flushed LSN among all standbys (with self_counts: the
 * (need + 1)-th highest, the primary's durable LSN included); false when
 * there are fewer copies than that (then no LSN is acknowledged enough). */
static bool nth_flushed(const bq_commit_t *c, uint64_t *out)
{
    uint64_t v[BQ_COMMIT_MAX_STANDBYS + 1];
    size_t n = 0, k = c->need + (c->self_counts ? 1 : 0);

    if (c->need == 0 || c->need > c->n)
        return false;
    for (size_t i = 0; i < c->n; i++)
        v[n++] = c->sb[i].flushed;
    if (c->self_counts)
        v[n++] = c->self_durable;
    /* Selection sort, descending, of the first k places: n <= 9. */
    for (size_t p = 0; p < k; p++)
        for (size_t j = p + 1; j < n; j++)
            if (v[j] > v[p]) {
                uint64_t t = v[p];
                v[p] = v[j];
                v[j] = t;
            }
    *out = v[k - 1];
    return true;
}

/* The state at now; starts or ends the short period as needed. */
static bq_sync_state_t next_state(bq_commit_t *c, int64_t now)
{
    if (c->need == 0 || bq_commit_in_sync(c) >= c->need) {
        c->short_since = -1;
        return c->need == 0 ? BQ_SYNC_OFF : BQ_SYNC_ON;
    }
    if (c->short_since < 0)
        c->short_since = now;
    if (now - c->short_since < c->timeout_ns)
        return BQ_SYNC_WAITING;
    return c->fallback == BQ_FALLBACK_ASYNC ? BQ_SYNC_DEGRADED : BQ_SYNC_REFUSING;
}

uint64_t bq_commit_update(bq_commit_t *c, uint64_t local_release, int64_t now)
{
    uint64_t point = local_release;
    uint64_t nth;

    c->state = next_state(c, now);
    if (c->state != BQ_SYNC_OFF && c->state != BQ_SYNC_DEGRADED) {
        if (!nth_flushed(c, &nth))
            return c->commit;
        if (nth < point)
            point = nth;
    }
    if (point > c->commit)
        c->commit = point;
    return c->commit;
}

int64_t bq_commit_next_deadline(const bq_commit_t *c)
{
    if (c->state != BQ_SYNC_WAITING)
        return INT64_MAX;
    if (c->timeout_ns > INT64_MAX - c->short_since)
        return INT64_MAX;
    return c->short_since + c->timeout_ns;
}

size_t bq_commit_in_sync(const bq_commit_t *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->sb[i].connected && c->sb[i].in_sync)
            k++;
    return k;
}

const char *bq_commit_state_name(bq_sync_state_t st)
{
    static const char *const names[] = {"off", "sync", "waiting", "degraded", "refusing"};
    return st <= BQ_SYNC_REFUSING ? names[st] : "unknown";
}
