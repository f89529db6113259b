/* The snapshot of history.h: a small beanstalk protocol client over a
 * buffered reader with a deadline, which drains the ready jobs of a tube
 * and peeks the ids the history knows, pipelining commands in batches. */
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

static int snap_add(bqh_snapshot_t *s, uint64_t id, char *body, size_t len)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        snap_job_t *p = realloc(s->jobs, cap * sizeof *p);
        if (!p)
            return -1;
        s->jobs = p;
        s->cap = cap;
    }
    s->jobs[s->n++] = (snap_job_t){.id = id, .at = bqh_now_ns(), .body = body, .len = len};
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
    if (snap_add(s, id, body, len) != 0) {
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

/* The number of jobs the server holds, from `stats`. */
static int count_jobs(reader_t *r, uint64_t *total)
{
    static const char *const keys[] = {"current-jobs-ready", "current-jobs-reserved",
                                       "current-jobs-delayed", "current-jobs-buried"};
    char *line, *yaml;
    size_t len;
    if (send_all(r, "stats\r\n", 7) != 0 || read_line(r, &line) != 0)
        return -1;
    if (sscanf(line, "OK %zu", &len) != 1)
        return fail(r, "unexpected reply to stats \"%.80s\"", line);
    if (read_body(r, len, &yaml) != 0)
        return -1;
    *total = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        *total += stat_value(yaml, keys[i]);
    free(yaml);
    return 0;
}

static int watch_tube(reader_t *r, const char *tube)
{
    char cmd[256], *line;
    if (strcmp(tube, "default") == 0)
        return 0;
    snprintf(cmd, sizeof cmd, "watch %s\r\nignore default\r\n", tube);
    if (send_all(r, cmd, strlen(cmd)) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (read_line(r, &line) != 0)
            return -1;
        if (strncmp(line, "WATCHING ", 9) != 0)
            return fail(r, "unexpected reply to watch/ignore \"%.80s\"", line);
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

/* Peeks ids[0..n), BATCH at a time, adding the jobs found to s. */
static int peek_ids(reader_t *r, bqh_snapshot_t *s, const uint64_t *ids, size_t n)
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

/* The known ids missing from s are peeked when stats count more jobs. */
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
    int rc = peek_ids(r, s, ids, n);
    free(ids);
    if (rc == 0 && s->n < total)
        s->hidden = (size_t)(total - s->n);
    return rc;
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
            rc = watch_tube(r, tube ? tube : "default");
        if (rc == 0)
            rc = drain_ready(r, s);
        if (rc == 0)
            rc = find_others(h, r, s, total);
    }
    free(r);
    if (rc != 0) {
        bqh_snapshot_free(s);
        return -1;
    }
    *out = s;
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
