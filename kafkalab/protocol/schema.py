"""Message schemas declared as data, with one generic encoder and decoder.

Kafka declares every request and response once, in JSON
(`clients/src/main/resources/common/message/*.json`): fields, their types and
the versions each exists in; code is generated from that. kafkalab does the
same without a generator step: `Message` holds the declaration and walks it to
encode or decode any version. A field looks like this:

    Field("transactional_id", STRING, versions="3+", nullable="0+")
    Field("topics", [Field("name", STRING), Field("partitions", [...])])   # array of structs
    Field("group_instance_id", STRING, "5+", nullable="5+", default=NULL)  # absent: None
    Field("assignment", Struct([Field("topic_partitions", [...])]), nullable="0+")  # one struct
    Field("cluster_id", STRING, "12+", nullable="12+", default=NULL, tag=0)  # a tagged field

Decoded messages are plain dicts with Kafka's field names in snake_case, so a
lab can print one and compare it with the JSON schema.

Invariants: a field is read or written only in the versions it exists in;
flexible versions (from `flexible_from`) use compact types and end each struct
with tagged fields (KIP-482). A Field with a `tag` is a tagged field (Kafka's
`"taggedVersions"`, `"tag"`): it exists only in flexible versions, is written in
the tagged section only when it differs from its default, and is read back from
it; unknown tagged fields are kept raw under "_tagged".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalab.protocol.types import (
    I32,
    INT8,
    ProtocolError,
    Reader,
    Type,
    Writer,
    read_length,
    read_tagged_fields,
    write_length,
    write_tagged_fields,
)


@dataclass(frozen=True)
class Versions:
    """A version range as Kafka writes it: "3+", "0-2", "" (none)."""

    low: int
    high: int | None  # None: no upper bound

    @classmethod
    def parse(cls, spec: str) -> Versions:
        spec = spec.strip()
        if not spec or spec == "none":
            return cls(1, 0)  # empty
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            low, high = spec.split("-")
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)


class _Null:
    """Kafka's `"default": "null"`: a nullable field that is absent means None."""

    def __repr__(self) -> str:
        return "NULL"


NULL: Any = _Null()


@dataclass
class Struct:
    """A field that is one struct, not an array of them (Kafka: `"type": "Assignment"`).
    Nullable, it is preceded by an int8: -1 for null, 1 for present."""

    fields: list[Field]


@dataclass
class Field:
    """One field: a primitive type, an array of a primitive (ArrayOf), an array of
    structs (a list of Fields), or one struct (Struct)."""

    name: str
    type: Type | list[Field] | Struct
    versions: str = "0+"
    nullable: str = ""
    default: Any = None
    tag: int | None = None  # a tagged field's tag (flexible versions only)
    _versions: Versions = field(init=False, repr=False)
    _nullable: Versions = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._versions = Versions.parse(self.versions)
        self._nullable = Versions.parse(self.nullable)

    def default_value(self) -> Any:
        if self.default is NULL:
            return None
        if self.default is not None:
            return self.default
        if isinstance(self.type, list):
            return []
        if isinstance(self.type, Struct):
            return {f.name: f.default_value() for f in self.type.fields}
        return self.type.default()


def write_struct(w: Writer, fields: list[Field], obj: dict, version: int, flexible: bool) -> None:
    tagged: dict[int, bytes] = {}
    for f in fields:
        if version not in f._versions:
            continue
        if f.tag is not None:
            if flexible:
                _write_tagged(tagged, f, obj, version)
            continue
        value = obj.get(f.name, None) if f.name in obj else f.default_value()
        nullable = version in f._nullable
        if isinstance(f.type, Struct):
            if nullable:
                INT8.write(w, -1 if value is None else 1, flexible, False)
            if value is None:
                if not nullable:
                    raise ProtocolError(f"field {f.name} is not nullable in version {version}")
                continue
            write_struct(w, f.type.fields, value, version, flexible)
        elif isinstance(f.type, list):
            if value is None:
                if not nullable:
                    raise ProtocolError(f"field {f.name} is not nullable in version {version}")
                _write_count(w, None, flexible)
                continue
            _write_count(w, len(value), flexible)
            for item in value:
                write_struct(w, f.type, item, version, flexible)
        else:
            try:
                f.type.write(w, value, flexible, nullable)
            except ProtocolError as e:
                raise ProtocolError(f"field {f.name} (version {version}): {e}") from None
    if flexible:
        write_tagged_fields(w, {**(obj.get("_tagged") or {}), **tagged})


