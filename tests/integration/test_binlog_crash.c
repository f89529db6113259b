/* Crash tests of the binlog with real processes: rounds of concurrent
 * producers and consumers against our server on one binlog directory,
 * kill -9 at a random moment while traffic flows, restart on the same
 * directory, and a check of everything the clients saw against what the
 * server holds (tests/support/history.h).
 *
 * Two scenarios crash the process only (-f 0, -f 50: the page cache
 * survives, nothing acknowledged may be lost). Three simulate a power loss
 * with crashfs (tests/support/crashfs/README.md), a layer below the server
 * that it cannot fool: the server runs under LD_PRELOAD with CRASHFS_ROOT
 * set to the binlog directory, the layer journals what each completed
 * fsync, fdatasync and directory fsync made durable, and after the kill -9
 * crashfs-powerloss rewrites the directory to exactly that (segments never
 * made durable disappear, contents roll back), with a torn write in the
 * unsynced range chosen at random (BQ_CRASH_TEAR: none, prefix-sector,
 * prefix-byte, garbage, sectors, random; default random). The server
 * restarts under the layer on what is left, and what it holds is checked
 * against docs/binlog.md:
 *
 *   -f 0   nothing acknowledged may be lost or undone;
 *   -f MS  only acknowledgements of the last MS ms before the kill, plus
 *          twice the longest fsync the layer saw and BQ_CRASH_SLACK_MS
 *          (default 100) for the loop, may be undone (counted);
 *   -F     the crashed server's acknowledgements may be undone.
 *
 * Start-up must never stop, whatever the tear (writeback in any order
 * included: BQ_CRASH_TEAR=sectors).
 *
 * In every case ids are never reused and nothing appears that nobody put.
 * After the last round the server is stopped with SIGTERM; for -f 0 and
 * -f MS a power loss follows, and everything acknowledged must survive it
 * (a clean stop syncs everything).
 *
 * Each scenario runs BQ_CRASH_ROUNDS rounds (default 20; unless
 * BQ_CRASH_ROUNDS is set, no more once SCENARIO_BUDGET_MS has passed) and
 * at least MIN_ROUNDS (BQ_CRASH_MIN_ROUNDS): a scenario that has not
 * completed them within MIN_ROUNDS_DEADLINE_MS fails. BQ_CRASH_SEED repeats
 * a run. On a failure the history of the bad ids is printed and the work
 * directory (binlog/, server.log of every round, crashfs.log with the
 * power-loss tool's report of every round, journal.last: the layer's
 * journal of the last round) is kept. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"
#include "tests/support/cluster.h"
#include "tests/support/history.h"
#include "tests/support/jobmix.h"

#define WORKERS 4 /* producers, and as many consumers */
#define MIXERS 2  /* richer workers, one command at a time, in mix scenarios */
#define WINDOW 4  /* commands a worker keeps in flight */
#define RING (4 * WINDOW)
#define RUN_MIN_MS 50
#define RUN_MAX_MS 400
#define DEFAULT_ROUNDS 20
#define MIN_ROUNDS 10                /* at least this many, or the scenario fails */
#define SCENARIO_BUDGET_MS 12000     /* more rounds than MIN_ROUNDS only within this */
#define MIN_ROUNDS_DEADLINE_MS 90000 /* MIN_ROUNDS, even on a loaded ASan machine */
#define REPLY_DEADLINE_MS 20000      /* a live server that stays silent this long is stuck */
#define TRAFFIC_DEADLINE_MS 10000
#define SNAPSHOT_DEADLINE_MS 30000
#define EXIT_DEADLINE_MS 10000
#define TUBE "crash"
#define MAX_BODY 4096
#define POWERLOSS_DEADLINE_MS 60000
#define DEFAULT_SLACK_MS 100 /* -f MS: loop lateness allowed on top of MS and the fsyncs */

typedef struct scenario {
    const char *name;
    const char *fsync_ms; /* -f, or NULL for -F */
    const char *seg_size; /* -s for half the starts (the default for the others), or NULL */
    bool power_loss;      /* under crashfs, with crashfs-powerloss after each kill */
    bool mix;             /* MIXERS more workers run the richer workload (jobmix.h) */
} scenario_t;

typedef struct suite {
    char work[64]; /* kept on failure */
    char binlog[96], crashfs[96], serverlog[96], plog[96];
    bqt_server_t srv;
    bqh_history_t *h;
    const scenario_t *sc;
    uint64_t rng;
    int round;
    uint64_t promised_from; /* when the running server had replayed its log */
    unsigned long long dropped, torn, allowed_lost, allowed_resurrected, unknown_rounds;
    uint64_t max_sync_ns;       /* the longest fsync crashfs saw in the last round */
    uint64_t window_ns;         /* -f MS: how far back before the kill may be undone */
    bqh_report_t last;          /* of the last verification */
    bqm_worker_t mixer[MIXERS]; /* their jobs and PRNGs last across rounds */
    bool passed;
} suite_t;

typedef struct worker {
    suite_t *s;
    int id, port;
    bool producer;
    bqm_worker_t *mixer; /* a richer worker's state (in the suite), or NULL */
    uint64_t rng;
    atomic_bool *stop;
    atomic_ulong *acked; /* puts acknowledged this round, all producers */
    bool unknown;        /* an outcome was left unknown */
    char error[200];     /* set on anything but a dead connection */
    pthread_t thread;
} worker_t;

/* ---- helpers ---- */

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* malloc for worker threads, which must not use cmocka's asserts. */
static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

