"""The brokers of a KRaft cluster as the active controller manages them (Kafka's
`ClusterControlManager` and the decisions of its `BrokerHeartbeatManager`), KIP-631:

- BrokerRegistration: a RegisterBrokerRecord, fenced, whose epoch is the offset the record
  gets in the metadata log; a second broker with the same id and another incarnation is
  refused (DUPLICATE_BROKER_REGISTRATION) while the first one's session lives.
- BrokerHeartbeat: a fenced broker that has replayed the log up to its registration
  (current metadata offset >= its epoch) is unfenced; WantShutDown puts it in controlled
  shutdown (out of every ISR and leadership), and once it leads nothing it is fenced and
  told to shut down; WantFence fences it.
- A broker whose heartbeats stop for `broker.session.timeout.ms` is fenced (`fence`).
- UnregisterBroker (an operator removing a broker for good): out of every ISR and
  leadership, then an UnregisterBrokerRecord; an unknown id is BROKER_ID_NOT_REGISTERED.

Pure functions of the image and the request; the runtime keeps the session clocks.
"""

from __future__ import annotations

from typing import Any, Final

from logbus.controller.control_result import ControllerResult, record, then
from logbus.controller.partition_change import led_by, remove_broker_changes, unfence_changes
from logbus.metadata.image import METADATA_VERSION, MetadataImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = [
    "BOOTSTRAP_METADATA_VERSION",
    "bootstrap_records",
    "fence",
    "heartbeat",
    "register_broker",
    "unregister_broker",
]

# The metadata.version a new cluster starts at: Kafka 3.9's (3.9-IV0), whose record
# versions (broker log directories, partition directories) are those logbus writes.
BOOTSTRAP_METADATA_VERSION: Final = 21
FENCED: Final = 1
UNFENCED: Final = -1


def bootstrap_records(image: MetadataImage) -> list[MetadataRecord]:
    """What the first active controller of a new cluster writes (the features)."""
    if METADATA_VERSION in image.features:
        return []
    return [
        record(
            "FeatureLevelRecord", name=METADATA_VERSION, feature_level=BOOTSTRAP_METADATA_VERSION
        )
    ]


def register_broker(
    image: MetadataImage,
    body: dict[str, Any],
    *,
    cluster_id: str,
    next_offset: int,
    session_alive: bool,
) -> ControllerResult:
    """A BrokerRegistration; `next_offset` is where the record will land (its epoch),
    `session_alive` whether the registered broker of that id still heartbeats."""
    broker_id = body["broker_id"]
    if body["cluster_id"] != cluster_id:
        return _registration_error(ErrorCode.INCONSISTENT_CLUSTER_ID)
    existing = image.brokers.get(broker_id)
    if (
        existing is not None
        and existing.incarnation_id != body["incarnation_id"]
        and session_alive
        and not existing.fenced
    ):
        return _registration_error(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
    records: list[MetadataRecord] = []
    if existing is not None and not existing.fenced:
        records += remove_broker_changes(image, broker_id)  # its restart ends its leaderships
    records.append(
        record(
            "RegisterBrokerRecord",
            broker_id=broker_id,
            incarnation_id=body["incarnation_id"],
            broker_epoch=next_offset + len(records),
            end_points=[dict(listener) for listener in body["listeners"]],
            features=[dict(f) for f in body["features"]],
            rack=body["rack"],
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=list(body.get("log_dirs") or ()),
        )
    )
    epoch = next_offset + len(records) - 1
    return ControllerResult(
        records, {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": epoch}
    )


def _registration_error(error: ErrorCode) -> ControllerResult:
    return ControllerResult(
        [], {"throttle_time_ms": 0, "error_code": int(error), "broker_epoch": -1}
    )


def _heartbeat_answer(
    error: ErrorCode = ErrorCode.NONE,
    *,
    caught_up: bool = False,
    fenced: bool = True,
    shut_down: bool = False,
) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "is_caught_up": caught_up,
        "is_fenced": fenced,
        "should_shut_down": shut_down,
    }


def fence(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """Fence a broker: out of every ISR and leadership, then marked fenced."""
    broker = image.brokers[broker_id]
    return [
        *remove_broker_changes(image, broker_id),
        record(
            "BrokerRegistrationChangeRecord",
            broker_id=broker_id, broker_epoch=broker.epoch, fenced=FENCED,
        ),
    ]  # fmt: skip


def heartbeat(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    """A BrokerHeartbeat: the records it leads to and the answer."""
    broker = image.brokers.get(body["broker_id"])
    if broker is None:
        return ControllerResult([], _heartbeat_answer(ErrorCode.BROKER_ID_NOT_REGISTERED))
    if broker.epoch != body["broker_epoch"]:
        return ControllerResult([], _heartbeat_answer(ErrorCode.STALE_BROKER_EPOCH))
    caught_up = body["current_metadata_offset"] >= broker.epoch
    if body["want_shut_down"]:
        return _controlled_shutdown(image, broker.broker_id, caught_up)
    records: list[MetadataRecord] = []
    if body["want_fence"] and not broker.fenced:
        records = fence(image, broker.broker_id)
    elif not body["want_fence"] and broker.fenced and caught_up:
        unfenced = record(
            "BrokerRegistrationChangeRecord",
            broker_id=broker.broker_id, broker_epoch=broker.epoch, fenced=UNFENCED,
        )  # fmt: skip
        records = [unfenced, *unfence_changes(image, broker.broker_id)]
    fenced = then(image, records).brokers[broker.broker_id].fenced
    return ControllerResult(records, _heartbeat_answer(caught_up=caught_up, fenced=fenced))


def _controlled_shutdown(image: MetadataImage, broker_id: int, caught_up: bool) -> ControllerResult:
    """WantShutDown: a fenced broker may go at once; an unfenced one first hands over its
    leaderships (and leaves the ISRs), then is fenced and told to go."""
    broker = image.brokers[broker_id]
    if broker.fenced:
        return ControllerResult([], _heartbeat_answer(caught_up=caught_up, shut_down=True))
    records: list[MetadataRecord] = []
    if not broker.in_controlled_shutdown:
        records.append(
            record(
                "BrokerRegistrationChangeRecord",
                broker_id=broker_id,
                broker_epoch=broker.epoch,
                in_controlled_shutdown=1,
            )
        )
        records += remove_broker_changes(image, broker_id)
    after = then(image, records)
    if led_by(after, broker_id) == 0:
        records += fence(after, broker_id)
        return ControllerResult(records, _heartbeat_answer(caught_up=caught_up, shut_down=True))
    return ControllerResult(records, _heartbeat_answer(caught_up=caught_up, fenced=False))


def unregister_broker(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    broker = image.brokers.get(body["broker_id"])
    if broker is None:
        error = ErrorCode.BROKER_ID_NOT_REGISTERED
        message = f"Broker ID {body['broker_id']} is not currently registered"
        answer = {"throttle_time_ms": 0, "error_code": int(error), "error_message": message}
        return ControllerResult([], answer)
    records = [
        *remove_broker_changes(image, broker.broker_id),
        record("UnregisterBrokerRecord", broker_id=broker.broker_id, broker_epoch=broker.epoch),
    ]
    return ControllerResult(
        records, {"throttle_time_ms": 0, "error_code": 0, "error_message": None}
    )
