"""KRaft's quorum (KIP-595): a Raft-replicated log, `__cluster_metadata`, kept by the
voters named in `controller.quorum.voters`, over Kafka's own wire protocol.

The entry point is `raft_client.RaftClient` (Kafka's `KafkaRaftClient`); `quorum_config`
holds the quorum's settings and `quorum_state` the `quorum-state` file.
"""
