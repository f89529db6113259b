/* Parser of the conformance case files (*.bq): one directive per line, words
 * separated by spaces, C-style quoted strings with an optional `*N` repeat,
 * `#` comments. The grammar is documented in README.md; everything a case
 * file can get wrong is reported here with its line number, before any
 * server starts. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/conformance/conformance.h"

#define MAX_WORDS 64
#define MAX_LINE 8192

/* A tokenised line: bare words and quoted strings (already unescaped). */
typedef struct words {
    char *w[MAX_WORDS];
    size_t len[MAX_WORDS];
    bool quoted[MAX_WORDS];
    int n;
} words_t;

typedef struct parser {
    bqc_case_t *c;
    const char *path;
    int line;
    char *err;
    size_t errlen;
} parser_t;

static int perr(parser_t *p, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, p->line);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->errlen)
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Unescapes the quoted string starting after the opening quote at *sp into
 * out; advances *sp past the closing quote. Returns the length or -1. */
static long unquote(const char **sp, char *out)
{
    const char *s = *sp;
    long n = 0;
    for (; *s && *s != '"'; s++) {
        if (*s != '\\') {
            out[n++] = *s;
            continue;
        }
        s++;
        switch (*s) {
        case 'r':
            out[n++] = '\r';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case '0':
            out[n++] = '\0';
            break;
        case '\\':
            out[n++] = '\\';
            break;
        case '"':
            out[n++] = '"';
            break;
        case 'x':
            if (hexval(s[1]) < 0 || hexval(s[2]) < 0)
                return -1;
            out[n++] = (char)(hexval(s[1]) * 16 + hexval(s[2]));
            s += 2;
            break;
        default:
            return -1;
        }
    }
    if (*s != '"')
        return -1;
    *sp = s + 1;
    return n;
}

static void words_free(words_t *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->w[i]);
    w->n = 0;
}

/* Splits a line into words; stops at a `#` outside quotes. */
static int tokenize(parser_t *p, const char *s, words_t *w)
{
    memset(w, 0, sizeof *w);
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#' || *s == '\n' || *s == '\r')
            return 0;
        if (w->n == MAX_WORDS)
            return perr(p, "too many words");
        char *buf = malloc(strlen(s) + 1);
        if (!buf)
            return perr(p, "out of memory");
        w->w[w->n] = buf;
        if (*s == '"') {
            s++;
            long n = unquote(&s, buf);
            if (n < 0)
                return perr(p, "bad string (unknown escape or missing closing quote)");
            w->len[w->n] = (size_t)n;
            w->quoted[w->n] = true;
        } else {
            size_t n = 0;
            while (*s && !isspace((unsigned char)*s) && *s != '#' && *s != '"')
                buf[n++] = *s++;
            buf[n] = '\0';
            w->len[w->n] = n;
        }
        w->n++;
    }
}

static int conn_index(parser_t *p, const char *name, bool create)
{
    bqc_case_t *c = p->c;
    for (int i = 0; i < c->nconns; i++)
        if (strcmp(c->conn_names[i], name) == 0)
            return i;
    if (!create)
        return perr(p, "connection '%s' was never opened with conn", name);
    if (c->nconns == BQC_MAX_CONNS)
        return perr(p, "too many connections");
    c->conn_names[c->nconns] = strdup(name);
    return c->nconns++;
}

/* Parses a positive integer word; *out is 0 when it is not one. */
static int number(parser_t *p, const char *word, long max, long *out)
{
    char *end;
    *out = 0;
    errno = 0;
    long v = strtol(word, &end, 10);
    if (errno || end == word || *end || v < 0 || v > max)
        return perr(p, "expected a number in 0..%ld, got '%s'", max, word);
    *out = v;
    return 0;
}

/* Appends n copies of piece to the step's data. */
static int append(parser_t *p, bqc_step_t *st, const char *piece, size_t len, long n, size_t *cap)
{
    while (st->len + len * (size_t)n + 1 > *cap) {
        char *grown = realloc(st->data, *cap * 2);
        if (!grown)
            return perr(p, "out of memory");
        st->data = grown;
        *cap *= 2;
    }
    for (long r = 0; r < n; r++, st->len += len)
        memcpy(st->data + st->len, piece, len);
    return 0;
}

