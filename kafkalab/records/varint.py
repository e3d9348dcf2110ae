"""Variable-length integers of RecordBatch v2 records (protobuf style).

Kafka's class: org.apache.kafka.common.utils.ByteUtils. Signed values are
zigzag-encoded first (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) so that small
negative numbers (a null key is length -1) stay one byte long. Each byte holds
7 bits, least significant group first; the top bit says "more bytes follow".
A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.
"""

from __future__ import annotations

from kafkalab.records.record_batch import CorruptRecordError


def zigzag(value: int) -> int:
    """Signed -> unsigned (works for int32 and int64 alike)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint (int32) to `out`."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint (int32) cannot hold {value}; use a varlong")
    write_unsigned_varint(out, zigzag(value) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag varlong (int64) to `out`."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong (int64) cannot hold {value}")
    write_unsigned_varint(out, zigzag(value) & 0xFFFFFFFFFFFFFFFF)


def read_unsigned_varint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5
) -> tuple[int, int]:
    """Decode at `pos`; returns (value, position after it)."""
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise CorruptRecordError(f"varint at position {pos} runs past the end of the data")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint at position {pos} is longer than {max_bytes} bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_varint(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise CorruptRecordError("varint does not fit in 32 bits")
    return unzigzag(raw), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_varint(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("varlong does not fit in 64 bits")
    return unzigzag(raw), pos


def size_of_varint(value: int) -> int:
    """Bytes a zigzag varint/varlong of `value` takes."""
    raw = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while raw > 0x7F:
        raw >>= 7
        size += 1
    return size
