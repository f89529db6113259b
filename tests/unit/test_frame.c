/* Unit tests of the binlog byte layout (protocol/frame.c): CRC-32C against
 * published vectors and a bitwise reference, frame headers (every field at
 * its offset, little-endian), frame decoding of truncated, zero, oversized
 * and bit-flipped input, and segment prefixes.
 *
 * Every decode runs on a heap copy of exactly the bytes it may read, so an
 * ASan build of this test reports any read past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"
#include "tests/support/frame_oracle.h"

/* A deterministic generator (xorshift64*), so that failures reproduce. */
static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A malloc'd copy of exactly n bytes of src (at least 1 byte allocated). */
static uint8_t *exact_copy(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    if (n)
        memcpy(p, src, n);
    return p;
}

/* bq_frame_decode on an exact-size copy of buf[0..n). */
static bq_frame_status_t decode_exact(const uint8_t *buf, size_t n, bq_frame_t *f,
                                      const uint8_t **payload_off)
{
    uint8_t *copy = exact_copy(buf, n);
    const uint8_t *payload = NULL;
    bq_frame_t tmp;
    bq_frame_status_t st = bq_frame_decode(copy, n, f ? f : &tmp, &payload);
    if (payload_off)
        *payload_off = payload ? buf + (payload - copy) : NULL;
    free(copy);
    return st;
}

/* A frame of len random payload bytes at buf (room for 24 + len). */
static size_t make_frame(uint8_t *buf, uint32_t len, uint64_t lsn, uint64_t epoch)
{
    fill_random(buf + BQ_FRAME_HEADER, len);
    bq_frame_header(buf, lsn, epoch, buf + BQ_FRAME_HEADER, len);
    return BQ_FRAME_HEADER + (size_t)len;
}

/* ---- CRC-32C ---- */

