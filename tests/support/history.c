/* The history recorder (history.h): operations are appended under a mutex,
 * so workers may be threads; and the printing of a checker's report with
 * the history around each bad id. The snapshot client is in
 * history_snapshot.c, the checker in history_check.c. */
#define _GNU_SOURCE /* vasprintf */

#include "tests/support/history_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SHOW_BODY 48
#define SHOW_OPS 40
#define MARKS_AFTER 4 /* marks shown after the last operation on a bad id */

uint64_t bqh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bqh_history_t *bqh_new(void)
{
    bqh_history_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->lock, NULL);
    h->t0 = bqh_now_ns();
    return h;
}

void bqh_free(bqh_history_t *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->ops[i].body);
    free(h->ops);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

char *bqh__copy_bytes(const char *p, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        if (len)
            memcpy(c, p, len);
        c[len] = '\0';
    }
    return c;
}

/* Appends o (taking its body); the caller holds the lock. Out of memory
 * aborts: a history with holes would make the checker lie. */
void bqh__append_locked(bqh_history_t *h, const op_t *o)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 4096;
        op_t *p = realloc(h->ops, cap * sizeof *p);
        if (!p)
            abort();
        h->ops = p;
        h->cap = cap;
    }
    h->ops[h->n++] = *o;
}

bool bqh__is_mark(const op_t *o)
{
    return o->kind >= OP_MARK;
}

uint8_t bqh__tube_locked(bqh_history_t *h, const char *tube)
{
    if (!tube)
        return 0;
    for (size_t i = 0; i < h->ntubes; i++)
        if (strncmp(h->tubes[i], tube, BQH_TUBE_LEN - 1) == 0)
            return (uint8_t)(i + 1);
    if (h->ntubes == BQH_MAX_TUBES)
        abort(); /* a test naming this many tubes is wrong */
    snprintf(h->tubes[h->ntubes], BQH_TUBE_LEN, "%s", tube);
    return (uint8_t)++h->ntubes;
}

/* Appends o with a copy of body[0..len) (unless NULL) and tube. */
static void append(bqh_history_t *h, op_t o, const char *body, size_t len, const char *tube)
{
    if (body) {
        o.body = bqh__copy_bytes(body, len);
        o.len = len;
        if (!o.body)
            abort();
    }
    pthread_mutex_lock(&h->lock);
    o.tube = bqh__tube_locked(h, tube);
    bqh__append_locked(h, &o);
    pthread_mutex_unlock(&h->lock);
}

void bqh_put_job(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                 bqh_outcome_t out, uint64_t id, const char *body, size_t len, const bqh_job_t *job)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .id = out == BQH_ACKED ? id : 0,
              .worker = worker,
              .kind = OP_PUT,
              .out = (uint8_t)out,
              .pri = job ? job->pri : 0,
              .delay = job ? job->delay : 0};
    append(h, o, body, len, job ? job->tube : NULL);
}

void bqh_put(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
             uint64_t id, const char *body, size_t len)
{
    bqh_put_job(h, worker, sent_ns, reply_ns, out, id, body, len, NULL);
}

void bqh_delete(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                bqh_outcome_t out, uint64_t id)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .id = id,
              .worker = worker,
              .kind = OP_DELETE,
              .out = (uint8_t)out};
    append(h, o, NULL, 0, NULL);
}

void bqh_reserve(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, uint64_t id,
                 const char *body, size_t len)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .id = id,
              .worker = worker,
              .kind = OP_RESERVE,
              .out = BQH_ACKED};
    append(h, o, body, len, NULL);
}

void bqh_job_cmd(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns,
                 bqh_outcome_t out, bqh_cmd_t cmd, uint64_t id, uint32_t pri, uint32_t delay)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .id = id,
              .worker = worker,
              .kind = OP_CMD,
              .cmd = (uint8_t)cmd,
              .out = (uint8_t)out,
              .pri = pri,
              .delay = delay};
    append(h, o, NULL, 0, NULL);
}

void bqh_kick(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
              const char *tube, uint32_t bound, uint64_t kicked)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .worker = worker,
              .kind = OP_KICK,
              .out = (uint8_t)out,
              .pri = bound,
              .arg = kicked};
    append(h, o, NULL, 0, tube);
}

void bqh_pause(bqh_history_t *h, int worker, uint64_t sent_ns, uint64_t reply_ns, bqh_outcome_t out,
               const char *tube, uint32_t secs)
{
    op_t o = {.sent = sent_ns,
              .reply = reply_ns,
              .worker = worker,
              .kind = OP_PAUSE,
              .out = (uint8_t)out,
              .delay = secs};
    append(h, o, NULL, 0, tube);
}

