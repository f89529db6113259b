/* Fuzz target of the untrusted client byte stream: up to four client
 * connections drive one engine through bq_session_feed(), with a fake node
 * around them that behaves like node/ (keeps unconsumed input while a
 * reserve waits, feeds it again after the wake hook, closes on quit) and a
 * clock that only moves forward.
 *
 * The input is a sequence of actions; the first byte of each selects it.
 * Bits 0-1 are the connection (0..3), bits 2-4 the action:
 *   0, 1, 3  data: the next byte is a length L, then L bytes arrive on the
 *            connection in one read (a closed slot opens a new connection);
 *            woken connections resume after the action
 *   2        the same in reads of 1 + (bits 5-7) bytes each
 *   4        the clock advances by the next byte t (t < 128: t * 50 ms,
 *            else (t - 127) * 5 s), then bq_engine_tick() runs
 *   5        the clock advances the same way without a tick
 *   6        the peer half-closes (bq_session_eof)
 *   7        bit 5 clear: the connection closes (bq_session_free);
 *            bit 5 set, bit 6 clear: drain mode toggles;
 *            bits 5 and 6 set: writes pause or resume (a session holds a
 *            writing command; on resume each held one runs it, then its
 *            kept input)
 * At the end every connection closes, an auditor connection checks the
 * engine's counters through stats, list-tubes and stats-tube, and the
 * engine is freed (LeakSanitizer then reports anything left). The input
 * then runs a second time on a new engine with every read split into single
 * bytes, which must produce exactly the same replies.
 *
 * Invariants (abort on violation): every connection's reply stream is well
 * formed (reply_check.c) and whole after each engine call; a connection gets
 * replies only to its own commands, except that a waiting one gets exactly
 * one RESERVED, TIMED_OUT or DEADLINE_SOON together with one wake; hooks run
 * only inside engine calls and never for a closed connection; feeding stops
 * early only when the session waits or quit, and a waiting session consumes
 * nothing; a tick leaves nothing due; INSERTED never comes in drain mode and
 * DRAINING only then; no write is answered (INSERTED, DELETED, RELEASED,
 * BURIED, TOUCHED, KICKED, PAUSED) while writes pause, even for a put
 * whose body completes then; what a session would replay elsewhere
 * (bq_session_replay) is at most a line, a reserve and a held put; job ids are unique and a job's
 * body never changes; the final audit finds no reservation, waiter, client or empty tube left and
 * the global job counts equal the sums over the tubes; and the replies do not depend on how the
 * bytes were split into reads. */
#include <string.h>

#include "fuzz.h"
#include "protocol/session.h"
#include "reply_check.h"
#include "yaml_check.h"

#define NCONN 4
#define AUDITOR NCONN   /* the slot of the final audit connection */
#define MAX_JOB_SIZE 64 /* small, so that bodies and JOB_TOO_BIG are reached */
#define OUT_KEEP 512    /* tail of each connection's output kept for reports */
#define START_MONO (1000 * BQ_NS_PER_S)
#define START_WALL (INT64_C(1700000000) * BQ_NS_PER_S)

typedef enum {
    CALL_NONE,
    CALL_OPEN,
    CALL_FEED,
    CALL_FEED_BLOCKED,
    CALL_EOF,
    CALL_CLOSE,
    CALL_TICK
} call_t;

typedef struct world world_t;

typedef struct conn {
    world_t *w;
    int slot;
    bq_session_t *s;
    bool eof, wake_pending;
    char *in; /* read but not consumed yet; capacity w->in_cap */
    size_t in_len;
    bqf_reply_stream_t rs;
    uint64_t last_inserted;
    /* accounting of the current engine call */
    bool blocked_before;
    unsigned replies, wakes;
    const char *last_word;
    char out[OUT_KEEP]; /* the latest output, printed when a check fails */
    size_t out_len;
} conn_t;

typedef struct {
    bool seen, inserted;
    size_t len;
    char *bytes;
} job_seen_t;

