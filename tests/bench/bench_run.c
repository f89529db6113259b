/* The load engine of bq-bench. Every connection is a non-blocking socket in
 * one edge-triggered epoll set. A connection keeps a ring of the commands it
 * has sent and not yet seen answered (beanstalkd answers in command order),
 * so each reply is matched to its command, checked, and timed from the
 * moment the command was written to the moment its whole reply was read.
 * After handling a batch of replies the connection tops its pipeline up
 * again to the configured depth, as the workload allows, and writes every
 * new command with one write.
 *
 * Workload schemes (a "job" is the unit -n counts):
 *   put, fill  one command per job: put.
 *   cycle      put and reserve-with-timeout 0 are sent together; when the
 *              RESERVED reply arrives, delete <id> is sent. The server runs
 *              a connection's reserve after that connection's put, so when
 *              any reserve runs, more puts than successful reserves have run
 *              in the tube; reserved jobs are only ever deleted, so a job is
 *              ready and TIMED_OUT is an error (as long as nobody else takes
 *              jobs from `default`). A job starts while the connection has at
 *              most max(depth, 2) - 2 commands in flight.
 *   reserve    reserve-with-timeout 0, then delete <id>; a TIMED_OUT means
 *              the tube is empty and retires that connection. */
#include "bench_run.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Command kinds beyond the measured ones (setup traffic, never timed). */
enum { K_VERIFY = BQ_CMD_KINDS, K_WATCH };

#define MAX_CONNECTING 256     /* connections in setup at once (accept backlog) */
#define SETUP_DEPTH 128        /* watch commands in flight per connection */
#define STALL_NS 30000000000LL /* no reply for this long while waiting = error */
#define MAX_ERROR_MESSAGES 10
#define MAX_LINE 1024 /* longest reply line we accept */

typedef enum { C_NEW, C_CONNECTING, C_SETUP, C_READY, C_DEAD } conn_state_t;

typedef struct pending_s {
    int64_t t_send;
    int kind;
} pending_t;

typedef struct buf_s {
    char *p;
    size_t len, cap, off; /* off: parsed (read buffer) or written (write buffer) */
} buf_t;

typedef struct conn_s {
    int fd;
    conn_state_t state;
    bool holder;  /* the connection that keeps the idle tubes alive */
    bool empty;   /* reserve workload: the tube was found empty */
    int verified; /* verification replies that were correct */
    int watch_target, watch_sent, watch_acked;
    buf_t rb, wb;
    pending_t *ring;
    uint32_t mask, head, count, unstamped;
} conn_t;

struct bq_bench_s {
    bq_bench_cfg_t cfg;
    int ep;
    struct addrinfo *ai;
    conn_t *conns;
    int nconns, next_connect, setting_up;
    char *put_cmd;
    size_t put_len;
    uint64_t outstanding, errors, messages;
    int64_t t_progress;
    /* The phase being run (res is NULL outside bq_bench_run). */
    bq_bench_result_t *res;
    bq_workload_t w;
    bool stop;
    uint64_t budget, issued, done, warm_jobs;
    int64_t t_warm, t_end, t_last;
};

int64_t bq_bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL) {
        fprintf(stderr, "bq-bench: out of memory (%zu bytes)\n", n);
        abort();
    }
    return q;
}

