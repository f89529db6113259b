/* The fault suites' client workload (workload.h): worker threads that put
 * and delete through any live node with every operation recorded, probes
 * that find the primary, waits with deadlines, and the end check. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/jobmix.h"
#include "tests/support/workload.h"

#define RETRY_MS 20    /* a worker's pause before it reconnects */
#define CONNECT_MS 250 /* a worker's connect timeout */
#define MAX_IDS 100000
#define MINE 64 /* a worker's acknowledged ids not yet deleted */

typedef struct worker {
    bqw_t *w;
    int id;
    bool mix; /* runs the richer workload (jobmix.h) */
    bqm_worker_t m;
    unsigned seq;                  /* its next put's number: bodies are unique */
    unsigned long long mine[MINE]; /* oldest first */
    size_t nmine;
    char error[160]; /* a reply no fault explains */
    pthread_t thread;
} worker_t;

struct bqw {
    bqc_cluster_t *c;
    char tube[32];
    size_t nworkers;
    worker_t wk[BQW_MAX_WORKERS];
    bool running, mix;
    atomic_bool stop;
    atomic_int port[BQC_MAX_NODES]; /* client port offered to the workers, 0: none */
    atomic_ulong acked;
    atomic_ullong after_ns; /* puts sent since count for recovery_wait (0: none do) */
    atomic_ullong first_ns; /* reply time of the first of them acknowledged (0: none yet) */
    atomic_uint probes;     /* the test thread's puts so far */
    bqh_history_t *h;
    pthread_mutex_t lock; /* guards ids */
    unsigned long long *ids;
    size_t nids;
};

