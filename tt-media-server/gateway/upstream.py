"""A minimal streaming HTTP/1.1 client for the gateway's upstream hop, on raw asyncio streams.

Why not httpx: on the first-byte path a general client costs several milliseconds of pure
Python per request (request models, header normalisation, h11 state machine, pool bookkeeping)
on a loaded 2-core host, more than the whole latency budget of the gateway. The upstream is
one server we launch and trust to speak plain HTTP/1.1, so this client does only that:

- a keep-alive pool of connections to the one upstream (a connection that the upstream closed
  while idle is dropped when taken; a reused one that fails before any response byte is retried
  once on a fresh connection when the request body was buffered);
- the request head written as bytes, the body either buffered (small bodies: replayable) or
  streamed as the client sends it (re-chunked when its length is unknown);
- the response head parsed once, then the body handed out piece by piece as it arrives:
  ``Content-Length``, ``Transfer-Encoding: chunked`` (de-chunked; the ASGI server re-frames
  it) or until close. A response read to its end on a keep-alive connection returns it to the pool.
"""
from __future__ import annotations

import asyncio
import ssl
from typing import AsyncIterator
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024
READ_SIZE = 64 * 1024


class UpstreamError(Exception):
    """The upstream could not be reached or broke the protocol (the gateway answers 502)."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect or answer in time (the gateway answers 504)."""


class Connection:
    """One TCP (or TLS) connection to the upstream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception())

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


class UpstreamResponse:
    """A response whose head is read; ``body()`` yields its payload bytes as they arrive."""

    def __init__(self, pool: "UpstreamPool", connection: Connection, status: int,
                 headers: list[tuple[bytes, bytes]], keep_alive: bool, length: int | None,
                 chunked: bool, no_body: bool, read_timeout_s: float):
        self._pool = pool
        self._connection: Connection | None = connection
        self.status = status
        self.headers = headers
        self._keep_alive = keep_alive
        self.length = length
        self._chunked = chunked
        self._no_body = no_body
        self._timeout = read_timeout_s
        self._complete = False

    async def body(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        reader = connection.reader
        if self._no_body:
            pass
        elif self._chunked:
            while True:
                line = await self._read(reader.readline())
                size = int(line.split(b";", 1)[0].strip() or b"x", 16) if line.strip() else -1
                if size < 0:
                    raise UpstreamError(f"bad chunk size line {line[:40]!r}")
                if size == 0:
                    while (await self._read(reader.readline())).strip():
                        pass  # trailers: dropped
                    break
                while size:
                    data = await self._read(reader.read(min(size, READ_SIZE)))
                    if not data:
                        raise UpstreamError("upstream closed inside a chunk")
                    size -= len(data)
                    yield data
                await self._read(reader.readexactly(2))
        elif self.length is not None:
            remaining = self.length
            while remaining:
                data = await self._read(reader.read(min(remaining, READ_SIZE)))
                if not data:
                    raise UpstreamError("upstream closed before Content-Length bytes")
                remaining -= len(data)
                yield data
        else:
            self._keep_alive = False
            while True:
                data = await self._read(reader.read(READ_SIZE))
                if not data:
                    break
                yield data
        self._complete = True

    async def _read(self, awaitable):
        try:
            return await asyncio.wait_for(awaitable, self._timeout)
        except asyncio.TimeoutError:
            raise UpstreamTimeout("upstream silent mid-response") from None
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            raise UpstreamError(f"upstream stream broke: {type(exc).__name__}") from None

    def close(self) -> None:
        """Back to the pool when read to its end on a keep-alive connection; closed otherwise."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete and self._keep_alive:
            self._pool.release(connection)
        else:
            connection.close()


class UpstreamPool:
    """Keep-alive connections to one upstream base URL."""

    def __init__(self, base_url: str, connect_timeout_s: float, read_timeout_s: float,
                 max_idle: int = 64):
        parts = urlsplit(base_url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        self.host_header = parts.netloc.encode("latin-1")
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_idle = max_idle
        self._idle: list[Connection] = []
        self._ssl = ssl.create_default_context() if self.tls else None

    async def _connect(self) -> Connection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self._ssl, limit=MAX_HEAD_BYTES),
                self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"connect to {self.host}:{self.port} timed out") from None
        except OSError as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Connection(reader, writer)

    async def _take(self) -> Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable():
                connection.reused = True
                return connection
            connection.close()
        return await self._connect()

    def release(self, connection: Connection) -> None:
        if connection.usable() and len(self._idle) < self.max_idle:
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def head(self, method: str, target: str, headers: list[tuple[bytes, bytes]]) -> bytes:
        lines = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"host: ", self.host_header, b"\r\n"]
        for name, value in headers:
            lines += [name, b": ", value, b"\r\n"]
        lines.append(b"\r\n")
        return b"".join(lines)

    async def request(self, head: bytes, body: bytes | AsyncIterator[bytes] | None,
                      chunked_body: bool = False) -> UpstreamResponse:
        """Send one request; returns once the response head is read."""
        replayable = not hasattr(body, "__aiter__")
        for attempt in (0, 1):
            connection = await self._take()
            try:
                if replayable:
                    connection.writer.write(head + (body or b""))
                else:
                    connection.writer.write(head)
                    async for piece in body:  # type: ignore[union-attr]
                        if chunked_body:
                            piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                        connection.writer.write(piece)
                        await connection.writer.drain()
                    if chunked_body:
                        connection.writer.write(b"0\r\n\r\n")
                await connection.writer.drain()
                return await self._read_head(connection, head)
            except _NothingReceived as exc:
                connection.close()
                if attempt == 0 and connection.reused and replayable:
                    continue
                raise UpstreamError(f"upstream closed the connection: {exc}") from None
            except UpstreamError:
                connection.close()
                raise
            except (OSError, asyncio.IncompleteReadError) as exc:
                connection.close()
                if attempt == 0 and connection.reused and replayable:
                    continue
                raise UpstreamError(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                connection.close()
                raise
        raise UpstreamError("unreachable")

    async def _read_head(self, connection: Connection, request_head: bytes) -> UpstreamResponse:
        while True:
            try:
                raw = await asyncio.wait_for(connection.reader.readuntil(b"\r\n\r\n"), self.read_timeout_s)
            except asyncio.TimeoutError:
                raise UpstreamTimeout("upstream did not answer in time") from None
            except asyncio.IncompleteReadError as exc:
                if not exc.partial:
                    raise _NothingReceived("EOF before the response") from None
                raise UpstreamError("upstream closed inside the response head") from None
            except asyncio.LimitOverrunError:
                raise UpstreamError("upstream response head too large") from None
            except OSError as exc:
                raise _NothingReceived(type(exc).__name__) from None
            lines = raw.split(b"\r\n")
            status_line = lines[0].split(b" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
                raise UpstreamError(f"not an HTTP/1.x response: {lines[0][:60]!r}")
            status = int(status_line[1])
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue and friends: the real head follows
            break
        headers, length, chunked, close = [], None, False, status_line[0] == b"HTTP/1.0"
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower() or (close and b"keep-alive" not in value.lower())
            headers.append((name, value))
        if chunked:
            length = None
        method = request_head.split(b" ", 1)[0]
        no_body = method == b"HEAD" or status in (204, 304)
        return UpstreamResponse(self, connection, status, headers, keep_alive=not close, length=length,
                                chunked=chunked, no_body=no_body, read_timeout_s=self.read_timeout_s)


class _NothingReceived(Exception):
    """A (reused) connection failed before any response byte: the request may be retried."""
