/* Fuzz target of the replication wire decoder (replication/wire.c): the
 * first code that reads bytes a peer sends over a replication link.
 *
 * The input is a stream of messages as a link carries them (u32 length,
 * packed bq.repl.Message, ...). An independent reading of the stream (the
 * oracle below: the length prefixes, and protobuf-c's own unpack of each
 * payload taken straight from the input) says what the decoder must report:
 * each message and where it ends, then MORE at the end of the input, or the
 * first length of 0 (BAD) or above the limit (TOO_BIG) right after its
 * prefix, or the first payload that does not unpack, has no body, has an
 * unknown field numbered 0 or above 2^29 - 1, or does not pack back to
 * bytes that unpack (BAD) right after that payload. The stream is decoded four times, each from a
 * fresh decoder, and every run must give exactly that:
 * - the whole input in one call (messages unpacked in place), limit 1 MiB;
 * - one byte per call (every message gathered in the decoder), 1 MiB;
 * - pieces of 0 to 300 bytes drawn from a generator seeded with a hash of
 *   the input, 1 MiB;
 * - the same pieces with a limit of 0 to 511 bytes, also from the hash, so
 *   that lengths just below, at and above the limit are reached.
 * Every piece is a heap copy of its exact size, freed right after the call:
 * ASan reports any read past it, and any message still pointing into it.
 *
 * Invariants (abort on violation), beyond the sequence above:
 * - a call uses at most the bytes given, and all of them when it says MORE;
 * - a message has a body and packs to the same bytes as the oracle's;
 * - the message re-encoded (bq_wire_encode, which agrees with bq_wire_size
 *   and writes the right prefix) decodes again to a message that packs to
 *   the same bytes, with the same body;
 * - Frames data is handed over intact: the same length and bytes after the
 *   round trip, and a run of bytes of the message as received;
 * - nothing leaks, and the decoder holds no buffer between messages. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "fuzz.h"
#include "replication/wire.h"

#define LIMIT (1024u * 1024u) /* the decoder's limit in the first three runs */
#define PIECE_MAX 300         /* largest piece of the random splits */
#define SMALL_LIMIT 512       /* the fourth run's limit is below this */

typedef struct event {
    bq_wire_status_t st;
    size_t end;             /* stream offset after the bytes it used */
    Bq__Repl__Message *msg; /* the oracle's message, for MESSAGE */
} event_t;

typedef struct oracle {
    event_t *ev;
    size_t n;
} oracle_t;

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* True when the unknown fields of msg have field numbers from 1 to 2^29 - 1
 * (protobuf-c accepts others in padded keys, see wire.c). */
static bool numbers_valid(const ProtobufCMessage *msg)
{
    for (unsigned i = 0; i < msg->n_unknown_fields; i++)
        if (msg->unknown_fields[i].tag < 1 || msg->unknown_fields[i].tag >= 1u << 29)
            return false;
    return true;
}

/* True when m and its body (found through the descriptor) have only valid
 * field numbers. */
static bool fields_valid(const Bq__Repl__Message *m)
{
    const ProtobufCMessageDescriptor *desc = m->base.descriptor;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->id != (uint32_t)m->body_case)
            continue;
        const ProtobufCMessage *body = *(ProtobufCMessage *const *)((const char *)m + f->offset);
        return numbers_valid(&m->base) && numbers_valid(body);
    }
    return false;
}

/* True when m packs to bytes that unpack again. */
static bool packs_back(const Bq__Repl__Message *m)
{
    size_t n = bq__repl__message__get_packed_size(m);
    uint8_t *p = malloc(n ? n : 1);
    BQF_CHECK(p != NULL, "out of memory");
    bq__repl__message__pack(m, p);
    Bq__Repl__Message *again = bq__repl__message__unpack(NULL, n, p);
    free(p);
    bq_wire_free(again);
    return again != NULL;
}

/* What a decoder of limit max must report for data[0..size): the events,
 * ending with the first status that is not MESSAGE. */
