/* Cluster tests' helpers (cluster.h): nodes started and stopped through
 * bqtest.h with their cluster flags, logs counted line by line, `stats`
 * parsed for the cluster keys, requests to a node's admin API over a plain
 * socket, and two binlog directories compared through single servers
 * started on them. */
#define _XOPEN_SOURCE 700 /* nftw() */

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/cluster.h"

#define TAIL_LINES 40
#define MAX_TUBES 64

/* ---- directories ---- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void bqc_remove_tree(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bqc_certs_make(const char *mkcerts, char *dir, size_t cap, const char *const *names, size_t n)
{
    char log[300];
    const char *args[BQC_MAX_NODES + 3];
    size_t k = 0;
    if (bqt_mkdtemp(dir, cap, "bq-certs") != 0)
        return -1;
    snprintf(log, sizeof log, "%s.log", dir);
    args[k++] = dir;
    for (size_t i = 0; i < n && i < BQC_MAX_NODES; i++)
        args[k++] = names[i];
    args[k++] = "beanstalkctl"; /* the operator's identity, for admin POSTs */
    args[k] = NULL;
    int rc = bqt_run_to_exit(mkcerts, args, log, 60000);
    if (rc != 0)
        fprintf(stderr, "%s exited with %d; its output is in %s\n", mkcerts, rc, log);
    else
        unlink(log);
    return rc == 0 ? 0 : -1;
}

bqc_cluster_t *bqc_new(const char *prefix, size_t n, const char *const *names, const char *certs)
{
    bqc_cluster_t *c = calloc(1, sizeof *c);
    if (!c || n > BQC_MAX_NODES || bqt_mkdtemp(c->work, sizeof c->work, prefix) != 0) {
        free(c);
        return NULL;
    }
    c->n = n;
    snprintf(c->certs, sizeof c->certs, "%s", certs ? certs : "");
    for (size_t i = 0; i < n; i++) {
        bqc_node_t *nd = &c->node[i];
        snprintf(nd->name, sizeof nd->name, "%s", names[i]);
        snprintf(nd->bdir, sizeof nd->bdir, "%.150s/%.16s", c->work, names[i]);
        nd->repl_port = bqt_free_port();
        if (mkdir(nd->bdir, 0700) != 0 || nd->repl_port <= 0) {
            bqc_remove_tree(c->work);
            free(c);
            return NULL;
        }
    }
    return c;
}

/* ---- logs ---- */

