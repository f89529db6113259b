/* Creates the one listening socket, the way beanstalkd does: the first
 * getaddrinfo(AI_PASSIVE) entry that binds wins (so the default listener is
 * 0.0.0.0 on glibc, dual-stack only when that first entry is IPv6), a unix
 * socket replaces a stale socket file but never another file, and a socket
 * passed by systemd takes precedence over -l/-p.
 *
 * Accepting is done here rather than by uv_listen so that running out of
 * file descriptors is visible: on EMFILE/ENFILE the spare fd is released,
 * the waiting connection is accepted and closed at once, the spare is taken
 * back, and a rate-limited warning is logged. Errors that would make the
 * readable socket spin pause accepting for a moment instead. */
#include "node/client/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define ACTIVATION_FD 3                  /* SD_LISTEN_FDS_START */
#define PASSED_ON "beanstalkd-ha-reexec" /* LISTEN_FDNAMES of a socket we passed on */
#define ACCEPT_BATCH 64                  /* connections accepted per readable event */
#define PAUSE_MS 100                     /* accepting pauses this long after a persistent error */

/* The inherited listen fd when systemd passed one to this process, else -1.
 * Unsets LISTEN_* like sd_listen_fds(1) so children do not inherit them. */
static int inherited_fd(bool *passed_on)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    int fd = -1;

    *passed_on = names && strcmp(names, PASSED_ON) == 0;
    if (pid && fds && strtol(pid, NULL, 10) == (long)getpid()) {
        long n = strtol(fds, NULL, 10);
        if (n > 1)
            bq_logm(BQ_LOG_WARN,
                    "inherited more than one listen socket; ignoring all but the first");
        if (n >= 1) {
            fd = ACTIVATION_FD;
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return fd;
}

static int sockopt_int(int fd, int name, int *val)
{
    socklen_t len = sizeof *val;
    return getsockopt(fd, SOL_SOCKET, name, val, &len);
}

/* Checks that fd is a listening stream socket; sets *is_unix. */
static int check_inherited(int fd, bool *is_unix)
{
    int accepting, type;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (sockopt_int(fd, SO_ACCEPTCONN, &accepting) || sockopt_int(fd, SO_TYPE, &type) ||
        getsockname(fd, (struct sockaddr *)&ss, &len)) {
        bq_log(BQ_LOG_ERROR, "inherited fd is not a socket", "fd=%d err=\"%s\"", fd,
               strerror(errno));
        return -1;
    }
    if (!accepting || type != SOCK_STREAM ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6 && ss.ss_family != AF_UNIX)) {
        bq_log(BQ_LOG_ERROR, "inherited fd is not a TCP or UNIX listening socket", "fd=%d", fd);
        return -1;
    }
    *is_unix = ss.ss_family == AF_UNIX;
    return 0;
}

static void warn_errno(const char *what, const char *addr)
{
    bq_log(BQ_LOG_WARN, what, "addr=\"%s\" err=\"%s\"", addr, strerror(errno));
}

/* Binds and listens on one addrinfo entry; fd or -1. */
static int bind_entry(const struct addrinfo *ai, bool dual_stack, const char *host)
{
    int one = 1, zero = 0;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd == -1) {
        warn_errno("socket failed", host);
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
        (dual_stack && ai->ai_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) == -1)) {
        warn_errno("setsockopt failed", host);
    } else if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1) {
        warn_errno("bind failed", host);
    } else if (listen(fd, BQ_LISTEN_BACKLOG) == -1) {
        warn_errno("listen failed", host);
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

static int make_inet(const char *host, const char *port)
{
    struct addrinfo hints = {0}, *root, *ai;
    int fd = -1;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int r = getaddrinfo(host, port, &hints, &root);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot resolve listen address", "addr=\"%s\" port=\"%s\" err=\"%s\"",
               host ? host : "*", port, gai_strerror(r));
        return -1;
    }
    for (ai = root; ai && fd == -1; ai = ai->ai_next)
        fd = bind_entry(ai, host == NULL, host ? host : "*");
    freeaddrinfo(root);
    return fd;
}