static void crc_known_vectors(void **state)
{
    (void)state;
    uint8_t buf[32];
    assert_int_equal(bq_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(bq_crc32c(0, "", 0), 0);
    memset(buf, 0, sizeof buf);
    assert_int_equal(bq_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    assert_int_equal(bq_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(bq_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(bq_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void crc_matches_bitwise_reference(void **state)
{
    (void)state;
    uint8_t buf[600];
    for (int round = 0; round < 300; round++) {
        size_t len = (size_t)(rnd() % sizeof buf);
        size_t off = (size_t)(rnd() % 8); /* every alignment of the 8-byte loop */
        if (off + len > sizeof buf)
            len = sizeof buf - off;
        fill_random(buf, sizeof buf);
        assert_int_equal(bq_crc32c(0, buf + off, len), oracle_crc32c(0, buf + off, len));
        assert_int_equal(bq_crc32c_portable(0, buf + off, len), oracle_crc32c(0, buf + off, len));
        assert_int_equal(bq_crc32c(7, buf + off, len), oracle_crc32c(7, buf + off, len));
    }
}

static void crc_incremental_equals_one_shot(void **state)
{
    (void)state;
    uint8_t buf[1000];
    fill_random(buf, sizeof buf);
    uint32_t whole = bq_crc32c(0, buf, sizeof buf);
    /* every two-piece split of the first 70 bytes */
    uint32_t head = bq_crc32c(0, buf, 70);
    for (size_t cut = 0; cut <= 70; cut++)
        assert_int_equal(bq_crc32c(bq_crc32c(0, buf, cut), buf + cut, 70 - cut), head);
    /* random splits of the whole buffer into up to 20 pieces */
    for (int round = 0; round < 500; round++) {
        uint32_t crc = 0;
        size_t pos = 0;
        int pieces = 1 + (int)(rnd() % 20);
        for (int k = 0; k < pieces - 1 && pos < sizeof buf; k++) {
            size_t n = (size_t)(rnd() % (sizeof buf - pos + 1));
            crc = bq_crc32c(crc, buf + pos, n);
            pos += n;
        }
        crc = bq_crc32c(crc, buf + pos, sizeof buf - pos);
        assert_int_equal(crc, whole);
    }
}

/* ---- frames ---- */

static void frame_round_trip(void **state)
{
    (void)state;
    static const uint32_t lens[] = {1, 2, 7, 8, 9, 100, 255, 257, 4000};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        uint8_t buf[BQ_FRAME_HEADER + 4000];
        uint64_t lsn = rnd(), epoch = rnd();
        size_t n = make_frame(buf, lens[k], lsn, epoch);
        bq_frame_t f;
        const uint8_t *payload = NULL;
        assert_int_equal(decode_exact(buf, n, &f, &payload), BQ_FRAME_OK);
        assert_int_equal(f.len, lens[k]);
        assert_true(f.lsn == lsn);
        assert_true(f.epoch == epoch);
        assert_int_equal(f.crc, oracle_le32(buf + 4));
        assert_ptr_equal(payload, buf + BQ_FRAME_HEADER);
    }
}

static void frame_header_fields_are_little_endian_at_their_offsets(void **state)
{
    (void)state;
    uint8_t buf[BQ_FRAME_HEADER + 5];
    memcpy(buf + BQ_FRAME_HEADER, "hello", 5);
    bq_frame_header(buf, UINT64_C(0x0102030405060708), UINT64_C(0x1112131415161718),
                    buf + BQ_FRAME_HEADER, 5);
    static const uint8_t expect_len[4] = {5, 0, 0, 0};
    static const uint8_t expect_lsn[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    static const uint8_t expect_epoch[8] = {0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11};
    assert_memory_equal(buf, expect_len, 4);
    assert_memory_equal(buf + 8, expect_lsn, 8);
    assert_memory_equal(buf + 16, expect_epoch, 8);
    assert_memory_equal(buf + BQ_FRAME_HEADER, "hello", 5); /* payload untouched */
    /* the CRC (offset 4, little-endian) covers len, lsn, epoch and payload */
    uint8_t covered[4 + 16 + 5];
    memcpy(covered, buf, 4);
    memcpy(covered + 4, buf + 8, 16);
    memcpy(covered + 20, "hello", 5);
    uint32_t crc = oracle_crc32c(0, covered, sizeof covered);
    assert_int_equal(oracle_le32(buf + 4), crc);
    assert_int_equal(buf[4], crc & 0xff);
    assert_int_equal(buf[7], crc >> 24);
    assert_true(oracle_le64(buf + 8) == UINT64_C(0x0102030405060708));
}

static void frame_decode_consecutive_frames_then_end(void **state)
{
    (void)state;
    uint8_t buf[3 * (BQ_FRAME_HEADER + 50) + 100];
    memset(buf, 0, sizeof buf);
    size_t pos = 0;
    for (uint64_t lsn = 10; lsn < 13; lsn++)
        pos += make_frame(buf + pos, (uint32_t)(20 + lsn), lsn, 3);
    uint8_t *copy = exact_copy(buf, sizeof buf);
    size_t at = 0;
    for (uint64_t lsn = 10; lsn < 13; lsn++) {
        bq_frame_t f;
        const uint8_t *payload;
        assert_int_equal(bq_frame_decode(copy + at, sizeof buf - at, &f, &payload), BQ_FRAME_OK);
        assert_true(f.lsn == lsn);
        assert_int_equal(f.len, 20 + lsn);
        assert_ptr_equal(payload, copy + at + BQ_FRAME_HEADER);
        at += BQ_FRAME_HEADER + f.len;
    }
    assert_int_equal(at, pos);
    bq_frame_t f;
    const uint8_t *payload;
    assert_int_equal(bq_frame_decode(copy + at, sizeof buf - at, &f, &payload), BQ_FRAME_END);
    free(copy);
}

static void frame_truncated_at_every_byte_is_short(void **state)
{
    (void)state;
    uint8_t buf[BQ_FRAME_HEADER + 300];
    /* 300 = 0x12c: the first byte of the header is not zero */
    size_t n = make_frame(buf, 300, 77, 1);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(decode_exact(buf, cut, NULL, NULL), BQ_FRAME_SHORT);
    assert_int_equal(decode_exact(buf, n, NULL, NULL), BQ_FRAME_OK);
}

static void frame_truncated_header_with_zero_prefix_reads_as_end(void **state)
{
    (void)state;
    /* Length 256 starts with a zero byte: cut after it, the bytes are all
     * zero, which is what a preallocated tail looks like. */
    uint8_t buf[BQ_FRAME_HEADER + 256];
    size_t n = make_frame(buf, 256, 1, 0);
    assert_int_equal(buf[0], 0);
    assert_int_equal(decode_exact(buf, 1, NULL, NULL), BQ_FRAME_END);
    for (size_t cut = 2; cut < n; cut++)
        assert_int_equal(decode_exact(buf, cut, NULL, NULL), BQ_FRAME_SHORT);
}

static void frame_zero_header_is_end(void **state)
{
    (void)state;
    uint8_t zero[BQ_FRAME_HEADER + 40];
    memset(zero, 0, sizeof zero);
    assert_int_equal(decode_exact(zero, sizeof zero, NULL, NULL), BQ_FRAME_END);
    assert_int_equal(decode_exact(zero, BQ_FRAME_HEADER, NULL, NULL), BQ_FRAME_END);
    /* a short all-zero tail: the preallocated end of a segment */
    for (size_t n = 1; n < BQ_FRAME_HEADER; n++)
        assert_int_equal(decode_exact(zero, n, NULL, NULL), BQ_FRAME_END);
    /* nothing at all is not an end marker */
    assert_int_equal(decode_exact(zero, 0, NULL, NULL), BQ_FRAME_SHORT);
    /* zero header followed by garbage is still the end */
    zero[BQ_FRAME_HEADER] = 0x55;
    assert_int_equal(decode_exact(zero, sizeof zero, NULL, NULL), BQ_FRAME_END);
    /* a short tail with one non-zero byte is not */
    memset(zero, 0, sizeof zero);
    zero[10] = 1;
    assert_int_equal(decode_exact(zero, 11, NULL, NULL), BQ_FRAME_SHORT);
}

static void frame_zero_length_with_nonzero_header_is_bad_len(void **state)
{
    (void)state;
    uint8_t buf[BQ_FRAME_HEADER + 8];
    memset(buf, 0, sizeof buf);
    bq_frame_header(buf, 1, 0, buf + BQ_FRAME_HEADER, 0);
    assert_int_equal(decode_exact(buf, sizeof buf, NULL, NULL), BQ_FRAME_BAD_LEN);
    /* any non-zero byte outside the length will do */
    for (size_t i = 4; i < BQ_FRAME_HEADER; i++) {
        memset(buf, 0, sizeof buf);
        buf[i] = 0x80;
        assert_int_equal(decode_exact(buf, BQ_FRAME_HEADER, NULL, NULL), BQ_FRAME_BAD_LEN);
    }
}

static void frame_length_over_max_is_bad_len(void **state)
{
    (void)state;
    uint8_t buf[BQ_FRAME_HEADER + 16];
    memset(buf, 0xAB, sizeof buf);
    static const uint32_t bad[] = {BQ_FRAME_MAX_PAYLOAD + 1, BQ_FRAME_MAX_PAYLOAD + 4096,
                                   0x80000000u, 0xFFFFFFFFu};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        put_le32(buf, bad[k]);
        assert_int_equal(decode_exact(buf, sizeof buf, NULL, NULL), BQ_FRAME_BAD_LEN);
    }
    /* the largest allowed length is only short of data */
    put_le32(buf, BQ_FRAME_MAX_PAYLOAD);
    assert_int_equal(decode_exact(buf, sizeof buf, NULL, NULL), BQ_FRAME_SHORT);
}

/* The status a frame whose bit `bit` was flipped must decode to, with
 * `avail` bytes available. */
static bq_frame_status_t flipped_status(uint32_t len, size_t bit, size_t avail)
{
    if (bit >= 32)
        return BQ_FRAME_BAD_CRC; /* crc, lsn, epoch or payload */
    uint32_t nl = len ^ (1u << bit);
    if (nl == 0 || nl > BQ_FRAME_MAX_PAYLOAD)
        return BQ_FRAME_BAD_LEN;
    return nl > avail - BQ_FRAME_HEADER ? BQ_FRAME_SHORT : BQ_FRAME_BAD_CRC;
}

static void check_bit_flips(uint32_t len, size_t tail)
{
    size_t n = BQ_FRAME_HEADER + len;
    uint8_t *buf = calloc(1, n + tail);
    assert_non_null(buf);
    make_frame(buf, len, 12345, 7);
    assert_int_equal(decode_exact(buf, n + tail, NULL, NULL), BQ_FRAME_OK);
    for (size_t bit = 0; bit < n * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        bq_frame_status_t st = decode_exact(buf, n + tail, NULL, NULL);
        if (st != flipped_status(len, bit, n + tail))
            fail_msg("len %u, tail %zu, bit %zu flipped: %s", len, tail, bit,
                     bq_frame_status_name(st));
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    free(buf);
}

static void frame_every_single_bit_flip_is_detected(void **state)
{
    (void)state;
    check_bit_flips(64, 0); /* a power of two: one flip makes the length 0 */
    check_bit_flips(100, 0);
    check_bit_flips(100, 200); /* longer lengths now fit in the buffer: crc catches them */
    check_bit_flips(1, 4096);
}

static void frame_status_names(void **state)
{
    (void)state;
    assert_string_equal(bq_frame_status_name(BQ_FRAME_OK), "ok");
    assert_string_equal(bq_frame_status_name(BQ_FRAME_END), "end");
    assert_string_equal(bq_frame_status_name(BQ_FRAME_SHORT), "short frame");
    assert_string_equal(bq_frame_status_name(BQ_FRAME_BAD_LEN), "bad length");
    assert_string_equal(bq_frame_status_name(BQ_FRAME_BAD_CRC), "bad checksum");
    assert_string_equal(bq_frame_status_name((bq_frame_status_t)99), "unknown");
    assert_string_equal(bq_segment_status_name(BQ_SEGMENT_OK), "ok");
    assert_string_equal(bq_segment_status_name(BQ_SEGMENT_BAD_HEADER), "bad header");
    assert_string_equal(bq_segment_status_name((bq_segment_status_t)99), "unknown");
}

/* ---- segment prefixes ---- */

/* A packed SegmentHeader in out (malloc'd); its length. */
static size_t packed_segment_header(uint8_t **out)
{
    Bq__Log__SegmentHeader sh = BQ__LOG__SEGMENT_HEADER__INIT;
    sh.seq = 42;
    sh.first_lsn = 1000;
    sh.epoch = 3;
    sh.cluster_id = "cluster-a";
    sh.node_id = "node-1";
    sh.created_wall = INT64_C(1700000000000000000);
    size_t n = bq__log__segment_header__get_packed_size(&sh);
    *out = malloc(n);
    assert_non_null(*out);
    assert_int_equal(bq__log__segment_header__pack(&sh, *out), n);
    return n;
}

static bq_segment_status_t prefix_decode_exact(const uint8_t *buf, size_t n, uint32_t *hdr_len,
                                               size_t *prefix_len, size_t *hdr_off)
{
    uint8_t *copy = exact_copy(buf, n);
    const uint8_t *hdr = NULL;
    uint32_t hl = 0;
    size_t pl = 0;
    bq_segment_status_t st = bq_segment_prefix_decode(copy, n, &hdr, &hl, &pl);
    if (hdr_len)
        *hdr_len = hl;
    if (prefix_len)
        *prefix_len = pl;
    if (hdr_off)
        *hdr_off = hdr ? (size_t)(hdr - copy) : SIZE_MAX;
    free(copy);
    return st;
}

static void segment_prefix_round_trip(void **state)
{
    (void)state;
    uint8_t *hdr;
    size_t hn = packed_segment_header(&hdr);
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + 256 + 64];
    memset(buf, 0, sizeof buf);
    size_t pn = bq_segment_prefix(buf, hdr, (uint32_t)hn);
    assert_int_equal(pn, BQ_SEGMENT_PREFIX_FIXED + hn);
    /* raw layout: magic, version, length, CRC, header */
    assert_memory_equal(buf, "BQHALOG\n", 8);
    assert_int_equal(oracle_le32(buf + 8), BQ_SEGMENT_VERSION);
    assert_int_equal(buf[8], 1);
    assert_int_equal(oracle_le32(buf + 12), hn);
    assert_int_equal(oracle_le32(buf + 16), oracle_crc32c(0, hdr, hn));
    assert_memory_equal(buf + 20, hdr, hn);
    /* decoding, exactly and with frames after it */
    uint32_t hl;
    size_t pl, off;
    assert_int_equal(prefix_decode_exact(buf, pn, &hl, &pl, &off), BQ_SEGMENT_OK);
    assert_int_equal(hl, hn);
    assert_int_equal(pl, pn);
    assert_int_equal(off, BQ_SEGMENT_PREFIX_FIXED);
    assert_int_equal(prefix_decode_exact(buf, sizeof buf, &hl, &pl, &off), BQ_SEGMENT_OK);
    assert_int_equal(pl, pn);
    Bq__Log__SegmentHeader *sh = bq__log__segment_header__unpack(NULL, hl, buf + off);
    assert_non_null(sh);
    assert_int_equal(sh->seq, 42);
    assert_string_equal(sh->node_id, "node-1");
    bq__log__segment_header__free_unpacked(sh, NULL);
    /* an empty header is allowed */
    pn = bq_segment_prefix(buf, "", 0);
    assert_int_equal(pn, BQ_SEGMENT_PREFIX_FIXED);
    assert_int_equal(prefix_decode_exact(buf, pn, &hl, &pl, NULL), BQ_SEGMENT_OK);
    assert_int_equal(hl, 0);
    assert_int_equal(pl, BQ_SEGMENT_PREFIX_FIXED);
    free(hdr);
}

static void segment_prefix_bad_magic(void **state)
{
    (void)state;
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + 16];
    size_t pn = bq_segment_prefix(buf, "0123456789abcdef", 16);
    for (size_t i = 0; i < 8; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_MAGIC);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    /* beanstalkd's binlog starts with its version number */
    uint8_t bsd[BQ_SEGMENT_PREFIX_FIXED + 16];
    memset(bsd, 0, sizeof bsd);
    bsd[0] = 7;
    assert_int_equal(prefix_decode_exact(bsd, sizeof bsd, NULL, NULL, NULL), BQ_SEGMENT_BAD_MAGIC);
}

static void segment_prefix_bad_version(void **state)
{
    (void)state;
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + 16];
    size_t pn = bq_segment_prefix(buf, "0123456789abcdef", 16);
    static const uint32_t bad[] = {0, 2, 0x01000000u, 0xFFFFFFFFu};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        put_le32(buf + 8, bad[k]);
        assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_VERSION);
    }
}

static void segment_prefix_bad_header_length(void **state)
{
    (void)state;
    size_t cap = BQ_SEGMENT_PREFIX_FIXED + BQ_SEGMENT_HEADER_MAX + 2;
    uint8_t *buf = calloc(1, cap);
    uint8_t *hdr = malloc(BQ_SEGMENT_HEADER_MAX + 1);
    assert_non_null(buf);
    assert_non_null(hdr);
    fill_random(hdr, BQ_SEGMENT_HEADER_MAX + 1);
    /* the largest header is fine; one byte more is refused even when the
     * data is there and its CRC matches */
    size_t pn = bq_segment_prefix(buf, hdr, BQ_SEGMENT_HEADER_MAX);
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_OK);
    pn = bq_segment_prefix(buf, hdr, BQ_SEGMENT_HEADER_MAX + 1);
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_HEADER);
    put_le32(buf + 12, 0xFFFFFFFFu);
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_HEADER);
    /* a length that is too short makes the CRC fail */
    pn = bq_segment_prefix(buf, hdr, 100);
    put_le32(buf + 12, 99);
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_HEADER);
    free(hdr);
    free(buf);
}

