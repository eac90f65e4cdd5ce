"""A voter's election state (KIP-595) and the `quorum-state` file that keeps it across
restarts.

Theory of operation. A voter is in one role at a time, within one epoch:

- UNATTACHED: it knows the epoch but neither a leader nor a vote of its own;
- VOTED: it granted its vote to a candidate in this epoch (at most one per epoch);
- CANDIDATE: it voted for itself in this epoch and asks the others for their votes;
- LEADER: a majority granted it the epoch; it alone appends to the log;
- FOLLOWER: it knows the epoch's leader and fetches from it;
- RESIGNED: it led this epoch and gave up (shutdown, or no majority heard from it).

Epochs only grow. A larger epoch seen anywhere moves a voter to UNATTACHED (or FOLLOWER
when the leader is named) in that epoch; a smaller one is answered with
FENCED_LEADER_EPOCH. What must survive a crash (epoch, leader, vote) is written with
fsync before any answer depends on it, so a voter never votes twice in one epoch.
`ElectionState` is a value; `TRANSITIONS` says which role may follow which. Pure code
except `QuorumStateFile`, which reads and writes the file.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from logbus.storage.checkpoint import write_atomically

__all__ = [
    "QUORUM_STATE_FILE",
    "TRANSITIONS",
    "ElectionState",
    "IllegalTransitionError",
    "QuorumStateFile",
    "Role",
]

QUORUM_STATE_FILE: Final = "quorum-state"
NO_ID: Final = -1


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


# The roles each role may be entered from within the same epoch; moving to a larger
# epoch is always allowed (to UNATTACHED, FOLLOWER or CANDIDATE).
TRANSITIONS: Final[dict[Role, frozenset[Role]]] = {
    Role.UNATTACHED: frozenset({Role.RESIGNED}),
    Role.VOTED: frozenset({Role.UNATTACHED}),
    Role.CANDIDATE: frozenset(),
    Role.LEADER: frozenset({Role.CANDIDATE}),
    Role.FOLLOWER: frozenset({Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.RESIGNED}),
    Role.RESIGNED: frozenset({Role.LEADER}),
}


class IllegalTransitionError(RuntimeError):
    """A transition the protocol forbids was attempted (a bug, never a peer's fault)."""


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Where one voter stands: the epoch, its role, the leader it knows and the
    candidate it voted for (-1 for none)."""

    epoch: int = 0
    role: Role = Role.UNATTACHED
    leader_id: int = NO_ID
    voted_id: int = NO_ID

    def to(
        self, role: Role, epoch: int, *, leader_id: int = NO_ID, voted_id: int = NO_ID
    ) -> ElectionState:
        """The state after a transition, checked against `TRANSITIONS`."""
        if epoch < self.epoch:
            raise IllegalTransitionError(f"epoch {epoch} is below the current {self.epoch}")
        if epoch == self.epoch and self.role not in TRANSITIONS[role]:
            raise IllegalTransitionError(f"{self.role.value} -> {role.value} in epoch {epoch}")
        if epoch == self.epoch and role is Role.FOLLOWER and self.role is not Role.CANDIDATE:
            voted_id = self.voted_id  # the vote given in this epoch stays given
        if epoch == self.epoch and role is Role.UNATTACHED:
            voted_id = self.voted_id
        return replace(self, epoch=epoch, role=role, leader_id=leader_id, voted_id=voted_id)

    @property
    def has_leader(self) -> bool:
        return self.leader_id != NO_ID


class QuorumStateFile:
    """The `quorum-state` file of a metadata log directory, in Kafka's JSON format
    (QuorumStateData v0). Owned by one RaftClient; not safe to share between threads."""

    def __init__(self, directory: Path, cluster_id: str, voters: Iterable[int]) -> None:
        self.path = directory / QUORUM_STATE_FILE
        self.cluster_id = cluster_id
        self.voters = sorted(voters)

    def read(self) -> ElectionState:
        """The state last written; a fresh UNATTACHED state at epoch 0 if none. A leader
        that restarts comes back RESIGNED in its epoch: it must not lead it again."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return ElectionState()
        epoch = int(data.get("leaderEpoch", 0))
        leader_id = int(data.get("leaderId", NO_ID))
        voted_id = int(data.get("votedId", NO_ID))
        if leader_id != NO_ID:
            return ElectionState(epoch, Role.FOLLOWER, leader_id, voted_id)
        if voted_id != NO_ID:
            return ElectionState(epoch, Role.VOTED, NO_ID, voted_id)
        return ElectionState(epoch, Role.UNATTACHED)

    def write(self, state: ElectionState) -> None:
        data = {
            "clusterId": self.cluster_id,
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": voter} for voter in self.voters],
            "data_version": 0,
        }
        write_atomically(self.path, json.dumps(data, separators=(",", ":")).encode())
