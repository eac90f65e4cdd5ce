"""`meta.properties` of a log dir, in the ZooKeeper-era format (version 0).

A Java properties file: "version=0", "broker.id=<id>" and, once known, "cluster.id=<id>".
Comment lines start with '#' or '!'.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from logbus.storage.checkpoint import write_atomically
from logbus.storage.errors import InconsistentBrokerMetadataError, KafkaStorageError

META_PROPERTIES_FILE = "meta.properties"


@dataclass(frozen=True, slots=True)
class MetaProperties:
    broker_id: int
    cluster_id: str | None = None
    version: int = 0


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
        broker_id = int(props["broker.id"])
    except (KeyError, ValueError) as exc:
        raise KafkaStorageError(f"malformed {path}: {exc}") from exc
    if version != 0:
        raise KafkaStorageError(f"{path} has version {version}; only version 0 is supported")
    return MetaProperties(broker_id, props.get("cluster.id") or None, version)


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    lines = [
        "#",
        "#logbus broker metadata",
        f"version={meta.version}",
        f"broker.id={meta.broker_id}",
    ]
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
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
