/* The console's beanstalk client (console_client.h). The input is kept
 * whole (every reply is a slice of it for the callback) and bounded by
 * BQ_CONSOLE_MAX_REPLIES replies of at most BQ_CONSOLE_REPLY_MAX bytes. */
#include "node/admin/console_client.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run {
    struct run *prev, *next; /* in runs */
    bq_console_runs_t *runs;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
    } h;
    uv_timer_t timer;
    uv_write_t wr;
    char *out;
    char *in;
    size_t in_len, in_cap, parsed;
    bq_console_reply_t replies[BQ_CONSOLE_MAX_REPLIES];
    size_t n, want;
    int handles;
    bool finished;
    bq_console_done_fn done;
    void *arg;
} run_t;

static void handle_closed(uv_handle_t *h)
{
    run_t *r = h->data;
    if (--r->handles > 0)
        return;
    free(r->out);
    free(r->in);
    free(r);
}

/* Calls done once, then closes the connection and the timer. */
static void finish(run_t *r, int err)
{
    if (r->finished)
        return;
    r->finished = true;
    if (r->prev)
        r->prev->next = r->next;
    else
        r->runs->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->done(r->arg, err, r->replies, r->n);
    uv_close((uv_handle_t *)&r->h, handle_closed);
    uv_close((uv_handle_t *)&r->timer, handle_closed);
}

static void timed_out(uv_timer_t *t)
{
    finish(t->data, UV_ETIMEDOUT);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    run_t *r = h->data;
    (void)hint;
    size_t limit = 2 * BQ_CONSOLE_REPLY_MAX + 65536;
    if (r->in_cap - r->in_len < 16384 && r->in_cap < limit) {
        size_t cap = r->in_cap ? r->in_cap * 2 : 65536;
        char *p = realloc(r->in, cap);
        if (p) {
            r->in = p;
            r->in_cap = cap;
        }
    }
    *buf = uv_buf_init(r->in + r->in_len, (unsigned)(r->in_cap - r->in_len));
}

/* Parses the replies that came whole; finishes when all did or one is bad. */
static void parse(run_t *r)
{
    while (r->n < r->want) {
        long got =
            bq_console_parse_reply(r->in + r->parsed, r->in_len - r->parsed, &r->replies[r->n]);
        if (got == BQ_CONSOLE_REPLY_BAD) {
            finish(r, UV_EPROTO);
            return;
        }
        if (got == BQ_CONSOLE_REPLY_PARTIAL)
            break;
        r->parsed += (size_t)got;
        r->n++;
    }
    if (r->n == r->want)
        finish(r, 0);
    else if (r->in_len == r->in_cap)
        finish(r, UV_EPROTO); /* a reply larger than the buffer can hold */
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    run_t *r = s->data;
    (void)buf;
    if (r->finished)
        return;
    if (nread < 0) {
        finish(r, (int)nread);
        return;
    }
    r->in_len += (size_t)nread;
    parse(r);
}

static void on_write(uv_write_t *w, int status)
{
    run_t *r = w->data;
    if (status < 0)
        finish(r, status);
}

int bq_console_run(bq_console_runs_t *runs, uv_loop_t *loop, int fd, bool is_unix, const char *cmds,
                   size_t len, size_t nreplies, unsigned timeout_ms, bq_console_done_fn done,
                   void *arg)
{
    run_t *r = calloc(1, sizeof *r);
    char *out = r ? malloc(len) : NULL;
    if (out == NULL || nreplies == 0 || nreplies > BQ_CONSOLE_MAX_REPLIES) {
        free(r);
        free(out);
        close(fd);
        return out == NULL ? UV_ENOMEM : UV_EINVAL;
    }
    memcpy(out, cmds, len);
    *r = (run_t){.out = out, .want = nreplies, .done = done, .arg = arg, .handles = 2};
    int e = is_unix ? uv_pipe_init(loop, &r->h.pipe, 0) : uv_tcp_init(loop, &r->h.tcp);
    r->h.stream.data = r;
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    r->wr.data = r;
    if (e == 0)
        e = is_unix ? uv_pipe_open(&r->h.pipe, fd) : uv_tcp_open(&r->h.tcp, fd);
    if (e < 0) {
        close(fd);
        r->finished = true; /* done is not called: the caller hears of it here */
        uv_close((uv_handle_t *)&r->h, handle_closed);
        uv_close((uv_handle_t *)&r->timer, handle_closed);
        return e;
    }
    r->runs = runs;
    r->next = runs->head;
    if (runs->head)
        runs->head->prev = r;
    runs->head = r;
    uv_timer_start(&r->timer, timed_out, timeout_ms, 0);
    uv_buf_t b = uv_buf_init(out, (unsigned)len);
    e = uv_write(&r->wr, &r->h.stream, &b, 1, on_write);
    if (e == 0)
        e = uv_read_start(&r->h.stream, on_alloc, on_read);
    if (e < 0)
        finish(r, e); /* done is called: the caller hears of it once, there */
    return 0;
}

void bq_console_cancel_all(bq_console_runs_t *runs)
{
    while (runs->head)
        finish(runs->head, UV_ECANCELED);
}
