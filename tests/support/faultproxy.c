/* The fault proxy's engine: one thread polls the listener, a self-pipe and
 * both sockets of every link, and moves bytes through a bounded buffer per
 * direction. The mode decides what the thread does with them: forward
 * (PASS), only buffer (STALL, and links that predate a BLACKHOLE; one
 * direction under HOLD_UP or HOLD_DOWN), close (DROP) or discard (links
 * accepted under BLACKHOLE).
 *
 * Test threads never touch a link. They post a request (mode, cut) under
 * the mutex, write a byte to the self-pipe and wait on a condition variable
 * until the thread has applied it; the thread reads requests only when the
 * pipe wakes it. Counters are updated under the same mutex around the
 * syscall that makes them observable (send, close), so a reader that has
 * seen the effect also sees the count. A socket with nothing to do is left
 * out of the poll set, so a hung-up peer on a held link cannot spin the
 * loop: it is noticed when the link next reads or writes it. */
#define _GNU_SOURCE /* accept4(), pipe2() */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/faultproxy.h"

#define MAX_LINKS 256
#define NO_CUT (-1LL)
#define CLIENT 0 /* index of the client socket in link_t.fd; UP reads it */
#define TARGET 1 /* index of the target socket; DOWN reads it */

/* One direction of a link: bytes read from fd[d], not yet sent to fd[1-d]. */
typedef struct flow {
    char buf[BQT_PROXY_BUFFER];
    size_t off, len;
    bool eof;         /* the source finished (FIN, or an error when reset) */
    bool reset;       /* the source failed: close the link instead of passing FIN */
    bool shut;        /* the FIN was passed on to the destination */
    long long budget; /* bytes left to send before the link is cut, NO_CUT */
} flow_t;

typedef struct link {
    struct link *next;
    int fd[2];       /* client, target (-1 until a connect starts) */
    int pi[2];       /* index of each socket in the poll set, -1 when absent */
    bool connecting; /* the target connect is in progress */
    bool hole;       /* accepted under BLACKHOLE: never connected, input discarded */
    bool dead;       /* closed; freed at the end of the loop iteration */
    flow_t flow[2];  /* BQT_PROXY_UP, BQT_PROXY_DOWN */
} link_t;

struct bqt_proxy {
    int listen_fd, port;
    int wake[2]; /* self-pipe: read end polled, write end poked by requests */
    struct sockaddr_storage target;
    socklen_t target_len;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t applied_cv;
    /* Requests and counters, under lock. */
    bqt_proxy_mode_t want_mode;
    long long want_cut[2];
    bool want_stop;
    unsigned long requested, applied;
    size_t bytes[2];
    int accepted, open;
    /* The proxy thread's own state. */
    bqt_proxy_mode_t mode;
    long long armed_cut[2]; /* for the next accepted link */
    link_t *links;
    int nlinks;
    struct pollfd pfds[2 + 2 * MAX_LINKS];
};

/* Both directions are held: nothing is connected onward either. */
static bool stalled(const bqt_proxy_t *p)
{
    return p->mode == BQT_PROXY_STALL || p->mode == BQT_PROXY_BLACKHOLE;
}

/* Direction d is held: read and buffered, not sent. */
static bool held(const bqt_proxy_t *p, int d)
{
    return stalled(p) || (p->mode == BQT_PROXY_HOLD_UP && d == BQT_PROXY_UP) ||
           (p->mode == BQT_PROXY_HOLD_DOWN && d == BQT_PROXY_DOWN);
}

static bool connected(const link_t *l, int side)
{
    return l->fd[side] >= 0 && !(side == TARGET && l->connecting);
}

/* Direction d may read more from its source. */
static bool can_read(const link_t *l, int d)
{
    const flow_t *f = &l->flow[d];
    return !l->dead && connected(l, d) && !f->eof && f->len < sizeof f->buf;
}

/* Direction d may send to its destination. */
static bool can_send(const bqt_proxy_t *p, const link_t *l, int d)
{
    const flow_t *f = &l->flow[d];
    return !l->dead && !l->hole && !held(p, d) && connected(l, 1 - d) && f->len > 0 &&
           f->budget != 0;
}

