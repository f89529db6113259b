/* The snapshot of history.h: a small beanstalk protocol client over a
 * buffered reader with a deadline, which drains the ready jobs of a tube
 * (and of the tubes named after it), peeks the ids the history knows and
 * reads every job's stats-job, pipelining commands in batches. */
#define _GNU_SOURCE /* vasprintf */

#include "tests/support/history_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define GAP_MAX 64 /* unknown ids peeked on either side of a known one */

typedef struct reader {
    int fd;
    uint64_t deadline; /* ns */
    char buf[65536];
    size_t beg, end;
    char *err;
    size_t errlen;
} reader_t;

static int fail(reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(reader_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int send_all(reader_t *r, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(r->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(r, "send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads more bytes into the buffer (compacting it first). 0 or -1. */
static int fill(reader_t *r)
{
    if (r->beg > 0) {
        memmove(r->buf, r->buf + r->beg, r->end - r->beg);
        r->end -= r->beg;
        r->beg = 0;
    }
    if (r->end == sizeof r->buf)
        return fail(r, "reply line longer than %zu bytes", sizeof r->buf);
    for (;;) {
        uint64_t now = bqh_now_ns();
        if (now >= r->deadline)
            return fail(r, "timed out waiting for a reply");
        struct pollfd p = {r->fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)((r->deadline - now) / 1000000 + 1));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t n = read(r->fd, r->buf + r->end, sizeof r->buf - r->end);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(r, "connection closed: %s", n < 0 ? strerror(errno) : "EOF");
        r->end += (size_t)n;
        return 0;
    }
}

/* Reads one line; *line points into the buffer (NUL-terminated, without
 * CRLF) until the next read. 0 or -1. */
static int read_line(reader_t *r, char **line)
{
    for (;;) {
        char *p = r->buf + r->beg;
        char *nl = memchr(p, '\n', r->end - r->beg);
        if (nl && nl > p && nl[-1] == '\r') {
            nl[-1] = '\0';
            r->beg = (size_t)(nl + 1 - r->buf);
            *line = p;
            return 0;
        }
        if (fill(r) != 0)
            return -1;
    }
}

/* Reads a body of len bytes and its CRLF into a new buffer (*out). */
static int read_body(reader_t *r, size_t len, char **out)
{
    char *b = malloc(len + 2);
    size_t got = 0;
    if (!b)
        return fail(r, "out of memory");
    while (got < len + 2) {
        if (r->beg == r->end && fill(r) != 0) {
            free(b);
            return -1;
        }
        size_t take = r->end - r->beg < len + 2 - got ? r->end - r->beg : len + 2 - got;
        memcpy(b + got, r->buf + r->beg, take);
        r->beg += take;
        got += take;
    }
    if (b[len] != '\r' || b[len + 1] != '\n') {
        free(b);
        return fail(r, "job body not followed by CRLF");
    }
    b[len] = '\0';
    *out = b;
    return 0;
}

int bqh__snap_add(bqh_snapshot_t *s, uint64_t at_ns, uint64_t id, char *body, size_t len,
                  const bqh_job_t *job)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        snap_job_t *p = realloc(s->jobs, cap * sizeof *p);
        if (!p)
            return -1;
        s->jobs = p;
        s->cap = cap;
    }
    snap_job_t *j = &s->jobs[s->n++];
    *j = (snap_job_t){.id = id, .at = at_ns, .body = body, .len = len, .has_job = job != NULL};
    if (job) {
        snprintf(j->tube, sizeof j->tube, "%s", job->tube ? job->tube : "");
        j->pri = job->pri;
        j->delay = job->delay;
        j->state = (uint8_t)job->state;
    }
    return 0;
}

/* Reads the reply to a reserve or a peek: `word` <id> <bytes> and a body
 * (added to s; *got set), or `none` (*got cleared). */
static int read_job(reader_t *r, bqh_snapshot_t *s, const char *word, const char *none, bool *got)
{
    char *line, *body;
    unsigned long long id;
    size_t len, wl = strlen(word);
    if (read_line(r, &line) != 0)
        return -1;
    *got = false;
    if (strcmp(line, none) == 0)
        return 0;
    if (strncmp(line, word, wl) != 0 || line[wl] != ' ' ||
        sscanf(line + wl + 1, "%llu %zu", &id, &len) != 2)
        return fail(r, "unexpected reply \"%.80s\"", line);
    if (read_body(r, len, &body) != 0)
        return -1;
    if (bqh__snap_add(s, bqh_now_ns(), id, body, len, NULL) != 0) {
        free(body);
        return fail(r, "out of memory");
    }
    *got = true;
    return 0;
}

/* Value of `key: <n>` in a stats body, or 0. */
static uint64_t stat_value(const char *yaml, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = strstr(yaml, key); p; p = strstr(p + 1, key))
        if ((p == yaml || p[-1] == '\n') && p[kl] == ':')
            return strtoull(p + kl + 1, NULL, 10);
    return 0;
}

/* Reads an OK reply's YAML body into a new string (*yaml). */
static int read_ok(reader_t *r, const char *what, char **yaml)
{
    char *line;
    size_t len;
    if (read_line(r, &line) != 0)
        return -1;
    if (sscanf(line, "OK %zu", &len) != 1)
        return fail(r, "unexpected reply to %s \"%.80s\"", what, line);
    return read_body(r, len, yaml);
}

/* The number of jobs the server holds, from `stats`. */
static int count_jobs(reader_t *r, uint64_t *total)
{
    static const char *const keys[] = {"current-jobs-ready", "current-jobs-reserved",
                                       "current-jobs-delayed", "current-jobs-buried"};
    char *yaml;
    if (send_all(r, "stats\r\n", 7) != 0 || read_ok(r, "stats", &yaml) != 0)
        return -1;
    *total = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        *total += stat_value(yaml, keys[i]);
    free(yaml);
    return 0;
}

/* Sends `watch name` and reads its WATCHING reply. */
static int watch_one(reader_t *r, const char *name)
{
    char cmd[BQH_TUBE_LEN + 16], *line;
    snprintf(cmd, sizeof cmd, "watch %s\r\n", name);
    if (send_all(r, cmd, strlen(cmd)) != 0 || read_line(r, &line) != 0)
        return -1;
    if (strncmp(line, "WATCHING ", 9) != 0)
        return fail(r, "unexpected reply to watch \"%.80s\"", line);
    return 0;
}

/* Watches tube and every tube named "<tube>-...", and ignores default
 * unless it is tube. */
static int watch_tubes(reader_t *r, const char *tube)
{
    char *yaml, *line;
    size_t tl = strlen(tube);
    bool deflt = strcmp(tube, "default") == 0;
    if ((!deflt && watch_one(r, tube) != 0) || send_all(r, "list-tubes\r\n", 12) != 0 ||
        read_ok(r, "list-tubes", &yaml) != 0)
        return -1;
    int rc = 0;
    for (char *p = strtok(yaml, "\n"); p && rc == 0; p = strtok(NULL, "\n"))
        if (strncmp(p, "- ", 2) == 0 && strncmp(p + 2, tube, tl) == 0 && p[2 + tl] == '-')
            rc = watch_one(r, p + 2);
    free(yaml);
    if (rc != 0 || deflt)
        return rc;
    if (send_all(r, "ignore default\r\n", 16) != 0 || read_line(r, &line) != 0)
        return -1;
    if (strncmp(line, "WATCHING ", 9) != 0)
        return fail(r, "unexpected reply to ignore \"%.80s\"", line);
    return 0;
}

/* The text of `key: value` in a stats body (quotes dropped) in out. */
static void stat_text(const char *yaml, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (const char *p = strstr(yaml, key); p; p = strstr(p + 1, key))
        if ((p == yaml || p[-1] == '\n') && p[kl] == ':' && p[kl + 1] == ' ') {
            const char *v = p + kl + 2;
            size_t n = strcspn(v, "\r\n");
            if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
                v++;
                n -= 2;
            }
            snprintf(out, cap, "%.*s", (int)n, v);
            return;
        }
}

