"""Kind: the base of kafkalab's string-valued kinds, parsed once at the boundary.

A kind (a fault a soak applies, a mutation the fuzzer makes, where a Spark read
starts) is an enum whose members are the strings users type and reports show:
members are `str`s (StrEnum), so they print, format, compare, hash and serialize to
JSON exactly as those strings did, and options, CLI arguments and JSON fields stay
what they were. Inside, code matches members, not literals: a typo is an
AttributeError at import, not a branch that silently never runs.

    class FaultKind(Kind):
        LEADER_KILL = "leader-kill"

    FaultKind.parse("leader-kill", "fault kind")   # FaultKind.LEADER_KILL
    FaultKind.parse("meteor", "fault kind")        # UnknownKindError naming the valid values
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from kafkalab.errors import UnknownKindError


class Kind(StrEnum):
    """A StrEnum with `parse`: a user's string to a member, or a typed error."""

    @classmethod
    def parse(cls, raw: object, what: str | None = None) -> Self:
        """The member whose value is `raw` (a member passes through); otherwise
        UnknownKindError naming `what` (default: the class name) and the valid values."""
        try:
            return cls(raw)
        except ValueError:
            raise UnknownKindError(what or cls.__name__, raw, [m.value for m in cls]) from None

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """Every member's string, in declaration order."""
        return tuple(m.value for m in cls)
