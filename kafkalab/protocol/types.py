"""The primitive types of the Kafka protocol, read from and written to buffers.

Kafka's classes: org.apache.kafka.common.protocol.types.Type and the generated
message code's readers and writers. All integers are big-endian. Each type has
a classic form and, for *flexible* versions (KIP-482), a compact form:

    type              classic                          compact (flexible versions)
    string            int16 length + UTF-8             unsigned varint (length + 1) + UTF-8
    nullable string   length -1 means null             0 means null
    bytes             int32 length + bytes             unsigned varint (length + 1) + bytes
    array             int32 count (-1 null) + items    unsigned varint (count + 1) + items
    records           like nullable bytes              like compact nullable bytes

Flexible structs end with tagged fields: an unsigned varint count, then per
field an unsigned varint tag, an unsigned varint size and the bytes.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kafkalab.records.varint import (
    read_unsigned_varint,
    read_varint,
    read_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)


class ProtocolError(Exception):
    """A frame does not follow the protocol (truncated, impossible length, bad
    UTF-8). The broker closes the connection; Kafka logs the same."""


class Reader:
    """Reads primitive values from `buf` starting at `pos`, keeping its place."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.end = len(self.buf)

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > self.end:
            raise ProtocolError(
                f"need {n} bytes at position {self.pos} but only {self.end - self.pos} remain"
            )
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def _unpack(self, fmt: struct.Struct) -> Any:
        if self.pos + fmt.size > self.end:
            raise ProtocolError(
                f"need {fmt.size} bytes at position {self.pos} but only "
                f"{self.end - self.pos} remain"
            )
        value = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return value

    def remaining(self) -> int:
        return self.end - self.pos

    def unsigned_varint(self) -> int:
        try:
            value, self.pos = read_unsigned_varint(self.buf, self.pos)
        except Exception as e:
            raise ProtocolError(str(e)) from None
        return value


