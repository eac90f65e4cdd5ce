"""The log dir moves of `logbus reassign-partitions`: a reassignment document whose
`log_dirs` name paths moves those replicas between their brokers' log dirs
(AlterReplicaLogDirs, KIP-113), as kafka-reassign-partitions does.

`--execute` asks each broker to move its replicas after the partition moves started; a
replica the broker does not hold yet (it is being added) answers REPLICA_NOT_AVAILABLE
and is asked again until `--timeout` ms have passed. `--verify` describes the brokers'
log dirs and tells, per replica, whether it is in its target dir, still copying (a
future log there), or neither, in Kafka's words.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from logbus.cli.common import CommandError
from logbus.cli.reassignment_json import ReplicaLogDir
from logbus.client.admin import Admin, AdminBatchError
from logbus.client.errors import KafkaError
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

_RETRY_S = 0.5


async def start_log_dir_moves(
    admin: Admin, moves: Mapping[ReplicaLogDir, str], timeout_ms: int
) -> None:
    """Send every move, again for the replicas not created yet, until `timeout_ms`; a
    CommandError naming the replicas that failed otherwise."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            await admin.alter_replica_log_dirs(
                {(r.topic, r.partition, r.broker): path for r, path in pending.items()}
            )
            return
        except AdminBatchError as exc:
            failed = {ReplicaLogDir(*key): error for key, error in exc.errors.items()}
        not_yet = {r for r, e in failed.items() if _code(e) == ErrorCode.REPLICA_NOT_AVAILABLE}
        if failed.keys() - not_yet or time.monotonic() > deadline:
            lines = [f"{r}: {failed[r]}" for r in sorted(failed)]
            raise CommandError("Error moving replica log directories:\n" + "\n".join(lines))
        pending = {r: pending[r] for r in not_yet}
        await asyncio.sleep(_RETRY_S)


def _code(error: object) -> int | None:
    return error.code if isinstance(error, KafkaError) else None


async def log_dir_move_states(
    admin: Admin, moves: Mapping[ReplicaLogDir, str]
) -> dict[ReplicaLogDir, tuple[bool, str]]:
    """Per replica: whether its move completed, and the line kafka-reassign-partitions
    prints for it."""
    brokers = sorted({r.broker for r in moves})
    partitions = sorted({TopicPartition(r.topic, r.partition) for r in moves})
    try:
        described = await admin.describe_log_dirs(brokers, partitions=partitions)
    except AdminBatchError as exc:
        raise CommandError(f"Cannot describe the log dirs of broker(s) {exc}") from None
    states: dict[ReplicaLogDir, tuple[bool, str]] = {}
    for replica, target in sorted(moves.items()):
        tp = TopicPartition(replica.topic, replica.partition)
        current = future = None
        for path, log_dir in described.get(replica.broker, {}).items():
            info = log_dir.replicas.get(tp)
            if info is not None and info.is_future:
                future = path
            elif info is not None:
                current = path
        states[replica] = _state(replica, target, current, future)
    return states


def _state(
    replica: ReplicaLogDir, target: str, current: str | None, future: str | None
) -> tuple[bool, str]:
    name = f"{replica.topic}-{replica.partition}"
    if future is not None:
        if future == target:
            return False, f"Reassignment of replica {replica} is still in progress."
        return False, (
            f"Partition {name} on broker {replica.broker} is being moved to log dir {future} "
            f"instead of {target}."
        )
    if current is None:
        return False, (
            f"Partition {name} cannot be found in any live log directory on broker "
            f"{replica.broker}."
        )
    if current == target:
        return True, f"Reassignment of replica {replica} completed successfully."
    return False, (
        f"Partition {name} on broker {replica.broker} is not being moved from log dir "
        f"{current} to {target}."
    )
