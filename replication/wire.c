/* The replication wire format (see wire.h): a u32 little-endian length, then
 * one packed bq.repl.Message. The decoder is the first code that touches
 * bytes from a peer, so it checks the length before it allocates anything: a
 * length of 0 or above the decoder's limit ends the link at once. A message
 * that lies whole in the bytes given is unpacked from them directly; any
 * other is gathered into one buffer of its exact length, allocated when its
 * prefix is complete and freed as soon as it is unpacked, so a decoder never
 * holds more than the message it is receiving. protobuf-c copies every field
 * out of the bytes it unpacks, so a message never points into them. */
#include "replication/wire.h"

#include <stdlib.h>
#include <string.h>

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t bq_wire_size(const Bq__Repl__Message *msg)
{
    return BQ_WIRE_PREFIX + bq__repl__message__get_packed_size(msg);
}

size_t bq_wire_pack(const Bq__Repl__Message *msg, uint8_t *out)
{
    size_t n = bq__repl__message__pack(msg, out + BQ_WIRE_PREFIX);
    put_le32(out, (uint32_t)n);
    return BQ_WIRE_PREFIX + n;
}

int bq_wire_encode(const Bq__Repl__Message *msg, uint8_t **out, size_t *len)
{
    size_t n = bq__repl__message__get_packed_size(msg);
    /* A length the prefix cannot hold is no message either. */
    uint8_t *buf = n <= UINT32_MAX ? malloc(BQ_WIRE_PREFIX + n) : NULL;
    if (!buf)
        return -1;
    *len = bq_wire_pack(msg, buf);
    *out = buf;
    return 0;
}

void bq_wire_decoder_init(bq_wire_decoder_t *d, uint32_t max)
{
    memset(d, 0, sizeof *d);
    d->max = max;
}

void bq_wire_decoder_limit(bq_wire_decoder_t *d, uint32_t max)
{
    d->max = max;
}

void bq_wire_decoder_free(bq_wire_decoder_t *d)
{
    free(d->buf);
    bq_wire_decoder_init(d, d->max);
}

/* Field numbers run from 1 to 2^29 - 1. */
#define FIELD_MAX 536870911u

/* The body of m, as a plain message. */
static const ProtobufCMessage *body_of(const Bq__Repl__Message *m)
{
    switch (m->body_case) {
    case BQ__REPL__MESSAGE__BODY_HELLO:
        return &m->hello->base;
    case BQ__REPL__MESSAGE__BODY_WELCOME:
        return &m->welcome->base;
    case BQ__REPL__MESSAGE__BODY_REFUSE:
        return &m->refuse->base;
    case BQ__REPL__MESSAGE__BODY_SEGMENT:
        return &m->segment->base;
    case BQ__REPL__MESSAGE__BODY_FRAMES:
        return &m->frames->base;
    case BQ__REPL__MESSAGE__BODY_ACK:
        return &m->ack->base;
    case BQ__REPL__MESSAGE__BODY_HEARTBEAT:
        return &m->heartbeat->base;
    case BQ__REPL__MESSAGE__BODY_VOTE_REQUEST:
        return &m->vote_request->base;
    case BQ__REPL__MESSAGE__BODY_VOTE_REPLY:
        return &m->vote_reply->base;
    case BQ__REPL__MESSAGE__BODY_PROMOTE:
        return &m->promote->base;
    default:
        return NULL;
    }
}

/* True when m's unknown fields have valid numbers. protobuf-c keeps the
 * fields it does not know (a later version's), but it checks only the first
 * byte of a field's key: it accepts a padded key such as 80 00 (field 0) and
 * numbers above the largest. Neither is valid protobuf, and a message with a
 * field 0 does not even unpack once packed again. */
static bool unknown_fields_valid(const ProtobufCMessage *m)
{
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        uint32_t tag = m->unknown_fields[i].tag;
        if (tag == 0 || tag > FIELD_MAX)
            return false;
    }
    return true;
}

/* The memory an unpack may take: a message's known fields need about its
 * length (bytes and strings are copied), the structures a little more; only
 * a message of many tiny unknown fields (24 bytes of bookkeeping each) would
 * take more, and that is refused. */
typedef struct budget {
    size_t left;
} budget_t;