/* Concatenates string pieces w[from..] ("s" or "s" followed by *N) into
 * the step's data. */
static int payload(parser_t *p, words_t *w, int from, bqc_step_t *st)
{
    size_t cap = 64;
    st->data = malloc(cap);
    st->len = 0;
    if (!st->data)
        return perr(p, "out of memory");
    for (int i = from; i < w->n; i++) {
        long rep = 1;
        if (!w->quoted[i])
            return perr(p, "expected a quoted string, got '%s'", w->w[i]);
        bool repeated = i + 1 < w->n && !w->quoted[i + 1] && w->w[i + 1][0] == '*';
        if (repeated && number(p, w->w[i + 1] + 1, 100000000, &rep) != 0)
            return -1;
        if (append(p, st, w->w[i], w->len[i], rep, &cap) != 0)
            return -1;
        i += repeated;
    }
    return 0;
}

static int parse_signal(parser_t *p, const char *name, int *sig)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
        {"HUP", SIGHUP},   {"KILL", SIGKILL}, {"STOP", SIGSTOP}, {"CONT", SIGCONT},
    };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        if (strcmp(sigs[i].name, name) == 0) {
            *sig = sigs[i].sig;
            return 0;
        }
    }
    return perr(p, "unknown signal '%s'", name);
}

/* recv NAME N [within MS] [timeout-ok] [expect-ours REASON "literal"...] */
static int parse_recv(parser_t *p, words_t *w, bqc_step_t *st)
{
    long v;
    if (w->n < 3 || number(p, w->w[2], 1000, &v) != 0 || v < 1)
        return perr(p, "usage: recv NAME COUNT [within MS] [timeout-ok] [expect-ours REASON STR]");
    st->count = (int)v;
    for (int i = 3; i < w->n; i++) {
        if (strcmp(w->w[i], "within") == 0 && i + 1 < w->n) {
            if (number(p, w->w[++i], 600000, &v) != 0)
                return -1;
            st->ms = (int)v;
        } else if (strcmp(w->w[i], "timeout-ok") == 0) {
            st->timeout_ok = true;
        } else if (strcmp(w->w[i], "expect-ours") == 0 && i + 2 < w->n) {
            st->deviation = bqc_deviation_find(w->w[i + 1]);
            if (!st->deviation)
                return perr(p, "expect-ours names '%s', which is not in the deviation list",
                            w->w[i + 1]);
            return payload(p, w, i + 2, st);
        } else {
            return perr(p, "unexpected '%s' in recv", w->w[i]);
        }
    }
    return 0;
}

static int need(parser_t *p, words_t *w, int n, const char *usage)
{
    return w->n == n ? 0 : perr(p, "usage: %s", usage);
}

/* Directives that take only a connection name. */
static const struct {
    const char *name;
    bqc_op_t op;
} simple[] = {
    {"conn", BQC_CONN},
    {"sync", BQC_SYNC},
    {"shutdown", BQC_SHUTDOWN},
    {"close", BQC_CLOSE},
};

