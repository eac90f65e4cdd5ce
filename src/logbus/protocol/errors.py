"""Errors raised by the protocol layer, named for whose fault they are."""


class ProtocolError(ValueError):
    """A peer sent bytes that are not a valid Kafka message (the remote side's fault)."""


class UnsupportedVersion(ProtocolError):
    """A request names an API key or version this side does not implement."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported API key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
