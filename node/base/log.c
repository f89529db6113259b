/* The log sink: formats each event into one buffer and writes it to stderr
 * with a single write, so lines from one process never interleave. The
 * timestamp is UTC wall time with milliseconds. */
#include "node/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024

static int verbosity;

static const char *const level_names[] = {
    [BQ_LOG_ERROR] = "error", [BQ_LOG_WARN] = "warn",   [BQ_LOG_INFO] = "info",
    [BQ_LOG_DEBUG] = "debug", [BQ_LOG_TRACE] = "debug",
};

void bq_log_set_verbosity(int v)
{
    verbosity = v;
}

bool bq_log_enabled(bq_log_level_t level)
{
    return (int)level <= (int)BQ_LOG_INFO + verbosity;
}

/* Formats the line prefix (ts, level, msg) into buf; returns its length. */
static size_t prefix(char *buf, size_t cap, bq_log_level_t level, const char *msg)
{
    struct timespec ts;
    struct tm tm;
    char date[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    int n = snprintf(buf, cap, "ts=%s.%03ldZ level=%s msg=\"%s\"", date, ts.tv_nsec / 1000000,
                     level_names[level], msg);
    return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);
}

static void emit(bq_log_level_t level, const char *msg, unsigned long suppressed, const char *kv,
                 va_list ap) __attribute__((format(printf, 4, 0)));

static void emit(bq_log_level_t level, const char *msg, unsigned long suppressed, const char *kv,
                 va_list ap)
{
    char line[LINE_MAX_BYTES];
    size_t cap = sizeof line - 1; /* room for the newline */
    size_t len = prefix(line, cap, level, msg);

    if (kv && len < cap - 1) {
        line[len++] = ' ';
        int n = vsnprintf(line + len, cap - len, kv, ap);
        if (n > 0)
            len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
        else
            len--; /* nothing followed: drop the separator */
    }
    if (suppressed && len < cap) {
        int n = snprintf(line + len, cap - len, " suppressed=%lu", suppressed);
        if (n > 0)
            len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
    line[len++] = '\n';
    /* Best effort: there is nowhere to report a failed log write. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void bq_log_write(bq_log_level_t level, const char *msg, unsigned long suppressed, const char *kv,
                  va_list ap)
{
    emit(level, msg, suppressed, kv, ap);
}

void bq_log(bq_log_level_t level, const char *msg, const char *kv, ...)
{
    if (!bq_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, kv);
    emit(level, msg, 0, kv, ap);
    va_end(ap);
}

void bq_logm(bq_log_level_t level, const char *msg)
{
    bq_log(level, msg, "%s", "");
}

void bq_log_limited(bq_log_limit_t *lim, bq_log_level_t level, const char *msg, const char *kv, ...)
{
    unsigned long suppressed;
    if (!bq_log_enabled(level) || !bq_report_limit_pass(lim, &suppressed))
        return;
    va_list ap;
    va_start(ap, kv);
    emit(level, msg, suppressed, kv, ap);
    va_end(ap);
}