/* Appends node i's current log to <work>/<name>.log. */
static void save_log(bqc_cluster_t *c, size_t i, const char *why)
{
    bqc_node_t *nd = &c->node[i];
    char path[220], buf[8192];
    size_t got;
    if (!nd->srv.dir[0])
        return;
    snprintf(path, sizeof path, "%s/%s.log", c->work, nd->name);
    FILE *in = fopen(nd->srv.log_path, "r"), *out = fopen(path, "a");
    if (out)
        fprintf(out, "=== node %s, start %d, %s ===\n", nd->name, nd->starts, why);
    while (in && out && (got = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, got, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

/* Prints the last lines of node i's current log to stderr. */
static void print_tail(bqc_cluster_t *c, size_t i)
{
    static char buf[1 << 20];
    const bqc_node_t *nd = &c->node[i];
    FILE *f = nd->srv.dir[0] ? fopen(nd->srv.log_path, "r") : NULL;
    if (f && fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0)
        rewind(f); /* a smaller file */
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = buf + n;
    for (int lines = 0; p > buf && lines < TAIL_LINES; p--)
        lines += p[-1] == '\n';
    fprintf(stderr, "--- last lines of node %s (%s) ---\n%s--- end ---\n", nd->name,
            nd->srv.log_path, p);
}

size_t bqc_log_count(bqc_cluster_t *c, size_t i, const char *a, const char *b)
{
    return bqt_log_count(c->node[i].srv.dir[0] ? c->node[i].srv.log_path : "", a, b);
}

void bqc_wait_log(bqc_cluster_t *c, size_t i, const char *a, const char *b, size_t atleast, int ms)
{
    bqt_wait_log(c->node[i].srv.dir[0] ? c->node[i].srv.log_path : "", c->node[i].name, a, b,
                 atleast, ms);
}

/* ---- nodes ---- */

void bqc_start(bqc_cluster_t *c, size_t i, const char *const *extra)
{
    bqc_node_t *nd = &c->node[i];
    const char *args[48];
    char peers[BQC_MAX_NODES][112], cert[200], key[200], ca[200], admin[32];
    size_t k = 0;
    args[k++] = "-b";
    args[k++] = nd->bdir;
    args[k++] = "--node-id";
    args[k++] = nd->name;
    for (size_t j = 0; j < c->n; j++) {
        int port = j != i && c->route[i][j] ? c->route[i][j] : c->node[j].repl_port;
        if (c->peer_domain[0] && j != i) /* its own entry is where it listens */
            snprintf(peers[j], sizeof peers[j], "%s=%s.%s:%d", c->node[j].name, c->node[j].name,
                     c->peer_domain, port);
        else
            snprintf(peers[j], sizeof peers[j], "%s=127.0.0.1:%d", c->node[j].name, port);
        args[k++] = "--peer";
        args[k++] = peers[j];
    }
    if (c->certs[0]) {
        snprintf(cert, sizeof cert, "%s/%s.pem", c->certs, nd->name);
        snprintf(key, sizeof key, "%s/%s.key", c->certs, nd->name);
        snprintf(ca, sizeof ca, "%s/ca.pem", c->certs);
        const char *tls[] = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca};
        for (size_t t = 0; t < 6; t++)
            args[k++] = tls[t];
    } else {
        args[k++] = "--repl-plaintext";
    }
    if (nd->admin_port > 0) {
        snprintf(admin, sizeof admin, "127.0.0.1:%d", nd->admin_port);
        args[k++] = "--admin-listen";
        args[k++] = admin;
    }
    for (const char *const *e = extra; e && *e && k < 47; e++)
        args[k++] = *e;
    args[k] = NULL;
    if (nd->srv.dir[0]) {
        save_log(c, i, "before a restart");
        bqt_server_stop(&nd->srv);
    }
    nd->starts++;
    if (bqt_server_start(&nd->srv, bqt_our_binary(), args) != 0)
        fail_msg("node %s did not start on %s", nd->name, nd->bdir);
}

bool bqc_alive(bqc_cluster_t *c, size_t i)
{
    bqc_node_t *nd = &c->node[i];
    return nd->srv.pid > 0 && waitpid(nd->srv.pid, NULL, WNOHANG) == 0;
}

void bqc_signal(bqc_cluster_t *c, size_t i, int sig)
{
    bqc_node_t *nd = &c->node[i];
    if (nd->srv.pid <= 0)
        fail_msg("node %s is not running (signal %d)", nd->name, sig);
    bqt_server_signal(&nd->srv, sig);
    int status = bqt_server_wait(&nd->srv, BQC_EXIT_MS);
    if (status == -1)
        fail_msg("node %s did not exit within %d ms of signal %d", nd->name, BQC_EXIT_MS, sig);
    if (sig == SIGTERM && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fail_msg("node %s did not exit cleanly after SIGTERM (status 0x%x)", nd->name, status);
}

int bqc_index(const bqc_cluster_t *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->node[i].name, name) == 0)
            return (int)i;
    return -1;
}

void bqc_finish(bqc_cluster_t *c, bool passed)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        if (!passed)
            print_tail(c, i);
        save_log(c, i, passed ? "end of the case" : "the case failed");
        bqt_server_stop(&c->node[i].srv);
    }
    if (!passed)
        fprintf(stderr, "work directory kept: %s (a binlog directory and a log per node)\n",
                c->work);
    else if (!getenv("BQT_KEEP_DIRS"))
        bqc_remove_tree(c->work);
    free(c);
}

/* ---- replies ---- */

char *bqc_ask(int fd, const char *cmd, int ms)
{
    for (size_t off = 0, len = strlen(cmd); off < len;) {
        ssize_t n = send(fd, cmd + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        off += (size_t)n;
    }
    char *line = bqt_read_line(fd, ms);
    if (!line)
        return NULL;
    bool data =
        !strncmp(line, "OK ", 3) || !strncmp(line, "FOUND ", 6) || !strncmp(line, "RESERVED ", 9);
    if (!data)
        return line;
    size_t n = strtoull(strrchr(line, ' ') + 1, NULL, 10), ll = strlen(line);
    char *all = realloc(line, ll + n + 3);
    if (!all || bqt_read_n(fd, all + ll, n + 2, ms) != n + 2) {
        free(all ? all : line);
        return NULL;
    }
    all[ll + n + 2] = '\0';
    return all;
}

/* The value of key in YAML text, copied into out (quotes dropped); false
 * when absent. */
static bool yaml_get(const char *yaml, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *p = yaml; p && *p; p = strchr(p, '\n')) {
        p += *p == '\n';
        if (strncmp(p, key, klen) == 0 && p[klen] == ':' && p[klen + 1] == ' ') {
            const char *v = p + klen + 2;
            size_t vlen = strcspn(v, "\r\n");
            if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
                v++;
                vlen -= 2;
            }
            snprintf(out, cap, "%.*s", (int)vlen, v);
            return true;
        }
    }
    return false;
}

