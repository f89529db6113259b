/* An independent reading of the binlog byte layout, for tests and fuzz
 * targets to check protocol/frame.c against: CRC-32C computed one bit at a
 * time straight from its definition, and explicit little-endian reads. It
 * shares no code with the implementation under test. Header-only. */
#ifndef BQ_TEST_FRAME_ORACLE_H
#define BQ_TEST_FRAME_ORACLE_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of p[0..n), continuing from crc (start with 0), bit by bit. */
static inline uint32_t oracle_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

/* The little-endian u32 at p. */
static inline uint32_t oracle_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The little-endian u64 at p. */
static inline uint64_t oracle_le64(const uint8_t *p)
{
    return (uint64_t)oracle_le32(p) | (uint64_t)oracle_le32(p + 4) << 32;
}

#endif
