"""Consumer group lag: per partition (log end offset minus the committed offset, as
kafka-consumer-groups prints it), the total over time kept in memory, and the chart of
that total as inline SVG."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from markupsafe import Markup, escape

from logbus.client.admin import Admin
from logbus.client.types import TopicPartition

# How many samples of a group's total lag the chart keeps (a few minutes at one sample
# every few seconds).
MAX_SAMPLES = 120
# Samples closer together than this are not taken (several pages may poll at once).
MIN_INTERVAL = 1.0


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a group: its committed offset (None if the group has none), its
    log end offset and the lag (None without a committed offset)."""

    topic: str
    partition: int
    committed: int | None
    end: int

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(self.end - self.committed, 0)


async def group_lag(
    admin: Admin, group_id: str, assigned: set[TopicPartition] | None = None
) -> list[PartitionLag]:
    """The lag of every partition the group committed an offset for or is assigned."""
    committed = await admin.list_consumer_group_offsets(group_id)
    partitions = sorted(set(committed) | (assigned or set()))
    if not partitions:
        return []
    ends = await admin.list_offsets(dict.fromkeys(partitions, "latest"))
    return [
        PartitionLag(tp.topic, tp.partition, committed.get(tp), ends[tp].offset)
        for tp in partitions
    ]


async def share_group_lag(admin: Admin, group_id: str) -> list[PartitionLag]:
    """A share group's lag: per partition it has a start offset for, the records from its
    share-partition start offset to the log end (what is not yet acknowledged, or not yet
    delivered), as kafka-share-groups --describe shows it. `committed` holds the start
    offset (None where the group has none yet)."""
    starts = await admin.describe_share_group_offsets(group_id)
    if not starts:
        return []
    ends = await admin.list_offsets(dict.fromkeys(starts, "latest"))
    return [
        PartitionLag(tp.topic, tp.partition, None if start is None else start.start_offset,
                     ends[tp].offset)
        for tp, start in sorted(starts.items())
    ]


def total_lag(lags: list[PartitionLag]) -> int:
    return sum(p.lag or 0 for p in lags)


class LagHistory:
    """Each group's total lag over time, as sampled by the pages that show it."""

    def __init__(self, max_samples: int = MAX_SAMPLES) -> None:
        self._samples: dict[str, deque[tuple[float, int]]] = {}
        self._max = max_samples

    def add(self, group_id: str, total: int, now: float | None = None) -> None:
        at = time.time() if now is None else now
        samples = self._samples.setdefault(group_id, deque(maxlen=self._max))
        if samples and at - samples[-1][0] < MIN_INTERVAL:
            samples[-1] = (samples[-1][0], total)
        else:
            samples.append((at, total))

    def samples(self, group_id: str) -> list[tuple[float, int]]:
        return list(self._samples.get(group_id, ()))


def lag_chart(samples: list[tuple[float, int]], width: int = 640, height: int = 180) -> Markup:
    """The total lag over time as an SVG line chart (the newest sample on the right)."""
    left, right, top, bottom = 56, 12, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    latest = samples[-1][1] if samples else 0
    peak = max((total for _, total in samples), default=0) or 1
    parts = [
        f'<svg class="lag-chart" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" data-samples="{len(samples)}" '
        f'data-latest="{latest}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>total lag over time, latest {latest}</title>",
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot"/>',
        f'<text x="{left - 6}" y="{top + 10}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    if samples:
        first, last = samples[0][0], samples[-1][0]
        span = max(last - first, 1e-9)
        points = []
        for at, total in samples:
            x = left + (plot_w * (at - first) / span if len(samples) > 1 else plot_w)
            y = top + plot_h - plot_h * total / peak
            points.append(f"{x:.1f},{y:.1f}")
        parts.append(f'<polyline class="line" points="{" ".join(points)}"/>')
        last_x, last_y = points[-1].split(",")
        parts.append(f'<circle class="latest" cx="{last_x}" cy="{last_y}" r="3.5"/>')
        parts.append(
            f'<text x="{left}" y="{height - 8}">{escape(_clock(first))}</text>'
            f'<text x="{left + plot_w}" y="{height - 8}" text-anchor="end">'
            f"{escape(_clock(last))} (UTC)</text>"
        )
    else:
        parts.append(f'<text x="{left + 8}" y="{top + 20}">no samples yet</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))
