/* How replication/ reports what happens on its links that no hook carries
 * (a connection closed, a TLS peer refused, a vote not answered): one
 * event is one line, a message and logfmt key=value pairs, written through
 * a sink the process installs once at start-up (node/main.c installs
 * node/base/log.c's writer). Without a sink nothing is written. Events a hook
 * already reports (a primary found or lost, a resync downloaded) and
 * results that are return codes (bq_feeder_listen) are logged by the
 * caller instead. replication/ never includes node/. */
#ifndef BQ_REPL_REPORT_H
#define BQ_REPL_REPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum bq_report_level {
    BQ_REPORT_ERROR,
    BQ_REPORT_WARN,
    BQ_REPORT_INFO,
    BQ_REPORT_DEBUG,
} bq_report_level_t;

/* State of one rate-limited event; zero-initialise it. */
typedef struct bq_report_limit {
    int64_t last_ns;          /* monotonic time of the last line written */
    unsigned long suppressed; /* events dropped since then */
} bq_report_limit_t;

/* Where the lines go (the process's logger). Both are called on the loop's
 * thread only. */
typedef struct bq_report_sink {
    /* True when lines of level are written: nothing is formatted, and no
     * rate limit counts, otherwise. */
    bool (*enabled)(bq_report_level_t level);
    /* Writes one line: msg, then the pairs the printf format kv makes of
     * ap, then suppressed=<n> when n > 0 (events dropped before it). */
    void (*write)(bq_report_level_t level, const char *msg, unsigned long suppressed,
                  const char *kv, va_list ap) __attribute__((format(printf, 4, 0)));
} bq_report_sink_t;

/* Installs sink (borrowed; NULL: nothing is written). Call once before the
 * loop runs; it is not synchronised with other threads. */
void bq_report_set_sink(const bq_report_sink_t *sink);

/* True when a line of level would be written. */
bool bq_report_enabled(bq_report_level_t level);

/* Writes one line with msg and the key=value pairs that the printf format
 * kv makes (the caller quotes values that may hold spaces). */
void bq_report(bq_report_level_t level, const char *msg, const char *kv, ...)
    __attribute__((format(printf, 3, 4)));

/* The one-line-a-second decision for lim on the monotonic clock (shared
 * with node/base/log.c's limited lines): true when a line may be written
 * now, with the events dropped since the last one in *suppressed (lim's
 * count then starts again); false counts this event as dropped. */
bool bq_report_limit_pass(bq_report_limit_t *lim, unsigned long *suppressed);

/* Like bq_report, but at most one line per second for lim: for events a
 * peer or a stranger can cause at will. The line carries suppressed=<n>
 * when events were dropped since the previous one. */
void bq_report_limited(bq_report_limit_t *lim, bq_report_level_t level, const char *msg,
                       const char *kv, ...) __attribute__((format(printf, 4, 5)));

#endif
