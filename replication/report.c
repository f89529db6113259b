/* The report sink (see report.h): one installed sink, and the one-line-a-
 * second limit kept per event on the monotonic clock, as node/base/log.c keeps
 * its own. */
#include "replication/report.h"

#include <stddef.h>
#include <time.h>

static const bq_report_sink_t *sink;

void bq_report_set_sink(const bq_report_sink_t *s)
{
    sink = s;
}

bool bq_report_enabled(bq_report_level_t level)
{
    return sink != NULL && sink->enabled(level);
}

void bq_report(bq_report_level_t level, const char *msg, const char *kv, ...)
{
    if (!bq_report_enabled(level))
        return;
    va_list ap;
    va_start(ap, kv);
    sink->write(level, msg, 0, kv, ap);
    va_end(ap);
}

void bq_report_limited(bq_report_limit_t *lim, bq_report_level_t level, const char *msg,
                       const char *kv, ...)
{
    struct timespec ts;
    if (!bq_report_enabled(level))
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (lim->last_ns && now - lim->last_ns < 1000000000LL) {
        lim->suppressed++;
        return;
    }
    lim->last_ns = now;
    va_list ap;
    va_start(ap, kv);
    sink->write(level, msg, lim->suppressed, kv, ap);
    va_end(ap);
    lim->suppressed = 0;
}
