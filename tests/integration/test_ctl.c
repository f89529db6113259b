/* Integration tests of beanstalkctl ($BQ_CTL): the real binary runs against
 * fake admin servers in this process - one thread each, on a blocking
 * loopback socket, serving canned answers for /status, /metrics, /promote
 * and /switchover and recording every request line. They cover the status
 * table and --json, the exit status when a node is dead, promote with and
 * without --force and when the node refuses, switchover finding the primary
 * (and refusing with none or two), handoff (the standby it picks, dry runs,
 * the exit status of each answer, nothing sent by a standby or a primary
 * without a streaming standby), metrics passed through unchanged, the
 * usage exit status, and certs: files that `openssl verify` accepts for
 * their purpose, modes, no overwriting - and mutual TLS through fake
 * servers that use those certificates, and others made with the openssl
 * command: the server's certificate must name the node (ID=HOST:PORT, the
 * URL's DNS name, or at an IP address the client certificate's one node
 * id) in a DNS subjectAltName; another node's certificate, beanstalkctl's
 * own, one with only a CN and a wildcard are refused before any request
 * is sent, and an IP address without ID is refused before connecting
 * (exit 2) unless the client certificate is a node's. Last, real
 * clusters ($BQ_SERVER): three nodes over TLS with automatic failover,
 * driven as the operator (ID=127.0.0.1:PORT, beanstalkctl's certificate:
 * status, promote refused, switchover) and handed off by each node itself
 * (its own certificate, --node 127.0.0.1:PORT): on a standby and as a dry
 * run it changes nothing; on the primary it hands over to a standby that
 * then leads with every acknowledged job; and two nodes in plaintext. */
#define _GNU_SOURCE /* SOCK_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cJSON.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tests/support/bqtest.h"
#include "tests/support/cluster.h"

#define RUN_DEADLINE_MS 30000
#define MAX_SEEN 16

extern char **environ;

static const char metrics_text[] =
    "# HELP bq_up 1 when the node serves.\n# TYPE bq_up gauge\nbq_up 1\nno final newline";

static const char primary_doc[] =
    "{\"node_id\":\"n1\",\"role\":\"primary\",\"epoch\":5,\"last_lsn\":123,\"commit_lsn\":120,"
    "\"primary\":\"n1\",\"ready\":true,\"sync\":{\"standbys\":1,\"state\":\"sync\",\"in_sync\":1},"
    "\"standbys\":[{\"node_id\":\"n2\",\"state\":\"streaming\",\"written_lsn\":121,"
    "\"flushed_lsn\":121,\"applied_lsn\":120,\"lag_records\":2,\"lag_bytes\":300,"
    "\"lag_seconds\":0.004}]}";

static const char standby_doc[] =
    "{\"node_id\":\"n2\",\"role\":\"standby\",\"epoch\":5,\"last_lsn\":121,\"commit_lsn\":120,"
    "\"primary\":\"n1\",\"ready\":true}";

typedef struct fake {
    int lfd;
    int port;
    pthread_t thread;
    SSL_CTX *tls;        /* NULL: plaintext */
    const char *status;  /* body of GET /status */
    int promote_code;    /* HTTP status of POST /promote */
    int switchover_code; /* HTTP status of POST /switchover */
    pthread_mutex_t mu;
    char seen[MAX_SEEN][256]; /* request lines, "POST /promote?force=1" */
    int nseen;
    int accepted;      /* connections accepted */
    char peer_cn[128]; /* TLS: the client certificate's CN */
} fake_t;

typedef struct run {
    int code;
    char *out; /* stdout */
    char *err; /* stderr */
} run_t;

/* ---- the fake admin server ---- */

static int conn_read(SSL *ssl, int fd, char *buf, size_t n)
{
    return ssl ? SSL_read(ssl, buf, (int)n) : (int)recv(fd, buf, n, 0);
}

static void conn_write(SSL *ssl, int fd, const char *buf, size_t n)
{
    if (ssl)
        SSL_write(ssl, buf, (int)n);
    else if (send(fd, buf, n, MSG_NOSIGNAL) < 0)
        return;
}

/* The answer to one request line: its HTTP status and body. */
static int answer(fake_t *f, const char *method, const char *target, const char **body)
{
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    int code = 200;
    pthread_mutex_lock(&f->mu);
    if (get && strcmp(target, "/status") == 0) {
        *body = f->status;
    } else if (get && strcmp(target, "/metrics") == 0) {
        *body = metrics_text;
    } else if (post && strncmp(target, "/promote", 8) == 0) {
        code = f->promote_code;
        *body = code == 200 ? "promoted" : "not a standby";
    } else if (post && strncmp(target, "/switchover?to=", 15) == 0) {
        code = f->switchover_code;
        *body = code == 200   ? "switchover done\n"
                : code == 409 ? "a switchover is already in progress"
                              : "the target did not catch up in time; writes resumed here";
    } else {
        code = 404;
        *body = "not found\n";
    }
    pthread_mutex_unlock(&f->mu);
    return code;
}

/* Changes the fake's answers between runs. */
static void fake_set(fake_t *f, const char *status, int promote_code)
{
    pthread_mutex_lock(&f->mu);
    f->status = status;
    f->promote_code = promote_code;
    pthread_mutex_unlock(&f->mu);
}

static void fake_set_switchover(fake_t *f, int code)
{
    pthread_mutex_lock(&f->mu);
    f->switchover_code = code;
    pthread_mutex_unlock(&f->mu);
}

static void record(fake_t *f, const char *line, SSL *ssl)
{
    pthread_mutex_lock(&f->mu);
    if (f->nseen < MAX_SEEN)
        snprintf(f->seen[f->nseen++], sizeof f->seen[0], "%.255s", line);
    X509 *peer = ssl ? SSL_get1_peer_certificate(ssl) : NULL;
    if (peer)
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, f->peer_cn,
                                  sizeof f->peer_cn);
    X509_free(peer);
    pthread_mutex_unlock(&f->mu);
}

static void serve(fake_t *f, int fd, SSL *ssl)
{
    char req[8192], method[16], target[1024], head[512];
    size_t len = 0;
    int n;
    while (len < sizeof req - 1 && (n = conn_read(ssl, fd, req + len, sizeof req - 1 - len)) > 0) {
        len += (size_t)n;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[len] = '\0';
    if (sscanf(req, "%15s %1023s", method, target) != 2)
        return;
    char line[1100];
    snprintf(line, sizeof line, "%s %s", method, target);
    record(f, line, ssl);
    const char *body;
    int code = answer(f, method, target, &body);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      code, strlen(body));
    conn_write(ssl, fd, head, (size_t)hl);
    conn_write(ssl, fd, body, strlen(body));
}

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0)
            return NULL; /* shut down by fake_stop */
        pthread_mutex_lock(&f->mu);
        f->accepted++;
        pthread_mutex_unlock(&f->mu);
        struct timeval tv = {5, 0}; /* a stuck client cannot hang the test */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL *ssl = f->tls ? SSL_new(f->tls) : NULL;
        if (f->tls == NULL || (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_accept(ssl) == 1))
            serve(f, fd, ssl);
        if (ssl)
            SSL_shutdown(ssl);
        SSL_free(ssl);
        ERR_clear_error();
        close(fd);
    }
}

