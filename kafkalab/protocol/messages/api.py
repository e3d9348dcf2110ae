"""Api: one API's key, name, supported versions and schemas."""

from __future__ import annotations

from dataclasses import dataclass

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.schema import Message


@dataclass(frozen=True)
class Api:
    """One API: its key, name, the versions kafkalab supports, and both schemas."""

    key: ApiKeys
    name: str
    min_version: int
    max_version: int
    request: Message
    response: Message

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
