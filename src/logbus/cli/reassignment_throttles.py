"""The replication throttles `logbus reassign-partitions` sets and clears, as
kafka-reassign-partitions does.

`--execute --throttle R` sets `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` to R on every broker of the moving partitions
(dynamic broker configs), and on each topic `leader.replication.throttled.replicas` (the
moving partitions' current replicas, which may lead the copy) and
`follower.replication.throttled.replicas` (the replicas being added), as
`partition:broker` lists. `--replica-alter-log-dirs-throttle R` sets
`replica.alter.log.dirs.io.max.bytes.per.second` to R on the brokers of the log dir moves
(the copy into a future log). `--verify` (once every move completed) and `--cancel`
remove them all, unless `--preserve-throttles`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from logbus.client.admin import Admin
from logbus.client.admin.types import AlterConfigOp, AlterConfigOpType, ConfigResource, ResourceType
from logbus.types import TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def throttle_rate(text: str) -> int:
    """--throttle's value: bytes per second, a positive whole number."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a rate in bytes/s: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"the throttle must be positive: {text!r}")
    return value


def throttled_replicas(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> dict[str, tuple[str, str]]:
    """Per topic, the leader and follower throttled-replica lists of its moving
    partitions ("0:1,0:2" ...), as kafka-reassign-partitions computes them."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp, target in sorted(proposed.items()):
        existing = list(current.get(tp, ()))
        if list(target) == existing:
            continue
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in existing)
        followers.setdefault(tp.topic, []).extend(
            f"{tp.partition}:{b}" for b in target if b not in existing
        )
    return {
        topic: (",".join(leaders[topic]), ",".join(followers.get(topic, [])))
        for topic in leaders
    }


async def add_throttles(
    admin: Admin,
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
    rate: int,
) -> None:
    """Set the throttle rate on the brokers of the moves and the throttled replicas on
    their topics."""
    brokers = sorted({b for rs in (*current.values(), *proposed.values()) for b in rs})
    changes: dict[ConfigResource, list[AlterConfigOp]] = {
        ConfigResource(ResourceType.BROKER, str(b)): [
            AlterConfigOp(LEADER_RATE, str(rate)),
            AlterConfigOp(FOLLOWER_RATE, str(rate)),
        ]
        for b in brokers
    }
    for topic, (leader_list, follower_list) in throttled_replicas(current, proposed).items():
        ops = [AlterConfigOp(LEADER_REPLICAS, leader_list)]
        if follower_list:
            ops.append(AlterConfigOp(FOLLOWER_REPLICAS, follower_list))
        changes[ConfigResource(ResourceType.TOPIC, topic)] = ops
    await admin.incremental_alter_configs(changes)


async def add_log_dir_throttle(admin: Admin, brokers: Sequence[int], rate: int) -> None:
    """Cap the copy of replicas between log dirs on `brokers` at `rate` bytes/s."""
    await admin.incremental_alter_configs({
        ConfigResource(ResourceType.BROKER, str(b)): [AlterConfigOp(LOG_DIR_RATE, str(rate))]
        for b in sorted(set(brokers))
    })  # fmt: skip


async def clear_throttles(admin: Admin, topics: Sequence[str]) -> None:
    """Remove the throttles from every broker and from `topics`, saying so."""
    described = await admin.describe_cluster()
    brokers = sorted(int(node.node_id) for node in described.nodes)
    print(
        f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
        f"{','.join(map(str, brokers))}"
    )
    delete = AlterConfigOpType.DELETE
    changes: dict[ConfigResource, list[AlterConfigOp]] = {
        ConfigResource(ResourceType.BROKER, str(b)): [
            AlterConfigOp(LEADER_RATE, None, delete),
            AlterConfigOp(FOLLOWER_RATE, None, delete),
            AlterConfigOp(LOG_DIR_RATE, None, delete),
        ]
        for b in brokers
    }
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          f"{','.join(topics)}")  # fmt: skip
    for topic in topics:
        changes[ConfigResource(ResourceType.TOPIC, topic)] = [
            AlterConfigOp(LEADER_REPLICAS, None, delete),
            AlterConfigOp(FOLLOWER_REPLICAS, None, delete),
        ]
    await admin.incremental_alter_configs(changes)
