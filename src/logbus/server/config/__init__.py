"""The broker's configuration, Kafka's `KafkaConfig` and `LogConfig` with their dynamic
side. The entry point is `broker_config.BrokerConfig`, the typed settings of one broker
(`load_config`: a properties file and `--override`s).

- `broker_config_def.py`: every broker setting's definition (type, default, validator,
  dynamic update mode), over `logbus.common.config_def`;
- `topic_config.py`: the topic-level settings and their broker defaults (Kafka's
  `LogConfig`);
- `listeners.py`: the `listeners`, `advertised.listeners` and
  `listener.security.protocol.map` syntax;
- `config_admin.py`: checking and computing a resource's new dynamic configs
  ((Incremental)AlterConfigs);
- `dynamic_config.py`: the `DynamicConfigManager`, which applies dynamic configs to a
  running broker.

Properties files are read by `logbus.common.properties` (the client's files too).
"""
