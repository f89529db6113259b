/* Leveled logging to stderr, one logfmt line per event:
 *   ts=2026-11-21T05:40:00.123Z level=info msg="listening" addr=127.0.0.1:11300
 *
 * What is shown depends on the verbosity (-V count): errors, warnings and the
 * few lifecycle lines at INFO (start-up, signals, shutdown) always; DEBUG
 * (accept/close per connection) from -V; TRACE (each command and reply line,
 * printed as level=debug) from -VV. Job bodies are never logged. */
#ifndef BQ_NODE_LOG_H
#define BQ_NODE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "replication/report.h"

typedef enum bq_log_level {
    BQ_LOG_ERROR,
    BQ_LOG_WARN,
    BQ_LOG_INFO,
    BQ_LOG_DEBUG,
    BQ_LOG_TRACE,
} bq_log_level_t;

/* State of one rate-limited message; zero-initialise it. The limit is
 * replication/report.h's, so both kinds of line count the same way. */
typedef bq_report_limit_t bq_log_limit_t;

/* Sets the verbosity: 0 shows up to INFO, 1 adds DEBUG, 2 or more TRACE. */
void bq_log_set_verbosity(int verbosity);

/* True when lines of this level are written. */
bool bq_log_enabled(bq_log_level_t level);

/* Writes one line with msg="<msg>" followed by the key=value pairs that the
 * printf format kv produces (the caller quotes values that may hold spaces). */
void bq_log(bq_log_level_t level, const char *msg, const char *kv, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes one line with only msg="<msg>". */
void bq_logm(bq_log_level_t level, const char *msg);

/* Like bq_log, but writes at most one line per second for lim; the line
 * carries suppressed=<n> when events were dropped since the previous one. */
void bq_log_limited(bq_log_limit_t *lim, bq_log_level_t level, const char *msg, const char *kv, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes one line, whatever the verbosity: msg, the pairs kv makes of ap,
 * then suppressed=<n> when n > 0. The writer behind the sink node/main.c
 * installs for replication/ (replication/report.h). */
void bq_log_write(bq_log_level_t level, const char *msg, unsigned long suppressed, const char *kv,
                  va_list ap) __attribute__((format(printf, 4, 0)));

#endif
