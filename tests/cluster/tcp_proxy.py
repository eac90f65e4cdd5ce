"""A TCP proxy that can silently drop bytes, for network partitions in the cluster tests
(and the bench's isolation scenario): a broker reaches ZooKeeper, or its followers reach
it, through one, and `cut()` makes the path a black hole.

    with TcpProxy(upstream_port) as proxy:      # listens on 127.0.0.1:proxy.port
        ...point a client at proxy.port...
        proxy.cut()    # every byte either way is dropped from now on; connections stay
                       # open and new ones are accepted (nothing is refused or reset)
        proxy.heal()   # bytes flow again; connections that lost bytes are closed (their
                       # streams are broken), so their clients connect again

It runs its own event loop in a daemon thread; its methods may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from types import TracebackType


class _Link:
    """One proxied connection: both streams, and whether it lost bytes."""

    def __init__(self, writers: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        self.writers = writers
        self.dropped = 0

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class TcpProxy:
    """Forwards connections to 127.0.0.1:`upstream_port` (which may start listening later)
    from a free loopback port, `port`."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]
        self._cut = False
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"tcp-proxy-{self.port}")  # fmt: skip
        self._thread.start()
        self._call(self._serve())

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Drop every byte either way from now on, connections left open."""
        self._cut = True

    def heal(self) -> None:
        """Forward again; close the connections that lost bytes."""
        self._call(self._heal())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- on the proxy's loop ---------------------------------------------------------------

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)  # type: ignore[arg-type]

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    async def _heal(self) -> None:
        self._cut = False
        for link in [link for link in self._links if link.dropped]:
            link.close()
            self._links.discard(link)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in self._links:
            link.close()
        self._links.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._forward(reader, writer)
        except asyncio.CancelledError:
            pass  # the proxy closes
        finally:
            self._tasks.discard(task)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()  # nothing listens upstream (yet): as a refused connection
            return
        link = _Link((writer, up_writer))
        self._links.add(link)
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, link), self._pump(up_reader, writer, link)
            )
        finally:
            link.close()
            self._links.discard(link)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                if self._cut:
                    link.dropped += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        if self._cut:
            link.dropped += 1  # a black hole passes no FIN either
            return
        # one side closed: close the other (as TCP would pass on the FIN)
        with contextlib.suppress(OSError):
            writer.close()
