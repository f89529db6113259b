/* Unit tests of the replication wire format (replication/wire.c): every
 * message type through encode and decode, decoding fed whole, one byte at a
 * time and in random pieces, several messages in one buffer, the length
 * limit (exactly max accepted, max + 1 refused before any allocation), zero
 * lengths, garbage, messages without a body, unknown fields (accepted, but
 * not with invalid field numbers), and a Frames message of 1 MiB gathered in
 * TLS-record-sized pieces into one buffer.
 *
 * With BQ_REPL_WIRE_SEED_DIR set, main() writes fuzz_repl_wire's seed corpus
 * into that directory instead of running the tests (see the end of the
 * file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"
#include "replication/wire.h"

#define ONE_MIB (1024u * 1024u)
#define TLS_RECORD 16384u

/* A deterministic generator (xorshift64*), so that failures reproduce. */
static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- sample messages: one of each type, every field set ---- */

typedef struct sample {
    Bq__Repl__Message msg;
    Bq__Repl__Hello hello;
    Bq__Repl__Welcome welcome;
    Bq__Repl__Refuse refuse;
    Bq__Repl__SegmentStart segment;
    Bq__Repl__Frames frames;
    Bq__Repl__Ack ack;
    Bq__Repl__Heartbeat heartbeat;
    Bq__Repl__VoteRequest vote_request;
    Bq__Repl__VoteReply vote_reply;
    Bq__Repl__Promote promote;
} sample_t;

#define N_TYPES 10
static const char *const type_names[N_TYPES] = {
    "hello", "welcome",   "refuse",       "segment",    "frames",
    "ack",   "heartbeat", "vote request", "vote reply", "promote"};
static uint8_t frames_data[] = "\x18\0\0\0 pretend binlog frame bytes \0\xff";

/* Makes s a message of body case `type` (1..N_TYPES), its fields all set. */
static Bq__Repl__Message *sample(sample_t *s, int type)
{
    *s = (sample_t){.msg = BQ__REPL__MESSAGE__INIT,
                    .hello = BQ__REPL__HELLO__INIT,
                    .welcome = BQ__REPL__WELCOME__INIT,
                    .refuse = BQ__REPL__REFUSE__INIT,
                    .segment = BQ__REPL__SEGMENT_START__INIT,
                    .frames = BQ__REPL__FRAMES__INIT,
                    .ack = BQ__REPL__ACK__INIT,
                    .heartbeat = BQ__REPL__HEARTBEAT__INIT,
                    .vote_request = BQ__REPL__VOTE_REQUEST__INIT,
                    .vote_reply = BQ__REPL__VOTE_REPLY__INIT,
                    .promote = BQ__REPL__PROMOTE__INIT};
    s->msg.body_case = (Bq__Repl__Message__BodyCase)type;
    switch (type) {
    case BQ__REPL__MESSAGE__BODY_HELLO:
        s->hello.version = 1;
        s->hello.cluster_id = "cluster-a";
        s->hello.node_id = "node-2";
        s->hello.last_epoch = UINT64_MAX;
        s->hello.last_lsn = 123456789;
        s->hello.witness = true;
        s->hello.epoch = 12;
        s->msg.hello = &s->hello;
        break;
    case BQ__REPL__MESSAGE__BODY_WELCOME:
        s->welcome.node_id = "node-1";
        s->welcome.epoch = 7;
        s->welcome.last_lsn = 900;
        s->welcome.start = BQ__REPL__START__RESYNC;
        s->welcome.start_lsn = 42;
        s->welcome.client_host = "10.0.0.1";
        s->welcome.client_port = 11300;
        s->msg.welcome = &s->welcome;
        break;
    case BQ__REPL__MESSAGE__BODY_REFUSE:
        s->refuse.reason = BQ__REPL__REFUSE_REASON__STALE_PRIMARY;
        s->refuse.detail = "epoch 9 > 7";
        s->msg.refuse = &s->refuse;
        break;
    case BQ__REPL__MESSAGE__BODY_SEGMENT:
        s->segment.first_lsn = 101;
        s->segment.epoch = 3;
        s->segment.created_wall = -1700000000000000000;
        s->msg.segment = &s->segment;
        break;
    case BQ__REPL__MESSAGE__BODY_FRAMES:
        s->frames.data.data = frames_data;
        s->frames.data.len = sizeof frames_data;
        s->msg.frames = &s->frames;
        break;
    case BQ__REPL__MESSAGE__BODY_ACK:
        s->ack.written_lsn = 10;
        s->ack.flushed_lsn = 9;
        s->ack.applied_lsn = 8;
        s->ack.wall = INT64_MIN;
        s->ack.epoch = 7;
        s->ack.echo = 31;
        s->ack.floor_epoch = 6;
        s->ack.floor_lsn = 800;
        s->msg.ack = &s->ack;
        break;
    case BQ__REPL__MESSAGE__BODY_VOTE_REQUEST:
        s->vote_request.version = 1;
        s->vote_request.cluster_id = "cluster-a";
        s->vote_request.node_id = "node-3";
        s->vote_request.epoch = 8;
        s->vote_request.prevote = true;
        s->vote_request.last_epoch = 7;
        s->vote_request.last_lsn = 900;
        s->msg.vote_request = &s->vote_request;
        break;
    case BQ__REPL__MESSAGE__BODY_VOTE_REPLY:
        s->vote_reply.node_id = "node-2";
        s->vote_reply.epoch = 8;
        s->vote_reply.prevote = true;
        s->vote_reply.granted = true;
        s->vote_reply.primary = "node-1";
        s->msg.vote_reply = &s->vote_reply;
        break;
    case BQ__REPL__MESSAGE__BODY_PROMOTE:
        s->promote.epoch = 9;
        s->promote.from = "node-1";
        s->msg.promote = &s->promote;
        break;
    default:
        s->heartbeat.epoch = 7;
        s->heartbeat.last_lsn = 900;
        s->heartbeat.commit_lsn = 899;
        s->heartbeat.wall = INT64_MAX;
        s->heartbeat.sent = 31;
        s->heartbeat.sync = true;
        s->heartbeat.floor_lsn = 850;
        s->msg.heartbeat = &s->heartbeat;
        break;
    }
    return &s->msg;
}

