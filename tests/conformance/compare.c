/* Normalisation and comparison of the two transcripts of a case. This is the
 * one place that decides what may differ between the reference and us:
 *
 *  - In `stats` bodies the values of pid, version, rusage-utime,
 *    rusage-stime, uptime, id, hostname, os and platform are replaced by
 *    <key> placeholders (they differ between any two processes).
 *  - yaml-quoting (deviations.c): for the keys listed there the reference's
 *    bare value is wrapped in double quotes before comparing, so ours must
 *    print exactly the 1.13 form. Not applied in self-test mode.
 *  - age, time-left and pause-time-left may differ by at most 1 (compared as
 *    integers).
 *  - The `OK <n>` byte count is recomputed after normalising; the framing of
 *    the original reply was already checked when it was read.
 *
 * Keys and their order must match exactly; every other reply must match byte
 * for byte. Replies marked expect-ours (deviations.c) are compared with the
 * case's literal instead of the reference. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/conformance/conformance.h"

static const char *const volatile_stats_keys[] = {
    "pid", "version", "rusage-utime", "rusage-stime", "uptime", "id", "hostname", "os", "platform",
};

static const char *const tolerant_keys[] = {"age", "time-left", "pause-time-left"};

#define MAX_DIFF_LINES 400

/* A growing string. */
typedef struct sb {
    char *s;
    size_t len, cap;
} sb_t;

static void sb_add(sb_t *b, const char *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *grown = realloc(b->s, cap);
        if (!grown)
            abort();
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sb_t *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_printf(sb_t *b, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        sb_add(b, "", 0);
        while (b->len + (size_t)n + 1 > b->cap) {
            char *grown = realloc(b->s, b->cap * 2);
            if (!grown)
                abort();
            b->s = grown;
            b->cap *= 2;
        }
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

char *bqc_escape(const char *data, size_t len)
{
    sb_t b = {0};
    sb_add(&b, "", 0);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c == '\r')
            sb_add(&b, "\\r", 2);
        else if (c == '\n')
            sb_add(&b, "\\n", 2);
        else if (c == '\t')
            sb_add(&b, "\\t", 2);
        else if (c == '\\')
            sb_add(&b, "\\\\", 2);
        else if (c < 32 || c >= 127)
            sb_printf(&b, "\\x%02x", c);
        else
            sb_add(&b, (const char *)&c, 1);
    }
    return b.s;
}

static bool in_list(const char *const *list, size_t n, const char *key, size_t kl)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == kl && strncmp(list[i], key, kl) == 0)
            return true;
    return false;
}

/* The kind of a YAML body from its first key: stats, stats-job, stats-tube or "". */
static const char *body_kind(const char *body, size_t n)
{
    if (n > 24 && strncmp(body, "---\ncurrent-jobs-urgent:", 24) == 0)
        return "stats";
    if (n > 7 && strncmp(body, "---\nid:", 7) == 0)
        return "stats-job";
    if (n > 9 && strncmp(body, "---\nname:", 9) == 0)
        return "stats-tube";
    return "";
}

/* Appends one normalised `key: value` line (without its \n) to b. */
static void normalise_line(sb_t *b, const char *kind, const char *line, size_t n, bool reference,
                           const bqc_mode_t *mode)
{
    const char *colon = memchr(line, ':', n);
    if (!colon || (size_t)(colon - line) + 2 > n || colon[1] != ' ') {
        sb_add(b, line, n);
        return;
    }
    size_t kl = (size_t)(colon - line), vl = n - kl - 2;
    const char *v = colon + 2;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)kl, line);
    bool quote = !mode->selftest && reference && bqc_quoted_key(kind, key);
    bool quoted = quote || (vl >= 2 && v[0] == '"' && v[vl - 1] == '"');
    sb_add(b, line, kl + 2);
    if (strcmp(kind, "stats") == 0 &&
        in_list(volatile_stats_keys, sizeof volatile_stats_keys / sizeof *volatile_stats_keys, line,
                kl)) {
        sb_printf(b, quoted ? "\"<%s>\"" : "<%s>", key);
        return;
    }
    if (quote)
        sb_add(b, "\"", 1);
    sb_add(b, v, vl);
    if (quote)
        sb_add(b, "\"", 1);
}