static oracle_t oracle_run(const uint8_t *data, size_t size, uint32_t max)
{
    /* Every message takes at least 5 bytes. */
    oracle_t o = {calloc(size / 5 + 2, sizeof(event_t)), 0};
    BQF_CHECK(o.ev != NULL, "out of memory");
    size_t p = 0;
    for (;;) {
        event_t *e = &o.ev[o.n++];
        if (size - p < BQ_WIRE_PREFIX) {
            *e = (event_t){BQ_WIRE_MORE, size, NULL};
            return o;
        }
        uint32_t len = le32(data + p);
        if (len == 0 || len > max) {
            *e = (event_t){len ? BQ_WIRE_TOO_BIG : BQ_WIRE_BAD, p + BQ_WIRE_PREFIX, NULL};
            return o;
        }
        if (size - p - BQ_WIRE_PREFIX < len) {
            *e = (event_t){BQ_WIRE_MORE, size, NULL};
            return o;
        }
        Bq__Repl__Message *m = bq__repl__message__unpack(NULL, len, data + p + BQ_WIRE_PREFIX);
        p += BQ_WIRE_PREFIX + (size_t)len;
        if (!m || !fields_valid(m) || !packs_back(m)) {
            bq_wire_free(m);
            *e = (event_t){BQ_WIRE_BAD, p, NULL};
            return o;
        }
        *e = (event_t){BQ_WIRE_MESSAGE, p, m};
    }
}

static void oracle_free(oracle_t *o)
{
    for (size_t i = 0; i < o->n; i++)
        bq_wire_free(o->ev[i].msg);
    free(o->ev);
}

/* msg packed without prefix, in a new buffer of *len bytes. */
static uint8_t *packed(const Bq__Repl__Message *msg, size_t *len)
{
    *len = bq__repl__message__get_packed_size(msg);
    uint8_t *p = malloc(*len ? *len : 1);
    BQF_CHECK(p != NULL, "out of memory");
    BQF_CHECK(bq__repl__message__pack(msg, p) == *len, "pack disagrees with its size");
    return p;
}

static void check_same(const Bq__Repl__Message *a, const Bq__Repl__Message *b, const char *what)
{
    size_t na, nb;
    uint8_t *pa = packed(a, &na), *pb = packed(b, &nb);
    BQF_CHECK(a->body_case == b->body_case && na == nb && memcmp(pa, pb, na) == 0,
              "%s: %s (%zu bytes) != %s (%zu bytes)", what, bq_wire_body_name(a), na,
              bq_wire_body_name(b), nb);
    free(pa);
    free(pb);
}

/* Re-encodes m, decodes that again and checks the result; payload[0..n) is
 * m as it was received. */
static void check_round_trip(const Bq__Repl__Message *m, const uint8_t *payload, size_t n)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    BQF_CHECK(bq_wire_encode(m, &buf, &len) == 0, "encode failed");
    BQF_CHECK(len == bq_wire_size(m) && le32(buf) == len - BQ_WIRE_PREFIX,
              "encoding of %zu bytes disagrees with bq_wire_size or its prefix", len);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, UINT32_MAX);
    size_t used = 0;
    Bq__Repl__Message *again = NULL;
    bq_wire_status_t st = bq_wire_decode(&d, buf, len, &used, &again);
    BQF_CHECK(st == BQ_WIRE_MESSAGE && used == len, "re-encoded %s decodes to %s, %zu of %zu",
              bq_wire_body_name(m), bq_wire_status_name(st), used, len);
    free(buf);
    check_same(again, m, "round trip");
    if (m->body_case == BQ__REPL__MESSAGE__BODY_FRAMES) {
        const ProtobufCBinaryData *a = &m->frames->data, *b = &again->frames->data;
        BQF_CHECK(a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0),
                  "frames data changed in the round trip");
        BQF_CHECK(a->len == 0 || memmem(payload, n, a->data, a->len) != NULL,
                  "frames data (%zu bytes) is not in the message received", a->len);
    }
    bq_wire_free(again);
    bq_wire_decoder_free(&d);
}