static void *budget_alloc(void *data, size_t size)
{
    budget_t *b = data;
    if (size > b->left)
        return NULL;
    b->left -= size;
    return malloc(size);
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

/* Unpacks p[0..n) into *msg: MESSAGE, or BAD when it is no valid Message,
 * has no body (the bodies hold no messages of their own) or would take more
 * than its budget of memory. Freed with the default allocator (malloc). */
static bq_wire_status_t unpack(const uint8_t *p, size_t n, Bq__Repl__Message **msg)
{
    budget_t b = {.left = 2 * n + 4096};
    ProtobufCAllocator a = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    Bq__Repl__Message *m = bq__repl__message__unpack(&a, n, p);
    if (!m)
        return BQ_WIRE_BAD;
    const ProtobufCMessage *body = body_of(m);
    if (!body || !unknown_fields_valid(&m->base) || !unknown_fields_valid(body)) {
        bq__repl__message__free_unpacked(m, NULL);
        return BQ_WIRE_BAD;
    }
    *msg = m;
    return BQ_WIRE_MESSAGE;
}

/* Takes prefix bytes from data[*off..len); true once the prefix is whole. */
static bool take_prefix(bq_wire_decoder_t *d, const uint8_t *data, size_t len, size_t *off)
{
    while (d->prefix_have < BQ_WIRE_PREFIX && *off < len)
        d->prefix[d->prefix_have++] = data[(*off)++];
    return d->prefix_have == BQ_WIRE_PREFIX;
}

/* Forgets the message just decoded: the next byte starts a prefix. */
static void reset(bq_wire_decoder_t *d)
{
    free(d->buf);
    d->buf = NULL;
    d->prefix_have = 0;
    d->need = 0;
    d->have = 0;
}

bq_wire_status_t bq_wire_decode(bq_wire_decoder_t *d, const uint8_t *data, size_t len, size_t *used,
                                Bq__Repl__Message **msg)
{
    size_t off = 0;
    *msg = NULL;
    bool whole = take_prefix(d, data, len, &off);
    *used = off;
    if (!whole)
        return BQ_WIRE_MORE;
    d->need = get_le32(d->prefix);
    if (d->need == 0)
        return BQ_WIRE_BAD;
    if (d->need > d->max)
        return BQ_WIRE_TOO_BIG;
    bq_wire_status_t st;
    if (!d->buf && len - off >= d->need) {
        /* Whole in data: unpacked from there, no copy. */
        st = unpack(data + off, d->need, msg);
        *used = off + d->need;
        reset(d);
        return st;
    }
    if (!d->buf && !(d->buf = malloc(d->need)))
        return BQ_WIRE_NOMEM;
    size_t take = d->need - d->have;
    if (take > len - off)
        take = len - off;
    if (take)
        memcpy(d->buf + d->have, data + off, take);
    d->have += (uint32_t)take;
    *used = off + take;
    if (d->have < d->need)
        return BQ_WIRE_MORE;
    st = unpack(d->buf, d->need, msg);
    reset(d);
    return st;
}

void bq_wire_free(Bq__Repl__Message *msg)
{
    if (msg)
        bq__repl__message__free_unpacked(msg, NULL);
}

const char *bq_wire_body_name(const Bq__Repl__Message *msg)
{
    switch (msg->body_case) {
    case BQ__REPL__MESSAGE__BODY_HELLO:
        return "hello";
    case BQ__REPL__MESSAGE__BODY_WELCOME:
        return "welcome";
    case BQ__REPL__MESSAGE__BODY_REFUSE:
        return "refuse";
    case BQ__REPL__MESSAGE__BODY_SEGMENT:
        return "segment";
    case BQ__REPL__MESSAGE__BODY_FRAMES:
        return "frames";
    case BQ__REPL__MESSAGE__BODY_ACK:
        return "ack";
    case BQ__REPL__MESSAGE__BODY_HEARTBEAT:
        return "heartbeat";
    case BQ__REPL__MESSAGE__BODY_VOTE_REQUEST:
        return "vote request";
    case BQ__REPL__MESSAGE__BODY_VOTE_REPLY:
        return "vote reply";
    case BQ__REPL__MESSAGE__BODY_PROMOTE:
        return "promote";
    default:
        return "none";
    }
}

const char *bq_wire_status_name(bq_wire_status_t st)
{
    switch (st) {
    case BQ_WIRE_MESSAGE:
        return "message";
    case BQ_WIRE_MORE:
        return "more";
    case BQ_WIRE_TOO_BIG:
        return "message too big";
    case BQ_WIRE_BAD:
        return "bad message";
    case BQ_WIRE_NOMEM:
        return "out of memory";
    }
    return "unknown";
}