/* Checks that got is want: the same body and the same packed bytes (protobuf-c
 * packs fields in number order, so equal messages pack equally). */
static void assert_same(const Bq__Repl__Message *got, const Bq__Repl__Message *want)
{
    assert_non_null(got);
    assert_int_equal(got->body_case, want->body_case);
    size_t n = bq__repl__message__get_packed_size(want);
    assert_int_equal(bq__repl__message__get_packed_size(got), n);
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(bq__repl__message__pack(got, a), n);
    assert_int_equal(bq__repl__message__pack(want, b), n);
    assert_memory_equal(a, b, n);
    free(a);
    free(b);
}

/* A buffer of every sample message, encoded one after the other. */
static uint8_t *all_samples(size_t *len, size_t ends[N_TYPES])
{
    size_t total = 0;
    sample_t s;
    for (int t = 1; t <= N_TYPES; t++)
        total += bq_wire_size(sample(&s, t));
    uint8_t *buf = malloc(total);
    assert_non_null(buf);
    size_t at = 0;
    for (int t = 1; t <= N_TYPES; t++) {
        at += bq_wire_pack(sample(&s, t), buf + at);
        ends[t - 1] = at;
    }
    assert_int_equal(at, total);
    *len = total;
    return buf;
}

/* ---- decoding helpers ---- */

/* Feeds buf[0..len) to d in pieces of at most `piece` bytes (0: random sizes
 * from 1 to 64), each from a heap copy of its exact size freed right after
 * the call (a message pointing into its input would be a use after free).
 * Collects up to `cap` messages and the stream offset where each ended;
 * returns how many. Every status but MESSAGE and MORE fails. */
static size_t feed(bq_wire_decoder_t *d, const uint8_t *buf, size_t len, size_t piece,
                   Bq__Repl__Message **msgs, size_t *ends, size_t cap)
{
    size_t n = 0, at = 0;
    while (at < len) {
        size_t k = piece ? piece : 1 + rnd() % 64;
        if (k > len - at)
            k = len - at;
        uint8_t *copy = malloc(k);
        assert_non_null(copy);
        memcpy(copy, buf + at, k);
        size_t off = 0;
        while (off < k) {
            size_t used = 0;
            Bq__Repl__Message *m = NULL;
            bq_wire_status_t st = bq_wire_decode(d, copy + off, k - off, &used, &m);
            assert_true(used <= k - off);
            off += used;
            if (st == BQ_WIRE_MORE) {
                assert_int_equal(off, k);
                assert_null(m);
                continue;
            }
            assert_int_equal(st, BQ_WIRE_MESSAGE);
            assert_true(n < cap);
            msgs[n] = m;
            ends[n++] = at + off;
        }
        free(copy);
        at += k;
    }
    return n;
}

/* Decodes buf[0..len) in one call from a fresh decoder of limit max; the
 * status and bytes used. *msg gets the message, if any. */
static bq_wire_status_t decode_once(uint32_t max, const uint8_t *buf, size_t len, size_t *used,
                                    Bq__Repl__Message **msg)
{
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, max);
    bq_wire_status_t st = bq_wire_decode(&d, buf, len, used, msg);
    bq_wire_decoder_free(&d);
    return st;
}

