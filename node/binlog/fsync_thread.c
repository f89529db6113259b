/* The binlog's fdatasync on a thread of its own (fsync_thread.h). */
#include "node/binlog/fsync_thread.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int bq_fdatasync_timed(int fd, int64_t *ns)
{
    int64_t t0 = mono_ns();
    int r = fdatasync(fd) == 0 ? 0 : -errno;
    *ns = mono_ns() - t0;
    return r;
}

/* The thread: waits for a request, syncs, posts the result, until quit. */
static void thread_main(void *arg)
{
    bq_fsync_thread_t *t = arg;
    uv_mutex_lock(&t->lock);
    for (;;) {
        while (!t->want && !t->quit)
            uv_cond_wait(&t->cond, &t->lock); /* stop may wait on it too: broadcasts */
        if (!t->want)
            break; /* quit, nothing asked */
        int fd = t->fd;
        t->want = false;
        uv_mutex_unlock(&t->lock);
        int64_t ns;
        int res = bq_fdatasync_timed(fd, &ns);
        uv_mutex_lock(&t->lock);
        t->res = res;
        t->ns = ns;
        t->done = true;
        uv_async_send(&t->async); /* under the lock: stop cannot close it first */
        uv_cond_broadcast(&t->cond);
    }
    uv_mutex_unlock(&t->lock);
}

/* On the loop: delivers a finished sync's result (waiting for it when
 * wait is set); false when there was none. */
static bool deliver(bq_fsync_thread_t *t, bool wait)
{
    uv_mutex_lock(&t->lock);
    while (wait && !t->done)
        uv_cond_wait(&t->cond, &t->lock);
    bool done = t->done;
    int res = t->res;
    int64_t ns = t->ns;
    t->done = false;
    uv_mutex_unlock(&t->lock);
    if (!done)
        return false;
    t->running = false;
    t->done_cb(t->arg, res, ns);
    return true;
}

static void on_async(uv_async_t *a)
{
    bq_fsync_thread_t *t = a->data;
    if (t->running)
        deliver(t, false);
}

int bq_fsync_thread_init(bq_fsync_thread_t *t, uv_loop_t *loop, bq_fsync_done_cb done_cb, void *arg)
{
    *t = (bq_fsync_thread_t){.loop = loop, .done_cb = done_cb, .arg = arg, .fd = -1};
    int r = uv_mutex_init(&t->lock);
    if (r != 0)
        return r;
    if ((r = uv_cond_init(&t->cond)) != 0) {
        uv_mutex_destroy(&t->lock);
        return r;
    }
    if ((r = uv_async_init(loop, &t->async, on_async)) != 0) {
        uv_cond_destroy(&t->cond);
        uv_mutex_destroy(&t->lock);
        return r;
    }
    t->async.data = t;
    if ((r = uv_thread_create(&t->thread, thread_main, t)) != 0) {
        uv_close((uv_handle_t *)&t->async, NULL);
        uv_cond_destroy(&t->cond);
        uv_mutex_destroy(&t->lock);
        return r;
    }
    return 0;
}

int bq_fsync_thread_start(bq_fsync_thread_t *t, int fd)
{
    if (t->stopping)
        return UV_ECANCELED;
    if (t->running)
        return UV_EBUSY;
    t->running = true;
    uv_mutex_lock(&t->lock);
    t->fd = fd;
    t->want = true;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->lock);
    return 0;
}

bool bq_fsync_thread_busy(const bq_fsync_thread_t *t)
{
    return t->running;
}

void bq_fsync_thread_stop(bq_fsync_thread_t *t)
{
    if (t->stopping)
        return;
    t->stopping = true;
    if (t->running) /* as uv_run waited for a threadpool job: the fsync ends first */
        deliver(t, true);
    uv_close((uv_handle_t *)&t->async, NULL);
}

void bq_fsync_thread_join(bq_fsync_thread_t *t)
{
    uv_mutex_lock(&t->lock);
    t->quit = true;
    uv_cond_signal(&t->cond);
    uv_mutex_unlock(&t->lock);
    uv_thread_join(&t->thread);
    uv_cond_destroy(&t->cond);
    uv_mutex_destroy(&t->lock);
}
