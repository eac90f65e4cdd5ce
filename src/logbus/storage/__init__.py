"""Partition logs on disk in Kafka's layout: segments, indexes, checkpoints, producer state.

The entry point is `logbus.storage.log_manager.LogManager`, which owns every `Log` of a broker
and the `LogCleaner` (`log_cleaner.py`) that compacts logs with cleanup.policy=compact.
"""