/* A run: the decoder, its expected events and how far it got. */
typedef struct run {
    const uint8_t *data;
    const oracle_t *o;
    bq_wire_decoder_t d;
    size_t next;  /* the next expected event */
    size_t start; /* stream offset of the message being received */
    bool stopped; /* an error was reported */
} run_t;

/* Gives the piece data[at..at+k) to the decoder, as an exact heap copy. */
static void run_piece(run_t *r, size_t at, size_t k)
{
    uint8_t *copy = malloc(k ? k : 1);
    BQF_CHECK(copy != NULL, "out of memory");
    memcpy(copy, r->data + at, k);
    size_t off = 0;
    do {
        size_t used = SIZE_MAX;
        Bq__Repl__Message *m = NULL;
        bq_wire_status_t st = bq_wire_decode(&r->d, copy + off, k - off, &used, &m);
        BQF_CHECK(used <= k - off, "used %zu of %zu bytes", used, k - off);
        off += used;
        if (st == BQ_WIRE_MORE) {
            BQF_CHECK(off == k && m == NULL, "MORE after %zu of %zu bytes", off, k);
            break;
        }
        const event_t *e = &r->o->ev[r->next++];
        BQF_CHECK(st == e->st && at + off == e->end, "%s ending at %zu, expected %s at %zu",
                  bq_wire_status_name(st), at + off, bq_wire_status_name(e->st), e->end);
        if (st != BQ_WIRE_MESSAGE) {
            BQF_CHECK(m == NULL, "a message with %s", bq_wire_status_name(st));
            r->stopped = true;
            break;
        }
        BQF_CHECK(m != NULL && strcmp(bq_wire_body_name(m), "none") != 0, "message without body");
        BQF_CHECK(r->d.buf == NULL && r->d.prefix_have == 0, "decoder holds a buffer");
        free(copy);
        copy = NULL;
        check_same(m, e->msg, "decoder vs oracle");
        check_round_trip(m, r->data + r->start + BQ_WIRE_PREFIX,
                         e->end - r->start - BQ_WIRE_PREFIX);
        bq_wire_free(m);
        r->start = e->end;
        /* The rest of the piece, copied again (the first copy is gone). */
        copy = malloc(k - off ? k - off : 1);
        BQF_CHECK(copy != NULL, "out of memory");
        memcpy(copy, r->data + at + off, k - off);
        at += off;
        k -= off;
        off = 0;
    } while (off < k);
    free(copy);
}

/* A generator (xorshift64*) for the splits. */
static uint64_t next_rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* Decodes data[0..size) with limit max in pieces of `piece` bytes (0: random
 * from rng) and checks it against the oracle's events. */
static void run_stream(const uint8_t *data, size_t size, uint32_t max, size_t piece, uint64_t rng)
{
    oracle_t o = oracle_run(data, size, max);
    run_t r = {.data = data, .o = &o};
    bq_wire_decoder_init(&r.d, max);
    size_t at = 0;
    do {
        size_t k = piece ? piece : (size_t)(next_rnd(&rng) % (PIECE_MAX + 1));
        if (k > size - at)
            k = size - at;
        run_piece(&r, at, k);
        at += k;
    } while (at < size && !r.stopped);
    if (!r.stopped) {
        const event_t *e = &o.ev[r.next++];
        BQF_CHECK(e->st == BQ_WIRE_MORE, "MORE at the end, expected %s at %zu",
                  bq_wire_status_name(e->st), e->end);
    }
    BQF_CHECK(r.next == o.n, "%zu events, expected %zu", r.next, o.n);
    bq_wire_decoder_free(&r.d);
    BQF_CHECK(r.d.buf == NULL && r.d.prefix_have == 0, "free left state");
    oracle_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t hash = UINT64_C(14695981039346656037); /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * UINT64_C(1099511628211);
    hash |= 1; /* the generator needs a non-zero state */
    run_stream(data, size, LIMIT, size ? size : 1, 0);
    run_stream(data, size, LIMIT, 1, 0);
    run_stream(data, size, LIMIT, 0, hash);
    run_stream(data, size, (uint32_t)(hash >> 40) % SMALL_LIMIT, 0, hash);
    return 0;
}
