"""Confluent Schema Registry's errors: an HTTP status, a numeric `error_code` (the status
with a digit or two more, as Confluent's clients expect) and a message, sent as the JSON
body `{"error_code": ..., "message": ...}`."""

from __future__ import annotations


class HttpError(Exception):
    """A refused request as Confluent's services answer it: an HTTP status, a numeric
    `error_code` and a message (the REST proxy's errors are HttpErrors too)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


class RegistryError(HttpError):
    """A request the registry refuses, with the status and code Confluent's registry gives."""


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted. "
        "Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being "
        "permanently deleted",
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible_schema(subject: str, messages: list[str]) -> RegistryError:
    return RegistryError(
        409,
        409,
        "Schema being registered is incompatible with an earlier schema for subject "
        f'"{subject}", details: {messages}',
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(text: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(text: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {text}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode(text: object) -> RegistryError:
    return RegistryError(
        422, 42204, f"Invalid mode {text}. Valid values are READWRITE, READONLY, IMPORT"
    )


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(
        422,
        42206,
        f"One or more references exist to the schema {{subject={subject},version={version}}}.",
    )


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not valid.")


def bad_request(message: str) -> RegistryError:
    """A body that is not the JSON the route reads (Confluent answers these with the
    status as the code)."""
    return RegistryError(400, 400, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store - {message}")


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out - {message}")


class StoreFencedError(RegistryError):
    """This registry's producer was fenced: another registry claimed the store's writes
    (it was elected primary while this one was paused or cut off). Nothing was written;
    a registry in a group forwards the request to the primary instead."""


def store_fenced() -> StoreFencedError:
    return StoreFencedError(
        500, 50001, "Error in the backend data store - another registry writes the store "
        "topic now: this one was fenced"
    )
