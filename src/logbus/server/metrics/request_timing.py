"""What one request's completion records: Kafka's RequestMetrics times and the request
log line, filled in by the registry (handling) and the connection (sending).

Created only when the broker keeps metrics or the request log is at DEBUG; otherwise a
request costs one `isEnabledFor` check here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from logbus.protocol import ApiKey
from logbus.protocol.codec import RequestHeader
from logbus.server.metrics.broker_metrics import BrokerMetrics
from logbus.server.metrics.request_log import REQUEST_LOGGER
from logbus.storage.file_slice import FileSlice


def tracking(metrics: BrokerMetrics | None) -> bool:
    return metrics is not None or REQUEST_LOGGER.isEnabledFor(logging.DEBUG)


class RequestTiming:
    """Times are `time.perf_counter()` seconds, except the queue time, measured from the
    connection's last received bytes (the loop's clock)."""

    __slots__ = (
        "encoded",
        "header",
        "metrics",
        "queue_s",
        "remote_s",
        "request_size",
        "started",
        "throttle_ms",
    )

    def __init__(
        self,
        metrics: BrokerMetrics | None,
        header: RequestHeader,
        started: float,
        queue_s: float,
        request_size: int,
    ) -> None:
        self.metrics = metrics
        self.header = header
        self.started = started
        self.queue_s = max(0.0, queue_s)
        self.request_size = request_size
        self.remote_s = 0.0
        self.encoded = started
        self.throttle_ms = 0

    def handled(self, wall_s: float, loop_s: float) -> None:
        """The handler took `wall_s`, of which it ran `loop_s` on the loop."""
        self.remote_s = max(0.0, wall_s - loop_s)

    def complete(self, conn: Any, send_started: float, chunks: list[Any] | None) -> None:
        """Called by the connection once the response is written (or not sent: acks=0)."""
        now = time.perf_counter()
        local_s = max(0.0, self.encoded - self.started - self.remote_s)
        response_queue_s = max(0.0, send_started - self.encoded)
        send_s = now - send_started
        total_s = self.queue_s + (now - self.started)
        times = (
            total_s * 1000,
            self.queue_s * 1000,
            local_s * 1000,
            self.remote_s * 1000,
            response_queue_s * 1000,
            send_s * 1000,
        )
        header = self.header
        if self.metrics is not None:
            self.metrics.requests.record(
                header.api_key, header.api_version, times, time.monotonic()
            )
        if REQUEST_LOGGER.isEnabledFor(logging.DEBUG):
            REQUEST_LOGGER.debug("%s", _line(self, conn, times, chunks))


def response_size(chunks: list[Any] | None) -> int:
    if not chunks:
        return 0
    return sum(c.size if isinstance(c, FileSlice) else len(c) for c in chunks)


def security_protocol(conn: Any) -> str:
    sasl = getattr(conn, "authenticator", None) is not None
    if getattr(conn, "tls", False):
        return "SASL_SSL" if sasl else "SSL"
    return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"


def _line(timing: RequestTiming, conn: Any, times: tuple[float, ...], chunks: Any) -> str:
    header = timing.header
    try:
        api = ApiKey(header.api_key).name
    except ValueError:
        api = str(header.api_key)
    local = conn.stream.get_extra_info("sockname")
    local_address = f"{local[0]}:{local[1]}" if isinstance(local, tuple) else str(local)
    total, queue, local_ms, remote, response_queue, send = times
    return (
        f"Completed request:RequestHeader(apiKey={api}, apiVersion={header.api_version}, "
        f"clientId={header.client_id}, correlationId={header.correlation_id}) -- "
        f"{{requestSize={timing.request_size},responseSize={response_size(chunks)}}} "
        f"from connection {local_address}-{conn.peer};"
        f"totalTime:{total:.3f},requestQueueTime:{queue:.3f},localTime:{local_ms:.3f},"
        f"remoteTime:{remote:.3f},throttleTime:{timing.throttle_ms},"
        f"responseQueueTime:{response_queue:.3f},sendTime:{send:.3f},"
        f"securityProtocol:{security_protocol(conn)},principal:{conn.principal},"
        f"listener:{conn.listener_name}"
    )
