"""Record (v2): one key/value with headers inside a RecordBatch.

Kafka's class: org.apache.kafka.common.record.DefaultRecord. On the wire:

    length          varint   bytes after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headersCount    varint
    headers         [keyLength varint, key utf-8, valueLength varint, value bytes]
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalab.records.record_batch import CorruptRecordError
from kafkalab.records.varint import read_varint, read_varlong, write_varint, write_varlong


@dataclass(frozen=True, slots=True)
class Header:
    """A record header (Kafka: RecordHeader). Keys are strings, values bytes or None."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] | list[Header] = (),
) -> bytes:
    """The bytes of one record, length prefix included."""
    body = bytearray(b"\x00")  # attributes
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    write_varint(body, len(headers))
    for header in headers:
        _write_bytes(body, header.key.encode("utf-8"))
        _write_bytes(body, header.value)
    out = bytearray()
    write_varint(out, len(body))
    out += body
    return bytes(out)


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"{what} length {length} is invalid")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"{what} of {length} bytes runs past the end of its record")
    return bytes(buf[pos : pos + length]), pos + length


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int, base_offset: int, base_timestamp: int
) -> tuple[Record, int]:
    """Decode the record at `pos`; returns (record, position after it)."""
    length, pos = read_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} at position {pos} is impossible")
    pos += 1  # attributes
    timestamp_delta, pos = read_varlong(buf, pos)
    offset_delta, pos = read_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end, "key")
    value, pos = _read_bytes(buf, pos, end, "value")
    count, pos = read_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"record has a negative header count {count}")
    headers = []
    for _ in range(count):
        hkey, pos = _read_bytes(buf, pos, end, "header key")
        if hkey is None:
            raise CorruptRecordError("a header key is null")
        hvalue, pos = _read_bytes(buf, pos, end, "header value")
        try:
            headers.append(Header(hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError:
            raise CorruptRecordError("a header key is not valid UTF-8") from None
    if pos != end:
        raise CorruptRecordError(
            f"record says it is {length} bytes but its fields take {length - (end - pos)}"
        )
    return (
        Record(
            base_offset + offset_delta, base_timestamp + timestamp_delta, key, value, tuple(headers)
        ),
        pos,
    )
