/* Plays one case script against one freshly started server and records what
 * every observing step saw. Replies are read with framing: RESERVED/FOUND
 * <id> <n> and OK <n> lines are followed by n bytes and CRLF, every other
 * reply is one line. All waits are bounded by the step's deadline. This runs
 * on worker threads, so nothing here uses cmocka. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "tests/conformance/conformance.h"
#include "tests/support/bqtest.h"

#define MAX_REPLY_LINE 1024
#define SYNC_COMMAND "kick-job 0\r\n"
#define SYNC_REPLY "NOT_FOUND\r\n"

/* A client connection with the bytes read but not yet consumed. */
typedef struct conn {
    int fd;
    char *buf;
    size_t len, cap;
} conn_t;

typedef struct player {
    const bqc_case_t *c;
    const char *binary;
    bqt_server_t server;
    conn_t conns[BQC_MAX_CONNS];
    bqc_transcript_t *t;
} player_t;

static int left(long long deadline)
{
    long long l = deadline - bqt_now_ms();
    return l > 0 ? (int)l : 0;
}

/* Reads whatever arrives into the buffer. 1 got bytes, 0 timeout, -1 EOF. */
static int fill(conn_t *k, long long deadline)
{
    struct pollfd p = {k->fd, POLLIN, 0};
    int r;
    do {
        r = poll(&p, 1, left(deadline));
    } while (r < 0 && errno == EINTR);
    if (r <= 0)
        return 0;
    if (k->cap - k->len < 65536) {
        char *grown = realloc(k->buf, k->cap + 65536);
        if (!grown)
            return -1;
        k->buf = grown;
        k->cap += 65536;
    }
    ssize_t n = read(k->fd, k->buf + k->len, k->cap - k->len);
    if (n <= 0)
        return n < 0 && errno == EINTR ? 1 : -1;
    k->len += (size_t)n;
    return 1;
}

/* Length of the complete reply at the start of buf, 0 if incomplete, or -1
 * when the bytes cannot be a reply (no CRLF after a body, line too long). */
static long reply_length(const char *buf, size_t len)
{
    const char *crlf = NULL;
    for (size_t i = 1; i < len && i < MAX_REPLY_LINE; i++) {
        if (buf[i - 1] == '\r' && buf[i] == '\n') {
            crlf = buf + i - 1;
            break;
        }
    }
    if (!crlf)
        return len >= MAX_REPLY_LINE ? -1 : 0;
    size_t line = (size_t)(crlf - buf) + 2;
    const char *num = NULL;
    if (strncmp(buf, "OK ", 3) == 0)
        num = buf + 3;
    else if (strncmp(buf, "RESERVED ", 9) == 0 || strncmp(buf, "FOUND ", 6) == 0)
        for (const char *q = crlf; q > buf && !num; q--)
            if (q[-1] == ' ')
                num = q;
    if (!num)
        return (long)line;
    size_t body = strtoul(num, NULL, 10);
    if (len < line + body + 2)
        return 0;
    if (buf[line + body] != '\r' || buf[line + body + 1] != '\n')
        return -1;
    return (long)(line + body + 2);
}

static void consume(conn_t *k, size_t n)
{
    memmove(k->buf, k->buf + n, k->len - n);
    k->len -= n;
}

static void take_tail(conn_t *k, bqc_event_t *ev)
{
    ev->tail = malloc(k->len + 1);
    if (ev->tail) {
        memcpy(ev->tail, k->buf, k->len);
        ev->tail_len = k->len;
    }
    consume(k, k->len);
}

static void do_recv(conn_t *k, const bqc_step_t *st, bqc_event_t *ev)
{
    long long deadline = bqt_now_ms() + st->ms;
    ev->replies = calloc((size_t)st->count, sizeof *ev->replies);
    ev->lens = calloc((size_t)st->count, sizeof *ev->lens);
    while (ev->replies && ev->lens && ev->nreplies < st->count) {
        long n = reply_length(k->buf, k->len);
        if (n < 0) {
            ev->status = BQC_FRAMING;
            take_tail(k, ev);
            return;
        }
        if (n > 0) {
            char *r = malloc((size_t)n + 1);
            memcpy(r, k->buf, (size_t)n);
            r[n] = '\0';
            ev->replies[ev->nreplies] = r;
            ev->lens[ev->nreplies++] = (size_t)n;
            consume(k, (size_t)n);
            continue;
        }
        int f = fill(k, deadline);
        if (f <= 0) {
            ev->status = f == 0 ? BQC_TIMEOUT : BQC_CLOSED;
            take_tail(k, ev);
            return;
        }
    }
    ev->status = BQC_OK;
}

static void do_silent(conn_t *k, const bqc_step_t *st, bqc_event_t *ev)
{
    if (k->len > 0) {
        ev->status = BQC_DATA;
        take_tail(k, ev);
        return;
    }
    int f = fill(k, bqt_now_ms() + st->ms);
    ev->status = f == 0 ? BQC_OK : f > 0 ? BQC_DATA : BQC_CLOSED;
    if (f > 0)
        take_tail(k, ev);
}

static void do_eof(conn_t *k, const bqc_step_t *st, bqc_event_t *ev)
{
    long long deadline = bqt_now_ms() + st->ms;
    int f = 1;
    while (k->len == 0 && f > 0)
        f = fill(k, deadline);
    ev->status = k->len > 0 ? BQC_DATA : f == 0 ? BQC_TIMEOUT : BQC_OK;
    take_tail(k, ev);
}

