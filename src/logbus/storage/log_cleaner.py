"""The log cleaner: background threads that compact logs whose cleanup.policy includes
"compact" (Kafka's `LogCleaner`).

Each of `log.cleaner.threads` threads repeatedly takes the filthiest log from the
`LogCleanerManager`, cleans it with its own `Cleaner` (offset map and I/O throttler), and
records the new first dirty offset in `cleaner-offset-checkpoint`; when no log needs
cleaning it sleeps `log.cleaner.backoff.ms`. A pass that fails unexpectedly marks its
partition uncleanable until the partition is deleted or the broker restarts, as Kafka does.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from logbus.storage.checkpoint import TopicPartition
from logbus.storage.cleaner import Cleaner, CleaningAbortedError, LogToClean, PhaseHook
from logbus.storage.log_cleaner_manager import LogCleanerManager, LogsView
from logbus.storage.offset_map import OffsetMap
from logbus.storage.throttler import Throttler

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings, with Kafka's defaults."""

    enable: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000


class _CleanerThread(threading.Thread):
    def __init__(self, owner: LogCleaner, index: int) -> None:
        super().__init__(name=f"logbus-log-cleaner-{index}", daemon=True)
        self.owner = owner
        config = owner.config
        per_thread = min(config.dedupe_buffer_size // max(config.num_threads, 1), (1 << 31) - 1)
        self.cleaner = Cleaner(
            OffsetMap(per_thread, config.io_buffer_load_factor),
            # Shutdown and aborts (a partition being deleted) cut a throttling pause short.
            Throttler(config.max_io_bytes_per_second, sleep=owner.manager.interrupt.wait),
            io_buffer_size=config.io_buffer_size // max(config.num_threads, 1) // 2,
            check_done=owner.check_done,
            hook=owner.hook,
        )

    def run(self) -> None:
        owner = self.owner
        while not owner.stopping.is_set():
            cleaned = False
            try:
                cleaned = owner.clean_filthiest_log(self.cleaner)
            except Exception:
                logger.exception("log cleaner thread %s failed", self.name)
            if not cleaned:
                owner.wake_up.wait(owner.config.backoff_ms / 1000)
                owner.wake_up.clear()


class LogCleaner:
    """Owns the cleaner threads from `startup()` to `shutdown()`; thread-safe."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: list[Path],
        logs: LogsView,
        *,
        hook: PhaseHook | None = None,
    ) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs)
        self.hook = hook
        self.stopping = threading.Event()
        self.wake_up = threading.Event()
        self._threads: list[_CleanerThread] = []
        # Passes completed (for tests waiting on the cleaner); guarded by the condition.
        self._passes = 0
        self._progress = threading.Condition()

    def startup(self) -> None:
        if not self.config.enable:
            return
        self.stopping.clear()
        self.manager.interrupt.clear()
        self._threads = [_CleanerThread(self, i) for i in range(self.config.num_threads)]
        for thread in self._threads:
            thread.start()

    def shutdown(self) -> None:
        """Stop every thread (a pass in progress is abandoned, leaving `.cleaned` files the
        next start deletes) and wait for them."""
        self.stopping.set()
        self.manager.interrupt.set()
        self.wake_up.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def reconfigure(self, config: CleanerConfig) -> None:
        """Apply new log.cleaner.* settings (a dynamic broker config change): the threads
        are stopped, abandoning any pass, and started again with the new settings, as
        Kafka's LogCleaner.reconfigure does."""
        running = bool(self._threads)
        self.shutdown()
        self.config = config
        if running or config.enable:
            self.startup()

    def wake(self) -> None:
        """Look for dirty logs now instead of after the backoff."""
        self.wake_up.set()

    def check_done(self, tp: TopicPartition) -> None:
        if self.stopping.is_set():
            raise CleaningAbortedError("the log cleaner is shutting down")
        self.manager.check_aborted(tp)

    def clean_filthiest_log(self, cleaner: Cleaner, now_ms: int | None = None) -> bool:
        """Clean the filthiest log once with `cleaner`; returns whether one was cleaned."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        ltc = self.manager.grab_filthiest_log(now)
        if ltc is None:
            return False
        self._clean(cleaner, ltc, now)
        return True

    def _clean(self, cleaner: Cleaner, ltc: LogToClean, now_ms: int) -> None:
        tp = ltc.topic_partition
        log_dir = ltc.log.dir.parent
        end_offset: int | None = None
        try:
            end_offset, stats = cleaner.clean(ltc, now_ms)
            logger.info(
                "cleaned %s-%d [%d, %d): %d of %d bytes kept, %d of %d records",
                tp[0],
                tp[1],
                ltc.first_dirty_offset,
                end_offset,
                stats.bytes_written,
                stats.bytes_read,
                stats.messages_written,
                stats.messages_read,
            )
            if stats.invalid_messages:
                logger.warning(
                    "%d records without a key dropped from %s-%d", stats.invalid_messages, *tp
                )
        except CleaningAbortedError as exc:
            logger.info("cleaning of %s-%d stopped: %s", tp[0], tp[1], exc)
        except Exception:
            logger.exception("cleaning %s-%d failed; marking it uncleanable", tp[0], tp[1])
            self.manager.mark_uncleanable(tp)
        finally:
            self.manager.done_cleaning(tp, log_dir, end_offset)
            with self._progress:
                self._passes += 1
                self._progress.notify_all()

    @property
    def passes(self) -> int:
        with self._progress:
            return self._passes

    def await_passes(self, count: int, timeout: float) -> bool:
        """Wait until `count` passes have finished (tests); returns whether they did."""
        deadline = time.monotonic() + timeout
        with self._progress:
            while self._passes < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._progress.wait(left)
            return True
