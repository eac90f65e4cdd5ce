"""`logbus mirror`: copy topics from one cluster to another, with the command line of
Kafka's legacy MirrorMaker (`kafka-mirror-maker`).

    logbus mirror --consumer.config source.properties --producer.config target.properties
                  (--include REGEX | --whitelist REGEX) [--num.streams N]
                  [--offset.commit.interval.ms MS] [--metrics-listener http://host:port]

The consumer config names the source cluster and the mirror's group (`group.id`), the
producer config the target cluster. A line every `--report.interval.ms` says how many
records were copied, at what rate, and how far behind the consumers are; the same figures
are served to Prometheus with `--metrics-listener`. SIGINT or SIGTERM stops the mirror
after a last flush and commit. The loop itself is `logbus.mirror.MirrorMaker`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

from logbus.cli.common import CommandError, positive_int, run, whole_number
from logbus.cli.perf_common import MB, print_metrics, read_properties_file
from logbus.common.config_def import ConfigError
from logbus.mirror import MirrorError, MirrorMaker, MirrorSettings

_DEFAULT_COMMIT_INTERVAL_MS = 60000  # Kafka's MirrorMaker default
_DEFAULT_REPORT_INTERVAL_MS = 5000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mirror",
        help="copy topics from one cluster to another (Kafka's MirrorMaker)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        required=True,
        metavar="FILE",
        help="the source cluster's consumer settings (bootstrap.servers, group.id, ...)",
    )
    parser.add_argument(
        "--producer.config",
        dest="producer_config",
        required=True,
        metavar="FILE",
        help="the target cluster's producer settings (bootstrap.servers, ...)",
    )
    topics = parser.add_mutually_exclusive_group(required=True)
    topics.add_argument(
        "--include", metavar="REGEX", help="the topics to mirror: a regular expression"
    )
    topics.add_argument(
        "--whitelist", dest="include", metavar="REGEX", help="the older name of --include"
    )
    parser.add_argument(
        "--num.streams",
        dest="num_streams",
        type=positive_int,
        default=1,
        metavar="N",
        help="consumers in the mirror's group (default: 1)",
    )
    parser.add_argument(
        "--offset.commit.interval.ms",
        dest="commit_interval_ms",
        type=_interval,
        default=_DEFAULT_COMMIT_INTERVAL_MS,
        metavar="MS",
        help=f"how often source offsets are committed (default: {_DEFAULT_COMMIT_INTERVAL_MS})",
    )
    parser.add_argument(
        "--report.interval.ms",
        dest="report_interval_ms",
        type=_interval,
        default=_DEFAULT_REPORT_INTERVAL_MS,
        metavar="MS",
        help=f"how often a progress line is printed (default: {_DEFAULT_REPORT_INTERVAL_MS})",
    )
    parser.add_argument(
        "--metrics-listener",
        default=None,
        metavar="http://HOST:PORT",
        help="serve the mirror's metrics in Prometheus' format at this address",
    )
    parser.add_argument(
        "--print-metrics", action="store_true", help="print the mirror's metrics when it stops"
    )
    parser.set_defaults(func=lambda args: run(_mirror(args)))


def _interval(text: str) -> int:
    return whole_number(text, 1, "must be at least 1")


def include_pattern(text: str) -> re.Pattern[str]:
    """The topics' pattern. As Kafka's MirrorMaker, a comma separates alternatives
    (`a,b` is `a|b`) and the pattern must match a whole topic name."""
    try:
        return re.compile(text.replace(",", "|").strip())
    except re.error as exc:
        raise CommandError(f"--include {text!r} is not a valid regular expression: {exc}") from None


def settings_of(args: argparse.Namespace) -> MirrorSettings:
    """The mirror's settings from the command line; CommandError naming a bad input."""
    consumer = read_properties_file(args.consumer_config)
    producer = read_properties_file(args.producer_config)
    for name, config in (("--consumer.config", consumer), ("--producer.config", producer)):
        if "bootstrap.servers" not in config:
            raise CommandError(f"{name} {getattr(args, name[2:].replace('.', '_'))} "
                               "does not set bootstrap.servers")
    return MirrorSettings(
        consumer=consumer,
        producer=producer,
        include=include_pattern(args.include),
        streams=args.num_streams,
        commit_interval_ms=args.commit_interval_ms,
    )


async def _mirror(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    try:
        mirror = MirrorMaker(settings)
    except (MirrorError, ConfigError) as exc:
        raise CommandError(str(exc)) from None
    stop = asyncio.Event()
    try:
        await mirror.start()
        print(
            f"mirroring topics matching {settings.include.pattern!r} from cluster "
            f"{mirror.source_cluster} to cluster {mirror.target_cluster}",
            flush=True,
        )
        with _stop_on_signals(stop):
            async with _metrics_endpoint(args.metrics_listener, mirror):
                reporter = asyncio.create_task(_report(mirror, args.report_interval_ms / 1000))
                try:
                    await mirror.run(stop)
                finally:
                    reporter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reporter
    except (MirrorError, ConfigError) as exc:
        raise CommandError(str(exc)) from None
    finally:
        await mirror.close()
    _line(mirror, 0.0, 0.0)
    if args.print_metrics:
        print_metrics("mirror-metrics", mirror.metrics())
    return 0


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@contextlib.asynccontextmanager
async def _metrics_endpoint(listener: str | None, mirror: MirrorMaker) -> Any:
    if listener is None:
        yield
        return
    # The broker's endpoint, imported only when asked for.
    from logbus.server.metrics.address import parse_metrics_listener
    from logbus.server.metrics.endpoint import MetricsEndpoint

    try:
        host, port = parse_metrics_listener(listener)
    except ConfigError:
        raise CommandError(
            f"--metrics-listener {listener!r}: expected http://host:port"
        ) from None
    endpoint = MetricsEndpoint(host, port, _Collector(mirror))
    try:
        await endpoint.start()
    except OSError as exc:
        raise CommandError(f"--metrics-listener {listener}: {exc.strerror or exc}") from None
    print(f"serving the mirror's metrics at {endpoint.url}", flush=True)
    try:
        yield
    finally:
        await endpoint.stop()


class _Collector:
    """The mirror's metrics as Prometheus gauges (`logbus_mirror_record_count`, ...)."""

    def __init__(self, mirror: MirrorMaker) -> None:
        self._mirror = mirror

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        for name, value in sorted(self._mirror.metrics().items()):
            metric = "logbus_mirror_" + name.replace("-", "_")
            yield GaugeMetricFamily(metric, f"the mirror's {name}", value=value)


async def _report(mirror: MirrorMaker, interval: float) -> None:
    """A progress line every `interval` seconds, with the rates since the last one."""
    stats = mirror.stats
    last = (0.0, 0.0, time.monotonic())
    while True:
        await asyncio.sleep(interval)
        now = (stats.records.cumulative, stats.bytes.cumulative, time.monotonic())
        seconds = now[2] - last[2]
        _line(mirror, (now[0] - last[0]) / seconds, (now[1] - last[1]) / seconds)
        last = now


def _line(mirror: MirrorMaker, records_per_s: float, bytes_per_s: float) -> None:
    metrics = mirror.metrics()
    print(
        f"{int(metrics['record-count'])} records mirrored, {records_per_s:.1f} records/s "
        f"({bytes_per_s / MB:.2f} MB/s), lag {int(metrics['records-lag'])} records, "
        f"{len(mirror.topics.created)} topics created",
        flush=True,
    )

