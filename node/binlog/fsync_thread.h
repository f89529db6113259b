/* The binlog's fdatasync on a thread of its own. libuv's threadpool is
 * shared by whatever the process queues there (uv_getaddrinfo lookups did,
 * before replication/resolve.c): four jobs that hang (a resolver that never
 * answers, 60 s and more) would hold every pool thread, so an fsync queued
 * behind them, and every reply waiting for it, would wait as long. One
 * fdatasync at a time; its result is delivered on the loop thread.
 *
 * Ownership: the caller owns the struct (embedded, not allocated here). The
 * order is init, any number of start/callback pairs, stop (on the loop),
 * and join once the loop has run its close callbacks. */
#ifndef BQ_NODE_FSYNC_THREAD_H
#define BQ_NODE_FSYNC_THREAD_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

/* Called on the loop thread when the fdatasync started by
 * bq_fsync_thread_start is over: res 0 or -errno, ns how long it took. */
typedef void (*bq_fsync_done_cb)(void *arg, int res, int64_t ns);

typedef struct bq_fsync_thread {
    uv_loop_t *loop;
    uv_async_t async; /* wakes the loop when a sync is over */
    uv_thread_t thread;
    uv_mutex_t lock;
    uv_cond_t cond;
    bq_fsync_done_cb done_cb;
    void *arg;
    bool running;  /* loop thread: a sync was started and its callback has not run */
    bool stopping; /* loop thread: stop was called */
    /* under lock */
    int fd;
    bool want, done, quit;
    int res;
    int64_t ns;
} bq_fsync_thread_t;

/* fdatasync(fd), timed into *ns (monotonic); 0 or -errno. Any thread. */
int bq_fdatasync_timed(int fd, int64_t *ns);

/* Starts t's thread and its async handle on loop; done_cb(arg, ...) gets
 * each result. 0, or a negative libuv error (nothing to stop then). */
int bq_fsync_thread_init(bq_fsync_thread_t *t, uv_loop_t *loop, bq_fsync_done_cb done_cb,
                         void *arg);

/* Starts an fdatasync of fd (which must stay open until the callback). One
 * at a time: 0, or UV_EBUSY while one runs, UV_ECANCELED after stop. */
int bq_fsync_thread_start(bq_fsync_thread_t *t, int fd);

/* True while a started fdatasync has not delivered its callback. */
bool bq_fsync_thread_busy(const bq_fsync_thread_t *t);

/* On the loop thread: no more starts; waits for a sync in flight and
 * delivers its callback, then closes the async handle (so that uv_walk
 * finds nothing of t to close). */
void bq_fsync_thread_stop(bq_fsync_thread_t *t);

/* After stop, once the loop has run the close callbacks: ends and joins the
 * thread (waiting for an fdatasync in progress) and frees its lock. */
void bq_fsync_thread_join(bq_fsync_thread_t *t);

#endif
