"""Replicas on this broker. The entry point is `ReplicaManager`, which owns every
`Partition` this broker hosts, appends as leader and serves fetches."""