/* Returns the normalised copy of one raw reply (free its .s). */
static sb_t normalise(const char *raw, size_t len, bool reference, const bqc_mode_t *mode)
{
    sb_t b = {0}, body = {0};
    const char *crlf = strstr(raw, "\r\n");
    sb_add(&b, "", 0);
    if (strncmp(raw, "OK ", 3) != 0 || !crlf || len < (size_t)(crlf - raw) + 4) {
        sb_add(&b, raw, len);
        return b;
    }
    const char *data = crlf + 2, *end = raw + len - 2; /* the body, without its CRLF */
    const char *kind = body_kind(data, (size_t)(end - data));
    sb_add(&body, "", 0);
    for (const char *p = data; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        normalise_line(&body, kind, p, n, reference, mode);
        if (nl)
            sb_add(&body, "\n", 1);
        p += n + (nl != NULL);
    }
    sb_printf(&b, "OK %zu\r\n", body.len);
    sb_add(&b, body.s, body.len);
    sb_add(&b, "\r\n", 2);
    free(body.s);
    return b;
}

/* True when two body lines are equal, or are the same tolerant key with
 * integer values at most 1 apart. */
static bool lines_match(const char *a, size_t an, const char *b, size_t bn)
{
    if (an == bn && memcmp(a, b, an) == 0)
        return true;
    const char *ca = memchr(a, ':', an), *cb = memchr(b, ':', bn);
    if (!ca || !cb || ca - a != cb - b || memcmp(a, b, (size_t)(ca - a)) != 0 ||
        !in_list(tolerant_keys, sizeof tolerant_keys / sizeof *tolerant_keys, a, (size_t)(ca - a)))
        return false;
    char va[32], vb[32], *ea, *eb;
    snprintf(va, sizeof va, "%.*s", (int)(an - (size_t)(ca - a) - 1), ca + 1);
    snprintf(vb, sizeof vb, "%.*s", (int)(bn - (size_t)(cb - b) - 1), cb + 1);
    long long x = strtoll(va, &ea, 10), y = strtoll(vb, &eb, 10);
    return *ea == '\0' && *eb == '\0' && ea != va && eb != vb && llabs(x - y) <= 1;
}

/* Compares two normalised replies, with the tolerance for time fields. */
static bool replies_match(const sb_t *x, const sb_t *y)
{
    const char *a = x->s, *b = y->s;
    if (x->len == y->len && memcmp(a, b, x->len) == 0)
        return true;
    if (strncmp(a, "OK ", 3) != 0 || strncmp(b, "OK ", 3) != 0)
        return false;
    a = strstr(a, "\r\n") + 2;
    b = strstr(b, "\r\n") + 2;
    for (;;) {
        const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');
        size_t la = na ? (size_t)(na - a) : strlen(a), lb = nb ? (size_t)(nb - b) : strlen(b);
        if (!lines_match(a, la, b, lb))
            return false;
        if (!na || !nb)
            return !na && !nb;
        a = na + 1;
        b = nb + 1;
    }
}

/* Splits text into display lines (each ending after a \n), escaped. */
static int display_lines(const sb_t *t, char **out, int max)
{
    int n = 0;
    const char *text = t->s;
    size_t len = t->len;
    for (size_t i = 0; i < len && n < max;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - text - (long)i) + 1 : len - i;
        out[n++] = bqc_escape(text + i, l);
        i += l;
    }
    return n;
}

