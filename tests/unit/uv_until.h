/* A libuv loop run until a condition holds, with a deadline, for unit
 * tests of modules that do their I/O on a loop (links, canvass). */
#ifndef BQ_TESTS_UV_UNTIL_H
#define BQ_TESTS_UV_UNTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* The deadline timer of the uvt_run_until in progress (NULL between runs):
 * a condition that walks the loop's handles leaves it out. */
static uv_timer_t *uvt_deadline;

static inline void uvt_expire(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs loop until cond(arg) holds; fails the test after ms, naming what. */
static inline void uvt_run_until(uv_loop_t *loop, bool (*cond)(void *arg), void *arg, uint64_t ms,
                                 const char *what)
{
    bool expired = false;
    uv_timer_t deadline;
    uv_timer_init(loop, &deadline);
    deadline.data = &expired;
    uv_timer_start(&deadline, uvt_expire, ms, 0);
    uvt_deadline = &deadline;
    while (!cond(arg) && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    bool held = cond(arg);
    uvt_deadline = NULL;
    if (!held)
        fail_msg("timed out waiting until %s", what);
}

#endif
