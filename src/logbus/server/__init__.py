"""The broker: network, API handlers, replica manager, purgatory.

The entry point is `logbus.server.broker.Broker`.
"""