/* ---- round trips ---- */

static void round_trip_of_every_message_type(void **state)
{
    (void)state;
    for (int t = 1; t <= N_TYPES; t++) {
        sample_t s;
        Bq__Repl__Message *want = sample(&s, t);
        assert_string_equal(bq_wire_body_name(want), type_names[t - 1]);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(bq_wire_encode(want, &buf, &len), 0);
        assert_int_equal(len, bq_wire_size(want));
        assert_int_equal(len, BQ_WIRE_PREFIX + bq__repl__message__get_packed_size(want));
        uint32_t prefix = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
                          (uint32_t)buf[3] << 24;
        assert_int_equal(prefix, len - BQ_WIRE_PREFIX);
        uint8_t *packed = malloc(len);
        assert_non_null(packed);
        assert_int_equal(bq_wire_pack(want, packed), len);
        assert_memory_equal(packed, buf, len);
        free(packed);

        size_t used = 0;
        Bq__Repl__Message *got = NULL;
        assert_int_equal(decode_once(BQ_WIRE_MAX_DEFAULT, buf, len, &used, &got), BQ_WIRE_MESSAGE);
        assert_int_equal(used, len);
        assert_same(got, want);
        assert_string_equal(bq_wire_body_name(got), type_names[t - 1]);
        bq_wire_free(got);
        free(buf);
    }
}

static void round_trip_keeps_field_values(void **state)
{
    (void)state;
    sample_t s;
    uint8_t buf[256];
    size_t used = 0, len = bq_wire_pack(sample(&s, BQ__REPL__MESSAGE__BODY_WELCOME), buf);
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(1000, buf, len, &used, &m), BQ_WIRE_MESSAGE);
    assert_string_equal(m->welcome->node_id, "node-1");
    assert_int_equal(m->welcome->epoch, 7);
    assert_int_equal(m->welcome->start, BQ__REPL__START__RESYNC);
    assert_string_equal(m->welcome->client_host, "10.0.0.1");
    assert_int_equal(m->welcome->client_port, 11300);
    bq_wire_free(m);

    len = bq_wire_pack(sample(&s, BQ__REPL__MESSAGE__BODY_FRAMES), buf);
    assert_int_equal(decode_once(1000, buf, len, &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(m->frames->data.len, sizeof frames_data);
    assert_memory_equal(m->frames->data.data, frames_data, sizeof frames_data);
    bq_wire_free(m);

    len = bq_wire_pack(sample(&s, BQ__REPL__MESSAGE__BODY_ACK), buf);
    assert_int_equal(decode_once(1000, buf, len, &used, &m), BQ_WIRE_MESSAGE);
    assert_true(m->ack->wall == INT64_MIN && m->ack->written_lsn == 10);
    bq_wire_free(m);
}

/* ---- pieces ---- */

/* Decodes the sample stream in pieces of `piece` bytes (0: random) and
 * checks every message and where it ended. */
static void check_stream_in_pieces(size_t piece)
{
    size_t ends[N_TYPES], len = 0;
    uint8_t *buf = all_samples(&len, ends);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, BQ_WIRE_MAX_DEFAULT);
    Bq__Repl__Message *got[N_TYPES + 1];
    size_t got_ends[N_TYPES + 1];
    assert_int_equal(feed(&d, buf, len, piece, got, got_ends, N_TYPES + 1), N_TYPES);
    for (int t = 1; t <= N_TYPES; t++) {
        sample_t s;
        assert_same(got[t - 1], sample(&s, t));
        assert_int_equal(got_ends[t - 1], ends[t - 1]);
        bq_wire_free(got[t - 1]);
    }
    assert_null(d.buf);
    assert_int_equal(d.prefix_have, 0);
    bq_wire_decoder_free(&d);
    free(buf);
}

static void decode_one_byte_at_a_time(void **state)
{
    (void)state;
    check_stream_in_pieces(1);
}

static void decode_in_random_pieces(void **state)
{
    (void)state;
    for (int i = 0; i < 200; i++)
        check_stream_in_pieces(0);
    for (size_t piece = 2; piece <= 70; piece++)
        check_stream_in_pieces(piece);
}

