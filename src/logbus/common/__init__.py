"""What the client and the broker share, as Kafka keeps it in `clients/common`: the
config definition framework and its one `ConfigError` (`config_def.py`), Java
properties files (`properties.py`), the security code both sides run (`security/`:
SCRAM, JAAS parsing, TLS contexts) and the socket transport both read frames with
(`network/frame_stream.py`).

It imports neither `logbus.server` nor `logbus.client`, only the I/O-free bottom
(`protocol/`, `records/`, `types.py`; `tests/unit/test_layering.py`). The entry point
is `config_def.ConfigDef`.
"""
