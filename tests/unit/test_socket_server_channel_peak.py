"""SocketServer.channel_peak: the deepest the RequestChannel got, a gauge lab 08 reads
in-process. With no handler taking requests, every connection's first request stays
in the channel: one per connection (a processor waits for its answer before it reads
the next), and no more than queued.max.requests."""

from __future__ import annotations

import asyncio

import pytest

from kafkalab.protocol import RequestHeader, encode_request
from kafkalab.server.socket_server import SocketServer


async def fill(connections: int, queued_max_requests: int, requests_each: int = 3) -> SocketServer:
    server = SocketServer(
        apis=None,  # never called: no handlers
        host="127.0.0.1",
        port=0,
        max_request_bytes=1 << 20,
        queued_max_requests=queued_max_requests,
        num_handlers=0,
    )
    await server.start()
    writers = []
    try:
        for c in range(connections):
            _, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            frames = b"".join(
                encode_request(RequestHeader(18, 1, 100 * c + i, "t"), {})
                for i in range(requests_each)
            )
            writer.write(frames)  # pipelined
            await writer.drain()
            writers.append(writer)
        for _ in range(200):
            if server.channel_peak >= min(connections, queued_max_requests):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # room for anything that would go past the bound
    finally:
        for writer in writers:
            writer.close()
        await server.stop(grace_s=0)
    return server


@pytest.mark.parametrize(
    ("connections", "queued_max_requests", "peak"),
    [(3, 500, 3), (5, 2, 2), (1, 4, 1)],
)
def test_channel_peak_is_one_request_per_connection_within_the_bound(
    connections, queued_max_requests, peak
):
    server = asyncio.run(fill(connections, queued_max_requests))
    assert server.channel_peak == peak
    assert server.channel.qsize() == peak  # nobody took them


def test_channel_peak_starts_at_zero():
    server = SocketServer(
        None, "127.0.0.1", 0, max_request_bytes=1, queued_max_requests=1, num_handlers=1
    )
    assert server.channel_peak == 0
