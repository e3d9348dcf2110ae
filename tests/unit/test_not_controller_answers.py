"""A standby controller's NOT_CONTROLLER answer to every request only the active
controller serves: it encodes in every version the controller speaks, and at the
version brokers use a ControllerChannel reads it as "try the next controller"."""

from __future__ import annotations

import pytest

from kafkalab.errors import Errors
from kafkalab.protocol.messages import CONTROLLER_APIS
from kafkalab.server.controller_channel import answered_by_standby
from kafkalab.server.quorum_meta_log_listener import ACTIVE_ONLY, not_controller_body

REQUESTS = {
    "CREATE_TOPICS": {"topics": [{"name": "t"}, {"name": "u"}]},
    "DELETE_TOPICS": {"topic_names": ["t"]},
    "CREATE_PARTITIONS": {"topics": [{"name": "t"}]},
    "ALTER_CONFIGS": {"resources": [{"resource_type": 2, "resource_name": "t"}]},
    "INCREMENTAL_ALTER_CONFIGS": {"resources": [{"resource_type": 2, "resource_name": "t"}]},
    "ALTER_PARTITION_REASSIGNMENTS": {"allow_replication_factor_change": True},
}


@pytest.mark.parametrize("key", sorted(ACTIVE_ONLY), ids=lambda k: k.name)
def test_a_standby_answers_not_controller_in_every_version(key):
    api = CONTROLLER_APIS[key]
    body = not_controller_body(key, REQUESTS.get(key.name, {}), "the active controller is 2")
    for version in range(api.min_version, api.max_version + 1):
        wire = bytes(api.response.encode(body, version).buf)
        decoded = api.response.decode(wire, version)
        assert decoded is not None
    latest = api.response.decode(
        bytes(api.response.encode(body, api.max_version).buf), api.max_version
    )
    assert answered_by_standby(key, latest), latest


def test_a_real_answer_is_not_taken_for_a_standby():
    body = {"throttle_time_ms": 0, "topics": [{"name": "t", "error_code": 0}]}
    assert not answered_by_standby(CONTROLLER_APIS[next(iter(ACTIVE_ONLY))].key, body)
    mixed = {"topics": [{"error_code": int(Errors.NOT_CONTROLLER)}, {"error_code": 0}]}
    assert not answered_by_standby(CONTROLLER_APIS[next(iter(ACTIVE_ONLY))].key, mixed)
