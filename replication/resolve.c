/* Name resolution on the loop with c-ares (resolve.h). Each lookup has its
 * own c-ares channel, driven by uv_poll handles on the channel's sockets
 * (sock_state_cb) and one timer (c-ares' retries and the lookup's
 * deadline). The result is kept until the timer's next turn, so that the
 * callback never runs inside c-ares (nor inside bq_resolve_start, where a
 * numeric address or /etc/hosts answers at once); the channel is destroyed
 * from a loop callback too, never from one of its own. */
#define _DEFAULT_SOURCE 1 /* fd_set and struct timeval, which ares.h uses */

#include "replication/resolve.h"

#include <sys/select.h>
#include <sys/time.h>

#include <ares.h>
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SOCKS 16 /* a UDP and a TCP socket per DNS server, at most */
#define TRY_MS 1000  /* c-ares' timeout of one query to one server */
#define TRIES 2

typedef struct rsock {
    uv_poll_t poll;
    ares_socket_t fd; /* ARES_SOCKET_BAD: the slot is free */
    bool closing;
    bq_resolve_t *q;
} rsock_t;

struct bq_resolve {
    uv_loop_t *loop;
    ares_channel ch;
    uv_timer_t timer;
    rsock_t socks[MAX_SOCKS];
    int handles;       /* open handles (the timer, polls): freed when 0 */
    uint64_t deadline; /* uv_now */
    bq_resolve_cb cb;
    void *arg;
    int status;              /* of the result, once have */
    struct addrinfo *result; /* owned until delivered */
    bool have, done, torn;   /* a result kept; delivered or cancelled; channel gone */
    bool has_ch;             /* a name, not a numeric address: c-ares looks it up */
};

static size_t live;

size_t bq_resolve_live(void)
{
    return live;
}

void bq_resolve_free(struct addrinfo *addrs)
{
    while (addrs) {
        struct addrinfo *next = addrs->ai_next;
        free(addrs);
        addrs = next;
    }
}

static void handle_closed(uv_handle_t *h)
{
    bq_resolve_t *q = h->data;
    if (h->type == UV_POLL) {
        rsock_t *s = (rsock_t *)h;
        s->fd = ARES_SOCKET_BAD;
        s->closing = false;
    }
    if (--q->handles == 0) {
        bq_resolve_free(q->result);
        free(q);
        live--;
    }
}

static void close_sock(rsock_t *s)
{
    if (s->fd != ARES_SOCKET_BAD && !s->closing) {
        s->closing = true;
        uv_close((uv_handle_t *)&s->poll, handle_closed);
    }
}

/* Ends q for good: no more c-ares, every handle closing. From a loop
 * callback (or cancel), never from inside c-ares. */
static void teardown(bq_resolve_t *q)
{
    if (q->torn)
        return;
    q->torn = true;
    for (size_t i = 0; i < MAX_SOCKS; i++)
        close_sock(&q->socks[i]); /* unwatched before c-ares closes the sockets */
    if (q->has_ch)
        ares_destroy(q->ch); /* its callbacks see torn and do nothing */
    uv_close((uv_handle_t *)&q->timer, handle_closed);
}

static void on_timer(uv_timer_t *t);

/* Arms the timer for c-ares' next timeout, or the deadline if sooner. */
static void rearm(bq_resolve_t *q)
{
    uint64_t now = uv_now(q->loop);
    uint64_t ms = q->deadline > now ? q->deadline - now : 0;
    struct timeval tv, *next = q->has_ch ? ares_timeout(q->ch, NULL, &tv) : NULL;
    if (next) {
        uint64_t c = (uint64_t)next->tv_sec * 1000 + ((uint64_t)next->tv_usec + 999) / 1000;
        ms = c < ms ? c : ms;
    }
    uv_timer_start(&q->timer, on_timer, ms, 0);
}