static void fake_start(fake_t *f, const char *status, SSL_CTX *tls)
{
    memset(f, 0, sizeof *f);
    f->status = status;
    f->promote_code = 200;
    f->switchover_code = 200;
    f->tls = tls;
    pthread_mutex_init(&f->mu, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lfd, 16), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake_t *f)
{
    shutdown(f->lfd, SHUT_RDWR); /* wakes accept() with an error */
    pthread_join(f->thread, NULL);
    close(f->lfd);
    pthread_mutex_destroy(&f->mu);
}

/* Connections the fake accepted so far. */
static int accepted(fake_t *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->accepted;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* Request line number i the fake received, or NULL. */
static const char *seen(fake_t *f, int i)
{
    pthread_mutex_lock(&f->mu);
    const char *line = i < f->nseen ? f->seen[i] : NULL;
    pthread_mutex_unlock(&f->mu);
    return line;
}

/* ---- running beanstalkctl ---- */

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* Runs binary with args (NULL-terminated) to its exit, stdout and stderr
 * apart; fails the test when it takes longer than RUN_DEADLINE_MS. */
static run_t run_bin(const char *binary, const char *const *args)
{
    char dir[256], out[300], err[300];
    char *argv[32] = {(char *)binary};
    int n = 1;
    while (args[n - 1] && n < 31) {
        argv[n] = (char *)args[n - 1];
        n++;
    }
    argv[n] = NULL;
    assert_int_equal(bqt_mkdtemp(dir, sizeof dir, "bqctl-run"), 0);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, binary, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    long long deadline = bqt_now_ms() + RUN_DEADLINE_MS;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (bqt_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s did not exit within %d ms", binary, RUN_DEADLINE_MS);
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    assert_true(WIFEXITED(status));
    run_t r = {.code = WEXITSTATUS(status), .out = slurp(out), .err = slurp(err)};
    unlink(out);
    unlink(err);
    rmdir(dir);
    return r;
}

#define CTL(...) run_bin(getenv("BQ_CTL"), (const char *const[]){__VA_ARGS__, NULL})

static void run_free(run_t *r)
{
    free(r->out);
    free(r->err);
}

/* A TLS identity: a certificate, its key and the CA to trust. */
typedef struct ident {
    char cert[512], key[512], ca[512];
} ident_t;

/* DIR/NAME.pem, DIR/NAME.key and DIR/ca.pem. */
static ident_t ident(const char *dir, const char *name)
{
    ident_t id;
    snprintf(id.cert, sizeof id.cert, "%s/%s.pem", dir, name);
    snprintf(id.key, sizeof id.key, "%s/%s.key", dir, name);
    snprintf(id.ca, sizeof id.ca, "%s/ca.pem", dir);
    return id;
}

/* `beanstalkctl --tls-* (as id) ARGS...`. */
#define CTL_AS(id, ...)                                                                            \
    CTL("--tls-cert", (id).cert, "--tls-key", (id).key, "--tls-ca", (id).ca, __VA_ARGS__)

static char *nodes_arg(char *buf, size_t cap, const fake_t *a, const fake_t *b)
{
    if (b)
        snprintf(buf, cap, "127.0.0.1:%d,http://127.0.0.1:%d", a->port, b->port);
    else
        snprintf(buf, cap, "127.0.0.1:%d", a->port);
    return buf;
}

/* ---- status ---- */

static void status_prints_one_row_per_node(void **state)
{
    (void)state;
    fake_t p, s;
    char nodes[128], row[256];
    fake_start(&p, primary_doc, NULL);
    fake_start(&s, standby_doc, NULL);
    run_t r = CTL("--nodes", nodes_arg(nodes, sizeof nodes, &p, &s), "status");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "NODE  ROLE     EPOCH  LAST-LSN  COMMIT-LSN  PRIMARY  SYNC"));
    snprintf(row, sizeof row,
             "\nn1    primary  5      123       120         n1       sync (1 in sync, 1 needed)  "
             "-             yes    http://127.0.0.1:%d\n",
             p.port);
    assert_non_null(strstr(r.out, row));
    snprintf(row, sizeof row,
             "\nn2    standby  5      121       120         n1       -                           "
             "2             yes    http://127.0.0.1:%d\n",
             s.port);
    assert_non_null(strstr(r.out, row));
    assert_non_null(strstr(r.out, "\nstandbys of n1:\n  NAME  STATE      WRITTEN"));
    assert_non_null(strstr(r.out, "\n  n2    streaming  121      121      120      2            "
                                  "300        0.004\n"));
    assert_string_equal(seen(&p, 0), "GET /status");
    assert_string_equal(seen(&s, 0), "GET /status");
    run_free(&r);
    fake_stop(&p);
    fake_stop(&s);
}

static void status_json_carries_the_documents(void **state)
{
    (void)state;
    fake_t p, s;
    char nodes[128], url[64];
    fake_start(&p, primary_doc, NULL);
    fake_start(&s, standby_doc, NULL);
    run_t r = CTL("status", "--json", "--nodes", nodes_arg(nodes, sizeof nodes, &p, &s));
    assert_int_equal(r.code, 0);
    cJSON *doc = cJSON_Parse(r.out);
    assert_non_null(doc);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", p.port);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "url")->valuestring, url);
    cJSON *expect = cJSON_Parse(primary_doc);
    assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "status"), expect, 1));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "error")));
    cJSON *role =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "status"), "role");
    assert_string_equal(role->valuestring, "standby");
    cJSON_Delete(expect);
    cJSON_Delete(doc);
    run_free(&r);
    fake_stop(&p);
    fake_stop(&s);
}

static void status_with_a_dead_node_exits_1(void **state)
{
    (void)state;
    fake_t p;
    char nodes[128], row[128];
    fake_start(&p, primary_doc, NULL);
    int dead = bqt_free_port();
    snprintf(nodes, sizeof nodes, "127.0.0.1:%d,127.0.0.1:%d", p.port, dead);
    run_t r = CTL("--nodes", nodes, "--timeout", "5000", "status");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\nn1    primary"));
    snprintf(row, sizeof row, "\nhttp://127.0.0.1:%d  unreachable: ", dead);
    assert_non_null(strstr(r.out, row));
    run_free(&r);
    r = CTL("--nodes", nodes, "status", "--json");
    assert_int_equal(r.code, 1);
    cJSON *doc = cJSON_Parse(r.out);
    assert_non_null(doc);
    cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "nodes"), 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b, "status")));
    const char *error = cJSON_GetObjectItemCaseSensitive(b, "error")->valuestring;
    assert_memory_equal(error, "unreachable: ", 13);
    cJSON_Delete(doc);
    run_free(&r);
    fake_stop(&p);
}