static void several_messages_in_one_buffer(void **state)
{
    (void)state;
    size_t ends[N_TYPES], len = 0;
    uint8_t *buf = all_samples(&len, ends);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, BQ_WIRE_MAX_DEFAULT);
    size_t at = 0;
    for (int t = 1; t <= N_TYPES; t++) {
        size_t used = 0;
        Bq__Repl__Message *m = NULL;
        assert_int_equal(bq_wire_decode(&d, buf + at, len - at, &used, &m), BQ_WIRE_MESSAGE);
        at += used;
        assert_int_equal(at, ends[t - 1]);
        sample_t s;
        assert_same(m, sample(&s, t));
        bq_wire_free(m);
    }
    size_t used = 99;
    Bq__Repl__Message *m = (Bq__Repl__Message *)buf;
    assert_int_equal(bq_wire_decode(&d, buf + at, 0, &used, &m), BQ_WIRE_MORE);
    assert_int_equal(used, 0);
    assert_null(m);
    bq_wire_decoder_free(&d);
    free(buf);
}

static void message_after_a_partial_one_in_the_same_buffer(void **state)
{
    (void)state;
    size_t ends[N_TYPES], len = 0;
    uint8_t *buf = all_samples(&len, ends);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, BQ_WIRE_MAX_DEFAULT);
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    /* The first message minus its last byte, then everything else at once. */
    assert_int_equal(bq_wire_decode(&d, buf, ends[0] - 1, &used, &m), BQ_WIRE_MORE);
    assert_int_equal(used, ends[0] - 1);
    assert_non_null(d.buf);
    assert_int_equal(bq_wire_decode(&d, buf + used, len - used, &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(used, 1);
    assert_null(d.buf);
    sample_t s;
    assert_same(m, sample(&s, 1));
    bq_wire_free(m);
    assert_int_equal(bq_wire_decode(&d, buf + ends[0], len - ends[0], &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(used, ends[1] - ends[0]);
    assert_same(m, sample(&s, 2));
    bq_wire_free(m);
    bq_wire_decoder_free(&d);
    free(buf);
}

/* ---- limits and bad input ---- */

/* Encodes a Frames message whose packed size is exactly n (n >= 4). */
static uint8_t *frames_of_size(uint32_t n, size_t *len)
{
    sample_t s;
    Bq__Repl__Message *m = sample(&s, BQ__REPL__MESSAGE__BODY_FRAMES);
    uint8_t *data = calloc(n, 1);
    assert_non_null(data);
    s.frames.data.data = data;
    size_t k = n;
    while (bq__repl__message__get_packed_size(m) != n) {
        assert_true(k > 0);
        s.frames.data.len = --k;
    }
    uint8_t *buf = NULL;
    assert_int_equal(bq_wire_encode(m, &buf, len), 0);
    assert_int_equal(*len, BQ_WIRE_PREFIX + n);
    free(data);
    return buf;
}

static void exactly_max_is_accepted_max_plus_one_refused(void **state)
{
    (void)state;
    const uint32_t max = 1000;
    size_t len = 0, used = 0;
    Bq__Repl__Message *m = NULL;
    uint8_t *ok = frames_of_size(max, &len);
    assert_int_equal(decode_once(max, ok, len, &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(used, len);
    bq_wire_free(m);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, max);
    assert_int_equal(feed(&d, ok, len, 7, &m, &used, 1), 1);
    bq_wire_free(m);
    bq_wire_decoder_free(&d);
    free(ok);

    uint8_t *big = frames_of_size(max + 1, &len);
    assert_int_equal(decode_once(max, big, len, &used, &m), BQ_WIRE_TOO_BIG);
    assert_int_equal(used, BQ_WIRE_PREFIX);
    assert_null(m);
    /* Reported once the prefix is in, before any body byte or allocation. */
    bq_wire_decoder_init(&d, max);
    assert_int_equal(bq_wire_decode(&d, big, 3, &used, &m), BQ_WIRE_MORE);
    assert_int_equal(bq_wire_decode(&d, big + 3, 1, &used, &m), BQ_WIRE_TOO_BIG);
    assert_int_equal(used, 1);
    assert_null(d.buf);
    bq_wire_decoder_free(&d);
    free(big);
}

static void too_big_for_the_default_limit(void **state)
{
    (void)state;
    uint8_t prefix[BQ_WIRE_PREFIX];
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    bq_wire_decoder_t d;
    const uint32_t lens[] = {BQ_WIRE_MAX_DEFAULT + 1, UINT32_MAX};
    for (size_t i = 0; i < 2; i++) {
        put_le32(prefix, lens[i]);
        bq_wire_decoder_init(&d, BQ_WIRE_MAX_DEFAULT);
        assert_int_equal(bq_wire_decode(&d, prefix, sizeof prefix, &used, &m), BQ_WIRE_TOO_BIG);
        assert_int_equal(used, BQ_WIRE_PREFIX);
        assert_null(d.buf);
        bq_wire_decoder_free(&d);
    }
}

static void zero_length_is_bad(void **state)
{
    (void)state;
    sample_t s;
    uint8_t buf[64] = {0};
    size_t len = bq_wire_pack(sample(&s, BQ__REPL__MESSAGE__BODY_ACK), buf + BQ_WIRE_PREFIX);
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(1000, buf, BQ_WIRE_PREFIX + len, &used, &m), BQ_WIRE_BAD);
    assert_int_equal(used, BQ_WIRE_PREFIX);
    assert_null(m);
    assert_int_equal(decode_once(1000, buf, BQ_WIRE_PREFIX, &used, &m), BQ_WIRE_BAD);
    assert_int_equal(used, BQ_WIRE_PREFIX);
}

static void garbage_payload_is_bad(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t len;
    } cases[] = {
        {"\xff\xff\xff\xff\xff", 5}, /* a key that is an endless varint */
        {"\x08\x80\x80", 3},         /* a varint cut short */
        {"\x2a\x10\x0a\x02xx", 6},   /* frames longer than the message */
        {"\x0f\x01", 2},             /* wire type 7 */
        {"\x2a\x03\x0a\x05x", 5},    /* data longer than frames */
        {"\x0a\x02\x12\x80", 4},     /* hello with a cut string */
        {"\x1a\x02\x08\x80", 4},     /* refuse with a cut varint */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t buf[32];
        put_le32(buf, (uint32_t)cases[i].len);
        memcpy(buf + BQ_WIRE_PREFIX, cases[i].bytes, cases[i].len);
        size_t n = BQ_WIRE_PREFIX + cases[i].len, used = 0;
        Bq__Repl__Message *m = NULL;
        assert_int_equal(decode_once(1000, buf, n, &used, &m), BQ_WIRE_BAD);
        assert_int_equal(used, n);
        assert_null(m);
        /* The same in pieces: the decoder buffers it, then refuses it. */
        bq_wire_decoder_t d;
        bq_wire_decoder_init(&d, 1000);
        assert_int_equal(bq_wire_decode(&d, buf, n - 1, &used, &m), BQ_WIRE_MORE);
        assert_int_equal(bq_wire_decode(&d, buf + n - 1, 1, &used, &m), BQ_WIRE_BAD);
        assert_null(m);
        assert_null(d.buf);
        bq_wire_decoder_free(&d);
    }
}

static void message_without_a_body_is_bad(void **state)
{
    (void)state;
    /* Only an unknown field (15, varint 1): it unpacks, with no body. */
    const uint8_t unknown[] = {2, 0, 0, 0, 0x78, 0x01};
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(1000, unknown, sizeof unknown, &used, &m), BQ_WIRE_BAD);
    assert_int_equal(used, sizeof unknown);
    assert_null(m);
    Bq__Repl__Message *direct = bq__repl__message__unpack(NULL, 2, unknown + BQ_WIRE_PREFIX);
    assert_non_null(direct);
    assert_int_equal(direct->body_case, BQ__REPL__MESSAGE__BODY__NOT_SET);
    assert_string_equal(bq_wire_body_name(direct), "none");
    bq__repl__message__free_unpacked(direct, NULL);

    /* A message without a body encodes to length 0, which is bad too. */
    Bq__Repl__Message empty = BQ__REPL__MESSAGE__INIT;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(bq_wire_encode(&empty, &buf, &len), 0);
    assert_int_equal(len, BQ_WIRE_PREFIX);
    assert_int_equal(decode_once(1000, buf, len, &used, &m), BQ_WIRE_BAD);
    free(buf);
}

static void invalid_field_numbers_are_bad(void **state)
{
    (void)state;
    /* protobuf-c accepts these padded keys; they pack back differently. */
    static const struct {
        const char *bytes;
        size_t len;
    } cases[] = {
        {"\x32\x02\x08\x05\x80\x00\x01", 7},              /* field 0 next to ack */
        {"\x32\x05\x08\x05\x80\x00\x01", 7},              /* field 0 in ack */
        {"\x32\x02\x08\x05\x80\x80\x80\x80\x10\x01", 10}, /* field 2^29 */
        {"\x32\x08\x08\x05\x80\x80\x80\x80\x10\x01", 10}, /* the same in ack */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Bq__Repl__Message *direct =
            bq__repl__message__unpack(NULL, cases[i].len, (const uint8_t *)cases[i].bytes);
        assert_non_null(direct);
        bq__repl__message__free_unpacked(direct, NULL);
        uint8_t buf[32];
        put_le32(buf, (uint32_t)cases[i].len);
        memcpy(buf + BQ_WIRE_PREFIX, cases[i].bytes, cases[i].len);
        size_t used = 0;
        Bq__Repl__Message *m = NULL;
        assert_int_equal(decode_once(1000, buf, BQ_WIRE_PREFIX + cases[i].len, &used, &m),
                         BQ_WIRE_BAD);
        assert_null(m);
    }
    /* The largest field number is fine: a later version may use it. */
    const uint8_t ok[] = {10, 0, 0, 0, 0x32, 0x02, 0x08, 0x05, 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01};
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(1000, ok, sizeof ok, &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(used, sizeof ok);
    bq_wire_free(m);
}

static void unknown_fields_next_to_a_body_are_accepted(void **state)
{
    (void)state;
    /* ack {written_lsn: 5}, then field 15 = 1 (a later version's field). */
    const uint8_t bytes[] = {6, 0, 0, 0, 0x32, 0x02, 0x08, 0x05, 0x78, 0x01};
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(1000, bytes, sizeof bytes, &used, &m), BQ_WIRE_MESSAGE);
    assert_int_equal(used, sizeof bytes);
    assert_string_equal(bq_wire_body_name(m), "ack");
    assert_int_equal(m->ack->written_lsn, 5);
    bq_wire_free(m);
}

/* A message made of many tiny unknown fields (what an authenticated peer
 * could send to make the decoder allocate 24 bytes of bookkeeping per 2
 * bytes of input) is refused by the unpack budget, as BAD, whereas the same
 * fields in a few large ones are accepted. */
static void unknown_field_flood_is_bad(void **state)
{
    (void)state;
    enum { FIELDS = 30000 };
    /* ack {written_lsn: 5}, then FIELDS x field 15 = 1 (2 bytes each). */
    size_t len = BQ_WIRE_PREFIX + 4 + 2 * FIELDS;
    uint8_t *bytes = malloc(len);
    assert_non_null(bytes);
    uint32_t n = (uint32_t)(len - BQ_WIRE_PREFIX);
    memcpy(bytes, (uint8_t[]){n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >> 24}, 4);
    memcpy(bytes + 4, (uint8_t[]){0x32, 0x02, 0x08, 0x05}, 4);
    for (size_t i = 0; i < FIELDS; i++) {
        bytes[8 + 2 * i] = 0x78;
        bytes[9 + 2 * i] = 0x01;
    }
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(decode_once(BQ_WIRE_MAX_DEFAULT, bytes, len, &used, &m), BQ_WIRE_BAD);
    assert_null(m);
    /* One unknown length-delimited field of the same size: accepted. */
    size_t blen = 2 * FIELDS;
    len = BQ_WIRE_PREFIX + 4 + 4 + blen;
    n = (uint32_t)(len - BQ_WIRE_PREFIX);
    memcpy(bytes, (uint8_t[]){n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >> 24}, 4);
    /* field 15, wire type 2 (0x7a), length as a 3-byte varint */
    uint8_t head[] = {0x7a, (uint8_t)(0x80 | (blen & 0x7f)), (uint8_t)(0x80 | ((blen >> 7) & 0x7f)),
                      (uint8_t)(blen >> 14)};
    uint8_t *big = malloc(len);
    assert_non_null(big);
    memcpy(big, bytes, 8);
    memcpy(big + 8, head, sizeof head);
    memset(big + 8 + sizeof head, 'x', blen);
    assert_int_equal(decode_once(BQ_WIRE_MAX_DEFAULT, big, len, &used, &m), BQ_WIRE_MESSAGE);
    assert_string_equal(bq_wire_body_name(m), "ack");
    bq_wire_free(m);
    free(big);
    free(bytes);
}

/* The control limit: a stranger's hello of more than 64 KiB is refused
 * before it is buffered whole; a decoder's limit can be raised later. */
static void control_limit_then_raised(void **state)
{
    (void)state;
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, BQ_WIRE_MAX_CONTROL);
    uint8_t prefix[4] = {0x01, 0x00, 0x01, 0x00}; /* 65537 */
    size_t used = 0;
    Bq__Repl__Message *m = NULL;
    assert_int_equal(bq_wire_decode(&d, prefix, 4, &used, &m), BQ_WIRE_TOO_BIG);
    bq_wire_decoder_free(&d);
    bq_wire_decoder_init(&d, BQ_WIRE_MAX_CONTROL);
    bq_wire_decoder_limit(&d, BQ_WIRE_MAX_DEFAULT);
    assert_int_equal(bq_wire_decode(&d, prefix, 4, &used, &m), BQ_WIRE_MORE);
    bq_wire_decoder_free(&d);
}

