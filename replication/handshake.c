/* The primary's decision on a standby's Hello. First the refusals, in a
 * fixed order (version, cluster, node id, stale primary), then where the
 * stream starts: right after the standby's last frame when both logs agree
 * on it (same LSN with the same epoch) and the primary still holds every
 * frame after it, else from the oldest retained segment (a resync). Pure:
 * the primary's log is only its list of retained segments. */
#include "replication/handshake.h"

#include <stdbool.h>
#include <string.h>

/* A NULL string from a caller is taken as empty. */
static const char *str(const char *s)
{
    return s ? s : "";
}

static void refuse(bq_hs_decision_t *out, Bq__Repl__RefuseReason reason, const char *detail)
{
    out->action = BQ_HS_REFUSE;
    out->reason = reason;
    out->detail = detail;
}

/* The index of peer node_id, or -1. */
static long peer_index(const bq_hs_primary_t *p, const char *node_id)
{
    for (size_t i = 0; i < p->npeers; i++)
        if (strcmp(str(p->peers[i]), node_id) == 0)
            return (long)i;
    return -1;
}

/* The detail of a node id the primary does not accept, or NULL when it is
 * accepted. */
static const char *node_id_problem(const bq_hs_primary_t *p, const char *node_id)
{
    if (node_id[0] == '\0')
        return "the hello has an empty node id";
    if (strcmp(node_id, str(p->node_id)) == 0)
        return "the node id is the primary's own";
    if (peer_index(p, node_id) < 0)
        return "the node id is not one of the primary's peers";
    if (p->tls_name && strcmp(node_id, p->tls_name) != 0)
        return "the node id differs from the name in the standby's certificate";
    return NULL;
}

bool bq_hs_identity_refused(const bq_hs_primary_t *p, const Bq__Repl__Hello *h,
                            bq_hs_decision_t *out)
{
    const char *problem;

    if (h->version != BQ_REPL_VERSION) {
        refuse(out, BQ__REPL__REFUSE_REASON__BAD_VERSION,
               "the replication protocol version is not supported");
        return true;
    }
    if (strcmp(str(h->cluster_id), str(p->cluster_id)) != 0) {
        refuse(out, BQ__REPL__REFUSE_REASON__WRONG_CLUSTER, "the cluster id differs");
        return true;
    }
    problem = node_id_problem(p, str(h->node_id));
    if (problem) {
        refuse(out, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE, problem);
        return true;
    }
    long i = peer_index(p, str(h->node_id));
    bool declared = p->witness && p->witness[i];
    if (h->witness != declared) {
        refuse(out, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE,
               declared ? "the node is a witness (--witness) but says it is a standby"
                        : "the node says it is a witness, but no --witness names it");
        return true;
    }
    return false;
}

/* Applies the refusal rules; true when h was refused. */
static bool refused(const bq_hs_primary_t *p, const Bq__Repl__Hello *h, bq_hs_decision_t *out)
{
    if (bq_hs_identity_refused(p, h, out))
        return true;
    if (h->last_epoch > p->epoch) {
        refuse(out, BQ__REPL__REFUSE_REASON__STALE_PRIMARY,
               "the standby has seen a higher epoch than the primary's");
        return true;
    }
    return false;
}

/* The index of the last segment whose first frame is at or before lsn
 * (0 when there is none): later empty segments share their first LSN with
 * the next one, so the last match is the one that holds lsn. */
static size_t segment_of(const bq_hs_primary_t *p, uint64_t lsn)
{
    size_t seg = 0;
    for (size_t i = 0; i < p->nsegs; i++)
        if (p->segs[i].first_lsn <= lsn)
            seg = i;
    return seg;
}

/* Whether the stream can continue right after the standby's last frame x. */
static bool can_resume(const bq_hs_primary_t *p, uint64_t x, uint64_t x_epoch)
{
    int64_t e;

    if (x > p->last_lsn)
        return false;
    if (x == 0)
        return p->segs[0].first_lsn == 1;
    /* x itself compacted away, every frame after it held: the epoch history
     * tells x's epoch (a new primary that dropped every older segment at
     * once, its jobs all deleted, still resumes its caught-up standbys). */
    if (x + 1 == p->segs[0].first_lsn)
        return p->before_epoch != 0 && p->before_epoch == x_epoch;
    /* A known epoch means x is retained, so every frame after it is too. */
    e = bq_hs_epoch_of(p, x);
    return e >= 0 && (uint64_t)e == x_epoch && x + 1 >= p->segs[0].first_lsn;
}