/* ---- promote, switchover, metrics ---- */

static void promote_sends_force_only_when_asked(void **state)
{
    (void)state;
    fake_t s;
    char nodes[128];
    fake_start(&s, standby_doc, NULL);
    nodes_arg(nodes, sizeof nodes, &s, NULL);
    run_t r = CTL("--nodes", nodes, "promote", "--force");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "promoted\n");
    assert_string_equal(seen(&s, 0), "POST /promote?force=1");
    run_free(&r);
    r = CTL("--nodes", nodes, "promote");
    assert_int_equal(r.code, 0);
    assert_string_equal(seen(&s, 1), "POST /promote");
    run_free(&r);
    fake_set(&s, standby_doc, 409);
    r = CTL("promote", "--node", nodes);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "HTTP 409: not a standby"));
    assert_string_equal(seen(&s, 2), "POST /promote");
    run_free(&r);
    fake_stop(&s);
}

static void promote_with_several_nodes_is_a_usage_error(void **state)
{
    (void)state;
    fake_t p, s;
    char nodes[128];
    fake_start(&p, primary_doc, NULL);
    fake_start(&s, standby_doc, NULL);
    run_t r = CTL("--nodes", nodes_arg(nodes, sizeof nodes, &p, &s), "promote");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "choose one with --node"));
    assert_null(seen(&p, 0));
    assert_null(seen(&s, 0));
    run_free(&r);
    r = CTL("bogus");
    assert_int_equal(r.code, 2);
    run_free(&r);
    fake_stop(&p);
    fake_stop(&s);
}

static void switchover_goes_to_the_primary(void **state)
{
    (void)state;
    fake_t p, s;
    char nodes[128];
    fake_start(&p, primary_doc, NULL);
    fake_start(&s, standby_doc, NULL);
    run_t r = CTL("--nodes", nodes_arg(nodes, sizeof nodes, &s, &p), "switchover", "--to", "n2");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "switchover done\n");
    assert_string_equal(seen(&p, 0), "GET /status");
    assert_string_equal(seen(&p, 1), "POST /switchover?to=n2");
    assert_string_equal(seen(&s, 0), "GET /status");
    assert_null(seen(&s, 1));
    run_free(&r);
    fake_stop(&p);
    fake_stop(&s);
}

static void switchover_without_one_primary_fails(void **state)
{
    (void)state;
    fake_t a, b;
    char nodes[128];
    fake_start(&a, standby_doc, NULL);
    fake_start(&b, standby_doc, NULL);
    run_t r = CTL("--nodes", nodes_arg(nodes, sizeof nodes, &a, &b), "switchover", "--to", "n2");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "no primary"));
    assert_null(seen(&a, 1));
    assert_null(seen(&b, 1));
    run_free(&r);
    fake_set(&a, primary_doc, 200);
    fake_set(&b, primary_doc, 200);
    r = CTL("--nodes", nodes, "switchover", "--to", "n2");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "2 nodes say they are primary"));
    assert_null(seen(&a, 2));
    assert_null(seen(&b, 2));
    run_free(&r);
    fake_stop(&a);
    fake_stop(&b);
}

/* ---- handoff ---- */

/* A primary with two streaming standbys (n3 has flushed more) and a witness. */
static const char handoff_primary_doc[] =
    "{\"node_id\":\"n1\",\"role\":\"primary\",\"epoch\":5,\"last_lsn\":123,"
    "\"standbys\":[{\"node_id\":\"n2\",\"state\":\"streaming\",\"flushed_lsn\":121,"
    "\"lag_records\":2},{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":123,"
    "\"lag_records\":0},{\"node_id\":\"w\",\"state\":\"witness\",\"flushed_lsn\":123}]}";

/* A primary whose only standbys cannot take over. */
static const char lonely_primary_doc[] =
    "{\"node_id\":\"n1\",\"role\":\"primary\",\"epoch\":5,\"last_lsn\":123,"
    "\"standbys\":[{\"node_id\":\"n2\",\"state\":\"catching-up\",\"flushed_lsn\":100},"
    "{\"node_id\":\"w\",\"state\":\"witness\"}]}";

static void handoff_switches_over_to_the_best_standby(void **state)
{
    (void)state;
    fake_t p;
    char node[64], want[256];
    fake_start(&p, handoff_primary_doc, NULL);
    nodes_arg(node, sizeof node, &p, NULL);
    run_t r = CTL("handoff", "--node", node, "--dry-run");
    assert_int_equal(r.code, 0);
    snprintf(want, sizeof want,
             "would hand off to n3 (flushed LSN 123, lag 0 records): POST "
             "http://127.0.0.1:%d/switchover?to=n3, waiting up to 30 s\n",
             p.port);
    assert_string_equal(r.out, want);
    assert_string_equal(seen(&p, 0), "GET /status");
    assert_null(seen(&p, 1)); /* a dry run sends nothing else */
    run_free(&r);
    r = CTL("--nodes", node, "handoff", "--timeout", "20");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "handed off to n3\n");
    assert_string_equal(r.err, "");
    assert_string_equal(seen(&p, 1), "GET /status");
    assert_string_equal(seen(&p, 2), "POST /switchover?to=n3");
    run_free(&r);
    fake_set_switchover(&p, 409); /* refused: nothing changed */
    r = CTL("--nodes", node, "handoff");
    assert_int_equal(r.code, 3);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "switchover to n3 refused: HTTP 409: a switchover is already"));
    run_free(&r);
    fake_set_switchover(&p, 504); /* the node gave up: a failure */
    r = CTL("--nodes", node, "handoff");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "switchover to n3 failed: HTTP 504: the target did not catch"));
    assert_string_equal(seen(&p, 6), "POST /switchover?to=n3");
    run_free(&r);
    fake_stop(&p);
}

static void handoff_elsewhere_changes_nothing(void **state)
{
    (void)state;
    fake_t s;
    char node[64], dead[64];
    fake_start(&s, standby_doc, NULL);
    nodes_arg(node, sizeof node, &s, NULL);
    run_t r = CTL("--nodes", node, "handoff");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "not the primary: nothing to hand off (role standby)\n");
    assert_string_equal(seen(&s, 0), "GET /status");
    assert_null(seen(&s, 1));
    run_free(&r);
    fake_set(&s, lonely_primary_doc, 200);
    r = CTL("--nodes", node, "handoff");
    assert_int_equal(r.code, 3);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, ": no streaming standby to hand off to (n2: catching-up, w: "
                                  "witness); nothing done\n"));
    assert_null(seen(&s, 2)); /* only the two GET /status */
    run_free(&r);
    snprintf(dead, sizeof dead, "127.0.0.1:%d", bqt_free_port());
    r = CTL("--nodes", dead, "handoff", "--dry-run");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, ": unreachable: "));
    run_free(&r);
    fake_stop(&s);
}

/* ---- handoff on a real cluster ---- */

#define NJOBS 20