static void no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void close_link(bqt_proxy_t *p, link_t *l)
{
    if (l->dead)
        return;
    l->dead = true;
    pthread_mutex_lock(&p->lock);
    p->open--;
    for (int side = 0; side < 2; side++) {
        if (l->fd[side] >= 0)
            close(l->fd[side]);
        l->fd[side] = -1;
    }
    pthread_mutex_unlock(&p->lock);
}

static void close_all(bqt_proxy_t *p)
{
    for (link_t *l = p->links; l; l = l->next)
        close_link(p, l);
}

/* Starts the non-blocking connect to the target; closes the link when it
 * fails at once (the client then sees what a refused link looks like). */
static void start_connect(bqt_proxy_t *p, link_t *l)
{
    int fd = socket(p->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        close_link(p, l);
        return;
    }
    l->fd[TARGET] = fd;
    if (connect(fd, (struct sockaddr *)&p->target, p->target_len) == 0) {
        no_delay(fd);
    } else if (errno == EINPROGRESS || errno == EINTR) {
        l->connecting = true;
    } else {
        close_link(p, l);
    }
}

/* Completes connects that poll reported on. */
static void finish_connects(bqt_proxy_t *p)
{
    for (link_t *l = p->links; l; l = l->next) {
        if (l->dead || !l->connecting || l->pi[TARGET] < 0 || !p->pfds[l->pi[TARGET]].revents)
            continue;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(l->fd[TARGET], SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close_link(p, l);
            continue;
        }
        l->connecting = false;
        no_delay(l->fd[TARGET]);
    }
}

/* Reads what the source of direction d has, into the flow's buffer. */
static void fill(link_t *l, int d)
{
    flow_t *f = &l->flow[d];
    if (!can_read(l, d))
        return;
    if (f->off > 0) {
        memmove(f->buf, f->buf + f->off, f->len);
        f->off = 0;
    }
    ssize_t n = recv(l->fd[d], f->buf + f->len, sizeof f->buf - f->len, 0);
    if (n > 0) {
        f->len += (size_t)n;
    } else if (n == 0) {
        f->eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        f->eof = true;
        f->reset = true;
    }
}

/* Sends buffered bytes of direction d (never beyond the cut budget), then
 * passes the source's end on once the buffer is empty. */
static void drain(bqt_proxy_t *p, link_t *l, int d)
{
    flow_t *f = &l->flow[d];
    int dst = l->fd[1 - d];
    if (can_send(p, l, d)) {
        size_t want = f->len;
        if (f->budget != NO_CUT && (unsigned long long)f->budget < want)
            want = (size_t)f->budget;
        pthread_mutex_lock(&p->lock);
        ssize_t n = send(dst, f->buf + f->off, want, MSG_NOSIGNAL);
        if (n > 0)
            p->bytes[d] += (size_t)n;
        pthread_mutex_unlock(&p->lock);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            close_link(p, l);
            return;
        }
        if (n > 0) {
            f->off += (size_t)n;
            f->len -= (size_t)n;
            if (f->budget != NO_CUT)
                f->budget -= n;
        }
    }
    bool done = f->eof && f->len == 0 && !held(p, d);
    if (f->budget == 0 || (done && f->reset)) {
        close_link(p, l);
    } else if (done && !f->shut && connected(l, 1 - d)) {
        shutdown(dst, SHUT_WR);
        f->shut = true;
    }
}