/* Appends a mark of kind (a note, a fault, settled) with the text of fmt. */
static void vmark(bqh_history_t *h, op_kind_t kind, const char *fmt, va_list ap)
{
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    if (n < 0)
        abort();
    pthread_mutex_lock(&h->lock);
    uint64_t now = bqh_now_ns(); /* under the lock: marks stay in time order */
    op_t o = {.sent = now,
              .reply = now,
              .worker = BQH_VERIFIER,
              .kind = (uint8_t)kind,
              .body = text,
              .len = (size_t)n};
    bqh__append_locked(h, &o);
    pthread_mutex_unlock(&h->lock);
}

void bqh_mark(bqh_history_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmark(h, OP_MARK, fmt, ap);
    va_end(ap);
}

void bqh_fault(bqh_history_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmark(h, OP_FAULT, fmt, ap);
    va_end(ap);
}

void bqh_settled(bqh_history_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmark(h, OP_SETTLED, fmt, ap);
    va_end(ap);
}

/* ---- printing ---- */

void bqh_report_summary(FILE *f, const bqh_report_t *r)
{
    fprintf(f,
            "history: puts %zu acked, %zu unknown, %zu refused; deletes %zu acked, %zu unknown, "
            "%zu not found, %zu refused; reserves %zu; other commands %zu; faults %zu, unknown "
            "outcomes in flight at one %zu; present %zu, states checked %zu (%zu past their "
            "delay); allowed: lost %zu, resurrected %zu, not found %zu; problems:",
            r->puts_acked, r->puts_unknown, r->puts_refused, r->deletes_acked, r->deletes_unknown,
            r->deletes_not_found, r->deletes_refused, r->reserves, r->commands, r->faults,
            r->unknown_excused, r->present, r->states_checked, r->states_lenient, r->allowed_lost,
            r->allowed_resurrected, r->allowed_not_found);
    for (int k = 0; k < BQH_PROBLEMS; k++)
        fprintf(f, " %s %zu%s", bqh_problem_name((bqh_problem_t)k), r->problems[k],
                k + 1 < BQH_PROBLEMS ? "," : "\n");
}

/* Writes body[0..len) escaped and cut to SHOW_BODY characters. */
static void print_body(FILE *f, const char *body, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len && i < SHOW_BODY; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch >= 32 && ch < 127 && ch != '"' && ch != '\\')
            fputc(ch, f);
        else
            fprintf(f, "\\x%02x", ch);
    }
    fprintf(f, "\"%s", len > SHOW_BODY ? "..." : "");
}

static const char *tube_of(const bqh_history_t *h, const op_t *o)
{
    return o->tube ? h->tubes[o->tube - 1] : "?";
}

/* Writes what op o asked (without its outcome). */
static void print_command(FILE *f, const bqh_history_t *h, const op_t *o)
{
    static const char *const cmds[] = {"bury", "release", "kick-job", "touch"};
    static const char *const states[] = {"ready", "delayed", "buried", "reserved"};
    if (o->kind == OP_PUT)
        fprintf(f, o->tube ? "put %s pri %u delay %u " : "put ", tube_of(h, o), o->pri, o->delay);
    else if (o->kind == OP_DELETE)
        fprintf(f, "delete %" PRIu64, o->id);
    else if (o->kind == OP_CMD)
        fprintf(f, "%s %" PRIu64 " pri %u delay %u", cmds[o->cmd], o->id, o->pri, o->delay);
    else if (o->kind == OP_KICK)
        fprintf(f, "kick %u on %s (KICKED %" PRIu64 ")", o->pri, tube_of(h, o), o->arg);
    else if (o->kind == OP_PAUSE)
        fprintf(f, "pause-tube %s %u", tube_of(h, o), o->delay);
    else if (o->kind == OP_RESERVE)
        fprintf(f, "RESERVED %" PRIu64 " ", o->id);
    else
        fprintf(f, "snapshot shows %" PRIu64 " %s%s%s pri %u delay %u ", o->id,
                o->tube ? tube_of(h, o) : "", o->tube ? " " : "", o->tube ? states[o->state] : "",
                o->pri, o->delay);
    if (o->body && (o->kind == OP_PUT || o->kind == OP_RESERVE || o->kind == OP_SEEN))
        print_body(f, o->body, o->len);
}