/* Keeps a result for the timer's next turn. */
static void keep(bq_resolve_t *q, int status, struct addrinfo *result)
{
    if (q->have || q->torn) {
        bq_resolve_free(result);
        return;
    }
    q->have = true;
    q->status = status;
    q->result = result;
    uv_timer_start(&q->timer, on_timer, 0, 0);
}

static void on_timer(uv_timer_t *t)
{
    bq_resolve_t *q = t->data;
    if (!q->have && uv_now(q->loop) >= q->deadline)
        keep(q, UV_ETIMEDOUT, NULL);
    if (!q->have && q->has_ch) {
        ares_process_fd(q->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* c-ares' timeouts */
        if (!q->have) {
            rearm(q);
            return;
        }
    }
    struct addrinfo *result = q->result;
    q->result = NULL;
    if (!q->done) {
        q->done = true;
        q->cb(q->arg, q->status, result);
    } else {
        bq_resolve_free(result);
    }
    teardown(q);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    rsock_t *s = (rsock_t *)h; /* the poll is its first member */
    bq_resolve_t *q = s->q;
    if (q->torn || q->have)
        return;
    ares_socket_t rd = status < 0 || (events & UV_READABLE) ? s->fd : ARES_SOCKET_BAD;
    ares_socket_t wr = status < 0 || (events & UV_WRITABLE) ? s->fd : ARES_SOCKET_BAD;
    ares_process_fd(q->ch, rd, wr);
    if (!q->have && !q->torn)
        rearm(q);
}

/* c-ares tells which of its sockets to watch, and for what. */
static void sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
    bq_resolve_t *q = data;
    rsock_t *s = NULL, *free_slot = NULL;
    if (q->torn)
        return;
    for (size_t i = 0; i < MAX_SOCKS; i++) {
        if (q->socks[i].fd == fd && !q->socks[i].closing)
            s = &q->socks[i];
        else if (q->socks[i].fd == ARES_SOCKET_BAD && !free_slot)
            free_slot = &q->socks[i];
    }
    if (!readable && !writable) {
        if (s)
            close_sock(s);
        return;
    }
    if (!s) {
        if (!free_slot || uv_poll_init_socket(q->loop, &free_slot->poll, fd) != 0) {
            keep(q, UV_EAI_FAIL, NULL); /* cannot watch it: give up on the lookup */
            return;
        }
        s = free_slot;
        s->fd = fd;
        s->q = q;
        s->poll.data = q;
        q->handles++;
    }
    uv_poll_start(&s->poll, (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0), on_poll);
}

static int uv_error_of(int ares_status)
{
    switch (ares_status) {
    case ARES_ENOTFOUND:
    case ARES_ENODATA:
    case ARES_ENONAME:
        return UV_EAI_NONAME;
    case ARES_ETIMEOUT:
        return UV_ETIMEDOUT;
    case ARES_ENOMEM:
        return UV_ENOMEM;
    default:
        return UV_EAI_FAIL;
    }
}

/* c-ares' answer, as a struct addrinfo list of our own. */
static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    bq_resolve_t *q = arg;
    (void)timeouts;
    if (q->torn || status == ARES_EDESTRUCTION || status == ARES_ECANCELLED) {
        if (res)
            ares_freeaddrinfo(res);
        return;
    }
    struct addrinfo *head = NULL, **tail = &head;
    int err = status == ARES_SUCCESS ? 0 : uv_error_of(status);
    for (struct ares_addrinfo_node *n = res ? res->nodes : NULL; n && err == 0; n = n->ai_next) {
        struct addrinfo *a = calloc(1, sizeof *a + n->ai_addrlen);
        if (!a) {
            err = UV_ENOMEM;
            break;
        }
        a->ai_family = n->ai_family;
        a->ai_socktype = SOCK_STREAM;
        a->ai_protocol = IPPROTO_TCP;
        a->ai_addrlen = (socklen_t)n->ai_addrlen;
        a->ai_addr = (struct sockaddr *)(a + 1);
        memcpy(a->ai_addr, n->ai_addr, n->ai_addrlen);
        *tail = a;
        tail = &a->ai_next;
    }
    if (res)
        ares_freeaddrinfo(res);
    if (err == 0 && !head)
        err = UV_EAI_NONAME;
    if (err != 0) {
        bq_resolve_free(head);
        head = NULL;
    }
    keep(q, err, head);
}

