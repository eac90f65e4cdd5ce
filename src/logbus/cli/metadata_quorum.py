"""`logbus metadata-quorum`: the state of the KRaft quorum, printed as Kafka's
`kafka-metadata-quorum` prints it.

    logbus metadata-quorum --bootstrap-controller HOST:PORT[,...] describe --status
    logbus metadata-quorum --bootstrap-controller HOST:PORT[,...] describe --replication

DescribeQuorum is answered by the leader of the quorum: the controllers given are asked
(DescribeCluster) which one is active, then that one answers.
"""

from __future__ import annotations

import argparse
from typing import Any

from logbus.cli.common import CommandError, bootstrap_servers, run
from logbus.client.connection import Connection, parse_bootstrap
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.raft import raft_messages as msg


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "metadata-quorum", help="describe the KRaft quorum (kafka-metadata-quorum)"
    )
    parser.add_argument(
        "--bootstrap-controller",
        type=bootstrap_servers,
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="controllers to ask (their controller listeners)",
    )
    actions = parser.add_subparsers(dest="quorum_command", metavar="ACTION", required=True)
    describe = actions.add_parser("describe", help="describe the quorum")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="the leader, epoch and voters")
    what.add_argument("--replication", action="store_true", help="each replica's progress")
    describe.set_defaults(func=lambda args: run(_describe(args)))


CONTROLLER_ENDPOINTS = 2  # DescribeCluster's endpoint type of controllers (KIP-919)
CONNECT_TIMEOUT = 5.0


async def _ask(host: str, port: int, api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    conn = await Connection.connect(
        host, port, client_id="logbus-metadata-quorum", connect_timeout=CONNECT_TIMEOUT,
        request_timeout=CONNECT_TIMEOUT,
    )  # fmt: skip
    try:
        return await conn.request(api_key, body)
    finally:
        await conn.close()


async def _leader_address(host: str, port: int) -> tuple[str, tuple[str, int] | None]:
    """(cluster id, the active controller's address if this controller knows it)."""
    cluster = await _ask(
        host, port, ApiKey.DESCRIBE_CLUSTER, {"endpoint_type": CONTROLLER_ENDPOINTS}
    )
    leader = cluster.get("controller_id", -1)
    for node in cluster.get("brokers") or ():
        if node["broker_id"] == leader:
            return cluster.get("cluster_id", ""), (node["host"], node["port"])
    return cluster.get("cluster_id", ""), None


async def describe_quorum(bootstrap: str) -> tuple[str, dict[str, Any]]:
    """(cluster id, the leader's DescribeQuorum partition): each controller given is
    asked which one is active (DescribeCluster), and that one is asked; CommandError when
    no leader answers."""
    problems = []
    for host, port in parse_bootstrap(bootstrap):
        cluster_id = ""
        targets = [(host, port)]
        try:
            cluster_id, leader = await _leader_address(host, port)
            if leader is not None and leader != (host, port):
                targets.insert(0, leader)
        except KafkaError as exc:
            problems.append(str(exc))
            continue
        for target in targets:
            try:
                response = await _ask(
                    *target, ApiKey.DESCRIBE_QUORUM, msg.describe_quorum_request()
                )
            except KafkaError as exc:
                problems.append(str(exc))
                continue
            part = msg.only_partition(response)
            error = ErrorCode(response.get("error_code") or (part or {}).get("error_code", 0))
            if part is not None and error == ErrorCode.NONE:
                return cluster_id, part
            leader_id = -1 if part is None else part.get("leader_id", -1)
            problems.append(f"{target[0]}:{target[1]} answered {error.name} (leader {leader_id})")
    raise CommandError("no controller given is the quorum's leader: " + "; ".join(problems))


def status_lines(cluster_id: str, part: dict[str, Any]) -> list[str]:
    voters = part.get("current_voters") or []
    observers = part.get("observers") or []
    leader_id = part["leader_id"]
    by_id = {r["replica_id"]: r for r in [*voters, *observers]}
    leader = by_id.get(leader_id, {"log_end_offset": -1, "last_caught_up_timestamp": -1})
    followers = [r for r in [*voters, *observers] if r["replica_id"] != leader_id]
    max_lag = max((leader["log_end_offset"] - r["log_end_offset"] for r in followers), default=0)
    caught_up = [r["last_caught_up_timestamp"] for r in followers]
    lag_time = (
        leader["last_caught_up_timestamp"] - min(caught_up)
        if caught_up and min(caught_up) >= 0
        else -1
    )
    rows = [
        ("ClusterId:", cluster_id),
        ("LeaderId:", leader_id),
        ("LeaderEpoch:", part["leader_epoch"]),
        ("HighWatermark:", part["high_watermark"]),
        ("MaxFollowerLag:", max_lag),
        ("MaxFollowerLagTimeMs:", lag_time),
        ("CurrentVoters:", "[" + ",".join(str(r["replica_id"]) for r in voters) + "]"),
        ("CurrentObservers:", "[" + ",".join(str(r["replica_id"]) for r in observers) + "]"),
    ]
    return [f"{name:<24}{value}" for name, value in rows]


def replication_lines(part: dict[str, Any]) -> list[str]:
    voters = part.get("current_voters") or []
    observers = part.get("observers") or []
    leader_id = part["leader_id"]
    leader_end = next((r["log_end_offset"] for r in voters if r["replica_id"] == leader_id), -1)
    header = [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    ordered = sorted(voters, key=lambda r: r["replica_id"] != leader_id)
    rows = [header]
    for replica, status in [
        *((r, "Leader" if r["replica_id"] == leader_id else "Follower") for r in ordered),
        *((r, "Observer") for r in observers),
    ]:
        rows.append(
            [
                str(replica["replica_id"]),
                str(replica["log_end_offset"]),
                str(max(0, leader_end - replica["log_end_offset"])),
                str(replica["last_fetch_timestamp"]),
                str(replica["last_caught_up_timestamp"]),
                status,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return [
        "\t".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


async def _describe(args: argparse.Namespace) -> int:
    cluster_id, part = await describe_quorum(args.bootstrap_controller)
    lines = status_lines(cluster_id, part) if args.status else replication_lines(part)
    for line in lines:
        print(line)
    return 0
