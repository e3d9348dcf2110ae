"""Compression of a batch's records (everything after the 61-byte header).

Kafka's classes: org.apache.kafka.common.compress.* (GzipCompression,
SnappyCompression, Lz4Compression, ZstdCompression). The codec is attribute
bits 0-2 of the batch; the header itself is never compressed, which is why a
broker can read offsets and check CRCs without decompressing.

What each codec writes, as the Java producer does:

- GZIP: a gzip member (RFC 1952) with mtime 0 and OS 255, as kafka-python writes
  it; level `compression.gzip.level` (Kafka's default -1 means zlib's 6).
- SNAPPY: Xerial's framing: a 16-byte header (0x82 'SNAPPY' 0x00, version 1,
  compatible 1), then blocks of at most 32 KiB of input, each a big-endian
  int32 length and raw snappy bytes. Readers also accept plain raw snappy,
  which librdkafka sends.
- LZ4: an LZ4 frame (magic 0x184D2204) with independent 64 KiB blocks and no
  content size, like Java's KafkaLZ4BlockOutputStream; level default 9.
- ZSTD: a zstd frame; level `compression.zstd.level`, default 3.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame

from kafkalab.records.record_batch import CompressionType, CorruptRecordError

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

#: Kafka's default levels (compression.<codec>.level); -1 for gzip is zlib's default.
DEFAULT_LEVELS = {
    CompressionType.GZIP: 6,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}


class CompressionError(CorruptRecordError):
    """Compressed records could not be decompressed (Kafka: CORRUPT_MESSAGE)."""


def compress(
    codec: CompressionType, data: bytes | bytearray | memoryview, level: int | None = None
) -> bytes:
    """Compress `data` with `codec` (NONE returns it unchanged)."""
    codec = CompressionType(codec)
    data = bytes(data)
    if codec == CompressionType.NONE:
        return data
    if level is None or level == -1:
        level = DEFAULT_LEVELS.get(codec)
    if codec == CompressionType.GZIP:
        return _gzip_member(data, level)
    if codec == CompressionType.SNAPPY:
        out = bytearray(XERIAL_HEADER)
        for start in range(0, len(data), XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK_SIZE]))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec == CompressionType.LZ4:
        return lz4.frame.compress(
            data,
            compression_level=level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def _gzip_member(data: bytes, level: int) -> bytes:
    """One gzip member (RFC 1952): 10-byte header with mtime 0, no file name, XFL
    from the level and OS 255 (unknown), as Python's GzipFile and so kafka-python
    write it; then raw deflate, CRC-32 and the length mod 2**32."""
    xfl = 2 if level == 9 else 4 if level == 1 else 0
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + bytes([xfl, 255])
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def decompress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress records compressed with `codec`; CompressionError when they are bad."""
    codec = CompressionType(codec)
    data = bytes(data)
    if codec == CompressionType.NONE:
        return data
    try:
        if codec == CompressionType.GZIP:
            return gzip.decompress(data)
        if codec == CompressionType.SNAPPY:
            if data.startswith(XERIAL_HEADER[:8]):
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == CompressionType.LZ4:
            return lz4.frame.decompress(data)
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CompressionError:
        raise
    except (
        OSError,
        EOFError,
        RuntimeError,
        ValueError,
        zlib.error,
        cramjam.DecompressionError,
    ) as e:
        raise CompressionError(
            f"records compressed with {codec.name} could not be decompressed: {e}"
        ) from e
    raise ValueError(f"unknown compression codec {codec}")


def _xerial_decompress(data: bytes) -> bytes:
    out = bytearray()
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("xerial snappy stream ends inside a block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError(f"xerial snappy block of {size} bytes runs past the end")
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)
