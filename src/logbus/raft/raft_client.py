"""One voter of the KRaft quorum (KIP-595), Kafka's `KafkaRaftClient`.

The client owns the voter's `ElectionState` (persisted in `quorum-state` before anything
depends on it), its `ReplicatedLog`, and one task for the role it is in:

- unattached, voted or resigned: wait a randomized election timeout (T to 2T), then
  stand as candidate in the next epoch;
- candidate: ask every other voter for its vote (Vote); a majority makes it leader;
  no majority within the election timeout: a random backoff, then the next epoch;
- leader: write a LeaderChange control record in its epoch, tell the voters
  (BeginQuorumEpoch), serve their Fetches, and move the high watermark to the offset a
  majority of voters has reached (only once a record of its own epoch is there); a
  leader that hears from no majority within 1.5 times the fetch timeout resigns;
- follower: fetch from the leader (Fetch carries the last fetched epoch; a diverging
  epoch in the answer truncates the uncommitted suffix, a snapshot id makes it fetch the
  snapshot, FetchSnapshot); no successful fetch within the fetch timeout: candidate.

A node outside the voters (a broker) is an observer: it never stands or votes; it finds
the leader by fetching from the voters in turn (each answer names the leader and its
epoch), then follows it as a follower does, and when the leader stops answering it asks
the voters again.

`RaftServer` (raft_server.py) hands incoming requests to `handle`. A committed record is
one below the high watermark; it is on a majority of voters, each of which flushed it,
and a voter only grants its vote to a candidate whose log is at least as up to date as
its own, so every later leader has it. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.raft import raft_messages as msg
from logbus.raft.metadata_log import ReplicatedLog
from logbus.raft.quorum_config import QuorumConfig
from logbus.raft.quorum_state import NO_ID, ElectionState, QuorumStateFile, Role
from logbus.raft.snapshots import SnapshotId
from logbus.records.batch import iter_batches
from logbus.records.reader import decode_batch
from logbus.storage.errors import CorruptSnapshotError

__all__ = ["NotLeaderError", "RaftClient", "ReplicaProgress"]

logger = logging.getLogger(__name__)


class NotLeaderError(Exception):
    """An append was asked of a voter that is not the leader (or stopped being it)."""


@dataclass
class ReplicaProgress:
    """What the leader knows of one replica's log (DescribeQuorum)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class RaftClient:
    """One voter: its election state, its log, its peers and the task of its role.
    `start()` then `close()`; `append` and `wait_committed` for the state machine above."""

    def __init__(self, config: QuorumConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.voters = sorted(config.voters)
        self.state_file = QuorumStateFile(config.metadata_log_dir, config.cluster_id, self.voters)
        self.state = ElectionState()
        self.log: ReplicatedLog | None = None
        self.progress: dict[int, ReplicaProgress] = {}
        self.epoch_start_offset = 0
        self._votes: set[int] = set()
        self._role_task: asyncio.Task[None] | None = None
        self._generation = 0
        self._peers: dict[int, Connection] = {}
        self._changed = asyncio.Event()
        self._closed = False
        self._fetch_deadline = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._warned: set[tuple[int, ErrorCode]] = set()

    # --- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        self.config.metadata_log_dir.mkdir(parents=True, exist_ok=True)
        self.log = ReplicatedLog(self.config.metadata_log_dir)
        state = self.state_file.read()
        if state.role is Role.FOLLOWER and state.leader_id == self.node_id:
            # It led this epoch before a restart: it must never lead it again.
            state = ElectionState(state.epoch, Role.RESIGNED, self.node_id, state.voted_id)
        self.state = state
        logger.info(
            "raft node %d starts as %s in epoch %d", self.node_id, state.role.value, state.epoch
        )
        self._start_role()

    async def close(self, *, graceful: bool = True) -> None:
        """Stop; a leader first tells the others (EndQuorumEpoch) so they elect sooner,
        unless `graceful` is False (a crash, as tests stage it)."""
        if self._closed:
            return
        if graceful and self.state.role is Role.LEADER:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self.config.request_timeout_ms / 1000):
                    await self._send_end_quorum_epoch()
        self._closed = True
        self._generation += 1
        tasks = [t for t in (self._role_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for conn in self._peers.values():
            await conn.close()
        self._peers.clear()
        if self.log is not None:
            self.log.close()

    # --- what the state machine above uses -----------------------------------------

    @property
    def metadata_log(self) -> ReplicatedLog:
        assert self.log is not None, "RaftClient.start() was not called"
        return self.log

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id if self.state.role in (Role.LEADER, Role.FOLLOWER) else NO_ID

    @property
    def is_leader(self) -> bool:
        return self.state.role is Role.LEADER

    @property
    def high_watermark(self) -> int:
        return self.metadata_log.high_watermark

    def append(self, values: Sequence[bytes]) -> int:
        """Append records as leader; the offset of the last one. NotLeaderError elsewhere."""
        if self.state.role is not Role.LEADER:
            raise NotLeaderError(f"node {self.node_id} is not the leader (leader {self.leader_id})")
        _, last = self.metadata_log.append_as_leader(values, self.state.epoch)
        self.update_high_watermark()
        self._notify()
        return last

    async def wait_committed(self, offset: int, timeout: float) -> None:  # noqa: ASYNC109
        """Wait until `offset` is below the high watermark. NotLeaderError if this voter
        loses the epoch first (the record may or may not become committed)."""
        epoch = self.state.epoch
        async with asyncio.timeout(timeout):
            while self.high_watermark <= offset:
                if self.state.epoch != epoch or self.state.role is not Role.LEADER:
                    raise NotLeaderError(f"node {self.node_id} lost epoch {epoch}")
                await self.wait_change()

    def committed_values(self) -> list[bytes]:
        """Every committed data record: the latest snapshot's, then the log's below the
        high watermark (control records left out)."""
        log = self.metadata_log
        values = log.snapshot_values()
        offset = log.start_offset
        while offset < log.high_watermark:
            data = log.read(offset, 1024 * 1024)
            if not data:
                break
            view = memoryview(data)
            for position, header in iter_batches(data):
                if header.base_offset >= log.high_watermark:
                    return values
                _, records = decode_batch(view[position : position + header.size])
                if not header.is_control:
                    values += [
                        bytes(r.value or b"") for r in records if r.offset < log.high_watermark
                    ]
                offset = header.next_offset
        return values

    def create_snapshot(self, end_offset: int, values: Sequence[bytes]) -> SnapshotId:
        """Write a `.checkpoint` holding the state below `end_offset` (committed)."""
        return self.metadata_log.create_snapshot(end_offset, values)

    # --- transitions ----------------------------------------------------------------

    def transition(self, state: ElectionState) -> None:
        """Persist and enter a new state; the old role's task ends."""
        if state == self.state:
            return
        logger.info(
            "raft node %d: %s epoch %d -> %s epoch %d (leader %d, voted %d)",
            self.node_id, self.state.role.value, self.state.epoch, state.role.value,
            state.epoch, state.leader_id, state.voted_id,
        )  # fmt: skip
        if state.role is not Role.RESIGNED:
            self.state_file.write(state)
        self.state = state
        self._start_role()
        self._notify()

    def _start_role(self) -> None:
        self._generation += 1
        old, current = self._role_task, asyncio.current_task()
        if old is not None and old is not current:
            old.cancel()
        role = self.state.role
        runner: Callable[[int], Coroutine[Any, Any, None]] = {
            Role.UNATTACHED: self._await_election,
            Role.VOTED: self._await_election,
            Role.RESIGNED: self._await_election,
            Role.CANDIDATE: self._run_candidacy,
            Role.LEADER: self._lead,
            Role.FOLLOWER: self._follow,
        }[role]
        self._role_task = asyncio.get_running_loop().create_task(
            self._guarded(runner, self._generation), name=f"raft-{self.node_id}-{role.value}"
        )

    async def _guarded(
        self, runner: Callable[[int], Coroutine[Any, Any, None]], generation: int
    ) -> None:
        """Run a role; an unexpected error (a bad answer from a peer, a storage error) is
        logged and the role starts again, so the voter never stops taking part."""
        try:
            await runner(generation)
        except Exception:
            logger.exception("raft node %d: %s failed", self.node_id, self.state.role.value)
            await asyncio.sleep(0.1)
            if self._alive(generation):
                self._start_role()

    def observe_epoch(self, epoch: int, leader_id: int) -> bool:
        """A peer spoke of `epoch` (and maybe its leader): move to it if it is newer, or
        follow a leader newly learned in the current epoch. True if anything changed."""
        state = self.state
        if epoch > state.epoch:
            if leader_id not in (NO_ID, self.node_id):
                self.transition(state.to(Role.FOLLOWER, epoch, leader_id=leader_id))
            else:
                self.transition(state.to(Role.UNATTACHED, epoch))
            return True
        if (
            epoch == state.epoch
            and leader_id not in (NO_ID, self.node_id)
            and state.role not in (Role.LEADER, Role.FOLLOWER)
        ):
            self.transition(state.to(Role.FOLLOWER, epoch, leader_id=leader_id))
            return True
        return False

    def election_timeout(self) -> float:
        base = self.config.election_timeout_ms / 1000
        return base + random.random() * base

    def _alive(self, generation: int) -> bool:
        return generation == self._generation and not self._closed

    # --- roles ----------------------------------------------------------------------

    async def _await_election(self, generation: int) -> None:
        if not self.config.is_voter:
            while self._alive(generation):
                await self._discover_leader(generation)
                await asyncio.sleep(self.config.election_timeout_ms / 2000)
            return
        await asyncio.sleep(self.election_timeout())
        if self._alive(generation):
            self._become_candidate()

    async def _discover_leader(self, generation: int) -> None:
        """An observer asks each voter in turn (a Fetch: the answer names the leader and
        its epoch, which moves this node to follow it) until the role changes."""
        for voter in self.voters:
            if not self._alive(generation):
                return
            await self._fetch_once(generation, target=voter)

    def _become_candidate(self) -> None:
        state = self.state
        self._votes = {self.node_id}
        self.transition(state.to(Role.CANDIDATE, state.epoch + 1, voted_id=self.node_id))

    async def _run_candidacy(self, generation: int) -> None:
        if len(self._votes) >= self.config.majority:
            self._become_leader()
            return
        log = self.metadata_log
        body = msg.vote_request(
            self.config.cluster_id, self.state.epoch, self.node_id,
            log.last_fetched_epoch, log.end_offset,
        )  # fmt: skip
        for voter in self.voters:
            if voter != self.node_id:
                self._spawn(self._ask_vote(voter, body, generation))
        await asyncio.sleep(self.election_timeout())
        if self._alive(generation):
            backoff = random.random() * self.config.election_backoff_max_ms / 1000
            await asyncio.sleep(backoff)
            if self._alive(generation):
                self._become_candidate()

    async def _ask_vote(self, voter: int, body: dict[str, Any], generation: int) -> None:
        while self._alive(generation):
            response = await self._request(voter, ApiKey.VOTE, body)
            if response is not None:
                break
            await asyncio.sleep(self.config.election_timeout_ms / 4000)
        else:
            return
        if not self._alive(generation):
            return
        part = msg.only_partition(response)
        if response.get("error_code") or part is None:
            return
        if self.observe_epoch(part["leader_epoch"], part["leader_id"]):
            return
        if part["error_code"] == ErrorCode.NONE and part["vote_granted"]:
            self._votes.add(voter)
            if len(self._votes) >= self.config.majority and self.state.role is Role.CANDIDATE:
                self._become_leader()

    def _become_leader(self) -> None:
        state = self.state
        log = self.metadata_log
        now = _now_ms()
        self.progress = {v: ReplicaProgress() for v in self.voters}
        self.progress[self.node_id] = ReplicaProgress(log.end_offset, now, now)
        self.transition(
            state.to(Role.LEADER, state.epoch, leader_id=self.node_id, voted_id=state.voted_id)
        )
        self.epoch_start_offset = log.append_leader_change(
            state.epoch, self.node_id, self.voters, sorted(self._votes)
        )
        self.update_high_watermark()

    async def _lead(self, generation: int) -> None:
        for voter in self.voters:
            if voter != self.node_id:
                self._spawn(self._announce_leadership(voter, generation))
        window_ms = self.config.fetch_timeout_ms * 3 // 2
        started = _now_ms()
        while self._alive(generation):
            await asyncio.sleep(window_ms / 4000)
            if not self._alive(generation):
                return
            now = _now_ms()
            if now - started < window_ms:
                continue
            heard = sum(
                1
                for voter, p in self.progress.items()
                if voter == self.node_id or now - p.last_fetch_ms <= window_ms
            )
            if heard < self.config.majority:
                logger.warning(
                    "raft node %d resigns epoch %d: heard from %d of %d voters within %d ms",
                    self.node_id, self.state.epoch, heard, len(self.voters), window_ms,
                )  # fmt: skip
                self._resign()
                return

    def _resign(self) -> None:
        state = self.state
        self.transition(
            state.to(Role.RESIGNED, state.epoch, leader_id=self.node_id, voted_id=state.voted_id)
        )
        self._spawn(self._send_end_quorum_epoch())

    async def _announce_leadership(self, voter: int, generation: int) -> None:
        """BeginQuorumEpoch until the voter answers (or fetches from us)."""
        body = msg.begin_quorum_epoch_request(
            self.config.cluster_id, self.node_id, self.state.epoch
        )
        while self._alive(generation) and self.progress[voter].last_fetch_ms < 0:
            response = await self._request(voter, ApiKey.BEGIN_QUORUM_EPOCH, body)
            if response is not None and self._alive(generation):
                part = msg.only_partition(response)
                if part is not None and self.observe_epoch(part["leader_epoch"], part["leader_id"]):
                    return
                if part is not None and part["error_code"] == ErrorCode.NONE:
                    return
            await asyncio.sleep(self.config.election_timeout_ms / 4000)

    async def _send_end_quorum_epoch(self) -> None:
        log_ends = {v: p.end_offset for v, p in self.progress.items() if v != self.node_id}
        successors = sorted(log_ends, key=lambda v: -log_ends[v])
        body = msg.end_quorum_epoch_request(
            self.config.cluster_id, self.node_id, self.state.epoch, successors
        )
        await asyncio.gather(
            *(self._request(v, ApiKey.END_QUORUM_EPOCH, body) for v in successors),
            return_exceptions=True,
        )

    async def _follow(self, generation: int) -> None:
        self.reset_fetch_deadline()
        while self._alive(generation):
            if time.monotonic() >= self._fetch_deadline:
                logger.info(
                    "raft node %d: no fetch from leader %d for %d ms",
                    self.node_id, self.state.leader_id, self.config.fetch_timeout_ms,
                )  # fmt: skip
                if self.config.is_voter:
                    self._become_candidate()
                    return
                await self._discover_leader(generation)
                self.reset_fetch_deadline()
                continue
            ok = await self._fetch_once(generation)
            if not ok and self._alive(generation):
                await asyncio.sleep(min(0.05, self.config.fetch_timeout_ms / 10000))

    def reset_fetch_deadline(self, delay_ms: int | None = None) -> None:
        wait = self.config.fetch_timeout_ms if delay_ms is None else delay_ms
        self._fetch_deadline = time.monotonic() + wait / 1000

    async def _fetch_once(self, generation: int, *, target: int | None = None) -> bool:
        """One Fetch from the leader (or, for an observer looking for it, `target`);
        whether it succeeded."""
        log = self.metadata_log
        body = msg.fetch_request(
            self.config.cluster_id, self.node_id, self.state.epoch,
            log.end_offset, log.last_fetched_epoch, self.config.fetch_max_wait_ms,
        )  # fmt: skip
        response = await self._request(
            self.state.leader_id if target is None else target, ApiKey.FETCH, body,
            timeout_ms=self.config.fetch_max_wait_ms + self.config.request_timeout_ms,
        )  # fmt: skip
        if response is None or not self._alive(generation):
            return False
        part = msg.only_partition(response, "responses")
        if response.get("error_code") or part is None:
            return False
        leader = part.get("current_leader") or {}
        if self.observe_epoch(leader.get("leader_epoch", -1), leader.get("leader_id", NO_ID)):
            return False
        if part["error_code"] != ErrorCode.NONE:
            return False
        self.reset_fetch_deadline()
        diverging = part.get("diverging_epoch")
        snapshot = part.get("snapshot_id")
        if diverging is not None and diverging.get("epoch", -1) >= 0:
            self._truncate_to_diverging(diverging["epoch"], diverging["end_offset"])
        elif snapshot is not None and snapshot.get("end_offset", -1) >= 0:
            await self._fetch_snapshot(
                SnapshotId(snapshot["end_offset"], snapshot["epoch"]), generation
            )
        else:
            records = part.get("records")
            if records:
                log.append_as_follower(bytes(records))
            log.set_high_watermark(part["high_watermark"])
            self._notify()
        return True

    def _truncate_to_diverging(self, epoch: int, end_offset: int) -> None:
        log = self.metadata_log
        local = log.end_offset_for_epoch(epoch)
        target = min(local.end_offset, end_offset) if local.epoch == epoch else local.end_offset
        if target < log.high_watermark:
            # Committed records never go; a leader asking for it is a bug.
            logger.error(
                "raft node %d refuses to truncate to %d below its high watermark %d",
                self.node_id, target, log.high_watermark,
            )  # fmt: skip
            target = log.high_watermark
        logger.info(
            "raft node %d truncates its log to %d (diverging epoch %d)", self.node_id, target, epoch
        )
        log.truncate_to(target)

    async def _fetch_snapshot(self, snapshot_id: SnapshotId, generation: int) -> None:
        chunks: list[bytes] = []
        position = 0
        while self._alive(generation):
            body = msg.fetch_snapshot_request(
                self.config.cluster_id, self.node_id, self.state.epoch,
                snapshot_id.end_offset, snapshot_id.epoch, position,
            )  # fmt: skip
            response = await self._request(self.state.leader_id, ApiKey.FETCH_SNAPSHOT, body)
            part = None if response is None else msg.only_partition(response)
            if part is None or part["error_code"] != ErrorCode.NONE:
                return
            data = bytes(part.get("unaligned_records") or b"")
            chunks.append(data)
            position += len(data)
            if position >= part["size"] or not data:
                break
        if self._alive(generation):
            logger.info(
                "raft node %d installs snapshot %s from the leader", self.node_id, snapshot_id
            )
            try:
                self.metadata_log.install_snapshot(snapshot_id, b"".join(chunks))
            except CorruptSnapshotError as exc:
                logger.warning(
                    "raft node %d refuses snapshot %s: %s", self.node_id, snapshot_id, exc
                )
                return
            self._notify()

    # --- the high watermark -----------------------------------------------------------

    def update_high_watermark(self) -> None:
        """The largest offset a majority of voters has (the leader counts its own log),
        once it is past the start of this epoch."""
        log = self.metadata_log
        self.progress[self.node_id].end_offset = log.end_offset
        ends = sorted((self.progress[v].end_offset for v in self.voters), reverse=True)
        candidate = ends[self.config.majority - 1]
        if candidate > self.epoch_start_offset and candidate > log.high_watermark:
            log.set_high_watermark(candidate)
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        event = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()

    # --- peers ----------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(
        self, node_id: int, api_key: ApiKey, body: dict[str, Any], *, timeout_ms: int | None = None
    ) -> dict[str, Any] | None:
        """Send one request to a voter; None when it cannot be reached in time."""
        address = self.config.voters.get(node_id)
        if address is None or self._closed:
            return None
        timeout = (timeout_ms or self.config.request_timeout_ms) / 1000
        try:
            conn = self._peers.get(node_id)
            if conn is None or conn.closed:
                fresh = await Connection.connect(
                    address.host, address.port, client_id=f"raft-{self.node_id}",
                    connect_timeout=timeout, request_timeout=timeout,
                )  # fmt: skip
                conn = self._peers.get(node_id)
                if self._closed or (conn is not None and not conn.closed):
                    # Closed while connecting, or another task connected first: one
                    # connection per peer, none left open behind.
                    await fresh.close()
                    if self._closed or conn is None:
                        return None
                else:
                    self._peers[node_id] = conn = fresh
            response = await conn.request(
                api_key, body, max_version=msg.RAFT_API_VERSIONS[api_key][1],
                response_timeout=timeout,
            )  # fmt: skip
            self._warn_if_inconsistent(node_id, response)
            return response
        except (KafkaError, OSError) as exc:
            logger.debug(
                "raft node %d: %s to %d failed: %s", self.node_id, api_key.name, node_id, exc
            )
            return None

    def _warn_if_inconsistent(self, node_id: int, response: dict[str, Any]) -> None:
        """A peer of another cluster, or with another voter set, is a configuration
        mistake that elections cannot fix: say so (once per peer and error)."""
        part = msg.only_partition(response, "responses" if "responses" in response else "topics")
        codes = {response.get("error_code", 0), (part or {}).get("error_code", 0)}
        for code, setting in (
            (ErrorCode.INCONSISTENT_CLUSTER_ID, "its cluster.id (meta.properties)"),
            (ErrorCode.INCONSISTENT_VOTER_SET, "controller.quorum.voters"),
        ):
            if code in codes and (node_id, code) not in self._warned:
                self._warned.add((node_id, code))
                logger.error(
                    "raft node %d: voter %d answered %s: check %s on every controller",
                    self.node_id, node_id, code.name, setting,
                )  # fmt: skip

    # --- requests from peers (raft_handlers.py) ------------------------------------

    def check_cluster(self, cluster_id: object) -> bool:
        return cluster_id in (None, self.config.cluster_id)

    def grant_vote(self, candidate: int) -> None:
        """Vote for `candidate` in the current epoch (persisted before the answer)."""
        self.transition(self.state.to(Role.VOTED, self.state.epoch, voted_id=candidate))

    def follower_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A voter fetched from this leader at `fetch_offset`: it has everything below."""
        if replica_id < 0:
            return  # an anonymous fetcher: nothing to track
        progress = self.progress.get(replica_id)
        if progress is None:
            progress = self.progress[replica_id] = ReplicaProgress()
        now = _now_ms()
        progress.last_fetch_ms = now
        progress.end_offset = fetch_offset
        if fetch_offset >= self.metadata_log.end_offset:
            progress.last_caught_up_ms = now
        if replica_id in self.config.voters:
            self.update_high_watermark()

    def leader_resigned(self, successors: Sequence[int]) -> None:
        """The leader of this epoch stepped down (EndQuorumEpoch): stand sooner, the
        preferred successors first."""
        rank = (
            list(successors).index(self.node_id) if self.node_id in successors else len(successors)
        )
        delay = int(rank * self.config.election_timeout_ms / 4 + random.random() * 50)
        if self.state.role is Role.FOLLOWER:
            self.reset_fetch_deadline(delay)
