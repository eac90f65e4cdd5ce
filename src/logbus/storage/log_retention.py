"""Which old segments a log may delete: below the log start offset, past retention.ms, or
beyond retention.bytes. Pure decisions over the segment list; `Log` does the deleting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from logbus.storage.segment import LogSegment

# (segment, the segment after it or None for the active one) -> may it be deleted?
SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]


def deletable_segments(
    segments: Sequence[LogSegment],
    predicate: SegmentPredicate,
    *,
    high_watermark: int,
    log_end_offset: int,
) -> list[LogSegment]:
    """The oldest segments, in order, for which `predicate` holds, stopping at the first
    that fails it or still holds data at or above the high watermark. The active segment
    qualifies only when it is not empty and everything is below the high watermark."""
    bound = min(high_watermark, log_end_offset)
    out: list[LogSegment] = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is None:
            below_bound = bound == log_end_offset and segment.size > 0
        else:
            below_bound = following.base_offset <= bound
        if not below_bound or not predicate(segment, following):
            break
        out.append(segment)
    return out


def log_start_breached(log_start_offset: int) -> SegmentPredicate:
    """Segments wholly below the log start offset (after DeleteRecords or truncation)."""

    def check(segment: LogSegment, following: LogSegment | None) -> bool:
        return following is not None and following.base_offset <= log_start_offset

    return check


def retention_ms_breached(now_ms: int, retention_ms: int) -> SegmentPredicate:
    """Segments whose newest record is older than retention.ms."""

    def check(segment: LogSegment, following: LogSegment | None) -> bool:
        return now_ms - segment.largest_timestamp > retention_ms

    return check


def retention_size_breached(total_size: int, retention_bytes: int) -> SegmentPredicate:
    """The oldest segments the log can lose and still keep retention.bytes."""
    excess = total_size - retention_bytes

    def check(segment: LogSegment, following: LogSegment | None) -> bool:
        nonlocal excess
        if excess < segment.size:
            return False
        excess -= segment.size
        return True

    return check