/* Writes everything within the deadline; false on error or timeout. */
static bool send_all(conn_t *k, const char *data, size_t len)
{
    long long deadline = bqt_now_ms() + BQC_DEFAULT_MS;
    while (len > 0) {
        struct pollfd p = {k->fd, POLLOUT, 0};
        if (poll(&p, 1, left(deadline)) <= 0)
            return false;
        ssize_t n = send(k->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static int fail_play(player_t *pl, const bqc_step_t *st, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(pl->t->error, sizeof pl->t->error, "line %d (%s): ", st->line, st->text);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof pl->t->error)
        vsnprintf(pl->t->error + n, sizeof pl->t->error - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int do_sync(player_t *pl, conn_t *k, const bqc_step_t *st)
{
    bqc_step_t one = {.count = 1, .ms = BQC_DEFAULT_MS};
    bqc_event_t ev = {0};
    int rc = 0;
    if (!send_all(k, SYNC_COMMAND, strlen(SYNC_COMMAND)))
        return fail_play(pl, st, "sync: send failed: %s", strerror(errno));
    do_recv(k, &one, &ev);
    if (ev.status != BQC_OK || strcmp(ev.replies[0], SYNC_REPLY) != 0) {
        char *got = ev.nreplies ? bqc_escape(ev.replies[0], ev.lens[0])
                                : bqc_escape(ev.tail ? ev.tail : "", ev.tail_len);
        rc = fail_play(pl, st, "sync: 'kick-job 0' should answer NOT_FOUND, got \"%s\"%s", got,
                       ev.status == BQC_TIMEOUT ? " (timeout)" : "");
        free(got);
    }
    for (int i = 0; i < ev.nreplies; i++)
        free(ev.replies[i]);
    free(ev.replies);
    free(ev.lens);
    free(ev.tail);
    return rc;
}

static bqc_event_t *new_event(player_t *pl, const bqc_step_t *st)
{
    bqc_transcript_t *t = pl->t;
    bqc_event_t *grown = realloc(t->events, sizeof *grown * (size_t)(t->nevents + 1));
    if (!grown)
        return NULL;
    t->events = grown;
    memset(&grown[t->nevents], 0, sizeof *grown);
    grown[t->nevents].step = st;
    return &grown[t->nevents++];
}

static void close_conn(conn_t *k)
{
    if (k->fd >= 0)
        close(k->fd);
    k->fd = -1;
    k->len = 0;
}

/* Closes every connection, stops the server with st->sig and starts it
 * again on the same directory. */
static int do_restart(player_t *pl, const bqc_step_t *st)
{
    for (int i = 0; i < BQC_MAX_CONNS; i++)
        close_conn(&pl->conns[i]);
    if (bqt_server_restart(&pl->server, pl->binary, (const char *const *)pl->c->server_args,
                           st->sig) != 0)
        return fail_play(pl, st, "%s did not restart (see the log above)", pl->binary);
    return 0;
}

static int do_step(player_t *pl, const bqc_step_t *st)
{
    conn_t *k = &pl->conns[st->conn];
    bqc_event_t *ev;
    if (st->op == BQC_SIGNAL) {
        bqt_server_signal(&pl->server, st->sig);
        return 0;
    }
    if (st->op == BQC_RESTART)
        return do_restart(pl, st);
    if (st->op == BQC_CONN) {
        close_conn(k);
        k->fd = bqt_connect(pl->server.port);
        if (k->fd < 0)
            return fail_play(pl, st, "connect failed: %s", strerror(errno));
        return do_sync(pl, k, st);
    }
    if (k->fd < 0)
        return fail_play(pl, st, "connection is not open");
    switch (st->op) {
    case BQC_SYNC:
        return do_sync(pl, k, st);
    case BQC_SHUTDOWN:
        shutdown(k->fd, SHUT_WR);
        return 0;
    case BQC_CLOSE:
        close_conn(k);
        return 0;
    case BQC_SEND:
        send_all(k, st->data, st->len);
        return 0; /* errors show in later reads */
    default:
        break;
    }
    if (!(ev = new_event(pl, st)))
        return fail_play(pl, st, "out of memory");
    if (st->op == BQC_RECV)
        do_recv(k, st, ev);
    else if (st->op == BQC_SILENT)
        do_silent(k, st, ev);
    else
        do_eof(k, st, ev);
    return 0;
}

void bqc_play(const bqc_case_t *c, const char *binary, bqc_transcript_t *t)
{
    player_t pl = {.c = c, .binary = binary, .t = t};
    long long t0 = bqt_now_ms();
    memset(t, 0, sizeof *t);
    for (int i = 0; i < BQC_MAX_CONNS; i++)
        pl.conns[i].fd = -1;
    if (bqt_server_start(&pl.server, binary, (const char *const *)c->server_args) != 0) {
        snprintf(t->error, sizeof t->error, "%s did not start (see the log above)", binary);
        return;
    }
    for (int i = 0; i < c->nsteps; i++)
        if (do_step(&pl, &c->steps[i]) != 0)
            break;
    for (int i = 0; i < BQC_MAX_CONNS; i++) {
        close_conn(&pl.conns[i]);
        free(pl.conns[i].buf);
    }
    bqt_server_stop(&pl.server);
    t->seconds = (double)(bqt_now_ms() - t0) / 1000.0;
}

void bqc_transcript_free(bqc_transcript_t *t)
{
    for (int i = 0; i < t->nevents; i++) {
        bqc_event_t *ev = &t->events[i];
        for (int j = 0; j < ev->nreplies; j++)
            free(ev->replies[j]);
        free(ev->replies);
        free(ev->lens);
        free(ev->tail);
    }
    free(t->events);
    t->events = NULL;
    t->nevents = 0;
}