/* A numeric address (IPv4 or IPv6) as a one-entry list in *out; 0, 1 when
 * host is a name, or UV_ENOMEM. */
static int numeric(const char *host, const char *port, struct addrinfo **out)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    int p = atoi(port);
    socklen_t len;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)p);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)p);
        len = sizeof *v6;
    } else {
        return 1;
    }
    struct addrinfo *a = calloc(1, sizeof *a + len);
    if (!a)
        return UV_ENOMEM;
    a->ai_family = ss.ss_family;
    a->ai_socktype = SOCK_STREAM;
    a->ai_protocol = IPPROTO_TCP;
    a->ai_addrlen = len;
    a->ai_addr = (struct sockaddr *)(a + 1);
    memcpy(a->ai_addr, &ss, len);
    *out = a;
    return 0;
}

/* The c-ares channel of one lookup. 0 or a libuv error. */
static int open_channel(bq_resolve_t *q)
{
    static bool library_ready;
    if (!library_ready) {
        if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
            return UV_ENOMEM;
        library_ready = true;
    }
    struct ares_options o;
    memset(&o, 0, sizeof o);
    o.sock_state_cb = sock_state;
    o.sock_state_cb_data = q;
    o.timeout = TRY_MS;
    o.tries = TRIES;
    int r =
        ares_init_options(&q->ch, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
    if (r != ARES_SUCCESS)
        return r == ARES_ENOMEM ? UV_ENOMEM : UV_EAI_FAIL;
#ifdef BQ_TEST_HOOKS /* only with -DBQ_TEST_HOOKS=ON (CMakeLists.txt); docs/security.md */
    const char *servers = getenv("BQ_TEST_DNS_SERVERS");
    if (servers && *servers && ares_set_servers_ports_csv(q->ch, servers) != ARES_SUCCESS) {
        ares_destroy(q->ch);
        return UV_EINVAL;
    }
#endif
    return 0;
}

int bq_resolve_start(uv_loop_t *loop, const char *host, const char *port, uint64_t timeout_ms,
                     bq_resolve_cb cb, void *arg, bq_resolve_t **out)
{
    *out = NULL;
    bq_resolve_t *q = calloc(1, sizeof *q);
    if (!q)
        return UV_ENOMEM;
    *q = (bq_resolve_t){.loop = loop, .cb = cb, .arg = arg};
    for (size_t i = 0; i < MAX_SOCKS; i++)
        q->socks[i].fd = ARES_SOCKET_BAD;
    struct addrinfo *addr = NULL;
    int r = numeric(host, port, &addr);
    if (r == 1)
        r = open_channel(q);
    if (r != 0) {
        free(q);
        return r;
    }
    live++;
    uv_timer_init(loop, &q->timer); /* cannot fail */
    q->timer.data = q;
    q->handles = 1;
    q->deadline = uv_now(loop) + timeout_ms;
    if (addr) { /* numeric: delivered on the timer's first turn */
        keep(q, 0, addr);
        *out = q;
        return 0;
    }
    q->has_ch = true;
    struct ares_addrinfo_hints hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = ARES_AI_NUMERICSERV;
    ares_getaddrinfo(q->ch, host, port, &hints, on_addrinfo, q);
    if (!q->have)
        rearm(q);
    *out = q;
    return 0;
}

void bq_resolve_cancel(bq_resolve_t *q)
{
    if (!q || q->done)
        return;
    q->done = true;
    teardown(q);
}
