"""A controller that accepts a broker's connection and never answers (SIGSTOPped) is
given up on after the channel's request timeout, and the next controller is asked:
found by the soak (a paused active controller held every broker's heartbeats and
metadata fetches for as long as it slept)."""

from __future__ import annotations

import asyncio

import pytest

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import CONTROLLER_APIS
from kafkalab.server.controller_channel import ControllerChannel


async def _silent_controller(accepted: list[int], n: int):
    """A server that reads what it is sent and answers nothing."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(n)
        await reader.read()  # until the client closes
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_a_silent_controller_times_out_and_the_next_is_asked():
    async def scenario() -> tuple[KafkaError, list[int]]:
        accepted: list[int] = []
        servers = [await _silent_controller(accepted, n) for n in (0, 1)]
        addresses = [s.sockets[0].getsockname()[:2] for s in servers]
        channel = ControllerChannel(addresses, CONTROLLER_APIS, request_timeout_ms=200)
        try:
            with pytest.raises(KafkaError) as raised:
                # a hang here (no timeout) would end the test at the outer guard
                await asyncio.wait_for(
                    channel.request(ApiKeys.BROKER_HEARTBEAT, 0, _heartbeat()), 30
                )
            return raised.value, accepted
        finally:
            channel.close()
            for s in servers:
                s.close()

    error, accepted = asyncio.run(scenario())
    assert error.code == Errors.REQUEST_TIMED_OUT, error
    assert sorted(accepted) == [0, 1]  # each controller asked once, in turn


def _heartbeat() -> dict:
    return {
        "broker_id": 1,
        "broker_epoch": 1,
        "current_metadata_offset": 0,
        "want_fence": False,
        "want_shut_down": False,
    }
