/* The job-state model of the history checker (docs/testing.md, "The
 * history checker"): every job put with its tube, priority and delay
 * recorded has a small set of states the history allows (ready, delayed or
 * buried, with a priority and a delay; reserved is not durable and counts
 * as ready). The operations on it and the kicks of its tube are replayed
 * in the order they were sent: a success replaces the set by what the
 * command leads to, an unknown outcome (or an acknowledgement the rules
 * say may have been undone) adds it, a refusal or NOT_FOUND changes
 * nothing. The snapshot's stats-job of the job must match one of them; a
 * delayed job may be ready once its deadline may have passed. */
#define _GNU_SOURCE /* qsort_r */

#include "tests/support/history_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CANDS 8 /* states one job may be in; more and the job goes unchecked */

typedef struct cand {
    uint8_t st; /* BQH_READY, BQH_DELAYED, BQH_BURIED */
    uint32_t pri, delay;
    uint64_t from; /* delayed: when the command that delayed it was sent */
} cand_t;

typedef struct jobm {
    uint64_t id;
    size_t put; /* its put op */
    uint8_t tube;
    bool born, gone, maybe_gone, overflow;
    uint8_t n;
    cand_t c[MAX_CANDS];
} jobm_t;

typedef struct model {
    check_t *c;
    jobm_t *jobs; /* by id */
    size_t njobs;
    size_t *by_tube; /* job indexes, by tube */
    ref_t *events;   /* ops on modelled jobs and kicks of their tubes, by time sent */
    size_t nevents;
} model_t;

static const char *const state_names[] = {"ready", "delayed", "buried", "reserved"};

/* ---- sets of states ---- */

static bool same_cand(const cand_t *a, const cand_t *b)
{
    return a->st == b->st && a->pri == b->pri && a->delay == b->delay &&
           (a->st != BQH_DELAYED || a->from == b->from);
}

/* Adds x to j's set unless there; a full set marks j unchecked. */
static void add_cand(jobm_t *j, cand_t x)
{
    for (uint8_t i = 0; i < j->n; i++)
        if (same_cand(&j->c[i], &x))
            return;
    if (j->n == MAX_CANDS)
        j->overflow = true;
    else
        j->c[j->n++] = x;
}

static cand_t ready_like(const cand_t *c)
{
    return (cand_t){BQH_READY, c->pri, c->delay, 0};
}

/* The state op leaves candidate x in; false when op cannot succeed on it
 * (a reserve of a buried job, a kick-job of a ready one). */
static bool effect(const op_t *o, const cand_t *x, cand_t *out)
{
    *out = *x;
    if (o->kind == OP_RESERVE)
        *out = ready_like(x);
    else if (o->kind == OP_SEEN)
        *out = (cand_t){o->state == BQH_RESERVED ? BQH_READY : o->state, o->pri, o->delay, 0};
    else if (o->kind != OP_CMD || o->cmd == BQH_TOUCH)
        return true;
    else if (o->cmd == BQH_BURY)
        *out = (cand_t){BQH_BURIED, o->pri, x->delay, 0};
    else if (o->cmd == BQH_RELEASE)
        *out =
            (cand_t){o->delay ? BQH_DELAYED : BQH_READY, o->pri, o->delay, o->delay ? o->sent : 0};
    else /* kick-job */
        *out = ready_like(x);
    if (o->kind == OP_RESERVE)
        return x->st != BQH_BURIED;
    if (o->kind == OP_CMD && o->cmd == BQH_KICK_JOB)
        return x->st != BQH_READY;
    return true;
}

/* True when op o's success may have been undone or never happened: its
 * outcome is unknown, or it was acknowledged when nothing was promised. */
static bool uncertain(const model_t *m, const op_t *o)
{
    return o->out == BQH_UNKNOWN || o->voided ||
           (o->out == BQH_ACKED && o->kind != OP_SEEN && bqh__unpromised(m->c, o->reply));
}