struct world {
    bq_engine_t *e;
    bq_now_t now;
    conn_t *conns[NCONN + 1];
    conn_t *actor; /* the connection the current call serves, or NULL */
    call_t call;
    bool draining;
    bool paused;   /* writes pause (bq_engine_set_writes_paused) */
    size_t max_id; /* no input can create a job id above this */
    job_seen_t *jobs;
    char *capture; /* the auditor's last OK body */
    size_t capture_len;
    size_t in_cap;   /* more than a connection can ever have unread */
    bool bytewise;   /* the second run: every read is split into single bytes */
    uint64_t digest; /* FNV-1a of every reply byte with its connection */
};

/* BQF_TRACE=1 in the environment prints every action and reply. */
static int trace = -1;

static void print_escaped(const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)data[i];
        if (ch == '\n' || (ch >= 0x20 && ch < 0x7f))
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
}

static void tracef(const char *what, int slot, const void *data, size_t len)
{
    if (!trace)
        return;
    fprintf(stderr, "%s %d: ", what, slot);
    print_escaped(data, len);
    fputc('\n', stderr);
}

static void dump_conn(const conn_t *c)
{
    fprintf(stderr, "connection %d, latest output (%zu bytes):\n", c->slot, c->out_len);
    print_escaped(c->out, c->out_len);
    fputc('\n', stderr);
}

/* BQF_CHECK that also prints connection c's latest output. */
#define CCHECK(c, cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            dump_conn(c);                                                                          \
            bqf_fail(__FILE__, __LINE__, __VA_ARGS__);                                             \
        }                                                                                          \
    } while (0)

static bool word_is(const char *word, const char *w)
{
    return word != NULL && strcmp(word, w) == 0;
}

