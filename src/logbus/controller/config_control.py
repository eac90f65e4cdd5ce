"""Dynamic configs and producer id blocks as the active KRaft controller changes them
(Kafka's `ConfigurationControlManager` and `ProducerIdControlManager`):

- IncrementalAlterConfigs (KIP-339) on topics (2) and brokers (4; "" is the cluster
  default): the operations (SET, DELETE, APPEND, SUBTRACT) are applied to the stored
  values and the result checked by the `ConfigChanger` the runtime gives (the broker's
  config definitions and checks, the same as in ZooKeeper mode), then the differences are
  written as ConfigRecords (a null value deletes a key). A resource named twice in one
  request fails both times; `validate_only` writes nothing.
- AllocateProducerIds: the next block of 1000 producer ids for a registered broker, as a
  ProducerIdsRecord holding where the following block starts.

Pure functions of the image and the request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from logbus.controller.assignment import ControllerError
from logbus.controller.control_result import ControllerResult, record
from logbus.metadata.image import ConfigResource, MetadataImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "ConfigChanger",
    "allocate_producer_ids",
    "incremental_alter_configs",
]

TOPIC: Final = 2
BROKER: Final = 4
PRODUCER_ID_BLOCK_SIZE: Final = 1000

# A resource's configs after a request's operations on them: (resource, its current
# configs, the request's `configs` entries) -> the new configs; ControllerError
# (INVALID_CONFIG, INVALID_REQUEST) naming the setting when they are refused.
ConfigChanger = Callable[[ConfigResource, Mapping[str, str], list[dict[str, Any]]], dict[str, str]]


def _check_resource(image: MetadataImage, resource: ConfigResource) -> None:
    if resource.type == TOPIC:
        if image.topic(resource.name) is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.name} does not exist"
            )
    elif resource.type == BROKER:
        if resource.name and not resource.name.isdigit():
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, f"Invalid broker name {resource.name!r}"
            )
    else:
        raise ControllerError(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.type}"
        )


def _changed_resource(
    image: MetadataImage, item: dict[str, Any], change: ConfigChanger
) -> list[MetadataRecord]:
    resource = ConfigResource(item["resource_type"], item["resource_name"])
    _check_resource(image, resource)
    before = dict(image.configs.get(resource, {}))
    after = change(resource, before, list(item["configs"]))
    return [
        record(
            "ConfigRecord",
            resource_type=resource.type,
            resource_name=resource.name,
            name=name,
            value=after.get(name),
        )
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def incremental_alter_configs(
    image: MetadataImage, body: dict[str, Any], change: ConfigChanger
) -> ControllerResult:
    counts = Counter((r["resource_type"], r["resource_name"]) for r in body["resources"])
    records: list[MetadataRecord] = []
    answers = []
    for item in body["resources"]:
        answer = {
            "resource_type": item["resource_type"],
            "resource_name": item["resource_name"],
            "error_code": 0,
            "error_message": None,
        }
        try:
            if counts[(item["resource_type"], item["resource_name"])] > 1:
                raise ControllerError(
                    ErrorCode.INVALID_REQUEST,
                    f"Duplicate resource {item['resource_name']!r} in the request",
                )
            changed = _changed_resource(image, item, change)
        except ControllerError as exc:
            answer.update(error_code=int(exc.error), error_message=exc.message)
        else:
            if not body.get("validate_only"):
                records += changed
        answers.append(answer)
    return ControllerResult(records, {"throttle_time_ms": 0, "responses": answers})


def allocate_producer_ids(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    broker = image.brokers.get(body["broker_id"])
    if broker is None or broker.epoch != body["broker_epoch"] or broker.fenced:
        error = (
            ErrorCode.STALE_BROKER_EPOCH
            if broker is not None
            else ErrorCode.BROKER_ID_NOT_REGISTERED
        )
        return ControllerResult([], {"throttle_time_ms": 0, "error_code": int(error)})
    start = image.producer_ids.next_producer_id
    block = record(
        "ProducerIdsRecord",
        broker_id=broker.broker_id, broker_epoch=broker.epoch,
        next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
    )  # fmt: skip
    answer = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id_start": start,
        "producer_id_len": PRODUCER_ID_BLOCK_SIZE,
    }
    return ControllerResult([block], answer)