bqw_t *bqw_new(bqc_cluster_t *c, const char *tube, size_t nworkers)
{
    bqw_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->c = c;
    snprintf(w->tube, sizeof w->tube, "%s", tube);
    w->nworkers = nworkers < BQW_MAX_WORKERS ? nworkers : BQW_MAX_WORKERS;
    w->h = bqh_new();
    w->ids = malloc(MAX_IDS * sizeof *w->ids);
    if (!w->h || !w->ids) {
        bqh_free(w->h);
        free(w->ids);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    return w;
}

void bqw_free(bqw_t *w)
{
    if (!w)
        return;
    bqw_stop(w);
    bqh_free(w->h);
    free(w->ids);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

bqh_history_t *bqw_history(bqw_t *w)
{
    return w->h;
}

const unsigned long long *bqw_ids(bqw_t *w, size_t *n)
{
    *n = w->nids;
    return w->ids;
}

/* ---- nodes ---- */

void bqw_node_up(bqw_t *w, size_t i, const char *const *flags)
{
    bqc_start(w->c, i, flags);
    bqw_node_offer(w, i, true);
}

void bqw_node_offer(bqw_t *w, size_t i, bool on)
{
    atomic_store(&w->port[i], on ? w->c->node[i].srv.port : 0);
}

void bqw_node_kill(bqw_t *w, size_t i)
{
    bqw_node_offer(w, i, false);
    bqh_fault(w->h, "kill -9 of %s", w->c->node[i].name);
    bqc_signal(w->c, i, SIGKILL);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- puts and deletes, recorded ---- */

static void note_ack(bqw_t *w, unsigned long long id, uint64_t sent_ns, uint64_t reply_ns)
{
    unsigned long long after = atomic_load(&w->after_ns), none = 0;
    atomic_fetch_add(&w->acked, 1);
    if (after && sent_ns >= after)
        atomic_compare_exchange_strong(&w->first_ns, &none, reply_ns);
    pthread_mutex_lock(&w->lock);
    if (w->nids < MAX_IDS)
        w->ids[w->nids++] = id;
    pthread_mutex_unlock(&w->lock);
}

/* Puts "<who>-<seq>" on fd; see bqw_put. */
static bqh_outcome_t put_as(bqw_t *w, int fd, int who, unsigned seq, int ms, unsigned long long *id,
                            char *err, size_t errlen)
{
    char cmd[128], body[48];
    bqh_job_t job = {.tube = w->tube};
    int blen = snprintf(body, sizeof body, "%d-%u", who, seq);
    snprintf(cmd, sizeof cmd, "put 0 0 120 %d\r\n%s\r\n", blen, body);
    uint64_t t0 = bqh_now_ns();
    char *line = bqc_ask(fd, cmd, ms);
    uint64_t t1 = bqh_now_ns();
    bqh_outcome_t out = !line                                    ? BQH_UNKNOWN
                        : sscanf(line, "INSERTED %llu", id) == 1 ? BQH_ACKED
                                                                 : BQH_REFUSED;
    if (out == BQH_REFUSED && !bqh_known_refusal(line))
        snprintf(err, errlen, "put: \"%.*s\"", (int)strcspn(line, "\r"), line);
    bqh_put_job(w->h, who, t0, t1, out, out == BQH_ACKED ? *id : 0, body, (size_t)blen, &job);
    if (out == BQH_ACKED)
        note_ack(w, *id, t0, t1);
    free(line);
    return out;
}

bqh_outcome_t bqw_put(bqw_t *w, int fd, int ms, unsigned long long *id, char *err, size_t errlen)
{
    return put_as(w, fd, BQW_PROBE_WORKER, atomic_fetch_add(&w->probes, 1), ms, id, err, errlen);
}

/* Deletes the worker's oldest acknowledged job; false when the connection
 * died or the delete was refused (the job is then still there: it stays
 * the oldest, to delete again). */
static bool w_delete(worker_t *k, int fd)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "delete %llu\r\n", k->mine[0]);
    uint64_t t0 = bqh_now_ns();
    char *line = bqc_ask(fd, cmd, BQC_REPLY_MS);
    bqh_outcome_t out = !line                            ? BQH_UNKNOWN
                        : !strcmp(line, "DELETED\r\n")   ? BQH_ACKED
                        : !strcmp(line, "NOT_FOUND\r\n") ? BQH_NOT_FOUND
                                                         : BQH_REFUSED;
    /* A fenced or draining primary answers OUT_OF_MEMORY or DRAINING, a
     * standby with no primary past its bound INTERNAL_ERROR: a known
     * failure, nothing done. Any other reply is wrong. */
    if (out == BQH_REFUSED && !bqh_known_refusal(line))
        snprintf(k->error, sizeof k->error, "delete %llu: \"%.*s\"", k->mine[0],
                 (int)strcspn(line, "\r"), line);
    bqh_delete(k->w->h, k->id, t0, bqh_now_ns(), out, k->mine[0]);
    if (out != BQH_REFUSED)
        memmove(k->mine, k->mine + 1, --k->nmine * sizeof k->mine[0]);
    free(line);
    return out == BQH_ACKED || out == BQH_NOT_FOUND;
}

/* A connection to a live node, trying them in turn from start; -1. A
 * connect that does not complete within CONNECT_MS moves on to the next
 * node, as a client's connect timeout does: after a container restarts,
 * the host's connection tracking can still send a reused source port to
 * the container's old address, and that SYN vanishes (docs/failover.md). */
static int connect_live(bqw_t *w, unsigned start)
{
    for (unsigned k = 0; k < w->c->n; k++) {
        int port = atomic_load(&w->port[(start + k) % w->c->n]);
        int fd = port ? bqt_connect_within(port, CONNECT_MS) : -1;
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* Sends `use <tube>` on fd; true when it was answered as it should. */
static bool use_tube(bqw_t *w, int fd, int ms)
{
    char cmd[48], want[48];
    snprintf(cmd, sizeof cmd, "use %s\r\n", w->tube);
    snprintf(want, sizeof want, "USING %s\r\n", w->tube);
    char *line = bqc_ask(fd, cmd, ms);
    bool ok = line && !strcmp(line, want);
    free(line);
    return ok;
}

/* Puts, and deletes one in two of its jobs, on fd until stopped or the
 * connection fails (dies, or a put or delete is refused). */
static void w_session(worker_t *k, int fd)
{
    bqw_t *w = k->w;
    bool alive = use_tube(w, fd, BQC_REPLY_MS);
    while (alive && !atomic_load(&w->stop)) {
        unsigned long long id = 0;
        if (k->nmine == MINE) { /* a refused delete left it full */
            alive = w_delete(k, fd);
            continue;
        }
        alive = put_as(w, fd, k->id, k->seq++, BQC_REPLY_MS, &id, k->error, sizeof k->error) ==
                BQH_ACKED;
        if (alive)
            k->mine[k->nmine++] = id;
        if (alive && (k->seq % 2 == 0 || k->nmine == MINE))
            alive = w_delete(k, fd);
    }
}

/* The richer workload (jobmix.h) on fd until stopped or the session
 * ends (the connection died, a command was refused). */
static void w_mix_session(worker_t *k, int fd)
{
    bqw_t *w = k->w;
    bqm_status_t st = bqm_connected(&k->m, fd, BQC_REPLY_MS);
    while (st == BQM_OK && !atomic_load(&w->stop)) {
        uint64_t sent = bqh_now_ns();
        st = bqm_step(&k->m, fd, BQC_REPLY_MS);
        if (k->m.acked_id)
            note_ack(w, k->m.acked_id, sent, bqh_now_ns());
    }
    if (st == BQM_WRONG)
        snprintf(k->error, sizeof k->error, "%.150s", k->m.error);
}

/* BQW_TRACE=1: each worker's sessions on stderr (wall-clock time, so
 * that they line up with the servers' logs). */
static void trace_session(const worker_t *k, int fd, uint64_t t0)
{
    static int on = -1;
    if (on < 0)
        on = getenv("BQW_TRACE") != NULL;
    if (!on)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%02d:%02d:%02d.%03ld worker %d: %s, %llu ms\n", tm.tm_hour, tm.tm_min,
            tm.tm_sec, ts.tv_nsec / 1000000, k->id,
            fd < 0 ? "no node took the connection" : "session ended",
            (unsigned long long)((bqh_now_ns() - t0) / 1000000));
}

static void *worker_main(void *arg)
{
    worker_t *k = arg;
    bqw_t *w = k->w;
    for (unsigned attempt = (unsigned)k->id; !atomic_load(&w->stop); attempt++) {
        uint64_t t0 = bqh_now_ns();
        int fd = connect_live(w, attempt);
        if (fd >= 0) {
            if (k->mix)
                w_mix_session(k, fd);
            else
                w_session(k, fd);
            close(fd);
        }
        trace_session(k, fd, t0);
        if (!atomic_load(&w->stop))
            nap_ms(RETRY_MS);
    }
    return NULL;
}

void bqw_mix(bqw_t *w, bool on)
{
    w->mix = on;
}

void bqw_start(bqw_t *w)
{
    atomic_store(&w->stop, false);
    for (size_t i = 0; i < w->nworkers; i++) {
        worker_t *k = &w->wk[i];
        if (k->w != w) /* first start: a restart keeps the mix workers' jobs */
            bqm_init(&k->m, w->h, (int)i, w->tube, "", bqh_now_ns() ^ (i * 7919u));
        worker_t again = {.w = w,
                          .id = (int)i,
                          .mix = w->mix && i % 2 == 1,
                          .m = k->m,
                          .seq = k->seq}; /* bodies stay unique */
        memcpy(again.mine, k->mine, sizeof again.mine);
        again.nmine = k->nmine;
        *k = again;
        assert_int_equal(pthread_create(&k->thread, NULL, worker_main, k), 0);
    }
    w->running = true;
}

bool bqw_stop(bqw_t *w)
{
    bool ok = true;
    if (!w->running)
        return true;
    atomic_store(&w->stop, true);
    for (size_t i = 0; i < w->nworkers; i++) {
        pthread_join(w->wk[i].thread, NULL);
        if (w->wk[i].error[0]) {
            fprintf(stderr, "worker %zu: %s\n", i, w->wk[i].error);
            ok = false;
        }
    }
    w->running = false;
    return ok;
}

bool bqw_running(const bqw_t *w)
{
    return w->running;
}

unsigned long bqw_acked(bqw_t *w)
{
    return atomic_load(&w->acked);
}

typedef struct count_wait {
    atomic_ulong *n;
    unsigned long target;
} count_wait_t;

static bool count_reached(void *arg)
{
    count_wait_t *cw = arg;
    return atomic_load(cw->n) >= cw->target;
}

void bqw_wait_acks(bqw_t *w, unsigned long more)
{
    count_wait_t cw = {&w->acked, atomic_load(&w->acked) + more};
    if (!bqt_wait_until(count_reached, &cw, BQC_WAIT_MS))
        fail_msg("only %lu puts acknowledged within %d ms, want %lu", atomic_load(&w->acked),
                 BQC_WAIT_MS, cw.target);
}

uint64_t bqw_recovery_arm(bqw_t *w)
{
    atomic_store(&w->first_ns, 0);
    uint64_t now = bqh_now_ns();
    atomic_store(&w->after_ns, now);
    return now;
}

static bool acked_again(void *arg)
{
    return atomic_load(&((bqw_t *)arg)->first_ns) != 0;
}

long long bqw_recovery_wait(bqw_t *w, uint64_t t0, const char *what)
{
    if (!bqt_wait_until(acked_again, w, BQC_WAIT_MS))
        fail_msg("no put was acknowledged within %d ms of %s", BQC_WAIT_MS, what);
    long long ms = (long long)((atomic_load(&w->first_ns) - t0) / 1000000);
    atomic_store(&w->after_ns, 0);
    bqh_mark(w->h, "puts acknowledged again %lld ms after %s", ms, what);
    return ms;
}

/* ---- who is primary ---- */

int bqw_client(bqw_t *w, size_t i)
{
    int fd = bqt_client(&w->c->node[i].srv);
    if (!use_tube(w, fd, BQC_REPLY_MS))
        fail_msg("use %s through %s was not answered", w->tube, w->c->node[i].name);
    return fd;
}

int bqw_probe(bqw_t *w, size_t i, bqc_view_t *v)
{
    int port = atomic_load(&w->port[i]);
    int fd = port ? bqt_connect(port) : -1;
    char err[160] = "";
    unsigned long long id;
    if (fd < 0)
        return -1;
    bool ok = use_tube(w, fd, BQW_PROBE_MS) &&
              bqw_put(w, fd, BQW_PROBE_MS, &id, err, sizeof err) == BQH_ACKED;
    if (err[0])
        fprintf(stderr, "probe through %s: %s\n", w->c->node[i].name, err);
    char *r = ok ? bqc_ask(fd, "stats\r\n", BQW_PROBE_MS) : NULL;
    ok = ok && bqc_view_parse(r, v) == 0 && !strcmp(v->role, "primary");
    free(r);
    close(fd);
    return ok ? 0 : -1;
}

typedef struct primary_wait {
    bqw_t *w;
    int exclude;   /* a node not to ask (paused, cut off), or -1 */
    unsigned skip; /* settled: nodes not expected to stream */
    bqc_view_t v;
} primary_wait_t;

static bool primary_found(void *arg)
{
    primary_wait_t *pw = arg;
    for (size_t i = 0; i < pw->w->c->n; i++) {
        if ((int)i == pw->exclude || bqw_probe(pw->w, i, &pw->v) != 0)
            continue;
        int k = bqc_index(pw->w->c, pw->v.node);
        if (k >= 0 && k != pw->exclude)
            return true;
    }
    return false;
}

size_t bqw_wait_primary(bqw_t *w, int exclude, bqc_view_t *v)
{
    primary_wait_t pw = {.w = w, .exclude = exclude};
    if (!bqt_wait_until(primary_found, &pw, BQC_WAIT_MS))
        fail_msg("no primary%s%s acknowledged a put within %d ms", exclude >= 0 ? " but " : "",
                 exclude >= 0 ? w->c->node[exclude].name : "", BQC_WAIT_MS);
    *v = pw.v;
    return (size_t)bqc_index(w->c, v->node);
}

typedef struct standby_wait {
    bqw_t *w;
    const char *name;
    bool caught_up; /* also applied == cluster-last-lsn */
    bqc_view_t v;
    char seen[24];
} standby_wait_t;

/* The primary's stats, through any live node, show the standby streaming. */
static bool standby_streaming(void *arg)
{
    standby_wait_t *sw = arg;
    for (unsigned i = 0; i < sw->w->c->n; i++) {
        int fd = connect_live(sw->w, i);
        char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", BQW_PROBE_MS) : NULL;
        bool ok = bqc_view_parse(r, &sw->v) == 0 && !strcmp(sw->v.role, "primary");
        int k = ok ? bqc_view_standby(&sw->v, sw->name) : -1;
        free(r);
        if (fd >= 0)
            close(fd);
        if (k < 0)
            continue;
        snprintf(sw->seen, sizeof sw->seen, "%s", sw->v.sb[k].state);
        return !strcmp(sw->v.sb[k].state, "streaming") &&
               (!sw->caught_up || sw->v.sb[k].applied == sw->v.last_lsn);
    }
    return false;
}

void bqw_wait_streaming(bqw_t *w, size_t i, bool caught_up)
{
    standby_wait_t sw = {
        .w = w, .name = w->c->node[i].name, .caught_up = caught_up, .seen = "unknown"};
    if (!bqt_wait_until(standby_streaming, &sw, BQC_WAIT_MS))
        fail_msg("within %d ms the primary did not report %s streaming%s (last seen: %s)",
                 BQC_WAIT_MS, sw.name, caught_up ? " and caught up" : "", sw.seen);
}

/* A put through some node was acknowledged by a primary whose stats show
 * every other node not in skip streaming from it. */
static bool settled(void *arg)
{
    primary_wait_t *pw = arg;
    if (!primary_found(pw))
        return false;
    for (size_t i = 0; i < pw->w->c->n; i++) {
        const char *name = pw->w->c->node[i].name;
        if (!strcmp(name, pw->v.node) || (pw->skip & (1u << i)))
            continue;
        int k = bqc_view_standby(&pw->v, name);
        if (k < 0 || strcmp(pw->v.sb[k].state, "streaming"))
            return false;
    }
    return true;
}

size_t bqw_wait_settled(bqw_t *w, unsigned skip, bqc_view_t *v)
{
    primary_wait_t pw = {.w = w, .exclude = -1, .skip = skip};
    if (!bqt_wait_until(settled, &pw, BQC_WAIT_MS))
        fail_msg("within %d ms no primary had the other nodes streaming from it", BQC_WAIT_MS);
    *v = pw.v;
    return (size_t)bqc_index(w->c, v->node);
}

/* ---- the check ---- */

size_t bqw_check(bqw_t *w, size_t p, const bqh_rules_t *rules, bqh_report_t *out)
{
    char err[256];
    bqh_snapshot_t *snap = NULL;
    bqh_report_t rep;
    if (!bqw_stop(w))
        fail_msg("a worker got a reply that no fault explains");
    int fd = bqt_client(&w->c->node[p].srv);
    int rc = bqh_snapshot_take(w->h, fd, w->tube, BQC_WAIT_MS, &snap, err, sizeof err);
    close(fd); /* releases the jobs the snapshot reserved */
    if (rc != 0)
        fail_msg("snapshot through %s: %s", w->c->node[p].name, err);
    size_t bad = bqh_check(w->h, snap, rules, &rep);
    bqh_snapshot_free(snap);
    bqh_report_summary(stderr, &rep);
    if (bad)
        bqh_report_print(stderr, w->h, &rep);
    if (out)
        *out = rep;
    assert_int_equal(rep.problems[BQH_LOST], 0);
    assert_int_equal(rep.problems[BQH_RESURRECTED], 0);
    assert_int_equal(bad, 0);
    assert_true(rep.puts_acked > 0 && rep.present > 0);
    return rep.present;
}
