"""What the client and the broker share, as Kafka keeps it in `clients/common`: the
config definition framework and its one `ConfigError` (`config_def.py`), and the
security code both sides run (`security/`: SCRAM, JAAS parsing, TLS contexts).

It imports neither `logbus.server` nor `logbus.client` (`tests/unit/test_layering.py`).
The entry point is `config_def.ConfigDef`.
"""