static int suite_setup(void **state)
{
    suite_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    if (bqt_mkdtemp(s->work, sizeof s->work, "bq-crash") != 0) {
        free(s);
        return -1;
    }
    snprintf(s->binlog, sizeof s->binlog, "%s/binlog", s->work);
    snprintf(s->crashfs, sizeof s->crashfs, "%s/crashfs", s->work);
    snprintf(s->plog, sizeof s->plog, "%s/crashfs.log", s->work);
    snprintf(s->serverlog, sizeof s->serverlog, "%s/server.log", s->work);
    mkdir(s->binlog, 0700);
    const char *seed = getenv("BQ_CRASH_SEED");
    s->rng = seed && *seed ? strtoull(seed, NULL, 10) : (uint64_t)bqt_now_ms() ^ (uint64_t)getpid();
    s->rng |= 1;
    s->h = bqh_new();
    *state = s;
    return s->h ? 0 : -1;
}

/* Appends the log of server pid (running or just ended) to serverlog. */
static void save_server_log(suite_t *s, pid_t pid, const char *what)
{
    char buf[8192];
    size_t n;
    if (!s->srv.log_path[0])
        return;
    FILE *in = fopen(s->srv.log_path, "r"), *out = fopen(s->serverlog, "a");
    if (out)
        fprintf(out, "=== %s, round %d, pid %d, port %d ===\n", what, s->round, (int)pid,
                s->srv.port);
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static int suite_teardown(void **state)
{
    suite_t *s = *state;
    if (s->srv.pid > 0) {
        save_server_log(s, s->srv.pid, s->passed ? "stopped" : "killed after a failure");
        if (!s->passed)
            bqt_server_signal(&s->srv, SIGKILL); /* the binlog as the failure left it */
    }
    bqt_server_stop(&s->srv);
    if (!s->passed)
        fprintf(stderr, "binlog directory, server logs and crashfs reports kept in %s (seed %s)\n",
                s->work, getenv("BQ_CRASH_SEED") ? getenv("BQ_CRASH_SEED") : "printed above");
    else if (!getenv("BQT_KEEP_DIRS"))
        bqc_remove_tree(s->work);
    bqh_free(s->h);
    free(s);
    return 0;
}

/* ---- a worker's connection ---- */

typedef struct wconn {
    int fd;
    size_t beg, end;
    char buf[1 << 16];
} wconn_t;

enum { IO_OK = 1, IO_DEAD = 0, IO_STUCK = -1 };

static bool wc_send(wconn_t *c, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads more into the buffer before deadline (ms). */
static int wc_fill(wconn_t *c, long long deadline)
{
    if (c->beg > 0) {
        memmove(c->buf, c->buf + c->beg, c->end - c->beg);
        c->end -= c->beg;
        c->beg = 0;
    }
    for (;;) {
        long long left = deadline - bqt_now_ms();
        struct pollfd p = {c->fd, POLLIN, 0};
        if (left <= 0 || c->end == sizeof c->buf)
            return IO_STUCK;
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno != EINTR)
            return IO_DEAD;
        if (r <= 0)
            continue;
        ssize_t n = read(c->fd, c->buf + c->end, sizeof c->buf - c->end);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return IO_DEAD;
        c->end += (size_t)n;
        return IO_OK;
    }
}

/* One reply line (NUL-terminated, no CRLF) in *line, valid until the next
 * read on c. */
static int wc_line(wconn_t *c, char **line)
{
    long long deadline = bqt_now_ms() + REPLY_DEADLINE_MS;
    for (;;) {
        char *p = c->buf + c->beg, *nl = memchr(p, '\n', c->end - c->beg);
        if (nl && nl > p && nl[-1] == '\r') {
            nl[-1] = '\0';
            c->beg = (size_t)(nl + 1 - c->buf);
            *line = p;
            return IO_OK;
        }
        int r = wc_fill(c, deadline);
        if (r != IO_OK)
            return r;
    }
}

/* A body of len bytes and its CRLF, copied into out[len + 2]. */
static int wc_body(wconn_t *c, char *out, size_t len)
{
    long long deadline = bqt_now_ms() + REPLY_DEADLINE_MS;
    size_t got = 0;
    while (got < len + 2) {
        if (c->beg == c->end) {
            int r = wc_fill(c, deadline);
            if (r != IO_OK)
                return r;
        }
        size_t take = c->end - c->beg < len + 2 - got ? c->end - c->beg : len + 2 - got;
        memcpy(out + got, c->buf + c->beg, take);
        c->beg += take;
        got += take;
    }
    out[len] = '\0';
    return IO_OK;
}

/* Sends the setup commands and checks their replies; false when the
 * connection died (w->error set on a wrong reply). */
static bool wc_setup(worker_t *w, wconn_t *c, const char *cmds, int replies, const char *prefix)
{
    char *line;
    if (!wc_send(c, cmds, strlen(cmds)))
        return false;
    for (int i = 0; i < replies; i++) {
        int r = wc_line(c, &line);
        if (r == IO_STUCK)
            snprintf(w->error, sizeof w->error, "no reply to \"%s\"", cmds);
        if (r != IO_OK)
            return false;
        if (strncmp(line, prefix, strlen(prefix)) != 0) {
            snprintf(w->error, sizeof w->error, "reply \"%.60s\" to \"%s\"", line, cmds);
            return false;
        }
    }
    return true;
}

static void worker_stuck(worker_t *w, int r, const char *what)
{
    if (r == IO_STUCK)
        snprintf(w->error, sizeof w->error, "no reply to a %s within %d ms", what,
                 REPLY_DEADLINE_MS);
}

/* ---- producers ---- */

typedef struct pput {
    uint64_t sent;
    char *body;
    size_t len;
    uint32_t pri;
} pput_t;

/* A unique body: round, worker and sequence, padded to a random length
 * (now and then a large one). */
static char *make_body(worker_t *w, unsigned long seq, size_t *len)
{
    size_t want = 16 + next_rand(&w->rng) % 185;
    if (next_rand(&w->rng) % 50 == 0)
        want = 1000 + next_rand(&w->rng) % (MAX_BODY - 1000);
    char *b = xmalloc(want + 64);
    size_t n = (size_t)snprintf(b, 64, "r%03d-w%d-%06lu-", w->s->round, w->id, seq);
    while (n < want)
        b[n++] = (char)('a' + next_rand(&w->rng) % 26);
    b[n] = '\0';
    *len = n;
    return b;
}

/* Sends one put; false when the connection died. The put is queued first,
 * so that it counts as unknown if the send fails. */
static bool send_put(worker_t *w, wconn_t *c, pput_t *q, unsigned long seq)
{
    char head[64];
    q->body = make_body(w, seq, &q->len);
    q->pri = (uint32_t)(next_rand(&w->rng) % 8);
    int hl = snprintf(head, sizeof head, "put %u 0 120 %zu\r\n", q->pri, q->len);
    q->sent = bqh_now_ns();
    memcpy(q->body + q->len, "\r\n", 3);
    return wc_send(c, head, (size_t)hl) && wc_send(c, q->body, q->len + 2);
}

static void record_put(worker_t *w, pput_t *q, const char *reply)
{
    unsigned long long id = 0;
    bqh_outcome_t out = BQH_UNKNOWN;
    if (reply &&
        (sscanf(reply, "INSERTED %llu", &id) == 1 || sscanf(reply, "BURIED %llu", &id) == 1))
        out = BQH_ACKED;
    else if (reply)
        out = BQH_REFUSED;
    w->unknown |= out == BQH_UNKNOWN;
    bqh_job_t job = {.tube = TUBE, .pri = q->pri};
    bqh_put_job(w->s->h, w->id, q->sent, bqh_now_ns(), out, id, q->body, q->len, &job);
    if (out == BQH_ACKED)
        atomic_fetch_add(w->acked, 1);
    free(q->body);
}

static void *producer(void *arg)
{
    worker_t *w = arg;
    wconn_t *c = calloc(1, sizeof *c);
    pput_t q[WINDOW];
    size_t head = 0, n = 0;
    unsigned long seq = 0;
    bool alive;
    if (!c)
        return NULL;
    c->fd = bqt_connect(w->port);
    alive = c->fd >= 0 && wc_setup(w, c, "use " TUBE "\r\n", 1, "USING ");
    while (alive) {
        while (alive && n < WINDOW && !atomic_load(w->stop))
            alive = send_put(w, c, &q[(head + n++) % WINDOW], seq++);
        if (!alive || n == 0)
            break;
        char *line;
        int r = wc_line(c, &line);
        worker_stuck(w, r, "put");
        if (r != IO_OK)
            break;
        record_put(w, &q[head], line);
        head = (head + 1) % WINDOW;
        n--;
    }
    for (; n > 0; n--, head = (head + 1) % WINDOW)
        record_put(w, &q[head], NULL);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return NULL;
}

/* ---- consumers ---- */

typedef struct pcmd {
    uint64_t sent, id; /* id: a delete's job; 0 for a reserve */
} pcmd_t;

typedef struct cring {
    pcmd_t q[RING];
    size_t head, n;
} cring_t;

static bool send_cmd(wconn_t *c, cring_t *r, uint64_t id)
{
    char cmd[64];
    int len = id ? snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", id)
                 : snprintf(cmd, sizeof cmd, "reserve-with-timeout 1\r\n");
    r->q[(r->head + r->n++) % RING] = (pcmd_t){bqh_now_ns(), id};
    return wc_send(c, cmd, (size_t)len);
}

/* Handles the reply to a reserve; IO_OK, IO_DEAD or IO_STUCK (w->error set
 * on a wrong reply). Sends the delete and the next reserve. */
static int on_reserve_reply(worker_t *w, wconn_t *c, cring_t *r, const pcmd_t *p, char *line)
{
    unsigned long long id;
    size_t len;
    if (sscanf(line, "RESERVED %llu %zu", &id, &len) == 2 && len <= MAX_BODY) {
        char *body = xmalloc(len + 3);
        int rr = wc_body(c, body, len);
        if (rr == IO_OK)
            bqh_reserve(w->s->h, w->id, p->sent, bqh_now_ns(), id, body, len);
        free(body);
        if (rr != IO_OK)
            return rr;
        if (!send_cmd(c, r, id))
            return IO_DEAD;
    } else if (strcmp(line, "TIMED_OUT") != 0 && strcmp(line, "DEADLINE_SOON") != 0) {
        snprintf(w->error, sizeof w->error, "reply \"%.60s\" to a reserve", line);
        return IO_DEAD;
    }
    return atomic_load(w->stop) || send_cmd(c, r, 0) ? IO_OK : IO_DEAD;
}

/* Records the reply to a delete: any but DELETED and NOT_FOUND is a
 * refusal (nothing done), which ends the connection; one other than
 * OUT_OF_MEMORY or DRAINING is wrong (w->error). */
static int on_delete_reply(worker_t *w, const pcmd_t *p, const char *line)
{
    bqh_outcome_t out = strcmp(line, "DELETED") == 0     ? BQH_ACKED
                        : strcmp(line, "NOT_FOUND") == 0 ? BQH_NOT_FOUND
                                                         : BQH_REFUSED;
    bqh_delete(w->s->h, w->id, p->sent, bqh_now_ns(), out, p->id);
    if (out != BQH_REFUSED)
        return IO_OK;
    if (strcmp(line, "OUT_OF_MEMORY") != 0 && strcmp(line, "DRAINING") != 0)
        snprintf(w->error, sizeof w->error, "reply \"%.60s\" to delete %" PRIu64, line, p->id);
    return IO_DEAD;
}

static void *consumer(void *arg)
{
    worker_t *w = arg;
    wconn_t *c = calloc(1, sizeof *c);
    cring_t r = {0};
    bool alive;
    if (!c)
        return NULL;
    c->fd = bqt_connect(w->port);
    alive = c->fd >= 0 && wc_setup(w, c, "watch " TUBE "\r\nignore default\r\n", 2, "WATCHING ");
    for (int i = 0; alive && i < WINDOW; i++)
        alive = send_cmd(c, &r, 0);
    while (alive && r.n > 0) {
        char *line;
        pcmd_t p = r.q[r.head];
        int rc = wc_line(c, &line);
        worker_stuck(w, rc, p.id ? "delete" : "reserve");
        if (rc != IO_OK)
            break;
        r.head = (r.head + 1) % RING;
        r.n--;
        rc = p.id ? on_delete_reply(w, &p, line) : on_reserve_reply(w, c, &r, &p, line);
        worker_stuck(w, rc, "reserved job's body");
        alive = rc == IO_OK;
    }
    for (; r.n > 0; r.n--, r.head = (r.head + 1) % RING) {
        pcmd_t *p = &r.q[r.head];
        if (p->id) {
            bqh_delete(w->s->h, w->id, p->sent, bqh_now_ns(), BQH_UNKNOWN, p->id);
            w->unknown = true;
        }
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return NULL;
}

/* ---- richer workers (mix scenarios) ---- */

/* One command at a time of tests/support/jobmix.h until stopped or the
 * connection dies; every outcome is recorded by bqm_step. */
static void *mixer(void *arg)
{
    worker_t *w = arg;
    int fd = bqt_connect(w->port);
    if (fd < 0) {
        snprintf(w->error, sizeof w->error, "cannot connect to port %d", w->port);
        return NULL;
    }
    bqm_status_t st = bqm_connected(w->mixer, fd, REPLY_DEADLINE_MS);
    while (st == BQM_OK && !atomic_load(w->stop))
        st = bqm_step(w->mixer, fd, REPLY_DEADLINE_MS);
    w->unknown |= st == BQM_DEAD || st == BQM_STUCK;
    if (st == BQM_WRONG || st == BQM_REFUSED)
        snprintf(w->error, sizeof w->error, "%s",
                 w->mixer->error[0] ? w->mixer->error : "a command was refused");
    else if (st == BQM_STUCK)
        snprintf(w->error, sizeof w->error, "no reply within %d ms", REPLY_DEADLINE_MS);
    close(fd);
    return NULL;
}

/* ---- the server ---- */

/* Starts the server on the binlog: in power-loss scenarios under crashfs
 * (its journal in s->crashfs, outside the binlog directory). */
static int try_start(suite_t *s)
{
    const char *args[12] = {"-b", s->binlog};
    size_t n = 2;
    if (s->sc->fsync_ms) {
        args[n++] = "-f";
        args[n++] = s->sc->fsync_ms;
    } else {
        args[n++] = "-F";
    }
    /* Small segments rotate (and, unless -F, fsync) every few ms under this
     * load, which would hide what the -f timer does: every start picks. */
    if (s->sc->seg_size && next_rand(&s->rng) % 2 == 0) {
        args[n++] = "-s";
        args[n++] = s->sc->seg_size;
    }
    args[n] = NULL;
    if (s->sc->power_loss) {
        const char *pre = getenv("BQ_CRASHFS_PRELOAD");
        setenv("LD_PRELOAD", pre && *pre ? pre : BQ_CRASHFS_PRELOAD, 1);
        setenv("CRASHFS_ROOT", s->binlog, 1);
        setenv("CRASHFS_STATE", s->crashfs, 1);
    }
    int rc = bqt_server_start(&s->srv, bqt_our_binary(), args);
    unsetenv("LD_PRELOAD");
    unsetenv("CRASHFS_ROOT");
    unsetenv("CRASHFS_STATE");
    return rc;
}

static void start_server(suite_t *s)
{
    if (try_start(s) != 0)
        fail_msg("round %d: the server did not start on %s (its log is above)", s->round,
                 s->binlog);
}

static void fail_with_report(suite_t *s, const bqh_report_t *rep, const char *what)
{
    fprintf(stderr, "%s: round %d: %s\n", s->sc->name, s->round, what);
    bqh_report_print(stderr, s->h, rep);
    fail_msg("%s: the history check failed after round %d (work directory %s)", s->sc->name,
             s->round, s->work);
}

/* Starts the server on the binlog and checks what it holds against the
 * history. `promised` is when acknowledgements start to be allowed to have
 * been undone (BQH_ALL_PROMISED: none). */
static void restart_and_verify(suite_t *s, uint64_t promised)
{
    char err[256];
    bqh_snapshot_t *snap = NULL;
    bqh_report_t rep;
    start_server(s);
    int fd = bqt_connect(s->srv.port);
    assert_true(fd >= 0);
    int rc = bqh_snapshot_take(s->h, fd, TUBE, SNAPSHOT_DEADLINE_MS, &snap, err, sizeof err);
    close(fd); /* releases the jobs the snapshot reserved */
    if (rc != 0)
        fail_msg("%s: round %d: snapshot failed: %s", s->sc->name, s->round, err);
    bqh_rules_t rules = {.promised_before = promised};
    size_t bad = bqh_check(s->h, snap, &rules, &rep);
    s->last = rep;
    s->promised_from = bqh_snapshot_time(snap);
    bqh_mark(s->h, "round %d: server pid %d up on port %d, %zu jobs", s->round, (int)s->srv.pid,
             s->srv.port, bqh_snapshot_count(snap));
    bqh_snapshot_free(snap);
    bqh_settled(s->h, "round %d: every worker joined, the server restarted", s->round);
    s->allowed_lost += rep.allowed_lost;
    s->allowed_resurrected += rep.allowed_resurrected;
    if (rep.allowed_lost || rep.allowed_resurrected)
        fprintf(stderr,
                "%s: round %d: allowed after a power loss under %s%s: %zu lost, %zu "
                "resurrected\n",
                s->sc->name, s->round, s->sc->fsync_ms ? "-f " : "-F",
                s->sc->fsync_ms ? s->sc->fsync_ms : "", rep.allowed_lost, rep.allowed_resurrected);
    if (bad)
        fail_with_report(s, &rep, "history check failed");
}

/* ---- power loss ---- */

/* The value of key=N in the tool's report line; 0 when absent. */
static unsigned long long report_field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* What a power loss leaves: crashfs-powerloss rewrites the binlog
 * directory to what the killed server had made durable (per the layer's
 * journal), with a torn write in the unsynced range as BQ_CRASH_TEAR says
 * (default: random). Its report is appended to crashfs.log. */
static void simulate_power_loss(suite_t *s)
{
    char seed[32], log[160], journal[160], *text;
    const char *tear = getenv("BQ_CRASH_TEAR");
    const char *tool = getenv("BQ_CRASHFS_TOOL");
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(next_rand(&s->rng) % 1000000007));
    snprintf(log, sizeof log, "%s/crashfs-last.log", s->work);
    snprintf(journal, sizeof journal, "%s/journal.last", s->work);
    const char *args[] = {
        "--seed",  seed,       "--tear", tear && *tear ? tear : "random", "--save-journal", journal,
        s->binlog, s->crashfs, NULL};
    int rc =
        bqt_run_to_exit(tool && *tool ? tool : BQ_CRASHFS_TOOL, args, log, POWERLOSS_DEADLINE_MS);
    text = NULL;
    size_t len = 0;
    FILE *f = fopen(log, "r"), *out = fopen(s->plog, "a");
    if (f) {
        text = calloc(1, 1 << 16);
        len = text ? fread(text, 1, (1 << 16) - 1, f) : 0;
        fclose(f);
    }
    if (out && text) {
        fprintf(out, "=== %s, round %d ===\n%s", s->sc->name, s->round, text);
        fclose(out);
    } else if (out) {
        fclose(out);
    }
    if (rc != 0 || !text || !strstr(text, "crashfs-powerloss: files=")) {
        fprintf(stderr, "%s: round %d: crashfs-powerloss: %.*s\n", s->sc->name, s->round, (int)len,
                text ? text : "");
        free(text);
        fail_msg("%s: round %d: crashfs-powerloss failed (exit %d; its output is above)",
                 s->sc->name, s->round, rc);
    }
    unsigned long long dropped = report_field(text, "dropped_bytes=");
    unsigned long long torn = report_field(text, "torn_bytes=");
    s->dropped += dropped;
    s->torn += torn > 0;
    s->max_sync_ns = report_field(text, "max_sync_us=") * 1000;
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0'; /* the summary line; the tear's line follows */
    bqh_mark(s->h, "round %d: power loss: %s", s->round, text + strlen("crashfs-powerloss: "));
    if (nl && strstr(nl + 1, "tear: ")) {
        char *t = strstr(nl + 1, "tear: ");
        char *e = strchr(t, '\n');
        if (e)
            *e = '\0';
        bqh_mark(s->h, "round %d: power loss: %s", s->round, t);
    }
    free(text);
}

/* ---- rounds ---- */

typedef struct kill_wait {
    suite_t *s;
    long long at;        /* the random moment */
    atomic_ulong *acked; /* the kill waits for traffic */
    bool exited;
} kill_wait_t;

static bool time_to_kill(void *arg)
{
    kill_wait_t *k = arg;
    if (bqt_server_wait(&k->s->srv, 0) != -1) {
        k->exited = true; /* on its own: a crash */
        return true;
    }
    return bqt_now_ms() >= k->at && atomic_load(k->acked) > 0;
}

/* The workers of a round: producers, consumers and, in mix scenarios,
 * MIXERS richer ones (whose jobs live on in the suite). */
static int workers_of(const suite_t *s)
{
    return 2 * WORKERS + (s->sc->mix ? MIXERS : 0);
}

static void start_workers(suite_t *s, worker_t *w, atomic_bool *stop, atomic_ulong *acked)
{
    for (int i = 0; i < workers_of(s); i++) {
        w[i] = (worker_t){.s = s,
                          .id = i,
                          .port = s->srv.port,
                          .producer = i < WORKERS,
                          .mixer = i >= 2 * WORKERS ? &s->mixer[i - 2 * WORKERS] : NULL,
                          .rng = next_rand(&s->rng) | 1,
                          .stop = stop,
                          .acked = acked};
        void *(*run)(void *) = w[i].mixer ? mixer : w[i].producer ? producer : consumer;
        assert_int_equal(pthread_create(&w[i].thread, NULL, run, &w[i]), 0);
    }
}

/* Joins the workers; false when one of them failed (printed). */
static bool join_workers(suite_t *s, worker_t *w)
{
    bool ok = true, unknown = false;
    for (int i = 0; i < workers_of(s); i++) {
        pthread_join(w[i].thread, NULL);
        unknown |= w[i].unknown;
        if (w[i].error[0]) {
            fprintf(stderr, "%s: round %d: worker %d: %s\n", s->sc->name, s->round, i, w[i].error);
            ok = false;
        }
    }
    s->unknown_rounds += unknown;
    return ok;
}

/* From when acknowledgements may have been undone by a power loss at
 * killed_at (docs/binlog.md, "What each -f setting guarantees"). */
static uint64_t promised_after_power_loss(suite_t *s, uint64_t killed_at)
{
    if (!s->sc->fsync_ms) /* -F: what the crashed server acknowledged */
        return s->promised_from;
    long long ms = atoll(s->sc->fsync_ms);
    if (ms == 0) /* -f 0: nothing */
        return BQH_ALL_PROMISED;
    /* -f MS: the fsync covering a write starts at most MS ms after it, or
     * when the fsync running at that moment ends, and takes one fsync
     * more; the loop may be late by the slack. */
    const char *sl = getenv("BQ_CRASH_SLACK_MS");
    long long slack = sl && *sl ? atoll(sl) : DEFAULT_SLACK_MS;
    uint64_t window = (uint64_t)(ms + slack) * 1000000u + 2 * s->max_sync_ns;
    if (window > s->window_ns)
        s->window_ns = window;
    bqh_mark(s->h, "round %d: -f %s: acknowledgements after %.0f ms before the kill may be undone",
             s->round, s->sc->fsync_ms, (double)window / 1e6);
    return killed_at > window ? killed_at - window : 0;
}

/* One round: traffic, kill -9 at a random moment, (power loss), restart,
 * verify. */
static void crash_round(suite_t *s)
{
    worker_t w[2 * WORKERS + MIXERS];
    atomic_bool stop = false;
    atomic_ulong acked = 0;
    s->round++;
    long long run_ms = RUN_MIN_MS + (long long)(next_rand(&s->rng) % (RUN_MAX_MS - RUN_MIN_MS + 1));
    kill_wait_t k = {s, bqt_now_ms() + run_ms, &acked, false};
    bqh_mark(s->h, "round %d: traffic on pid %d, kill -9 after %lld ms", s->round, (int)s->srv.pid,
             run_ms);
    start_workers(s, w, &stop, &acked);
    bool ready = bqt_wait_until(time_to_kill, &k, (int)run_ms + TRAFFIC_DEADLINE_MS);
    bqh_fault(s->h, "round %d: kill -9 pid %d (%lu puts acknowledged this round)", s->round,
              (int)s->srv.pid, (unsigned long)atomic_load(&acked));
    atomic_store(&stop, true);
    pid_t pid = s->srv.pid;
    uint64_t killed_at = bqh_now_ns();
    bqt_server_signal(&s->srv, SIGKILL);
    int status = k.exited ? 0 : bqt_server_wait(&s->srv, EXIT_DEADLINE_MS);
    bool workers_ok = join_workers(s, w);
    save_server_log(s, pid, k.exited ? "exited on its own" : "killed");
    bqt_server_stop(&s->srv);
    if (k.exited)
        fail_msg("%s: round %d: the server exited on its own during traffic", s->sc->name,
                 s->round);
    assert_true(status != -1);
    if (!ready)
        fail_msg("%s: round %d: no put was acknowledged within %d ms", s->sc->name, s->round,
                 TRAFFIC_DEADLINE_MS);
    assert_true(workers_ok);
    uint64_t promised = BQH_ALL_PROMISED;
    if (s->sc->power_loss) {
        simulate_power_loss(s);
        promised = promised_after_power_loss(s, killed_at);
    }
    restart_and_verify(s, promised);
}

static int rounds_wanted(bool *bounded)
{
    const char *r = getenv("BQ_CRASH_ROUNDS");
    *bounded = !(r && *r);
    return r && *r ? atoi(r) : DEFAULT_ROUNDS;
}

static int rounds_needed(int wanted)
{
    const char *r = getenv("BQ_CRASH_MIN_ROUNDS");
    int n = r && *r ? atoi(r) : MIN_ROUNDS;
    return n < wanted ? n : wanted;
}

static void run_scenario(void **state, const scenario_t *sc)
{
    suite_t *s = *state;
    bool bounded;
    int rounds = rounds_wanted(&bounded);
    long long t0 = bqt_now_ms();
    s->sc = sc;
    for (int i = 0; sc->mix && i < MIXERS; i++)
        bqm_init(&s->mixer[i], s->h, 2 * WORKERS + i, TUBE, "", next_rand(&s->rng));
    fprintf(stderr, "%s: seed %" PRIu64 ", work directory %s\n", sc->name, s->rng, s->work);
    restart_and_verify(s, BQH_ALL_PROMISED); /* an empty directory */
    int needed = rounds_needed(rounds);
    while (s->round < rounds) {
        long long spent = bqt_now_ms() - t0;
        if (bounded && s->round >= needed && spent >= SCENARIO_BUDGET_MS)
            break;
        if (s->round < needed && spent >= MIN_ROUNDS_DEADLINE_MS)
            fail_msg("%s: only %d rounds in %lld ms, at least %d needed (BQ_CRASH_MIN_ROUNDS)",
                     sc->name, s->round, spent, needed);
        crash_round(s);
    }
    /* A clean stop keeps everything, whatever -f says; with a power loss
     * after it too, unless -F (which syncs only the current segment). */
    pid_t pid = s->srv.pid;
    bqh_mark(s->h, "after round %d: SIGTERM pid %d", s->round, (int)pid);
    bqt_server_signal(&s->srv, SIGTERM);
    assert_true(bqt_server_wait(&s->srv, EXIT_DEADLINE_MS) != -1);
    save_server_log(s, pid, "stopped with SIGTERM");
    bqt_server_stop(&s->srv);
    if (sc->power_loss && sc->fsync_ms)
        simulate_power_loss(s);
    restart_and_verify(s, BQH_ALL_PROMISED);
    fprintf(stderr, "%s: %d rounds in %.1f s; %llu rounds ended with outcomes unknown", sc->name,
            s->round, (double)(bqt_now_ms() - t0) / 1000, s->unknown_rounds);
    if (sc->power_loss)
        fprintf(stderr,
                "; power loss: %llu bytes dropped, %llu torn writes, undo window up to %.0f ms; "
                "allowed: %llu lost, %llu resurrected",
                s->dropped, s->torn, (double)s->window_ns / 1e6, s->allowed_lost,
                s->allowed_resurrected);
    fprintf(stderr, "\n");
    bqh_report_summary(stderr, &s->last);
    assert_true(s->last.puts_acked > 0 && s->last.deletes_acked > 0);
    if (sc->mix) /* the richer workers ran, and their jobs' states were compared */
        assert_true(s->last.commands > 0 && s->last.states_checked > 0);
    s->passed = true;
}

static void kill9_rounds_f0(void **state)
{
    static const scenario_t sc = {"kill9-f0", "0", "131072", false, true};
    run_scenario(state, &sc);
}

static void power_loss_rounds_f0(void **state)
{
    static const scenario_t sc = {"powerloss-f0", "0", "65536", true, true};
    run_scenario(state, &sc);
}

static void kill9_rounds_f50(void **state)
{
    static const scenario_t sc = {"kill9-f50", "50", NULL, false, false};
    run_scenario(state, &sc);
}

static void power_loss_rounds_f50(void **state)
{
    static const scenario_t sc = {"powerloss-f50", "50", "131072", true, false};
    run_scenario(state, &sc);
    /* Under -f 50 a random kill nearly always finds unsynced records. */
    assert_true(((suite_t *)*state)->dropped > 0);
}

static void power_loss_rounds_no_fsync(void **state)
{
    static const scenario_t sc = {"powerloss-F", NULL, NULL, true, false};
    run_scenario(state, &sc);
    assert_true(((suite_t *)*state)->dropped > 0);
}

/* -F with small segments, so that compaction removes old segments: the
 * removal must not become durable before what replaces it (the records
 * that moved its jobs out, and the id reservation restated at the start of
 * every newer segment), or after a power loss the server starts with no id
 * reservation and hands out ids from 1 again, which docs/binlog.md rules out
 * in every mode. It did, until compaction fsynced first whatever -f says
 * (node/binlog/binlog.c, bq__binlog_may_unlink_oldest); and start-up stopped on a
 * gap, until rotation fsynced the finished segment under -F too. */
static void power_loss_rounds_no_fsync_compacting(void **state)
{
    static const scenario_t sc = {"powerloss-F-small-segments", NULL, "131072", true, false};
    run_scenario(state, &sc);
}

/* ---- the checker itself ---- */

static unsigned long long put_job(int fd, const char *body)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "put 0 0 120 %zu\r\n%s\r\n", strlen(body), body);
    bqt_sends(fd, cmd);
    char *line = bqt_expect_prefix(fd, "INSERTED ");
    unsigned long long id = strtoull(line + 9, NULL, 10);
    free(line);
    return id;
}

