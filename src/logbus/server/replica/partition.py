"""One partition hosted by this broker: its log, its leadership state (leader epoch,
partition epoch, ISR), the leader's view of each follower and the high watermark.

As leader, the partition records where each follower's fetches reached (Kafka's
`Replica` state) and keeps the high watermark at the smallest log end offset of the
"maximal" ISR (KIP-497: the committed ISR plus a pending addition); it only moves
forward. ISR changes are proposed (`isr_to_shrink`, `isr_to_expand`), sent to the
controller by the replica manager, and adopted once the controller answers
(`complete_isr_change`). A partition whose only replica is this broker is a cluster of
size one: the high watermark follows the log end offset at every append.

Owned by the event loop thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from logbus.protocol import ErrorCode
from logbus.storage.errors import OffsetOutOfRangeError
from logbus.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from logbus.storage.log import Log

HIGH_WATERMARK = -1  # DeleteRecords: delete everything below the high watermark
UNKNOWN_OFFSET = -1

logger = logging.getLogger(__name__)


class PartitionError(Exception):
    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    record_count: int = 0  # records appended (the broker's messages-in metric)


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower (Kafka's `Replica`): its log end and start
    offsets as of its last fetch, and the last time it was caught up with the leader."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1

    def is_caught_up(self, leader_end: int, now_ms: int, lag_ms: int) -> bool:
        return leader_end == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= lag_ms


class Partition:
    def __init__(self, topic: str, index: int, topic_id: UUID, log: Log, broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        # As leader: the followers' states, the offset this leader epoch starts at, and an
        # ISR change sent to the controller and not answered yet.
        self.remote: dict[int, ReplicaState] = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.pending_isr: tuple[int, ...] | None = None
        self.replica_lag_time_max_ms = 30_000
        # A leader cut off from its metadata session and its followers stops acting as
        # leader (server/replica/leader_isolation.py) until the controller's state for
        # the partition reaches it again; leader_id and leader_epoch stay as they were.
        self.stepped_aside = False

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader_id}, isr={self.isr})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id and not self.stepped_aside

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: while a change is pending, the committed
        ISR and the proposed one together (KIP-497)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    # --- leadership -----------------------------------------------------------------------

    def is_stale(self, leader_epoch: int, partition_epoch: int) -> bool:
        """Whether a LeaderAndIsr for (leader_epoch, partition_epoch) is older than what this
        partition already applied (Kafka ignores those)."""
        if leader_epoch != self.leader_epoch:
            return leader_epoch < self.leader_epoch
        return 0 <= partition_epoch < self.partition_epoch

    def make_leader(
        self,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        partition_epoch: int = 0,
        now_ms: int = 0,
    ) -> bool:
        """Become (or stay) leader; returns whether this is a new leader epoch."""
        new_epoch = self.leader_id != self.broker_id or leader_epoch != self.leader_epoch
        self.stepped_aside = False
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.replicas = replicas
        self.pending_isr = None
        if new_epoch:
            end = self.log.log_end_offset
            self.log.leader_epoch_cache.assign(leader_epoch, end)
            self.leader_epoch_start_offset = end
            # Followers in the ISR count as caught up now; the others must prove it.
            self.remote = {
                r: ReplicaState(r, last_caught_up_time_ms=now_ms if r in isr else 0)
                for r in replicas
                if r != self.broker_id
            }
        else:
            for r in replicas:
                if r != self.broker_id and r not in self.remote:
                    self.remote[r] = ReplicaState(r)
            for r in list(self.remote):
                if r not in replicas:
                    del self.remote[r]
        self.maybe_increment_high_watermark(now_ms)
        return new_epoch

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        partition_epoch: int = 0,
    ) -> bool:
        """Follow `leader_id`; returns whether the leader or its epoch changed (the replica
        fetcher then starts over from the new leader)."""
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        self.stepped_aside = False
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.replicas = replicas
        self.remote = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        return changed

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing of clients with a stale or future view of leadership (KIP-320)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def ensure_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (the largest epoch <= `leader_epoch` this
        log knows, the offset where it ended); (-1, -1) when unknown."""
        self.ensure_leader()
        self.check_leader_epoch(current_leader_epoch)
        log = self.log
        epoch, end = log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return epoch, end

    # --- appends --------------------------------------------------------------------------

    @property
    def shrinking_below_min_isr(self) -> bool:
        """Whether this leader has proposed an ISR smaller than min.insync.replicas that
        the controller has not written yet (followers silent for replica.lag.time.max.ms:
        an acks=all append cannot complete with them, whether the shrink is written or,
        with the controller out of reach, never is)."""
        pending = self.pending_isr
        return (
            pending is not None
            and len(pending) < len(self.isr)
            and len(pending) < self.log.config.min_insync_replicas
        )

    def check_enough_replicas(self, required_acks: int) -> None:
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and (len(self.isr) < min_isr or self.shrinking_below_min_isr):
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.isr)} (in sync: "
                f"{set(self.pending_isr or self.isr)}) is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.index}",
            )

    def append_as_leader(
        self, records: memoryview, required_acks: int, now_ms: int, *, from_client: bool = True
    ) -> AppendResult:
        """Append as leader; `from_client=False` is the coordinator's origin (transaction
        markers: control batches allowed, no client sequence or timestamp checks)."""
        self.ensure_leader()
        self.check_enough_replicas(required_acks)
        info = self.log.append_as_leader(
            records, self.leader_epoch, now_ms=now_ms, from_client=from_client
        )
        self.maybe_increment_high_watermark(now_ms)
        return AppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            self.log.log_start_offset,
            0 if info.duplicate else info.record_count,
        )

    def replication_outcome(self, leader_epoch: int, last_offset: int) -> ErrorCode | None:
        """Kafka's check of a parked acks=all append made in `leader_epoch`: None while
        waiting, NONE once the high watermark passed it with enough replicas in sync,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas (or
        such a shrink is proposed and not written yet), NOT_LEADER_OR_FOLLOWER if
        leadership moved or this leader stepped aside."""
        if not self.is_leader or self.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark <= last_offset:
            return (
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                if self.shrinking_below_min_isr
                else None
            )
        if len(self.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (HIGH_WATERMARK: the high
        watermark); returns the new low watermark. The segments wholly below it go at the
        next retention check."""
        self.ensure_leader()
        log = self.log
        name = f"{self.topic}-{self.index}"
        if not log.config.delete:
            raise PartitionError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {name} can not be deleted due to the configured policy",
            )
        target = self.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"The offset {target} for partition {name} is not valid",
            )
        try:
            log.maybe_increment_log_start_offset(target)
        except OffsetOutOfRangeError as exc:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE, str(exc)) from exc
        return log.log_start_offset

    # --- followers, as seen by the leader -------------------------------------------------

    def follower(self, replica_id: int, has_leader_epoch: bool) -> ReplicaState:
        """The state of follower `replica_id`, or Kafka's error for a fetch from a broker
        that is not a replica (UNKNOWN_LEADER_EPOCH when the fetch names the current
        epoch, so that the follower retries; else NOT_LEADER_OR_FOLLOWER)."""
        state = self.remote.get(replica_id)
        if state is None:
            raise PartitionError(
                ErrorCode.UNKNOWN_LEADER_EPOCH if has_leader_epoch
                else ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a replica of {self.topic}-{self.index} "
                f"(replicas {list(self.replicas)}, leader epoch {self.leader_epoch})",
            )
        return state

    def update_follower_fetch_state(
        self,
        state: ReplicaState,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        leader_end_offset: int,
        broker_epoch: int,
    ) -> bool:
        """Record a follower's fetch (its log end is the fetch offset); returns whether the
        high watermark moved."""
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            state.last_caught_up_time_ms = max(
                state.last_caught_up_time_ms, state.last_fetch_time_ms
            )
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        state.last_fetch_leader_log_end_offset = leader_end_offset
        state.last_fetch_time_ms = now_ms
        state.broker_epoch = broker_epoch
        return self.maybe_increment_high_watermark(now_ms)

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Move the high watermark up to the smallest log end offset of the maximal ISR and
        of the followers caught up within replica.lag.time.max.ms (those are about to
        join the ISR); it never moves back. Returns whether it moved."""
        log = self.log
        end = log.log_end_offset
        if not self.is_leader:
            return False
        new = end
        if self.remote:
            maximal = self.maximal_isr
            lag = self.replica_lag_time_max_ms
            for replica, state in self.remote.items():
                if state.log_end_offset < new and (
                    replica in maximal or state.is_caught_up(end, now_ms, lag)
                ):
                    new = state.log_end_offset
        if new > log.high_watermark:
            log.high_watermark = new
            return True
        return False

    def cut_off_from_followers(self, now_ms: int, silence_ms: int) -> bool:
        """As leader: whether too few ISR members still fetch from it to acknowledge an
        acks=all write: counting itself and the ISR followers heard from within
        `silence_ms`, fewer than min.insync.replicas (and than two, so that a leader
        whose every follower went silent counts whatever min.insync.replicas says). A
        leader without followers in its ISR is never cut off from them."""
        if not self.is_leader:
            return False
        followers = [r for r in self.isr if r != self.broker_id]
        if not followers:
            return False
        fetching = 1
        for r in followers:
            state = self.remote.get(r)
            if state is not None:
                heard = max(state.last_fetch_time_ms, state.last_caught_up_time_ms)
                if now_ms - heard <= silence_ms:
                    fetching += 1
        return fetching < max(self.log.config.min_insync_replicas, 2)

    def step_aside(self) -> None:
        """Stop acting as leader (produce and fetch get NOT_LEADER_OR_FOLLOWER, waiting
        acks=all appends complete with it) until `make_leader` or `make_follower`."""
        self.stepped_aside = True
        self.pending_isr = None

    # --- ISR changes (leader) --------------------------------------------------------------

    def isr_to_shrink(self, now_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers not caught up for replica.lag.time.max.ms, if
        any are (and no change is pending)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        end = self.log.log_end_offset
        lag = self.replica_lag_time_max_ms
        out = [
            r
            for r in self.isr
            if r != self.broker_id
            and (state := self.remote.get(r)) is not None
            and not state.is_caught_up(end, now_ms, lag)
        ]
        if not out:
            return None
        logger.info(
            "shrinking the ISR of %s-%d from %s: %s not caught up for %d ms",
            self.topic, self.index, list(self.isr), out, lag,
        )
        return tuple(r for r in self.isr if r not in out)

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with `replica_id` once its log reached the high watermark and this
        leader epoch's start (and no change is pending)."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        state = self.remote.get(replica_id)
        if state is None or replica_id not in self.replicas:
            return None
        if (
            state.log_end_offset >= self.log.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        ):
            return (*self.isr, replica_id)
        return None

    def begin_isr_change(self, proposed: tuple[int, ...]) -> None:
        self.pending_isr = proposed

    def complete_isr_change(
        self,
        proposed: tuple[int, ...],
        error: ErrorCode,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
        now_ms: int,
    ) -> bool:
        """The controller's answer to `proposed`; returns whether the high watermark moved.
        An error (or an answer for an older leader epoch) drops the pending change: the
        next check proposes again, or a LeaderAndIsr brings the new state."""
        if self.pending_isr != proposed:
            return False  # a LeaderAndIsr replaced the state meanwhile
        self.pending_isr = None
        if error != ErrorCode.NONE:
            logger.info(
                "ISR change %s of %s-%d refused by the controller: %s",
                list(proposed), self.topic, self.index, error.name,
            )
            return False
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return False
        self.isr = isr
        self.partition_epoch = partition_epoch
        return self.maybe_increment_high_watermark(now_ms)

    # --- follower -------------------------------------------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark: the leader's, bounded by its own log end."""
        log = self.log
        new = min(leader_high_watermark, log.log_end_offset)
        if new > log.high_watermark:
            log.high_watermark = new
