"""The web apps of the tests (the console, the schema registry, the REST proxy) served by
uvicorn in a thread of the test process, on a free loopback port: `serve_in_thread`
returns once the server accepts connections; `stop()` ends it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from ports import free_port


@dataclass
class AsgiServer:
    """One app's uvicorn server and the thread running it."""

    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def serve_in_thread(
    app: Any, name: str, timeout: float = 60, http: Any = "auto"
) -> AsgiServer:
    """Serve `app` on a free port (`http`: uvicorn's HTTP protocol, a name or a class);
    RuntimeError naming it when it has not started within `timeout` seconds (or its
    thread died)."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio", lifespan="on",
        http=http,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the {name} did not start")
        time.sleep(0.05)
    return AsgiServer(server, thread, port)
