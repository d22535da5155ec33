"""HTTP replies read within a deadline and a size cap, whatever the server does.

httpx's ``timeout`` bounds each network operation, not the exchange: its read timeout starts again with every
byte, so a server that sends its headers and then a byte a second is never timed out, and ``response.content``
reads a body of any size into memory. Here a request runs under :func:`deadline` (the whole exchange, connect
to last byte, within the seconds given) and its body is read through :func:`bounded`:

- :func:`deadline_client` is the client that calls such servers: every connect, TLS handshake, write and read
  of its connections (a proxy's too) waits at most the time left (``_DeadlineBackend``), so even a server
  dripping its headers is cut at the deadline;
- :func:`bounded` checks the deadline between the chunks of the body too (a client on another transport, a
  test's, still stops within one read of it) and refuses a body past the cap: one that declares more
  (``Content-Length``) before a byte of it is read, one that sends more as soon as it has.

A request past its deadline raises :class:`DeadlinePassed`, an ``httpx.TimeoutException`` (so the callers'
timeout handling applies); a body past the cap :class:`ReplyTooLarge`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from evalstore.replay.reply_cap import MAX_REPLY_BYTES_ENV


class DeadlinePassed(httpx.TimeoutException):
    """The exchange's deadline passed while its reply was still coming."""


class ReplyTooLarge(Exception):
    """A reply's body is larger than the cap (``declared``: its ``Content-Length`` said so before it was read)."""

    def __init__(self, cap: int, *, declared: int | None = None) -> None:
        self.cap = cap
        self.declared = declared
        size = f"declares {declared} bytes" if declared is not None else "goes on"
        super().__init__(f"the reply {size}, more than the {cap} bytes read ({MAX_REPLY_BYTES_ENV} raises the cap)")


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, timeout: float | None, late: type[Exception]) -> float | None:
        """``timeout`` cut to the time left; ``late`` raised when none is."""
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise late(f"no reply within {self.seconds:g}s")
        return remaining if timeout is None else min(timeout, remaining)


_current = threading.local()
"""The deadline of the request this thread is making (a sync client does all its I/O on the calling thread)."""


@contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """Every network operation of the requests made inside, on this thread, ends by ``seconds`` from now."""
    limit = Deadline(seconds)
    outer = getattr(_current, "deadline", None)
    _current.deadline = limit
    try:
        yield limit
    finally:
        _current.deadline = outer


def current() -> Deadline | None:
    """The deadline of the :func:`deadline` block this thread is in, if any."""
    return getattr(_current, "deadline", None)


def _left(timeout: float | None, late: type[Exception]) -> float | None:
    limit: Deadline | None = getattr(_current, "deadline", None)
    return timeout if limit is None else limit.left(timeout, late)


def checked(response: httpx.Response, limit: Deadline, cap: int) -> None:
    """``response``'s body, however it is then read (``iter_bytes``, ``iter_lines``), checked as it comes:
    refused when it declares more than ``cap`` or sends more; cut when ``limit`` passes. Read it inside the
    ``http.stream(...)`` block; a body refused midway leaves the connection closed, not reused."""
    declared = response.headers.get("Content-Length", "")
    if declared.strip().isdigit() and int(declared) > cap:
        raise ReplyTooLarge(cap, declared=int(declared))
    response.stream = _Checked(response.stream, limit, cap)


def bounded(response: httpx.Response, limit: Deadline, cap: int) -> Iterator[bytes]:
    """``response``'s body (decoded), chunk by chunk, :func:`checked`."""
    checked(response, limit, cap)
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > cap:  # decoded: a small compressed body may inflate past the cap
            raise ReplyTooLarge(cap)
        yield chunk


def read_bounded(response: httpx.Response, limit: Deadline, cap: int) -> bytes:
    return b"".join(bounded(response, limit, cap))


class _Checked(httpx.SyncByteStream):
    """A response's raw stream, the deadline and the cap checked after each chunk the network gave."""

    def __init__(self, inner: Any, limit: Deadline, cap: int) -> None:
        self._inner = inner
        self._limit = limit
        self._cap = cap

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for chunk in self._inner:
            size += len(chunk)
            if size > self._cap:
                raise ReplyTooLarge(self._cap)
            self._limit.left(None, DeadlinePassed)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def deadline_client(**kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` (``kwargs`` are its own) whose every transport waits within the current
    :func:`deadline`: the direct one and, as httpx sets them up from the environment (``HTTPS_PROXY``,
    ``ALL_PROXY``, ``NO_PROXY``), a proxy's. A client given a ``transport`` of its own uses no proxy, as
    httpx has it: giving it one such transport would leave a user behind a proxy without one."""
    try:
        client = httpx.Client(**kwargs)
    except httpx.InvalidURL as exc:  # only the environment's proxies are parsed here
        raise httpx.InvalidURL(
            f"a proxy the environment names (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY) cannot be read: {exc}"
        ) from None
    for transport in (client._transport, *client._mounts.values()):
        if transport is not None:
            _within_deadlines(transport)
    return client


def _within_deadlines(transport: httpx.BaseTransport) -> httpx.BaseTransport:
    """``transport`` waiting within deadlines. httpx takes no network backend, so it is set on the
    transport's connection pool (a proxy's pool is one too); where a later httpx moves that, the transport
    is left as it is, and :func:`bounded`'s checks between chunks remain."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if (
        isinstance(pool, httpcore.ConnectionPool)
        and isinstance(backend, httpcore.NetworkBackend)
        and not isinstance(backend, _DeadlineBackend)
    ):
        pool._network_backend = _DeadlineBackend(backend)
    return transport


def has_deadlines(transport: httpx.BaseTransport) -> bool:
    """Whether ``transport`` waits within deadlines (a test keeps :func:`deadline_client` honest)."""
    return isinstance(getattr(getattr(transport, "_pool", None), "_network_backend", None), _DeadlineBackend)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
