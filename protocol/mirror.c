/* A client's session as a proxy sees it (mirror.h). Client bytes are
 * framed as the server frames them (lines up to BQ_LINE_MAX, a put's body
 * of <bytes> + CRLF after its line) and parsed with bq_parse_command; each
 * command but quit waits for one reply. Server bytes are framed as replies:
 * one line, or for RESERVED, FOUND and OK a line and a body of the size it
 * names. A reply completes the oldest command waiting; a successful use,
 * watch or ignore changes the mirrored session the way the engine changes
 * it (the watch list is beanstalkd's multiset: a watch appends, an ignore
 * moves the last tube into the gap). */
#include "protocol/mirror.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/growbuf.h"
#include "protocol/parse.h"

#define REPLY_LINE_MAX 256

typedef struct mcmd {
    bq_op_t op;
    bool restore;               /* a restore command: its reply is dropped */
    char name[BQ_NAME_MAX + 1]; /* use, watch, ignore */
    uint8_t len;                /* the command line as sent, CRLF included */
    char line[BQ_LINE_MAX];
} mcmd_t;

struct bq_mirror {
    char line[BQ_LINE_MAX]; /* the client's partial command line */
    size_t line_len;
    uint64_t client_skip; /* put body bytes still to come from the client */
    char reply[REPLY_LINE_MAX];
    size_t reply_len;
    uint64_t server_skip; /* reply body bytes still to come from the server */
    mcmd_t *q;            /* commands waiting for a reply, a ring */
    size_t qhead, qlen, qcap;
    char use[BQ_NAME_MAX + 1];
    char *watch[BQ_MIRROR_MAX_WATCH]; /* malloc'd names */
    size_t nwatch;
    bool lost, quit;
};

bq_mirror_t *bq_mirror_new(void)
{
    bq_mirror_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    strcpy(m->use, "default");
    m->watch[0] = strdup("default");
    if (!m->watch[0]) {
        free(m);
        return NULL;
    }
    m->nwatch = 1;
    return m;
}

static void clear_watch(bq_mirror_t *m)
{
    for (size_t i = 0; i < m->nwatch; i++)
        free(m->watch[i]);
    m->nwatch = 0;
}

void bq_mirror_free(bq_mirror_t *m)
{
    if (!m)
        return;
    clear_watch(m);
    free(m->q);
    free(m);
}

bool bq_mirror_lost(const bq_mirror_t *m)
{
    return m->lost;
}

static mcmd_t *at(const bq_mirror_t *m, size_t i);

int bq_mirror_set_session(bq_mirror_t *m, const char *use, const char *const *watch, size_t nwatch)
{
    if (nwatch == 0 || nwatch > BQ_MIRROR_MAX_WATCH || strlen(use) > BQ_NAME_MAX)
        return -1;
    char *names[BQ_MIRROR_MAX_WATCH];
    for (size_t i = 0; i < nwatch; i++) {
        names[i] = strdup(watch[i]);
        if (!names[i]) {
            while (i > 0)
                free(names[--i]);
            return -1;
        }
    }
    clear_watch(m);
    memcpy(m->watch, names, nwatch * sizeof *names);
    m->nwatch = nwatch;
    snprintf(m->use, sizeof m->use, "%s", use);
    return 0;
}

size_t bq_mirror_unanswered(const bq_mirror_t *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->qlen; i++)
        n += !at(m, i)->restore;
    return n;
}

bool bq_mirror_restoring(const bq_mirror_t *m)
{
    return m->qlen > 0 && at(m, 0)->restore;
}

size_t bq_mirror_pending(const bq_mirror_t *m)
{
    return m->qlen;
}

const char *bq_mirror_use(const bq_mirror_t *m)
{
    return m->use;
}

size_t bq_mirror_nwatch(const bq_mirror_t *m)
{
    return m->nwatch;
}

const char *bq_mirror_watch(const bq_mirror_t *m, size_t i)
{
    return m->watch[i];
}

static mcmd_t *at(const bq_mirror_t *m, size_t i)
{
    return &m->q[(m->qhead + i) % m->qcap];
}

/* Queues a command waiting for its reply (at the front for a restore). */
static mcmd_t *push(bq_mirror_t *m, bool front)
{
    if (m->qlen == BQ_MIRROR_MAX_PENDING) {
        m->lost = true;
        return NULL;
    }
    if (m->qlen == m->qcap) {
        size_t cap = m->qcap ? m->qcap * 2 : 8;
        mcmd_t *q = malloc(cap * sizeof *q);
        if (!q) {
            m->lost = true;
            return NULL;
        }
        for (size_t i = 0; i < m->qlen; i++)
            q[i] = *at(m, i);
        free(m->q);
        m->q = q;
        m->qcap = cap;
        m->qhead = 0;
    }
    if (front)
        m->qhead = (m->qhead + m->qcap - 1) % m->qcap;
    m->qlen++;
    mcmd_t *c = front ? at(m, 0) : at(m, m->qlen - 1);
    memset(c, 0, sizeof *c);
    return c;
}