static const char *const g_names[] = {"n1", "n2", "n3"};
static const char *const auto_flags[] = {"--role=standby", "--failover=auto", "-f", "0", NULL};

typedef struct real {
    bqc_cluster_t *c;
    bool passed;
    char tmp[256];   /* "": plaintext; else it holds certs/ */
    char certs[300]; /* `beanstalkctl certs` for the nodes: one DNS name each */
} real_t;

/* A cluster of the first n of g_names in $TMPDIR/<prefix>.XXXXXX; over
 * TLS with certificates made by `beanstalkctl certs` when tls. */
static int real_new(void **state, const char *prefix, size_t n, bool tls)
{
    real_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return -1;
    if (tls) {
        if (bqt_mkdtemp(t->tmp, sizeof t->tmp, "bqctl-certs") != 0) {
            free(t);
            return -1;
        }
        snprintf(t->certs, sizeof t->certs, "%s/certs", t->tmp);
        run_t r = CTL("certs", "--nodes", "n1,n2,n3", "--out", t->certs);
        int code = r.code;
        run_free(&r);
        if (code != 0) {
            bqc_remove_tree(t->tmp);
            free(t);
            return -1;
        }
    }
    if ((t->c = bqc_new(prefix, n, g_names, tls ? t->certs : NULL)) == NULL) {
        if (tls)
            bqc_remove_tree(t->tmp);
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int real_setup(void **state)
{
    return real_new(state, "bqctl-handoff", 3, true);
}

static int real_pair_setup(void **state)
{
    return real_new(state, "bqctl-pair", 2, false);
}

/* Stops the nodes even when the case failed half-way. */
static int real_teardown(void **state)
{
    real_t *t = *state;
    bqc_finish(t->c, t->passed);
    if (t->tmp[0])
        bqc_remove_tree(t->tmp);
    free(t);
    return 0;
}

typedef struct leader {
    bqc_cluster_t *c;
    int want;  /* the primary waited for; -1: any */
    int index; /* out: the primary, -1 until found */
    bqc_view_t v;
} leader_t;

/* Some node's `stats` comes from a primary (w->want, unless -1) that lists
 * both other nodes as streaming; its index and view go to w. */
static bool settled(void *arg)
{
    leader_t *w = arg;
    for (size_t i = 0; i < w->c->n; i++) {
        int fd = bqt_connect(w->c->node[i].srv.port);
        char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", BQT_DEADLINE_MS) : NULL;
        bool ok = r && bqc_view_parse(r, &w->v) == 0 && strcmp(w->v.role, "primary") == 0;
        free(r);
        if (fd >= 0)
            close(fd);
        int k = ok ? bqc_index(w->c, w->v.node) : -1;
        if (w->want >= 0 && k != w->want)
            k = -1;
        for (size_t j = 0; k >= 0 && j < w->c->n; j++) {
            int sb = (int)j == k ? 0 : bqc_view_standby(&w->v, w->c->node[j].name);
            if (sb < 0 || ((int)j != k && strcmp(w->v.sb[sb].state, "streaming") != 0))
                k = -1;
        }
        if (k >= 0) {
            w->index = k;
            return true;
        }
    }
    return false;
}

/* Waits until node want (-1: any) leads with both others streaming. */
static size_t wait_settled(bqc_cluster_t *c, int want, bqc_view_t *v)
{
    leader_t w = {.c = c, .want = want, .index = -1};
    if (!bqt_wait_until(settled, &w, BQC_WAIT_MS))
        fail_msg("no primary%s%s with both standbys streaming within %d ms", want >= 0 ? " " : "",
                 want >= 0 ? c->node[want].name : "", BQC_WAIT_MS);
    *v = w.v;
    return (size_t)w.index;
}

static char *admin_url(char *buf, size_t cap, const bqc_cluster_t *c, size_t i)
{
    snprintf(buf, cap, "http://127.0.0.1:%d", c->node[i].admin_port);
    return buf;
}

/* Node i's admin API as ID=127.0.0.1:PORT (https with TLS files). */
static char *admin_id(char *buf, size_t cap, const bqc_cluster_t *c, size_t i)
{
    snprintf(buf, cap, "%s=127.0.0.1:%d", c->node[i].name, c->node[i].admin_port);
    return buf;
}

/* Node i's admin API as 127.0.0.1:PORT: for its own certificate. */
static char *admin_ip(char *buf, size_t cap, const bqc_cluster_t *c, size_t i)
{
    snprintf(buf, cap, "127.0.0.1:%d", c->node[i].admin_port);
    return buf;
}

/* Puts NJOBS jobs through the primary p, each acknowledged; their ids in ids. */
static void put_jobs(bqc_cluster_t *c, size_t p, unsigned long long *ids)
{
    int fd = bqt_connect(c->node[p].srv.port);
    assert_true(fd >= 0);
    for (int k = 0; k < NJOBS; k++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "put 0 0 120 6\r\njob-%02d\r\n", k);
        char *r = bqc_ask(fd, cmd, BQC_REPLY_MS);
        if (r == NULL || sscanf(r, "INSERTED %llu", &ids[k]) != 1)
            fail_msg("put %d through %s: %s", k, c->node[p].name, r ? r : "no reply");
        free(r);
    }
    close(fd);
}

/* Every job of ids is on node i, with its body. */
static void expect_jobs(bqc_cluster_t *c, size_t i, const unsigned long long *ids)
{
    int fd = bqt_connect(c->node[i].srv.port);
    assert_true(fd >= 0);
    for (int k = 0; k < NJOBS; k++) {
        char cmd[64], want[64];
        snprintf(cmd, sizeof cmd, "peek %llu\r\n", ids[k]);
        snprintf(want, sizeof want, "FOUND %llu 6\r\njob-%02d\r\n", ids[k], k);
        char *r = bqc_ask(fd, cmd, BQC_REPLY_MS);
        if (r == NULL || strcmp(r, want) != 0)
            fail_msg("job %llu on %s: %s", ids[k], c->node[i].name, r ? r : "no reply");
        free(r);
    }
    close(fd);
}

/* On three nodes with automatic failover and TLS, as the operator
 * (beanstalkctl's certificate, each node given as ID=127.0.0.1:PORT):
 * `status` shows one primary (*p) and two standbys, and answers plaintext
 * GETs on loopback too; `promote` on a standby is refused while the
 * primary lives; `switchover --to` a standby makes it the primary of the
 * next epoch (*p and *v updated). */
static void three_nodes_status_promote_switchover(const real_t *t, size_t *p, bqc_view_t *v)
{
    bqc_cluster_t *c = t->c;
    ident_t ctl = ident(t->certs, "beanstalkctl");
    char nodes[256], url[64];
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        k += (size_t)snprintf(nodes + k, sizeof nodes - k, "%s%s", i ? "," : "",
                              admin_id(url, sizeof url, c, i));
    run_t r = CTL_AS(ctl, "--nodes", nodes, "status");
    if (r.code != 0)
        fail_msg("status over TLS: exit %d: %s%s", r.code, r.out, r.err);
    size_t primaries = 0, standbys = 0;
    for (const char *q = r.out; (q = strstr(q, "primary")) != NULL; q++)
        primaries++;
    for (const char *q = r.out; (q = strstr(q, "standby")) != NULL; q++)
        standbys++;
    if (!strstr(r.out, c->node[*p].name) || primaries < 1 || standbys < 2)
        fail_msg("status: %s", r.out);
    run_free(&r);
    r = CTL("--nodes", admin_url(url, sizeof url, c, *p), "status"); /* plaintext GET */
    if (r.code != 0 || !strstr(r.out, "primary"))
        fail_msg("status in plaintext: exit %d: %s%s", r.code, r.out, r.err);
    run_free(&r);

    size_t s = (*p + 1) % c->n;
    r = CTL_AS(ctl, "promote", "--node", admin_id(url, sizeof url, c, s));
    if (r.code == 0 || !strstr(r.err, "alive"))
        fail_msg("promote on a standby with the primary alive: exit %d: %s%s", r.code, r.out,
                 r.err);
    run_free(&r);

    r = CTL_AS(ctl, "--nodes", nodes, "switchover", "--to", c->node[s].name);
    if (r.code != 0)
        fail_msg("switchover --to %s: exit %d: %s%s", c->node[s].name, r.code, r.out, r.err);
    run_free(&r);
    bqc_view_t after;
    wait_settled(c, (int)s, &after);
    assert_true(after.epoch > v->epoch);
    *p = s;
    *v = after;
}

/* Three nodes with automatic failover and TLS, each handoff run as the
 * node itself (its own certificate, --node 127.0.0.1:PORT): on a standby
 * it changes nothing; a dry run on the primary names a standby and changes
 * nothing; on the primary it makes that standby the primary of the next
 * epoch, with every acknowledged job. */
static void handoff_on_a_real_cluster(void **state)
{
    real_t *t = *state;
    bqc_cluster_t *c = t->c;
    unsigned long long ids[NJOBS];
    char url[64], want[128];
    bqc_view_t before, after;
    for (size_t i = 0; i < c->n; i++) {
        c->node[i].admin_port = bqt_free_port();
        bqc_start(c, i, auto_flags);
    }
    size_t p = wait_settled(c, -1, &before);
    put_jobs(c, p, ids);
    three_nodes_status_promote_switchover(t, &p, &before);

    size_t s = (p + 1) % c->n;
    ident_t self = ident(t->certs, c->node[s].name);
    run_t r = CTL_AS(self, "handoff", "--node", admin_ip(url, sizeof url, c, s));
    if (r.code != 0)
        fail_msg("handoff on a standby: exit %d: %s%s", r.code, r.out, r.err);
    assert_string_equal(r.out, "not the primary: nothing to hand off (role standby)\n");
    run_free(&r);
    self = ident(t->certs, c->node[p].name);
    r = CTL_AS(self, "--nodes", admin_ip(url, sizeof url, c, p), "handoff", "--dry-run");
    assert_int_equal(r.code, 0);
    assert_memory_equal(r.out, "would hand off to n", 19);
    run_free(&r);
    wait_settled(c, (int)p, &after); /* nothing changed */
    assert_int_equal(after.epoch, before.epoch);

    r = CTL_AS(self, "--nodes", admin_ip(url, sizeof url, c, p), "handoff", "--timeout", "25");
    if (r.code != 0)
        fail_msg("handoff on the primary: exit %d, stdout \"%s\", stderr \"%s\"", r.code, r.out,
                 r.err);
    char target[32] = "";
    assert_int_equal(sscanf(r.out, "handed off to %31s", target), 1);
    int q = bqc_index(c, target);
    assert_true(q >= 0 && (size_t)q != p);
    snprintf(want, sizeof want, "handed off to %s\n", target);
    assert_string_equal(r.out, want);
    run_free(&r);
    wait_settled(c, q, &after); /* the old primary follows it */
    assert_true(after.epoch > before.epoch);
    expect_jobs(c, (size_t)q, ids);
    t->passed = true;
}

typedef struct promote_try {
    const char *url;
    run_t r;
} promote_try_t;

/* Runs `beanstalkctl promote`; done unless refused because the primary
 * still looks alive. */
static bool promote_tried(void *arg)
{
    promote_try_t *t = arg;
    run_free(&t->r);
    t->r = CTL("promote", "--node", t->url);
    return t->r.code == 0 || !strstr(t->r.err, "alive");
}

/* Runs `beanstalkctl promote --node url` until it is no longer refused
 * because the primary still looks alive; returns the last run. */
static run_t promote_until_taken(const char *url)
{
    promote_try_t t = {.url = url};
    bqt_wait_until(promote_tried, &t, BQC_WAIT_MS);
    return t.r;
}

typedef struct commit_wait {
    const char *url;
    unsigned long long want;
} commit_wait_t;

/* `beanstalkctl status --json` of the standby shows the primary's commit
 * LSN at least w->want (from the primary's last heartbeat). */
static bool commit_heard(void *arg)
{
    commit_wait_t *w = arg;
    run_t r = CTL("--nodes", w->url, "status", "--json");
    const char *k = r.code == 0 ? strstr(r.out, "\"primary_commit_lsn\":") : NULL;
    unsigned long long lsn = 0;
    bool ok = k && sscanf(k, "\"primary_commit_lsn\":%llu", &lsn) == 1 && lsn >= w->want;
    run_free(&r);
    return ok;
}

/* Two nodes with manual failover, as an operator drives them: `status`
 * shows n1 primary and n2 streaming; `switchover --to n2` moves the role;
 * `switchover --to n1` brings it back; n1 is killed and `promote` on n2
 * (refused while n1's silence is shorter than the timeout) makes n2 the
 * primary; n1, started again with its old --role=primary, finds n2 and
 * follows it; every acknowledged job is on n2. */
static void status_switchover_promote_on_a_real_cluster(void **state)
{
    real_t *t = *state;
    bqc_cluster_t *c = t->c;
    static const char *const primary[] = {"--role=primary", "-f",   "0",
                                          "--repl-timeout", "1000", NULL};
    static const char *const standby[] = {"--role=standby", "-f",   "0",
                                          "--repl-timeout", "1000", NULL};
    unsigned long long ids[NJOBS];
    char u1[64], u2[64], nodes[160];
    bqc_view_t v;
    for (size_t i = 0; i < c->n; i++)
        c->node[i].admin_port = bqt_free_port();
    bqc_start(c, 0, primary);
    bqc_start(c, 1, standby);
    wait_settled(c, 0, &v);
    put_jobs(c, 0, ids);
    snprintf(nodes, sizeof nodes, "%s,%s", admin_url(u1, sizeof u1, c, 0),
             admin_url(u2, sizeof u2, c, 1));

    run_t r = CTL("--nodes", nodes, "status");
    assert_int_equal(r.code, 0);
    if (!strstr(r.out, "n1") || !strstr(r.out, "primary") || !strstr(r.out, "n2") ||
        !strstr(r.out, "standby"))
        fail_msg("status: %s", r.out);
    run_free(&r);

    r = CTL("--nodes", nodes, "switchover", "--to", "n2");
    if (r.code != 0)
        fail_msg("switchover --to n2: exit %d: %s%s", r.code, r.out, r.err);
    run_free(&r);
    wait_settled(c, 1, &v);
    r = CTL("--nodes", nodes, "switchover", "--to", "n1");
    if (r.code != 0)
        fail_msg("switchover --to n1: exit %d: %s%s", r.code, r.out, r.err);
    run_free(&r);
    wait_settled(c, 0, &v);

    /* n2 must have heard, in a heartbeat, that n1 is in sync mode with
     * every acknowledged write at or below a commit point n2 holds. */
    commit_wait_t cw = {u2, v.commit_lsn};
    if (!bqt_wait_until(commit_heard, &cw, BQC_WAIT_MS))
        fail_msg("n2's status never showed primary_commit_lsn %llu", v.commit_lsn);
    bqc_signal(c, 0, SIGKILL);
    r = promote_until_taken(u2);
    if (r.code != 0)
        fail_msg("promote on n2: exit %d: %s%s", r.code, r.out, r.err);
    run_free(&r);
    bqc_wait_log(c, 1, "role change in place", "role=primary", 1, BQC_WAIT_MS);
    bqc_start(c, 0, primary);
    bqc_wait_log(c, 0, "cluster start", "n2 leads", 1, BQC_WAIT_MS);
    wait_settled(c, 1, &v);
    expect_jobs(c, 1, ids);
    t->passed = true;
}

static void metrics_are_printed_unchanged(void **state)
{
    (void)state;
    fake_t p;
    char nodes[128];
    fake_start(&p, primary_doc, NULL);
    run_t r = CTL("metrics", "--node", nodes_arg(nodes, sizeof nodes, &p, NULL));
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, metrics_text);
    assert_string_equal(seen(&p, 0), "GET /metrics");
    run_free(&r);
    fake_stop(&p);
}

