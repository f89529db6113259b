/* The node's clock: the only place that reads time for the engine. */
#ifndef BQ_NODE_CLOCK_H
#define BQ_NODE_CLOCK_H

#include "protocol/engine.h"

/* Returns the current monotonic and realtime clocks in nanoseconds. */
bq_now_t bq_clock_now(void);

#endif