/* Snapshot of the server at port; the connection is closed, so the jobs
 * it reserved are ready again. */
static bqh_snapshot_t *snapshot_of(bqh_history_t *h, int port)
{
    char err[256];
    bqh_snapshot_t *snap = NULL;
    int fd = bqt_connect(port);
    assert_true(fd >= 0);
    if (bqh_snapshot_take(h, fd, TUBE, SNAPSHOT_DEADLINE_MS, &snap, err, sizeof err) != 0)
        fail_msg("snapshot: %s", err);
    close(fd);
    return snap;
}

static void put_at(bqh_history_t *h, uint64_t t, bqh_outcome_t out, uint64_t id, const char *body)
{
    bqh_put(h, 0, t, t + 1, out, id, body, strlen(body));
}

/* A server (no binlog) holds jobs that contradict a made-up history in
 * each way the checker knows, and each is reported once, for its id. */
static void checker_reports_each_problem(void **state)
{
    suite_t *s = *state;
    assert_int_equal(bqt_server_start(&s->srv, bqt_our_binary(), NULL), 0);
    int fd = bqt_client(&s->srv);
    bqt_sends(fd, "use " TUBE "\r\n");
    bqt_expect(fd, "USING " TUBE "\r\n");
    static const char *const bodies[] = {"a", "b", "c", "x", "a", "late", "v"};
    for (unsigned i = 0; i < 7; i++)
        assert_int_equal(put_job(fd, bodies[i]), i + 1);
    close(fd);
    uint64_t t = bqh_now_ns() - 1000000000u;
    put_at(s->h, t + 10, BQH_ACKED, 1, "a");
    put_at(s->h, t + 20, BQH_ACKED, 2, "b");
    bqh_delete(s->h, 1, t + 30, t + 31, BQH_ACKED, 2); /* resurrected: 2 is there */
    put_at(s->h, t + 40, BQH_ACKED, 3, "cc");          /* mismatch: 3 holds "c" */
    put_at(s->h, t + 50, BQH_ACKED, 9, "lost");        /* lost: 9 is absent */
    put_at(s->h, t + 60, BQH_ACKED, 6, "late");        /* id reuse: 6 < 9, sent after */
    bqh_fault(s->h, "kill -9");                        /* the unknown puts were in flight at it */
    bqh_put(s->h, 0, t + 70, bqh_now_ns(), BQH_UNKNOWN, 0, "u", 1); /* absent, allowed */
    bqh_put(s->h, 0, t + 80, bqh_now_ns(), BQH_UNKNOWN, 0, "v", 1); /* present as 7, allowed */
    bqh_settled(s->h, "restarted");
    put_at(s->h, t + 1000, BQH_ACKED, 10, "undone"); /* lost but not promised */
    /* Not in the history: 4 ("x", unexpected) and 5 ("a" again, duplicate). */
    bqh_rules_t rules = {.promised_before = t + 1000};
    bqh_report_t rep;
    bqh_snapshot_t *snap = snapshot_of(s->h, s->srv.port);
    assert_int_equal(bqh_snapshot_count(snap), 7);
    assert_int_equal(bqh_check(s->h, snap, &rules, &rep), 6);
    bqh_snapshot_free(snap);
    static const uint64_t want[BQH_PROBLEMS] = {
        [BQH_LOST] = 9,       [BQH_RESURRECTED] = 2, [BQH_DUPLICATE] = 5,
        [BQH_UNEXPECTED] = 4, [BQH_MISMATCH] = 3,    [BQH_ID_REUSE] = 6};
    assert_int_equal(rep.nbad, 6); /* one of each kind above */
    for (size_t i = 0; i < rep.nbad; i++) {
        assert_int_equal(rep.problems[rep.bad[i].kind], 1);
        assert_int_equal(rep.bad[i].id, want[rep.bad[i].kind]);
    }
    assert_int_equal(rep.allowed_lost, 1);
    assert_int_equal(rep.puts_unknown, 2);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    bqh_report_print(f, s->h, &rep);
    fclose(f);
    assert_non_null(strstr(text, "lost: id 9: acknowledged"));
    assert_non_null(strstr(text, "worker 1 delete 2 -> ok"));
    free(text);
    /* The undone put is unknown from now on; the rest is reported again. */
    snap = snapshot_of(s->h, s->srv.port);
    assert_int_equal(bqh_check(s->h, snap, NULL, &rep), 6);
    bqh_snapshot_free(snap);
    assert_int_equal(rep.allowed_lost, 0);
    s->passed = true;
}

