"""The classic consumer-group coordinator (JoinGroup / SyncGroup / Heartbeat / LeaveGroup,
offset commit and fetch), as a pure state machine over one `__consumer_offsets` partition.

The entry point is `apply(state, event, config) -> Result`; `replay` rebuilds the state
from the partition's records and `load_complete` arms the timers after a load. The
states and their allowed transitions are data in `state.py`; the `__consumer_offsets`
record formats are in `records.py`. Nothing here does I/O: see
`docs/design/group-coordinator.md` for what the runtime around it must do.
"""

from logbus.coordinator.group.shard import apply, load_complete, replay
from logbus.coordinator.group.state import (
    Cancel,
    Group,
    GroupConfig,
    GroupsState,
    GroupState,
    Member,
    Result,
    Schedule,
)

__all__ = [
    "Cancel",
    "Group",
    "GroupConfig",
    "GroupState",
    "GroupsState",
    "Member",
    "Result",
    "Schedule",
    "apply",
    "load_complete",
    "replay",
]