static void segment_prefix_bad_header_crc(void **state)
{
    (void)state;
    uint8_t *hdr;
    size_t hn = packed_segment_header(&hdr);
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + 256];
    size_t pn = bq_segment_prefix(buf, hdr, (uint32_t)hn);
    /* every bit of the stored CRC and of the header */
    for (size_t bit = 16 * 8; bit < pn * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_BAD_HEADER);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_OK);
    free(hdr);
}

static void segment_prefix_short(void **state)
{
    (void)state;
    uint8_t *hdr;
    size_t hn = packed_segment_header(&hdr);
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + 256];
    size_t pn = bq_segment_prefix(buf, hdr, (uint32_t)hn);
    for (size_t cut = 0; cut < pn; cut++)
        assert_int_equal(prefix_decode_exact(buf, cut, NULL, NULL, NULL), BQ_SEGMENT_SHORT);
    assert_int_equal(prefix_decode_exact(buf, pn, NULL, NULL, NULL), BQ_SEGMENT_OK);
    free(hdr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc_known_vectors),
        cmocka_unit_test(crc_matches_bitwise_reference),
        cmocka_unit_test(crc_incremental_equals_one_shot),
        cmocka_unit_test(frame_round_trip),
        cmocka_unit_test(frame_header_fields_are_little_endian_at_their_offsets),
        cmocka_unit_test(frame_decode_consecutive_frames_then_end),
        cmocka_unit_test(frame_truncated_at_every_byte_is_short),
        cmocka_unit_test(frame_truncated_header_with_zero_prefix_reads_as_end),
        cmocka_unit_test(frame_zero_header_is_end),
        cmocka_unit_test(frame_zero_length_with_nonzero_header_is_bad_len),
        cmocka_unit_test(frame_length_over_max_is_bad_len),
        cmocka_unit_test(frame_every_single_bit_flip_is_detected),
        cmocka_unit_test(frame_status_names),
        cmocka_unit_test(segment_prefix_round_trip),
        cmocka_unit_test(segment_prefix_bad_magic),
        cmocka_unit_test(segment_prefix_bad_version),
        cmocka_unit_test(segment_prefix_bad_header_length),
        cmocka_unit_test(segment_prefix_bad_header_crc),
        cmocka_unit_test(segment_prefix_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
