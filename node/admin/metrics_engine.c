/* Reads the engine's `stats` and `stats-tube` figures for /metrics through
 * protocol/engine.h's accessors, on the loop thread that owns the engine
 * (running the `stats` command instead would bump cmd-stats). */
#include "node/admin/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/engine.h"

static void read_tube(const bq_engine_t *e, size_t i, bq_metrics_tube_t *o)
{
    bq_engine_tube_stats_t t;
    bq_engine_tube_stats(e, i, &t);
    memcpy(o->name, t.name, t.name_len);
    o->name[t.name_len] = '\0';
    o->ready = t.ready;
    o->reserved = t.reserved;
    o->delayed = t.delayed;
    o->buried = t.buried;
    o->urgent = t.urgent;
}

int bq_metrics_engine_read(const bq_engine_t *e, bq_metrics_engine_t *m)
{
    bq_engine_stats_t st;
    bq_engine_stats(e, &st);
    memset(m, 0, sizeof *m);
    m->ready = st.ready;
    m->reserved = st.reserved;
    m->delayed = st.delayed;
    m->buried = st.buried;
    m->urgent = st.urgent;
    m->jobs_created = st.total_jobs;
    m->job_timeouts = st.timeouts;
    m->connections = st.clients;
    m->producers = st.producers;
    m->workers = st.workers;
    m->waiting = st.waiting;
    m->connections_accepted = st.total_conns;
    m->tubes = st.ntubes;
    m->draining = st.draining;
    memcpy(m->ops, st.op_ct, sizeof m->ops);
    size_t n = st.ntubes < BQ_METRICS_MAX_TUBES ? st.ntubes : BQ_METRICS_MAX_TUBES;
    if (n == 0)
        return 0;
    m->tube = malloc(n * sizeof *m->tube);
    if (!m->tube)
        return -1;
    for (size_t i = 0; i < n; i++)
        read_tube(e, i, &m->tube[i]);
    m->ntube = n;
    return 0;
}

void bq_metrics_engine_free(bq_metrics_engine_t *m)
{
    free(m->tube);
    m->tube = NULL;
    m->ntube = 0;
}
