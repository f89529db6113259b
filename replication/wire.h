/* The replication wire format: every message is a u32 little-endian length
 * followed by one packed bq.repl.Message (proto/repl.proto). Pure: encoding
 * into and decoding out of caller-owned buffers, no I/O. The decoder takes
 * bytes as they arrive, in pieces of any size, and is the parser of
 * untrusted replication input (fuzzed by tests/fuzz/fuzz_repl_wire.c). */
#ifndef BQ_REPL_WIRE_H
#define BQ_REPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/repl.pb-c.h"

/* Bytes of the length prefix. */
#define BQ_WIRE_PREFIX 4
/* Largest message accepted by default: one frame of the largest job (-z
 * 1 GiB) plus room for the message around it. Only a followed primary's
 * stream carries such messages. */
#define BQ_WIRE_MAX_DEFAULT ((uint32_t)1073741824u + 65536u)
/* Largest message of every other kind (Hello, Welcome, Ack, Heartbeat,
 * votes, Refuse, Promote: a few hundred bytes), and of any message before
 * the peer is known: what a stranger can make us buffer. */
#define BQ_WIRE_MAX_CONTROL ((uint32_t)65536u)

/* Packs msg with its length prefix into a new buffer (*out, *len; free with
 * free()). 0, or -1 when out of memory. */
int bq_wire_encode(const Bq__Repl__Message *msg, uint8_t **out, size_t *len);

/* Bytes bq_wire_encode would produce for msg. */
size_t bq_wire_size(const Bq__Repl__Message *msg);

/* Packs msg with its length prefix into out (room for bq_wire_size(msg)
 * bytes); returns the bytes written. */
size_t bq_wire_pack(const Bq__Repl__Message *msg, uint8_t *out);

typedef enum bq_wire_status {
    BQ_WIRE_MESSAGE = 0, /* *msg holds a message; free it with bq_wire_free */
    BQ_WIRE_MORE,        /* every byte given was consumed; feed more */
    BQ_WIRE_TOO_BIG,     /* a length above the decoder's limit: drop the link */
    BQ_WIRE_BAD,         /* not a valid Message (or no body set): drop the link */
    BQ_WIRE_NOMEM,       /* out of memory: drop the link */
} bq_wire_status_t;

typedef struct bq_wire_decoder {
    uint32_t max; /* largest message length accepted */
    uint8_t prefix[BQ_WIRE_PREFIX];
    size_t prefix_have; /* bytes of the prefix received */
    uint8_t *buf;       /* the message being received (owned) */
    uint32_t need;      /* its length */
    uint32_t have;      /* its bytes received */
} bq_wire_decoder_t;

/* Makes d an empty decoder accepting messages of at most max bytes. */
void bq_wire_decoder_init(bq_wire_decoder_t *d, uint32_t max);

/* Frees what d holds; d may be initialised again. */
void bq_wire_decoder_free(bq_wire_decoder_t *d);

/* Sets the largest message d accepts from now on (the one being received
 * keeps the limit it was checked against). */
void bq_wire_decoder_limit(bq_wire_decoder_t *d, uint32_t max);

/* Consumes bytes of data[0..len) into d, stopping after the first complete
 * message (unpacked with at most twice its length plus 4 KiB of memory, so
 * that fields we do not know cannot make it grow without bound): sets *used to the bytes consumed
 * and, on BQ_WIRE_MESSAGE, *msg to a new message (the caller owns it: bq_wire_free). Call again
 * with the rest. After BQ_WIRE_TOO_BIG, BAD or NOMEM the decoder is unusable until freed. */
bq_wire_status_t bq_wire_decode(bq_wire_decoder_t *d, const uint8_t *data, size_t len, size_t *used,
                                Bq__Repl__Message **msg);

/* Frees a message from bq_wire_decode. NULL is a no-op. */
void bq_wire_free(Bq__Repl__Message *msg);

/* The name of a message's body ("hello", "frames", ...), for logs. */
const char *bq_wire_body_name(const Bq__Repl__Message *msg);

/* The name of a decoder status, for logs. */
const char *bq_wire_status_name(bq_wire_status_t st);

#endif
