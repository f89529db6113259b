/* beanstalkctl handoff's decision, pure: from the /status document of the
 * node being stopped, whether it has a primary role to hand off and to
 * which standby. The target is the standby the primary lists as
 * "streaming" (connected, in sync, not a witness) with the highest
 * flushed_lsn; ties go to the lowest lag_records, then to the lowest
 * node_id, so the choice is the same on every run over the same document. */
#ifndef BQ_CTL_HANDOFF_H
#define BQ_CTL_HANDOFF_H

#include <cJSON.h>

typedef enum bq_ctl_handoff_kind {
    BQ_CTL_HANDOFF_TARGET,      /* the node is the primary: hand off to target */
    BQ_CTL_HANDOFF_NOT_PRIMARY, /* standby, witness, (pre)candidate: nothing to hand off */
    BQ_CTL_HANDOFF_NO_TARGET,   /* the primary has no streaming standby: refuse */
    BQ_CTL_HANDOFF_NO_ROLE,     /* the document does not say the node's role */
} bq_ctl_handoff_kind_t;

typedef struct bq_ctl_handoff {
    bq_ctl_handoff_kind_t kind;
    const char *target; /* TARGET: the standby's node_id (borrowed from the document) */
    double flushed_lsn; /* TARGET: its flushed_lsn as the primary reports it (-1: absent) */
    double lag_records; /* TARGET: its lag_records (-1: absent) */
    char why[320];      /* all but TARGET: one line saying why there is no target */
} bq_ctl_handoff_t;

/* Decides for the node whose /status document is doc (borrowed; NULL is a
 * document without a role) and fills *out; out->target borrows from doc. */
void bq_ctl_handoff_choose(const cJSON *doc, bq_ctl_handoff_t *out);

#endif
