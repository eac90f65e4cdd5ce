"""KRaft mode of `logbus cluster up` (its default): N nodes, no ZooKeeper.

Node N is combined (`process.roles=broker,controller`) when it is a voter of the
metadata quorum, else a broker (`process.roles=broker`). The voters are the first V
nodes, V the largest odd number at most min(N, 5): Kafka recommends 3 or 5 controllers,
since a majority must be up and an even count waits for one more node without surviving
more failures (4 voters, like 3, survive one). Each node has a client listener
(`PLAINTEXT://localhost:<base-port + N>`) and a voter a controller listener
(`CONTROLLER://localhost:<controller-base-port + N>`).

The storage of every node is formatted in process with one generated cluster id (what
`logbus storage format` does) the first time; a node whose directories are already
formatted keeps them, and the next `cluster up` on the same data dir reuses the cluster id
it finds there. Data of a ZooKeeper-mode cluster (version 0 `meta.properties`) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from logbus.common.config_def import ConfigError
from logbus.server.config.broker_config import BrokerConfig
from logbus.storage.errors import KafkaStorageError
from logbus.storage.formatter import FormatterError, format_directories, random_uuid
from logbus.storage.meta_properties import read_meta_properties

DEFAULT_CONTROLLER_BASE_PORT = 19092
CONTROLLER_LISTENER = "CONTROLLER"
MAX_VOTERS = 5


class KRaftSetupError(Exception):
    """The nodes' storage cannot be prepared (the message says why)."""


def voter_count(nodes: int) -> int:
    """How many of `nodes` vote in the metadata quorum: odd, at most 5."""
    count = min(nodes, MAX_VOTERS)
    return count if count % 2 else count - 1


def quorum_voters(nodes: int, controller_base_port: int) -> str:
    """`controller.quorum.voters` of a cluster of `nodes`: `id@localhost:port,...`."""
    return ",".join(
        f"{node}@localhost:{controller_base_port + node}" for node in range(voter_count(nodes))
    )


def kraft_node_properties(
    node_id: int,
    nodes: int,
    port: int,
    controller_base_port: int,
    log_dir: Path,
) -> dict[str, str]:
    """The KRaft settings of node `node_id` (before the settings both modes share)."""
    voter = node_id < voter_count(nodes)
    listeners = [f"PLAINTEXT://localhost:{port}"]
    if voter:
        listeners.append(f"{CONTROLLER_LISTENER}://localhost:{controller_base_port + node_id}")
    return {
        "process.roles": "broker,controller" if voter else "broker",
        "node.id": str(node_id),
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
        "controller.listener.names": CONTROLLER_LISTENER,
        "controller.quorum.voters": quorum_voters(nodes, controller_base_port),
        "log.dirs": str(log_dir),
    }


def _existing_cluster_id(configs: list[BrokerConfig]) -> str | None:
    """The cluster id the nodes' directories already hold (None: none is formatted)."""
    for config in configs:
        assert config.kraft is not None
        for directory in [*config.log_dirs, config.kraft.metadata_log_dir]:
            try:
                meta = read_meta_properties(Path(directory))
            except KafkaStorageError as exc:
                raise KRaftSetupError(str(exc)) from exc
            if meta is None:
                continue
            if meta.version == 0 or meta.cluster_id is None:
                raise KRaftSetupError(
                    f"{directory} holds a ZooKeeper-mode broker's data; run "
                    "`logbus cluster up --mode zookeeper`, or choose another --data-dir"
                )
            return meta.cluster_id
    return None


def format_storage(node_properties: Sequence[Mapping[str, str]]) -> tuple[str, list[str]]:
    """Format every node's directories not formatted yet, with the cluster id already
    there or a new one; (the cluster id, the lines saying what was formatted)."""
    try:
        configs = [BrokerConfig.from_properties(dict(props)) for props in node_properties]
    except ConfigError as exc:
        raise KRaftSetupError(str(exc)) from exc
    cluster_id = _existing_cluster_id(configs) or random_uuid()
    lines: list[str] = []
    for config in configs:
        assert config.kraft is not None
        try:
            done = format_directories(
                config.log_dirs,
                config.kraft.metadata_log_dir,
                cluster_id=cluster_id,
                node_id=config.kraft.node_id,
                ignore_formatted=True,
            )
        except FormatterError as exc:
            raise KRaftSetupError(str(exc)) from exc
        lines += [line for line in done if line.startswith("Formatting")]
    return cluster_id, lines