/* Applies op o to job j: a certain success replaces the set, an uncertain
 * one adds to it. A success no state allows is a state problem. */
static void apply(model_t *m, jobm_t *j, const op_t *o)
{
    jobm_t after = {.n = 0};
    bool sure = !uncertain(m, o);
    if (o->out != BQH_ACKED && o->out != BQH_UNKNOWN)
        return;
    for (uint8_t i = 0; i < j->n; i++) {
        cand_t x;
        if (effect(o, &j->c[i], &x))
            add_cand(&after, x);
    }
    if (after.n == 0 && sure && !j->overflow) {
        bqh__flag(m->c, BQH_STATE, j->id, "%s at %+.6f s, but the history allows only %s",
                  o->kind == OP_RESERVE ? "RESERVED" : "KICKED", bqh__rel(m->c->h, o->reply),
                  state_names[j->c[0].st]);
        add_cand(&after, ready_like(&j->c[0]));
    }
    if (!sure)
        for (uint8_t i = 0; i < j->n; i++)
            add_cand(&after, j->c[i]);
    after.overflow |= j->overflow;
    memcpy(j->c, after.c, sizeof after.c);
    j->n = after.n;
    j->overflow = after.overflow;
}

/* ---- building the model ---- */

static int cmp_job(const void *a, const void *b)
{
    const jobm_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static jobm_t *job_of(const model_t *m, uint64_t id)
{
    jobm_t key = {.id = id};
    return id ? bsearch(&key, m->jobs, m->njobs, sizeof *m->jobs, cmp_job) : NULL;
}

static int cmp_tube(const void *a, const void *b, void *jobs)
{
    const jobm_t *x = (const jobm_t *)jobs + *(const size_t *)a,
                 *y = (const jobm_t *)jobs + *(const size_t *)b;
    if (x->tube != y->tube)
        return (x->tube > y->tube) - (x->tube < y->tube);
    return (x->id > y->id) - (x->id < y->id);
}

/* A job per put with a recorded tube and an id (acknowledged or seen). */
static void collect_jobs(model_t *m)
{
    const check_t *c = m->c;
    for (size_t i = 0; i < c->nids; i++) {
        const op_t *p = &c->h->ops[c->by_id[i].op];
        if (p->tube && (m->njobs == 0 || m->jobs[m->njobs - 1].id != c->by_id[i].k))
            m->jobs[m->njobs++] =
                (jobm_t){.id = c->by_id[i].k, .put = c->by_id[i].op, .tube = p->tube};
    }
    for (size_t i = 0; i < m->njobs; i++)
        m->by_tube[i] = i;
    qsort_r(m->by_tube, m->njobs, sizeof *m->by_tube, cmp_tube, m->jobs);
}

/* True when tube t has a modelled job. */
static bool tube_modelled(const model_t *m, uint8_t t)
{
    for (size_t i = 0; i < m->njobs; i++)
        if (m->jobs[i].tube == t)
            return true;
    return false;
}

/* The ops on modelled jobs and the kicks of their tubes, by time sent. */
static void collect_events(model_t *m)
{
    const bqh_history_t *h = m->c->h;
    for (size_t i = 0; i < h->n; i++) {
        const op_t *o = &h->ops[i];
        bool on_job = o->kind == OP_PUT || o->kind == OP_DELETE || o->kind == OP_RESERVE ||
                      o->kind == OP_SEEN || o->kind == OP_CMD;
        uint64_t id = o->kind == OP_PUT ? m->c->eff_id[i] : o->id;
        if ((on_job && job_of(m, id) && (o->kind != OP_PUT || job_of(m, id)->put == i)) ||
            (o->kind == OP_KICK && tube_modelled(m, o->tube)))
            m->events[m->nevents++] = (ref_t){o->sent, i};
    }
    qsort(m->events, m->nevents, sizeof *m->events, bqh__cmp_ref);
}

/* Gives j the state its put left it in. */
static void birth(const model_t *m, jobm_t *j)
{
    const op_t *p = &m->c->h->ops[j->put];
    if (j->born)
        return;
    j->born = true;
    j->c[0] =
        (cand_t){p->delay ? BQH_DELAYED : BQH_READY, p->pri, p->delay, p->delay ? p->sent : 0};
    j->n = 1;
}

/* ---- kicks ---- */

typedef enum { KICK_BURIED, KICK_DELAYED, KICK_EITHER } kick_class_t;

static bool any_state(const jobm_t *j, uint8_t st)
{
    for (uint8_t i = 0; i < j->n; i++)
        if (j->c[i].st == st)
            return true;
    return false;
}

static bool only_state(const jobm_t *j, uint8_t st)
{
    for (uint8_t i = 0; i < j->n; i++)
        if (j->c[i].st != st)
            return false;
    return j->n > 0 && !j->overflow;
}

/* What a kick of the jobs jobs[0..n) takes: buried jobs when one is buried
 * for sure, delayed ones when none can be, either otherwise (or when more
 * may be in the class than bound). */
static kick_class_t kick_class(jobm_t *const *jobs, size_t n, uint32_t bound)
{
    size_t sure = 0, maybe_buried = 0, maybe_delayed = 0;
    for (size_t i = 0; i < n; i++) {
        sure += !jobs[i]->maybe_gone && only_state(jobs[i], BQH_BURIED);
        maybe_buried += any_state(jobs[i], BQH_BURIED) || jobs[i]->overflow;
        maybe_delayed += any_state(jobs[i], BQH_DELAYED) || jobs[i]->overflow;
    }
    if (sure > 0)
        return maybe_buried <= bound ? KICK_BURIED : KICK_EITHER;
    if (maybe_buried == 0)
        return maybe_delayed <= bound ? KICK_DELAYED : KICK_EITHER;
    return KICK_EITHER;
}

/* Applies kick k to job j: its candidates in the kicked class become ready
 * (for sure, or as a possibility). */
static void apply_kick(model_t *m, jobm_t *j, const op_t *k, kick_class_t cls)
{
    bool sure = cls != KICK_EITHER && !uncertain(m, k);
    jobm_t after = {.overflow = j->overflow};
    for (uint8_t i = 0; i < j->n; i++) {
        const cand_t *x = &j->c[i];
        bool kicked = (x->st == BQH_BURIED && cls != KICK_DELAYED) ||
                      (x->st == BQH_DELAYED && cls != KICK_BURIED);
        if (!kicked || !sure)
            add_cand(&after, *x);
        if (kicked)
            add_cand(&after, ready_like(x));
    }
    memcpy(j->c, after.c, sizeof after.c);
    j->n = after.n;
    j->overflow = after.overflow;
}

/* A successful (or unknown) kick of tube k->tube. */
static void kick_tube(model_t *m, const op_t *k)
{
    jobm_t *live[256];
    size_t n = 0;
    if ((k->out != BQH_ACKED && k->out != BQH_UNKNOWN) || (k->out == BQH_ACKED && k->arg == 0))
        return; /* refused, or KICKED 0: nothing moved */
    for (size_t i = 0; i < m->njobs; i++) {
        jobm_t *j = &m->jobs[m->by_tube[i]];
        if (j->tube != k->tube || !j->born || j->gone)
            continue;
        if (n == sizeof live / sizeof *live) { /* too many to reason about: unchecked */
            j->overflow = true;
            continue;
        }
        live[n++] = j;
    }
    kick_class_t cls = kick_class(live, n, k->pri);
    for (size_t i = 0; i < n; i++)
        apply_kick(m, live[i], k, cls);
}

/* ---- the snapshot ---- */

/* True when candidate x allows what snapshot entry o shows; *late set when
 * only because a delayed job's deadline may have passed. */
static bool allows(const cand_t *x, const op_t *o, bool *late)
{
    uint8_t st = o->state == BQH_RESERVED ? BQH_READY : o->state;
    if (x->pri != o->pri || x->delay != o->delay)
        return false;
    if (x->st == st)
        return true;
    *late = x->st == BQH_DELAYED && st == BQH_READY &&
            o->sent + BQH_DELAY_MARGIN_NS >= x->from + (uint64_t)x->delay * 1000000000u;
    return *late;
}

/* Writes j's allowed states into buf, for a report. */
static void describe(const jobm_t *j, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint8_t i = 0; i < j->n && i < 3 && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s pri %u delay %u", i ? " or " : "",
                                state_names[j->c[i].st], j->c[i].pri, j->c[i].delay);
    if (j->n > 3 && len < cap)
        snprintf(buf + len, cap - len, " or ...");
}

