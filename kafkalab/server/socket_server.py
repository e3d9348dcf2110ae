"""SocketServer: Kafka's network layer on one asyncio event loop.

Kafka's classes: kafka.network.SocketServer (Acceptor, Processor),
RequestChannel and KafkaRequestHandlerPool. The same shape here:

    Acceptor        asyncio.start_server accepts connections
    Processor       one task per connection: reads a frame, decodes the header,
                    hands the request to the RequestChannel, waits for its
                    response and writes it; then reads the next frame. Like
                    Kafka (which mutes a connection while a request is in
                    flight), requests of one connection are answered strictly
                    in order.
    RequestChannel  a bounded asyncio.Queue (queued.max.requests): when the
                    handlers fall behind, processors wait, and TCP pushes back.
    Handlers        num.io.threads tasks taking requests from the channel and
                    calling KafkaApis.

Frames larger than socket.request.max.bytes are refused from their size
prefix, before any of the body is read. A malformed frame, an unknown API key
or an unsupported version (other than ApiVersions, answered with
UNSUPPORTED_VERSION as Kafka does) closes that connection with a log line; the
broker and other connections go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import (
    RequestHeader,
    decode_request_header,
    encode_response,
)
from kafkalab.protocol.messages import APIS, Api, api_versions_body
from kafkalab.protocol.types import ProtocolError, Reader

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")


CLOSE_CONNECTION = object()  # a handler's answer: drop the connection, send nothing
#: A handler's answer: never answer, and answer nothing more on this connection, which
#: stays open until the peer closes it (a silently dropped request, link_faults.py)
DROP_REQUEST = object()


@dataclass
class Request:
    header: RequestHeader
    api: Api
    body: dict
    future: asyncio.Future = field(repr=False)


class SocketServer:
    def __init__(
        self,
        apis: Any,
        host: str,
        port: int,
        *,
        max_request_bytes: int,
        queued_max_requests: int,
        num_handlers: int,
        schemas: Mapping[int, Api] = APIS,
        listener_name: str = "",
    ) -> None:
        self.apis = apis  # the handler: KafkaApis on a broker, ControllerApis on a controller
        self.schemas = schemas  # the APIs this listener speaks
        self.listener_name = listener_name  # stamped on every request's header
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.channel: asyncio.Queue[Request] = asyncio.Queue(maxsize=queued_max_requests)
        self.num_handlers = num_handlers
        self._server: asyncio.base_events.Server | None = None
        self._handlers: list[asyncio.Task] = []
        self._connections: set[asyncio.Task] = set()
        self._busy = 0  # requests read and not yet answered
        # The deepest the channel has been (requests read, waiting for a handler): a
        # gauge the labs sample in-process (`channel.qsize()` is the depth now). Set it
        # to 0 to measure again.
        self.channel_peak = 0
        self.bound_port: int | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._processor, self.host, self.port)
        self.bound_port = self._server.sockets[0].getsockname()[1]
        self._handlers = [asyncio.create_task(self._handler()) for _ in range(self.num_handlers)]

    async def stop(self, before_close: Any = None, grace_s: float = 10.0) -> None:
        """Stop accepting, let requests already read finish (up to `grace_s`), then
        close every connection. `before_close` runs once accepting has stopped (the
        broker completes parked fetches there, so they answer now)."""
        if self._server is not None:
            self._server.close()
        if before_close is not None:
            before_close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while self._busy and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- handlers --------------------------------------------------------------------------

    async def _handler(self) -> None:
        while True:
            request = await self.channel.get()
            try:
                result = self.apis.handle(request.header, request.body)
                if not request.future.done():
                    request.future.set_result(result)
            except Exception as e:  # a bug in a handler must not kill the broker
                log.exception("error handling %s", request.header)
                if not request.future.done():
                    request.future.set_exception(e)

    # -- processors ------------------------------------------------------------------------

    async def _processor(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        conn = _Connection(reader)
        try:
            while True:
                try:
                    prefix = await conn.read_prefix()
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the client closed the connection
                (size,) = _SIZE.unpack(prefix)
                if size < 0 or size > self.max_request_bytes:
                    log.warning(
                        "closing connection from %s: request of %d bytes is larger than "
                        "socket.request.max.bytes=%d (or negative)",
                        peer,
                        size,
                        self.max_request_bytes,
                    )
                    return
                try:
                    frame = await conn.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    log.warning("closing connection from %s: frame cut short", peer)
                    return
                self._busy += 1
                try:
                    response = await self._process(frame, peer, conn)
                    if response is False:
                        return
                    if response is not None:
                        await self._send(writer, response)
                finally:
                    self._busy -= 1
        except asyncio.CancelledError:
            pass
        except (ConnectionError, _PeerGone) as e:
            # The client went away (before or while we answered): not a broker error.
            log.debug("connection from %s closed by the client: %r", peer, e)
        except Exception:
            log.exception("closing connection from %s after an error", peer)
        finally:
            self._connections.discard(task)
            conn.close()
            writer.close()

    async def _process(self, frame: bytes, peer: Any, conn: _Connection) -> list[Any] | None | bool:
        """Response parts, None (no response), or False (close the connection)."""
        r = Reader(frame)
        try:
            header = decode_request_header(r, self.schemas)
        except ProtocolError as e:
            log.warning("closing connection from %s: bad request header: %s", peer, e)
            return False
        if isinstance(peer, tuple) and peer:
            header = dataclasses.replace(
                header, client_host=f"/{peer[0]}", listener=self.listener_name
            )
        elif self.listener_name:
            header = dataclasses.replace(header, listener=self.listener_name)
        api = self.schemas.get(header.api_key)
        if api is None:
            log.warning("closing connection from %s: unknown API key %d", peer, header.api_key)
            return False
        if not api.supports(header.api_version):
            if header.api_key == ApiKeys.API_VERSIONS:
                # Kafka answers a too-new ApiVersions with a v0 body carrying
                # UNSUPPORTED_VERSION and the versions it does support.
                body = api_versions_body(self.schemas, Errors.UNSUPPORTED_VERSION)
                return encode_response(api, 0, header.correlation_id, body)
            log.warning(
                "closing connection from %s: %s v%d is not supported (we speak v%d-v%d)",
                peer,
                api.name,
                header.api_version,
                api.min_version,
                api.max_version,
            )
            return False
        try:
            body = api.request.decode(r, header.api_version)
        except ProtocolError as e:
            log.warning(
                "closing connection from %s: malformed %s v%d request: %s",
                peer,
                api.name,
                header.api_version,
                e,
            )
            return False
        cut = getattr(self.apis, "client_cut", None)
        if cut is not None and (answer := cut(header)) is not None:
            return await self._cut(answer, peer, conn)
        held = getattr(self.apis, "held", None)
        if held is not None and (waiting := held(header)) is not None:
            await waiting  # a held request (link_faults.py): other connections go on
        received = getattr(self.apis, "received", None)
        if received is not None:
            received(header, body)  # before the request waits its turn (the controller's)
        future = asyncio.get_running_loop().create_future()
        await self.channel.put(Request(header, api, body, future))
        self.channel_peak = max(self.channel_peak, self.channel.qsize())
        result = await future
        if inspect.isawaitable(result):
            # A request parked in a purgatory (or waiting for the controller): if the
            # client leaves meanwhile, close now, as Kafka does, instead of holding the
            # connection until the request's own timeout (a hostile max_wait_ms: days).
            result = await conn.unless_peer_leaves(result)
        if result is None:
            return None
        if result is CLOSE_CONNECTION or result is DROP_REQUEST:
            return await self._cut(result, peer, conn)
        return encode_response(api, header.api_version, header.correlation_id, result)

    async def _cut(self, answer: object, peer: Any, conn: _Connection) -> bool:
        """A cut link's answer (link_faults.py): close now, or (DROP_REQUEST) stay
        silent until the peer gives up and closes. False: close the connection."""
        if answer is DROP_REQUEST:
            log.debug("dropping a request from %s: silent until it closes", peer)
            self._busy -= 1  # a silent connection is not a request to finish at stop
            try:
                await conn.until_peer_leaves()
            finally:
                self._busy += 1
        return False

    async def _send(self, writer: asyncio.StreamWriter, parts: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        for part in parts:
            if isinstance(part, (bytes, bytearray)):
                writer.write(part)
                continue
            # A FileRecords slice (pinned: its own descriptor): send it straight from
            # the segment file, then let the descriptor go.
            try:
                await writer.drain()
                with open(part.fileno(), "rb", closefd=False, buffering=0) as f:
                    await loop.sendfile(writer.transport, f, part.start, part.size_in_bytes())
            finally:
                part.close()
        await writer.drain()


class _PeerGone(Exception):
    """The client closed its connection while its request was parked."""


#: How much of what a client pipelines behind a parked request a processor reads ahead
#: (to see the client leave); past it, it reads no more until the answer (Kafka mutes).
READ_AHEAD_BYTES = 64 * 1024


class _Connection:
    """A connection's reading side. While a request is parked, it reads ahead what the
    client sends next (at most READ_AHEAD_BYTES, kept for the next frames): that is how
    it learns that the client has gone (end of stream) even when the client had already
    pipelined its next request."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.stash = bytearray()  # read ahead, not yet framed
        self.eof = False
        self.ahead: asyncio.Future | None = None  # a pending read-ahead

    async def readexactly(self, n: int) -> bytes:
        while len(self.stash) < n:
            if self.ahead is not None:
                await self._collect()  # bytes read ahead come before the reader's
            elif self.eof:
                raise asyncio.IncompleteReadError(bytes(self.stash), n)
            elif not self.stash:
                return await self.reader.readexactly(n)  # the usual case
            else:
                self.stash += await self.reader.readexactly(n - len(self.stash))
        # What was read ahead (a pipelined request) is served at once, even while
        # another read-ahead still waits for more.
        out = bytes(self.stash[:n])
        del self.stash[:n]
        return out

    async def read_prefix(self) -> bytes:
        return await self.readexactly(4)

    async def _collect(self) -> None:
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            chunk = await ahead
            if chunk:
                self.stash += chunk
            else:
                self.eof = True

    async def unless_peer_leaves(self, awaitable: Any) -> Any:
        result = asyncio.ensure_future(awaitable)
        while not self.eof:
            if self.ahead is None and len(self.stash) < READ_AHEAD_BYTES:
                self.ahead = asyncio.ensure_future(
                    self.reader.read(READ_AHEAD_BYTES - len(self.stash))
                )
            waiting = {result} if self.ahead is None else {result, self.ahead}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if result.done():
                return await result
            try:
                await self._collect()
            except ConnectionError:
                self.eof = True
        # The client is gone. The request finishes on its own (a purgatory times it out;
        # a topic creation completes); nobody reads its answer.
        result.add_done_callback(_log_failure)
        raise _PeerGone("end of stream while a request was parked")

    async def until_peer_leaves(self) -> None:
        """Read and throw away whatever the peer sends, until it closes."""
        self.stash.clear()
        if self.ahead is not None:
            try:
                await self._collect()
            except ConnectionError:
                return
        while not self.eof:
            try:
                self.eof = not await self.reader.read(READ_AHEAD_BYTES)
            except ConnectionError:
                return

    def close(self) -> None:
        if self.ahead is None:
            return
        if not self.ahead.done():
            self.ahead.cancel()
        elif not self.ahead.cancelled():
            # A read-ahead the peer broke (connection_lost while the answer was being
            # written): the peer is gone either way; collect the error so asyncio does
            # not report it as never retrieved.
            self.ahead.exception()


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a request whose client left failed", exc_info=task.exception())


__all__ = ["CLOSE_CONNECTION", "DROP_REQUEST", "SocketServer"]
