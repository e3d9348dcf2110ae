"""docs/protocol-versions.md's table says what the broker advertises: it must say
what the code declares (a range changed in code and not in the doc fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from kafkalab.protocol.messages import APIS

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol-versions.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (\d+)(?:–(\d+))? \| (\d+|none) \|$")


def test_the_table_is_the_code():
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            key, name, low, high, flexible = m.groups()
            rows[int(key)] = (name, int(low), int(high or low), flexible)
    code = {
        int(key): (
            api.name,
            api.min_version,
            api.max_version,
            "none" if api.request.flexible_from is None else str(api.request.flexible_from),
        )
        for key, api in APIS.items()
    }
    assert rows == code, "docs/protocol-versions.md and kafkalab.protocol.messages.APIS differ"
