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
    /* A known epoch means x is retained, so every frame after it is too. */
    e = bq_hs_epoch_of(p, x);
    return e >= 0 && (uint64_t)e == x_epoch && x + 1 >= p->segs[0].first_lsn;
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
