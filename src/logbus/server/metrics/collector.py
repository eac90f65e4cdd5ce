"""The broker's metrics as Prometheus families, built at scrape time from the counters
the broker keeps (`BrokerMetrics`) and the state it holds (partitions, logs, the
controller, the group coordinator).

Names are those a Prometheus JMX exporter with the common Kafka rules gives Kafka's
MBeans (`kafka_server_brokertopicmetrics_messagesin_total{topic=…}`, …), and those of
kafka-lag-exporter for consumer lag, so dashboards written for Kafka work. Nothing here
makes a network call or waits: a scrape reads memory on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from logbus.server.metrics.broker_metrics import TIMES, TOPIC_COUNTERS, BrokerMetrics, api_name
from logbus.server.metrics.histogram import QUANTILE_LABELS, Histogram

if TYPE_CHECKING:
    from logbus.coordinator.group.state import Group
    from logbus.server.services import BrokerServices

log = logging.getLogger(__name__)

def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    metric = Metric(name, doc, "gauge")
    metric.add_sample(name, labels or {}, value)
    return metric


def _summary(name: str, doc: str) -> Metric:
    return Metric(name, doc, "summary")


def _add_quantiles(
    metric: Metric, histogram: Histogram, labels: dict[str, str], now: float
) -> None:
    for label, (_q, value) in zip(QUANTILE_LABELS, histogram.quantiles(now), strict=True):
        metric.add_sample(metric.name, {**labels, "quantile": label}, value)
    metric.add_sample(metric.name + "_count", labels, histogram.count)
    metric.add_sample(metric.name + "_sum", labels, histogram.total)


class BrokerCollector(Collector):
    """Registered in the endpoint's own `CollectorRegistry`; `collect()` runs on the
    broker's event loop (the HTTP endpoint serves there)."""

    def __init__(self, services: BrokerServices, metrics: BrokerMetrics) -> None:
        self.services = services
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        now = time.monotonic()
        yield from self._topic_metrics()
        yield from self._request_metrics(now)
        yield from self._replica_metrics()
        yield from self._controller_metrics()
        yield from self._log_metrics(now)
        yield from self._group_metrics()

    # --- kafka.server:type=BrokerTopicMetrics -------------------------------------------

    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self.metrics.topics
        totals = stats.all_topics()
        for i, (short, doc) in enumerate(TOPIC_COUNTERS):
            name = f"kafka_server_brokertopicmetrics_{short}"
            metric = Metric(name, doc + " Without a topic label: all topics.", "counter")
            metric.add_sample(name + "_total", {}, totals[i])
            for topic, values in stats.topics.items():
                metric.add_sample(name + "_total", {"topic": topic}, values[i])
            yield metric

    # --- kafka.network:type=RequestMetrics and the idle ratios ----------------------------

    def _request_metrics(self, now: float) -> Iterator[Metric]:
        requests = self.metrics.requests
        count = Metric(
            "kafka_network_requestmetrics_requests", "Requests handled, by API and version.",
            "counter",
        )
        for api_key, m in sorted(requests.apis.items()):
            for version, n in sorted(m.by_version.items()):
                count.add_sample(
                    count.name + "_total",
                    {"request": api_name(api_key), "version": str(version)},
                    n,
                )
        yield count
        for i, (short, doc) in enumerate(TIMES):
            metric = _summary(f"kafka_network_requestmetrics_{short}", doc + " Milliseconds.")
            for api_key, m in sorted(requests.apis.items()):
                _add_quantiles(metric, m.times[i], {"request": api_name(api_key)}, now)
            yield metric
        # logbus has one event loop, no handler or network threads: both report its idle
        # share since the previous scrape (its thread's CPU time against the wall time)
        idle = self.metrics.loop_idle.idle(time.thread_time(), now)
        yield _gauge(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "Share of the time since the previous scrape the event loop waited for work.",
            idle,
        )
        yield _gauge(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "Share of the time since the previous scrape the event loop waited for work.",
            idle,
        )
        purgatory = Metric(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in the purgatory: acks=all produces, long-poll fetches.",
            "gauge",
        )
        purgatory.add_sample(purgatory.name, {"delayedOperation": "Produce"},
                             self.metrics.delayed_produce)
        purgatory.add_sample(purgatory.name, {"delayedOperation": "Fetch"},
                             self.metrics.delayed_fetch)
        yield purgatory

    # --- kafka.server:type=ReplicaManager ---------------------------------------------

    def _replica_metrics(self) -> Iterator[Metric]:
        parts = list(self.services.replica_manager.partitions.values())
        leaders = [p for p in parts if p.is_leader]
        prefix = "kafka_server_replicamanager_"
        yield _gauge(prefix + "partitioncount", "Partitions with a replica here.", len(parts))
        yield _gauge(prefix + "leadercount", "Partitions led here.", len(leaders))
        yield _gauge(
            prefix + "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica list.",
            sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
        )
        yield _gauge(
            prefix + "offlinereplicacount",
            "Replicas here that cannot be served (logbus stops on a failed log dir: 0).",
            0,
        )
        for short, value, doc in (
            ("isrshrinks", self.metrics.isr_shrinks, "ISR changes led here that dropped "
             "replicas."),
            ("isrexpands", self.metrics.isr_expands, "ISR changes led here that added "
             "replicas."),
        ):
            metric = Metric(prefix + short, doc, "counter")
            metric.add_sample(prefix + short + "_total", {}, value)
            yield metric

    # --- kafka.controller ---------------------------------------------------------------

    def _controller_metrics(self) -> Iterator[Metric]:
        controller = self.services.controller
        active = not self.services.in_cluster or bool(getattr(controller, "active", False))
        offline = imbalance = 0
        elections = controller.leader_elections
        unclean = controller.unclean_leader_elections
        if active:
            # The controller thread may change these dicts: read copies, retry a clash.
            for _attempt in range(3):
                try:
                    offline = imbalance = 0
                    for topic in list(controller.topics.values()):
                        for state in list(topic.partitions.values()):
                            if state.leader < 0:
                                offline += 1
                            elif state.replicas and state.leader != state.replicas[0]:
                                imbalance += 1
                    break
                except RuntimeError:
                    continue
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount",
                     "1 on the broker that is the active controller, else 0.", int(active))
        yield _gauge(prefix + "offlinepartitionscount",
                     "Partitions without a leader (reported by the active controller).",
                     offline)
        yield _gauge(prefix + "preferredreplicaimbalancecount",
                     "Partitions not led by their first replica (active controller).",
                     imbalance)
        stats = "kafka_controller_controllerstats_"
        elected = Metric(stats + "leaderelectionrateandtimems",
                         "Leaders elected by this broker's controller for existing "
                         "partitions.", "summary")
        elected.add_sample(elected.name + "_count", {}, elections)
        yield elected
        metric = Metric(stats + "uncleanleaderelections",
                        "Of those, leaders chosen outside the ISR.", "counter")
        metric.add_sample(metric.name + "_total", {}, unclean)
        yield metric

    # --- kafka.log ------------------------------------------------------------------------

    def _log_metrics(self, now: float) -> Iterator[Metric]:
        flush = _summary("kafka_log_logflushstats_logflushrateandtimems",
                         "Log flushes (fsync) and their time in milliseconds.")
        _add_quantiles(flush, self.metrics.log_flush, {}, now)
        yield flush
        manager = self.services.replica_manager
        families = {
            short: Metric(f"kafka_log_log_{short}", doc, "gauge")
            for short, doc in (
                ("size", "Bytes of the partition's log on disk."),
                ("logstartoffset", "The partition's first offset."),
                ("logendoffset", "The offset the partition's next record gets."),
                ("numlogsegments", "Segments of the partition's log."),
            )
        }
        for (topic, index), part in list(manager.partitions.items()):
            labels = {"topic": topic, "partition": str(index)}
            log_ = part.log
            for short, value in (
                ("size", log_.size_in_bytes),
                ("logstartoffset", log_.log_start_offset),
                ("logendoffset", log_.log_end_offset),
                ("numlogsegments", len(log_.segments)),
            ):
                families[short].add_sample(families[short].name, labels, value)
        yield from families.values()

    # --- the group coordinator and consumer lag -------------------------------------------

    def _group_metrics(self) -> Iterator[Metric]:
        runtime = self.services.group_coordinator
        manager = self.services.replica_manager
        groups: list[Group] = []
        for shard in list(runtime.shards.values()):
            if not shard.loading:
                groups.extend(shard.state.groups.values())
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(prefix + "numgroups", "Groups coordinated here.", len(groups))
        yield _gauge(prefix + "numoffsets", "Committed offsets of the groups coordinated here.",
                     sum(len(g.offsets) for g in groups))
        for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"):
            yield _gauge(prefix + "numgroups" + state.lower(), f"Groups in state {state}.",
                         sum(1 for g in groups if g.state.value == state))
        latest = Metric("kafka_partition_latest_offset",
                        "High watermark of each partition led here.", "gauge")
        ends: dict[tuple[str, int], int] = {}
        for (topic, index), part in list(manager.partitions.items()):
            ends[(topic, index)] = part.high_watermark
            if part.is_leader:
                latest.add_sample(latest.name, {"topic": topic, "partition": str(index)},
                                  part.high_watermark)
        yield latest
        offset = Metric("kafka_consumergroup_group_offset",
                        "A group's committed offset of a partition.", "gauge")
        lag = Metric("kafka_consumergroup_group_lag",
                     "High watermark minus the group's committed offset (partitions with a "
                     "replica on this broker).", "gauge")
        max_lag = Metric("kafka_consumergroup_group_max_lag",
                         "A group's largest lag over its partitions.", "gauge")
        for group in groups:
            worst = None
            for (topic, index), commit in list(group.offsets.items()):
                labels = {"group": group.group_id, "topic": topic, "partition": str(index)}
                offset.add_sample(offset.name, labels, commit.offset)
                end = ends.get((topic, index))
                if end is None:
                    continue
                value = max(0, end - commit.offset)
                lag.add_sample(lag.name, labels, value)
                worst = value if worst is None else max(worst, value)
            if worst is not None:
                max_lag.add_sample(max_lag.name, {"group": group.group_id}, worst)
        yield offset
        yield lag
        yield max_lag
