"""KRaft nodes (KIP-500, KIP-631): the server side of a cluster whose metadata lives in the
`raft/` quorum's `__cluster_metadata` log instead of ZooKeeper. A controller node
(`controller_node.ControllerNode`) runs the quorum and the `quorum_controller`; a broker
(`kraft_broker.KRaftBroker`, the entry point for `process.roles=broker` and
`broker,controller`) follows the log through a `metadata_loader`, acts on each image
(`metadata_publisher`), registers and heartbeats (`broker_lifecycle`) and forwards admin
requests to the active controller (`controller_forwarding`, checked first by
`forwarding_authorization`)."""
