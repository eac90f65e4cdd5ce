"""Coordinators: the group coordinator (`group/`) and, later, the transaction coordinator
(`transaction/`).

Each coordinator is a pure state machine plus a runtime that writes its records to an
internal topic (`__consumer_offsets`, `__transaction_state`) and reloads its state by
replaying that topic when this broker becomes leader of one of its partitions.

The entry point is `logbus.coordinator.group.apply` (see `docs/design/group-coordinator.md`).
"""