/* ---- certs ---- */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void path(char *buf, const char *dir, const char *file)
{
    snprintf(buf, 512, "%s/%s", dir, file);
}

/* Runs the openssl command; shows its output when its exit status is not want. */
static int openssl(int want, const char *const *args)
{
    run_t r = run_bin("/usr/bin/openssl", args);
    int code = r.code;
    if ((code == 0) != (want == 0))
        print_message("openssl: %s%s", r.out, r.err);
    run_free(&r);
    return code;
}

static void make_certs(const char *dir)
{
    run_t r = CTL("certs", "--nodes", "n1,n2", "--out", dir);
    assert_int_equal(r.code, 0);
    run_free(&r);
}

static void certs_verify_with_their_ca(void **state)
{
    (void)state;
    char tmp[256], dir[300], ca[512], n1[512], n2[512], cl[512], file[512];
    assert_int_equal(bqt_mkdtemp(tmp, sizeof tmp, "bqctl-certs"), 0);
    snprintf(dir, sizeof dir, "%s/certs", tmp); /* made by certs */
    make_certs(dir);
    path(ca, dir, "ca.pem");
    path(n1, dir, "n1.pem");
    path(n2, dir, "n2.pem");
    path(cl, dir, "beanstalkctl.pem");
    assert_int_equal(openssl(0, (const char *const[]){"verify", "-CAfile", ca, n1, n2, cl, NULL}),
                     0);
    assert_int_equal(openssl(0, (const char *const[]){"verify", "-purpose", "sslserver", "-CAfile",
                                                      ca, n1, NULL}),
                     0);
    assert_int_equal(openssl(0, (const char *const[]){"verify", "-purpose", "sslclient", "-CAfile",
                                                      ca, n1, cl, NULL}),
                     0);
    assert_int_not_equal(openssl(1, (const char *const[]){"verify", "-purpose", "sslserver",
                                                          "-CAfile", ca, cl, NULL}),
                         0);
    run_t r =
        run_bin("/usr/bin/openssl", (const char *const[]){"x509", "-noout", "-subject", "-ext",
                                                          "subjectAltName", "-in", n2, NULL});
    assert_non_null(strstr(r.out, "CN = n2"));
    assert_non_null(strstr(r.out, "DNS:n2"));
    run_free(&r);
    const char *keys[] = {"ca.key", "n1.key", "n2.key", "beanstalkctl.key"};
    for (size_t k = 0; k < 4; k++) {
        struct stat st;
        path(file, dir, keys[k]);
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
    }
    /* Each key belongs to its certificate: the same public key comes out of both. */
    path(file, dir, "n1.key");
    r = run_bin("/usr/bin/openssl",
                (const char *const[]){"x509", "-noout", "-pubkey", "-in", n1, NULL});
    run_t k =
        run_bin("/usr/bin/openssl", (const char *const[]){"pkey", "-pubout", "-in", file, NULL});
    assert_int_equal(r.code, 0);
    assert_int_equal(k.code, 0);
    assert_string_equal(r.out, k.out);
    run_free(&r);
    run_free(&k);
    rm_rf(tmp);
}

