/* A connected socket pair of the listener's kind (pair.h). TCP has no
 * socketpair(): a throw-away listener on an ephemeral loopback port takes
 * the one connection and is closed at once. The connect to a listening
 * loopback socket completes in the kernel, so no step blocks. Another
 * local process could connect to that port in the moment it listens: the
 * connection accepted must come from our own end, else the pair fails
 * (nothing of ours reaches the stranger, nor theirs us). */
#include "node/client/pair.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* True when the peer of accepted is the local address of ours. */
static bool same_end(int accepted, int ours)
{
    struct sockaddr_storage peer, local;
    socklen_t plen = sizeof peer, llen = sizeof local;
    memset(&peer, 0, sizeof peer);
    memset(&local, 0, sizeof local);
    return getpeername(accepted, (struct sockaddr *)&peer, &plen) == 0 &&
           getsockname(ours, (struct sockaddr *)&local, &llen) == 0 && plen == llen &&
           memcmp(&peer, &local, plen) == 0;
}

static void close_both(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* The pair over a loopback address of family af: 0 or a negative errno. */
static int tcp_pair(int af, int fds[2])
{
    struct sockaddr_storage ss;
    socklen_t len = af == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memset(&ss, 0, sizeof ss);
    if (af == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
    }
    fds[0] = fds[1] = -1;
    int l = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err = l < 0 ? errno : 0;
    if (!err && (bind(l, (struct sockaddr *)&ss, len) != 0 || listen(l, 1) != 0 ||
                 getsockname(l, (struct sockaddr *)&ss, &len) != 0))
        err = errno;
    if (!err && (fds[0] = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        err = errno;
    if (!err && connect(fds[0], (struct sockaddr *)&ss, len) != 0)
        err = errno;
    if (!err && (fds[1] = accept(l, NULL, NULL)) < 0)
        err = errno;
    if (!err && !same_end(fds[1], fds[0]))
        err = ECONNREFUSED;
    for (int i = 0; i < 2 && !err; i++)
        if (fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) != 0 ||
            fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0)
            err = errno;
    if (l >= 0)
        close(l);
    if (err) {
        close_both(fds);
        return -err;
    }
    int one = 1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

int bq_client_pair(bool is_unix, int fds[2])
{
    if (is_unix)
        return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) == 0
                   ? 0
                   : -errno;
    int r = tcp_pair(AF_INET, fds);
    return r == 0 ? 0 : tcp_pair(AF_INET6, fds);
}