class Writer:
    """Collects encoded bytes. A response that carries file ranges (records sent
    with sendfile) becomes several parts: bytes, a file range, bytes, ..."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []

    def file_range(self, records: Any) -> None:
        """Add a FileRecords slice to be sent from its file."""
        if self.buf:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        self.parts.append(records)

    def finish(self) -> list[Any]:
        if self.buf or not self.parts:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        return self.parts

    def getvalue(self) -> bytes:
        """All bytes (file ranges read into memory); for tests and the client."""
        out = bytearray()
        for part in self.finish():
            out += part if isinstance(part, (bytes, bytearray)) else part.read()
        return bytes(out)


class RecordsView:
    """Records bytes a request carries by reference: written as a part of their
    own (Writer.file_range), so encode_request_parts hands the caller's buffer to
    the socket without copying it into the frame (a producer's 1 MB batches)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = memoryview(data)

    def size_in_bytes(self) -> int:
        return self.data.nbytes

    def read(self) -> bytes:
        return bytes(self.data)


class Type:
    """One wire type. `nullable` is decided per field and version by the schema."""

    name = "?"

    def write(self, w: Writer, value: Any, flexible: bool, nullable: bool) -> None:
        raise NotImplementedError

    def read(self, r: Reader, flexible: bool, nullable: bool) -> Any:
        raise NotImplementedError

    def default(self) -> Any:
        return None

    def __repr__(self) -> str:
        return self.name


class _Fixed(Type):
    def __init__(self, name: str, fmt: str, default: Any = 0) -> None:
        self.name = name
        self.struct = struct.Struct(">" + fmt)
        self._default = default

    def write(self, w, value, flexible, nullable):
        try:
            w.buf += self.struct.pack(value)
        except struct.error as e:
            raise ProtocolError(f"{self.name} cannot hold {value!r}: {e}") from None

    def read(self, r, flexible, nullable):
        return r._unpack(self.struct)

    def default(self):
        return self._default


class _Bool(_Fixed):
    def write(self, w, value, flexible, nullable):
        w.buf.append(1 if value else 0)

    def read(self, r, flexible, nullable):
        return r._unpack(self.struct) != 0


INT8 = _Fixed("int8", "b")
INT16 = _Fixed("int16", "h")
INT32 = _Fixed("int32", "i")
INT64 = _Fixed("int64", "q")
UINT16 = _Fixed("uint16", "H")
FLOAT64 = _Fixed("float64", "d", 0.0)
BOOL = _Bool("bool", "B", False)


class _Varint(Type):
    name = "varint"

    def write(self, w, value, flexible, nullable):
        write_varint(w.buf, value)

    def read(self, r, flexible, nullable):
        try:
            value, r.pos = read_varint(r.buf, r.pos)
        except Exception as e:
            raise ProtocolError(str(e)) from None
        return value

    def default(self):
        return 0


class _Varlong(_Varint):
    name = "varlong"

    def write(self, w, value, flexible, nullable):
        write_varlong(w.buf, value)

    def read(self, r, flexible, nullable):
        try:
            value, r.pos = read_varlong(r.buf, r.pos)
        except Exception as e:
            raise ProtocolError(str(e)) from None
        return value


VARINT = _Varint()
VARLONG = _Varlong()


class _Uuid(Type):
    name = "uuid"

    def write(self, w, value, flexible, nullable):
        w.buf += (value or uuid.UUID(int=0)).bytes

    def read(self, r, flexible, nullable):
        return uuid.UUID(bytes=bytes(r._take(16)))

    def default(self):
        return uuid.UUID(int=0)


UUID = _Uuid()


def write_length(w: Writer, length: int | None, flexible: bool, classic: struct.Struct) -> None:
    if flexible:
        write_unsigned_varint(w.buf, 0 if length is None else length + 1)
    else:
        w.buf += classic.pack(-1 if length is None else length)


def read_length(r: Reader, flexible: bool, classic: struct.Struct) -> int | None:
    if flexible:
        n = r.unsigned_varint() - 1
    else:
        n = r._unpack(classic)
    return None if n < 0 else n


I16 = struct.Struct(">h")
I32 = struct.Struct(">i")


class _String(Type):
    name = "string"

    def write(self, w, value, flexible, nullable):
        if value is None:
            if not nullable:
                raise ProtocolError("a non-nullable string field is None")
            write_length(w, None, flexible, I16)
            return
        data = value.encode("utf-8")
        if not flexible and len(data) > 32767:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        write_length(w, len(data), flexible, I16)
        w.buf += data

    def read(self, r, flexible, nullable):
        n = read_length(r, flexible, I16)
        if n is None:
            if not nullable:
                raise ProtocolError(f"null in a non-nullable string at position {r.pos}")
            return None
        try:
            return str(r._take(n), "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"string at position {r.pos - n} is not valid UTF-8") from None

    def default(self):
        return ""


class _Bytes(Type):
    name = "bytes"

    def write(self, w, value, flexible, nullable):
        if value is None:
            if not nullable:
                raise ProtocolError("a non-nullable bytes field is None")
            write_length(w, None, flexible, I32)
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            write_length(w, len(value), flexible, I32)
            w.buf += value
            return
        # A FileRecords slice: length now, bytes sent from the file.
        write_length(w, value.size_in_bytes(), flexible, I32)
        w.file_range(value)

    def read(self, r, flexible, nullable):
        n = read_length(r, flexible, I32)
        if n is None:
            if not nullable:
                raise ProtocolError(f"null in a non-nullable bytes field at position {r.pos}")
            return None
        return r._take(n)  # a view into the request: no copy

    def default(self):
        return b""


STRING = _String()
BYTES = _Bytes()
RECORDS = _Bytes()
RECORDS.name = "records"


class ArrayOf(Type):
    """An array of a primitive type (`[]int32`)."""

    def __init__(self, item: Type) -> None:
        self.item = item
        self.name = f"[]{item.name}"

    def write(self, w, value, flexible, nullable):
        if value is None:
            if not nullable:
                raise ProtocolError(f"a non-nullable {self.name} field is None")
            write_length(w, None, flexible, I32)
            return
        write_length(w, len(value), flexible, I32)
        for item in value:
            self.item.write(w, item, flexible, False)

    def read(self, r, flexible, nullable):
        n = read_length(r, flexible, I32)
        if n is None:
            if not nullable:
                raise ProtocolError(f"null in a non-nullable {self.name} at position {r.pos}")
            return None
        if n > r.remaining():
            raise ProtocolError(f"array of {n} items cannot fit in {r.remaining()} bytes")
        return [self.item.read(r, flexible, False) for _ in range(n)]

    def default(self):
        return []


def write_tagged_fields(w: Writer, tagged: dict[int, bytes] | None = None) -> None:
    """Flexible versions end every struct with tagged fields (we send none or raw ones)."""
    tagged = tagged or {}
    write_unsigned_varint(w.buf, len(tagged))
    for tag in sorted(tagged):
        write_unsigned_varint(w.buf, tag)
        write_unsigned_varint(w.buf, len(tagged[tag]))
        w.buf += tagged[tag]


def read_tagged_fields(r: Reader) -> dict[int, bytes]:
    """Read and keep tagged fields as raw bytes (unknown ones are skipped, as Kafka does)."""
    count = r.unsigned_varint()
    out = {}
    for _ in range(count):
        tag = r.unsigned_varint()
        size = r.unsigned_varint()
        out[tag] = bytes(r._take(size))
    return out