/* Reads and discards what a black-holed client sends; closes on its end. */
static void discard(bqt_proxy_t *p, link_t *l)
{
    char sink[4096];
    ssize_t n = recv(l->fd[CLIENT], sink, sizeof sink, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        close_link(p, l);
}

/* Moves whatever can move on link l without blocking. */
static void pump(bqt_proxy_t *p, link_t *l)
{
    if (l->hole) {
        discard(p, l);
        return;
    }
    if (l->fd[TARGET] < 0 && !stalled(p))
        start_connect(p, l);
    for (int d = 0; d < 2 && !l->dead; d++) {
        fill(l, d);
        drain(p, l, d);
    }
    if (!l->dead && l->flow[0].shut && l->flow[1].shut)
        close_link(p, l);
}

/* Pumps every link and frees the closed ones. */
static void pump_all(bqt_proxy_t *p)
{
    link_t **pl = &p->links;
    for (link_t *l = p->links; l; l = l->next) {
        if (!l->dead)
            pump(p, l);
    }
    while (*pl) {
        link_t *l = *pl;
        if (l->dead) {
            *pl = l->next;
            p->nlinks--;
            free(l);
        } else {
            pl = &l->next;
        }
    }
}

static short events_for(const bqt_proxy_t *p, const link_t *l, int side)
{
    short ev = 0;
    if (l->hole)
        return side == CLIENT ? POLLIN : 0;
    if (can_read(l, side))
        ev |= POLLIN;
    if (can_send(p, l, 1 - side) || (side == TARGET && l->connecting))
        ev |= POLLOUT;
    return ev;
}

/* Fills the poll set: self-pipe, listener, then the sockets that wait for
 * something. Returns the number of entries. */
static nfds_t build_pollset(bqt_proxy_t *p)
{
    nfds_t n = 0;
    p->pfds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    p->pfds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
    for (link_t *l = p->links; l; l = l->next) {
        for (int side = 0; side < 2; side++) {
            short ev = events_for(p, l, side);
            l->pi[side] = ev ? (int)n : -1;
            if (ev)
                p->pfds[n++] = (struct pollfd){.fd = l->fd[side], .events = ev};
        }
    }
    return n;
}

static void add_link(bqt_proxy_t *p, int fd)
{
    link_t *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return;
    }
    no_delay(fd);
    l->fd[CLIENT] = fd;
    l->fd[TARGET] = -1;
    l->pi[CLIENT] = l->pi[TARGET] = -1;
    l->hole = p->mode == BQT_PROXY_BLACKHOLE;
    for (int d = 0; d < 2; d++) {
        l->flow[d].budget = l->hole ? NO_CUT : p->armed_cut[d];
        if (!l->hole)
            p->armed_cut[d] = NO_CUT;
    }
    l->next = p->links;
    p->links = l;
    p->nlinks++;
    pthread_mutex_lock(&p->lock);
    p->open++;
    pthread_mutex_unlock(&p->lock);
}

/* Accepts every pending connection; under DROP (or beyond MAX_LINKS) each
 * is closed at once. */
static void accept_all(bqt_proxy_t *p)
{
    for (;;) {
        int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0)
            return;
        pthread_mutex_lock(&p->lock);
        p->accepted++;
        if (p->mode == BQT_PROXY_DROP || p->nlinks >= MAX_LINKS) {
            close(fd);
            fd = -1;
        }
        pthread_mutex_unlock(&p->lock);
        if (fd >= 0)
            add_link(p, fd);
    }
}

/* Gives every open, non-black-holed link a cut budget for direction d; with
 * none open, arms the next link instead. */
static void apply_cut(bqt_proxy_t *p, int d, long long nbytes)
{
    bool any = false;
    for (link_t *l = p->links; l; l = l->next) {
        if (!l->dead && !l->hole) {
            l->flow[d].budget = nbytes;
            any = true;
        }
    }
    p->armed_cut[d] = any ? NO_CUT : nbytes;
}

/* Takes the posted requests and applies them; true when asked to stop. */
static bool apply_requests(bqt_proxy_t *p)
{
    char drainbuf[64];
    while (read(p->wake[0], drainbuf, sizeof drainbuf) > 0) {
    }
    pthread_mutex_lock(&p->lock);
    bqt_proxy_mode_t mode = p->want_mode;
    long long cut[2] = {p->want_cut[0], p->want_cut[1]};
    bool stop = p->want_stop;
    unsigned long seq = p->requested;
    p->want_cut[0] = p->want_cut[1] = NO_CUT;
    pthread_mutex_unlock(&p->lock);

    p->mode = mode;
    if (mode == BQT_PROXY_DROP || stop)
        close_all(p);
    for (int d = 0; d < 2; d++) {
        if (cut[d] != NO_CUT)
            apply_cut(p, d, cut[d]);
    }
    /* Take the effects (closed links, cuts of zero, resumed flows) before
     * the requester learns the request was applied. */
    pump_all(p);
    pthread_mutex_lock(&p->lock);
    p->applied = seq;
    pthread_cond_broadcast(&p->applied_cv);
    pthread_mutex_unlock(&p->lock);
    return stop;
}