/* Fills j's tube, pri, delay and state from its stats-job body; a job the
 * snapshot reserved (reserved) was ready. */
static void parse_stats_job(snap_job_t *j, const char *yaml, bool reserved)
{
    static const char *const names[] = {"ready", "delayed", "buried", "reserved"};
    char state[16];
    stat_text(yaml, "tube", j->tube, sizeof j->tube);
    stat_text(yaml, "state", state, sizeof state);
    j->pri = (uint32_t)stat_value(yaml, "pri");
    j->delay = (uint32_t)stat_value(yaml, "delay");
    j->state = BQH_RESERVED;
    for (uint8_t k = 0; k < 4; k++)
        if (strcmp(state, names[k]) == 0)
            j->state = k;
    if (reserved)
        j->state = BQH_READY;
    j->has_job = true;
}

/* Reads the stats-job of every job of s, BATCH at a time; the first
 * `reserved` of them were reserved by the snapshot. */
static int read_states(reader_t *r, bqh_snapshot_t *s, size_t reserved)
{
    char cmds[BATCH * 40], *line, *yaml;
    size_t len;
    for (size_t i = 0; i < s->n; i += BATCH) {
        size_t k = s->n - i < BATCH ? s->n - i : BATCH, cl = 0;
        for (size_t j = 0; j < k; j++)
            cl += (size_t)snprintf(cmds + cl, sizeof cmds - cl, "stats-job %" PRIu64 "\r\n",
                                   s->jobs[i + j].id);
        if (send_all(r, cmds, cl) != 0)
            return -1;
        for (size_t j = 0; j < k; j++) {
            if (read_line(r, &line) != 0)
                return -1;
            if (strcmp(line, "NOT_FOUND") == 0)
                continue; /* gone meanwhile: its state goes unchecked */
            if (sscanf(line, "OK %zu", &len) != 1)
                return fail(r, "unexpected reply to stats-job \"%.80s\"", line);
            if (read_body(r, len, &yaml) != 0)
                return -1;
            parse_stats_job(&s->jobs[i + j], yaml, i + j < reserved);
            free(yaml);
        }
    }
    return 0;
}

