/* Client connections. Bytes read from the socket go straight to the
 * session; what it does not consume (it waits in reserve, or the connection
 * is throttled) is kept in a per-connection buffer and fed again later.
 * Replies collect in the output queue and are written once per loop turn
 * (bq_clients_flush, from the server's prepare handle).
 *
 * Memory stays bounded per connection: all connections share one read
 * buffer; input is fed in small slices so that no single feed can queue
 * much output; reading stops while more than 64 KiB of input waits, and
 * input is neither read nor fed while more than 1 MiB of output is unsent
 * (until it drains below 256 KiB).
 *
 * The engine's hooks (send, wake) only queue work: a connection is never
 * fed or closed from inside an engine call.
 *
 * With the binlog on, output is held back until the log records it may
 * depend on are released (written, or fsynced under -f 0): the bytes queued
 * since the last flush are tagged, when flushed, with the last LSN handed
 * out by then, which is at least the LSN of any change they report (the
 * engine logs a change within the command that makes it). Replies thus
 * leave in order and never before their records are as durable as -f
 * promises; a connection with held-back output waits on the gated list
 * until the owner pushes a higher release LSN (bq_clients_release). On a
 * single node under -f 0 every reply is tagged, whatever command sent it:
 * no reply shows a job (its id) before the job's record is durable
 * (docs/binlog.md, "Job ids after a restart"). */
#include "node/client/conn.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node/base/log.h"
#include "node/client/outq.h"
#include "node/client/trace.h"
#include "protocol/session.h"

#define READ_BUF_SIZE ((size_t)64 * 1024)
#define INPUT_HIGH ((size_t)64 * 1024)    /* stop reading above this much kept input */
#define OUTPUT_HIGH ((size_t)1024 * 1024) /* throttle above this much unsent output */
#define OUTPUT_LOW ((size_t)256 * 1024)   /* resume below this */
#define SLICE_MIN 64                      /* feed at least this much at a time */
#define MAX_WRITE_BUFS 64

typedef struct bq_conn bq_conn_t;

struct bq_conn {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    bq_clients_t *cl;
    bq_session_t *session;
    bq_list_t all, dirty, pending, gated; /* links in the lists of cl */
    bq_outq_t out;
    size_t inflight; /* bytes owned by the write in progress */
    char *in;        /* input the session has not consumed */
    size_t in_len, in_cap;
    int fd;
    bool reading;        /* uv_read_start is in effect */
    bool eof;            /* the peer shut down its side */
    bool quit;           /* quit received */
    bool finishing;      /* no more input will be fed: close once output is flushed */
    bool closing;        /* uv_close called */
    bool throttled;      /* too much unsent output: neither read nor feed */
    bool writing;        /* a uv_write is in progress */
    bool failed;         /* out of memory: close at the next chance */
    uint64_t tagged_lsn; /* binlog: the highest LSN its output waits for */
    size_t swallow;      /* replies still to drop: an adopted session's restore */
    bq_trace_t trace;
};

typedef struct write_req {
    uv_write_t req;
    bq_chunk_t *chunks; /* owned until the write completes */
    size_t bytes;
} write_req_t;

/* Clients (strangers) can cause these lines: at most one a second. */
static bq_log_limit_t conn_warnings;

/* The last LSN handed out when feeding began (UINT64_MAX outside a feed):
 * a reply sent after it reports a change logged since. */
static uint64_t feed_lsn = UINT64_MAX;

/* One read buffer for every connection: read_cb consumes it before the next
 * alloc_cb, so an idle connection holds no read memory. */
static char read_buf[READ_BUF_SIZE];

static void update_reading(bq_conn_t *c);

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void close_conn(bq_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    bq_list_remove(&c->all);
    bq_list_remove(&c->dirty);
    bq_list_remove(&c->pending);
    bq_list_remove(&c->gated);
    bq_log(BQ_LOG_DEBUG, "close", "fd=%d", c->fd);
    if (c->session)
        bq_session_free(c->session, c->cl->now(c->cl->arg));
    c->session = NULL;
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = 0;
    bq_outq_clear(&c->out);
    uv_close(&c->h.handle, on_closed);
}

static void mark_dirty(bq_conn_t *c)
{
    if (!c->closing && bq_list_empty(&c->dirty))
        bq_list_push(&c->cl->dirty, &c->dirty);
}

