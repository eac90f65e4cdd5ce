"""The share groups a broker coordinates (KIP-932's half of Kafka's GroupCoordinatorService).
The entry point is `ShareGroupCoordinator.heartbeat`.

A share group is coordinated by the broker leading its `__consumer_offsets` partition, as
any group is. Membership lives in memory: after a coordinator move, members get
UNKNOWN_MEMBER_ID and rejoin with epoch 0 (what Kafka's clients do), and the delivery state
of the records, which is what must survive, is kept by the partition leaders and the share
coordinator, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from logbus.coordinator.share.share_group import ShareGroup, ShareMember

MemberLeft = Callable[[str, str], None]
"""Told (group id, member id) when a member's session expired (a member that leaves closes
its share sessions itself, with its last acknowledgements)."""


@dataclass(slots=True)
class ShareGroupSettings:
    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    max_size: int = 200


@dataclass(slots=True)
class ShareGroupCoordinator:
    """Owns the share groups coordinated here; one event loop uses it."""

    settings: ShareGroupSettings
    groups: dict[str, ShareGroup] = field(default_factory=dict)
    listeners: list[MemberLeft] = field(default_factory=list)

    def group(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def heartbeat(
        self,
        group_id: str,
        *,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topics: list[str] | None,
        client_id: str,
        client_host: str,
        now_ms: int,
        partitions: Callable[[str], int],
    ) -> ShareMember | None:
        group = self.group(group_id)
        self.expire(group, now_ms, partitions)
        group.refresh(partitions)
        member = group.heartbeat(
            member_id=member_id,
            member_epoch=member_epoch,
            rack_id=rack_id,
            subscribed_topics=subscribed_topics,
            client_id=client_id,
            client_host=client_host,
            now_ms=now_ms,
            max_size=self.settings.max_size,
            partitions=partitions,
        )
        return member

    def expire(self, group: ShareGroup, now_ms: int, partitions: Callable[[str], int]) -> None:
        for member_id in group.expire(now_ms, self.settings.session_timeout_ms, partitions):
            self._left(group.group_id, member_id)

    def expire_all(self, now_ms: int, partitions: Callable[[str], int]) -> None:
        for group in list(self.groups.values()):
            self.expire(group, now_ms, partitions)

    def delete(self, group_id: str) -> bool:
        """Forget an empty group; False if it has members."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return False
        self.groups.pop(group_id, None)
        return True

    def _left(self, group_id: str, member_id: str) -> None:
        for listener in self.listeners:
            listener(group_id, member_id)