/* Appends a unified line diff (LCS, 3 lines of context) of two texts to b. */
static void unified_diff(sb_t *b, const sb_t *a_text, const sb_t *b_text)
{
    static _Thread_local char *al[MAX_DIFF_LINES], *bl[MAX_DIFF_LINES];
    static _Thread_local char op[2 * MAX_DIFF_LINES];
    static _Thread_local const char *text[2 * MAX_DIFF_LINES];
    int n = display_lines(a_text, al, MAX_DIFF_LINES);
    int m = display_lines(b_text, bl, MAX_DIFF_LINES);
    int *lcs = calloc((size_t)(n + 1) * (size_t)(m + 1), sizeof *lcs), nops = 0;
    if (!lcs)
        abort();
#define L(i, j) lcs[(size_t)(i) * (size_t)(m + 1) + (size_t)(j)]
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--)
            L(i, j) = strcmp(al[i], bl[j]) == 0    ? L(i + 1, j + 1) + 1
                      : L(i + 1, j) >= L(i, j + 1) ? L(i + 1, j)
                                                   : L(i, j + 1);
    for (int i = 0, j = 0; i < n || j < m; nops++) {
        if (i < n && j < m && strcmp(al[i], bl[j]) == 0) {
            op[nops] = ' ';
            text[nops] = al[i++];
            j++;
        } else if (j >= m || (i < n && L(i + 1, j) >= L(i, j + 1))) {
            op[nops] = '-';
            text[nops] = al[i++];
        } else {
            op[nops] = '+';
            text[nops] = bl[j++];
        }
    }
#undef L
    for (int k = 0, last = -1; k < nops; k++) {
        bool near = false;
        for (int d = k - 3; d <= k + 3 && !near; d++)
            near = d >= 0 && d < nops && op[d] != ' ';
        if (!near)
            continue;
        if (last >= 0 && k != last + 1)
            sb_puts(b, "@@\n");
        sb_printf(b, "%c%s\n", op[k], text[k]);
        last = k;
    }
    for (int k = 0; k < n; k++)
        free(al[k]);
    for (int k = 0; k < m; k++)
        free(bl[k]);
    free(lcs);
}

/* Appends text to b, one escaped line per line, indented. */
static void escaped_lines(sb_t *b, const sb_t *text)
{
    char *lines[MAX_DIFF_LINES];
    int n = display_lines(text, lines, MAX_DIFF_LINES);
    for (int i = 0; i < n; i++) {
        sb_printf(b, "  %s\n", lines[i]);
        free(lines[i]);
    }
}

static const char *status_text(bqc_status_t s)
{
    switch (s) {
    case BQC_OK:
        return "ok";
    case BQC_TIMEOUT:
        return "deadline passed";
    case BQC_CLOSED:
        return "connection closed";
    case BQC_FRAMING:
        return "framing error";
    case BQC_DATA:
        return "unexpected data";
    }
    return "?";
}

/* The normalised text of an event from reply `from` on, plus its ending. */
static sb_t event_text(const bqc_event_t *ev, int from, int upto, bool reference,
                       const bqc_mode_t *mode)
{
    sb_t b = {0};
    sb_add(&b, "", 0);
    for (int i = from; i < ev->nreplies && i < upto; i++) {
        sb_t r = normalise(ev->replies[i], ev->lens[i], reference, mode);
        sb_add(&b, r.s, r.len);
        free(r.s);
    }
    if (upto >= ev->nreplies && ev->status != BQC_OK) {
        if (ev->step->op == BQC_RECV)
            sb_printf(&b, "<%s after %d of %d replies>\n", status_text(ev->status), ev->nreplies,
                      ev->step->count);
        else
            sb_printf(&b, "<%s>\n", status_text(ev->status));
        if (ev->tail_len) {
            sb_puts(&b, "<bytes:>\n");
            sb_add(&b, ev->tail, ev->tail_len);
            if (ev->tail[ev->tail_len - 1] != '\n')
                sb_puts(&b, "\n");
        }
    }
    return b;
}

static void header(sb_t *b, const bqc_case_t *c, const bqc_step_t *st, const char *what)
{
    sb_printf(b, "%s.bq:%d: `%s`: %s\n", c->name, st->line, st->text, what);
    for (const bqc_step_t *p = st; p >= c->steps; p--) {
        if (p->op == BQC_SEND && p->conn == st->conn) {
            char *e = bqc_escape(p->data, p->len);
            sb_printf(b, "  last sent on %s (line %d): \"%.300s\"%s\n", c->conn_names[st->conn],
                      p->line, e, strlen(e) > 300 ? "..." : "");
            free(e);
            break;
        }
    }
}

