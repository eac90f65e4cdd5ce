"""Incremental reconciliation of a KIP-848 member towards its target assignment (Kafka's
`CurrentAssignmentBuilder`): one pure function from the member, its target and what the
group's other members still own to the member's next state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from uuid import UUID

from logbus.coordinator.group.consumer_group import (
    Assignment,
    ConsumerMember,
    MemberState,
    as_assignment,
    pairs_of,
)

OwnedElsewhere = Callable[[tuple[UUID, int]], bool]
"""Whether another member of the group still owns the partition."""


def next_member(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned_elsewhere: OwnedElsewhere,
    owned_by_client: Assignment | None,
) -> ConsumerMember:
    """The member after one reconciliation step. `owned_by_client` is what its heartbeat
    says it owns (None when the heartbeat did not say)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned_by_client is None or pairs_of(owned_by_client) & pairs_of(
            member.pending_revocation
        ):
            return member  # still revoking: wait (its rebalance timeout runs)
        member = replace(member, pending_revocation={}, state=MemberState.STABLE)
        return compute_next(member, target_epoch, target, owned_elsewhere)
    if member.state is MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return compute_next(member, target_epoch, target, owned_elsewhere)
    return member


def compute_next(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned_elsewhere: OwnedElsewhere,
) -> ConsumerMember:
    """The step from what the member has now: revoke first, else take the new epoch and
    the free partitions of the target."""
    current = pairs_of(member.assigned)
    wanted = pairs_of(target)
    keep = current & wanted
    revoke = current - wanted
    if revoke:
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=as_assignment(keep),
            pending_revocation=as_assignment(revoke),
        )
    new = wanted - current
    free = {tp for tp in new if not owned_elsewhere(tp)}
    state = MemberState.STABLE if free == new else MemberState.UNRELEASED_PARTITIONS
    return replace(
        member,
        state=state,
        previous_member_epoch=(
            member.member_epoch
            if member.member_epoch != target_epoch
            else member.previous_member_epoch
        ),
        member_epoch=target_epoch,
        assigned=as_assignment(keep | free),
        pending_revocation={},
    )
