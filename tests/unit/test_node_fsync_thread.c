/* The binlog's fsync thread (node/binlog/fsync_thread.h): results arrive on the
 * loop, one sync at a time, stop waits for a sync in flight, and an fsync
 * completes while every libuv threadpool thread is held (as by name
 * lookups that never return). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "node/binlog/fsync_thread.h"
#include "tests/unit/uv_until.h"

#define DEADLINE_MS 10000
#define POOL_JOBS 16 /* more than the threadpool's threads (4 unless UV_THREADPOOL_SIZE) */

typedef struct fx {
    uv_loop_t loop;
    bq_fsync_thread_t t;
    char path[64];
    int fd;
    int calls, res;
    int64_t ns;
    /* the threadpool held */
    uv_sem_t release;
    uv_work_t jobs[POOL_JOBS];
    int jobs_done;
    bool holding;   /* the jobs wait for release_pool */
    bool sem_ready; /* release was initialised */
} fx_t;

/* Lets the threadpool jobs of the test go. */
static void release_pool(fx_t *f)
{
    if (!f->holding)
        return;
    f->holding = false;
    for (int i = 0; i < POOL_JOBS; i++)
        uv_sem_post(&f->release);
}

static void on_done(void *arg, int res, int64_t ns)
{
    fx_t *f = arg;
    f->calls++;
    f->res = res;
    f->ns = ns;
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f || uv_loop_init(&f->loop) != 0)
        return -1;
    snprintf(f->path, sizeof f->path, "/tmp/bq-fsync.XXXXXX");
    f->fd = mkstemp(f->path);
    if (f->fd < 0 || write(f->fd, "abc", 3) != 3)
        return -1;
    if (bq_fsync_thread_init(&f->t, &f->loop, on_done, f) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    release_pool(f);
    bq_fsync_thread_stop(&f->t);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    if (f->sem_ready)
        uv_sem_destroy(&f->release);
    bq_fsync_thread_join(&f->t);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    close(f->fd);
    unlink(f->path);
    free(f);
    return 0;
}

typedef struct count {
    const int *n;
    int want;
} count_t;

static bool reached(void *arg)
{
    const count_t *c = arg;
    return *c->n >= c->want;
}

/* Runs the loop until *n reaches want; fails the test after DEADLINE_MS. */
static void run_until(fx_t *f, const int *n, int want, const char *what)
{
    count_t c = {n, want};
    uvt_run_until(&f->loop, reached, &c, DEADLINE_MS, what);
}

static void sync_result_arrives_on_the_loop(void **state)
{
    fx_t *f = *state;
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), 0);
    assert_true(bq_fsync_thread_busy(&f->t));
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), UV_EBUSY); /* one at a time */
    assert_int_equal(f->calls, 0);                                   /* never from start itself */
    run_until(f, &f->calls, 1, "the sync's callback");
    assert_int_equal(f->res, 0);
    assert_true(f->ns >= 0);
    assert_false(bq_fsync_thread_busy(&f->t));
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), 0); /* and again */
    run_until(f, &f->calls, 2, "the second sync's callback");
    assert_int_equal(f->res, 0);
}

static void sync_error_is_reported(void **state)
{
    fx_t *f = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(bq_fsync_thread_start(&f->t, p[0]), 0); /* fdatasync of a pipe: EINVAL */
    run_until(f, &f->calls, 1, "the sync's callback");
    assert_int_equal(f->res, -EINVAL);
    close(p[0]);
    close(p[1]);
}

/* A threadpool job that holds its thread until the test lets it go. */
static void hold_thread(uv_work_t *w)
{
    fx_t *f = w->data;
    uv_sem_wait(&f->release);
}

static void held_job_done(uv_work_t *w, int status)
{
    fx_t *f = w->data;
    assert_int_equal(status, 0);
    f->jobs_done++;
}

static void sync_does_not_wait_for_the_threadpool(void **state)
{
    fx_t *f = *state;
    assert_int_equal(uv_sem_init(&f->release, 0), 0);
    f->sem_ready = true;
    for (int i = 0; i < POOL_JOBS; i++) {
        f->jobs[i].data = f;
        assert_int_equal(uv_queue_work(&f->loop, &f->jobs[i], hold_thread, held_job_done), 0);
    }
    f->holding = true; /* teardown lets them go if this fails */
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), 0);
    /* Behind the pool, it would wait for the jobs, which wait for the test. */
    run_until(f, &f->calls, 1, "an fsync with every pool thread held");
    assert_int_equal(f->jobs_done, 0);
    assert_int_equal(f->res, 0);
    release_pool(f);
    run_until(f, &f->jobs_done, POOL_JOBS, "the pool's jobs");
}

static void stop_delivers_a_sync_in_flight(void **state)
{
    fx_t *f = *state;
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), 0);
    bq_fsync_thread_stop(&f->t);
    assert_int_equal(f->calls, 1); /* waited for, and delivered */
    assert_int_equal(f->res, 0);
    assert_int_equal(bq_fsync_thread_start(&f->t, f->fd), UV_ECANCELED);
    bq_fsync_thread_stop(&f->t); /* twice is harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sync_result_arrives_on_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(sync_error_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(sync_does_not_wait_for_the_threadpool, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_delivers_a_sync_in_flight, setup, teardown),
    };
    return cmocka_run_group_tests_name("node_fsync_thread", tests, NULL, NULL);
}