static void certs_never_overwrite(void **state)
{
    (void)state;
    char dir[256], ca[512], n3key[512];
    assert_int_equal(bqt_mkdtemp(dir, sizeof dir, "bqctl-certs"), 0);
    make_certs(dir);
    path(ca, dir, "ca.pem");
    char *before = slurp(ca);
    run_t r = CTL("certs", "--nodes", "n1,n2", "--out", dir);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "exists; not overwriting"));
    run_free(&r);
    char *after = slurp(ca);
    assert_string_equal(before, after);
    free(before);
    free(after);
    /* A new node alone, in the same directory: ca.pem exists, so nothing at all is written. */
    r = CTL("certs", "--nodes", "n3", "--out", dir);
    assert_int_equal(r.code, 1);
    run_free(&r);
    path(n3key, dir, "n3.key");
    assert_int_equal(access(n3key, F_OK), -1);
    rm_rf(dir);
}

/* ---- mutual TLS ---- */

/* A fake server's TLS: it presents DIR/NAME.pem and requires a client
 * certificate from DIR/ca.pem. */
static SSL_CTX *server_tls(const char *dir, const char *name)
{
    ident_t id = ident(dir, name);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, id.cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, id.key, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_load_verify_locations(ctx, id.ca, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return ctx;
}

/* DIR/NAME.pem and DIR/NAME.key made with the openssl command: subject
 * /CN=cn, signed by DIR/ca.key, with the extensions ext (lines of an
 * openssl extfile: with or without a subjectAltName). */
static void openssl_leaf(const char *dir, const char *name, const char *cn, const char *ext)
{
    static int serial = 1000;
    ident_t id = ident(dir, name);
    char csr[512], extfile[512], cakey[512], file[128], subj[128], ser[16];
    snprintf(file, sizeof file, "%s.csr", name);
    path(csr, dir, file);
    snprintf(file, sizeof file, "%s.ext", name);
    path(extfile, dir, file);
    path(cakey, dir, "ca.key");
    snprintf(subj, sizeof subj, "/CN=%s", cn);
    snprintf(ser, sizeof ser, "%d", serial++);
    FILE *fp = fopen(extfile, "w");
    assert_non_null(fp);
    fputs(ext, fp);
    fclose(fp);
    assert_int_equal(openssl(0, (const char *const[]){"ecparam", "-name", "prime256v1", "-genkey",
                                                      "-noout", "-out", id.key, NULL}),
                     0);
    assert_int_equal(openssl(0, (const char *const[]){"req", "-new", "-key", id.key, "-subj", subj,
                                                      "-out", csr, NULL}),
                     0);
    assert_int_equal(
        openssl(0, (const char *const[]){"x509", "-req", "-in", csr, "-CA", id.ca, "-CAkey", cakey,
                                         "-set_serial", ser, "-days", "2", "-sha256", "-extfile",
                                         extfile, "-out", id.cert, NULL}),
        0);
}

#define LEAF_EXT                                                                                   \
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"                     \
    "extendedKeyUsage=serverAuth,clientAuth\n"

/* A TLS case: `beanstalkctl certs --nodes n1,n2` in dir, and a fake
 * server presenting one of the certificates of dir. */
typedef struct tls_case {
    char dir[256];
    ident_t ctl; /* beanstalkctl's */
    SSL_CTX *ctx;
    fake_t fake;
    char node[64]; /* the fake's 127.0.0.1:PORT */
} tls_case_t;

static void tls_case_certs(tls_case_t *t)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(bqt_mkdtemp(t->dir, sizeof t->dir, "bqctl-tls"), 0);
    make_certs(t->dir);
    t->ctl = ident(t->dir, "beanstalkctl");
}