static void buf_need(buf_t *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return;
    if (b->off > 0) {
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    if (cap != b->cap) {
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
}

static void report(bq_bench_t *b, const char *fmt, ...)
{
    b->errors++;
    if (b->res != NULL)
        b->res->errors++;
    if (++b->messages > MAX_ERROR_MESSAGES) {
        if (b->messages == MAX_ERROR_MESSAGES + 1)
            fprintf(stderr, "bq-bench: further error messages suppressed\n");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("bq-bench: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void conn_fail(bq_bench_t *b, conn_t *c, const char *why)
{
    if (c->state == C_DEAD)
        return;
    report(b, "connection %d: %s (%u commands unanswered)", (int)(c - b->conns), why, c->count);
    b->outstanding -= c->count;
    c->count = 0;
    if (c->state == C_CONNECTING || c->state == C_SETUP)
        b->setting_up--;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = C_DEAD;
}

static void push_cmd(bq_bench_t *b, conn_t *c, int kind, const char *bytes, size_t len)
{
    if (c->count > c->mask) {
        fprintf(stderr, "bq-bench: internal error: pipeline ring overflow\n");
        abort();
    }
    buf_need(&c->wb, len);
    memcpy(c->wb.p + c->wb.len, bytes, len);
    c->wb.len += len;
    pending_t *p = &c->ring[(c->head + c->count) & c->mask];
    p->kind = kind;
    p->t_send = 0;
    c->count++;
    c->unstamped++;
    b->outstanding++;
}

static void push_delete(bq_bench_t *b, conn_t *c, uint64_t id)
{
    char cmd[40];
    int n = snprintf(cmd, sizeof(cmd), "delete %llu\r\n", (unsigned long long)id);
    push_cmd(b, c, BQ_CMD_DELETE, cmd, (size_t)n);
}

static void push_watch(bq_bench_t *b, conn_t *c)
{
    char cmd[64];
    int n =
        snprintf(cmd, sizeof(cmd), "watch %s%d\r\n", c->holder ? "xtube" : "tube", c->watch_sent);
    c->watch_sent++;
    push_cmd(b, c, K_WATCH, cmd, (size_t)n);
}

/* Stamps the commands queued since the last flush and writes what it can;
 * the rest goes out on the next EPOLLOUT edge. */
static void flush(bq_bench_t *b, conn_t *c)
{
    if (c->unstamped > 0) {
        int64_t now = bq_bench_now_ns();
        for (uint32_t i = c->count - c->unstamped; i < c->count; i++)
            c->ring[(c->head + i) & c->mask].t_send = now;
        c->unstamped = 0;
    }
    while (c->wb.off < c->wb.len) {
        ssize_t n = send(c->fd, c->wb.p + c->wb.off, c->wb.len - c->wb.off, MSG_NOSIGNAL);
        if (n > 0) {
            c->wb.off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            conn_fail(b, c, n < 0 ? strerror(errno) : "send returned 0");
            return;
        }
    }
    c->wb.off = c->wb.len = 0;
}

/* Issues new work on a connection as far as its pipeline and the phase allow. */
static void pump(bq_bench_t *b, conn_t *c)
{
    if (c->state == C_SETUP) {
        while (c->watch_sent < c->watch_target && c->count < SETUP_DEPTH)
            push_watch(b, c);
        return;
    }
    if (c->state != C_READY || c->holder || b->res == NULL || b->stop)
        return;
    uint32_t depth = (uint32_t)b->cfg.depth;
    static const char reserve[] = "reserve-with-timeout 0\r\n";
    switch (b->w) {
    case BQ_W_PUT:
    case BQ_W_FILL:
        for (; c->count < depth && b->issued < b->budget; b->issued++)
            push_cmd(b, c, BQ_CMD_PUT, b->put_cmd, b->put_len);
        break;
    case BQ_W_CYCLE:
        depth = depth < 2 ? 2 : depth;
        for (; c->count + 2 <= depth && b->issued < b->budget; b->issued++) {
            push_cmd(b, c, BQ_CMD_PUT, b->put_cmd, b->put_len);
            push_cmd(b, c, BQ_CMD_RESERVE, reserve, sizeof(reserve) - 1);
        }
        break;
    case BQ_W_RESERVE:
        for (; c->count < depth && !c->empty && b->issued < b->budget; b->issued++)
            push_cmd(b, c, BQ_CMD_RESERVE, reserve, sizeof(reserve) - 1);
        break;
    case BQ_W_IDLE:
        break;
    }
}

static void start_connects(bq_bench_t *b);

/* A verification or watch reply arrived: the connection may now be ready. */
static void setup_progress(bq_bench_t *b, conn_t *c)
{
    if (c->state != C_SETUP || c->verified < 1 || c->watch_acked < c->watch_target)
        return;
    c->state = C_READY;
    b->setting_up--;
    start_connects(b);
}

static bool line_is(const char *line, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(line, want, len) == 0;
}

static bool line_starts(const char *line, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len > n && memcmp(line, prefix, n) == 0;
}

/* Parses a decimal number at *p (before end); advances *p. */
static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    if (s == *p)
        return false;
    *p = s;
    *out = v;
    return true;
}

static bool watching_ok(const char *line, size_t len, uint64_t want)
{
    uint64_t n;
    const char *p = line + 9;
    return line_starts(line, len, "WATCHING ") && parse_u64(&p, line + len, &n) &&
           p == line + len && n == want;
}

/* Checks one reply against its command and returns whether it finished a job. */
static bool check_reply(bq_bench_t *b, conn_t *c, int kind, const char *line, size_t len,
                        uint64_t id)
{
    bool ok = false;
    bool job = false;
    switch (kind) {
    case K_VERIFY:
        ok = line_is(line, len, "USING default");
        c->verified += ok;
        break;
    case K_WATCH:
        ok = watching_ok(line, len, (uint64_t)c->watch_acked + 2);
        c->watch_acked++;
        break;
    case BQ_CMD_PUT:
        ok = line_starts(line, len, "INSERTED ");
        job = ok && b->res != NULL && (b->w == BQ_W_PUT || b->w == BQ_W_FILL);
        break;
    case BQ_CMD_RESERVE:
        if (line_starts(line, len, "RESERVED ")) {
            ok = true;
            push_delete(b, c, id);
        } else if (line_is(line, len, "TIMED_OUT") && b->res != NULL && b->w == BQ_W_RESERVE) {
            ok = true;
            c->empty = true;
            b->res->timed_out++;
        }
        break;
    case BQ_CMD_DELETE:
        ok = job = line_is(line, len, "DELETED");
        break;
    }
    if (!ok)
        report(b, "connection %d: unexpected reply \"%.*s\"", (int)(c - b->conns), (int)len, line);
    return job;
}

static void on_reply(bq_bench_t *b, conn_t *c, const char *line, size_t len, uint64_t id,
                     int64_t now)
{
    pending_t p = c->ring[c->head];
    c->head = (c->head + 1) & c->mask;
    c->count--;
    b->outstanding--;
    bool in_window = b->res != NULL && now >= b->t_warm && now < b->t_end;
    bool job = check_reply(b, c, p.kind, line, len, id);
    if (in_window && p.kind < BQ_CMD_ALL) {
        uint64_t ns = now > p.t_send ? (uint64_t)(now - p.t_send) : 0;
        bq_hist_record(&b->res->hist[p.kind], ns);
        bq_hist_record(&b->res->hist[BQ_CMD_ALL], ns);
        b->res->ops++;
        b->t_last = now;
    }
    if (job && b->res != NULL) {
        b->done++;
        b->res->jobs_total++;
        b->res->jobs += in_window;
        if (b->done == b->warm_jobs)
            b->t_warm = now;
    }
    if (p.kind == K_VERIFY || p.kind == K_WATCH)
        setup_progress(b, c);
}

/* Length of a complete reply at line (line_len includes "\r\n"), 0 when more
 * bytes are needed, -1 on a malformed reply. *id gets a RESERVED job's id. */
static long reply_length(const conn_t *c, const char *line, size_t line_len, size_t avail,
                         uint64_t *id)
{
    size_t len = line_len - 2;
    if (c->ring[c->head].kind != BQ_CMD_RESERVE || !line_starts(line, len, "RESERVED "))
        return (long)line_len;
    const char *p = line + 9;
    uint64_t bytes;
    if (!parse_u64(&p, line + len, id) || *p++ != ' ' || !parse_u64(&p, line + len, &bytes) ||
        p != line + len)
        return -1;
    size_t total = line_len + bytes + 2;
    if (avail < total)
        return 0;
    if (line[total - 2] != '\r' || line[total - 1] != '\n')
        return -1;
    return (long)total;
}

static void parse_replies(bq_bench_t *b, conn_t *c, int64_t now)
{
    buf_t *rb = &c->rb;
    while (rb->off < rb->len && c->state != C_DEAD) {
        const char *line = rb->p + rb->off;
        size_t avail = rb->len - rb->off;
        const char *nl = memchr(line, '\n', avail);
        if (nl == NULL) {
            if (avail > MAX_LINE)
                conn_fail(b, c, "reply line too long");
            return;
        }
        size_t line_len = (size_t)(nl - line) + 1;
        if (line_len < 2 || nl[-1] != '\r' || c->count == 0) {
            conn_fail(b, c, c->count == 0 ? "reply without a command" : "reply without CRLF");
            return;
        }
        uint64_t id = 0;
        long total = reply_length(c, line, line_len, avail, &id);
        if (total == 0)
            return;
        if (total < 0) {
            conn_fail(b, c, "malformed RESERVED reply");
            return;
        }
        rb->off += (size_t)total;
        on_reply(b, c, line, line_len - 2, id, now);
    }
    if (rb->off == rb->len)
        rb->off = rb->len = 0;
}

static void read_conn(bq_bench_t *b, conn_t *c)
{
    for (;;) {
        buf_need(&c->rb, 4096);
        size_t room = c->rb.cap - c->rb.len;
        ssize_t n = read(c->fd, c->rb.p + c->rb.len, room);
        if (n > 0) {
            int64_t now = bq_bench_now_ns();
            b->t_progress = now;
            c->rb.len += (size_t)n;
            parse_replies(b, c, now);
            /* A short read drained the socket; new data brings a new edge. */
            if ((size_t)n < room || c->state == C_DEAD)
                return;
        } else if (n == 0) {
            conn_fail(b, c, "server closed the connection");
            return;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else if (errno != EINTR) {
            conn_fail(b, c, strerror(errno));
            return;
        }
    }
}

static void finish_connect(bq_bench_t *b, conn_t *c)
{
    static const char verify[] = "list-tube-used\r\n";
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err != 0) {
        conn_fail(b, c, strerror(err));
        return;
    }
    c->state = C_SETUP;
    b->t_progress = bq_bench_now_ns();
    push_cmd(b, c, K_VERIFY, verify, sizeof(verify) - 1);
}

static void handle_event(bq_bench_t *b, conn_t *c, uint32_t events)
{
    if (c->state == C_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        finish_connect(b, c);
    }
    if (c->state != C_DEAD && (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
        read_conn(b, c);
    if (c->state == C_DEAD)
        return;
    pump(b, c);
    if (c->state != C_DEAD)
        flush(b, c);
}

static void start_connect(bq_bench_t *b, conn_t *c)
{
    c->fd = socket(b->ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        c->state = C_CONNECTING;
        b->setting_up++;
        conn_fail(b, c, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->state = C_CONNECTING;
    b->setting_up++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(b->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        conn_fail(b, c, strerror(errno));
        return;
    }
    if (connect(c->fd, b->ai->ai_addr, b->ai->ai_addrlen) < 0 && errno != EINPROGRESS)
        conn_fail(b, c, strerror(errno));
}

static void start_connects(bq_bench_t *b)
{
    while (b->setting_up < MAX_CONNECTING && b->next_connect < b->nconns)
        start_connect(b, &b->conns[b->next_connect++]);
}

/* Fails every connection still waiting for something after STALL_NS of silence. */
static void check_stall(bq_bench_t *b, int64_t now)
{
    if (now - b->t_progress < STALL_NS)
        return;
    for (int i = 0; i < b->nconns; i++) {
        conn_t *c = &b->conns[i];
        if (c->count > 0 || c->state == C_CONNECTING || c->state == C_SETUP)
            conn_fail(b, c, "no reply for 30 s");
    }
}

/* Waits for events up to deadline (or 100 ms) and handles them. */
static void loop_once(bq_bench_t *b, int64_t deadline)
{
    struct epoll_event ev[256];
    int64_t now = bq_bench_now_ns();
    int64_t wait_ns = deadline - now;
    if (wait_ns > 100000000LL)
        wait_ns = 100000000LL;
    int timeout = wait_ns <= 0 ? 0 : (int)((wait_ns + 999999) / 1000000);
    int n = epoll_wait(b->ep, ev, 256, timeout);
    for (int i = 0; i < n; i++)
        handle_event(b, ev[i].data.ptr, ev[i].events);
    if (n <= 0)
        check_stall(b, bq_bench_now_ns());
}

static int ring_size(const bq_bench_cfg_t *cfg, int watches)
{
    int need = cfg->depth < 2 ? 2 : cfg->depth;
    if (watches > 0 && need < SETUP_DEPTH)
        need = SETUP_DEPTH;
    int size = 1;
    while (size < need)
        size *= 2;
    return size;
}

static int init_conns(bq_bench_t *b)
{
    b->nconns = b->cfg.conns + (b->cfg.idle_tubes > 0);
    b->conns = calloc((size_t)b->nconns, sizeof(conn_t));
    if (b->conns == NULL)
        return -1;
    for (int i = 0; i < b->nconns; i++) {
        conn_t *c = &b->conns[i];
        c->fd = -1;
        c->holder = i == b->cfg.conns;
        c->watch_target = c->holder ? b->cfg.idle_tubes : b->cfg.tubes;
        int size = ring_size(&b->cfg, c->watch_target);
        c->ring = calloc((size_t)size, sizeof(pending_t));
        if (c->ring == NULL)
            return -1;
        c->mask = (uint32_t)size - 1;
    }
    return 0;
}

static int build_put(bq_bench_t *b)
{
    char head[64];
    int n = snprintf(head, sizeof(head), "put 1024 0 120 %zu\r\n", b->cfg.body);
    b->put_len = (size_t)n + b->cfg.body + 2;
    b->put_cmd = malloc(b->put_len);
    if (b->put_cmd == NULL)
        return -1;
    memcpy(b->put_cmd, head, (size_t)n);
    memset(b->put_cmd + n, 'x', b->cfg.body);
    memcpy(b->put_cmd + n + b->cfg.body, "\r\n", 2);
    return 0;
}

bq_bench_t *bq_bench_new(const bq_bench_cfg_t *cfg)
{
    bq_bench_t *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->cfg = *cfg;
    b->ep = epoll_create1(EPOLL_CLOEXEC);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = getaddrinfo(cfg->host, cfg->port, &hints, &b->ai);
    if (rc != 0) {
        fprintf(stderr, "bq-bench: %s:%s: %s\n", cfg->host, cfg->port, gai_strerror(rc));
        b->ai = NULL;
        bq_bench_free(b);
        return NULL;
    }
    if (b->ep < 0 || init_conns(b) < 0 || build_put(b) < 0) {
        fprintf(stderr, "bq-bench: cannot set up: %s\n", strerror(errno));
        bq_bench_free(b);
        return NULL;
    }
    return b;
}

void bq_bench_free(bq_bench_t *b)
{
    if (b == NULL)
        return;
    for (int i = 0; b->conns != NULL && i < b->nconns; i++) {
        if (b->conns[i].fd >= 0)
            close(b->conns[i].fd);
        free(b->conns[i].ring);
        free(b->conns[i].rb.p);
        free(b->conns[i].wb.p);
    }
    free(b->conns);
    free(b->put_cmd);
    if (b->ai != NULL)
        freeaddrinfo(b->ai);
    if (b->ep >= 0)
        close(b->ep);
    free(b);
}

int bq_bench_setup(bq_bench_t *b)
{
    b->t_progress = bq_bench_now_ns();
    start_connects(b);
    while (b->setting_up > 0 || b->next_connect < b->nconns)
        loop_once(b, INT64_MAX);
    int ready = 0;
    for (int i = 0; i < b->cfg.conns; i++)
        ready += b->conns[i].state == C_READY;
    return ready;
}

static void begin_phase(bq_bench_t *b, const bq_bench_phase_t *ph, bq_bench_result_t *out)
{
    memset(out, 0, sizeof(*out));
    for (int k = 0; k < BQ_CMD_KINDS; k++)
        bq_hist_init(&out->hist[k]);
    int64_t t0 = bq_bench_now_ns();
    b->res = out;
    b->w = ph->workload;
    b->stop = false;
    b->issued = b->done = 0;
    b->budget = ph->jobs > 0 ? ph->jobs : UINT64_MAX;
    b->t_end = ph->jobs > 0 ? INT64_MAX : t0 + (int64_t)(ph->duration_s * 1e9);
    b->warm_jobs = 0;
    if (ph->warmup_s >= 0) {
        b->t_warm = t0 + (int64_t)(ph->warmup_s * 1e9);
    } else {
        b->warm_jobs = (uint64_t)(ph->warmup_frac * (double)ph->jobs);
        b->t_warm = b->warm_jobs > 0 ? INT64_MAX : t0;
    }
    b->t_last = b->t_progress = t0;
    for (int i = 0; i < b->nconns; i++)
        b->conns[i].empty = false;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int bq_bench_run(bq_bench_t *b, const bq_bench_phase_t *ph, bq_bench_result_t *out)
{
    begin_phase(b, ph, out);
    int64_t t_begin = bq_bench_now_ns();
    double cpu_begin = cpu_seconds();
    int ready = 0;
    for (int i = 0; i < b->nconns; i++) {
        conn_t *c = &b->conns[i];
        if (c->state != C_READY || c->holder)
            continue;
        ready++;
        pump(b, c);
        flush(b, c);
    }
    bool deadline_hit = false;
    while (b->outstanding > 0) {
        if (!b->stop && bq_bench_now_ns() >= b->t_end) {
            b->stop = true;
            deadline_hit = true;
        }
        loop_once(b, b->stop ? INT64_MAX : b->t_end);
    }
    int64_t t_stop = deadline_hit ? b->t_end : b->t_last;
    out->seconds = t_stop > b->t_warm ? (double)(t_stop - b->t_warm) / 1e9 : 0.0;
    double wall = (double)(bq_bench_now_ns() - t_begin) / 1e9;
    out->client_cpu = wall > 0 ? (cpu_seconds() - cpu_begin) / wall : 0.0;
    b->res = NULL;
    return ready > 0 ? 0 : -1;
}

int bq_bench_hold(bq_bench_t *b, double seconds)
{
    static const char verify[] = "list-tube-used\r\n";
    int64_t deadline = bq_bench_now_ns() + (int64_t)(seconds * 1e9);
    while (bq_bench_now_ns() < deadline)
        loop_once(b, deadline);
    b->t_progress = bq_bench_now_ns();
    for (int i = 0; i < b->nconns; i++) {
        conn_t *c = &b->conns[i];
        if (c->state != C_READY)
            continue;
        push_cmd(b, c, K_VERIFY, verify, sizeof(verify) - 1);
        flush(b, c);
    }
    while (b->outstanding > 0)
        loop_once(b, INT64_MAX);
    int alive = 0;
    for (int i = 0; i < b->cfg.conns; i++)
        alive += b->conns[i].state == C_READY && b->conns[i].verified == 2;
    return alive;
}

uint64_t bq_bench_errors(const bq_bench_t *b)
{
    return b->errors;
}
