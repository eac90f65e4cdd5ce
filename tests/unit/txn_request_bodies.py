"""Request bodies of the client's transaction builders, one per API, at any version: the
transaction request tests check them against Kafka's schema, the request tests take them
in for the APIs the broker serves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logbus.client.requests import transactions as txn
from logbus.client.requests import transactions_marker
from logbus.client.requests.group_membership import MemberIdentity
from logbus.client.requests.producer_id import ProducerIdAndEpoch
from logbus.protocol import ApiKey
from logbus.types import TopicPartition

PRODUCER = ProducerIdAndEpoch(4000, 7)
A0, A1, B2 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2)
MEMBER = MemberIdentity("member-1", 5, "instance-1")

# api key -> a request body at a version
TXN_BUILDERS: dict[int, Callable[[int], dict[str, Any]]] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda v: txn.build_add_partitions_to_txn(
        v, "t1", PRODUCER, [A0, A1, B2]
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: lambda v: txn.build_add_offsets_to_txn(v, "t1", PRODUCER, "g"),
    ApiKey.TXN_OFFSET_COMMIT: lambda v: txn.build_txn_offset_commit(
        v, "t1", "g", PRODUCER, {A0: txn.TxnOffset(10, "m", 3), B2: txn.TxnOffset(20)}, MEMBER
    ),
    ApiKey.END_TXN: lambda v: txn.build_end_txn(v, "t1", PRODUCER, True),
    ApiKey.DESCRIBE_TRANSACTIONS: lambda v: txn.build_describe_transactions(v, ["t1", "t2"]),
    ApiKey.LIST_TRANSACTIONS: lambda v: txn.build_list_transactions(
        v, ["Ongoing"], [4000], 1000 if v >= 1 else -1
    ),
    ApiKey.DESCRIBE_PRODUCERS: lambda v: txn.build_describe_producers(v, [A0, A1, B2]),
    ApiKey.WRITE_TXN_MARKERS: lambda v: transactions_marker.build_write_txn_markers(
        v, [transactions_marker.MarkerEntry(4000, 7, 3, False, (A0, B2))]
    ),
}