static void schedule(bq_conn_t *c)
{
    if (!c->closing && bq_list_empty(&c->pending))
        bq_list_push(&c->cl->pending, &c->pending);
}

static bool can_feed(const bq_conn_t *c)
{
    return !c->closing && !c->failed && !c->throttled && !bq_session_quit(c->session) &&
           !bq_session_blocked(c->session);
}

/* Length of the next slice of data to feed: at least SLICE_MIN bytes, then
 * up to a line end, so one feed completes only a few commands. */
static size_t slice_len(const char *data, size_t len)
{
    if (len <= SLICE_MIN)
        return len;
    const char *nl = memchr(data + SLICE_MIN - 1, '\n', len - (SLICE_MIN - 1));
    return nl ? (size_t)(nl - data) + 1 : len;
}

/* Feeds data to the session while it can take it; returns bytes consumed. */
static size_t feed(bq_conn_t *c, const char *data, size_t len, bq_now_t now)
{
    size_t off = 0;
    /* A primary may have been fenced since the last event (a pause): writes
     * are refused with DRAINING before they are tried. */
    if (c->cl->before_feed)
        c->cl->before_feed(c->cl->arg);
    /* A command held while writes paused runs first, once they resume. */
    if (c->session && !c->closing) {
        if (c->cl->binlog)
            feed_lsn = bq_binlog_last_lsn(c->cl->binlog);
        bq_session_resume(c->session, now);
        feed_lsn = UINT64_MAX;
    }
    while (off < len && can_feed(c)) {
        size_t n = slice_len(data + off, len - off);
        if (c->cl->binlog)
            feed_lsn = bq_binlog_last_lsn(c->cl->binlog);
        size_t used = bq_session_feed(c->session, data + off, n, now);
        feed_lsn = UINT64_MAX;
        off += used;
        if (used < n)
            break;
    }
    return off;
}

static int keep_input(bq_conn_t *c, const char *data, size_t len)
{
    if (c->in_cap - c->in_len < len) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 1024;
        while (cap - c->in_len < len)
            cap *= 2;
        char *p = realloc(c->in, cap);
        if (!p)
            return -1;
        c->in = p;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    return 0;
}

static void drop_input(bq_conn_t *c, size_t n)
{
    if (n < c->in_len) {
        memmove(c->in, c->in + n, c->in_len - n);
        c->in_len -= n;
        return;
    }
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = 0;
}

static void feed_kept(bq_conn_t *c, bq_now_t now)
{
    size_t used = feed(c, c->in, c->in_len, now); /* with none kept: a held command */
    if (used > 0)
        drop_input(c, used);
}

/* After feeding: notices quit, the end of a half-closed client's input and
 * memory failures, and adjusts reading. */
static void settle(bq_conn_t *c)
{
    if (c->closing)
        return;
    if (c->failed) {
        bq_log_limited(&conn_warnings, BQ_LOG_WARN, "out of memory; closing connection", "fd=%d",
                       c->fd);
        close_conn(c);
        return;
    }
    if (!c->quit && bq_session_quit(c->session)) {
        c->quit = c->finishing = true;
        drop_input(c, c->in_len);
    } else if (c->eof && !c->finishing && !c->throttled && !bq_session_blocked(c->session)) {
        c->finishing = true; /* what is left is an incomplete command */
    }
    update_reading(c);
    if (c->finishing)
        mark_dirty(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof read_buf);
}

static void on_eof(bq_conn_t *c)
{
    bq_now_t now = c->cl->now(c->cl->arg);
    c->eof = true;
    c->reading = false; /* libuv stops reading at EOF */
    bq_session_eof(c->session, now);
    feed_kept(c, now);
    settle(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    bq_conn_t *c = stream->data;

    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        if (nread == UV_EOF) {
            on_eof(c);
            return;
        }
        bq_log(BQ_LOG_DEBUG, "read error", "fd=%d err=\"%s\"", c->fd, uv_strerror((int)nread));
        close_conn(c);
        return;
    }
    if (c->quit)
        return;
    size_t len = (size_t)nread;
    bq_now_t now = c->cl->now(c->cl->arg);
    if (c->in_len == 0) {
        size_t used = feed(c, buf->base, len, now);
        if (used < len && !bq_session_quit(c->session) &&
            keep_input(c, buf->base + used, len - used) != 0)
            c->failed = true;
    } else if (keep_input(c, buf->base, len) != 0) {
        c->failed = true;
    } else {
        feed_kept(c, now);
    }
    settle(c);
}

