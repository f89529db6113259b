/* Cluster tests' helpers: a set of beanstalkd-ha nodes on loopback, each
 * with a binlog directory in the work directory of one test case, started
 * with --node-id and a --peer for every node (over TLS with certificates
 * from deploy/mkcerts, or in plaintext), stopped by pid; the lines of a
 * node's log counted and waited for; the cluster keys of `stats` parsed;
 * two binlog directories compared by starting each alone as a single
 * beanstalkd.
 *
 * A node may reach another through a port of the test's choosing (a fault
 * proxy, tests/support/faultproxy.h) instead of that node's own --peer
 * port: see bqc_cluster_t.route. Each start of a node writes a fresh log;
 * bqc_finish keeps all of them (and the binlogs) in the work directory
 * when a case failed.
 *
 * Include after <stdarg.h>, <stddef.h>, <setjmp.h> and <cmocka.h>: the
 * functions that "fail the test" use cmocka and must run on the thread
 * that runs the test (the one that started the nodes, see bqtest.h). */
#ifndef BQ_TEST_CLUSTER_H
#define BQ_TEST_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "tests/support/admin_client.h"
#include "tests/support/bqtest.h"

#define BQC_MAX_NODES 5
#define BQC_WAIT_MS 30000  /* for a cluster to reach a state (ASan builds are slow) */
#define BQC_REPLY_MS 20000 /* for one reply; a sync put waits for a standby's fsync */
#define BQC_EXIT_MS 10000  /* for a node to exit after a signal */

typedef struct bqc_node {
    bqt_server_t srv; /* pid 0 when down; srv.port is its client port */
    char name[16];
    char bdir[200]; /* its binlog directory */
    int repl_port;  /* it listens there for replication (its own --peer) */
    int admin_port; /* > 0: started with --admin-listen 127.0.0.1:<it> (set before bqc_start) */
    int starts;
} bqc_node_t;

typedef struct bqc_cluster {
    char work[160];
    char certs[160]; /* mkcerts' directory ("<name>.pem/.key", ca.pem); "": --repl-plaintext */
    size_t n;
    bqc_node_t node[BQC_MAX_NODES];
    /* route[i][j]: the port node i is given for node j in its --peer list;
     * 0 means node j's repl_port. Set before starting node i. */
    int route[BQC_MAX_NODES][BQC_MAX_NODES];
    /* "": peers are given as 127.0.0.1; else as <name>.<domain>, resolved
     * through the DNS server of BQ_TEST_DNS_SERVERS (tests/support/fakedns.h,
     * which the test sets in its environment before starting nodes). */
    char peer_domain[32];
} bqc_cluster_t;

/* The cluster keys of one `stats` reply. */
typedef struct bqc_view {
    char role[16]; /* cluster-role: primary, standby; "" when absent */
    char node[32]; /* cluster-node-id */
    char sync[32]; /* cluster-sync-state (a primary's) */
    unsigned long long epoch, last_lsn, commit_lsn;
    size_t nsb; /* cluster-standby-<name> keys (a primary's) */
    struct {
        char name[32];
        char state[24]; /* streaming, catching-up, disconnected */
        unsigned long long applied, flushed;
    } sb[BQC_MAX_NODES];
} bqc_view_t;

/* Runs mkcerts (deploy/mkcerts) to make certificates for names[0..n) and
 * for `beanstalkctl` (the operator) in a fresh temporary directory written
 * to dir; 0, or -1 with its output on
 * stderr. Remove it with bqc_remove_tree. */
int bqc_certs_make(const char *mkcerts, char *dir, size_t cap, const char *const *names, size_t n);

/* Removes dir and everything under it (no error if absent). */
void bqc_remove_tree(const char *dir);

/* Returns a new cluster of n nodes named names[0..n) (each with an empty
 * binlog directory and a free replication port) in a fresh work directory
 * $TMPDIR/<prefix>.XXXXXX, over TLS with the certificates in certs (NULL:
 * plaintext; borrowed, copied). NULL on failure. Free with bqc_finish. */
