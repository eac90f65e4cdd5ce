"""logbus's schema registry: Confluent Schema Registry's REST API over a compacted
`_schemas` topic on the cluster (`logbus schema-registry start`). A client of the
cluster like the console: it never imports the broker's side.

The entry point is `create_app` (the Starlette application); `SchemaRegistry` holds the
operations, `KafkaStore` the topic, `RegistryState` what the topic says.
"""

from logbus.registry.app import create_app

__all__ = ["create_app"]