/* ---- a big message ---- */

static void frames_of_one_mib_in_tls_records(void **state)
{
    (void)state;
    uint8_t *data = malloc(ONE_MIB);
    assert_non_null(data);
    for (size_t i = 0; i < ONE_MIB; i++)
        data[i] = (uint8_t)rnd();
    sample_t s;
    Bq__Repl__Message *want = sample(&s, BQ__REPL__MESSAGE__BODY_FRAMES);
    s.frames.data.data = data;
    s.frames.data.len = ONE_MIB;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(bq_wire_encode(want, &buf, &len), 0);

    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, 2 * ONE_MIB);
    size_t at = 0, used = 0;
    uint8_t *gather = NULL;
    Bq__Repl__Message *got = NULL;
    bq_wire_status_t st = BQ_WIRE_MORE;
    while (st == BQ_WIRE_MORE) {
        size_t k = len - at < TLS_RECORD ? len - at : TLS_RECORD;
        st = bq_wire_decode(&d, buf + at, k, &used, &got);
        assert_int_equal(used, k);
        at += k;
        if (st != BQ_WIRE_MORE)
            break;
        /* One buffer of the message's exact length, never moved or grown. */
        if (!gather)
            gather = d.buf;
        assert_non_null(d.buf);
        assert_ptr_equal(d.buf, gather);
        assert_int_equal(d.need, len - BQ_WIRE_PREFIX);
        assert_int_equal(d.have, at - BQ_WIRE_PREFIX);
    }
    assert_int_equal(st, BQ_WIRE_MESSAGE);
    assert_int_equal(at, len);
    assert_null(d.buf);
    assert_int_equal(got->frames->data.len, ONE_MIB);
    assert_memory_equal(got->frames->data.data, data, ONE_MIB);
    bq_wire_free(got);

    /* Whole in one buffer it is unpacked from there. */
    assert_int_equal(bq_wire_decode(&d, buf, len, &used, &got), BQ_WIRE_MESSAGE);
    assert_int_equal(used, len);
    assert_null(d.buf);
    free(buf);
    assert_memory_equal(got->frames->data.data, data, ONE_MIB);
    bq_wire_free(got);
    bq_wire_decoder_free(&d);
    free(data);
}

