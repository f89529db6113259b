/* A DNS server for tests (fakedns.h). */
#include "tests/support/fakedns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELD_MAX 256
#define PKT_MAX 512

typedef struct query {
    struct sockaddr_in from;
    uint8_t pkt[PKT_MAX];
    size_t len;
} query_t;

struct bqt_dns {
    int fd, port;
    pthread_t thread;
    pthread_mutex_t lock;
    bool hold, quit;
    char drop[64]; /* queries for names whose first label is this are never answered */
    size_t queries;
    query_t held[HELD_MAX];
    size_t nheld;
};

/* The end of the question section of pkt[0..len), or 0 when malformed. */
static size_t question_end(const uint8_t *pkt, size_t len)
{
    size_t i = 12;
    while (i < len && pkt[i] != 0) {
        if (pkt[i] & 0xc0)
            return 0; /* no compression in a question we accept */
        i += 1 + pkt[i];
    }
    return i + 5 <= len ? i + 5 : 0; /* the root label, QTYPE, QCLASS */
}

/* Answers query q: 127.0.0.1 for an A question, no record otherwise. */
static void answer(const bqt_dns_t *d, const query_t *q)
{
    size_t qend = question_end(q->pkt, q->len);
    if (q->len < 12 || qend == 0)
        return;
    uint8_t out[PKT_MAX + 16];
    memcpy(out, q->pkt, qend);
    uint16_t qtype = (uint16_t)(q->pkt[qend - 4] << 8 | q->pkt[qend - 3]);
    bool a = qtype == 1;
    out[2] = (uint8_t)(0x80 | (q->pkt[2] & 0x01)); /* QR, RD as asked */
    out[3] = 0x80;                                 /* RA, NOERROR */
    out[4] = 0, out[5] = 1;                        /* one question */
    out[6] = 0, out[7] = a ? 1 : 0;                /* answers */
    memset(out + 8, 0, 4);                         /* no authority, no additional */
    size_t n = qend;
    if (a) {
        static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 127, 0, 0, 1};
        memcpy(out + n, rr, sizeof rr);
        n += sizeof rr;
    }
    sendto(d->fd, out, n, 0, (const struct sockaddr *)&q->from, sizeof q->from);
}

/* Whether q asks about a name whose first label is label ("" never). */
static bool first_label_is(const query_t *q, const char *label)
{
    size_t n = strlen(label);
    return n > 0 && q->len > 13 + n && q->pkt[12] == n && memcmp(q->pkt + 13, label, n) == 0;
}

static void *serve(void *arg)
{
    bqt_dns_t *d = arg;
    for (;;) {
        struct pollfd p = {.fd = d->fd, .events = POLLIN};
        int r = poll(&p, 1, 50);
        pthread_mutex_lock(&d->lock);
        bool quit = d->quit;
        pthread_mutex_unlock(&d->lock);
        if (quit)
            return NULL;
        if (r <= 0)
            continue;
        query_t q;
        socklen_t fl = sizeof q.from;
        ssize_t len = recvfrom(d->fd, q.pkt, sizeof q.pkt, 0, (struct sockaddr *)&q.from, &fl);
        if (len <= 0)
            continue;
        q.len = (size_t)len;
        pthread_mutex_lock(&d->lock);
        d->queries++;
        bool drop = first_label_is(&q, d->drop);
        bool keep = !drop && d->hold && d->nheld < HELD_MAX;
        if (keep)
            d->held[d->nheld++] = q;
        pthread_mutex_unlock(&d->lock);
        if (!keep && !drop)
            answer(d, &q);
    }
}

bqt_dns_t *bqt_dns_start(void)
{
    bqt_dns_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (d->fd < 0 || bind(d->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(d->fd, (struct sockaddr *)&a, &al) != 0) {
        if (d->fd >= 0)
            close(d->fd);
        free(d);
        return NULL;
    }
    d->port = ntohs(a.sin_port);
    pthread_mutex_init(&d->lock, NULL);
    if (pthread_create(&d->thread, NULL, serve, d) != 0) {
        close(d->fd);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return NULL;
    }
    return d;
}

int bqt_dns_port(const bqt_dns_t *d)
{
    return d->port;
}

void bqt_dns_hold(bqt_dns_t *d, bool hold)
{
    pthread_mutex_lock(&d->lock);
    d->hold = hold;
    size_t n = hold ? 0 : d->nheld;
    for (size_t i = 0; i < n; i++)
        answer(d, &d->held[i]);
    if (!hold)
        d->nheld = 0;
    pthread_mutex_unlock(&d->lock);
}

void bqt_dns_drop(bqt_dns_t *d, const char *label)
{
    pthread_mutex_lock(&d->lock);
    snprintf(d->drop, sizeof d->drop, "%s", label ? label : "");
    pthread_mutex_unlock(&d->lock);
}

size_t bqt_dns_queries(bqt_dns_t *d)
{
    pthread_mutex_lock(&d->lock);
    size_t n = d->queries;
    pthread_mutex_unlock(&d->lock);
    return n;
}

void bqt_dns_stop(bqt_dns_t *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->quit = true;
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    close(d->fd);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
