/* The primary's commit point under synchronous replication. Each standby
 * has its acknowledged positions and an "in sync" flag (connected and caught
 * up with what the primary had logged when it connected, or when it was
 * last dropped for holding replies back); the sync state follows from how
 * many are in sync, for how long too few have been, and for how long they
 * have held replies back without the commit point moving; the commit point
 * from the local release point and the need-th highest flushed LSN (or,
 * degraded with self_counts, the majority rule over the durable copies and
 * the witnesses' floors). A flushed LSN counts even after its standby
 * disconnected: it is durable there. Only a new hello lowers it (the
 * standby may have lost data). Pure: every function takes the time it runs
 * at. */
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
    c->held_since = -1;
    c->commit = lsn;
    c->last_lsn = lsn;
    c->majority = (c->n + 1) / 2 + 1; /* of the n peers and the primary */
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
    s->witness = false;
    s->floor = 0;
    s->target = c->last_lsn;
    s->written = s->flushed = s->applied = durable_lsn;
    s->in_sync = s->flushed >= s->target;
    s->acked_at = now;
}

void bq_commit_witness(bq_commit_t *c, size_t i)
{
    if (i >= c->n)
        return;
    c->sb[i] = (bq_commit_standby_t){.connected = true, .witness = true, .acked_at = -1};
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

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

void bq_commit_ack(bq_commit_t *c, size_t i, uint64_t written, uint64_t flushed, uint64_t applied,
                   int64_t now)
{
    bq_commit_standby_t *s;

    if (i >= c->n || c->sb[i].witness)
        return;
    s = &c->sb[i];
    s->written = max_u64(s->written, written);
    s->flushed = max_u64(s->flushed, flushed);
    s->applied = max_u64(s->applied, applied);
    s->acked_at = now;
    if (s->connected && s->flushed >= s->target)
        s->in_sync = true;
}

void bq_commit_floor(bq_commit_t *c, size_t i, uint64_t lsn)
{
    if (i < c->n && c->sb[i].witness)
        c->sb[i].floor = max_u64(c->sb[i].floor, lsn);
}

void bq_commit_self_durable(bq_commit_t *c, uint64_t lsn)
{
    c->self_durable = max_u64(c->self_durable, lsn);
}

/* The k-th highest of v[0..n) (k >= 1), or false when n < k. */
static bool kth_highest(uint64_t *v, size_t n, size_t k, uint64_t *out)
{
    if (k == 0 || n < k)
        return false;
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

/* The need-th highest flushed LSN among all standbys (with self_counts: the
 * (need + 1)-th highest, the primary's durable LSN included); false when
 * there are fewer copies than that (then no LSN is acknowledged enough). */
static bool nth_flushed(const bq_commit_t *c, uint64_t *out)
{
    uint64_t v[BQ_COMMIT_MAX_STANDBYS + 1];
    size_t n = 0;

    if (c->need == 0 || c->need > c->n)
        return false;
    for (size_t i = 0; i < c->n; i++)
        if (!c->sb[i].witness)
            v[n++] = c->sb[i].flushed;
    if (c->self_counts)
        v[n++] = c->self_durable;
    return kth_highest(v, n, c->need + (c->self_counts ? 1 : 0), out);
}

/* Raft's rule, for degraded with self_counts: the majority-th highest of
 * the primary's durable LSN, the standbys' flushed LSNs and the witnesses'
 * floors. */
static uint64_t majority_point(const bq_commit_t *c)
{
    uint64_t v[BQ_COMMIT_MAX_STANDBYS + 1], out = 0;
    size_t n = 0;

    for (size_t i = 0; i < c->n; i++)
        v[n++] = c->sb[i].witness ? c->sb[i].floor : c->sb[i].flushed;
    v[n++] = c->self_durable;
    return kth_highest(v, n, c->majority, &out) ? out : 0;
}

/* What the primary could release without its standbys: the local release
 * point, and with self_counts no further than its own durable LSN. */
static uint64_t own_point(const bq_commit_t *c, uint64_t local_release)
{
    return c->self_counts ? min_u64(local_release, c->self_durable) : local_release;
}

static bool fallen(bq_sync_state_t st)
{
    return st == BQ_SYNC_DEGRADED || st == BQ_SYNC_REFUSING;
}

/* Entering the fallback because replies were held back: every standby
 * behind what the primary could release is no longer in sync, and must
 * catch up with everything logged so far to be again. */
static void drop_lagging(bq_commit_t *c, uint64_t own)
{
    for (size_t i = 0; i < c->n; i++) {
        bq_commit_standby_t *s = &c->sb[i];
        if (!s->witness && s->in_sync && s->flushed < own) {
            s->in_sync = false;
            s->target = c->last_lsn;
        }
    }
}

/* The state at now; starts or ends the short period as needed. */
static bq_sync_state_t next_state(bq_commit_t *c, int64_t now, uint64_t own)
{
    bq_sync_state_t fallback =
        c->fallback == BQ_FALLBACK_ASYNC ? BQ_SYNC_DEGRADED : BQ_SYNC_REFUSING;
    bool enough = bq_commit_in_sync(c) >= c->need;

    if (c->need == 0) {
        c->short_since = c->held_since = -1;
        return BQ_SYNC_OFF;
    }
    if (enough)
        c->short_since = -1;
    else if (c->short_since < 0)
        c->short_since = now;
    if (fallen(c->state) && !enough)
        return c->state;
    if (fallen(c->state)) {
        c->held_since = -1;
        return BQ_SYNC_ON;
    }
    if (!enough)
        return now - c->short_since < c->timeout_ns ? BQ_SYNC_WAITING : fallback;
    if (c->held_since >= 0 && now - c->held_since >= c->timeout_ns) {
        drop_lagging(c, own);
        c->held_since = -1;
        if (bq_commit_in_sync(c) < c->need)
            c->short_since = now;
        return fallback;
    }
    return BQ_SYNC_ON;
}

/* Notes whether the standbys hold back replies the primary could release,
 * and since when without the commit point moving. */
static void note_held(bq_commit_t *c, bool have_sync, uint64_t sync_point, uint64_t own,
                      int64_t now)
{
    uint64_t reach = have_sync ? sync_point : c->commit;
    if (c->need == 0 || fallen(c->state) || reach >= own)
        c->held_since = -1;
    else if (c->held_since < 0 || reach > c->commit)
        c->held_since = now;
}

uint64_t bq_commit_update(bq_commit_t *c, uint64_t local_release, int64_t now)
{
    uint64_t own = own_point(c, local_release);
    uint64_t nth = 0, point;
    bool have_sync = nth_flushed(c, &nth);
    uint64_t sync_point = min_u64(local_release, nth);

    note_held(c, have_sync, sync_point, own, now);
    c->state = next_state(c, now, own);
    if (c->state == BQ_SYNC_OFF)
        point = local_release;
    else if (c->state == BQ_SYNC_DEGRADED)
        point = c->self_counts ? min_u64(local_release, majority_point(c)) : local_release;
    else if (have_sync)
        point = sync_point;
    else
        return c->commit;
    if (point > c->commit)
        c->commit = point;
    return c->commit;
}

int64_t bq_commit_next_deadline(const bq_commit_t *c)
{
    int64_t since = c->state == BQ_SYNC_WAITING ? c->short_since
                    : c->state == BQ_SYNC_ON    ? c->held_since
                                                : -1;
    if (since < 0)
        return INT64_MAX;
    if (c->timeout_ns > INT64_MAX - since)
        return INT64_MAX;
    return since + c->timeout_ns;
}

bool bq_commit_wants_self_durable(const bq_commit_t *c)
{
    return c->self_counts && c->state != BQ_SYNC_OFF;
}

uint64_t bq_commit_floor_lsn(const bq_commit_t *c)
{
    switch (c->state) {
    case BQ_SYNC_ON:
    case BQ_SYNC_WAITING:
    case BQ_SYNC_REFUSING:
        return c->commit;
    case BQ_SYNC_DEGRADED:
        return c->self_counts ? c->self_durable : 0;
    default:
        return 0;
    }
}

size_t bq_commit_in_sync(const bq_commit_t *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->sb[i].connected && c->sb[i].in_sync && !c->sb[i].witness)
            k++;
    return k;
}

const char *bq_commit_state_name(bq_sync_state_t st)
{
    static const char *const names[] = {"off", "sync", "waiting", "degraded", "refusing"};
    return st <= BQ_SYNC_REFUSING ? names[st] : "unknown";
}
