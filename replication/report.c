/* The report sink (see report.h): one installed sink, and the one-line-a-
 * second limit kept per event on the monotonic clock (node/base/log.c's
 * limited lines use the same decision). */
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

bool bq_report_limit_pass(bq_report_limit_t *lim, unsigned long *suppressed)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (lim->last_ns && now - lim->last_ns < 1000000000LL) {
        lim->suppressed++;
        return false;
    }
    lim->last_ns = now;
    *suppressed = lim->suppressed;
    lim->suppressed = 0;
    return true;
}

void bq_report_limited(bq_report_limit_t *lim, bq_report_level_t level, const char *msg,
                       const char *kv, ...)
{
    unsigned long suppressed;
    if (!bq_report_enabled(level) || !bq_report_limit_pass(lim, &suppressed))
        return;
    va_list ap;
    va_start(ap, kv);
    sink->write(level, msg, suppressed, kv, ap);
    va_end(ap);
}