static void *run(void *arg)
{
    bqt_proxy_t *p = arg;
    for (;;) {
        pump_all(p);
        nfds_t n = build_pollset(p);
        if (poll(p->pfds, n, -1) < 0)
            continue; /* EINTR; the sets are rebuilt */
        if (p->pfds[0].revents && apply_requests(p))
            break;
        if (p->pfds[1].revents)
            accept_all(p);
        finish_connects(p);
    }
    return NULL;
}

/* Posts the request filled in under the lock and waits until it is applied.
 * Called with the lock held. */
static void submit_locked(bqt_proxy_t *p)
{
    unsigned long mine = ++p->requested;
    ssize_t w = write(p->wake[1], "", 1); /* EAGAIN: a wake-up is already pending */
    (void)w;
    while (p->applied < mine)
        pthread_cond_wait(&p->applied_cv, &p->lock);
}

static int resolve(bqt_proxy_t *p, const char *host, int port)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "faultproxy: cannot resolve %s:%d: %s\n", host, port, gai_strerror(rc));
        return -1;
    }
    memcpy(&p->target, res->ai_addr, res->ai_addrlen);
    p->target_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int listen_loopback(bqt_proxy_t *p)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 64) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &len) != 0) {
        fprintf(stderr, "faultproxy: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        return -1;
    }
    p->port = ntohs(a.sin_port);
    return 0;
}

bqt_proxy_t *bqt_proxy_start(const char *target_host, int target_port)
{
    bqt_proxy_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->listen_fd = p->wake[0] = p->wake[1] = -1;
    p->want_cut[0] = p->want_cut[1] = p->armed_cut[0] = p->armed_cut[1] = NO_CUT;
    p->mode = p->want_mode = BQT_PROXY_PASS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->applied_cv, NULL);
    if (resolve(p, target_host, target_port) != 0 || listen_loopback(p) != 0)
        goto fail;
    if (pipe2(p->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        fprintf(stderr, "faultproxy: pipe: %s\n", strerror(errno));
        goto fail;
    }
    int rc = pthread_create(&p->thread, NULL, run, p);
    if (rc != 0) {
        fprintf(stderr, "faultproxy: pthread_create: %s\n", strerror(rc));
        goto fail;
    }
    return p;
fail:
    for (int i = 0; i < 2; i++) {
        if (p->wake[i] >= 0)
            close(p->wake[i]);
    }
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    pthread_cond_destroy(&p->applied_cv);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return NULL;
}

int bqt_proxy_port(const bqt_proxy_t *p)
{
    return p->port;
}

void bqt_proxy_set(bqt_proxy_t *p, bqt_proxy_mode_t mode)
{
    pthread_mutex_lock(&p->lock);
    p->want_mode = mode;
    submit_locked(p);
    pthread_mutex_unlock(&p->lock);
}

void bqt_proxy_cut_after(bqt_proxy_t *p, int direction, size_t nbytes)
{
    pthread_mutex_lock(&p->lock);
    p->want_cut[direction == BQT_PROXY_DOWN] = (long long)nbytes;
    submit_locked(p);
    pthread_mutex_unlock(&p->lock);
}

size_t bqt_proxy_bytes(bqt_proxy_t *p, int direction)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->bytes[direction == BQT_PROXY_DOWN];
    pthread_mutex_unlock(&p->lock);
    return n;
}

int bqt_proxy_connections(bqt_proxy_t *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->accepted;
    pthread_mutex_unlock(&p->lock);
    return n;
}

int bqt_proxy_open(bqt_proxy_t *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->open;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void bqt_proxy_stop(bqt_proxy_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->want_stop = true;
    submit_locked(p);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL); /* the thread closed and freed every link */
    close(p->wake[0]);
    close(p->wake[1]);
    close(p->listen_fd);
    pthread_cond_destroy(&p->applied_cv);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