/* ---- the client's commands ---- */

static void command(bq_mirror_t *m, const char *line, size_t len)
{
    bq_cmd_t cmd;
    bq_parse_status_t st = bq_parse_command(line, len, &cmd);
    if (st == BQ_PARSE_OK && cmd.op == BQ_OP_QUIT) {
        m->quit = true;
        return;
    }
    if (st == BQ_PARSE_OK && cmd.op == BQ_OP_PUT) {
        if (cmd.put_trailing) { /* the server may or may not read its body */
            m->lost = true;
            return;
        }
        m->client_skip = (uint64_t)cmd.bytes + 2;
    }
    mcmd_t *c = push(m, false);
    if (!c)
        return;
    c->op = st == BQ_PARSE_OK ? cmd.op : BQ_OP_UNKNOWN;
    memcpy(c->line, line, len);
    memcpy(c->line + len, "\r\n", 2);
    c->len = (uint8_t)(len + 2);
    if (st == BQ_PARSE_OK &&
        (cmd.op == BQ_OP_USE || cmd.op == BQ_OP_WATCH || cmd.op == BQ_OP_IGNORE)) {
        memcpy(c->name, cmd.name, cmd.name_len);
        c->name[cmd.name_len] = '\0';
    }
}

void bq_mirror_client(bq_mirror_t *m, const char *data, size_t n)
{
    while (n > 0 && !m->lost && !m->quit) {
        if (m->client_skip > 0) {
            size_t k = n < m->client_skip ? n : (size_t)m->client_skip;
            m->client_skip -= k;
            data += k;
            n -= k;
            continue;
        }
        char ch = *data++;
        n--;
        if (m->line_len == sizeof m->line) { /* longer than any command */
            m->lost = true;
            return;
        }
        m->line[m->line_len++] = ch;
        if (ch == '\n' && m->line_len >= 2 && m->line[m->line_len - 2] == '\r') {
            size_t len = m->line_len - 2;
            m->line_len = 0;
            command(m, m->line, len);
        }
    }
}

/* ---- the server's replies ---- */

static size_t watch_index(const bq_mirror_t *m, const char *name)
{
    for (size_t i = 0; i < m->nwatch; i++)
        if (strcmp(m->watch[i], name) == 0)
            return i;
    return SIZE_MAX;
}

static bool starts(const char *line, const char *word)
{
    return strncmp(line, word, strlen(word)) == 0;
}

/* The reply line of the oldest command is complete (its body too). */
static void completed(bq_mirror_t *m)
{
    if (m->qlen == 0) {
        m->lost = true; /* a reply with no command */
        return;
    }
    mcmd_t *c = at(m, 0);
    const char *r = m->reply;
    bool ok = false;
    if (c->op == BQ_OP_USE && starts(r, "USING ")) {
        snprintf(m->use, sizeof m->use, "%s", c->name);
        ok = true;
    } else if (c->op == BQ_OP_WATCH && starts(r, "WATCHING ")) {
        if (watch_index(m, c->name) == SIZE_MAX) {
            char *name = m->nwatch < BQ_MIRROR_MAX_WATCH ? strdup(c->name) : NULL;
            if (!name)
                m->lost = true;
            else
                m->watch[m->nwatch++] = name;
        }
        ok = true;
    } else if (c->op == BQ_OP_IGNORE && starts(r, "WATCHING ")) {
        size_t i = watch_index(m, c->name);
        if (i != SIZE_MAX && m->nwatch == 1) {
            m->lost = true; /* beanstalkd never ignores the last tube */
        } else if (i != SIZE_MAX) {
            free(m->watch[i]);
            m->watch[i] = m->watch[--m->nwatch];
        }
        ok = true;
    }
    if (c->restore && !ok)
        m->lost = true; /* the session could not be restored */
    m->qhead = (m->qhead + 1) % m->qcap;
    m->qlen--;
    m->reply_len = 0;
}

/* A whole reply line: its body's size when it has one. */
static void reply_line(bq_mirror_t *m)
{
    m->reply[m->reply_len - 2] = '\0';
    int64_t bytes = bq_reply_body_size(m->reply, m->reply_len - 2);
    if (bytes == BQ_REPLY_BAD_SIZE)
        m->lost = true;
    else if (bytes >= 0)
        m->server_skip = (uint64_t)bytes + 2;
    else
        completed(m);
}