static void free_releases_a_partial_message(void **state)
{
    (void)state;
    size_t len = 0, used = 0;
    uint8_t *buf = frames_of_size(5000, &len);
    bq_wire_decoder_t d;
    bq_wire_decoder_init(&d, 10000);
    Bq__Repl__Message *m = NULL;
    assert_int_equal(bq_wire_decode(&d, buf, len / 2, &used, &m), BQ_WIRE_MORE);
    assert_non_null(d.buf);
    bq_wire_decoder_free(&d);
    assert_null(d.buf);
    assert_int_equal(d.max, 10000);
    /* Usable again from the start of a message. */
    assert_int_equal(bq_wire_decode(&d, buf, len, &used, &m), BQ_WIRE_MESSAGE);
    bq_wire_free(m);
    bq_wire_free(NULL);
    bq_wire_decoder_free(&d);
    free(buf);
}

static void status_names_are_distinct(void **state)
{
    (void)state;
    const bq_wire_status_t all[] = {BQ_WIRE_MESSAGE, BQ_WIRE_MORE, BQ_WIRE_TOO_BIG, BQ_WIRE_BAD,
                                    BQ_WIRE_NOMEM};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(bq_wire_status_name(all[i]), bq_wire_status_name(all[j]));
}

/* ---- fuzz_repl_wire's seeds ---- */