static void keep_tail(conn_t *c, const char *data, size_t len)
{
    if (len >= OUT_KEEP) {
        memcpy(c->out, data + len - OUT_KEEP, OUT_KEEP);
        c->out_len = OUT_KEEP;
        return;
    }
    if (c->out_len + len > OUT_KEEP) {
        size_t drop = c->out_len + len - OUT_KEEP;
        memmove(c->out, c->out + drop, c->out_len - drop);
        c->out_len -= drop;
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

/* RESERVED/FOUND: the id is possible and the body is the one seen before. */
static void check_job(conn_t *c, const bqf_reply_t *r)
{
    world_t *w = c->w;
    uint64_t id = r->num[0];
    CCHECK(c, id <= w->max_id, "%s %llu: no input this size creates that id", r->word,
           (unsigned long long)id);
    job_seen_t *j = &w->jobs[id];
    if (!j->seen) {
        j->seen = true;
        j->len = r->body_len;
        j->bytes = malloc(r->body_len ? r->body_len : 1);
        BQF_CHECK(j->bytes != NULL, "out of memory");
        memcpy(j->bytes, r->body, r->body_len);
        return;
    }
    CCHECK(c, j->len == r->body_len && memcmp(j->bytes, r->body, j->len) == 0,
           "job %llu changed its body", (unsigned long long)id);
}

static void check_inserted(conn_t *c, uint64_t id)
{
    world_t *w = c->w;
    CCHECK(c, !w->draining, "INSERTED in drain mode");
    CCHECK(c, id <= w->max_id, "INSERTED %llu: no input this size creates that id",
           (unsigned long long)id);
    CCHECK(c, id > c->last_inserted, "INSERTED ids not increasing on one connection");
    CCHECK(c, !w->jobs[id].inserted, "job id %llu inserted twice", (unsigned long long)id);
    w->jobs[id].inserted = true;
    c->last_inserted = id;
}

static void on_reply(void *arg, const bqf_reply_t *r)
{
    conn_t *c = arg;
    world_t *w = c->w;
    c->replies++;
    c->last_word = r->word;
    CCHECK(c, c == w->actor || (c->blocked_before && c->replies == 1),
           "unsolicited %s to connection %d", r->word, c->slot);
    static const char *const writes[] = {"INSERTED", "DELETED", "RELEASED", "BURIED",
                                         "TOUCHED",  "KICKED",  "PAUSED"};
    for (size_t k = 0; k < sizeof writes / sizeof *writes; k++)
        CCHECK(c, !w->paused || !word_is(r->word, writes[k]), "%s while writes pause", writes[k]);
    if (word_is(r->word, "INSERTED"))
        check_inserted(c, r->num[0]);
    else if (word_is(r->word, "DRAINING"))
        CCHECK(c, w->draining, "DRAINING outside drain mode");
    else if (word_is(r->word, "RESERVED") || word_is(r->word, "FOUND"))
        check_job(c, r);
    else if (word_is(r->word, "OK"))
        bqf_yaml_check(r->body, r->body_len);
    if (word_is(r->word, "OK") && c->slot == AUDITOR) {
        free(w->capture);
        w->capture = malloc(r->body_len + 1);
        BQF_CHECK(w->capture != NULL, "out of memory");
        memcpy(w->capture, r->body, r->body_len);
        w->capture_len = r->body_len;
    }
}

/* ---- engine hooks ---- */

static void on_send(void *p, const char *data, size_t len)
{
    conn_t *c = p;
    world_t *w = c->w;
    CCHECK(c, w->call != CALL_NONE, "send hook outside an engine call");
    CCHECK(c, w->call != CALL_FEED_BLOCKED, "reply while the fed connection waits");
    CCHECK(c, c != w->actor || (w->call != CALL_OPEN && w->call != CALL_CLOSE),
           "reply to a connection being opened or closed");
    keep_tail(c, data, len);
    for (size_t i = 0; i < len; i++)
        w->digest = (w->digest ^ (uint64_t)(c->slot << 8 | (unsigned char)data[i])) *
                    UINT64_C(0x100000001b3);
    tracef("  reply", c->slot, data, len);
    bqf_reply_feed(&c->rs, data, len);
}

static void on_wake(void *p)
{
    conn_t *c = p;
    world_t *w = c->w;
    CCHECK(c, w->call != CALL_NONE, "wake hook outside an engine call");
    CCHECK(c, c != w->actor || w->call == CALL_EOF, "wake of the connection being served");
    CCHECK(c, c->blocked_before, "wake of a connection that was not waiting");
    CCHECK(c, !bq_session_blocked(c->s), "woken connection still waits");
    CCHECK(c, c->replies == 1 && bqf_reply_idle(&c->rs), "wake before its one reply was sent");
    c->wakes++;
    c->wake_pending = true;
}

static void on_command(void *p, bq_op_t op)
{
    conn_t *c = p;
    CCHECK(c, c == c->w->actor && c->w->call == CALL_FEED, "command hook for another connection");
    CCHECK(c, (unsigned)op < BQ_OP_COUNT, "command hook op %d", (int)op);
}

static void on_server_info(void *arg, bq_server_info_t *info)
{
    (void)arg;
    memset(info, 0, sizeof *info);
    info->pid = 4242;
    info->version = "fuzz";
    info->id = "0123456789abcdef";
    info->hostname = "fuzzhost";
    info->os = "#1 SMP";
    info->platform = "x86_64";
}

/* ---- bracketing of engine calls ---- */

static void call_begin(world_t *w, conn_t *actor, call_t call)
{
    for (int i = 0; i <= NCONN; i++) {
        conn_t *c = w->conns[i];
        if (c && c->s)
            c->blocked_before = bq_session_blocked(c->s);
        if (c) {
            c->replies = c->wakes = 0;
            c->last_word = NULL;
        }
    }
    w->actor = actor;
    w->call = call;
}

/* A connection other than the actor may only have stopped waiting, with
 * one reply and one wake. */
static void check_bystander(const conn_t *c, bool blocked, call_t call)
{
    if (!c->replies && !c->wakes && c->blocked_before == blocked)
        return;
    CCHECK(c, call != CALL_FEED_BLOCKED, "activity while the fed connection waits");
    CCHECK(c, c->blocked_before && !blocked, "connection %d %s waiting without a reply", c->slot,
           blocked ? "started" : "stopped");
    CCHECK(c,
           c->replies == 1 &&
               (word_is(c->last_word, "RESERVED") || word_is(c->last_word, "TIMED_OUT") ||
                word_is(c->last_word, "DEADLINE_SOON")),
           "waiting connection got %u replies, last %s", c->replies,
           c->last_word ? c->last_word : "none");
    CCHECK(c, c->wakes == 1, "waiting connection answered with %u wakes", c->wakes);
}

static void call_end(world_t *w)
{
    call_t call = w->call;
    w->call = CALL_NONE;
    for (int i = 0; i <= NCONN; i++) {
        conn_t *c = w->conns[i];
        if (!c || !c->s)
            continue;
        CCHECK(c, bqf_reply_idle(&c->rs), "partial reply after an engine call");
        bool blocked = bq_session_blocked(c->s);
        if (c != w->actor || call == CALL_FEED_BLOCKED) {
            check_bystander(c, blocked, call);
        } else if (call == CALL_EOF && c->blocked_before && blocked &&
                   !bq_engine_client_waiting(bq_session_client(c->s))) {
            CCHECK(c, c->replies == 0, "half-close of a held connection replied");
        } else if (call == CALL_EOF && c->blocked_before) {
            CCHECK(c, !blocked && c->replies == 1 && word_is(c->last_word, "TIMED_OUT"),
                   "half-close of a waiting connection: %u replies, still waiting: %d", c->replies,
                   blocked);
        } else if (call == CALL_EOF) {
            CCHECK(c, c->replies == 0 && !blocked, "half-close of an idle connection replied");
        }
    }
    w->actor = NULL;
}

/* ---- the fake node ---- */

static void close_conn(world_t *w, conn_t *c)
{
    tracef("close", c->slot, "", 0);
    call_begin(w, c, CALL_CLOSE);
    bq_session_free(c->s, w->now);
    c->s = NULL;
    call_end(w);
    w->conns[c->slot] = NULL;
    bqf_reply_free(&c->rs);
    free(c->in);
    free(c);
}

static conn_t *open_conn(world_t *w, int slot)
{
    conn_t *c = calloc(1, sizeof *c);
    BQF_CHECK(c != NULL, "out of memory");
    c->w = w;
    c->slot = slot;
    c->in = malloc(w->in_cap);
    BQF_CHECK(c->in != NULL, "out of memory");
    bqf_reply_init(&c->rs, MAX_JOB_SIZE, on_reply, c);
    call_begin(w, c, CALL_OPEN);
    c->s = bq_session_new(w->e, c);
    call_end(w);
    BQF_CHECK(c->s != NULL, "bq_session_new failed");
    BQF_CHECK(bq_session_idle(c->s) && !bq_session_blocked(c->s) && !bq_session_quit(c->s),
              "new session not idle");
    w->conns[slot] = c;
    return c;
}

/* Feeds c's unread input (from an exact-size copy, so ASan sees over-reads)
 * and keeps what the session did not consume, as node/ does. */
static void feed(world_t *w, conn_t *c)
{
    size_t len = c->in_len;
    char *copy = malloc(len);
    BQF_CHECK(copy != NULL, "out of memory");
    memcpy(copy, c->in, len);
    bool was_blocked = bq_session_blocked(c->s);
    call_begin(w, c, was_blocked ? CALL_FEED_BLOCKED : CALL_FEED);
    size_t n = bq_session_feed(c->s, copy, len, w->now);
    call_end(w);
    free(copy);
    bool blocked = bq_session_blocked(c->s), quit = bq_session_quit(c->s);
    CCHECK(c, n <= len, "feed consumed %zu of %zu bytes", n, len);
    CCHECK(c, !was_blocked || n == 0, "a waiting session consumed %zu bytes", n);
    CCHECK(c, n == len || blocked || quit, "feed stopped at %zu of %zu bytes, not waiting", n, len);
    memmove(c->in, c->in + n, len - n);
    c->in_len -= n;
    if (quit) {
        close_conn(w, c);
        return;
    }
    char *replay = NULL;
    size_t rlen = 0;
    if (bq_session_replay(c->s, w->now, &replay, &rlen) == 0)
        CCHECK(c, rlen <= 2 * BQ_LINE_MAX + 64 + MAX_JOB_SIZE + 2, "replay of %zu bytes", rlen);
    free(replay);
}

/* Resumes every connection whose wake hook fired, outside the engine. */
static void run_wakes(world_t *w)
{
    bool again = true;
    while (again) {
        again = false;
        for (int i = 0; i <= NCONN; i++) {
            conn_t *c = w->conns[i];
            if (!c || !c->wake_pending)
                continue;
            c->wake_pending = false;
            if (c->in_len && !bq_session_blocked(c->s)) {
                feed(w, c);
                again = true;
            }
        }
    }
}

/* One read of len bytes on connection c. */
static void deliver(world_t *w, conn_t *c, const uint8_t *data, size_t len)
{
    if (c->eof)
        return;
    tracef("read", c->slot, data, len);
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    if (c->in_len == 0)
        return;
    /* A waiting session is fed anyway: it must consume nothing. */
    feed(w, c);
}

/* A data action: len bytes arrive on slot's connection in reads of piece
 * bytes (1 in the bytewise run). Wakes run once all reads are in, so that
 * the split is invisible to the engine; reads after a quit are dropped with
 * the closed connection, as its unread input would be. */
static void receive(world_t *w, int slot, const uint8_t *data, size_t len, size_t piece)
{
    conn_t *c = w->conns[slot] ? w->conns[slot] : open_conn(w, slot);
    size_t done = 0;
    if (w->bytewise)
        piece = 1;
    do {
        size_t n = len - done < piece ? len - done : piece;
        deliver(w, c, data + done, n);
        done += n;
    } while (done < len && w->conns[slot] == c);
    run_wakes(w);
}

static void half_close(world_t *w, conn_t *c)
{
    if (c->eof)
        return;
    c->eof = true;
    tracef("eof", c->slot, "", 0);
    call_begin(w, c, CALL_EOF);
    bq_session_eof(c->s, w->now);
    call_end(w);
    /* The engine answered a waiting reserve without the wake hook: resume. */
    if (c->blocked_before && !bq_session_blocked(c->s))
        c->wake_pending = true;
    run_wakes(w);
}

static void advance(world_t *w, uint8_t t, bool tick)
{
    int64_t d = t < 128 ? (int64_t)t * (BQ_NS_PER_S / 20) : (int64_t)(t - 127) * 5 * BQ_NS_PER_S;
    w->now.mono += d;
    w->now.wall += d;
    tracef(tick ? "tick ms" : "skew ms", (int)(d / 1000000), "", 0);
    if (!tick)
        return;
    call_begin(w, NULL, CALL_TICK);
    int64_t next = bq_engine_tick(w->e, w->now);
    call_end(w);
    BQF_CHECK(next > w->now.mono, "a timer is still due after bq_engine_tick");
    BQF_CHECK(next == bq_engine_next_due(w->e), "bq_engine_tick and bq_engine_next_due disagree");
    run_wakes(w);
}

static void toggle_drain(world_t *w)
{
    w->draining = !w->draining;
    tracef("drain", w->draining, "", 0);
    bq_engine_set_draining(w->e, w->draining);
    BQF_CHECK(bq_engine_draining(w->e) == w->draining, "drain mode not set");
}

/* Writes pause, or resume: then each session holding a command runs it
 * (as the node's wake-up of every connection does), then its kept input. */
static void toggle_pause(world_t *w)
{
    w->paused = !w->paused;
    tracef("pause", w->paused, "", 0);
    bq_engine_set_writes_paused(w->e, w->paused);
    BQF_CHECK(bq_engine_writes_paused(w->e) == w->paused, "pause not set");
    if (w->paused)
        return;
    for (int i = 0; i < NCONN; i++) {
        conn_t *c = w->conns[i];
        if (!c || !bq_session_blocked(c->s) || bq_engine_client_waiting(bq_session_client(c->s)))
            continue;
        call_begin(w, c, CALL_FEED);
        bq_session_resume(c->s, w->now);
        call_end(w);
        CCHECK(c, !bq_session_blocked(c->s) || bq_engine_client_waiting(bq_session_client(c->s)),
               "a held command did not run once writes resumed");
        if (bq_session_quit(c->s))
            close_conn(w, c);
        else if (c->in_len && !bq_session_blocked(c->s))
            feed(w, c);
    }
    run_wakes(w);
}

/* ---- the final audit ---- */

/* Sends one command on the auditor and returns its OK body. */
static const char *audit_cmd(world_t *w, conn_t *a, const char *line, size_t *len)
{
    size_t n = strlen(line);
    free(w->capture);
    w->capture = NULL;
    memcpy(a->in, line, n);
    a->in_len = n;
    feed(w, a);
    BQF_CHECK(w->capture != NULL, "audit: %.*s answered %s", (int)(n - 2), line,
              a->last_word ? a->last_word : "nothing");
    *len = w->capture_len;
    return w->capture;
}

static uint64_t yaml_num(const char *body, size_t len, const char *key)
{
    uint64_t v;
    BQF_CHECK(bqf_yaml_u64(body, len, key, &v), "audit: no %s", key);
    return v;
}

static const char *const job_keys[] = {"current-jobs-urgent", "current-jobs-ready",
                                       "current-jobs-reserved", "current-jobs-delayed",
                                       "current-jobs-buried"};
#define NKEYS (sizeof job_keys / sizeof job_keys[0])

/* Adds one tube's job counts to sum and checks that nobody refers to it
 * but the auditor (who uses and watches `default`). */
static void audit_tube(world_t *w, conn_t *a, const char *name, size_t nl, uint64_t *sum)
{
    char line[BQ_LINE_MAX];
    int n = snprintf(line, sizeof line, "stats-tube %.*s\r\n", (int)nl, name);
    BQF_CHECK(n > 0 && (size_t)n < sizeof line, "audit: tube name too long");
    size_t len;
    const char *b = audit_cmd(w, a, line, &len);
    uint64_t jobs = 0;
    for (size_t k = 0; k < NKEYS; k++) {
        uint64_t v = yaml_num(b, len, job_keys[k]);
        sum[k] += v;
        jobs += k ? v : 0;
    }
    bool dflt = nl == 7 && memcmp(name, "default", 7) == 0;
    BQF_CHECK(yaml_num(b, len, "current-using") == dflt, "audit: tube %.*s has users", (int)nl,
              name);
    BQF_CHECK(yaml_num(b, len, "current-watching") == dflt, "audit: tube %.*s has watchers",
              (int)nl, name);
    BQF_CHECK(yaml_num(b, len, "current-waiting") == 0, "audit: tube %.*s has waiters", (int)nl,
              name);
    BQF_CHECK(dflt || jobs > 0, "audit: empty tube %.*s still exists", (int)nl, name);
}

static void audit(world_t *w)
{
    conn_t *a = open_conn(w, AUDITOR);
    size_t len;
    const char *b = audit_cmd(w, a, "stats\r\n", &len);
    uint64_t total[NKEYS], sum[NKEYS] = {0};
    for (size_t k = 0; k < NKEYS; k++)
        total[k] = yaml_num(b, len, job_keys[k]);
    BQF_CHECK(total[2] == 0, "audit: jobs reserved with no connection");
    BQF_CHECK(yaml_num(b, len, "current-waiting") == 0, "audit: clients waiting");
    BQF_CHECK(yaml_num(b, len, "current-connections") == 1, "audit: connections left");
    BQF_CHECK(yaml_num(b, len, "current-producers") == 0, "audit: producers left");
    BQF_CHECK(yaml_num(b, len, "current-workers") == 0, "audit: workers left");
    uint64_t ntubes = yaml_num(b, len, "current-tubes");
    b = audit_cmd(w, a, "list-tubes\r\n", &len);
    char *list = malloc(len + 1);
    BQF_CHECK(list != NULL, "out of memory");
    memcpy(list, b, len);
    const char *name;
    size_t nl, i = 0;
    for (; bqf_yaml_item(list, len, i, &name, &nl); i++)
        audit_tube(w, a, name, nl, sum);
    free(list);
    BQF_CHECK(i == ntubes, "audit: list-tubes has %zu tubes, stats %llu", i,
              (unsigned long long)ntubes);
    for (size_t k = 0; k < NKEYS; k++)
        BQF_CHECK(sum[k] == total[k], "audit: %s is %llu, the tubes sum to %llu", job_keys[k],
                  (unsigned long long)total[k], (unsigned long long)sum[k]);
    close_conn(w, a);
}

/* ---- the input ---- */

static void run_action(world_t *w, const uint8_t *data, size_t size, size_t *pos)
{
    uint8_t op = data[(*pos)++];
    int slot = op & 3;
    uint8_t arg = *pos < size ? data[*pos] : 0;
    switch ((op >> 2) & 7) {
    case 4:
    case 5:
        *pos += *pos < size;
        advance(w, arg, ((op >> 2) & 7) == 4);
        break;
    case 6:
        if (w->conns[slot])
            half_close(w, w->conns[slot]);
        break;
    case 7:
        if ((op & 0x60) == 0x60)
            toggle_pause(w);
        else if (op & 0x20)
            toggle_drain(w);
        else if (w->conns[slot])
            close_conn(w, w->conns[slot]);
        break;
    default: {
        *pos += *pos < size;
        size_t len = arg < size - *pos ? arg : size - *pos;
        size_t piece = ((op >> 2) & 7) == 2 ? (size_t)(op >> 5) + 1 : len;
        receive(w, slot, data + *pos, len, piece);
        *pos += len;
        break;
    }
    }
}

/* Runs the whole input on a fresh engine; the digest of all replies. */
static uint64_t run(const uint8_t *data, size_t size, bool bytewise)
{
    static const bq_engine_hooks_t hooks = {
        .send = on_send, .wake = on_wake, .server_info = on_server_info, .command = on_command};
    const bq_engine_config_t cfg = {.max_job_size = MAX_JOB_SIZE};
    world_t w = {.now = {START_MONO, START_WALL},
                 .max_id = size / 8 + 16,
                 .in_cap = size + BQ_LINE_MAX,
                 .bytewise = bytewise,
                 .digest = UINT64_C(0xcbf29ce484222325)};
    w.jobs = calloc(w.max_id + 1, sizeof *w.jobs);
    w.e = bq_engine_new(&cfg, &hooks);
    BQF_CHECK(w.jobs != NULL && w.e != NULL, "out of memory");
    BQF_CHECK(bq_engine_max_job_size(w.e) == MAX_JOB_SIZE, "max_job_size not applied");

    size_t pos = 0;
    while (pos < size)
        run_action(&w, data, size, &pos);
    run_wakes(&w);
    if (w.paused)
        toggle_pause(&w);
    for (int i = 0; i < NCONN; i++) {
        if (w.conns[i])
            close_conn(&w, w.conns[i]);
    }
    audit(&w);
    bq_engine_free(w.e);
    for (size_t i = 0; i <= w.max_id; i++)
        free(w.jobs[i].bytes);
    free(w.jobs);
    free(w.capture);
    return w.digest;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (trace < 0)
        trace = getenv("BQF_TRACE") != NULL && strcmp(getenv("BQF_TRACE"), "0") != 0;
    uint64_t as_read = run(data, size, false);
    tracef("bytewise run", 0, "", 0);
    uint64_t bytewise = run(data, size, true);
    BQF_CHECK(as_read == bytewise, "the replies depend on how the input is split into reads");
    return 0;
}
