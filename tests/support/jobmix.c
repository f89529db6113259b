/* The richer workload (jobmix.h): one command at a time, each recorded. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/cluster.h"
#include "tests/support/jobmix.h"

/* One command's exchange: when it was sent, its reply (NULL: none). */
typedef struct ask {
    uint64_t sent, reply;
    char *line;
    bool stuck; /* no reply within the deadline (rather than a dead connection) */
} ask_t;

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint32_t below(bqm_worker_t *k, uint32_t n)
{
    return (uint32_t)(next_rand(&k->rng) % n);
}

void bqm_init(bqm_worker_t *k, bqh_history_t *h, int id, const char *prefix, const char *tag,
              uint64_t seed)
{
    *k = (bqm_worker_t){.h = h, .id = id, .rng = seed | 1, .used = -1};
    for (int t = 0; t < BQM_TUBES; t++)
        snprintf(k->tube[t], sizeof k->tube[t], "%s-m%d-%d", prefix, id, t);
    bqm_set_tag(k, tag);
}

void bqm_set_tag(bqm_worker_t *k, const char *tag)
{
    snprintf(k->tag, sizeof k->tag, "%s", tag);
}

/* Sends cmd on fd and waits at most ms for the whole reply. */
static ask_t ask(bqm_worker_t *k, int fd, const char *cmd, int ms)
{
    ask_t a = {.sent = bqh_now_ns()};
    k->ops++;
    a.line = bqc_ask(fd, cmd, ms);
    a.reply = bqh_now_ns();
    a.stuck = !a.line && a.reply - a.sent >= (uint64_t)ms * 1000000u;
    return a;
}

/* The outcome of a reply: ok when it starts with ok (NULL: never). */
static bqh_outcome_t outcome(const ask_t *a, const char *ok)
{
    if (!a->line)
        return BQH_UNKNOWN;
    if (ok && strncmp(a->line, ok, strlen(ok)) == 0)
        return BQH_ACKED;
    return strcmp(a->line, "NOT_FOUND\r\n") == 0 ? BQH_NOT_FOUND : BQH_REFUSED;
}

/* What the session does after a reply whose outcome was out: a refusal
 * by a draining or fenced node ends it, another one is wrong. Frees the
 * reply. */
static bqm_status_t status_of(bqm_worker_t *k, ask_t *a, bqh_outcome_t out, const char *what)
{
    bqm_status_t st = BQM_OK;
    if (out == BQH_UNKNOWN) {
        st = a->stuck ? BQM_STUCK : BQM_DEAD;
        k->held = 0;
        k->used = -1;
    } else if (out == BQH_REFUSED) {
        bool refused = bqh_known_refusal(a->line);
        if (!refused)
            snprintf(k->error, sizeof k->error, "%s: \"%.*s\"", what, (int)strcspn(a->line, "\r"),
                     a->line);
        st = refused ? BQM_REFUSED : BQM_WRONG;
    }
    free(a->line);
    a->line = NULL;
    return st;
}

/* Sends a setup command (use, watch, ignore) expecting a reply starting
 * with want. */
static bqm_status_t setup_cmd(bqm_worker_t *k, int fd, const char *cmd, const char *want, int ms)
{
    ask_t a = ask(k, fd, cmd, ms);
    return status_of(k, &a, outcome(&a, want), cmd);
}

bqm_status_t bqm_connected(bqm_worker_t *k, int fd, int ms)
{
    char cmd[BQH_TUBE_LEN + 16];
    bqm_status_t st = BQM_OK;
    k->held = 0;
    k->used = -1;
    for (int t = 0; t < BQM_TUBES && st == BQM_OK; t++) {
        snprintf(cmd, sizeof cmd, "watch %s\r\n", k->tube[t]);
        st = setup_cmd(k, fd, cmd, "WATCHING ", ms);
    }
    return st == BQM_OK ? setup_cmd(k, fd, "ignore default\r\n", "WATCHING ", ms) : st;
}

