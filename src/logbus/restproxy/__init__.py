"""logbus's REST proxy: Confluent REST Proxy's v2 API (produce in the binary, JSON, Avro
and JSON Schema embedded formats; consumer instances; topics, partitions and brokers) and
its v3 API (`v3/`: clusters, topics, configs, consumer groups and lag, streamed produce,
ACLs) for services that speak HTTP, not Kafka (`logbus rest-proxy start`). A client of the
cluster like the console: it never imports the broker's side.

The entry point is `create_app` (the Starlette application); `ConsumerManager` owns the
consumer instances.
"""

from logbus.restproxy.app import create_app

__all__ = ["create_app"]