/* Compares what this check's snapshot shows of j (o) with j's states. */
static void compare(model_t *m, jobm_t *j, const op_t *o)
{
    const bqh_history_t *h = m->c->h;
    const op_t *p = &h->ops[j->put];
    bool late = false, ok = false;
    char want[100];
    if (o->tube != p->tube) {
        bqh__flag(m->c, BQH_STATE, j->id, "snapshot shows it in tube %s, put in %s",
                  h->tubes[o->tube - 1], h->tubes[p->tube - 1]);
        return;
    }
    for (uint8_t i = 0; i < j->n && !ok; i++) {
        late = false;
        ok = allows(&j->c[i], o, &late);
    }
    m->c->rep->states_checked++;
    m->c->rep->states_lenient += ok && late;
    if (ok)
        return;
    describe(j, want, sizeof want);
    bqh__flag(m->c, BQH_STATE, j->id, "snapshot shows %s pri %u delay %u; the history allows %s",
              state_names[o->state], o->pri, o->delay, want);
}

/* A snapshot entry: this check's is compared; an earlier one (already
 * compared then) narrows the set to what it showed. */
static void observe(model_t *m, jobm_t *j, const op_t *o)
{
    if (!o->tube)
        return; /* read without its stats-job */
    if (o->check == m->c->number) {
        if (!j->overflow) /* else too uncertain to check */
            compare(m, j, o);
        return;
    }
    jobm_t after = {.n = 0};
    for (uint8_t i = 0; i < j->n; i++) {
        bool late = false;
        if (allows(&j->c[i], o, &late))
            add_cand(&after, late ? ready_like(&j->c[i]) : j->c[i]);
    }
    if (after.n == 0) {
        cand_t x;
        effect(o, &j->c[0], &x);
        add_cand(&after, x);
    }
    memcpy(j->c, after.c, sizeof after.c);
    j->n = after.n;
    j->overflow = false;
    j->maybe_gone = false;
}