/* The last LSN of epoch e in p's log (the one before the first segment of
 * a later epoch, or its last), and through *first the first retained one;
 * 0 when p retains no frame of e. */
static uint64_t primary_range(const bq_hs_primary_t *p, uint64_t e, uint64_t *first)
{
    uint64_t lo = 0;
    bool seen = false;
    for (size_t i = 0; i < p->nsegs; i++) {
        if (p->segs[i].epoch == e && !seen) {
            seen = true;
            lo = p->segs[i].first_lsn;
        } else if (p->segs[i].epoch > e) {
            /* Frames of e end before it; an empty segment of e ends nothing. */
            uint64_t hi = p->segs[i].first_lsn - 1;
            *first = lo;
            return seen && hi >= lo ? hi : 0;
        }
    }
    *first = lo;
    return seen && p->last_lsn >= lo ? p->last_lsn : 0;
}

int64_t bq_hs_fork(const bq_hs_primary_t *p, const Bq__Repl__Hello *h)
{
    size_t n = h->n_epochs, from = n > BQ_HS_MAX_EPOCHS ? n - BQ_HS_MAX_EPOCHS : 0;
    /* Epochs and first LSNs must rise (a first LSN may repeat: an epoch
     * with no frame), up to last_lsn + 1: else believe none of it. */
    for (size_t i = from; i < n; i++) {
        const Bq__Repl__EpochStart *s = h->epochs[i], *prev = i > from ? h->epochs[i - 1] : NULL;
        if (!s || s->first_lsn == 0 || s->first_lsn > h->last_lsn + 1 ||
            (prev && (s->epoch <= prev->epoch || s->first_lsn < prev->first_lsn)))
            return -1;
    }
    uint64_t end = h->last_lsn; /* the standby's epoch i covers [first_lsn, end] */
    for (size_t i = n; i-- > from;) {
        const Bq__Repl__EpochStart *s = h->epochs[i];
        uint64_t pfirst, plast = primary_range(p, s->epoch, &pfirst);
        uint64_t lo = s->first_lsn > pfirst ? s->first_lsn : pfirst;
        uint64_t hi = end < plast ? end : plast;
        if (plast && lo <= hi)
            return (int64_t)hi;
        end = s->first_lsn - 1;
    }
    return -1;
}

void bq_hs_decide(const bq_hs_primary_t *p, const Bq__Repl__Hello *h, bq_hs_decision_t *out)
{
    memset(out, 0, sizeof(*out));
    out->reason = BQ__REPL__REFUSE_REASON__REFUSE_UNSPECIFIED;
    if (refused(p, h, out))
        return;
    if (can_resume(p, h->last_lsn, h->last_epoch)) {
        out->action = BQ_HS_RESUME;
        out->start_lsn = h->last_lsn + 1;
        out->seg = segment_of(p, out->start_lsn);
        return;
    }
    int64_t fork = h->can_cut ? bq_hs_fork(p, h) : -1;
    if (fork >= 0 && (uint64_t)fork < h->last_lsn && (uint64_t)fork + 1 >= p->segs[0].first_lsn) {
        out->action = BQ_HS_CUT;
        out->cut_after = (uint64_t)fork;
        out->start_lsn = (uint64_t)fork + 1;
        out->seg = segment_of(p, out->start_lsn);
        return;
    }
    out->action = BQ_HS_RESYNC;
    out->start_lsn = p->segs[0].first_lsn;
    out->seg = 0;
}

int64_t bq_hs_epoch_of(const bq_hs_primary_t *p, uint64_t lsn)
{
    if (lsn == 0 || lsn > p->last_lsn || p->nsegs == 0 || lsn < p->segs[0].first_lsn)
        return -1;
    return (int64_t)p->segs[segment_of(p, lsn)].epoch;
}
