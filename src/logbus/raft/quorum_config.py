"""The static quorum of controllers (`controller.quorum.voters`, KIP-595) and the Raft
timing settings, as values. Pure code: no I/O.

The entry points are `parse_voters` (Kafka's `QuorumConfig.parseVoterConnections`) and
`QuorumConfig`, what one voter needs to take part in the quorum.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from logbus.common.config_def import ConfigError

__all__ = ["QUORUM_VOTERS", "QuorumConfig", "VoterAddress", "parse_voters"]

QUORUM_VOTERS = "controller.quorum.voters"
_ENTRY = re.compile(r"^(?P<id>[^@]*)@(?P<host>\[[^\]]*\]|[^:]*):(?P<port>[^:]*)$")


@dataclass(frozen=True, slots=True)
class VoterAddress:
    """Where one voter's controller listener is."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}"


def parse_voters(entries: Iterable[str]) -> dict[int, VoterAddress]:
    """`id@host:port` entries to voters by id; a malformed entry or a voter named twice
    raises ConfigError naming `controller.quorum.voters`."""
    voters: dict[int, VoterAddress] = {}
    raw = ",".join(entries)
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if match is None:
            raise ConfigError(
                QUORUM_VOTERS, f"Unable to parse voter entry `{entry}`: expected id@host:port", raw
            )
        try:
            node_id = int(match["id"])
        except ValueError:
            raise ConfigError(
                QUORUM_VOTERS, f"Failed to parse voter ID as an integer from {match['id']}", raw
            ) from None
        host = match["host"].strip("[]")
        if not host:
            raise ConfigError(QUORUM_VOTERS, f"Failed to parse host name from entry {entry}", raw)
        try:
            port = int(match["port"])
        except ValueError:
            port = -1
        if not 0 < port < 65536:
            raise ConfigError(QUORUM_VOTERS, f"Failed to parse host port from entry {entry}", raw)
        if node_id < 0:
            raise ConfigError(QUORUM_VOTERS, f"Voter ID must not be negative: {entry}", raw)
        if node_id in voters:
            raise ConfigError(QUORUM_VOTERS, f"Voter ID {node_id} is listed twice", raw)
        voters[node_id] = VoterAddress(node_id, host, port)
    return voters


@dataclass(frozen=True)
class QuorumConfig:
    """What one voter needs: who it is, who the voters are, where its metadata log lives,
    and the Raft timers (milliseconds). Immutable; safe to share."""

    node_id: int
    voters: Mapping[int, VoterAddress]
    metadata_log_dir: Path
    cluster_id: str
    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    max_bytes_between_snapshots: int = 20 * 1024 * 1024
    directory_id: str = field(default="")

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters
