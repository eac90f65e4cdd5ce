"""The admin client's leader elections (Kafka's `Admin.electLeaders`, what
kafka-leader-election.sh asks for): ElectLeaders sent to the controller, again to the
new controller when the one asked answers NOT_CONTROLLER.

`Admin` (`client.py`) exposes this as `elect_leaders`."""

from __future__ import annotations

from collections.abc import Sequence

from logbus.client.admin.calls import AdminCalls
from logbus.client.errors import KafkaError
from logbus.client.requests.leader_elections import ElectionType, elect_leaders
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode


def election_type_of(value: ElectionType | str | int) -> ElectionType:
    """PREFERRED / UNCLEAN by name (any case) or number."""
    if isinstance(value, str):
        try:
            return ElectionType[value.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown election type {value!r}: PREFERRED or UNCLEAN") from None
    return ElectionType(value)


async def elect_leaders_of(
    calls: AdminCalls,
    election_type: ElectionType | str | int,
    partitions: Sequence[TopicPartition] | None,
    timeout_ms: int | None,
) -> dict[TopicPartition, KafkaError | None]:
    kind = election_type_of(election_type)
    wanted = None if partitions is None else list(dict.fromkeys(partitions))
    request_timeout = calls.request_timeout_ms if timeout_ms is None else timeout_ms

    async def call() -> dict[TopicPartition, KafkaError | None]:
        conn = await calls.cluster.controller()
        error, results = await elect_leaders(conn, kind, wanted, request_timeout)
        moved = error == ErrorCode.NOT_CONTROLLER or any(
            e is not None and e.code == ErrorCode.NOT_CONTROLLER for e in results.values()
        )
        if moved:
            await calls.cluster.refresh([])
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
        if error != ErrorCode.NONE:
            raise KafkaError(error)
        return results

    return await calls.single(call, timeout_ms)
