/* The richer workload of the fault suites: a worker that does one command
 * at a time on its connection, with every operation recorded in a
 * tests/support/history.h history so that the checker can follow each
 * job's state: puts in BQM_TUBES tubes of its own ("<prefix>-m<id>-<k>",
 * which a snapshot of <prefix> reads) with random priorities and delays,
 * reserve-with-timeout 0 then bury, release (new priority, a delay),
 * touch or delete of the job it holds, deletes and kick-jobs of its own
 * jobs, `kick` of a tube and pause-tube. Its tubes are its own, so no other
 * client changes its jobs. Used by tests/integration/test_binlog_crash.c
 * (the -f 0 scenarios) and tests/support/workload.c (bqw_mix). */
#ifndef BQ_TEST_JOBMIX_H
#define BQ_TEST_JOBMIX_H

#include <stddef.h>
#include <stdint.h>

#include "tests/support/history.h"

#define BQM_TUBES 3
#define BQM_JOBS 32   /* own jobs it remembers; it deletes some when full */
#define BQM_KICK 1000 /* kick's bound: more than a worker's jobs in a tube */
#define BQM_TTR 120

typedef enum bqm_status {
    BQM_OK,      /* go on */
    BQM_DEAD,    /* the connection died (outcome unknown, recorded) */
    BQM_STUCK,   /* no reply within the deadline (outcome unknown, recorded) */
    BQM_REFUSED, /* DRAINING or OUT_OF_MEMORY (recorded): try another connection */
    BQM_WRONG,   /* a reply no fault explains (in error; recorded as refused) */
} bqm_status_t;

typedef struct bqm_worker {
    bqh_history_t *h; /* borrowed */
    int id;           /* its worker number in the history */
    char tube[BQM_TUBES][BQH_TUBE_LEN];
    char tag[24]; /* first part of its bodies: unique per history */
    uint64_t rng;
    unsigned long seq;
    uint64_t jobs[BQM_JOBS]; /* its acknowledged jobs, oldest first */
    uint8_t job_tube[BQM_JOBS];
    size_t njobs;
    uint64_t held;     /* the job it reserved on this connection, 0: none */
    int used;          /* the tube in use on this connection, -1: default */
    uint64_t acked_id; /* the put acknowledged by the last step, 0: none */
    unsigned long ops; /* commands sent */
    char error[200];
} bqm_worker_t;

/* Sets up k as worker id of h with tubes "<prefix>-m<id>-<k>", bodies
 * starting with tag, and a PRNG seeded with seed. */
void bqm_init(bqm_worker_t *k, bqh_history_t *h, int id, const char *prefix, const char *tag,
              uint64_t seed);

/* Sets the tag of k's next bodies (e.g. a new round's). */
void bqm_set_tag(bqm_worker_t *k, const char *tag);

/* Starts a session on the new connection fd: watches k's tubes and
 * ignores default, each reply within ms. */
bqm_status_t bqm_connected(bqm_worker_t *k, int fd, int ms);

/* Sends one command chosen at random on fd and waits at most ms for its
 * reply, recording it. Anything but BQM_OK ends the session. */
bqm_status_t bqm_step(bqm_worker_t *k, int fd, int ms);

#endif
