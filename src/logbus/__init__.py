"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`.
"""

__version__ = "0.1.0"