static void update_reading(bq_conn_t *c)
{
    bool want = !c->closing && !c->eof && !c->quit && !c->throttled && c->in_len < INPUT_HIGH;
    if (want == c->reading)
        return;
    if (want) {
        int r = uv_read_start(&c->h.stream, alloc_cb, on_read);
        if (r != 0) {
            bq_log_limited(&conn_warnings, BQ_LOG_WARN, "cannot read", "fd=%d err=\"%s\"", c->fd,
                           uv_strerror(r));
            c->failed = true;
            schedule(c);
            return;
        }
    } else {
        uv_read_stop(&c->h.stream);
    }
    c->reading = want;
}

void bq_conn_send(void *conn, const char *data, size_t len)
{
    bq_conn_t *c = conn;

    if (c->closing || c->failed)
        return;
    if (c->swallow > 0) { /* the reply of a restore command (bq_conn_adopt) */
        c->swallow--;
        return;
    }
    if (bq_log_enabled(BQ_LOG_TRACE))
        bq_trace_reply(&c->trace, c->fd, data, len);
    /* A reply sent while commands logged records (its own or, for a woken
     * reserve, another connection's put) waits until they are released.
     * When ids must be durable before any reply shows them (a single node
     * under -f 0), every reply waits for every record logged before it. */
    if (c->cl->binlog) {
        uint64_t lsn = bq_binlog_last_lsn(c->cl->binlog);
        bool after = lsn > feed_lsn || bq_binlog_ids_durable(c->cl->binlog);
        if (after && lsn > c->tagged_lsn) {
            bq_outq_tag(&c->out, c->out.appended, lsn);
            c->tagged_lsn = lsn;
        }
    }
    if (bq_outq_append(&c->out, data, len) != 0) {
        c->failed = true;
        schedule(c);
        return;
    }
    if (c->out.bytes + c->inflight > OUTPUT_HIGH)
        c->throttled = true;
    mark_dirty(c);
}

void bq_conn_wake(void *conn)
{
    schedule(conn);
}

void bq_conn_command(void *conn, bq_op_t op)
{
    const bq_conn_t *c = conn;
    bq_log(BQ_LOG_TRACE, "command", "fd=%d op=%s", c->fd, bq_op_name(op));
}

void bq_clients_resume(bq_clients_t *cl)
{
    bq_list_t *l;
    while ((l = bq_list_pop(&cl->pending))) {
        bq_conn_t *c = BQ_CONTAINER_OF(l, bq_conn_t, pending);
        feed_kept(c, cl->now(cl->arg));
        settle(c);
    }
}

bool bq_clients_pending(const bq_clients_t *cl)
{
    return !bq_list_empty(&cl->pending);
}

static void on_write(uv_write_t *req, int status)
{
    write_req_t *w = BQ_CONTAINER_OF(req, write_req_t, req);
    bq_conn_t *c = req->handle->data;

    bq_outq_free_chunks(w->chunks);
    c->inflight -= w->bytes;
    c->writing = false;
    free(w);
    if (c->closing)
        return;
    if (status < 0) {
        bq_log(BQ_LOG_DEBUG, "write error", "fd=%d err=\"%s\"", c->fd, uv_strerror(status));
        close_conn(c);
        return;
    }
    mark_dirty(c); /* the next flush writes the rest, unthrottles or closes */
}

/* Writes what the socket takes now of the first `limit` queued bytes, then
 * hands up to MAX_WRITE_BUFS chunks of the rest of them to one uv_write.
 * Returns 0, or -1 when the connection must close. */