size_t bq_mirror_server(bq_mirror_t *m, const char *data, size_t n)
{
    size_t drop = 0, used = 0;
    while (used < n && !m->lost) {
        bool restore = m->qlen > 0 && at(m, 0)->restore;
        size_t k;
        if (m->server_skip > 0) {
            k = n - used < m->server_skip ? n - used : (size_t)m->server_skip;
            m->server_skip -= k;
            if (m->server_skip == 0)
                completed(m);
        } else {
            k = 1;
            if (m->reply_len == sizeof m->reply - 1) {
                m->lost = true;
                break;
            }
            char ch = data[used];
            m->reply[m->reply_len++] = ch;
            if (ch == '\n' && m->reply_len >= 2 && m->reply[m->reply_len - 2] == '\r')
                reply_line(m);
        }
        used += k;
        if (restore && drop == used - k)
            drop = used;
    }
    return drop;
}

/* ---- moving the session ---- */

/* Whether a command whose reply never came may be sent again to another
 * server: one that changes nothing durable (reserves: a reservation dies
 * with its server anyway; reads; use, watch and ignore, restored anyway).
 * A put, delete, release, bury, touch, kick, kick-job or pause-tube may
 * have been done already: sent again, it would be done twice or answered
 * as if it had not been (a delete done on the old server, then NOT_FOUND),
 * so its client is closed instead, its outcome unknown. */
static bool resendable(bq_op_t op)
{
    return !bq_op_writes(op);
}

bool bq_mirror_movable(const bq_mirror_t *m)
{
    if (m->lost || m->quit || m->reply_len > 0 || m->server_skip > 0 || m->client_skip > 0)
        return false;
    for (size_t i = 0; i < m->qlen; i++) {
        const mcmd_t *c = at(m, i);
        if (c->restore || !resendable(c->op))
            return false;
    }
    return true;
}

/* Queues restore command "<verb> <name>" (before the reserves in flight)
 * and appends its line; false when out of memory or too many. */
static bool restore_cmd(bq_mirror_t *m, size_t *nr, bq_op_t op, const char *verb, const char *name,
                        char **buf, size_t *len, size_t *cap)
{
    char line[BQ_NAME_MAX + 16];
    int k = snprintf(line, sizeof line, "%s %s\r\n", verb, name);
    /* Restores go in order before the commands in flight: at position *nr. */
    mcmd_t *c = push(m, false);
    if (!c || !bq_growbuf_append(buf, len, cap, line, (size_t)k))
        return false;
    mcmd_t tmp = {.op = op, .restore = true};
    snprintf(tmp.name, sizeof tmp.name, "%s", name);
    for (size_t i = m->qlen - 1; i > *nr; i--)
        *at(m, i) = *at(m, i - 1);
    *at(m, *nr) = tmp;
    (*nr)++;
    return true;
}

int bq_mirror_restore(bq_mirror_t *m, char **out, size_t *len, size_t *restores)
{
    if (!bq_mirror_movable(m))
        return -1;
    char *buf = NULL;
    size_t n = 0, cap = 0, nr = 0, inflight = m->qlen;
    /* The state the mirror reaches again as the restore replies come. */
    char use[BQ_NAME_MAX + 1], *want[BQ_MIRROR_MAX_WATCH];
    size_t nwant = m->nwatch;
    snprintf(use, sizeof use, "%s", m->use);
    memcpy(want, m->watch, nwant * sizeof *want);
    strcpy(m->use, "default");
    m->watch[0] = strdup("default");
    m->nwatch = 1;
    bool ok = m->watch[0] != NULL;
    if (!ok)
        m->nwatch = 0;
    if (strcmp(use, "default") != 0)
        ok = restore_cmd(m, &nr, BQ_OP_USE, "use", use, &buf, &n, &cap);
    /* A fresh session watches [default]; a watch appends, an ignore of the
     * first of two moves the second to the front: watch want[0], ignore
     * default, then watch the rest in order gives want exactly. */
    if (ok && strcmp(want[0], "default") != 0)
        ok = restore_cmd(m, &nr, BQ_OP_WATCH, "watch", want[0], &buf, &n, &cap) &&
             restore_cmd(m, &nr, BQ_OP_IGNORE, "ignore", "default", &buf, &n, &cap);
    for (size_t i = 1; ok && i < nwant; i++)
        ok = restore_cmd(m, &nr, BQ_OP_WATCH, "watch", want[i], &buf, &n, &cap);
    /* The commands in flight, again (after the restores in the queue), then
     * the partial command line, byte for byte as the client sent them. */
    for (size_t i = nr; ok && i < nr + inflight; i++)
        ok = bq_growbuf_append(&buf, &n, &cap, at(m, i)->line, at(m, i)->len);
    if (ok && m->line_len > 0)
        ok = bq_growbuf_append(&buf, &n, &cap, m->line, m->line_len);
    for (size_t i = 0; i < nwant; i++)
        free(want[i]);
    if (!ok) {
        free(buf);
        m->lost = true;
        return -1;
    }
    *out = buf;
    *len = n;
    *restores = nr;
    return 0;
}