/* Uses tube t on fd, unless it is in use already. */
static bqm_status_t use(bqm_worker_t *k, int fd, int t, int ms)
{
    char cmd[BQH_TUBE_LEN + 16];
    if (k->used == t)
        return BQM_OK;
    snprintf(cmd, sizeof cmd, "use %s\r\n", k->tube[t]);
    bqm_status_t st = setup_cmd(k, fd, cmd, "USING ", ms);
    k->used = st == BQM_OK ? t : -1;
    return st;
}

/* A delay: none mostly, now and then a short one (it may pass before the
 * snapshot) or a long one. */
static uint32_t random_delay(bqm_worker_t *k)
{
    uint32_t r = below(k, 10);
    return r < 6 ? 0 : r < 8 ? 1 + below(k, 2) : 30 + below(k, 90);
}

static void remember(bqm_worker_t *k, uint64_t id, int t)
{
    if (k->njobs == BQM_JOBS) {
        memmove(k->jobs, k->jobs + 1, (BQM_JOBS - 1) * sizeof *k->jobs);
        memmove(k->job_tube, k->job_tube + 1, BQM_JOBS - 1);
        k->njobs--;
    }
    k->jobs[k->njobs] = id;
    k->job_tube[k->njobs++] = (uint8_t)t;
}

static void forget(bqm_worker_t *k, uint64_t id)
{
    for (size_t i = 0; i < k->njobs; i++)
        if (k->jobs[i] == id) {
            memmove(k->jobs + i, k->jobs + i + 1, (k->njobs - i - 1) * sizeof *k->jobs);
            memmove(k->job_tube + i, k->job_tube + i + 1, k->njobs - i - 1);
            k->njobs--;
            return;
        }
}

static bqm_status_t put(bqm_worker_t *k, int fd, int ms)
{
    int t = (int)below(k, BQM_TUBES);
    bqm_status_t st = use(k, fd, t, ms);
    if (st != BQM_OK)
        return st;
    char body[64], cmd[160];
    int blen = snprintf(body, sizeof body, "%sm%d-%06lu", k->tag, k->id, k->seq++);
    bqh_job_t j = {.tube = k->tube[t], .pri = below(k, 1024), .delay = random_delay(k)};
    snprintf(cmd, sizeof cmd, "put %u %u %d %d\r\n%s\r\n", j.pri, j.delay, BQM_TTR, blen, body);
    ask_t a = ask(k, fd, cmd, ms);
    unsigned long long id = 0;
    bqh_outcome_t out = outcome(&a, "INSERTED ");
    if (out == BQH_ACKED && sscanf(a.line, "INSERTED %llu", &id) != 1)
        out = BQH_REFUSED;
    bqh_put_job(k->h, k->id, a.sent, a.reply, out, id, body, (size_t)blen, &j);
    if (out == BQH_ACKED)
        remember(k, id, t);
    k->acked_id = id;
    return status_of(k, &a, out, "put");
}

static bqm_status_t reserve(bqm_worker_t *k, int fd, int ms)
{
    ask_t a = ask(k, fd, "reserve-with-timeout 0\r\n", ms);
    unsigned long long id;
    size_t len;
    if (a.line && sscanf(a.line, "RESERVED %llu %zu", &id, &len) == 2) {
        char *body = strstr(a.line, "\r\n") + 2;
        bqh_reserve(k->h, k->id, a.sent, a.reply, id, body, len);
        k->held = id;
    } else if (a.line &&
               (!strcmp(a.line, "TIMED_OUT\r\n") || !strcmp(a.line, "DEADLINE_SOON\r\n"))) {
        free(a.line);
        return BQM_OK;
    }
    return status_of(k, &a, outcome(&a, "RESERVED "), "reserve");
}

/* Sends cmd on job id and records it as c (pri, delay) with ok the reply
 * of success. */