bqc_cluster_t *bqc_new(const char *prefix, size_t n, const char *const *names, const char *certs);

/* Starts node i on its binlog directory and a new client port with
 * -b, --node-id, a --peer for every node (see route), the TLS flags, the
 * admin API (see admin_port) and then extra (NULL-terminated, may be
 * NULL), after saving the log of its previous start; the previous process
 * must be down. Fails the test when it does not start listening. */
void bqc_start(bqc_cluster_t *c, size_t i, const char *const *extra);

/* True while node i's process runs. */
bool bqc_alive(bqc_cluster_t *c, size_t i);

/* Sends sig to node i and waits for it to exit; fails the test when it
 * does not exit within BQC_EXIT_MS, or when sig is SIGTERM and it does not
 * exit with status 0. Its log stays until its next start or bqc_finish. */
void bqc_signal(bqc_cluster_t *c, size_t i, int sig);

/* The index of the node called name, or -1. */
int bqc_index(const bqc_cluster_t *c, const char *name);

/* Lines of node i's current log containing a and (unless NULL) b. */
size_t bqc_log_count(bqc_cluster_t *c, size_t i, const char *a, const char *b);

/* Waits up to ms until node i's current log has at least `atleast` lines
 * with a (and b); fails the test otherwise. */
void bqc_wait_log(bqc_cluster_t *c, size_t i, const char *a, const char *b, size_t atleast, int ms);

/* Sends cmd and returns its whole reply (the line, plus the data of OK,
 * FOUND and RESERVED) as a new string (free it), or NULL when no whole
 * reply arrived within ms (timeout, EOF or a send error). Thread-safe. */
char *bqc_ask(int fd, const char *cmd, int ms);

/* Parses the cluster keys of a `stats` reply (from bqc_ask) into *v;
 * 0, or -1 when it is not an OK reply with cluster-role. */
int bqc_view_parse(const char *reply, bqc_view_t *v);

/* The index in v->sb of standby name, or -1. */
int bqc_view_standby(const bqc_view_t *v, const char *name);

/* Sends `POST target` (a path and query, e.g. "/switchover?to=n2") without
 * a body to node i's admin API as the operator (over TLS with the
 * cluster's `beanstalkctl` certificate, in plaintext without certificates);
 * returns the connection (read the answer with bqa_reply, then bqa_close
 * it), or NULL when it cannot connect or send. */
bqa_conn_t *bqc_admin_post(const bqc_cluster_t *c, size_t i, const char *target);

/* One request (method, target) to node i's admin API as the operator:
 * its status (-1: no answer within BQC_REPLY_MS) and body. */
int bqc_admin_call(const bqc_cluster_t *c, size_t i, const char *method, const char *target,
                   char *text, size_t cap);

/* Sends cmd on fx and on fy and asserts the same reply once the lines of
 * the keys in drop (comma-separated) are left out, the OK line's length
 * aside; true when the reply is not NOT_FOUND. */
bool bqc_same_reply(int fx, int fy, const char *cmd, const char *drop);

/* Starts directories dx and dy alone (single beanstalkd each) and asserts
 * that they agree: `stats-job` (age, time-left and file aside) and `peek`
 * of each of ids[0..nids), `list-tubes`, the durable counts of every tube
 * and of the whole server. Returns how many of the ids exist. */
size_t bqc_compare_dirs(const char *dx, const char *dy, const unsigned long long *ids, size_t nids);

/* Ends a case: on failure prints the tail of every node's log; appends
 * every node's current log to <work>/<name>.log, stops the nodes, and
 * removes the work directory when passed (unless BQT_KEEP_DIRS is set),
 * else prints where it is. Frees c; NULL is a no-op. */
void bqc_finish(bqc_cluster_t *c, bool passed);

#endif
