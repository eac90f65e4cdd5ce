"""Share groups (KIP-932): queue semantics on a topic.

`share_group.ShareGroup` is a group's membership and its simple assignor, kept by the
group's coordinator (`coordinator.ShareGroupCoordinator`); `share_partition.SharePartition`
is the delivery state of one partition for one group, kept by the partition's leader.
Both are pure state machines; the broker's `server/share/` runs them.
"""
