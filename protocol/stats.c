/* The YAML bodies of stats, stats-tube, stats-job, list-tubes and
 * list-tubes-watched, byte for byte as beanstalkd 1.13 prints them: same
 * keys, same order, strings quoted where 1.13 quotes them (list items never
 * are). Each reply is "OK <n>\r\n" + body + "\r\n", n excluding that CRLF. */
#include "protocol/engine_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void send_ok(bq_engine_t *e, bq_client_t *c, const char *body, size_t len)
{
    bq__sendf(e, c, "OK %zu\r\n", len);
    bq_engine_client_send(e, c, body, len);
    bq_engine_client_send(e, c, "\r\n", 2);
}

/* Formats into buf and replies OK; INTERNAL_ERROR if it did not fit. */
static void send_formatted(bq_engine_t *e, bq_client_t *c, char *buf, size_t size, int n)
{
    if (n < 0 || (size_t)n >= size) {
        BQ_SEND(e, c, "INTERNAL_ERROR\r\n");
        return;
    }
    send_ok(e, c, buf, (size_t)n);
}

static const char *const op_keys[] = {
    "put",
    "peek",
    "peek-ready",
    "peek-delayed",
    "peek-buried",
    "reserve",
    "reserve-with-timeout",
    "delete",
    "release",
    "use",
    "watch",
    "ignore",
    "bury",
    "kick",
    "touch",
    "stats",
    "stats-job",
    "stats-tube",
    "list-tubes",
    "list-tube-used",
    "list-tubes-watched",
    "pause-tube",
};
static const bq_op_t op_order[] = {
    BQ_OP_PUT,
    BQ_OP_PEEK,
    BQ_OP_PEEK_READY,
    BQ_OP_PEEK_DELAYED,
    BQ_OP_PEEK_BURIED,
    BQ_OP_RESERVE,
    BQ_OP_RESERVE_TIMEOUT,
    BQ_OP_DELETE,
    BQ_OP_RELEASE,
    BQ_OP_USE,
    BQ_OP_WATCH,
    BQ_OP_IGNORE,
    BQ_OP_BURY,
    BQ_OP_KICK,
    BQ_OP_TOUCH,
    BQ_OP_STATS,
    BQ_OP_STATS_JOB,
    BQ_OP_STATS_TUBE,
    BQ_OP_LIST_TUBES,
    BQ_OP_LIST_TUBE_USED,
    BQ_OP_LIST_TUBES_WATCHED,
    BQ_OP_PAUSE_TUBE,
};

/* Appends "cmd-<name>: <count>\n" for every reported command. */
static int format_op_counts(const bq_engine_t *e, char *buf, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof op_order / sizeof op_order[0]; i++) {
        int r =
            snprintf(buf + n, size - n, "cmd-%s: %" PRIu64 "\n", op_keys[i], e->op_ct[op_order[i]]);
        if (r < 0 || (size_t)r >= size - n)
            return -1;
        n += (size_t)r;
    }
    return (int)n;
}

void bq__stats_server(bq_engine_t *e, bq_client_t *c, bq_now_t now)
{
    (void)now;
    bq_server_info_t si = {0};
    e->hooks.server_info(e->hooks.arg, &si);
    char ops[1024], buf[8192];
    int nops = format_op_counts(e, ops, sizeof ops);
    int n = snprintf(
        buf, sizeof buf,
        "---\ncurrent-jobs-urgent: %" PRIu64 "\ncurrent-jobs-ready: %" PRIu64
        "\ncurrent-jobs-reserved: %" PRIu64 "\ncurrent-jobs-delayed: %" PRIu64
        "\ncurrent-jobs-buried: %" PRIu64 "\n%.*s"
        "job-timeouts: %" PRIu64 "\ntotal-jobs: %" PRIu64 "\nmax-job-size: %" PRIu32
        "\ncurrent-tubes: %zu\ncurrent-connections: %zu\ncurrent-producers: %" PRIu64
        "\ncurrent-workers: %" PRIu64 "\ncurrent-waiting: %" PRIu64 "\ntotal-connections: %" PRIu64
        "\npid: %ld\nversion: \"%s\"\n"
        "rusage-utime: %" PRId64 ".%06" PRId64 "\nrusage-stime: %" PRId64 ".%06" PRId64
        "\nuptime: %" PRIu64 "\nbinlog-oldest-index: %" PRIu64 "\nbinlog-current-index: %" PRIu64
        "\nbinlog-records-migrated: %" PRIu64 "\nbinlog-records-written: %" PRIu64
        "\nbinlog-max-size: %" PRIu64
        "\ndraining: %s\nid: %s\nhostname: \"%s\"\nos: \"%s\"\nplatform: \"%s\"\n%s",
        e->urgent_ct, e->ready_ct, e->reserved_ct, e->delayed_ct, e->buried_ct, nops < 0 ? 0 : nops,
        ops, e->timeout_ct, e->total_jobs_ct, e->max_job_size, e->ntubes, e->nclients, e->producers,
        e->workers, e->waiting_ct, e->total_conns, si.pid, si.version ? si.version : "",
        si.utime_us / 1000000, si.utime_us % 1000000, si.stime_us / 1000000, si.stime_us % 1000000,
        si.uptime_s, si.binlog_oldest_index, si.binlog_current_index, si.binlog_records_migrated,
        si.binlog_records_written, si.binlog_max_size, e->draining ? "true" : "false",
        si.id ? si.id : "", si.hostname ? si.hostname : "", si.os ? si.os : "",
        si.platform ? si.platform : "", si.extra ? si.extra : "");
    send_formatted(e, c, buf, sizeof buf, nops < 0 ? -1 : n);
}

