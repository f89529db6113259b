/* Binlog frames and segment prefixes: the byte layout shared by the binlog
 * files, the replication stream and snapshots. Pure: encode and decode in
 * caller-owned buffers, no I/O.
 *
 * A frame is a 24-byte little-endian header followed by its payload (one
 * protobuf bq.log.Record):
 *
 *   u32 len     payload length, 1..BQ_FRAME_MAX_PAYLOAD
 *   u32 crc     CRC-32C of the other 20 header bytes and the payload
 *   u64 lsn     log sequence number, +1 per frame
 *   u64 epoch   epoch of the primary that wrote it
 *
 * A header of 24 zero bytes marks the clean end of a segment (segments are
 * preallocated with zeros). docs/binlog.md has the full format. */
#ifndef BQ_FRAME_H
#define BQ_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_FRAME_HEADER 24
/* No epoch above this is ever written, adopted or stood in: far beyond any
 * real count of elections (one per failover timeout at most), it keeps
 * every epoch + 1 from wrapping. */
#define BQ_EPOCH_MAX (UINT64_C(1) << 62)

/* A job body of the largest -z plus the record around it. */
#define BQ_FRAME_MAX_PAYLOAD (1073741824u + 4096u)

/* Segment files start with this 8-byte magic and a u32 format version. */
#define BQ_SEGMENT_MAGIC "BQHALOG\n"
#define BQ_SEGMENT_VERSION 1u
/* magic, version, header length, header CRC-32C, then the header. */
#define BQ_SEGMENT_PREFIX_FIXED 20
#define BQ_SEGMENT_HEADER_MAX 4096u

typedef struct bq_frame {
    uint32_t len;
    uint32_t crc;
    uint64_t lsn;
    uint64_t epoch;
} bq_frame_t;

typedef enum bq_frame_status {
    BQ_FRAME_OK = 0,  /* *f and the payload are valid */
    BQ_FRAME_END,     /* a zero header: the clean end of the data */
    BQ_FRAME_SHORT,   /* fewer bytes than the header or the payload needs */
    BQ_FRAME_BAD_LEN, /* length 0 (with a non-zero header) or too large */
    BQ_FRAME_BAD_CRC, /* the checksum does not match */
} bq_frame_status_t;

/* CRC-32C (Castagnoli) of len bytes, continuing from crc (start with 0). */
uint32_t bq_crc32c(uint32_t crc, const void *data, size_t len);

/* The same CRC computed with tables only, whatever the CPU (for tests). */
uint32_t bq_crc32c_portable(uint32_t crc, const void *data, size_t len);

/* Writes the header of a frame carrying payload[0..len) into out. */
void bq_frame_header(uint8_t out[BQ_FRAME_HEADER], uint64_t lsn, uint64_t epoch,
                     const void *payload, uint32_t len);

/* Reads the fields of a frame header, checking nothing (for frames
 * already checked, or to learn a frame's length before reading it). */
void bq_frame_read_header(const uint8_t hdr[BQ_FRAME_HEADER], bq_frame_t *f);

/* Decodes the frame at buf[0..avail): on BQ_FRAME_OK fills *f and points
 * *payload into buf. Never reads past avail. */
bq_frame_status_t bq_frame_decode(const uint8_t *buf, size_t avail, bq_frame_t *f,
                                  const uint8_t **payload);

/* Like bq_frame_decode but without checking the CRC: where the next whole
 * frame ends, for bytes already checked (or checked by the receiver). */
bq_frame_status_t bq_frame_span(const uint8_t *buf, size_t avail, bq_frame_t *f);

/* The name of a status, for logs. */
const char *bq_frame_status_name(bq_frame_status_t st);

/* Writes a segment prefix (magic, version, header) around the packed
 * SegmentHeader hdr[0..hdr_len) into out (room for BQ_SEGMENT_PREFIX_FIXED +
 * hdr_len bytes). Returns the prefix length. */
size_t bq_segment_prefix(uint8_t *out, const void *hdr, uint32_t hdr_len);

typedef enum bq_segment_status {
    BQ_SEGMENT_OK = 0,
    BQ_SEGMENT_SHORT,       /* the file is shorter than its prefix */
    BQ_SEGMENT_BAD_MAGIC,   /* not a beanstalkd-ha segment */
    BQ_SEGMENT_BAD_VERSION, /* a format version this build cannot read */
    BQ_SEGMENT_BAD_HEADER,  /* header length or checksum wrong */
} bq_segment_status_t;

/* Checks the prefix at buf[0..avail); on BQ_SEGMENT_OK points *hdr at the
 * packed SegmentHeader, sets *hdr_len and *prefix_len. */
bq_segment_status_t bq_segment_prefix_decode(const uint8_t *buf, size_t avail, const uint8_t **hdr,
                                             uint32_t *hdr_len, size_t *prefix_len);

/* The name of a segment status, for logs. */
const char *bq_segment_status_name(bq_segment_status_t st);

#endif
