"""`async with` for the client's asyncio objects: entering starts them (if they have a
`start()`), leaving awaits their `close()`."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncCloseable:
    """Mixin: `async with obj` gives `obj` and awaits `obj.close()` on the way out."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncService(AsyncCloseable):
    """Mixin: as `AsyncCloseable`, and entering `async with` awaits `start()` first."""

    async def start(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self
