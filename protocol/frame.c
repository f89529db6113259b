/* Binlog frames and segment prefixes (see frame.h): fixed little-endian
 * layout whatever the host, a CRC-32C over everything but the checksum
 * itself: the CPU's crc32 instruction on x86-64 with SSE4.2, else a
 * slicing-by-8 table that needs no CPU feature. */
#include "protocol/frame.h"

#include <string.h>

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_CRC_INSN 1
/* The same CRC with SSE4.2's crc32 instruction (same polynomial). */
__attribute__((target("sse4.2"))) static uint32_t crc_insn(uint32_t crc, const uint8_t *p,
                                                           size_t len)
{
    uint64_t c = ~crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

/* 0: not yet known, 1: the table, 2: the instruction. Set once, the same
 * value by any thread that races to set it. */
static volatile int crc_impl;

static int crc_choose(void)
{
    crc_init();
#ifdef HAVE_CRC_INSN
    __builtin_cpu_init();
    crc_impl = __builtin_cpu_supports("sse4.2") ? 2 : 1;
#else
    crc_impl = 1;
#endif
    return crc_impl;
}

uint32_t bq_crc32c(uint32_t crc, const void *data, size_t len)
{
    int impl = crc_impl ? crc_impl : crc_choose();
#ifdef HAVE_CRC_INSN
    if (impl == 2)
        return crc_insn(crc, data, len);
#endif
    (void)impl;
    return bq_crc32c_portable(crc, data, len);
}

uint32_t bq_crc32c_portable(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (!crc_impl)
        crc_choose();
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* The checksum of a frame: its length, LSN, epoch and payload. */
static uint32_t frame_crc(const uint8_t *hdr, const void *payload, uint32_t len)
{
    uint32_t crc = bq_crc32c(0, hdr, 4);
    crc = bq_crc32c(crc, hdr + 8, 16);
    return bq_crc32c(crc, payload, len);
}

void bq_frame_header(uint8_t out[BQ_FRAME_HEADER], uint64_t lsn, uint64_t epoch,
                     const void *payload, uint32_t len)
{
    put32(out, len);
    put64(out + 8, lsn);
    put64(out + 16, epoch);
    put32(out + 4, frame_crc(out, payload, len));
}

void bq_frame_read_header(const uint8_t hdr[BQ_FRAME_HEADER], bq_frame_t *f)
{
    f->len = get32(hdr);
    f->crc = get32(hdr + 4);
    f->lsn = get64(hdr + 8);
    f->epoch = get64(hdr + 16);
}

bq_frame_status_t bq_frame_span(const uint8_t *buf, size_t avail, bq_frame_t *f)
{
    static const uint8_t zero[BQ_FRAME_HEADER];
    if (avail < BQ_FRAME_HEADER)
        return avail && memcmp(buf, zero, avail) == 0 ? BQ_FRAME_END : BQ_FRAME_SHORT;
    if (memcmp(buf, zero, BQ_FRAME_HEADER) == 0)
        return BQ_FRAME_END;
    bq_frame_read_header(buf, f);
    if (f->len == 0 || f->len > BQ_FRAME_MAX_PAYLOAD)
        return BQ_FRAME_BAD_LEN;
    return avail - BQ_FRAME_HEADER < f->len ? BQ_FRAME_SHORT : BQ_FRAME_OK;
}

bq_frame_status_t bq_frame_decode(const uint8_t *buf, size_t avail, bq_frame_t *f,
                                  const uint8_t **payload)
{
    bq_frame_status_t st = bq_frame_span(buf, avail, f);
    if (st != BQ_FRAME_OK)
        return st;
    if (frame_crc(buf, buf + BQ_FRAME_HEADER, f->len) != f->crc)
        return BQ_FRAME_BAD_CRC;
    *payload = buf + BQ_FRAME_HEADER;
    return BQ_FRAME_OK;
}

const char *bq_frame_status_name(bq_frame_status_t st)
{
    static const char *const names[] = {"ok", "end", "short frame", "bad length", "bad checksum"};
    return st <= BQ_FRAME_BAD_CRC ? names[st] : "unknown";
}

size_t bq_segment_prefix(uint8_t *out, const void *hdr, uint32_t hdr_len)
{
    memcpy(out, BQ_SEGMENT_MAGIC, 8);
    put32(out + 8, BQ_SEGMENT_VERSION);
    put32(out + 12, hdr_len);
    put32(out + 16, bq_crc32c(0, hdr, hdr_len));
    memcpy(out + BQ_SEGMENT_PREFIX_FIXED, hdr, hdr_len);
    return BQ_SEGMENT_PREFIX_FIXED + hdr_len;
}

bq_segment_status_t bq_segment_prefix_decode(const uint8_t *buf, size_t avail, const uint8_t **hdr,
                                             uint32_t *hdr_len, size_t *prefix_len)
{
    if (avail < BQ_SEGMENT_PREFIX_FIXED)
        return BQ_SEGMENT_SHORT;
    if (memcmp(buf, BQ_SEGMENT_MAGIC, 8) != 0)
        return BQ_SEGMENT_BAD_MAGIC;
    if (get32(buf + 8) != BQ_SEGMENT_VERSION)
        return BQ_SEGMENT_BAD_VERSION;
    uint32_t len = get32(buf + 12);
    if (len > BQ_SEGMENT_HEADER_MAX)
        return BQ_SEGMENT_BAD_HEADER;
    if (avail - BQ_SEGMENT_PREFIX_FIXED < len)
        return BQ_SEGMENT_SHORT;
    if (bq_crc32c(0, buf + BQ_SEGMENT_PREFIX_FIXED, len) != get32(buf + 16))
        return BQ_SEGMENT_BAD_HEADER;
    *hdr = buf + BQ_SEGMENT_PREFIX_FIXED;
    *hdr_len = len;
    *prefix_len = BQ_SEGMENT_PREFIX_FIXED + len;
    return BQ_SEGMENT_OK;
}

const char *bq_segment_status_name(bq_segment_status_t st)
{
    static const char *const names[] = {"ok", "short file", "not a beanstalkd-ha segment",
                                        "unsupported format version", "bad header"};
    return st <= BQ_SEGMENT_BAD_HEADER ? names[st] : "unknown";
}