static int write_out(bq_conn_t *c, size_t limit)
{
    uv_buf_t bufs[MAX_WRITE_BUFS];
    size_t n = bq_outq_peek(&c->out, bufs, MAX_WRITE_BUFS, limit);
    int r = uv_try_write(&c->h.stream, bufs, (unsigned int)n);

    if (r < 0 && r != UV_EAGAIN) {
        bq_log(BQ_LOG_DEBUG, "write error", "fd=%d err=\"%s\"", c->fd, uv_strerror(r));
        return -1;
    }
    bq_outq_consume(&c->out, r > 0 ? (size_t)r : 0);
    limit -= r > 0 ? (size_t)r : 0;
    if (limit == 0)
        return 0;
    /* uv_write takes whole chunks: bytes held back must not go with them. */
    if (limit < c->out.bytes && bq_outq_split(&c->out, limit) != 0)
        return -1;
    write_req_t *w = malloc(sizeof *w);
    if (!w)
        return -1;
    n = bq_outq_peek(&c->out, bufs, MAX_WRITE_BUFS, limit);
    w->bytes = 0;
    for (size_t i = 0; i < n; i++)
        w->bytes += bufs[i].len;
    w->chunks = bq_outq_detach(&c->out, n);
    r = uv_write(&w->req, &c->h.stream, bufs, (unsigned int)n, on_write);
    if (r != 0) {
        bq_log(BQ_LOG_DEBUG, "write error", "fd=%d err=\"%s\"", c->fd, uv_strerror(r));
        bq_outq_free_chunks(w->chunks);
        free(w);
        return -1;
    }
    c->writing = true;
    c->inflight = w->bytes;
    return 0;
}

/* Binlog: returns how many queued bytes may be written now (the rest waits
 * for its LSN to be released); puts c on the gated list when some must
 * wait. */
static size_t releasable(bq_conn_t *c)
{
    size_t n = bq_outq_releasable(&c->out, c->cl->release_lsn);
    if (n == c->out.bytes)
        bq_list_remove(&c->gated);
    else if (bq_list_empty(&c->gated))
        bq_list_push(&c->cl->gated, &c->gated);
    return n;
}

static void flush(bq_conn_t *c)
{
    size_t limit = c->cl->binlog ? releasable(c) : c->out.bytes;

    if (!c->writing && limit > 0 && write_out(c, limit) != 0) {
        close_conn(c);
        return;
    }
    if (c->throttled && c->out.bytes + c->inflight < OUTPUT_LOW) {
        c->throttled = false;
        schedule(c);
        update_reading(c);
    }
    if (c->finishing && c->out.bytes == 0 && !c->writing)
        close_conn(c);
}

void bq_clients_flush(bq_clients_t *cl)
{
    bq_list_t *l;
    while ((l = bq_list_pop(&cl->dirty)))
        flush(BQ_CONTAINER_OF(l, bq_conn_t, dirty));
}

void bq_clients_release(bq_clients_t *cl, uint64_t lsn)
{
    bq_list_t *l;
    if (lsn > cl->release_lsn)
        cl->release_lsn = lsn;
    while ((l = bq_list_pop(&cl->gated)))
        mark_dirty(BQ_CONTAINER_OF(l, bq_conn_t, gated));
}

void bq_clients_wake_all(bq_clients_t *cl)
{
    for (bq_list_t *l = cl->conns.next; l != &cl->conns; l = l->next)
        schedule(BQ_CONTAINER_OF(l, bq_conn_t, all));
}

/* Hands c to take when it can move (nothing unsent, no put body or
 * discard in progress, a TCP socket): true when handed. */
static bool hand_over_one(bq_conn_t *c, bq_conn_take_fn take, void *arg)
{
    bq_client_t *ec = bq_session_client(c->session);
    if (c->cl->is_unix || c->failed || c->eof || c->quit || c->finishing || c->writing ||
        c->out.bytes > 0 || c->swallow > 0) {
        bq_log(BQ_LOG_DEBUG, "client not handed over", "fd=%d unsent=%zu writing=%d eof=%d", c->fd,
               c->out.bytes, c->writing, c->eof);
        return false;
    }
    char *input = NULL;
    size_t n = 0, nwatch = bq_engine_client_nwatch(ec);
    int r = bq_session_replay(c->session, c->cl->now(c->cl->arg), &input, &n);
    /* The replay's bytes first, then the input it sent after them. */
    if (r == 0 && c->in_len > 0) {
        char *all = realloc(input, n + c->in_len);
        if (all)
            memcpy(all + n, c->in, c->in_len);
        r = all ? 0 : -1;
        input = all ? all : input;
        n += c->in_len;
    }
    const char **watch = r == 0 ? malloc(nwatch * sizeof *watch) : NULL;
    int fd = watch ? fcntl(c->fd, F_DUPFD_CLOEXEC, 0) : -1; /* not into a re-exec */
    if (fd < 0) {
        free(watch);
        free(input);
        return false;
    }
    for (size_t i = 0; i < nwatch; i++)
        watch[i] = bq_engine_client_watch(ec, i);
    bq_conn_handover_t h = {.fd = fd,
                            .use = bq_engine_client_use(ec),
                            .watch = watch,
                            .nwatch = nwatch,
                            .input = input,
                            .len = n};
    r = take(arg, &h);
    free(watch);
    free(input);
    return r == 0;
}