/* Replays one event. */
static void replay(model_t *m, const op_t *o)
{
    if (o->kind == OP_KICK) {
        kick_tube(m, o);
        return;
    }
    jobm_t *j = job_of(m, o->kind == OP_PUT ? m->c->eff_id[o - m->c->h->ops] : o->id);
    birth(m, j);
    if (o->kind == OP_PUT)
        return;
    if (o->kind == OP_SEEN)
        observe(m, j, o);
    else if (o->kind != OP_DELETE)
        apply(m, j, o);
    else if (o->out == BQH_ACKED && !uncertain(m, o))
        j->gone = true;
    else if (o->out == BQH_ACKED || o->out == BQH_UNKNOWN)
        j->maybe_gone = true;
}

void bqh__check_states(check_t *c)
{
    model_t m = {.c = c};
    m.jobs = malloc((c->nids + 1) * sizeof *m.jobs);
    m.by_tube = malloc((c->nids + 1) * sizeof *m.by_tube);
    m.events = malloc((c->h->n + 1) * sizeof *m.events);
    if (!m.jobs || !m.by_tube || !m.events)
        abort();
    collect_jobs(&m);
    collect_events(&m);
    for (size_t i = 0; i < m.nevents; i++)
        replay(&m, &c->h->ops[m.events[i].op]);
    free(m.jobs);
    free(m.by_tube);
    free(m.events);
}
