"""Share groups on the broker (KIP-932): the share partitions this broker leads, the share
sessions of the members fetching from it, and group configs. The entry point is
`share_partition_manager.SharePartitionManager`; the handlers are `server/api/share_groups.py`
and `server/api/share_fetch.py`.
"""
