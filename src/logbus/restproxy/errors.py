"""Confluent REST Proxy's errors: an HTTP status and a numeric `error_code`, sent as the
JSON body `{"error_code": ..., "message": ...}`."""

from __future__ import annotations

from logbus.registry.errors import HttpError


class ProxyError(HttpError):
    """A request the proxy refuses, with the status and code Confluent's proxy gives."""


def topic_not_found(topic: str) -> ProxyError:
    return ProxyError(404, 40401, f"Topic {topic} not found.")


def partition_not_found(topic: str, partition: object) -> ProxyError:
    return ProxyError(404, 40402, f"Partition {partition} of topic {topic} not found.")


def consumer_instance_not_found() -> ProxyError:
    return ProxyError(404, 40403, "Consumer instance not found.")


def format_mismatch() -> ProxyError:
    return ProxyError(
        406,
        40601,
        "The requested embedded data format does not match the deserializer for this "
        "consumer instance",
    )


def consumer_already_exists() -> ProxyError:
    return ProxyError(
        409,
        40902,
        "Consumer with specified consumer ID already exists in the specified consumer group.",
    )


def illegal_state(message: str) -> ProxyError:
    return ProxyError(409, 40903, f"Illegal state: {message}")


def key_schema_missing() -> ProxyError:
    return ProxyError(422, 42201, "Request includes keys but does not include key schema")


def value_schema_missing() -> ProxyError:
    return ProxyError(422, 42202, "Request includes values but does not include value schema")


def conversion_failed(detail: str) -> ProxyError:
    return ProxyError(422, 42203, f"Conversion of JSON to Object failed: {detail}")


def invalid_consumer_config(detail: str) -> ProxyError:
    return ProxyError(422, 42204, f"Invalid consumer configuration: {detail}")


def invalid_schema(detail: str) -> ProxyError:
    return ProxyError(422, 42205, f"Invalid schema: {detail}")


def unprocessable(detail: str) -> ProxyError:
    return ProxyError(422, 422, detail)


def bad_request(detail: str) -> ProxyError:
    return ProxyError(400, 400, detail)


def kafka_error(detail: str) -> ProxyError:
    return ProxyError(500, 50002, f"Kafka error: {detail}")