/* Acknowledgements in the window [promised_before, promised_after) may be
 * undone, those before and after may not; jobs the test declares foreign
 * (another tube) are not looked for. */
static void checker_window_and_foreign_jobs(void **state)
{
    suite_t *s = *state;
    assert_int_equal(bqt_server_start(&s->srv, bqt_our_binary(), NULL), 0);
    int fd = bqt_client(&s->srv);
    bqt_sends(fd, "use other\r\n");
    bqt_expect(fd, "USING other\r\n");
    assert_true(put_job(fd, "foreign-1") > 0);
    assert_true(put_job(fd, "foreign-2") > 0);
    close(fd);
    uint64_t t = bqh_now_ns() - 1000000000u;
    put_at(s->h, t + 10, BQH_ACKED, 7, "before");   /* lost, promised */
    put_at(s->h, t + 1000, BQH_ACKED, 8, "inside"); /* lost, in the window */
    put_at(s->h, t + 3000, BQH_ACKED, 9, "after");  /* lost, promised again */
    bqh_rules_t rules = {.promised_before = t + 500, .promised_after = t + 2000};
    bqh_report_t rep;
    bqh_snapshot_t *snap = snapshot_of(s->h, s->srv.port);
    assert_int_equal(bqh_check(s->h, snap, &rules, &rep), 2 + 2);
    bqh_snapshot_free(snap);
    assert_int_equal(rep.problems[BQH_LOST], 2);
    assert_int_equal(rep.problems[BQH_UNEXPECTED], 2); /* the two foreign jobs, hidden */
    assert_int_equal(rep.allowed_lost, 1);
    bqh_foreign_jobs(s->h, 2);
    snap = snapshot_of(s->h, s->srv.port);
    assert_int_equal(bqh_check(s->h, snap, &rules, &rep), 2);
    bqh_snapshot_free(snap);
    assert_int_equal(rep.problems[BQH_UNEXPECTED], 0);
    assert_int_equal(rep.problems[BQH_LOST], 2);
    s->passed = true;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(checker_reports_each_problem, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(checker_window_and_foreign_jobs, suite_setup,
                                        suite_teardown),
        cmocka_unit_test_setup_teardown(kill9_rounds_f0, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(power_loss_rounds_f0, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(kill9_rounds_f50, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(power_loss_rounds_f50, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(power_loss_rounds_no_fsync, suite_setup, suite_teardown),
        cmocka_unit_test_setup_teardown(power_loss_rounds_no_fsync_compacting, suite_setup,
                                        suite_teardown),
    };
    if (getenv("BQT_FILTER")) /* e.g. BQT_FILTER='power*' */
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("binlog_crash", tests, NULL, NULL);
}