void bq__stats_tube(bq_engine_t *e, bq_client_t *c, const bq_tube_t *t, bq_now_t now)
{
    int64_t left = 0;
    if (bq__tube_paused(t))
        left = bq__sub_sat(t->unpause_at, now.mono) / BQ_NS_PER_S;
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "---\nname: \"%s\"\ncurrent-jobs-urgent: %" PRIu64 "\ncurrent-jobs-ready: %zu"
                     "\ncurrent-jobs-reserved: %" PRIu64 "\ncurrent-jobs-delayed: %zu"
                     "\ncurrent-jobs-buried: %zu\ntotal-jobs: %" PRIu64 "\ncurrent-using: %" PRIu32
                     "\ncurrent-watching: %zu\ncurrent-waiting: %zu\ncmd-delete: %" PRIu64
                     "\ncmd-pause-tube: %" PRIu64 "\npause: %" PRId64 "\npause-time-left: %" PRId64
                     "\n",
                     t->name, t->urgent_ct, t->ready.len, t->reserved_ct, t->delay.len,
                     t->buried.len, t->total_jobs_ct, t->using_ct, t->nwatchers, t->nwaiting,
                     t->delete_ct, t->pause_ct, t->pause_ns / BQ_NS_PER_S, left);
    send_formatted(e, c, buf, sizeof buf, n);
}

static const char *state_name(const bq_job_t *j)
{
    switch (j->state) {
    case BQ_JOB_READY:
        return "ready";
    case BQ_JOB_RESERVED:
        return "reserved";
    case BQ_JOB_BURIED:
        return "buried";
    case BQ_JOB_DELAYED:
        return "delayed";
    default:
        return "invalid";
    }
}

void bq__stats_job(bq_engine_t *e, bq_client_t *c, const bq_job_t *j, bq_now_t now)
{
    int64_t left = 0;
    if (j->state == BQ_JOB_RESERVED || j->state == BQ_JOB_DELAYED)
        left = bq__sub_sat(j->key, now.mono) / BQ_NS_PER_S;
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "---\nid: %" PRIu64 "\ntube: \"%s\"\nstate: %s\npri: %" PRIu32
                     "\nage: %" PRId64 "\ndelay: %" PRIu32 "\nttr: %" PRIu32 "\ntime-left: %" PRId64
                     "\nfile: %" PRIu32 "\nreserves: %" PRIu32 "\ntimeouts: %" PRIu32
                     "\nreleases: %" PRIu32 "\nburies: %" PRIu32 "\nkicks: %" PRIu32 "\n",
                     j->id, j->tube->name, state_name(j), j->pri,
                     bq__sub_sat(now.wall, j->created_wall) / BQ_NS_PER_S, j->delay, j->ttr, left,
                     (uint32_t)j->file, j->reserves, j->timeouts, j->releases, j->buries, j->kicks);
    send_formatted(e, c, buf, sizeof buf, n);
}

/* Replies with "---\n- name\n..." for n tubes given by at(i). */
static void send_list(bq_engine_t *e, bq_client_t *c, size_t n,
                      const bq_tube_t *(*at)(const void *src, size_t i), const void *src)
{
    size_t len = 4;
    for (size_t i = 0; i < n; i++)
        len += 3 + at(src, i)->name_len;
    char *buf = malloc(len + 1);
    if (!buf) {
        BQ_SEND(e, c, "OUT_OF_MEMORY\r\n");
        return;
    }
    memcpy(buf, "---\n", 4);
    size_t pos = 4;
    for (size_t i = 0; i < n; i++) {
        const bq_tube_t *t = at(src, i);
        buf[pos++] = '-';
        buf[pos++] = ' ';
        memcpy(buf + pos, t->name, t->name_len);
        pos += t->name_len;
        buf[pos++] = '\n';
    }
    send_ok(e, c, buf, len);
    free(buf);
}

static const bq_tube_t *tube_at(const void *src, size_t i)
{
    return ((const bq_engine_t *)src)->tubes[i];
}

static const bq_tube_t *watched_at(const void *src, size_t i)
{
    return ((const bq_client_t *)src)->watch[i]->tube;
}

void bq__stats_list_tubes(bq_engine_t *e, bq_client_t *c)
{
    send_list(e, c, e->ntubes, tube_at, e);
}

void bq__stats_list_watched(bq_engine_t *e, bq_client_t *c)
{
    send_list(e, c, c->nwatch, watched_at, c);
}

void bq_engine_stats(const bq_engine_t *e, bq_engine_stats_t *out)
{
    *out = (bq_engine_stats_t){
        .ready = e->ready_ct,
        .reserved = e->reserved_ct,
        .delayed = e->delayed_ct,
        .buried = e->buried_ct,
        .urgent = e->urgent_ct,
        .total_jobs = e->total_jobs_ct,
        .timeouts = e->timeout_ct,
        .clients = e->nclients,
        .producers = e->producers,
        .workers = e->workers,
        .waiting = e->waiting_ct,
        .total_conns = e->total_conns,
        .ntubes = e->ntubes,
        .draining = e->draining,
    };
    memcpy(out->op_ct, e->op_ct, sizeof out->op_ct);
}

void bq_engine_tube_stats(const bq_engine_t *e, size_t i, bq_engine_tube_stats_t *out)
{
    const bq_tube_t *t = e->tubes[i];
    *out = (bq_engine_tube_stats_t){
        .name = t->name,
        .name_len = t->name_len,
        .ready = t->ready.len,
        .reserved = t->reserved_ct,
        .delayed = t->delay.len,
        .buried = t->buried.len,
        .urgent = t->urgent_ct,
    };
}