static bqm_status_t job_cmd(bqm_worker_t *k, int fd, int ms, bqh_cmd_t c, uint64_t id, uint32_t pri,
                            uint32_t delay, const char *ok)
{
    static const char *const verbs[] = {"bury", "release", "kick-job", "touch"};
    char cmd[96];
    int n = snprintf(cmd, sizeof cmd, "%s %" PRIu64, verbs[c], id);
    if (c == BQH_BURY || c == BQH_RELEASE)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %u", pri);
    if (c == BQH_RELEASE)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %u", delay);
    snprintf(cmd + n, sizeof cmd - (size_t)n, "\r\n");
    ask_t a = ask(k, fd, cmd, ms);
    bqh_outcome_t out = outcome(&a, ok);
    bqh_job_cmd(k->h, k->id, a.sent, a.reply, out, c, id, pri, delay);
    return status_of(k, &a, out, verbs[c]);
}

static bqm_status_t delete_job(bqm_worker_t *k, int fd, int ms, uint64_t id)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", id);
    ask_t a = ask(k, fd, cmd, ms);
    bqh_outcome_t out = outcome(&a, "DELETED\r\n");
    bqh_delete(k->h, k->id, a.sent, a.reply, out, id);
    if (out != BQH_REFUSED)
        forget(k, id);
    return status_of(k, &a, out, "delete");
}

/* Something done to the job k holds: bury, release, touch or delete. */
static bqm_status_t on_held(bqm_worker_t *k, int fd, int ms)
{
    uint64_t id = k->held;
    uint32_t r = below(k, 20);
    if (r < 2)
        return job_cmd(k, fd, ms, BQH_TOUCH, id, 0, 0, "TOUCHED\r\n");
    k->held = 0;
    if (r < 8)
        return job_cmd(k, fd, ms, BQH_BURY, id, below(k, 1024), 0, "BURIED\r\n");
    if (r < 15)
        return job_cmd(k, fd, ms, BQH_RELEASE, id, below(k, 1024), random_delay(k), "RELEASED\r\n");
    return delete_job(k, fd, ms, id);
}

static bqm_status_t kick_tube(bqm_worker_t *k, int fd, int ms)
{
    int t = (int)below(k, BQM_TUBES);
    bqm_status_t st = use(k, fd, t, ms);
    if (st != BQM_OK)
        return st;
    char cmd[32];
    snprintf(cmd, sizeof cmd, "kick %d\r\n", BQM_KICK);
    ask_t a = ask(k, fd, cmd, ms);
    unsigned long long n = 0;
    bqh_outcome_t out = outcome(&a, "KICKED ");
    if (out == BQH_ACKED)
        sscanf(a.line, "KICKED %llu", &n);
    bqh_kick(k->h, k->id, a.sent, a.reply, out, k->tube[t], BQM_KICK, n);
    return status_of(k, &a, out, "kick");
}

static bqm_status_t pause_tube(bqm_worker_t *k, int fd, int ms)
{
    int t = (int)below(k, BQM_TUBES);
    char cmd[BQH_TUBE_LEN + 32];
    snprintf(cmd, sizeof cmd, "pause-tube %s 1\r\n", k->tube[t]);
    ask_t a = ask(k, fd, cmd, ms);
    bqh_outcome_t out = outcome(&a, "PAUSED\r\n");
    bqh_pause(k->h, k->id, a.sent, a.reply, out, k->tube[t], 1);
    return status_of(k, &a, out, "pause-tube");
}

bqm_status_t bqm_step(bqm_worker_t *k, int fd, int ms)
{
    k->acked_id = 0;
    if (k->held)
        return on_held(k, fd, ms);
    uint32_t r = below(k, 100);
    if (k->njobs == BQM_JOBS || (k->njobs > 0 && r < 15))
        return delete_job(k, fd, ms, k->jobs[below(k, (uint32_t)k->njobs)]);
    if (k->njobs > 0 && r < 23)
        return job_cmd(k, fd, ms, BQH_KICK_JOB, k->jobs[below(k, (uint32_t)k->njobs)], 0, 0,
                       "KICKED\r\n");
    if (r < 30)
        return kick_tube(k, fd, ms);
    if (r < 32)
        return pause_tube(k, fd, ms);
    if (r < 55)
        return reserve(k, fd, ms);
    return put(k, fd, ms);
}