/* The fake serves doc over TLS with dir/name.pem. */
static void tls_case_serve(tls_case_t *t, const char *doc, const char *name)
{
    t->ctx = server_tls(t->dir, name);
    fake_start(&t->fake, doc, t->ctx);
    snprintf(t->node, sizeof t->node, "127.0.0.1:%d", t->fake.port);
}

static void tls_case_unserve(tls_case_t *t)
{
    fake_stop(&t->fake);
    SSL_CTX_free(t->ctx);
    t->ctx = NULL;
}

/* Certificates, and a fake serving doc with dir/name.pem. */
static void tls_case_start(tls_case_t *t, const char *doc, const char *name)
{
    tls_case_certs(t);
    tls_case_serve(t, doc, name);
}

static void tls_case_end(tls_case_t *t)
{
    if (t->ctx)
        tls_case_unserve(t);
    rm_rf(t->dir);
}

/* The client certificate's CN as the fake saw it. */
static void expect_client(fake_t *f, const char *cn)
{
    pthread_mutex_lock(&f->mu);
    assert_string_equal(f->peer_cn, cn);
    pthread_mutex_unlock(&f->mu);
}

static void status_over_mutual_tls(void **state)
{
    (void)state;
    char other[256], id_node[80];
    tls_case_t t;
    tls_case_start(&t, primary_doc, "n1");
    assert_int_equal(bqt_mkdtemp(other, sizeof other, "bqctl-tls"), 0);
    make_certs(other);
    ident_t stranger = ident(other, "beanstalkctl");
    snprintf(id_node, sizeof id_node, "n1=%s", t.node); /* https:// with --tls-cert */
    run_t r = CTL_AS(t.ctl, "--nodes", id_node, "status");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nn1    primary"));
    assert_non_null(strstr(r.out, "https://127.0.0.1:")); /* where it connected */
    assert_string_equal(seen(&t.fake, 0), "GET /status");
    expect_client(&t.fake, "beanstalkctl");
    run_free(&r);
    /* The same from the environment alone. */
    setenv("BEANSTALKCTL_NODES", id_node, 1);
    setenv("BEANSTALKCTL_TLS_CERT", t.ctl.cert, 1);
    setenv("BEANSTALKCTL_TLS_KEY", t.ctl.key, 1);
    setenv("BEANSTALKCTL_TLS_CA", t.ctl.ca, 1);
    r = CTL("status");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nn1    primary"));
    assert_string_equal(seen(&t.fake, 1), "GET /status");
    run_free(&r);
    /* A flag wins over its variable: a server certificate from another CA
     * is not trusted. */
    r = CTL("--tls-ca", stranger.ca, "status");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "unreachable: "));
    assert_null(seen(&t.fake, 2));
    run_free(&r);
    unsetenv("BEANSTALKCTL_NODES");
    unsetenv("BEANSTALKCTL_TLS_CERT");
    unsetenv("BEANSTALKCTL_TLS_KEY");
    unsetenv("BEANSTALKCTL_TLS_CA");
    tls_case_end(&t);
    rm_rf(other);
}

/* Asks t's fake for its status as beanstalkctl at nodes, expecting a
 * refusal of its certificate for want (the name it had to carry): exit 1,
 * an unreachable row saying so, no request sent. */
static void expect_refused(tls_case_t *t, const char *nodes, const char *want)
{
    char msg[128];
    run_t r = CTL_AS(t->ctl, "--nodes", nodes, "status");
    snprintf(msg, sizeof msg, "(want a certificate of the cluster CA naming %s)\n", want);
    if (r.code != 1 || !strstr(r.out, "  unreachable: SSL certificate problem: ") ||
        !strstr(r.out, msg))
        fail_msg("%s: exit %d, stdout \"%s\", stderr \"%s\"", nodes, r.code, r.out, r.err);
    assert_null(seen(&t->fake, 0));
    run_free(&r);
}

/* n1's certificate answers for n1 and nothing else: not for n2=, not for
 * the DNS name localhost; a promote meant for n2 is never sent to it. */
static void tls_refuses_another_nodes_certificate(void **state)
{
    (void)state;
    char nodes[128];
    tls_case_t t;
    tls_case_start(&t, standby_doc, "n1");
    snprintf(nodes, sizeof nodes, "n2=%s", t.node);
    expect_refused(&t, nodes, "n2");
    snprintf(nodes, sizeof nodes, "https://localhost:%d", t.fake.port);
    expect_refused(&t, nodes, "localhost");
    snprintf(nodes, sizeof nodes, "n2=%s", t.node);
    run_t r = CTL_AS(t.ctl, "promote", "--node", nodes);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "naming n2)"));
    assert_string_equal(r.out, "");
    assert_null(seen(&t.fake, 0));
    run_free(&r);
    snprintf(nodes, sizeof nodes, "n1=%s", t.node); /* the right name: served */
    r = CTL_AS(t.ctl, "promote", "--node", nodes);
    assert_int_equal(r.code, 0);
    assert_string_equal(seen(&t.fake, 0), "POST /promote");
    run_free(&r);
    tls_case_end(&t);
}