static unsigned long long field(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Adds every "cluster-standby-<name>: ..." line of yaml to v. */
static void parse_standbys(const char *yaml, bqc_view_t *v)
{
    static const char prefix[] = "cluster-standby-";
    for (const char *p = strstr(yaml, prefix); p && v->nsb < BQC_MAX_NODES;
         p = strstr(p + 1, prefix)) {
        if (p != yaml && p[-1] != '\n')
            continue;
        const char *name = p + sizeof prefix - 1;
        size_t nlen = strcspn(name, ":\n");
        const char *line_end = name + strcspn(name, "\n");
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(line_end - name), name);
        snprintf(v->sb[v->nsb].name, sizeof v->sb[0].name, "%.*s", (int)nlen, name);
        const char *st = strstr(line, "state=");
        v->sb[v->nsb].state[0] = '\0';
        if (st)
            sscanf(st, "state=%23[a-z-]", v->sb[v->nsb].state);
        v->sb[v->nsb].applied = field(line, "applied=");
        v->sb[v->nsb].flushed = field(line, "flushed=");
        v->nsb++;
    }
}

int bqc_view_parse(const char *reply, bqc_view_t *v)
{
    char num[32];
    memset(v, 0, sizeof *v);
    if (!reply || strncmp(reply, "OK ", 3) != 0 ||
        !yaml_get(reply, "cluster-role", v->role, sizeof v->role))
        return -1;
    yaml_get(reply, "cluster-node-id", v->node, sizeof v->node);
    yaml_get(reply, "cluster-sync-state", v->sync, sizeof v->sync);
    if (yaml_get(reply, "cluster-epoch", num, sizeof num))
        v->epoch = strtoull(num, NULL, 10);
    if (yaml_get(reply, "cluster-last-lsn", num, sizeof num))
        v->last_lsn = strtoull(num, NULL, 10);
    if (yaml_get(reply, "cluster-commit-lsn", num, sizeof num))
        v->commit_lsn = strtoull(num, NULL, 10);
    parse_standbys(reply, v);
    return 0;
}