/* Reserves every ready job, BATCH commands at a time. */
static int drain_ready(reader_t *r, bqh_snapshot_t *s)
{
    char cmds[BATCH * 24 + 1];
    const char *one = "reserve-with-timeout 0\r\n";
    size_t ol = strlen(one);
    for (int i = 0; i < BATCH; i++)
        memcpy(cmds + i * ol, one, ol);
    for (bool more = true; more;) {
        if (send_all(r, cmds, BATCH * ol) != 0)
            return -1;
        for (int i = 0; i < BATCH; i++) {
            bool got;
            if (read_job(r, s, "RESERVED", "TIMED_OUT", &got) != 0)
                return -1;
            more = more && got;
        }
    }
    return 0;
}

int bqh__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The ids h knows (acknowledged or seen), sorted and unique, minus those
 * in s. Returns a new array (free it) and its length in *n. */
static uint64_t *unseen_ids(bqh_history_t *h, const bqh_snapshot_t *s, size_t *n)
{
    size_t k = 0, m = 0;
    uint64_t *ids = malloc((h->n + 1) * sizeof *ids), *have = malloc((s->n + 1) * sizeof *have);
    if (!ids || !have) {
        free(ids);
        free(have);
        return NULL;
    }
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].id && h->ops[i].kind != OP_DELETE)
            ids[k++] = h->ops[i].id;
    for (size_t i = 0; i < s->n; i++)
        have[i] = s->jobs[i].id;
    qsort(ids, k, sizeof *ids, bqh__cmp_u64);
    qsort(have, s->n, sizeof *have, bqh__cmp_u64);
    for (size_t i = 0; i < k; i++)
        if ((m == 0 || ids[m - 1] != ids[i]) &&
            !bsearch(&ids[i], have, s->n, sizeof *have, bqh__cmp_u64))
            ids[m++] = ids[i];
    free(have);
    *n = m;
    return ids;
}

/* Peeks ids[0..n), BATCH at a time, adding the jobs found to s (marked
 * by_gap when gap). */
static int peek_ids(reader_t *r, bqh_snapshot_t *s, const uint64_t *ids, size_t n, bool gap)
{
    char cmds[BATCH * 32];
    for (size_t i = 0; i < n; i += BATCH) {
        size_t k = n - i < BATCH ? n - i : BATCH, len = 0;
        for (size_t j = 0; j < k; j++)
            len +=
                (size_t)snprintf(cmds + len, sizeof cmds - len, "peek %" PRIu64 "\r\n", ids[i + j]);
        if (send_all(r, cmds, len) != 0)
            return -1;
        for (size_t j = 0; j < k; j++) {
            bool got;
            if (read_job(r, s, "FOUND", "NOT_FOUND", &got) != 0)
                return -1;
            if (got)
                s->jobs[s->n - 1].by_gap = gap;
        }
    }
    return 0;
}

void bqh_foreign_jobs(bqh_history_t *h, uint64_t n)
{
    pthread_mutex_lock(&h->lock);
    h->foreign = n;
    pthread_mutex_unlock(&h->lock);
}

/* The ids nobody was told that lie within GAP_MAX of a known one (in h or
 * in s): where the ids of puts whose outcome stayed unknown are, since a
 * server hands ids out in order (a restart or a new primary skips to a new
 * reservation block, whose first ids may be unknown puts'). Returns a new sorted array (free it)
 * and its length in *n. */
static uint64_t *gap_ids(bqh_history_t *h, const bqh_snapshot_t *s, size_t *n)
{
    size_t k = 0, m = 0;
    uint64_t *known = malloc((h->n + s->n + 1) * sizeof *known);
    if (!known)
        return NULL;
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].id)
            known[k++] = h->ops[i].id;
    for (size_t i = 0; i < s->n; i++)
        known[k++] = s->jobs[i].id;
    qsort(known, k, sizeof *known, bqh__cmp_u64);
    /* At most 2 GAP_MAX ids per known one, and GAP_MAX after the last. */
    uint64_t *gaps = malloc((k + 1) * 2 * GAP_MAX * sizeof *gaps), prev = 0;
    if (!gaps) {
        free(known);
        return NULL;
    }
    for (size_t i = 0; i <= k; i++) {
        uint64_t next = i < k ? known[i] : prev + GAP_MAX + 1;
        if (next == prev)
            continue;
        if (next - prev - 1 <= 2 * GAP_MAX) {
            for (uint64_t id = prev + 1; id < next; id++)
                gaps[m++] = id;
        } else { /* a reservation block skipped: the ends of the gap */
            for (uint64_t id = prev + 1; id <= prev + GAP_MAX; id++)
                gaps[m++] = id;
            for (uint64_t id = next - GAP_MAX; id < next; id++)
                gaps[m++] = id;
        }
        prev = next;
    }
    free(known);
    *n = m;
    return gaps;
}

