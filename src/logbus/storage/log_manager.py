"""Every log of a broker, across its `log.dirs`.

Each log dir holds `meta.properties`, the `.kafka_cleanshutdown` marker (present only
between a clean shutdown and the next start), `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `replication-offset-checkpoint`,
`cleaner-offset-checkpoint` (written by the `LogCleaner`) and one directory per
partition. Deleted partitions are renamed to `<topic>-<partition>.<uuid hex>-delete` and
removed after `file.delete.delay.ms`; a `-delete` directory found at start-up (a crash
came before or during its removal) is removed by the first `remove_deleted` after it, as
is the log of a partition whose topic the cluster no longer has (`delete_stray_logs`).

A replica moving to another log dir (AlterReplicaLogDirs) has a future log there,
`<topic>-<partition>.<uuid hex>-future`, filled by the broker's copier until it has caught
up; `replace_current_with_future` then renames it into place and the current log away for
deletion, as Kafka's `LogManager.replaceCurrentWithFutureLog`. A future log found at
start-up (the broker stopped during a move) is deleted: the move must be asked again.

A log dir whose checkpoints cannot be written (or whose log the broker reports failing,
`mark_dir_offline`) goes offline, as with Kafka's LogDirFailureChannel: its logs leave the
map (their files are closed, nothing more is written there), no new log is placed in it,
and `on_dir_failure(path)` is called (from whatever thread noticed) so the broker can take
its partitions offline and tell the controller. The other dirs go on.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from logbus.storage.checkpoint import OffsetCheckpointFile, TopicPartition, write_atomically
from logbus.storage.errors import CorruptCheckpointError, KafkaStorageError
from logbus.storage.log import FlushListener, Log
from logbus.storage.log_cleaner import CleanerConfig, LogCleaner
from logbus.storage.log_config import LogConfig
from logbus.storage.log_loader import parse_topic_partition
from logbus.storage.meta_properties import ensure_meta_properties
from logbus.storage.record_scan import Decompressor

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"
METADATA_LOG_DIR_NAME = "__cluster_metadata-0"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
# Threads that overlap the file-system waits of loading and closing many logs (at least
# this many whatever num.recovery.threads.per.data.dir says: Kafka's default of 1 suits
# a JVM whose per-log work is small beside the disk's).
IO_THREADS = 8


def _now_ms() -> int:
    return int(time.time() * 1000)


class _LogDir:
    """One entry of `log.dirs` and its three offset checkpoints."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = OffsetCheckpointFile(path / HIGH_WATERMARK_CHECKPOINT)

    def read(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError as exc:
            # Without it every log is recovered from its start: slower, never wrong.
            logger.warning("ignoring %s: %s", checkpoint.path, exc)
            return {}


class LogManager:
    """Owns every `Log` of the broker, keyed by (topic, partition).

    Lifecycle: construct, `startup()` (loads and, after an unclean shutdown, recovers, then
    starts the log cleaner's threads when a `cleaner_config` was given),
    then periodic `checkpoint_all`, `flush_dirty`, `cleanup_logs` and `remove_deleted`,
    finally `shutdown()`. Methods are called from the event loop; `checkpoint_all`,
    `flush_dirty` and `shutdown` may also run in a thread pool (a lock guards the log map).
    """

    def __init__(
        self,
        log_dirs: Sequence[str | Path],
        *,
        broker_id: int,
        cluster_id: str | None = None,
        default_config: LogConfig | None = None,
        config_for_topic: Callable[[str], LogConfig] | None = None,
        decompress: Decompressor | None = None,
        cleaner_config: CleanerConfig | None = None,
        on_flush: FlushListener | None = None,
        recovery_threads: int = IO_THREADS,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [_LogDir(Path(d).resolve()) for d in log_dirs]
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self._config_for_topic = config_for_topic
        self.decompress = decompress
        self._on_flush = on_flush  # handed to every log (the broker's flush metrics)
        # Threads that load (and recover) the logs of a log dir at start-up.
        self.recovery_threads = recovery_threads
        self._lock = threading.RLock()
        # Checkpoints are written from worker threads; one writer at a time per file.
        self._checkpoint_lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, _LogDir] = {}
        # Future logs of replicas moving between log dirs, and the dir each is in.
        self._future_logs: dict[TopicPartition, tuple[Log, _LogDir]] = {}
        # Dirs that failed (LogDirFailureChannel); told through `on_dir_failure`.
        self.offline_dirs: set[Path] = set()
        self._failed_dirs: set[Path] = set()  # reported, maybe not offline yet
        self.on_dir_failure: Callable[[Path], None] | None = None
        self._dirs_to_delete: list[tuple[int, Path, Log | None]] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        # Compaction of logs whose cleanup.policy includes "compact" (None: no cleaner).
        self.cleaner: LogCleaner | None = None
        if cleaner_config is not None:
            self.cleaner = LogCleaner(
                cleaner_config, [d.path for d in self.log_dirs], self._logs_with_dirs
            )

    def config_for(self, topic: str) -> LogConfig:
        if self._config_for_topic is not None:
            return self._config_for_topic(topic)
        return self.default_config

    # -- startup ------------------------------------------------------------------------

    def startup(self, now_ms: int | None = None) -> None:
        """Check `meta.properties` and load every log of every dir."""
        now = _now_ms() if now_ms is None else now_ms
        for log_dir in self.log_dirs:
            log_dir.path.mkdir(parents=True, exist_ok=True)
            meta = ensure_meta_properties(log_dir.path, self.broker_id, self.cluster_id)
            if self.cluster_id is None:
                self.cluster_id = meta.cluster_id
        for log_dir in self.log_dirs:
            self._load_dir(log_dir, now)
        if self.cleaner is not None:
            self.cleaner.startup()

    def _load_dir(self, log_dir: _LogDir, now_ms: int) -> None:
        marker = log_dir.path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir.path] = clean
        recovery_points = log_dir.read(log_dir.recovery_points)
        log_starts = log_dir.read(log_dir.log_start_offsets)
        high_watermarks = log_dir.read(log_dir.high_watermarks)
        found: list[tuple[TopicPartition, Path, list[str]]] = []
        for entry in sorted(os.scandir(log_dir.path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            path = Path(entry.path)
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                self._dirs_to_delete.append((now_ms, path, None))
                continue
            if entry.name.endswith(FUTURE_DIR_SUFFIX):
                # A move the broker's stop interrupted: the current log is intact.
                self._dirs_to_delete.append((now_ms, path, None))
                continue
            if entry.name.endswith(STRAY_DIR_SUFFIX) or entry.name == METADATA_LOG_DIR_NAME:
                continue  # the KRaft metadata log is the Raft client's, never a partition here
            try:
                tp = parse_topic_partition(path)
            except ValueError:
                continue
            names = _file_names(path)
            if names is None:
                # A partition's directory holds only files: this one (another broker's log
                # dir, say ./data/broker-1 beside a broker on ./data) is not a log, and is
                # neither loaded nor ever deleted as a stray one.
                logger.warning("%s is not a partition log (it holds directories); left alone", path)
                continue
            if tp in self._logs:
                raise KafkaStorageError(f"duplicate log directories for {tp[0]}-{tp[1]}: {path}")
            found.append((tp, path, names))

        configs: dict[str, LogConfig] = {}  # one look-up per topic, not per partition

        def load(tp: TopicPartition, path: Path, names: list[str]) -> None:
            config = configs.get(tp[0])
            if config is None:
                config = configs[tp[0]] = self.config_for(tp[0])
            log = Log(
                path,
                config,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                had_clean_shutdown=clean,
                now_ms=now_ms,
                decompress=self.decompress,
                on_flush=self._on_flush,
                names=names,  # the one listing of the directory this start makes
            )
            hw = high_watermarks.get(tp, log.log_start_offset)
            log.high_watermark = min(max(hw, log.log_start_offset), log.log_end_offset)
            with self._lock:
                self._logs[tp] = log
                self._log_dir_of[tp] = log_dir

        # Loading a log is mostly file-system calls (listing, stat, opening, reading the
        # checkpoints; re-reading the tail after a crash), which release the GIL: with
        # thousands of partitions, overlapping them in threads (as Kafka's
        # num.recovery.threads.per.data.dir) shortens the start several times.
        threads = max(1, min(self.recovery_threads, len(found)))
        if threads == 1:
            for tp, path, names in found:
                load(tp, path, names)
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="log-load") as pool:
                for _ in pool.map(lambda item: load(*item), found):
                    pass
        loaded = len(found)
        if not clean and loaded:
            logger.warning("%s was not shut down cleanly; recovered %d logs", log_dir.path, loaded)
        # The marker only vouches for the shutdown before this start.
        marker.unlink(missing_ok=True)

    # -- the log map ----------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_by_dir(self) -> list[tuple[Path, list[tuple[TopicPartition, Log]]]]:
        """Every entry of `log.dirs` (absolute, in configured order) with the logs it holds."""
        with self._lock:
            held: dict[int, list[tuple[TopicPartition, Log]]] = {id(d): [] for d in self.log_dirs}
            for tp, log in self._logs.items():
                held[id(self._log_dir_of[tp])].append((tp, log))
            return [(d.path, held[id(d)]) for d in self.log_dirs]

    def future_logs_by_dir(self) -> dict[Path, list[tuple[TopicPartition, Log]]]:
        """The future logs (replicas moving to another dir) by the dir they are in."""
        with self._lock:
            found: dict[Path, list[tuple[TopicPartition, Log]]] = {}
            for tp, (log, log_dir) in self._future_logs.items():
                found.setdefault(log_dir.path, []).append((tp, log))
            return found

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's current log (None without one)."""
        log_dir = self._log_dir_of.get(TopicPartition(topic, partition))
        return None if log_dir is None else log_dir.path

    def has_log_dir(self, path: str | Path) -> bool:
        return self._dir_named(path) is not None

    def _dir_named(self, path: str | Path) -> _LogDir | None:
        wanted = Path(path).resolve()
        return next((d for d in self.log_dirs if d.path == wanted), None)

    def future_log(self, topic: str, partition: int) -> Log | None:
        entry = self._future_logs.get(TopicPartition(topic, partition))
        return None if entry is None else entry[0]

    def create_future_log(self, topic: str, partition: int, path: str | Path) -> Log:
        """A new empty future log of the partition in log dir `path`, starting at the
        current log's start offset (an existing one for that dir is returned; one for
        another dir is deleted first). KeyError for a path not in `log.dirs`."""
        tp = TopicPartition(topic, partition)
        log_dir = self._dir_named(path)
        if log_dir is None:
            raise KeyError(str(path))
        with self._lock:
            current = self._logs[tp]
            existing = self._future_logs.get(tp)
            if existing is not None:
                if existing[1] is log_dir:
                    return existing[0]
                self.abort_future_log(topic, partition)
            name = f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
            try:
                future = Log(
                    log_dir.path / name,
                    current.config,
                    topic_id=current.topic_id,
                    decompress=self.decompress,
                    on_flush=self._on_flush,
                )
            except OSError as exc:
                shutil.rmtree(log_dir.path / name, ignore_errors=True)
                raise KafkaStorageError(
                    f"cannot create a future log in {log_dir.path}: {exc}"
                ) from exc
            if current.log_start_offset > 0:
                future.truncate_fully_and_start_at(current.log_start_offset)
            self._future_logs[tp] = (future, log_dir)
            return future

    def abort_future_log(self, topic: str, partition: int) -> bool:
        """Drop the partition's future log (a move cancelled); whether there was one."""
        with self._lock:
            entry = self._future_logs.pop(TopicPartition(topic, partition), None)
        if entry is None:
            return False
        entry[0].delete()
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """The move's last step, once the future log holds what the current one holds:
        the future log takes the partition's name in its dir, the current one is renamed
        for deletion, and the checkpoints are written. Returns the partition's log now."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            future, log_dir = self._future_logs.pop(tp)
            current = self._logs[tp]
            future.high_watermark = current.high_watermark
            future.log_start_offset = max(future.log_start_offset, current.log_start_offset)
            try:
                future.rename_dir(log_dir.path / f"{topic}-{partition}")
            except OSError as exc:
                self._future_logs[tp] = (future, log_dir)
                raise KafkaStorageError(f"cannot rename {future.dir}: {exc}") from exc
            old_dir = self._log_dir_of[tp]
            self._logs[tp] = future
            self._log_dir_of[tp] = log_dir
        if self.cleaner is not None:
            self.cleaner.manager.abort_cleaning(tp)
            self.cleaner.manager.update_checkpoint(old_dir.path, tp, None)
        target = current.dir.with_name(f"{current.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            current.rename_dir(target)
        except OSError as exc:
            logger.warning("cannot rename %s for deletion after its move: %s", current.dir, exc)
        else:
            with self._lock:
                self._dirs_to_delete.append(
                    (_now_ms() + current.config.file_delete_delay_ms, target, current)
                )
        self.checkpoint_all()
        return future

    def _logs_with_dirs(self) -> list[tuple[TopicPartition, Log, Path]]:
        with self._lock:
            return [(tp, log, self._log_dir_of[tp].path) for tp, log in self._logs.items()]

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        now_ms: int | None = None,
    ) -> Log:
        """The log of a partition, created in the log dir with the fewest partitions. A
        creation that fails half-way (no space, no descriptors) leaves no directory."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                if topic_id is not None:
                    log.assign_topic_id(topic_id)
                if config is not None:
                    log.config = config
                return log
            log_dir = self._least_loaded_dir()
            directory = log_dir.path / f"{topic}-{partition}"
            existed = directory.exists()
            try:
                log = Log(
                    directory,
                    config or self.config_for(topic),
                    topic_id=topic_id,
                    now_ms=now_ms,
                    decompress=self.decompress,
                    on_flush=self._on_flush,
                )
            except BaseException:
                if not existed:
                    shutil.rmtree(directory, ignore_errors=True)
                raise
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
            return log

    def create_logs(
        self,
        topic: str,
        partitions: Iterable[int],
        config: LogConfig,
        topic_id: uuid.UUID,
        *,
        leader_epoch: int | None = None,
    ) -> None:
        """Create the logs of new partitions: the file work (directories, segment files,
        `partition.metadata`, fsyncs) of a LeaderAndIsr for them, done ahead of it, in a
        worker thread, so that the event loop stays free. With `leader_epoch`, each new
        log's leader epoch cache starts with that epoch at offset 0 (the epoch a first
        election gives the partitions this broker will lead)."""
        for partition in partitions:
            log = self.get_or_create_log(topic, partition, config, topic_id)
            if leader_epoch is not None and log.log_end_offset == 0:
                log.leader_epoch_cache.assign(leader_epoch, 0)

    def delete_stray_logs(self, topic_ids: Mapping[str, uuid.UUID]) -> list[TopicPartition]:
        """Delete the logs of topics the cluster does not have (`topic_ids`: every topic and
        its id), or whose stored topic id is another topic's of the same name: what a crash
        in the middle of a topic deletion leaves behind. Returns what was deleted."""
        stray = [
            tp
            for tp, log in list(self._logs.items())
            if tp[0] not in topic_ids
            or (log.topic_id is not None and log.topic_id != topic_ids[tp[0]])
        ]
        for topic, partition in stray:
            logger.warning("deleting stray log %s-%d: its topic no longer exists", topic, partition)
            self.delete_log(topic, partition, delay_ms=0, checkpoint=False)
        if stray:
            self.checkpoint_all()
        return stray

    def _least_loaded_dir(self) -> _LogDir:
        online = [d for d in self.log_dirs if d.path not in self.offline_dirs]
        if not online:
            raise KafkaStorageError("every log dir is offline")
        if len(online) == 1:
            return online[0]
        counts = {id(d): 0 for d in online}
        for log_dir in self._log_dir_of.values():
            if id(log_dir) in counts:
                counts[id(log_dir)] += 1
        return min(online, key=lambda d: counts[id(d)])

    # -- failed dirs ------------------------------------------------------------------------

    def dir_failed(self, path: Path, error: BaseException) -> None:
        """Report an I/O failure in log dir `path` (any thread): the first report takes
        it offline through `on_dir_failure`."""
        with self._lock:
            if path in self._failed_dirs:
                return
            self._failed_dirs.add(path)
        logger.error("log dir %s failed: %s", path, error)
        if self.on_dir_failure is not None:
            self.on_dir_failure(path)

    def dir_of_log(self, log: Log) -> Path | None:
        with self._lock:
            for tp, held in self._logs.items():
                if held is log:
                    return self._log_dir_of[tp].path
        return None

    def mark_dir_offline(self, path: Path) -> list[TopicPartition]:
        """Take log dir `path` offline: its logs (and future logs) leave the map, their
        files closed without a flush. Returns the partitions whose log was there."""
        with self._lock:
            if path in self.offline_dirs:
                return []
            self.offline_dirs.add(path)
            self._failed_dirs.add(path)
            gone = [tp for tp, d in self._log_dir_of.items() if d.path == path]
            logs = [self._logs.pop(tp) for tp in gone]
            for tp in gone:
                del self._log_dir_of[tp]
            futures = [tp for tp, (_, d) in self._future_logs.items() if d.path == path]
            logs += [self._future_logs.pop(tp)[0] for tp in futures]
        if self.cleaner is not None:
            for tp in gone:
                self.cleaner.manager.abort_cleaning(tp)
            self.cleaner.manager.handle_log_dir_failure(path)
        for log in logs:
            try:
                log.close(clean=False)
            except OSError as exc:
                logger.debug("closing %s after its dir failed: %s", log.dir, exc)
        logger.error(
            "log dir %s is offline: %d partitions with it (%s)",
            path, len(gone), ", ".join(f"{t}-{p}" for t, p in sorted(gone)[:10]),
        )  # fmt: skip
        return gone

    def delete_logs(
        self, topic: str, partitions: Iterable[int], *, delay_ms: int | None = None
    ) -> int:
        """`delete_log` for several partitions, the checkpoints written once at the end.
        Returns how many logs existed."""
        deleted = sum(
            self.delete_log(topic, p, delay_ms=delay_ms, checkpoint=False) for p in partitions
        )
        if deleted:
            self.checkpoint_all()
        return deleted

    def delete_log(
        self,
        topic: str,
        partition: int,
        *,
        now_ms: int | None = None,
        delay_ms: int | None = None,
        checkpoint: bool = True,
    ) -> bool:
        """Forget a partition's log: its directory is renamed at once and removed after
        `delay_ms` (default: the log's file.delete.delay.ms); the checkpoints are written
        without it (unless `checkpoint` is False: the caller writes them). Returns whether
        the log existed."""
        now = _now_ms() if now_ms is None else now_ms
        tp = TopicPartition(topic, partition)
        self.abort_future_log(topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
        if self.cleaner is not None:
            # Out of the map first, so the cleaner cannot pick the log again, then stop a
            # pass that is running over it.
            self.cleaner.manager.abort_cleaning(tp)
        if log is None:
            return False
        if self.cleaner is not None and log_dir is not None:
            self.cleaner.manager.update_checkpoint(log_dir.path, tp, None)
        target = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            log.rename_dir(target)
        except OSError as exc:
            raise KafkaStorageError(f"cannot rename {log.dir} for deletion: {exc}") from exc
        delay = log.config.file_delete_delay_ms if delay_ms is None else delay_ms
        with self._lock:
            self._dirs_to_delete.append((now + delay, target, log))
        if checkpoint:
            self.checkpoint_all()
        return True

    # -- periodic work --------------------------------------------------------------------

    def checkpoint_all(self) -> None:
        """Write the recovery point, log start offset and high watermark checkpoints of
        every log dir."""
        with self._lock:
            by_dir: dict[int, list[tuple[TopicPartition, Log]]] = {id(d): [] for d in self.log_dirs}
            for tp, log in self._logs.items():
                by_dir[id(self._log_dir_of[tp])].append((tp, log))
        with self._checkpoint_lock:
            self.checkpoint_log_start_offsets()
            for log_dir in self.log_dirs:
                if log_dir.path in self._failed_dirs:
                    continue
                entries = by_dir[id(log_dir)]
                try:
                    log_dir.recovery_points.write(
                        {tp: log.recovery_point for tp, log in entries}
                    )
                    log_dir.high_watermarks.write(
                        {tp: log.high_watermark for tp, log in entries}
                    )
                except OSError as exc:
                    self.dir_failed(log_dir.path, exc)

    def checkpoint_log_start_offsets(self) -> None:
        """Write only the log start offset checkpoints (after DeleteRecords, so that a crash
        cannot bring deleted records back)."""
        with self._lock:
            entries = [(tp, log, self._log_dir_of[tp]) for tp, log in self._logs.items()]
        with self._checkpoint_lock:
            for log_dir in self.log_dirs:
                if log_dir.path in self._failed_dirs:
                    continue
                try:
                    log_dir.log_start_offsets.write(
                        {
                            tp: log.log_start_offset
                            for tp, log, owner in entries
                            if owner is log_dir
                            and log.log_start_offset > log.segments[0].base_offset
                        }
                    )
                except OSError as exc:
                    self.dir_failed(log_dir.path, exc)

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """flush.ms: fsync logs whose last flush is older than their flush.ms, and the
        segments left behind by a roll. Returns how many logs were flushed."""
        now = _now_ms() if now_ms is None else now_ms
        flushed = 0
        for log in self.all_logs():
            if log.pending_flush_offset is not None:
                log.flush(log.pending_flush_offset, now_ms=now)
                flushed += 1
            if now - log.last_flush_ms >= log.config.flush_ms and log.unflushed_messages > 0:
                log.flush(now_ms=now)
                flushed += 1
        return flushed

    def cleanup_logs(
        self, now_ms: int | None = None, *, producer_id_expiration_ms: int = 86400000
    ) -> int:
        """Retention: delete old segments of every log and forget idle producers."""
        now = _now_ms() if now_ms is None else now_ms
        deleted = 0
        for log in self.all_logs():
            deleted += log.delete_old_segments(now)
            log.remove_expired_producers(now, producer_id_expiration_ms)
        return deleted

    def remove_deleted(self, now_ms: int | None = None) -> None:
        """Unlink `.deleted` segments and remove `-delete` directories whose delay passed."""
        now = _now_ms() if now_ms is None else now_ms
        for log in self.all_logs():
            log.remove_deleted_segments(now)
        with self._lock:
            due = [(path, log) for at, path, log in self._dirs_to_delete if at <= now]
            self._dirs_to_delete = [item for item in self._dirs_to_delete if item[0] > now]
        for path, deleted_log in due:
            if deleted_log is not None:
                deleted_log.delete()
            else:
                shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                # Something could not be removed (it is retried: no directory is left).
                logger.warning("could not remove all of %s; retrying later", path)
                with self._lock:
                    self._dirs_to_delete.append((now + 1000, path, None))

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self, *, clean: bool = True) -> None:
        """Close every log. A clean shutdown flushes, snapshots producer state, writes the
        checkpoints and the clean-shutdown marker; `clean=False` just drops the file
        handles, leaving the disk as a crash would (used by tests)."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
        with self._lock:
            futures = [log for log, _ in self._future_logs.values()]
            self._future_logs.clear()
        logs = self.all_logs() + futures
        # Each clean close fsyncs the log's tail and writes a producer snapshot: with many
        # partitions those waits add up, so they overlap in a few threads.
        with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="log-close") as pool:
            for _ in pool.map(lambda log: log.close(clean=clean), logs):
                pass
        with self._lock:
            pending = list(self._dirs_to_delete)
            self._dirs_to_delete = []
        for _, path, deleted_log in pending:
            if not clean:
                if deleted_log is not None:
                    deleted_log.close(clean=False)
            elif deleted_log is not None:
                deleted_log.delete()
            else:
                shutil.rmtree(path, ignore_errors=True)
        if clean:
            self.checkpoint_all()
            for log_dir in self.log_dirs:
                if log_dir.path not in self._failed_dirs:
                    write_atomically(log_dir.path / CLEAN_SHUTDOWN_FILE, b"")
        with self._lock:
            self._logs.clear()
            self._log_dir_of.clear()


def _file_names(path: Path) -> list[str] | None:
    """The names in a directory, or None if it holds a directory."""
    names = []
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir():
                return None
            names.append(entry.name)
    return names