def _write_tagged(tagged: dict[int, bytes], f: Field, obj: dict, version: int) -> None:
    """Encode tagged field `f` into `tagged` unless it holds its default (Kafka writes
    a tagged field only when it differs from its default)."""
    assert f.tag is not None
    value = obj.get(f.name, None) if f.name in obj else f.default_value()
    if value is None or value == f.default_value():
        return
    inner = Writer()
    write_struct(
        inner,
        [Field(f.name, f.type, f.versions, f.nullable, f.default)],
        {f.name: value},
        version,
        True,
    )
    tagged[f.tag] = bytes(inner.buf[:-1])  # without the one-field struct's empty tag section


def read_struct(r: Reader, fields: list[Field], version: int, flexible: bool) -> dict:
    out: dict[str, Any] = {}
    by_tag: dict[int, Field] = {}
    for f in fields:
        if version not in f._versions or (f.tag is not None and not flexible):
            out[f.name] = f.default_value()
            continue
        if f.tag is not None:
            out[f.name] = f.default_value()
            by_tag[f.tag] = f
            continue
        nullable = version in f._nullable
        if isinstance(f.type, Struct):
            if nullable and INT8.read(r, flexible, False) < 0:
                out[f.name] = None
                continue
            out[f.name] = read_struct(r, f.type.fields, version, flexible)
        elif isinstance(f.type, list):
            n = _read_count(r, flexible)
            if n is None:
                if not nullable:
                    raise ProtocolError(f"field {f.name} is null but not nullable in v{version}")
                out[f.name] = None
                continue
            if n > r.remaining():
                raise ProtocolError(f"field {f.name} claims {n} items in {r.remaining()} bytes")
            out[f.name] = [read_struct(r, f.type, version, flexible) for _ in range(n)]
        else:
            try:
                out[f.name] = f.type.read(r, flexible, nullable)
            except ProtocolError as e:
                raise ProtocolError(f"field {f.name} (version {version}): {e}") from None
    if flexible:
        tagged = read_tagged_fields(r)
        for tag in [t for t in tagged if t in by_tag]:
            f = by_tag[tag]
            raw = tagged.pop(tag)
            inner = Reader(raw + b"\x00")  # the one-field struct's empty tag section
            field = Field(f.name, f.type, f.versions, f.nullable, f.default)
            out[f.name] = read_struct(inner, [field], version, True)[f.name]
            if inner.remaining():
                raise ProtocolError(f"tagged field {f.name} has {inner.remaining()} extra bytes")
        if tagged:
            out["_tagged"] = tagged
    return out


def _write_count(w: Writer, n: int | None, flexible: bool) -> None:
    write_length(w, n, flexible, I32)


def _read_count(r: Reader, flexible: bool) -> int | None:
    return read_length(r, flexible, I32)


@dataclass
class Message:
    """A request or response schema of one API, valid for a range of versions."""

    api_key: int
    name: str
    fields: list[Field]
    flexible_from: int | None = None  # first flexible version, None if none we support

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def encode(self, obj: dict, version: int, w: Writer | None = None) -> Writer:
        w = w or Writer()
        write_struct(w, self.fields, obj, version, self.is_flexible(version))
        return w

    def decode(self, data: bytes | bytearray | memoryview | Reader, version: int) -> dict:
        r = data if isinstance(data, Reader) else Reader(data)
        return read_struct(r, self.fields, version, self.is_flexible(version))