#define SEED_MAX 4096

/* Appends msg's encoding to buf at *at (room for SEED_MAX bytes). */
static void seed_add(uint8_t *buf, size_t *at, const Bq__Repl__Message *msg)
{
    assert_true(*at + bq_wire_size(msg) <= SEED_MAX);
    *at += bq_wire_pack(msg, buf + *at);
}

/* Writes two real binlog frames (a put's id reservation and its job) into
 * out; returns their length. */
static size_t binlog_frames(uint8_t *out)
{
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    st.state = BQ__LOG__JOB_STATE__READY;
    st.pri = 1024;
    Bq__Log__JobFull full = BQ__LOG__JOB_FULL__INIT;
    full.id = 1;
    full.tube = "default";
    full.ttr = 60;
    full.created_wall = 1700000000000000000;
    full.body = (ProtobufCBinaryData){5, (uint8_t *)"hello"};
    full.status = &st;
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    ids.next = 1001;
    Bq__Log__Record recs[2] = {BQ__LOG__RECORD__INIT, BQ__LOG__RECORD__INIT};
    recs[0].kind_case = BQ__LOG__RECORD__KIND_IDS;
    recs[0].ids = &ids;
    recs[1].kind_case = BQ__LOG__RECORD__KIND_FULL;
    recs[1].full = &full;
    size_t at = 0;
    for (int i = 0; i < 2; i++) {
        size_t n = bq__log__record__pack(&recs[i], out + at + BQ_FRAME_HEADER);
        bq_frame_header(out + at, 101 + (uint64_t)i, 3, out + at + BQ_FRAME_HEADER, (uint32_t)n);
        at += BQ_FRAME_HEADER + n;
    }
    return at;
}

