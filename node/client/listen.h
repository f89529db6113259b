/* The listening socket: TCP from -l/-p, a unix socket from -l unix:PATH, or
 * a socket inherited through systemd socket activation (LISTEN_PID and
 * LISTEN_FDS, read without libsystemd), and the accept loop on it, which
 * survives running out of file descriptors. */
#ifndef BQ_NODE_LISTEN_H
#define BQ_NODE_LISTEN_H

#include <stdbool.h>
#include <uv.h>

#include "node/base/log.h"

#define BQ_LISTEN_BACKLOG 1024

typedef struct bq_listener bq_listener_t;

/* Called with each accepted connection's fd (the callee owns it). */
typedef void (*bq_accept_cb)(bq_listener_t *l, int fd);

struct bq_listener {
    int fd;           /* the listening socket, -1 when closed */
    int spare_fd;     /* held back so an fd is free to drop a connection on EMFILE */
    bool is_unix;     /* accepted connections are unix stream sockets */
    uv_poll_t poll;   /* readable = connections to accept */
    uv_timer_t pause; /* restarts accepting after a failure that would spin */
    bool handles_open;
    bq_accept_cb cb;
    void *data;           /* for the callback */
    bq_log_limit_t limit; /* accept failure warnings */
    char addr[160];       /* printable bound address, for logs */
};

/* Opens *l on loop and starts accepting into cb: an inherited socket when
 * systemd passed one (addr and port are then ignored, with a warning when
 * given), else unix:PATH or host addr (NULL = any) with port. Logs and
 * returns 0, or logs and returns -1; call bq_listen_close in both cases. */
int bq_listen_open(bq_listener_t *l, uv_loop_t *loop, const char *addr, const char *port,
                   bool addr_or_port_given, bq_accept_cb cb, void *data);

/* Stops accepting and closes the sockets (the handles close asynchronously;
 * l must stay valid until the loop has run their close callbacks). */
void bq_listen_close(bq_listener_t *l);

/* Just before the process re-executes itself (a role change, a resync
 * install): hands the listening socket on to the new image as systemd
 * would (fd 3, LISTEN_PID, LISTEN_FDS), so that it keeps an inherited
 * socket and clients that connect meanwhile wait in the backlog instead of
 * being refused. Returns 0, or -1 (the new image binds again). */
int bq_listen_pass_on_exec(bq_listener_t *l);

#endif