/* A side that failed an assertion of its own (silence, EOF, a deadline). */
static bool own_failure(sb_t *b, const bqc_case_t *c, const bqc_event_t *ev, const char *side,
                        const bqc_mode_t *mode)
{
    const bqc_step_t *st = ev->step;
    if (ev->status == BQC_OK || (st->op == BQC_RECV && st->timeout_ok))
        return false;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", side,
             st->op == BQC_SILENT ? "expected silence"
             : st->op == BQC_EOF  ? "expected the server to close the connection"
                                  : "expected all replies within the deadline");
    header(b, c, st, what);
    sb_t t = event_text(ev, 0, ev->nreplies, strcmp(side, "reference") == 0, mode);
    sb_printf(b, "%s saw:\n", side);
    escaped_lines(b, &t);
    free(t.s);
    return true;
}

static bool compare_literal(sb_t *b, const bqc_case_t *c, const bqc_event_t *ref,
                            const bqc_event_t *ours, const bqc_mode_t *mode)
{
    const bqc_step_t *st = ours->step;
    sb_t got = event_text(ours, 0, ours->nreplies, false, mode), want = {0};
    sb_add(&want, st->data, st->len);
    bool ok = ours->status == BQC_OK && got.len == want.len && memcmp(got.s, want.s, got.len) == 0;
    if (!ok) {
        char what[200];
        snprintf(what, sizeof what,
                 "ours differs from the expect-ours literal (deviation %s, "
                 "reference section %s)",
                 st->deviation->id, st->deviation->section);
        header(b, c, st, what);
        sb_puts(b, "--- expected (expect-ours)\n+++ ours\n");
        unified_diff(b, &want, &got);
        sb_t r = event_text(ref, 0, ref->nreplies, true, mode);
        sb_puts(b, "(the reference answered:)\n");
        escaped_lines(b, &r);
        free(r.s);
    }
    free(got.s);
    free(want.s);
    return ok;
}

/* Compares one event pair; appends the report to b and returns false on a mismatch. */
static bool compare_event(sb_t *b, const bqc_case_t *c, const bqc_event_t *ref,
                          const bqc_event_t *ours, const bqc_mode_t *mode)
{
    const bqc_step_t *st = ref->step;
    if (st->deviation && !mode->selftest)
        return compare_literal(b, c, ref, ours, mode);
    if (own_failure(b, c, ref, "reference", mode) || own_failure(b, c, ours, "ours", mode))
        return false;
    int n = ref->nreplies < ours->nreplies ? ref->nreplies : ours->nreplies, i;
    for (i = 0; i < n; i++) {
        sb_t ra = normalise(ref->replies[i], ref->lens[i], true, mode);
        sb_t oa = normalise(ours->replies[i], ours->lens[i], false, mode);
        bool same = replies_match(&ra, &oa);
        free(ra.s);
        free(oa.s);
        if (!same)
            break;
    }
    if (i == ref->nreplies && i == ours->nreplies && ref->status == ours->status &&
        ref->tail_len == ours->tail_len &&
        (ref->tail_len == 0 || memcmp(ref->tail, ours->tail, ref->tail_len) == 0))
        return true;
    char what[64];
    snprintf(what, sizeof what, "first mismatch in reply %d of %d", i + 1, st->count);
    header(b, c, st, what);
    sb_t rt = event_text(ref, i, i + 1, true, mode), ot = event_text(ours, i, i + 1, false, mode);
    sb_puts(b, "--- reference (normalised)\n+++ ours (normalised)\n");
    unified_diff(b, &rt, &ot);
    free(rt.s);
    free(ot.s);
    return false;
}

char *bqc_compare(const bqc_case_t *c, const bqc_transcript_t *ref, const bqc_transcript_t *ours,
                  const bqc_mode_t *mode)
{
    sb_t b = {0};
    int n = ref->nevents < ours->nevents ? ref->nevents : ours->nevents;
    for (int i = 0; i < n; i++)
        if (!compare_event(&b, c, &ref->events[i], &ours->events[i], mode))
            return b.s;
    if (ref->error[0])
        sb_printf(&b, "%s.bq: reference: %s\n", c->name, ref->error);
    if (ours->error[0])
        sb_printf(&b, "%s.bq: ours: %s\n", c->name, ours->error);
    if (!b.s && ref->nevents != ours->nevents)
        sb_printf(&b, "%s.bq: %d observations on the reference, %d on ours\n", c->name,
                  ref->nevents, ours->nevents);
    return b.s;
}
