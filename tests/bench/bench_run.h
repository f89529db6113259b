/* The load engine of bq-bench: a set of non-blocking beanstalk connections
 * driven by one epoll loop, each keeping a configurable number of commands
 * in flight, with every reply checked and timed. */
#ifndef BQ_BENCH_RUN_H
#define BQ_BENCH_RUN_H

#include "bench_hist.h"

#include <stddef.h>
#include <stdint.h>

typedef enum bq_workload_e {
    BQ_W_PUT,     /* puts only */
    BQ_W_CYCLE,   /* put + reserve-with-timeout 0, then delete of the reserved id */
    BQ_W_RESERVE, /* reserve-with-timeout 0 + delete until the queue is empty */
    BQ_W_FILL,    /* puts of a fixed count, nothing else */
    BQ_W_IDLE     /* connections that only hold still */
} bq_workload_t;

/* Histogram slots of a result: one per measured command kind plus all together. */
enum { BQ_CMD_PUT, BQ_CMD_RESERVE, BQ_CMD_DELETE, BQ_CMD_ALL, BQ_CMD_KINDS };

typedef struct bq_bench_cfg_s {
    const char *host; /* server address (name or literal) */
    const char *port; /* server port */
    int conns;        /* worker connections */
    int depth;        /* commands in flight per worker connection */
    size_t body;      /* job body size in bytes */
    int tubes;        /* extra tubes ("tube<i>") each worker watches */
    int idle_tubes;   /* extra tubes ("xtube<i>") watched by one extra idle connection */
} bq_bench_cfg_t;

typedef struct bq_bench_phase_s {
    bq_workload_t workload;
    uint64_t jobs;      /* job budget; 0 = run for duration_s */
    double duration_s;  /* run length when jobs is 0 (includes the warm-up) */
    double warmup_s;    /* warm-up in seconds; < 0 = the first warmup_frac of the jobs */
    double warmup_frac; /* used only when warmup_s < 0 */
} bq_bench_phase_t;

typedef struct bq_bench_result_s {
    uint64_t ops;                 /* commands whose reply arrived inside the measured window */
    uint64_t jobs;                /* jobs finished inside the window (put: inserted; cycle and
                                     reserve: deleted) */
    uint64_t jobs_total;          /* jobs finished in the whole phase, warm-up included */
    uint64_t timed_out;           /* reserve workload: TIMED_OUT replies (queue empty) */
    uint64_t errors;              /* unexpected replies, failed connections, timeouts */
    double seconds;               /* length of the measured window */
    double client_cpu;            /* CPU time of this process during the phase / wall time */
    bq_hist_t hist[BQ_CMD_KINDS]; /* send -> reply latency, in the window */
} bq_bench_result_t;

typedef struct bq_bench_s bq_bench_t;

/* Returns a new engine for cfg (borrowed; its strings must outlive the engine),
 * or NULL with a message on stderr. Free with bq_bench_free(). */
bq_bench_t *bq_bench_new(const bq_bench_cfg_t *cfg);

/* Closes every connection and frees b (NULL is fine). */
void bq_bench_free(bq_bench_t *b);

/* Opens every connection, verifies each with one command and makes the
 * workers and the idle connection watch their tubes. Returns the number of
 * ready worker connections (failures are counted as errors). */
int bq_bench_setup(bq_bench_t *b);

/* Runs one phase on the ready workers and fills *out. Returns 0, or -1 when
 * the phase could not run at all (no ready connection). */
int bq_bench_run(bq_bench_t *b, const bq_bench_phase_t *ph, bq_bench_result_t *out);

/* Keeps every connection open for seconds, then verifies each one again.
 * Returns how many connections answered the second verification. */
int bq_bench_hold(bq_bench_t *b, double seconds);

/* Total errors seen by b since it was created. */
uint64_t bq_bench_errors(const bq_bench_t *b);

/* Monotonic clock in nanoseconds. */
int64_t bq_bench_now_ns(void);

#endif