/* beanstalkctl's own certificate (a client's, naming beanstalkctl) is no
 * node's, whatever the node is called: neither the one `certs` makes
 * (clientAuth only) nor one that may also serve (deploy/mkcerts makes
 * those) - its name is not the node's. */
static void tls_refuses_a_client_certificate_as_server(void **state)
{
    (void)state;
    char nodes[128];
    tls_case_t t;
    tls_case_start(&t, primary_doc, "beanstalkctl");
    snprintf(nodes, sizeof nodes, "n1=%s", t.node);
    expect_refused(&t, nodes, "n1");
    run_t r = CTL_AS(t.ctl, "--nodes", nodes, "switchover", "--to", "n2");
    assert_int_equal(r.code, 1);
    assert_null(seen(&t.fake, 0));
    run_free(&r);
    tls_case_unserve(&t);
    openssl_leaf(t.dir, "ctl-serves", "beanstalkctl", LEAF_EXT "subjectAltName=DNS:beanstalkctl\n");
    tls_case_serve(&t, primary_doc, "ctl-serves");
    snprintf(nodes, sizeof nodes, "n1=%s", t.node);
    expect_refused(&t, nodes, "n1");
    tls_case_end(&t);
}

/* Certificates of the cluster CA made with the openssl command: one naming
 * n1 in a DNS subjectAltName is n1; one with only the CN n1, or with the
 * wildcard *.example for n1.example, is not. */
static void tls_refuses_cn_only_and_wildcard_certificates(void **state)
{
    (void)state;
    static const struct {
        const char *file, *cn, *san, *id; /* san NULL: none */
        bool ok;
    } cases[] = {
        {"san-n1", "n1", "DNS:n1", "n1", true},
        {"cn-only", "n1", NULL, "n1", false},
        {"wildcard", "n1.example", "DNS:*.example", "n1.example", false},
    };
    char nodes[128], ext[512];
    tls_case_t t;
    tls_case_certs(&t);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(ext, sizeof ext, LEAF_EXT "%s%s\n", cases[k].san ? "subjectAltName=" : "",
                 cases[k].san ? cases[k].san : "");
        openssl_leaf(t.dir, cases[k].file, cases[k].cn, ext);
        tls_case_serve(&t, primary_doc, cases[k].file);
        snprintf(nodes, sizeof nodes, "%s=%s", cases[k].id, t.node);
        if (cases[k].ok) {
            run_t r = CTL_AS(t.ctl, "--nodes", nodes, "status");
            if (r.code != 0)
                fail_msg("%s: exit %d: %s%s", cases[k].file, r.code, r.out, r.err);
            assert_string_equal(seen(&t.fake, 0), "GET /status");
            run_free(&r);
        } else {
            expect_refused(&t, nodes, cases[k].id);
        }
        tls_case_unserve(&t);
    }
    tls_case_end(&t);
}

/* At an IP address without ID: with beanstalkctl's certificate (or one
 * naming two names) it is refused before connecting, exit 2, asking for
 * ID=HOST:PORT; with a node's own certificate that node is expected - n1
 * hands itself off, n2's certificate does not make n1 answer for n2. */
static void tls_at_an_ip_address_needs_an_id_or_the_nodes_own_certificate(void **state)
{
    (void)state;
    char want[256], url[80];
    tls_case_t t;
    tls_case_certs(&t);
    openssl_leaf(t.dir, "two", "n1", LEAF_EXT "subjectAltName=DNS:n1,DNS:localhost,IP:127.0.0.1\n");
    tls_case_serve(&t, handoff_primary_doc, "n1");
    ident_t n1 = ident(t.dir, "n1"), n2 = ident(t.dir, "n2"), two = ident(t.dir, "two");
    snprintf(url, sizeof url, "https://%s", t.node);
    run_t r = CTL_AS(t.ctl, "--nodes", t.node, "status");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    snprintf(want, sizeof want, "write the node as ID=HOST:PORT (--nodes ID=%s, or --node ID=%s)\n",
             t.node, t.node);
    if (!strstr(r.err, "the client certificate names beanstalkctl, not a node: ") ||
        !strstr(r.err, want))
        fail_msg("stderr: %s", r.err);
    run_free(&r);
    r = CTL_AS(t.ctl, "promote", "--node", url); /* a URL too */
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, want));
    run_free(&r);
    r = CTL_AS(two, "handoff", "--node", t.node);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "names n1, localhost (more than one name)"));
    run_free(&r);
    assert_int_equal(accepted(&t.fake), 0); /* refused before connecting */

    r = CTL_AS(n2, "handoff", "--node", t.node); /* n2's certificate: n2 expected */
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "naming n2)"));
    assert_null(seen(&t.fake, 0));
    run_free(&r);

    r = CTL_AS(n1, "handoff", "--node", t.node, "--timeout", "20"); /* n1 hands itself off */
    if (r.code != 0)
        fail_msg("handoff as n1: exit %d: %s%s", r.code, r.out, r.err);
    assert_string_equal(r.out, "handed off to n3\n");
    assert_string_equal(seen(&t.fake, 0), "GET /status");
    assert_string_equal(seen(&t.fake, 1), "POST /switchover?to=n3");
    expect_client(&t.fake, "n1");
    run_free(&r);
    tls_case_end(&t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    unsetenv("BEANSTALKCTL_NODES");
    unsetenv("BEANSTALKCTL_TLS_CERT");
    unsetenv("BEANSTALKCTL_TLS_KEY");
    unsetenv("BEANSTALKCTL_TLS_CA");
    if (getenv("BQ_CTL") == NULL) {
        fprintf(stderr, "test_ctl: set BQ_CTL to the beanstalkctl binary\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_prints_one_row_per_node),
        cmocka_unit_test(status_json_carries_the_documents),
        cmocka_unit_test(status_with_a_dead_node_exits_1),
        cmocka_unit_test(promote_sends_force_only_when_asked),
        cmocka_unit_test(promote_with_several_nodes_is_a_usage_error),
        cmocka_unit_test(switchover_goes_to_the_primary),
        cmocka_unit_test(switchover_without_one_primary_fails),
        cmocka_unit_test(handoff_switches_over_to_the_best_standby),
        cmocka_unit_test(handoff_elsewhere_changes_nothing),
        cmocka_unit_test(metrics_are_printed_unchanged),
        cmocka_unit_test(certs_verify_with_their_ca),
        cmocka_unit_test(certs_never_overwrite),
        cmocka_unit_test(status_over_mutual_tls),
        cmocka_unit_test(tls_refuses_another_nodes_certificate),
        cmocka_unit_test(tls_refuses_a_client_certificate_as_server),
        cmocka_unit_test(tls_refuses_cn_only_and_wildcard_certificates),
        cmocka_unit_test(tls_at_an_ip_address_needs_an_id_or_the_nodes_own_certificate),
        cmocka_unit_test_setup_teardown(handoff_on_a_real_cluster, real_setup, real_teardown),
        cmocka_unit_test_setup_teardown(status_switchover_promote_on_a_real_cluster,
                                        real_pair_setup, real_teardown),
    };
    return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
