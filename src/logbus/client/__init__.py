"""The asyncio client: connections, cluster routing, partitioning, and the requests the
`logbus` command makes.

The entry point is `logbus.client.cluster.Cluster` (a cluster reached through bootstrap
servers); `logbus.client.connection.Connection` is one pipelined connection to a broker.
"""