size_t bq_clients_hand_over(bq_clients_t *cl, bq_conn_take_fn take, void *arg, size_t *closed)
{
    size_t n = 0;
    *closed = 0;
    bq_list_t *l;
    bq_clients_flush(cl); /* replies released already leave first */
    while ((l = bq_list_pop(&cl->conns))) {
        bq_conn_t *c = BQ_CONTAINER_OF(l, bq_conn_t, all);
        if (!c->closing && hand_over_one(c, take, arg))
            n++;
        else if (!c->closing)
            (*closed)++;
        close_conn(c);
    }
    return n;
}

void bq_clients_close_all(bq_clients_t *cl)
{
    bq_list_t *l;
    while ((l = bq_list_pop(&cl->conns)))
        close_conn(BQ_CONTAINER_OF(l, bq_conn_t, all));
}

void bq_clients_init(bq_clients_t *cl)
{
    memset(cl, 0, sizeof *cl);
    bq_list_init(&cl->conns);
    bq_list_init(&cl->dirty);
    bq_list_init(&cl->pending);
    bq_list_init(&cl->gated);
}

/* Logs the accepted connection with its peer address. */
static void log_accept(bq_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char host[64] = "unix";
    int port = 0;

    if (!bq_log_enabled(BQ_LOG_DEBUG))
        return;
    if (!c->cl->is_unix && uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
    }
    bq_log(BQ_LOG_DEBUG, "accept", "fd=%d peer=%s:%d", c->fd, host, port);
}

/* Sets TCP_NODELAY and SO_KEEPALIVE (system default timing, as beanstalkd). */
static void tune_tcp(bq_conn_t *c)
{
    int one = 1;
    uv_tcp_nodelay(&c->h.tcp, 1);
    setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

/* A new connection on fd (owned) with its session, not reading yet; NULL
 * (logged, fd closed) when it cannot be set up. */
static bq_conn_t *conn_new(bq_clients_t *cl, int fd)
{
    bq_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        bq_log_limited(&conn_warnings, BQ_LOG_WARN, "out of memory; dropping new connection",
                       "fd=%d", fd);
        close(fd);
        return NULL;
    }
    int r = cl->is_unix ? uv_pipe_init(cl->loop, &c->h.pipe, 0) : uv_tcp_init(cl->loop, &c->h.tcp);
    if (r != 0) {
        free(c);
        close(fd);
        return NULL;
    }
    c->h.handle.data = c;
    c->cl = cl;
    c->fd = fd;
    bq_list_init(&c->all);
    bq_list_init(&c->dirty);
    bq_list_init(&c->pending);
    bq_list_init(&c->gated);
    bq_outq_init(&c->out);
    r = cl->is_unix ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd);
    if (r != 0) {
        bq_log_limited(&conn_warnings, BQ_LOG_WARN, "cannot open connection", "fd=%d err=\"%s\"",
                       fd, uv_strerror(r));
        close(fd);
        close_conn(c);
        return NULL;
    }
    if (!cl->is_unix)
        tune_tcp(c);
    bq_list_push(&cl->conns, &c->all);
    c->session = bq_session_new(cl->engine, c);
    if (!c->session) {
        bq_log_limited(&conn_warnings, BQ_LOG_WARN, "out of memory; dropping new connection",
                       "fd=%d", fd);
        close_conn(c);
        return NULL;
    }
    return c;
}

int bq_conn_open(bq_clients_t *cl, int fd)
{
    bq_conn_t *c = conn_new(cl, fd);
    if (!c)
        return -1;
    log_accept(c);
    update_reading(c);
    return 0;
}

int bq_conn_adopt(bq_clients_t *cl, int fd, const char *input, size_t len, size_t swallow)
{
    bq_conn_t *c = conn_new(cl, fd);
    if (!c)
        return -1;
    if (len > 0 && keep_input(c, input, len) != 0) {
        close_conn(c);
        return -1;
    }
    c->swallow = swallow;
    bq_log(BQ_LOG_DEBUG, "adopted a proxied client", "fd=%d input=%zu restores=%zu", fd, len,
           swallow);
    update_reading(c);
    schedule(c); /* its input is fed on the next loop turn */
    return 0;
}