int bqc_view_standby(const bqc_view_t *v, const char *name)
{
    for (size_t i = 0; i < v->nsb; i++)
        if (strcmp(v->sb[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* ---- the admin API ---- */

bqa_conn_t *bqc_admin_post(const bqc_cluster_t *c, size_t i, const char *target)
{
    bqa_conn_t *a = bqa_open(c->node[i].admin_port, c->certs, "beanstalkctl", BQC_REPLY_MS);
    if (a && bqa_send(a, "POST", target) != 0) {
        bqa_close(a);
        return NULL;
    }
    return a;
}

int bqc_admin_call(const bqc_cluster_t *c, size_t i, const char *method, const char *target,
                   char *text, size_t cap)
{
    return bqa_call(c->node[i].admin_port, c->certs, "beanstalkctl", method, target, BQC_REPLY_MS,
                    text, cap);
}

/* ---- comparing two directories ---- */

/* Sends cmd and returns the whole reply; fails the test without one. */
static char *must_ask(int fd, const char *cmd)
{
    char *r = bqc_ask(fd, cmd, BQC_REPLY_MS);
    if (!r)
        fail_msg("no reply within %d ms to \"%.*s\"", BQC_REPLY_MS, (int)strcspn(cmd, "\r"), cmd);
    return r;
}

/* Whether line's key is one of the comma-separated names in list. */
static bool listed_key(const char *line, const char *list)
{
    size_t klen = strcspn(line, ":\n");
    for (const char *d = list; *d;) {
        size_t dlen = strcspn(d, ",");
        if (dlen == klen && strncmp(d, line, klen) == 0)
            return true;
        d += dlen + (d[dlen] == ',');
    }
    return false;
}

/* Copies reply without the lines of the keys in drop. */
static char *without_keys(const char *reply, const char *drop)
{
    char *out = malloc(strlen(reply) + 1), *o = out;
    assert_non_null(out);
    for (const char *p = reply; *p;) {
        size_t len = strcspn(p, "\n") + (p[strcspn(p, "\n")] == '\n');
        if (!listed_key(p, drop)) {
            memcpy(o, p, len);
            o += len;
        }
        p += len;
    }
    *o = '\0';
    return out;
}

bool bqc_same_reply(int fx, int fy, const char *cmd, const char *drop)
{
    char *x = must_ask(fx, cmd), *y = must_ask(fy, cmd);
    const char *bx = strncmp(x, "OK ", 3) ? x : strchr(x, '\n');
    const char *by = strncmp(y, "OK ", 3) ? y : strchr(y, '\n');
    char *cx = without_keys(bx, drop), *cy = without_keys(by, drop);
    if (strcmp(cx, cy) != 0)
        fail_msg("\"%.*s\" differs:\n--- first directory ---\n%s\n--- second ---\n%s",
                 (int)strcspn(cmd, "\r"), cmd, x, y);
    bool found = strncmp(x, "NOT_FOUND", 9) != 0;
    free(x);
    free(y);
    free(cx);
    free(cy);
    return found;
}

/* The tube names of a list-tubes reply, sorted. */
static size_t tube_names(const char *reply, char names[][201], size_t cap)
{
    size_t n = 0;
    for (const char *p = strstr(reply, "\n- "); p && n < cap; p = strstr(p + 1, "\n- "))
        sscanf(p + 3, "%200[^\r\n]", names[n++]);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[201];
            memcpy(t, names[j], sizeof t);
            memcpy(names[j], names[j - 1], sizeof t);
            memcpy(names[j - 1], t, sizeof t);
        }
    return n;
}

static const char job_counts[] = "current-jobs-urgent,current-jobs-ready,current-jobs-reserved,"
                                 "current-jobs-delayed,current-jobs-buried";

/* Keeps only the lines of the keys in keep (the reply's first line aside). */
static char *only_keys(const char *reply, const char *keep)
{
    char *out = malloc(strlen(reply) + 1), *o = out;
    assert_non_null(out);
    for (const char *p = strchr(reply, '\n'); p && *p;) {
        p++;
        size_t len = strcspn(p, "\n");
        if (len > 0 && listed_key(p, keep)) {
            memcpy(o, p, len);
            o += len;
            *o++ = '\n';
        }
        p += len;
    }
    *o = '\0';
    return out;
}

/* Same tubes, the same counts in each and in the whole server. */
static void compare_tubes(int fx, int fy)
{
    static char nx[MAX_TUBES][201], ny[MAX_TUBES][201];
    char *x = must_ask(fx, "list-tubes\r\n"), *y = must_ask(fy, "list-tubes\r\n");
    size_t cx = tube_names(x, nx, MAX_TUBES), cy = tube_names(y, ny, MAX_TUBES);
    if (cx != cy)
        fail_msg("list-tubes differ:\n%s\n---\n%s", x, y);
    for (size_t i = 0; i <= cx; i++) {
        char cmd[256];
        if (i < cx) {
            assert_string_equal(nx[i], ny[i]);
            snprintf(cmd, sizeof cmd, "stats-tube %.200s\r\n", nx[i]);
        } else {
            snprintf(cmd, sizeof cmd, "stats\r\n");
        }
        char *sx = must_ask(fx, cmd), *sy = must_ask(fy, cmd);
        char *kx = only_keys(sx, job_counts), *ky = only_keys(sy, job_counts);
        if (strcmp(kx, ky) != 0)
            fail_msg("%.*s differs:\n--- first directory ---\n%s--- second ---\n%s",
                     (int)strcspn(cmd, "\r"), cmd, kx, ky);
        free(sx);
        free(sy);
        free(kx);
        free(ky);
    }
    free(x);
    free(y);
}

size_t bqc_compare_dirs(const char *dx, const char *dy, const unsigned long long *ids, size_t nids)
{
    bqt_server_t sx = {0}, sy = {0};
    const char *ax[] = {"-b", dx, NULL}, *ay[] = {"-b", dy, NULL};
    if (bqt_server_start(&sx, bqt_our_binary(), ax) != 0 ||
        bqt_server_start(&sy, bqt_our_binary(), ay) != 0) {
        bqt_server_stop(&sx);
        fail_msg("a single node did not start on %s or %s", dx, dy);
    }
    int fx = bqt_client(&sx), fy = bqt_client(&sy);
    size_t found = 0;
    for (size_t i = 0; i < nids; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "stats-job %llu\r\n", ids[i]);
        found += bqc_same_reply(fx, fy, cmd, "age,time-left,file");
        snprintf(cmd, sizeof cmd, "peek %llu\r\n", ids[i]);
        bqc_same_reply(fx, fy, cmd, "");
    }
    compare_tubes(fx, fy);
    close(fx);
    close(fy);
    bqt_server_stop(&sx);
    bqt_server_stop(&sy);
    return found;
}
