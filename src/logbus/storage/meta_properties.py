"""`meta.properties` of a log dir: the ZooKeeper-era format (version 0) and KRaft's
(version 1, written by `logbus storage format`).

A Java properties file. Version 0: "version=0", "broker.id=<id>" and, once known,
"cluster.id=<id>". Version 1: "version=1", "cluster.id", "node.id" and "directory.id" (a
Kafka Uuid naming this directory). Comment lines start with '#' or '!'.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from logbus.storage.checkpoint import write_atomically
from logbus.storage.errors import InconsistentBrokerMetadataError, KafkaStorageError

META_PROPERTIES_FILE = "meta.properties"


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """One log dir's identity; `broker_id` is the node.id of a version 1 file."""

    broker_id: int
    cluster_id: str | None = None
    version: int = 0
    directory_id: str | None = None


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The properties of `log_dir`, or None if it has no meta.properties."""
    path = log_dir / META_PROPERTIES_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        props[key.strip()] = value.strip()
    try:
        version = int(props.get("version", "0"))
        if version not in (0, 1):
            raise KafkaStorageError(f"{path} has version {version}; versions 0 and 1 are known")
        broker_id = int(props["broker.id" if version == 0 else "node.id"])
    except (KeyError, ValueError) as exc:
        raise KafkaStorageError(f"malformed {path}: missing or bad {exc}") from exc
    if version == 1 and not props.get("cluster.id"):
        raise KafkaStorageError(f"malformed {path}: version 1 needs a cluster.id")
    return MetaProperties(
        broker_id, props.get("cluster.id") or None, version, props.get("directory.id") or None
    )


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    lines = ["#", "#logbus broker metadata", f"version={meta.version}"]
    if meta.version == 0:
        lines.append(f"broker.id={meta.broker_id}")
        if meta.cluster_id is not None:
            lines.append(f"cluster.id={meta.cluster_id}")
    else:
        lines += [
            f"cluster.id={meta.cluster_id}",
            f"directory.id={meta.directory_id}",
            f"node.id={meta.broker_id}",
        ]
    write_atomically(log_dir / META_PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())


def ensure_meta_properties(log_dir: Path, broker_id: int, cluster_id: str | None) -> MetaProperties:
    """Check `log_dir`'s meta.properties against the configured ids, writing it (or the
    missing cluster id) when needed. Raises InconsistentBrokerMetadataError on a mismatch."""
    existing = read_meta_properties(log_dir)
    if existing is None:
        meta = MetaProperties(broker_id, cluster_id)
        write_meta_properties(log_dir, meta)
        return meta
    if existing.broker_id != broker_id:
        raise InconsistentBrokerMetadataError(
            f"{log_dir} belongs to broker {existing.broker_id}, not broker {broker_id}"
        )
    if cluster_id is not None and existing.cluster_id not in (None, cluster_id):
        raise InconsistentBrokerMetadataError(
            f"{log_dir} belongs to cluster {existing.cluster_id}, not cluster {cluster_id}"
        )
    if cluster_id is not None and existing.cluster_id is None:
        existing = MetaProperties(broker_id, cluster_id)
        write_meta_properties(log_dir, existing)
    return existing
