/* A connected pair of sockets of the listener's kind (TCP on loopback, or
 * unix stream), so that the node can be its own client: one end is served
 * as if the listener had accepted it, the other is the client's. Used by
 * the web console (node/admin/console.h), whose job actions then take
 * exactly the path of a client's commands (a standby's proxy to the
 * primary, the binlog, the commit point). */
#ifndef BQ_NODE_CLIENT_PAIR_H
#define BQ_NODE_CLIENT_PAIR_H

#include <stdbool.h>

/* Makes a connected pair, both ends non-blocking and close-on-exec: unix
 * stream sockets when is_unix, else TCP over 127.0.0.1 (or ::1). 0 with
 * the ends in fds[0] (the client's) and fds[1] (the server's), or a
 * negative errno (nothing left open). */
int bq_client_pair(bool is_unix, int fds[2]);

#endif
