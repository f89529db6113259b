/* A client workload on a cluster of tests/support/cluster.h, recorded in a
 * tests/support/history.h history, for the fault suites (test_failover,
 * test_degraded): worker threads put jobs with unique bodies and delete one
 * in two of them, each one command at a time on its connection (the common
 * producer), through any live node (standbys proxy to the primary),
 * reconnecting to another node when a connection dies or a put is refused.
 * Also: probes (a recorded put through one node, then `stats` on that
 * connection names the primary that took it), waits for a primary, for a
 * standby streaming, for acknowledgements and for the first put
 * acknowledged after a fault (the recovery time), and the end check of a
 * snapshot against the history.
 *
 * Include after <stdarg.h>, <stddef.h>, <setjmp.h> and <cmocka.h>: the
 * functions that "fail the test" use cmocka and must run on the thread
 * that runs the test. */
#ifndef BQ_TEST_WORKLOAD_H
#define BQ_TEST_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/support/cluster.h"
#include "tests/support/history.h"

#define BQW_MAX_WORKERS 8
#define BQW_PROBE_MS 2000   /* for the reply to a probe (a paused primary never answers) */
#define BQW_PROBE_WORKER 99 /* the history's worker number of probes and direct puts */

typedef struct bqw bqw_t;

/* Returns a new workload of nworkers (<= BQW_MAX_WORKERS) on cluster c
 * (borrowed), using tube; no node is offered to the workers yet (see
 * bqw_node_up). NULL when out of memory. Free with bqw_free. */
bqw_t *bqw_new(bqc_cluster_t *c, const char *tube, size_t nworkers);

/* Stops the workers (if running) and frees w. NULL is a no-op. */
void bqw_free(bqw_t *w);

/* The history every operation is recorded in (borrowed). */
bqh_history_t *bqw_history(bqw_t *w);

/* Every acknowledged id so far (borrowed, *n of them). */
const unsigned long long *bqw_ids(bqw_t *w, size_t *n);

/* Starts (or restarts) node i with flags (bqc_start) and offers its client
 * port to the workers. */
void bqw_node_up(bqw_t *w, size_t i, const char *const *flags);

/* Offers node i's current client port to the workers (on), or not. */
void bqw_node_offer(bqw_t *w, size_t i, bool on);

/* kill -9 of node i, after the workers stop choosing it; recorded as a
 * fault (bqh_fault) in the history. */
void bqw_node_kill(bqw_t *w, size_t i);

/* Makes the odd-numbered workers (from the next bqw_start) run the richer
 * workload of tests/support/jobmix.h (tubes of their own, priorities,
 * delays, bury, release, kick, kick-job, touch, pause-tube, one command at
 * a time) instead of put and delete. */
void bqw_mix(bqw_t *w, bool on);

/* Starts the workers. */
void bqw_start(bqw_t *w);

/* Stops and joins the workers; false when one got a reply no fault
 * explains (printed). A no-op (true) when they are not running. */
bool bqw_stop(bqw_t *w);

/* True while the workers run. */
bool bqw_running(const bqw_t *w);

/* Puts acknowledged so far. */
unsigned long bqw_acked(bqw_t *w);

/* Waits until `more` puts more are acknowledged; fails the test otherwise. */
void bqw_wait_acks(bqw_t *w, unsigned long more);

/* Arms the clock of a recovery once a fault has taken effect: only puts
 * sent from now on count for bqw_recovery_wait. Returns now (ns). */
uint64_t bqw_recovery_arm(bqw_t *w);

/* Waits until a put sent since bqw_recovery_arm is acknowledged; returns
 * the time from t0 to its reply, in ms (marked in the history). what names
 * the fault for the failure message. */
long long bqw_recovery_wait(bqw_t *w, uint64_t t0, const char *what);

/* Puts a job with a unique body on fd (its tube in use), waiting at most
 * ms, records it and returns its outcome; *id from INSERTED. A reply other
 * than INSERTED or DRAINING is described in err. Thread-safe. */
bqh_outcome_t bqw_put(bqw_t *w, int fd, int ms, unsigned long long *id, char *err, size_t errlen);

/* Connects to node i's client port and uses the workload's tube. */
int bqw_client(bqw_t *w, size_t i);

/* Puts a job through node i (recorded) and, once it is acknowledged, asks
 * `stats` on that connection: the view of the primary that took it. 0 and
 * *v, or -1 (no answer within BQW_PROBE_MS, refused, node down). */
int bqw_probe(bqw_t *w, size_t i, bqc_view_t *v);

/* Waits until a put through a node other than exclude (-1: none) is
 * acknowledged by a primary other than exclude; returns its index and
 * view. Fails the test after BQC_WAIT_MS. */
size_t bqw_wait_primary(bqw_t *w, int exclude, bqc_view_t *v);

/* Waits until the primary's stats (through any live node) show node i
 * streaming (and, when caught_up, applied up to the primary's last LSN). */
void bqw_wait_streaming(bqw_t *w, size_t i, bool caught_up);

/* Waits until one primary has every other node but those in `skip` (a bit
 * per node) streaming from it; returns its index and view. */
size_t bqw_wait_settled(bqw_t *w, unsigned skip, bqc_view_t *v);

/* Stops the workers, snapshots the primary (through node p, which must be
 * it) and checks the history under rules (NULL: every acknowledgement
 * promised): fails the test on any problem or when nothing was
 * acknowledged. Fills *rep (may be NULL) and returns the jobs present. */
size_t bqw_check(bqw_t *w, size_t p, const bqh_rules_t *rules, bqh_report_t *rep);

#endif
