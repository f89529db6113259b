/* Reads CLOCK_MONOTONIC (live timers) and CLOCK_REALTIME (timestamps that
 * outlive the process) into the engine's bq_now_t. */
#include "node/base/clock.h"

#include <time.h>

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * BQ_NS_PER_S + ts.tv_nsec;
}

bq_now_t bq_clock_now(void)
{
    bq_now_t now = {.mono = read_ns(CLOCK_MONOTONIC), .wall = read_ns(CLOCK_REALTIME)};
    return now;
}