static void seed_save(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Saves the sample of each type alone, a primary's stream and a standby's,
 * and near-valid streams the decoder must refuse or wait on. */
static void write_seeds(void **state)
{
    const char *dir = *state;
    static uint8_t buf[SEED_MAX], frames[512];
    sample_t s;
    for (int t = 1; t <= N_TYPES; t++) {
        size_t at = 0;
        seed_add(buf, &at, sample(&s, t));
        char name[32];
        snprintf(name, sizeof name, "%s.wire", type_names[t - 1]);
        for (char *sp = strchr(name, ' '); sp; sp = strchr(sp, ' '))
            *sp = '-'; /* "vote request" -> vote-request.wire */
        seed_save(dir, name, buf, at);
    }
    size_t at = 0;
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_WELCOME));
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_SEGMENT));
    Bq__Repl__Message *m = sample(&s, BQ__REPL__MESSAGE__BODY_FRAMES);
    s.frames.data = (ProtobufCBinaryData){binlog_frames(frames), frames};
    seed_add(buf, &at, m);
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_HEARTBEAT));
    seed_save(dir, "primary-stream.wire", buf, at);
    seed_save(dir, "primary-stream-cut.wire", buf, at - 7);

    at = 0;
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_HELLO));
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_ACK));
    seed_add(buf, &at, sample(&s, BQ__REPL__MESSAGE__BODY_ACK));
    seed_save(dir, "standby-stream.wire", buf, at);

    /* ack and an unknown field 15 (accepted), then padded keys of fields 0
     * and 2^29 (refused). */
    static const uint8_t unknown[] = {6, 0, 0, 0, 0x32, 0x02, 0x08, 0x05, 0x78, 0x01};
    static const uint8_t field0[] = {7, 0, 0, 0, 0x32, 0x05, 0x08, 0x05, 0x80, 0x00, 0x01};
    static const uint8_t field_big[] = {10,   0,    0,    0,    0x32, 0x02, 0x08,
                                        0x05, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01};
    seed_save(dir, "unknown-field.wire", unknown, sizeof unknown);
    seed_save(dir, "field-0.wire", field0, sizeof field0);
    seed_save(dir, "field-2p29.wire", field_big, sizeof field_big);
    static const uint8_t zero_len[] = {0, 0, 0, 0, 0x32, 0x00};
    static const uint8_t too_big[] = {0x01, 0x00, 0x10, 0x00, 0x2a, 0x00};
    static const uint8_t no_body[] = {2, 0, 0, 0, 0x78, 0x01};
    static const uint8_t garbage[] = {5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff};
    seed_save(dir, "zero-length.wire", zero_len, sizeof zero_len);
    seed_save(dir, "too-big.wire", too_big, sizeof too_big);
    seed_save(dir, "no-body.wire", no_body, sizeof no_body);
    seed_save(dir, "garbage.wire", garbage, sizeof garbage);
}

int main(void)
{
    const char *seed_dir = getenv("BQ_REPL_WIRE_SEED_DIR");
    if (seed_dir) {
        const struct CMUnitTest seeds[] = {
            cmocka_unit_test_prestate(write_seeds, (void *)seed_dir),
        };
        return cmocka_run_group_tests(seeds, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_of_every_message_type),
        cmocka_unit_test(round_trip_keeps_field_values),
        cmocka_unit_test(decode_one_byte_at_a_time),
        cmocka_unit_test(decode_in_random_pieces),
        cmocka_unit_test(several_messages_in_one_buffer),
        cmocka_unit_test(message_after_a_partial_one_in_the_same_buffer),
        cmocka_unit_test(exactly_max_is_accepted_max_plus_one_refused),
        cmocka_unit_test(too_big_for_the_default_limit),
        cmocka_unit_test(zero_length_is_bad),
        cmocka_unit_test(garbage_payload_is_bad),
        cmocka_unit_test(message_without_a_body_is_bad),
        cmocka_unit_test(invalid_field_numbers_are_bad),
        cmocka_unit_test(unknown_fields_next_to_a_body_are_accepted),
        cmocka_unit_test(unknown_field_flood_is_bad),
        cmocka_unit_test(control_limit_then_raised),
        cmocka_unit_test(frames_of_one_mib_in_tls_records),
        cmocka_unit_test(free_releases_a_partial_message),
        cmocka_unit_test(status_names_are_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