/* Fills st from the words of one directive. */
static int parse_step(parser_t *p, words_t *w, bqc_step_t *st)
{
    const char *d = w->w[0];
    long v;
    st->ms = BQC_DEFAULT_MS;
    if (strcmp(d, "wait-ms") == 0 || strcmp(d, "sleep") == 0)
        return perr(p, "sleeps are not allowed; wait for a reply with a deadline instead");
    if (strcmp(d, "signal") == 0) {
        st->op = BQC_SIGNAL;
        return need(p, w, 2, "signal NAME") ? -1 : parse_signal(p, w->w[1], &st->sig);
    }
    if (strcmp(d, "restart") == 0) {
        st->op = BQC_RESTART;
        st->sig = w->n == 2 && strcmp(w->w[1], "kill") == 0 ? SIGKILL : SIGTERM;
        return w->n == 1 || st->sig == SIGKILL ? 0 : perr(p, "usage: restart [kill]");
    }
    if (w->n < 2 || w->quoted[1])
        return perr(p, "'%s' needs a connection name", d);
    st->conn = conn_index(p, w->w[1], strcmp(d, "conn") == 0);
    if (st->conn < 0)
        return -1;
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
        if (strcmp(d, simple[i].name) == 0) {
            st->op = simple[i].op;
            return w->n == 2 ? 0 : perr(p, "usage: %s NAME", d);
        }
    }
    if (strcmp(d, "send") == 0) {
        st->op = BQC_SEND;
        return w->n < 3 ? perr(p, "usage: send NAME STR...") : payload(p, w, 2, st);
    }
    if (strcmp(d, "recv") == 0) {
        st->op = BQC_RECV;
        return parse_recv(p, w, st);
    }
    if (strcmp(d, "silent") == 0) {
        st->op = BQC_SILENT;
        if (need(p, w, 3, "silent NAME MS") || number(p, w->w[2], 60000, &v))
            return -1;
        st->ms = (int)v;
        return 0;
    }
    if (strcmp(d, "eof") == 0) {
        st->op = BQC_EOF;
        if (w->n == 4 && strcmp(w->w[2], "within") == 0 && number(p, w->w[3], 600000, &v) == 0) {
            st->ms = (int)v;
            return 0;
        }
        return need(p, w, 2, "eof NAME [within MS]");
    }
    return perr(p, "unknown directive '%s'", d);
}

static int add_server_args(parser_t *p, words_t *w)
{
    bqc_case_t *c = p->c;
    if (c->nsteps > 0 || c->server_args[0])
        return perr(p, "'server' must be the first directive, and only once");
    if (w->n - 1 > BQC_MAX_SERVER_ARGS)
        return perr(p, "too many server arguments");
    for (int i = 1; i < w->n; i++)
        c->server_args[i - 1] = strdup(w->w[i]);
    return 0;
}

static int add_line(parser_t *p, const char *line)
{
    words_t w;
    bqc_case_t *c = p->c;
    int rc = tokenize(p, line, &w);
    if (rc == 0 && w.n > 0 && strcmp(w.w[0], "server") == 0) {
        rc = add_server_args(p, &w);
    } else if (rc == 0 && w.n > 0) {
        bqc_step_t *grown = realloc(c->steps, sizeof *grown * (size_t)(c->nsteps + 1));
        if (!grown) {
            rc = perr(p, "out of memory");
        } else {
            c->steps = grown;
            bqc_step_t *st = &c->steps[c->nsteps];
            memset(st, 0, sizeof *st);
            st->line = p->line;
            size_t tl = strcspn(line, "\r\n");
            st->text = strndup(line, tl);
            rc = parse_step(p, &w, st);
            c->nsteps++; /* counted even on error, so bqc_case_free frees it */
        }
    }
    words_free(&w);
    return rc;
}

int bqc_case_load(bqc_case_t *c, const char *path, char *err, size_t errlen)
{
    parser_t p = {c, path, 0, err, errlen};
    char line[MAX_LINE];
    const char *base = strrchr(path, '/');
    FILE *f = fopen(path, "r");
    int rc = 0;

    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", base ? base + 1 : path);
    char *dot = strrchr(c->name, '.');
    if (dot)
        *dot = '\0';
    if (!f)
        return perr(&p, "cannot open: %s", strerror(errno));
    while (rc == 0 && fgets(line, sizeof line, f)) {
        p.line++;
        if (!strchr(line, '\n') && !feof(f))
            rc = perr(&p, "line longer than %d bytes", MAX_LINE);
        else
            rc = add_line(&p, line);
    }
    fclose(f);
    if (rc == 0 && c->nsteps == 0)
        rc = perr(&p, "no steps");
    return rc;
}

void bqc_case_free(bqc_case_t *c)
{
    for (int i = 0; c->server_args[i]; i++)
        free(c->server_args[i]);
    for (int i = 0; i < c->nconns; i++)
        free(c->conn_names[i]);
    for (int i = 0; i < c->nsteps; i++) {
        free(c->steps[i].text);
        free(c->steps[i].data);
    }
    free(c->steps);
    memset(c, 0, sizeof *c);
}