static int make_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;

    if (strlen(path) >= sizeof sa.sun_path) {
        bq_log(BQ_LOG_ERROR, "unix socket path is too long", "path=\"%s\" max=%zu", path,
               sizeof sa.sun_path - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (stat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            bq_log(BQ_LOG_ERROR, "another file already exists at the socket path", "path=\"%s\"",
                   path);
            return -1;
        }
        bq_log(BQ_LOG_WARN, "removing existing local socket to replace it", "path=\"%s\"", path);
        if (unlink(path) == -1) {
            warn_errno("unlink failed", path);
            return -1;
        }
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        warn_errno("socket failed", path);
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1) {
        warn_errno("bind failed", path);
    } else if (listen(fd, BQ_LISTEN_BACKLOG) == -1) {
        warn_errno("listen failed", path);
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

/* Writes fd's bound address as "host:port", "[v6]:port" or "unix:path". */
static void describe(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST], serv[NI_MAXSERV];

    snprintf(out, cap, "?");
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
        return;
    if (ss.ss_family == AF_UNIX) {
        const struct sockaddr_un *su = (const struct sockaddr_un *)&ss;
        snprintf(out, cap, "unix:%s", su->sun_path);
    } else if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, serv, sizeof serv,
                           NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        snprintf(out, cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
    }
}

static void on_readable(uv_poll_t *p, int status, int events);

static void on_pause_end(uv_timer_t *t)
{
    bq_listener_t *l = t->data;
    uv_poll_start(&l->poll, UV_READABLE, on_readable);
}

static void pause_accepting(bq_listener_t *l)
{
    uv_poll_stop(&l->poll);
    uv_timer_start(&l->pause, on_pause_end, PAUSE_MS, 0);
}

/* EMFILE/ENFILE: drops one waiting connection using the spare fd. Returns
 * false when that did not work (accepting must pause to avoid spinning). */
static bool drop_one(bq_listener_t *l, int err)
{
    bool dropped = false;

    if (l->spare_fd >= 0) {
        close(l->spare_fd);
        int fd = accept(l->fd, NULL, NULL);
        if (fd >= 0)
            close(fd);
        dropped = fd >= 0 || errno == EAGAIN || errno == EWOULDBLOCK;
    }
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    bq_log_limited(&l->limit, BQ_LOG_WARN,
                   dropped ? "out of file descriptors; connection dropped"
                           : "out of file descriptors; accepting paused",
                   "err=\"%s\"", strerror(err));
    return dropped;
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    bq_listener_t *l = p->data;

    (void)events;
    if (status < 0) {
        bq_log_limited(&l->limit, BQ_LOG_WARN, "listen socket error", "err=\"%s\"",
                       uv_strerror(status));
        pause_accepting(l);
        return;
    }
    for (int i = 0; i < ACCEPT_BATCH && l->fd >= 0; i++) {
        int fd = accept(l->fd, NULL, NULL);
        if (fd >= 0) {
            fcntl(fd, F_SETFD, FD_CLOEXEC);
            l->cb(l, fd);
            continue;
        }
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK)
            return;
        if (err == EINTR || err == ECONNABORTED)
            continue;
        if ((err == EMFILE || err == ENFILE) && drop_one(l, err))
            continue;
        if (err != EMFILE && err != ENFILE)
            bq_log_limited(&l->limit, BQ_LOG_WARN, "accept failed", "err=\"%s\"", strerror(err));
        pause_accepting(l);
        return;
    }
}

/* Starts accepting on fd; takes ownership of fd. */
static int start(bq_listener_t *l, uv_loop_t *loop, int fd)
{
    l->fd = fd;
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1) {
        bq_log(BQ_LOG_ERROR, "cannot make the listen socket non-blocking", "err=\"%s\"",
               strerror(errno));
        return -1;
    }
    int r = uv_poll_init_socket(loop, &l->poll, fd);
    if (r == 0) {
        uv_timer_init(loop, &l->pause);
        l->handles_open = true;
        l->poll.data = l->pause.data = l;
        r = uv_poll_start(&l->poll, UV_READABLE, on_readable);
    }
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot listen", "addr=%s err=\"%s\"", l->addr, uv_strerror(r));
        return -1;
    }
    bq_log(BQ_LOG_INFO, "listening", "addr=%s fd=%d", l->addr, fd);
    return 0;
}

int bq_listen_open(bq_listener_t *l, uv_loop_t *loop, const char *addr, const char *port,
                   bool addr_or_port_given, bq_accept_cb cb, void *data)
{
    memset(l, 0, sizeof *l);
    l->fd = l->spare_fd = -1;
    l->cb = cb;
    l->data = data;

    bool passed_on;
    int fd = inherited_fd(&passed_on);
    if (fd != -1) {
        if (addr_or_port_given && !passed_on)
            bq_logm(BQ_LOG_WARN, "inherited listen fd; ignoring option");
        if (check_inherited(fd, &l->is_unix) != 0)
            return -1;
    } else if (addr && strncmp(addr, "unix:", 5) == 0) {
        l->is_unix = true;
        fd = make_unix(addr + 5);
    } else {
        fd = make_inet(addr, port);
    }
    if (fd == -1)
        return -1;
    describe(fd, l->addr, sizeof l->addr);
    return start(l, loop, fd);
}

void bq_listen_close(bq_listener_t *l)
{
    if (l->handles_open) {
        uv_close((uv_handle_t *)&l->poll, NULL);
        uv_close((uv_handle_t *)&l->pause, NULL);
        l->handles_open = false;
    }
    if (l->fd >= 0)
        close(l->fd);
    if (l->spare_fd >= 0)
        close(l->spare_fd);
    l->fd = l->spare_fd = -1;
}

int bq_listen_pass_on_exec(bq_listener_t *l)
{
    char pid[24];
    if (l->fd < 0)
        return -1;
    if (l->fd != ACTIVATION_FD && dup2(l->fd, ACTIVATION_FD) != ACTIVATION_FD)
        return -1;
    /* dup2 leaves the copy without FD_CLOEXEC; fd 3 itself needs it cleared. */
    if (fcntl(ACTIVATION_FD, F_SETFD, 0) != 0)
        return -1;
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (setenv("LISTEN_PID", pid, 1) != 0 || setenv("LISTEN_FDS", "1", 1) != 0 ||
        setenv("LISTEN_FDNAMES", PASSED_ON, 1) != 0)
        return -1;
    return 0;
}