static void print_op(FILE *f, const bqh_history_t *h, const op_t *o)
{
    static const char *const outs[] = {"ok", "NOT_FOUND", "refused", "unknown (connection died)"};
    static const char *const marks[] = {"--", "-- FAULT:", "-- settled:"};
    fprintf(f, "    %+.6f s  ", bqh__rel(h, o->sent));
    if (bqh__is_mark(o)) {
        fprintf(f, "%s %s\n", marks[o->kind - OP_MARK], o->body);
        return;
    }
    if (o->worker == BQH_VERIFIER)
        fprintf(f, "verifier ");
    else
        fprintf(f, "worker %d ", o->worker);
    print_command(f, h, o);
    fprintf(f, " -> %s", outs[o->out]);
    if (o->kind == OP_PUT && o->out == BQH_ACKED)
        fprintf(f, " id %" PRIu64, o->id);
    fprintf(f, "%s (reply %+.6f s)\n", o->voided ? " [undone: not promised]" : "",
            bqh__rel(h, o->reply));
}

/* True when op o concerns id or one of the bodies seen with it, or kicks
 * the tube it was put in (tube, 0: none). */
static bool concerns(const bqh_history_t *h, const op_t *o, uint64_t id, const ref_t *bodies,
                     size_t nb, uint8_t tube)
{
    if (bqh__is_mark(o))
        return false;
    if (o->kind == OP_KICK)
        return tube && o->tube == tube;
    if (o->id == id)
        return true;
    for (size_t i = 0; o->body && i < nb; i++) {
        const op_t *b = &h->ops[bodies[i].op];
        if (bqh__cmp_body_len(b, o->body, o->len) == 0)
            return true;
    }
    return false;
}

/* Prints the operations on id and its bodies, with the marks among them,
 * the last one before them and the first few after them. */
static void print_id_history(FILE *f, const bqh_history_t *h, uint64_t id)
{
    ref_t bodies[8], *sel = malloc((h->n + 1) * sizeof *sel);
    size_t nb = 0, ns = 0;
    uint8_t tube = 0;
    if (!sel)
        return;
    for (size_t i = 0; i < h->n && nb < 8; i++)
        if (h->ops[i].id == id && h->ops[i].body && !bqh__is_mark(&h->ops[i])) {
            bodies[nb++] = (ref_t){0, i};
            tube = h->ops[i].kind == OP_PUT && h->ops[i].tube ? h->ops[i].tube : tube;
        }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < h->n; i++) /* the job's own operations */
        if (concerns(h, &h->ops[i], id, bodies, nb, 0)) {
            lo = h->ops[i].sent < lo ? h->ops[i].sent : lo;
            hi = h->ops[i].reply > hi ? h->ops[i].reply : hi;
        }
    for (size_t i = 0; i < h->n; i++) /* and the kicks of its tube meanwhile */
        if (concerns(h, &h->ops[i], id, bodies, nb, tube) && h->ops[i].sent >= lo &&
            h->ops[i].sent <= hi)
            sel[ns++] = (ref_t){h->ops[i].sent, i};
    for (size_t i = 0, after = 0; i < h->n; i++) /* marks are appended in time order */
        if (bqh__is_mark(&h->ops[i]) && (h->ops[i].sent <= hi || after++ < MARKS_AFTER))
            sel[ns++] = (ref_t){h->ops[i].sent, i};
    qsort(sel, ns, sizeof *sel, bqh__cmp_ref);
    size_t from = 0; /* the last mark before the first op on id, then the rest */
    while (from + 1 < ns && sel[from + 1].k < lo && bqh__is_mark(&h->ops[sel[from + 1].op]))
        from++;
    for (size_t i = from, shown = 0; i < ns && shown < SHOW_OPS; i++, shown++)
        print_op(f, h, &h->ops[sel[i].op]);
    if (ns - from > SHOW_OPS)
        fprintf(f, "    ... %zu more\n", ns - from - SHOW_OPS);
    free(sel);
}

void bqh_report_print(FILE *f, const bqh_history_t *h, const bqh_report_t *rep)
{
    bqh_history_t *mh = (bqh_history_t *)h; /* the lock only */
    bqh_report_summary(f, rep);
    if (rep->hidden)
        fprintf(f, "%zu job(s) counted by stats were found neither by reserve nor by peek\n",
                rep->hidden);
    pthread_mutex_lock(&mh->lock);
    for (size_t i = 0; i < rep->nbad; i++) {
        fprintf(f, "%s: id %" PRIu64 ": %s\n", bqh_problem_name(rep->bad[i].kind), rep->bad[i].id,
                rep->bad[i].why);
        print_id_history(f, h, rep->bad[i].id);
    }
    pthread_mutex_unlock(&mh->lock);
    fflush(f);
}

bool bqh_known_refusal(const char *line)
{
    return !strcmp(line, "DRAINING\r\n") || !strcmp(line, "OUT_OF_MEMORY\r\n") ||
           !strcmp(line, "INTERNAL_ERROR\r\n");
}