/* When stats count more jobs than the reserves found, peeks the known ids
 * missing from s, then the ids in small gaps between known ones. */
static int find_others(bqh_history_t *h, reader_t *r, bqh_snapshot_t *s, uint64_t total)
{
    if (s->n >= total)
        return 0;
    pthread_mutex_lock(&h->lock);
    size_t n = 0;
    uint64_t *ids = unseen_ids(h, s, &n);
    pthread_mutex_unlock(&h->lock);
    if (!ids)
        return fail(r, "out of memory");
    int rc = peek_ids(r, s, ids, n, false);
    free(ids);
    if (rc != 0 || s->n >= total)
        return rc;
    pthread_mutex_lock(&h->lock);
    ids = gap_ids(h, s, &n);
    pthread_mutex_unlock(&h->lock);
    if (!ids)
        return fail(r, "out of memory");
    rc = peek_ids(r, s, ids, n, true);
    free(ids);
    return rc;
}

/* Whether a job of tube belongs to a snapshot of prefix: prefix itself or
 * "<prefix>-...". */
static bool tube_of(const char *tube, const char *prefix)
{
    size_t pl = strlen(prefix);
    return strncmp(tube, prefix, pl) == 0 && (tube[pl] == '\0' || tube[pl] == '-');
}

/* Drops the jobs found by gap peeking that are not in the snapshot's
 * tubes (a test's foreign jobs), then counts what stats counted but
 * nothing found. */
static void drop_foreign(bqh_snapshot_t *s, const char *prefix, uint64_t total)
{
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        snap_job_t *j = &s->jobs[i];
        if (j->by_gap && j->has_job && !tube_of(j->tube, prefix)) {
            free(j->body);
            continue;
        }
        s->jobs[m++] = *j;
    }
    s->n = m;
    s->hidden = s->n < total ? (size_t)(total - s->n) : 0;
}

int bqh_snapshot_take(bqh_history_t *h, int fd, const char *tube, int timeout_ms,
                      bqh_snapshot_t **out, char *err, size_t errlen)
{
    reader_t *r = calloc(1, sizeof *r);
    bqh_snapshot_t *s = calloc(1, sizeof *s);
    uint64_t total = 0;
    int rc = -1;
    if (!r || !s) {
        snprintf(err, errlen, "out of memory");
    } else {
        *r = (reader_t){.fd = fd,
                        .err = err,
                        .errlen = errlen,
                        .deadline = bqh_now_ns() + (uint64_t)timeout_ms * 1000000u};
        rc = count_jobs(r, &total);
        pthread_mutex_lock(&h->lock);
        total = total > h->foreign ? total - h->foreign : 0;
        pthread_mutex_unlock(&h->lock);
        s->first = bqh_now_ns();
        if (rc == 0)
            rc = watch_tubes(r, tube ? tube : "default");
        if (rc == 0)
            rc = drain_ready(r, s);
        size_t reserved = s->n;
        if (rc == 0)
            rc = find_others(h, r, s, total);
        if (rc == 0)
            rc = read_states(r, s, reserved);
        if (rc == 0)
            drop_foreign(s, tube ? tube : "default", total);
    }
    free(r);
    if (rc != 0) {
        bqh_snapshot_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

bqh_snapshot_t *bqh_snapshot_new(uint64_t at_ns)
{
    bqh_snapshot_t *s = calloc(1, sizeof *s);
    if (s)
        s->first = at_ns;
    return s;
}

int bqh_snapshot_add(bqh_snapshot_t *s, uint64_t at_ns, uint64_t id, const char *body, size_t len,
                     const bqh_job_t *job)
{
    char *copy = bqh__copy_bytes(body, len);
    if (!copy || bqh__snap_add(s, at_ns, id, copy, len, job) != 0) {
        free(copy);
        return -1;
    }
    return 0;
}

size_t bqh_snapshot_count(const bqh_snapshot_t *s)
{
    return s->n;
}

uint64_t bqh_snapshot_time(const bqh_snapshot_t *s)
{
    return s->first;
}

void bqh_snapshot_free(bqh_snapshot_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->jobs[i].body);
    free(s->jobs);
    free(s);
}
